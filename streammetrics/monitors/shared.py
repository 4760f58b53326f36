"""Monitors shared by the threads of a service (web request handlers, worker pools).

:class:`SharedMonitor` gives each thread a shard, a monitor behind its own lock: an update
takes only the calling thread's shard lock, so updates from many threads do not contend.
Readers lock one shard at a time, copy it and merge the copies (monitors are mergeable), so a
snapshot is the exact merge of every event whose update had returned when its shard was copied.

    monitor = SharedMonitor(lambda: sm.BinaryMonitor(threshold=0.5))

    def predict(request):                               # from any thread
        score = model.predict(request.features)
        monitor.update_prediction({"id": request.id, "score": score})
        ...

    def feedback(request):                              # the label, later, from any thread
        monitor.update_label(request.id, request.outcome)

    def scrape():                                       # e.g. once a minute
        return monitor.drain()                          # this period's snapshot; shards emptied

Shards are reused when threads end and capped at ``max_shards`` (:data:`DEFAULT_MAX_SHARDS`;
beyond it threads share one, counted in ``counts["shared"]``). :meth:`drain` swaps every shard's
monitor for an empty one under all the shards' locks, so each event is in exactly one drain.
:meth:`update_prediction` / :meth:`update_label` join delayed labels in a table shared by the
threads, bounded by ``max_pending`` (:data:`DEFAULT_MAX_PENDING`) and ``label_ttl`` (counted in
``counts["evicted"]`` / ``counts["expired"]``; a label without its prediction in
``counts["unmatched"]``). Details and an example server: ``docs/embedding.md``.

For processes rather than threads, give each process its own monitor and merge their
``to_dict()`` states (``sm.from_dict``).
"""
from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable, Iterable, Mapping

from streammetrics.events.records import Event

__all__ = ["DEFAULT_MAX_PENDING", "DEFAULT_MAX_SHARDS", "SharedMonitor"]

#: most shards (monitors) a SharedMonitor keeps; more threads share them
DEFAULT_MAX_SHARDS = 64
#: most predictions awaiting their label
DEFAULT_MAX_PENDING = 100_000


class _Shard:
    __slots__ = ("lock", "monitor")

    def __init__(self, monitor: Any) -> None:
        self.lock = threading.Lock()
        self.monitor = monitor


class _Owner:
    """Held in a thread's ``threading.local``: it dies with the thread, which frees the shard."""

    __slots__ = ("__weakref__", "shard")

    def __init__(self, shard: _Shard) -> None:
        self.shard = shard


def _release(ref: weakref.ReferenceType[SharedMonitor], shard: _Shard) -> None:
    owner = ref()
    if owner is not None:
        owner._free_shard(shard)


class SharedMonitor:
    """A thread-safe monitor made of per-thread shards merged on read (see the module docstring).

    ``factory()`` returns an empty monitor (or any accumulator with ``update``/``merge``/``copy``;
    delayed labels need a monitor's ``update_prediction``/``update_outcome``). ``max_shards``,
    ``max_pending`` and ``label_ttl`` (seconds of ``clock``, None: no limit) bound memory.
    """

    def __init__(self, factory: Callable[[], Any], *, max_shards: int = DEFAULT_MAX_SHARDS,
                 max_pending: int = DEFAULT_MAX_PENDING, label_ttl: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        for name, value in (("max_shards", max_shards), ("max_pending", max_pending)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if label_ttl is not None and (isinstance(label_ttl, bool) or not isinstance(label_ttl, (int, float))
                                      or not 0 <= label_ttl < float("inf")):
            raise ValueError(f"label_ttl must be a non-negative number of seconds or None, got {label_ttl!r}")
        self._factory = factory
        self._template = factory()  # an empty monitor: copied for new shards and as the merge target
        self.max_shards = max_shards
        self.max_pending = max_pending
        self.label_ttl = None if label_ttl is None else float(label_ttl)
        self._clock = clock
        self._local = threading.local()
        self._registry = threading.RLock()  # a finalizer may run in a thread that holds it
        self._shards: list[_Shard] = []
        self._free: list[_Shard] = []
        self._round_robin = itertools.count()
        self._pending_lock = threading.Lock()
        # id -> [(clock time, prediction)], oldest id first
        self._pending: OrderedDict[str, list[tuple[float, Event]]] = OrderedDict()
        self._n_pending = 0
        #: ``shared``: threads given an existing shard past ``max_shards``; ``evicted``/``expired``:
        #: predictions dropped from the label table by ``max_pending``/``label_ttl``; ``joined``:
        #: predictions that got their label; ``unmatched``: labels that found no prediction
        self.counts = dict.fromkeys(("shared", "evicted", "expired", "joined", "unmatched"), 0)

    # ------------------------------------------------------------------ shards
    def _shard(self) -> _Shard:
        owner = getattr(self._local, "owner", None)
        if owner is not None:
            return owner.shard
        with self._registry:
            if self._free:
                shard = self._free.pop()
            elif len(self._shards) < self.max_shards:
                shard = _Shard(self._template.copy())
                self._shards.append(shard)
            else:
                shard = self._shards[next(self._round_robin) % len(self._shards)]
                self.counts["shared"] += 1
        owner = _Owner(shard)
        weakref.finalize(owner, _release, weakref.ref(self), shard)
        self._local.owner = owner
        return shard

    def _free_shard(self, shard: _Shard) -> None:
        with self._registry:
            if shard in self._shards and shard not in self._free:
                self._free.append(shard)

    @property
    def shards(self) -> int:
        """Shards held now (at most ``max_shards``)."""
        with self._registry:
            return len(self._shards)

    # ------------------------------------------------------------------ writes
    def update(self, event: Mapping[str, Any] | Any) -> SharedMonitor:
        """Add one event with its label from the calling thread (validated exactly as the
        monitor does: a ValueError naming the field, nothing changed)."""
        shard = self._shard()
        with shard.lock:
            shard.monitor.update(event)
        return self

    def update_many(self, events: Iterable[Any]) -> SharedMonitor:
        """Add a batch from the calling thread (all validated before any is applied)."""
        shard = self._shard()
        with shard.lock:
            shard.monitor.update_many(events)
        return self

    def update_prediction(self, event: Mapping[str, Any] | Event) -> SharedMonitor:
        """A prediction whose label comes later (no ``y_true``; an ``id`` string or integer):
        counted in the label-free metrics now, waiting for :meth:`update_label`. ValueError
        (one line, naming the field) leaves everything unchanged."""
        ident = event.id if isinstance(event, Event) else event.get("id") if isinstance(event, Mapping) else None
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str) or not ident:
            raise ValueError(f"event rejected: a prediction awaiting its label needs field 'id' (a non-empty "
                             f"string), got {ident!r}")
        parsed = self._template.parse_prediction(event)
        shard = self._shard()
        with shard.lock:
            shard.monitor.update_prediction(parsed)
        now = self._clock()
        with self._pending_lock:
            self._pending.setdefault(ident, []).append((now, parsed))
            self._pending.move_to_end(ident)
            self._n_pending += 1
            self._trim(now)
        return self

    def update_label(self, ident: str | int, y_true: Hashable) -> bool:
        """The label of the prediction(s) with id ``ident``: applied to their label-based metrics
        from the calling thread. False (counted in ``counts["unmatched"]``) when none waits;
        ValueError naming ``y_true`` when the task cannot take it (the predictions keep waiting)."""
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str):
            raise ValueError(f"label rejected: field 'id' must be a string, got {ident!r}")
        while True:  # parse outside the lock; retry if a prediction with this id came meanwhile
            with self._pending_lock:
                self._trim(self._clock())
                current = self._pending.get(ident)
                waiting = list(current) if current else []
                if not waiting:
                    self.counts["unmatched"] += 1
                    return False
            joined = [self._template.parse_event({**_fields(p), "y_true": y_true}) for _, p in waiting]
            with self._pending_lock:
                current = self._pending.get(ident)
                if current is None:  # another thread's label took them first (or they expired)
                    self.counts["unmatched"] += 1
                    return False
                if len(current) == len(waiting) and all(a is b for a, b in zip(current, waiting)):
                    del self._pending[ident]
                    self._n_pending -= len(waiting)
                    self.counts["joined"] += len(waiting)
                    break
        shard = self._shard()
        with shard.lock:
            for ev in joined:
                shard.monitor.update_outcome(ev)
        return True

    def _trim(self, now: float) -> None:
        """Drop the oldest waiting predictions past ``max_pending`` or ``label_ttl`` (pending lock held)."""
        pending = self._pending
        ttl = self.label_ttl
        while pending:
            ident, waiting = next(iter(pending.items()))
            if self._n_pending > self.max_pending:
                kind = "evicted"
            elif ttl is not None and now - waiting[-1][0] > ttl:
                kind = "expired"
            else:
                break
            del pending[ident]
            self._n_pending -= len(waiting)
            self.counts[kind] += len(waiting)

    @property
    def pending(self) -> int:
        """Predictions waiting for their label."""
        with self._pending_lock:
            return self._n_pending

    # ------------------------------------------------------------------ reads
    def merged(self) -> Any:
        """A new monitor holding every shard's events."""
        with self._registry:
            shards = list(self._shards)
        total = self._template.copy()
        for shard in shards:
            with shard.lock:
                part = shard.monitor.copy()
            total.merge(part)
        return total

    def snapshot(self) -> dict[str, Any]:
        """The merged monitor's ``snapshot()``."""
        return self.merged().snapshot()

    def drain(self) -> dict[str, Any]:
        """The snapshot of every event so far, and the shards emptied, in one step (see the
        module docstring): successive drains count each event exactly once. Predictions
        waiting for labels keep waiting."""
        return self.drain_monitor().snapshot()

    def drain_monitor(self) -> Any:
        """:meth:`drain`, returning the merged monitor (for ``to_dict()``, ``interval()``, ...)."""
        with self._registry:
            shards = list(self._shards)
            taken = []
            for shard in shards:
                shard.lock.acquire()
            try:
                for shard in shards:
                    taken.append(shard.monitor)
                    shard.monitor = self._template.copy()
            finally:
                for shard in shards:
                    shard.lock.release()
        total = self._template.copy()
        for part in taken:
            total.merge(part)
        return total

    @property
    def count(self) -> int:
        return int(self.merged().count)

    def reset(self) -> SharedMonitor:
        """Forget every event of every shard and every prediction waiting for its label."""
        self.drain_monitor()
        with self._pending_lock:
            self._pending.clear()
            self._n_pending = 0
        return self


def _fields(event: Event) -> dict[str, Any]:
    """A parsed prediction as the dict the monitor parses (its y_true to be set)."""
    return {k: v for k, v in event.to_dict().items() if k not in ("ts", "model", "segment", "id")}
