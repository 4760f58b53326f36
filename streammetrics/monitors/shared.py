"""Monitors shared by the threads of a service (web request handlers, worker pools).

:class:`SharedMonitor` gives each thread its own shard, a monitor behind its own lock:
an update takes only the calling thread's lock, which no other writer ever waits on, so
updates from many threads do not contend. Readers lock one shard at a time, copy it and
merge the copies (monitors are mergeable), so a snapshot is the exact merge of every event
whose update had returned when its shard was copied: no event is lost or counted twice.

    monitor = SharedMonitor(lambda: sm.BinaryMonitor(threshold=0.5))

    @app.post("/predict")
    def predict(request):
        score = model.predict(request.features)
        ...
        monitor.update({"y_true": label, "score": score})   # from any thread

    @app.get("/quality")
    def quality():
        return monitor.snapshot()

Shards of threads that have ended are kept (their events still count) and reused by no one;
``reset()`` clears every shard. For processes rather than threads, give each process its own
monitor and merge their ``to_dict()`` states (e.g. through ``sm.from_dict``).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Mapping

__all__ = ["SharedMonitor"]


class _Shard:
    __slots__ = ("lock", "monitor")

    def __init__(self, monitor: Any) -> None:
        self.lock = threading.Lock()
        self.monitor = monitor


class SharedMonitor:
    """A thread-safe monitor made of per-thread shards merged on read (see the module docstring).

    ``factory()`` returns an empty monitor (or any accumulator with ``update``/``merge``/``copy``).
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._local = threading.local()
        self._shards: list[_Shard] = []
        self._registry_lock = threading.Lock()
        self._template = factory()  # an empty monitor: the merge target of reads

    def _shard(self) -> _Shard:
        shard = getattr(self._local, "shard", None)
        if shard is None:
            shard = _Shard(self._factory())
            with self._registry_lock:
                self._shards.append(shard)
            self._local.shard = shard
        return shard

    def update(self, event: Mapping[str, Any] | Any) -> "SharedMonitor":
        """Add one event from the calling thread (validated exactly as the monitor does)."""
        shard = self._shard()
        with shard.lock:
            shard.monitor.update(event)
        return self

    def update_many(self, events: Iterable[Any]) -> "SharedMonitor":
        """Add a batch from the calling thread (all validated before any is applied)."""
        shard = self._shard()
        with shard.lock:
            shard.monitor.update_many(events)
        return self

    def merged(self) -> Any:
        """A new monitor holding every shard's events."""
        with self._registry_lock:
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

    @property
    def count(self) -> int:
        return self.merged().count

    def reset(self) -> "SharedMonitor":
        """Forget every event of every shard."""
        with self._registry_lock:
            shards = list(self._shards)
        for shard in shards:
            with shard.lock:
                shard.monitor.reset()
        return self
