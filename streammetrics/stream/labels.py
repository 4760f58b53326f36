"""The delayed-label join: predictions without ``y_true`` meet label events by ``id``.

Contract section 5. I/O-free: feed it parsed events in stream order, act on what it returns.

* A **prediction** without ``y_true`` (it needs an ``id``) waits in a
  :class:`~streammetrics.stream.pending.PendingStore`; a **label** :class:`Label`
  ``{"id", "y_true", "ts"}`` joins every pending prediction with its id. A label may come
  first: it then waits for predictions with its id.
* **Event time.** The watermark is the largest ``ts`` seen, predictions (labelled inline or
  not, passed to :meth:`LabelJoin.advance`) and labels alike; arithmetic is in whole
  microseconds. Each side waits at most ``label_ttl``: a prediction (or waiting label) with
  time ``t`` *expires* once the watermark passes ``t + label_ttl`` (so a label with
  ``ts <= t + label_ttl`` still joins). An expired prediction never gets a label.
  Each event first advances the watermark (expiring what is due), then is processed.
* **Rejections** (nothing changes): a second label for an id that already has one
  (code ``"duplicate"``), a label for an id whose prediction expired (``"expired"``), and a
  prediction or label without an id (``"missing_id"``).
* **Memory of ids** (bounded in time and count). A label is remembered until the watermark
  passes its own ``ts + label_ttl``: meanwhile a second label for its id is a duplicate and
  a new prediction with its id joins at once (several models may score one request).
  The id of an expired prediction is remembered until the watermark passes the
  prediction's ``ts + 2 * label_ttl``: meanwhile a label for it is rejected as expired.
  At most ``max_labels`` labels and ``max_expired_ids`` expired ids are remembered; beyond
  that the oldest are forgotten early (``forgotten`` counts ids forgotten early; a waiting
  label dropped early is reported as an expired label, code ``"evicted"``). After an id is
  forgotten, a label for it is treated as new: it waits for a prediction with that id and
  expires unmatched if none comes, so it still changes no window.
* **Pending predictions** are bounded by the store's ``max_pending``: beyond it the oldest
  expire early (code ``"evicted"``).

Every call returns :class:`JoinOutput` records in causal order (expiries caused by the
watermark first), each with a ``kind``:

==================  ==========================================================================
``pending``         the prediction was accepted (label-free metrics may count it now)
``joined``          ``event`` is the prediction with its label's ``y_true`` (the prediction's
                    ``ts``, key, score(s)/``y_pred`` and weight); it follows its ``pending``
``expired``         a pending prediction expired (code ``"ttl"`` or ``"evicted"``)
``rejected``        a label (or prediction) refused; ``code`` and a one-line ``reason``
``label_expired``   a label that found no prediction in time (code ``"ttl"`` or ``"evicted"``)
==================  ==========================================================================

>>> from streammetrics.events.parser import Event
>>> join = LabelJoin(label_ttl=60)
>>> [o.kind for o in join.add_prediction(Event(ts=0.0, model="m", score=0.8, id="a"))]
['pending']
>>> out = join.add_label(Label("a", 1, ts=30.0))
>>> [(o.kind, o.event.y_true, o.event.ts) for o in out]
[('joined', 1, 0.0)]
>>> [(o.code, o.reason) for o in join.add_label(Label("a", 0, ts=31.0))]
[('duplicate', "duplicate label for id 'a': it already has one")]
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from streammetrics.events.parser import Event
from streammetrics.stream.pending import PendingStore, ts_us

__all__ = [
    "DEFAULT_MAX_EXPIRED_IDS",
    "DEFAULT_MAX_LABELS",
    "EXPIRED",
    "JOINED",
    "LABEL_EXPIRED",
    "PENDING",
    "REJECTED",
    "JoinOutput",
    "Label",
    "LabelJoin",
]

PENDING, JOINED, EXPIRED, REJECTED, LABEL_EXPIRED = "pending", "joined", "expired", "rejected", "label_expired"
#: labels remembered at most (waiting ones and those already applied, for duplicate checks)
DEFAULT_MAX_LABELS = 2_000_000
#: ids of expired predictions remembered at most (to reject their labels as "expired")
DEFAULT_MAX_EXPIRED_IDS = 2_000_000
_NONE: tuple[()] = ()


class Label:
    """A label event: ground truth ``y_true`` for the prediction(s) with ``id``, known at ``ts``."""

    __slots__ = ("id", "ts", "y_true")

    def __init__(self, id: str, y_true: Hashable, ts: float) -> None:
        self.id = id
        self.y_true = y_true
        self.ts = ts

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Label:
            return NotImplemented
        return (self.id, self.y_true, self.ts) == (other.id, other.y_true, other.ts)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Label(id={self.id!r}, y_true={self.y_true!r}, ts={self.ts!r})"


class JoinOutput:
    """One outcome of the join: ``kind`` (module docstring), ``event`` (an Event or a Label),
    ``code`` (machine-readable, for expiries and rejections), ``reason`` (one line) and, for
    predictions, the ``tag`` given with it to :meth:`LabelJoin.add_prediction`."""

    __slots__ = ("code", "event", "kind", "reason", "tag")

    def __init__(self, kind: str, event: Any, code: str | None = None, reason: str | None = None,
                 tag: int | None = None) -> None:
        self.kind = kind
        self.event = event
        self.code = code
        self.reason = reason
        self.tag = tag

    def __repr__(self) -> str:
        extra = f", code={self.code!r}" if self.code else ""
        return f"JoinOutput({self.kind!r}, {self.event!r}{extra})"


def _joined(p: Event, y_true: Any) -> Event:
    return Event(p.ts, p.model, p.segment, y_true, p.score, p.scores, p.y_pred, p.weight, p.id)


class LabelJoin:
    """Joins predictions and delayed labels by id (see the module docstring).

    ``label_ttl``: seconds of event time each side waits. ``store``: the pending store
    (default ``PendingStore()``). ``max_labels``, ``max_expired_ids``: bounds on remembered ids.
    """

    def __init__(self, label_ttl: float, *, store: PendingStore | None = None,
                 max_labels: int = DEFAULT_MAX_LABELS, max_expired_ids: int = DEFAULT_MAX_EXPIRED_IDS) -> None:
        if isinstance(label_ttl, bool) or not isinstance(label_ttl, (int, float)) \
                or not math.isfinite(label_ttl) or label_ttl < 0:
            raise ValueError(f"label_ttl must be a finite, non-negative number of seconds, got {label_ttl!r}")
        for name, v in (("max_labels", max_labels), ("max_expired_ids", max_expired_ids)):
            if type(v) is not int or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.ttl_us = round(label_ttl * 1e6)
        self.max_labels = max_labels
        self.max_expired_ids = max_expired_ids
        self.store = PendingStore() if store is None else store
        self.watermark_us: int | None = None
        self._due_us: float = -math.inf  # nothing can expire before the threshold passes it
        self._seq = 0
        # id -> [y_true, ts, ts_us, seq, matched]; heap of (ts_us, seq, id)
        self._labels: dict[str, list[Any]] = {}
        self._label_heap: list[tuple[int, int, str]] = []
        # id of an expired prediction -> (forget_us, seq); heap of (forget_us, seq, id)
        self._expired_ids: dict[str, tuple[int, int]] = {}
        self._expired_heap: list[tuple[int, int, str]] = []
        self.counts: dict[str, int] = dict.fromkeys(
            ("predictions", "labels", "joined", "expired", "evicted", "labels_expired", "labels_evicted",
             "duplicate", "rejected_expired", "missing_id", "forgotten"), 0)
        # incremental checkpoints (track_changes): ids whose remembered label or expired-id record
        # changed since the last delta_dict (None: not tracked)
        self._touched_labels: set[str] | None = None
        self._touched_expired: set[str] = set()

    # ----------------------------------------------------------------- inputs
    def advance(self, ts: float) -> list[JoinOutput] | tuple[()]:
        """Move the watermark to ``ts`` if later (any event's time, e.g. an inline-labelled
        prediction's) and return what expires."""
        return self.advance_us(ts_us(ts))

    def advance_us(self, t: int) -> list[JoinOutput] | tuple[()]:
        """:meth:`advance` to an event time in whole microseconds (:func:`ts_us`)."""
        wm = self.watermark_us
        if wm is not None and t <= wm:
            return _NONE
        self.watermark_us = t
        return self._expire(t - self.ttl_us)

    def add_prediction(self, event: Event, tag: int | None = None, time_us: int | None = None) -> list[JoinOutput]:
        """A prediction awaiting its label (its ``y_true`` is ignored). ``tag`` (an integer,
        e.g. the prediction's first window) is kept with it and returned on its outputs;
        ``time_us``: its ``ts_us(event.ts)`` if the caller has it."""
        t = ts_us(event.ts) if time_us is None else time_us
        out = list(self.advance_us(t))
        ident = event.id
        if ident.__class__ is not str and not isinstance(ident, str):
            self.counts["missing_id"] += 1
            out.append(JoinOutput(REJECTED, event, "missing_id", "prediction without y_true needs an 'id'"))
            return out
        self.counts["predictions"] += 1
        out.append(JoinOutput(PENDING, event, tag=tag))
        rec = self._labels.get(ident)
        if rec is not None:
            rec[4] = True
            if self._touched_labels is not None:
                self._touched_labels.add(ident)
            self.counts["joined"] += 1
            out.append(JoinOutput(JOINED, _joined(event, rec[0]), tag=tag))
        elif t < self.watermark_us - self.ttl_us:  # type: ignore[operator]  # (set by advance_us)
            self._expire_prediction(event, tag, "ttl", out)
        else:
            if t < self._due_us:
                self._due_us = t
            for old, old_tag in self.store.put(event, tag):
                self.counts["evicted"] += 1
                self._expire_prediction(old, old_tag, "evicted", out)
        return out

    def add_label(self, label: Label, time_us: int | None = None) -> list[JoinOutput]:
        """A label event: joins the pending predictions with its id, or waits for them
        (``time_us``: its ``ts_us(label.ts)`` if the caller has it)."""
        t = ts_us(label.ts) if time_us is None else time_us
        out = list(self.advance_us(t))
        ident = label.id
        if ident.__class__ is not str and not isinstance(ident, str):
            self.counts["missing_id"] += 1
            out.append(JoinOutput(REJECTED, label, "missing_id", "label event needs an 'id'"))
            return out
        if ident in self._labels:
            self.counts["duplicate"] += 1
            out.append(JoinOutput(REJECTED, label, "duplicate",
                                  f"duplicate label for id {ident!r}: it already has one"))
            return out
        preds = self.store.take(ident)
        if not preds and ident in self._expired_ids:
            self.counts["rejected_expired"] += 1
            out.append(JoinOutput(REJECTED, label, "expired",
                                  f"label for id {ident!r} arrived after its prediction expired (label TTL)"))
            return out
        self.counts["labels"] += 1
        seq = self._seq
        self._seq += 1
        self._labels[ident] = [label.y_true, label.ts, t, seq, bool(preds)]
        if self._touched_labels is not None:
            self._touched_labels.add(ident)
        assert self.watermark_us is not None
        if not preds and t < self.watermark_us - self.ttl_us:  # older than the TTL already
            self._forget_label(ident, "ttl", out)
            return out
        heapq.heappush(self._label_heap, (t, seq, ident))
        if t < self._due_us:
            self._due_us = t
        for p, tag in preds:
            self.counts["joined"] += 1
            out.append(JoinOutput(JOINED, _joined(p, label.y_true), tag=tag))
        if len(self._labels) > self.max_labels:
            _, _, oldest = heapq.heappop(self._label_heap)
            self._forget_label(oldest, "evicted", out)
        return out

    # ----------------------------------------------------------------- runs
    def quiet_from_us(self) -> float:
        """The earliest event time (us) that may expire something (a pending prediction, a
        waiting label, an expired id) once the watermark passes it plus the TTL: a run of
        items whose times lie within ``label_ttl`` of it and of each other expires nothing."""
        return self._due_us

    def joinable(self, items: Sequence[Event | Label], times: Sequence[int]) -> int:
        """How many of ``items`` (predictions awaiting their label and labels, in stream order,
        with their times in us: a run that expires nothing, see :meth:`quiet_from_us`), from the
        first, :meth:`add_run` takes: it stops before an item without a string id, a prediction
        whose label waits, a label that is a duplicate or finds no prediction pending (in the
        store, or earlier in the run), or once the store or the remembered labels would
        overflow (their bounds). Changes nothing."""
        labels, store = self._labels, self.store
        room_store = store.max_pending - len(store)
        room_labels = self.max_labels - len(labels)
        predicted: set[str] = set()
        labelled: set[str] = set()
        held = iter(store.held([item.id for item in items if item.__class__ is Label]))
        n = 0
        for item in items:
            ident = item.id
            if ident.__class__ is not str or ident in labels or ident in labelled:
                break
            if item.__class__ is Label:
                if room_labels <= 0 or (not next(held) and ident not in predicted):
                    break
                room_labels -= 1
                labelled.add(ident)
            else:
                if room_store <= 0:
                    break
                room_store -= 1
                predicted.add(ident)
            n += 1
        return n

    def add_run(self, items: Sequence[Event | Label], times: Sequence[int],
                tags: Sequence[int | None]) -> tuple[list[Event], list[int | None]]:
        """:meth:`add_prediction` (with its tag from ``tags``, in order) or :meth:`add_label` of each
        of ``items``, all of which :meth:`joinable` takes: nothing expires, is evicted or refused.
        Returns the joined predictions (with their labels' ``y_true``) and their tags."""
        if times:
            self.advance_us(max(times))
        counts, labels, touched, take = self.counts, self._labels, self._touched_labels, self.store.take
        heap = self._label_heap
        joined: list[Event] = []
        joined_tags: list[int | None] = []
        due = min(self._due_us, min(times, default=math.inf))
        put_many = self.store.put_many
        tag_list = list(tags)
        n_pred = n_label = 0
        at_once = len(tag_list) <= self.store.room()
        if at_once:  # no spill: whether the predictions go in before the labels shows nowhere
            put_many([item for item in items if item.__class__ is not Label], tag_list)  # type: ignore[misc]
            n_pred = len(tag_list)
        events: list[Any] = []  # (else) the predictions since the last label, put together before it
        for item, t in zip(items, times):
            if item.__class__ is not Label:
                if not at_once:
                    events.append(item)
                continue
            if events:
                put_many(events, tag_list[n_pred:n_pred + len(events)])
                n_pred += len(events)
                events = []
            n_label += 1
            ident: Any = item.id
            y = item.y_true
            labels[ident] = [y, item.ts, t, self._seq, True]
            heapq.heappush(heap, (t, self._seq, ident))
            self._seq += 1
            if touched is not None:
                touched.add(ident)
            for p, tag in take(ident):
                joined.append(_joined(p, y))
                joined_tags.append(tag)
        if events:
            put_many(events, tag_list[n_pred:n_pred + len(events)])
            n_pred += len(events)
        self._due_us = due
        counts["predictions"] += n_pred
        counts["labels"] += n_label
        counts["joined"] += len(joined)
        return joined, joined_tags

    # ----------------------------------------------------------------- expiry
    def _expire(self, before_us: int) -> list[JoinOutput] | tuple[()]:
        if before_us <= self._due_us:
            return _NONE
        out: list[JoinOutput] = []
        if self.store.next_deadline_us() < before_us:
            for p, tag in self.store.expire(before_us):
                self._expire_prediction(p, tag, "ttl", out)
        heap = self._label_heap
        while heap and heap[0][0] < before_us:
            _, _, ident = heapq.heappop(heap)
            self._forget_label(ident, "ttl", out)
        heap = self._expired_heap
        while heap and heap[0][0] < before_us:  # (ts + ttl) < watermark - ttl
            _, seq, ident = heapq.heappop(heap)
            if self._expired_ids.get(ident, (0, -1))[1] == seq:
                del self._expired_ids[ident]
                if self._touched_labels is not None:
                    self._touched_expired.add(ident)
        self._due_us = min(self.store.next_deadline_us(), self._label_heap[0][0] if self._label_heap else math.inf,
                           heap[0][0] if heap else math.inf)
        return out or _NONE

    def _expire_prediction(self, p: Event, tag: int | None, code: str, out: list[JoinOutput]) -> None:
        self.counts["expired"] += 1
        out.append(JoinOutput(EXPIRED, p, code, f"prediction {p.id!r} (ts={p.ts!r}) expired without a label"
                              + (" (pending store full)" if code == "evicted" else ""), tag))
        ident = p.id
        assert isinstance(ident, str)
        seq = self._seq
        self._seq += 1
        self._expired_ids[ident] = (ts_us(p.ts) + self.ttl_us, seq)  # forgotten once ts + 2 ttl passes
        if self._touched_labels is not None:
            self._touched_expired.add(ident)
        heap = self._expired_heap
        heapq.heappush(heap, (ts_us(p.ts) + self.ttl_us, seq, ident))
        self._due_us = min(self._due_us, ts_us(p.ts) + self.ttl_us)
        if len(self._expired_ids) > self.max_expired_ids:
            while heap:
                _, s, old = heapq.heappop(heap)
                if self._expired_ids.get(old, (0, -1))[1] == s:
                    del self._expired_ids[old]
                    if self._touched_labels is not None:
                        self._touched_expired.add(old)
                    self.counts["forgotten"] += 1
                    break
        if len(heap) > 2 * len(self._expired_ids) + 1024:  # stale entries of re-expired ids
            self._expired_heap = [(f, s, i) for i, (f, s) in self._expired_ids.items()]
            heapq.heapify(self._expired_heap)

    def _forget_label(self, ident: str, code: str, out: list[JoinOutput]) -> None:
        """Drop a remembered label (its heap entry is already gone); report it if it never joined."""
        y_true, ts, _, _, matched = self._labels.pop(ident)
        if self._touched_labels is not None:
            self._touched_labels.add(ident)
        if matched:
            if code == "evicted":
                self.counts["forgotten"] += 1
            return
        self.counts["labels_expired"] += 1
        if code == "evicted":
            self.counts["labels_evicted"] += 1
        out.append(JoinOutput(LABEL_EXPIRED, Label(ident, y_true, ts), code,
                              f"label for id {ident!r} (ts={ts!r}) expired: no prediction with this id "
                              + ("in time" if code == "ttl" else "before the label table filled up")))

    # ----------------------------------------------------------------- introspection
    @property
    def pending(self) -> int:
        """Predictions waiting for a label."""
        return len(self.store)

    def stats(self) -> dict[str, int]:
        """Counters (see ``counts``) plus the current ``pending`` and remembered id totals."""
        return {**self.counts, "pending": self.pending, "remembered_labels": len(self._labels),
                "remembered_expired_ids": len(self._expired_ids), "spilled": self.store.spilled}

    # ----------------------------------------------------------------- checkpoint
    def to_dict(self, store_path: str | None = None) -> dict[str, Any]:
        """JSON-safe state. With ``store_path`` the pending store is written to that SQLite
        file (:meth:`PendingStore.save`) and only its path is kept in the dict."""
        if store_path is not None:
            self.store.save(store_path)
            store: Any = {"file": store_path}
        else:
            store = self.store.to_dict()
        return {
            "type": "LabelJoin", "version": 1, "ttl_us": self.ttl_us, "watermark_us": self.watermark_us,
            "seq": self._seq, "counts": dict(self.counts),
            "labels": [[i, r[0], r[1], r[3], r[4]] for i, r in sorted(self._labels.items(), key=lambda x: x[1][3])],
            "expired_ids": [[i, f, s] for i, (f, s) in sorted(self._expired_ids.items(), key=lambda x: x[1][1])],
            "store": store,
        }

    def track_changes(self) -> None:
        """Start (or restart) recording what :meth:`delta_dict` writes: call it when the state
        equals the checkpoint just written."""
        self._touched_labels, self._touched_expired = set(), set()
        self.store.track_changes()

    def delta_dict(self) -> dict[str, Any]:
        """What changed since the last call (or :meth:`track_changes`): the remembered labels and
        expired ids added, changed or dropped, and the pending store's delta; O(changes).
        :meth:`apply_delta` of the previous :meth:`to_dict` and this equals :meth:`to_dict` now
        (pending records' tiers aside)."""
        if self._touched_labels is None:
            raise ValueError("track_changes() was not called")
        labels, expired = self._touched_labels, self._touched_expired
        self._touched_labels, self._touched_expired = set(), set()
        present = [(i, self._labels[i]) for i in labels if i in self._labels]
        ids = [(i, self._expired_ids[i]) for i in expired if i in self._expired_ids]
        return {
            "type": "LabelJoinDelta", "version": 1, "ttl_us": self.ttl_us, "watermark_us": self.watermark_us,
            "seq": self._seq, "counts": dict(self.counts),
            "labels": [[i, r[0], r[1], r[3], r[4]] for i, r in sorted(present, key=lambda x: x[1][3])],
            "labels_gone": sorted(i for i in labels if i not in self._labels),
            "expired_ids": [[i, f, s] for i, (f, s) in sorted(ids, key=lambda x: x[1][1])],
            "expired_gone": sorted(i for i in expired if i not in self._expired_ids),
            "store": self.store.delta_dict(),
        }

    @staticmethod
    def apply_delta(full: Mapping[str, Any], *deltas: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`to_dict`'s ``full`` with ``deltas`` (:meth:`delta_dict`) applied, as data;
        ValueError (one line) if malformed (:meth:`load_dict` validates the result)."""
        if not isinstance(full, Mapping) or full.get("type") != "LabelJoin":
            raise ValueError("not a LabelJoin checkpoint (type)")
        if not deltas:
            return dict(full)
        try:
            labels = {r[0]: r for r in full["labels"]}
            expired = {r[0]: r for r in full["expired_ids"]}
            for delta in deltas:
                if not isinstance(delta, Mapping) or delta.get("type") != "LabelJoinDelta" \
                        or delta.get("version") != 1:
                    raise ValueError("not a LabelJoin checkpoint delta (type/version)")
                for i in delta["labels_gone"]:
                    labels.pop(i, None)
                labels.update((r[0], r) for r in delta["labels"])
                for i in delta["expired_gone"]:
                    expired.pop(i, None)
                expired.update((r[0], r) for r in delta["expired_ids"])
            store = PendingStore.apply_delta(full["store"], *[d["store"] for d in deltas])
            last = deltas[-1]
            return {"type": "LabelJoin", "version": 1, "ttl_us": last["ttl_us"], "watermark_us": last["watermark_us"],
                    "seq": last["seq"], "counts": last["counts"],
                    "labels": sorted(labels.values(), key=lambda r: r[3]),
                    "expired_ids": sorted(expired.values(), key=lambda r: r[2]), "store": store}
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed LabelJoin checkpoint delta: {exc!r:.200}") from None

    def load_dict(self, data: Mapping[str, Any]) -> LabelJoin:
        """Replace the state with :meth:`to_dict`'s (same ``label_ttl``); ValueError if malformed."""
        if not isinstance(data, Mapping) or data.get("type") != "LabelJoin" or data.get("version") != 1:
            raise ValueError("not a LabelJoin checkpoint (type/version)")
        if data.get("ttl_us") != self.ttl_us:
            raise ValueError(f"checkpoint label_ttl {data.get('ttl_us')} us != {self.ttl_us} us")
        try:
            wm = data["watermark_us"]
            if wm is not None and type(wm) is not int:
                raise ValueError("watermark_us must be an integer")
            seq = data["seq"]
            counts = {k: int(data["counts"][k]) for k in self.counts}
            labels: dict[str, list[Any]] = {}
            for ident, y_true, ts, s, matched in data["labels"]:
                if not isinstance(ident, str) or type(s) is not int or type(ts) not in (int, float):
                    raise ValueError(f"bad label record for {ident!r}")
                labels[ident] = [y_true, float(ts), ts_us(float(ts)), s, bool(matched)]
            expired = {}
            for ident, forget, s in data["expired_ids"]:
                if not isinstance(ident, str) or type(forget) is not int or type(s) is not int:
                    raise ValueError(f"bad expired id record for {ident!r}")
                expired[ident] = (forget, s)
            store = data["store"]
            if type(seq) is not int:
                raise ValueError("seq must be an integer")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed LabelJoin checkpoint: {exc}") from None
        if isinstance(store, Mapping) and set(store) == {"file"}:
            self.store.load(store["file"])
        else:
            self.store.load_dict(store)
        self.watermark_us, self._seq, self.counts = wm, seq, counts
        self._labels, self._expired_ids = labels, expired
        self._label_heap = [(r[2], r[3], i) for i, r in labels.items()]
        heapq.heapify(self._label_heap)
        self._expired_heap = [(f, s, i) for i, (f, s) in expired.items()]
        heapq.heapify(self._expired_heap)
        self._due_us = -math.inf
        if self._touched_labels is not None:
            self.track_changes()
        return self
