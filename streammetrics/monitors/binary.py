"""``BinaryMonitor``: a binary classifier's score stream (``y_true`` in {0, 1}, ``score``)."""
from __future__ import annotations

import math
import numbers
from itertools import chain
from typing import Any, Generic, Mapping, Sequence, TypeVar

import numpy as np

from streammetrics.core.exceptions import InvalidEvent
from streammetrics.core.state import describe
from streammetrics.core.validation import check_number
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_sum import BUFFER
from streammetrics.kernels.intervals import (
    BINARY_INTERVALS,
    binary_interval_columns,
    check_confidence,
    interval_record,
    z_value,
)
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.score_distribution import ScoreDistribution
from streammetrics.monitors.base import Monitor, batch_weights, empty_like, part
from streammetrics.monitors.binary_events import (
    EVENTS_FORM_MAX,
    check_events_form,
    events_form,
    load_events_form,
    signed_events_form,
)
from streammetrics.monitors.fast_snapshot import binary_snapshot
from streammetrics.monitors.fleet_snapshot import FLEET_MAX_EVENTS, binary_snapshot_states, binary_snapshot_texts

__all__ = ["BinaryMonitor"]

_INF = math.inf
_BINARY_TRUTH = (int, bool, float)
P = TypeVar("P")
#: batches up to this size are applied event by event (numpy's set-up costs more than it saves)
SMALL_BATCH = 32
#: the labels the parser gives, compared by identity on the per-event paths (CPython's cached small
#: ints; any other 0/1 takes a slower path to the same result)
ZERO_INT, ONE_INT = 0, 1
#: the attributes holding the parts once the monitor has them (see :class:`BinaryMonitor`)
_PART_ATTRS = ("_predictions", "_scores", "_confusion")


def binary_label(y: Any) -> int:
    """A binary label given as anything equal to 0 or 1 (an int, a bool, 1.0, a numpy scalar)
    as that int; :class:`~streammetrics.core.exceptions.InvalidEvent` naming ``y_true`` otherwise."""
    try:
        if y == 1:
            return 1
        if y == 0:
            return 0
    except (TypeError, ValueError):  # (an array's truth value, an object refusing ==)
        pass
    raise InvalidEvent(f"field 'y_true' must be 0 or 1, got {y!r:.40}", "y_true")


def batch_labels(events: Sequence[Any]) -> np.ndarray:
    """The events' labels as an int64 array of 0 and 1 (each equal to 0 or 1, of any type);
    :class:`~streammetrics.core.exceptions.InvalidEvent` naming ``y_true`` otherwise (a batch
    is checked before anything changes: a cast alone would make 0.5 a 0)."""
    labels = [e.y_true for e in events]
    y = np.full(len(events), np.nan)
    if all(issubclass(t, numbers.Real) for t in set(map(type, labels))):  # (not a str float() reads)
        y = np.fromiter(labels, dtype=np.float64, count=len(events))
    bad = ~((y == 0.0) | (y == 1.0))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise InvalidEvent(f"field 'y_true' must be 0 or 1, got {events[j].y_true!r:.40} (event {j})", "y_true")
    return y.astype(np.int64)


def _finite_real(x: Any) -> bool:
    return x.__class__ is not bool and isinstance(x, numbers.Real) and math.isfinite(x)


def _nan(value: float | None) -> float:
    """A snapshot value as a float for the interval kernels (None: nan)."""
    return math.nan if value is None else value


class _QueuedPart(Generic[P]):
    """A part of :class:`BinaryMonitor` (kept in ``_<name>`` once the monitor has its parts):
    reading it gives the monitor its parts if it has none yet and applies the queued events
    (the small form) first; setting it does the same (the queued events go to the parts being
    replaced: the others keep them), then gives the monitor a queue of its own (a copy or an
    empty monitor made from this one's ``__dict__`` shares none)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = "_" + name

    def __get__(self, monitor: "BinaryMonitor | None", owner: type | None = None) -> P:
        if monitor is None:
            return self  # type: ignore[return-value]  # (the class attribute: the descriptor)
        state = monitor.__dict__
        if monitor._queue or "_scores" not in state:
            monitor._apply_queue()
        return state[self.attr]

    def __set__(self, monitor: "BinaryMonitor", value: P) -> None:
        state = monitor.__dict__
        if state.get("_queue") or "_scores" not in state:
            monitor._apply_queue()
        state["_queue"] = []
        state[self.attr] = value


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (``scores``, ``confusion``, ``score_sum``: every prediction was labelled) to
    version 2: the label-free ``predictions`` are the union of the score histograms (same
    grid), the class totals, the score sum and the predicted-positive cells."""
    scores, confusion = state["scores"], state["confusion"]
    if not isinstance(scores, Mapping) or not isinstance(confusion, Mapping):
        raise ValueError("state['scores'] and state['confusion'] must be accumulator dicts")
    s, c = scores["state"], confusion["state"]
    hist = dict(s["histogram"])
    neg, pos = hist.pop("neg"), hist.pop("pos")
    if not (isinstance(neg, list) and isinstance(pos, list) and len(neg) == len(pos)):
        raise ValueError(f"state['scores'] histogram rows must be lists of one length, got {describe(neg)}")
    hist["weights"] = [a + b for a, b in zip(neg, pos)]
    above = sum(cell[2] for cell in c["cells"] if isinstance(cell, list) and len(cell) == 3 and cell[1] == 1)
    sd = ScoreDistribution(threshold=config["threshold"], exact=config["exact"])
    return {
        "predictions": {
            "type": sd.type_name, "version": 1, "config": sd._config(),  # a version-1 layout
            "state": {"count": sum(s["events"]), "total_weight": sum(s["weights"]),
                      "score_sum": state["score_sum"], "positive_weight": above,
                      "bins_per_octave": s["bins_per_octave"], "histogram": hist},
        },
        "scores": scores,
        "confusion": confusion,
    }


class BinaryMonitor(Monitor):
    """Binary task: ``y_true`` in {0, 1}, ``score`` of the positive class.

    Label-free part (every prediction): a :class:`~streammetrics.ScoreDistribution` giving
    ``count``, ``total_weight``, ``mean_score`` and ``predicted_positive_rate``
    (``score >= threshold``). Label-based part: ``BinaryScores`` (``roc_auc`` with its
    guaranteed bounds ``roc_auc_low``/``roc_auc_high``, ``average_precision``, ``log_loss``,
    ``brier_score``: None once a score outside [0, 1] was seen) and the ``ConfusionMatrix``
    of ``score >= threshold`` (``accuracy``, ``balanced_accuracy``, ``precision``,
    ``recall``, ``f1``, ``specificity``, ``matthews_corrcoef`` of the positive class 1, and
    ``positive_rate``, the weighted share of ``y_true == 1``).

    :meth:`update` queues the common event and applies the queue when a part is read through
    the monitor (``m.scores``, ``m.count``, ``m.snapshot()``...): read the parts through the
    monitor; a part kept in a variable across ``update`` calls sees their events after the
    next such read.

    >>> m = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.3})
    >>> s = m.snapshot()
    >>> s["count"], s["accuracy"], s["roc_auc"], s["mean_score"]
    (2, 1.0, 1.0, 0.55)
    """

    type_name = "BinaryMonitor"
    task = "binary"
    parts = ("scores", "confusion")
    fields = ("y_true", "score", "weight")
    #: 3: a small monitor of unit weights writes its events (:mod:`~streammetrics.monitors.binary_events`)
    version = 3
    migrations = {1: _migrate_v1, 2: lambda state, config: state}  # (version 3 reads the parts' layout too)
    #: most predictions (each of weight 1) whose state is written as the predictions themselves
    #: (the events form; more, or other weights: the parts' layout); also the most an
    #: events-form dict may hold when read
    events_form_max = EVENTS_FORM_MAX
    #: most events :meth:`update` queues before applying them to the parts (a list of floats:
    #: ~32 bytes per event, 64 KiB at most; the per-event path's two exact-sum buffers hold as much)
    update_queue_max = 2 * BUFFER
    state_fields = (
        part("predictions", lambda m: ScoreDistribution(threshold=m.threshold, exact=m.exact)),
        part("scores", lambda m: BinaryScores(exact=m.exact)),
        part("confusion", lambda m: ConfusionMatrix(labels=[0, 1])),
    )

    # The parts, read through properties that apply the queue of :meth:`update` first (the
    # update paths write to ``_predictions``, ``_scores`` and ``_confusion`` directly: the
    # state is a function of the multiset of events, whatever the order)
    predictions: _QueuedPart[ScoreDistribution] = _QueuedPart()
    scores: _QueuedPart[BinaryScores] = _QueuedPart()
    confusion: _QueuedPart[ConfusionMatrix] = _QueuedPart()
    _predictions: ScoreDistribution
    _scores: BinaryScores
    _confusion: ConfusionMatrix
    _queue: list[float]

    def __init__(self, threshold: float = 0.5, exact: bool = False) -> None:
        self.threshold = check_number(threshold, "threshold")
        self.exact = bool(exact)
        self.reset()

    def _config(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "exact": self.exact}

    # -------------------------------------------------------------- the two forms
    def _make_parts(self) -> None:
        """Promotion: give the monitor its three parts, empty (copies of cached empty parts of
        this configuration: :func:`~streammetrics.monitors.base.empty_like`). The queued events
        stay queued (:meth:`_apply_queue` applies them)."""
        key = (type(self), self.threshold, self.exact)
        empties = _EMPTY_PARTS.get(key)
        if empties is None:
            empties = _EMPTY_PARTS[key] = tuple(f.default(self) for f in type(self).state_fields)
        state = self.__dict__
        for f, empty in zip(type(self).state_fields, empties):
            state["_" + f.key] = empty_like(empty)  # type: ignore[operator]  # (one key per part)

    def _refresh(self) -> None:
        """Nothing derived to rebuild (a subclass may keep caches of its own)."""

    def reset(self) -> "BinaryMonitor":
        """Forget every event (the small form again: no parts, an empty queue)."""
        state = self.__dict__
        for attr in _PART_ATTRS:
            state.pop(attr, None)
        state["_queue"] = []
        self._refresh()
        return self

    def copy(self) -> "BinaryMonitor":
        """An independent monitor with the same state: in the small form a copy of the queue,
        else the queued events applied first and the parts copied."""
        if "_scores" not in self.__dict__:
            cls = type(self)
            new = cls.__new__(cls)
            new.__dict__.update(self.__dict__)
            new._queue = list(self._queue)
            new._refresh()
            return new
        if self._queue:
            self._apply_queue()
        return super().copy()

    def merge(self, other: Any) -> "BinaryMonitor":
        """Fold ``other`` in; two monitors in the small form merge by concatenating their queues."""
        if other.__class__ is self.__class__ and "_scores" not in self.__dict__ and (
                "_scores" not in other.__dict__) and other._config() == self._config():
            queue = self._queue
            queue += list(other._queue) if other is self else other._queue
            if len(queue) >= self.update_queue_max:
                self._apply_queue()
            return self
        return super().merge(other)

    def empty(self) -> "BinaryMonitor":
        """A new monitor with this one's configuration and no events, in the small form (this
        one's attributes but its parts and queue: no constructor; the window engine makes one per
        key and window). Called on an empty monitor (a factory's template).

        >>> BinaryMonitor(threshold=0.7).empty() == BinaryMonitor(threshold=0.7)
        True
        """
        state = self.__dict__
        if state["_queue"] or "_scores" in state:
            if self.count or self.labeled:
                raise ValueError("empty() is called on an empty monitor (a template)")
            state = state.copy()
            for attr in _PART_ATTRS:
                state.pop(attr, None)
        cls = self.__class__
        new = cls.__new__(cls)
        new.__dict__.update(state)
        new._queue = []
        if cls is not BinaryMonitor:  # (a subclass may rebuild caches of its own)
            new._refresh()
        return new

    def _state(self) -> dict[str, Any]:
        """The events form while it applies (:mod:`~streammetrics.monitors.binary_events`: from
        the small form directly, else from the parts), else the three parts' ``to_dict()``."""
        if "_scores" not in self.__dict__ and len(self._queue) <= min(self.events_form_max, FLEET_MAX_EVENTS):
            return signed_events_form(self._queue)
        small = events_form(self)
        return self._parts_state() if small is None else small

    def _parts_state(self) -> dict[str, Any]:
        """The parts' layout: the three parts' ``to_dict()`` (as the declared ``part`` fields write them)."""
        if not _DIRECT_STATE:
            return super()._state()
        return {"predictions": self.predictions.to_dict(), "scores": self.scores.to_dict(),
                "confusion": self.confusion.to_dict()}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        """The parts' layout, or the events form (``score`` and ``y_true``): the small form when
        every prediction is the common event (labelled, a score strictly inside (0, 1)), else the
        predictions added back to the parts."""
        if "score" in state or "y_true" in state:
            signed = check_events_form(state, self.events_form_max)
            if signed is not None and "_scores" not in self.__dict__ and not self._queue:
                self._queue = signed
            else:
                load_events_form(self, state)
            self._refresh()
        else:
            super()._load_state(state)

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen
        if "_scores" not in self.__dict__:
            return len(self._queue)
        return self.predictions.count

    @property
    def labeled(self) -> int:
        if "_scores" not in self.__dict__:
            return len(self._queue)
        return self.scores.count

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        return self.predictions.total_weight

    @property
    def score_sum(self) -> float:
        """``sum(weight * score)`` over every prediction."""
        return self.predictions.score_sum

    def small_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The small form as columns, read without building the parts: ``(scores, negatives,
        positives)``, the distinct scores ascending and the number of events of ``y_true`` 0 and 1
        at each (float64), what the parts' exact histograms would hold (the queue holds fewer than
        :attr:`update_queue_max` events, at most the parts' ``max_bins``); None once the monitor
        has its parts.

        >>> m = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.8})
        >>> [c.tolist() for c in m.small_columns()]
        [[0.8], [1.0], [1.0]]
        """
        if "_scores" in self.__dict__:
            return None
        signed = np.array(self._queue, dtype=np.float64)
        scores, at = np.unique(np.abs(signed), return_inverse=True)
        positive = signed > 0.0
        n = len(scores)
        pos = np.bincount(at[positive], minlength=n).astype(np.float64)
        neg = np.bincount(at[~positive], minlength=n).astype(np.float64)
        return scores, neg, pos

    def update(self, event: Mapping[str, Any] | Event) -> "BinaryMonitor":
        """Add one event. The common dict (``y_true`` 0/1 or a bool, a float ``score`` strictly
        inside (0, 1), no ``weight``) is queued: its signed score (``score`` if ``y_true``
        else ``-score``) is appended to a list, and the queue is applied through the three
        parts' vectorised ``update_many`` when it holds :attr:`update_queue_max` events, or
        when anything reads a part (``predictions``, ``scores`` and ``confusion`` are
        properties that apply it first). The state is a function of the multiset of events,
        so it is the one the per-event paths build (``tests/monitors/test_binary_queue.py``).
        Any other event leaves through :meth:`_update_other`, straight into the parts."""
        if event.__class__ is not dict:
            return self._update_other(event)
        try:
            s = event["score"]
            y = event["y_true"]
        except KeyError:  # the parser names the missing field
            return self._update_other(event)
        # y: the ints 0 and 1 by identity (CPython's cached small ints; any other 0/1 takes
        # the accumulators' paths, with the same result); nan fails 0.0 < s
        if s.__class__ is not float or "weight" in event or not (
                y is ZERO_INT or y is ONE_INT or y is True or y is False) or not 0.0 < s < 1.0:
            return self._update_other(event)
        queue = self._queue
        queue.append(s if y else -s)
        if len(queue) >= self.update_queue_max:
            self._apply_queue()
        return self

    def _apply_queue(self) -> None:
        """Give the monitor its parts if it has none (promotion), then apply the queued events
        to them: event by event up to :data:`SMALL_BATCH` of them, else through the parts'
        ``update_many`` (signed score ``v``: ``y_true`` is ``v > 0``, the score ``abs(v)``).
        The one place the small form reaches the parts."""
        state = self.__dict__
        if "_scores" not in state:
            self._make_parts()
        queue = state.get("_queue") or []
        state["_queue"] = []
        if len(queue) <= SMALL_BATCH:
            for v in queue:
                if v > 0.0:
                    self._unit_parts(1, v)
                else:
                    self._unit_parts(0, -v)
            return
        signed = np.array(queue)
        s = np.abs(signed)
        y = (signed > 0.0).view(np.int8).astype(np.int64)
        self._predictions.update_many(s)
        self._scores.update_many(y, s)
        self._confusion.update_many(y, (s >= self.threshold).view(np.int8).astype(np.int64))

    def _parts(self) -> "BinaryMonitor":
        """The monitor with its parts (made if it has none; the queue stays queued)."""
        if "_scores" not in self.__dict__:
            self._make_parts()
        return self

    def _unit_parts(self, y: int, s: float) -> None:
        """One unit-weight event (``y`` 0 or 1) through the three accumulators' own ``update``."""
        self._parts()
        self._predictions.update(s)
        self._scores.update(y, s)
        self._confusion.update(y, 1 if s >= self.threshold else 0)

    def _update_other(self, event: Mapping[str, Any] | Event) -> "BinaryMonitor":
        """:meth:`update` of any event it does not queue: a valid 0/1 truth with a
        finite float score and no weight through the accumulators' own paths (0.0, 1.0,
        margins, exact=True), anything else through the parser."""
        if event.__class__ is dict:
            try:
                s = event["score"]
                y = event["y_true"]
            except KeyError:  # the parser names the missing field
                s = y = None
            if y.__class__ in _BINARY_TRUTH and (y == 0 or y == 1) and s.__class__ is float and -_INF < s < _INF and (
                    "weight" not in event):
                self._unit_parts(1 if y else 0, s)
                return self
        super().update(event)
        return self

    def update_prediction(self, event: Event) -> "BinaryMonitor":
        w = event.weight
        s: Any = event.score  # a float: the parser set it
        self._parts()
        if w == 1.0:
            self._predictions.update(s)
        else:
            self._predictions.update(s, w)
        return self

    def update_predictions(self, events: Sequence[Event]) -> "BinaryMonitor":
        s = np.fromiter([e.score for e in events], dtype=np.float64, count=len(events))
        self._parts()._predictions.update_many(s, batch_weights(events))
        return self

    def update_outcome(self, event: Event) -> "BinaryMonitor":
        y, w = event.y_true, event.weight
        if y is not ONE_INT and y is not ZERO_INT:
            y = binary_label(y)
        s: Any = event.score  # a float: the parser set it
        self._parts()
        if w == 1.0:  # the accumulators' unweighted fast paths
            self._scores.update(y, s)
            self._confusion.update(y, 1 if s >= self.threshold else 0)
        else:
            self._scores.update(y, s, w)
            self._confusion.update(y, 1 if s >= self.threshold else 0, w)
        return self

    def update_outcomes(self, events: Sequence[Event]) -> "BinaryMonitor":
        n = len(events)
        y = batch_labels(events)
        s = np.fromiter([e.score for e in events], dtype=np.float64, count=n)
        w = batch_weights(events)
        self._parts()
        self._scores.update_many(y, s, w)
        self._confusion.update_many(y, (s >= self.threshold).astype(np.int64), w)
        return self

    def update_event(self, event: Event) -> "BinaryMonitor":
        """Both parts, one parsed event. The common event (weight 1, ``y_true`` the int 0 or 1 or
        a bool, a float score strictly inside (0, 1)) joins the small form: its signed score
        (``score`` if ``y_true`` else ``-score``) is queued as :meth:`update` queues it. Any other
        is checked first (:class:`~streammetrics.core.exceptions.InvalidEvent` naming the field,
        nothing changed: ``y_true`` equal to 0 or 1, a finite ``score``, a finite ``weight`` >= 0)
        and goes to the parts."""
        s: Any = event.score
        y = event.y_true
        if s.__class__ is float and 0.0 < s < 1.0 and event.weight == 1.0 and (
                y is ONE_INT or y is ZERO_INT or y is True or y is False):
            queue = self._queue
            queue.append(s if y else -s)
            if len(queue) >= self.update_queue_max:
                self._apply_queue()
            return self
        w = event.weight
        if y is not ONE_INT and y is not ZERO_INT:  # (the parser's labels: cached small ints)
            y = binary_label(y)
        if not _finite_real(s):
            raise InvalidEvent(f"field 'score' must be a finite number, got {s!r:.40}", "score")
        if not (_finite_real(w) and w >= 0):
            raise InvalidEvent(f"field 'weight' must be a finite number >= 0, got {w!r:.40}", "weight")
        self._parts()
        if w == 1.0:  # the accumulators' unweighted fast paths
            self._unit_parts(y, s)
        else:
            self._predictions.update(s, w)
            self._scores.update(y, s, w)
            self._confusion.update(y, 1 if s >= self.threshold else 0, w)
        return self

    #: the small form: the common events as a list of signed scores (see ``Monitor.small_form``)
    small_form = True

    def update_items(self, items: Sequence[Any]) -> "BinaryMonitor":
        """A batch in the small form's input, in order: the common event as its signed score (a
        float ``v``, ``0 < |v| < 1``: ``y_true`` ``v > 0``, score ``|v|``; a columnar batch gives
        them so), any other as its parsed event (:meth:`update_event`). The floats are checked
        first (:class:`~streammetrics.core.exceptions.InvalidEvent`, nothing applied).

        >>> BinaryMonitor().update_items([0.8, -0.3]).to_dict()["state"]
        {'score': [0.3, 0.8], 'y_true': [0, 1]}
        """
        queue = self._queue
        if _signed_scores(items):  # (the common batch: signed scores only, one extend)
            queue += items
            if len(queue) >= self.update_queue_max:
                self._apply_queue()
            return self
        for i, item in enumerate(items):
            if item.__class__ is float and not 0.0 < abs(item) < 1.0:
                raise InvalidEvent(f"items[{i}] must be a signed score, a float v with 0 < |v| < 1, "
                                   f"got {item!r:.40}", "score")
        for item in items:
            if item.__class__ is float:
                queue.append(item)
            else:  # (into the parts, ahead of the queue: the state is a function of the multiset)
                self.update_event(item)
        if len(queue) >= self.update_queue_max:
            self._apply_queue()
        return self

    def update_events(self, events: Sequence[Event]) -> "BinaryMonitor":
        """A batch of parsed events: event by event up to :data:`SMALL_BATCH` events (the common
        ones join the small form), else vectorised into the parts."""
        n = len(events)
        if n <= SMALL_BATCH:
            update = self.update_event
            for event in events:
                update(event)
            return self
        y = batch_labels(events)
        s = np.fromiter([e.score for e in events], dtype=np.float64, count=n)
        w = batch_weights(events)
        self._parts()
        self._predictions.update_many(s, w)
        self._scores.update_many(y, s, w)
        self._confusion.update_many(y, (s >= self.threshold).astype(np.int64), w)
        return self

    def snapshot(self) -> dict[str, Any]:
        """The metrics in plain floats (:func:`~streammetrics.monitors.fast_snapshot.binary_snapshot`:
        scikit-learn's values, None where undefined)."""
        return binary_snapshot(self)

    interval_metrics = BINARY_INTERVALS

    def intervals(self, confidence: float | None = None,
                  metrics: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The snapshot's ``intervals`` and ``insufficient`` (contract section 9): every metric of
        :data:`~streammetrics.kernels.intervals.BINARY_INTERVALS` by
        :func:`~streammetrics.kernels.intervals.binary_interval_columns` (the fleet pass calls the
        same; weighted events on Kish pseudo-counts, all None for a weighted state loaded without its
        sums of squared weights). None without labelled events.

        >>> m = BinaryMonitor().update_many([{"y_true": i % 2, "score": (i % 10) / 10 + 0.05} for i in range(60)])
        >>> record = m.intervals()
        >>> record["intervals"]["confidence"], record["insufficient"]
        (0.95, [])
        >>> m.interval("accuracy") == tuple(record["intervals"]["accuracy"])
        True
        """
        c = self.confidence if confidence is None else check_confidence(confidence)
        sc, cm, pr = self.scores, self.confusion, self.predictions
        if not sc.count:
            return None
        if metrics is None:
            metrics = self.snapshot()
        columns = None
        get = cm.counts().get
        cells = [get((0, 0), 0.0), get((0, 1), 0.0), get((1, 0), 0.0), get((1, 1), 0.0)]
        bounds = (_nan(metrics["roc_auc_low"]), _nan(metrics["roc_auc_high"]), _nan(metrics["log_loss"]),
                  _nan(metrics["brier_score"]))
        if sc.unit_weights and cm.unit_weights:
            # (the predictions are the labelled events when they are as many; a loaded
            # ScoreDistribution counts its events as weighted, so it cannot tell otherwise)
            predictions = pr.count if pr.unit_weights or pr.count == sc.count else math.nan
            lo, hi, neg, pos = sc.interval_levels()
            columns = binary_interval_columns(
                cells, [0], lo, hi, neg, pos, *bounds, predictions, pr.positive_weight, z_value(c))
        else:  # weighted events: Kish pseudo-counts from the exact sums of squared weights
            cell_squares, class_squares, pred_squares = cm.squares(), sc.class_squares(), pr.weight_squares
            if cell_squares is not None and class_squares is not None and pred_squares is not None:
                sq = cell_squares.get
                squares = [sq((0, 0), 0.0), sq((0, 1), 0.0), sq((1, 0), 0.0), sq((1, 1), 0.0), *class_squares,
                           pred_squares]
                lo, hi, neg, pos = sc.interval_levels()
                if len(lo):  # (labelled events of weight 0 only: no level, every interval None)
                    columns = binary_interval_columns(cells, [0], lo, hi, neg, pos, *bounds, pr.total_weight,
                                                      pr.positive_weight, z_value(c), squares)
        return interval_record(BINARY_INTERVALS, columns, 0, c)

    def snapshot_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(self.snapshot(), self.to_dict())`` (many monitors at once: :meth:`snapshot_many`).

        >>> m = BinaryMonitor().update({"y_true": 1, "score": 0.8})
        >>> m.snapshot_state() == (m.snapshot(), m.to_dict())
        True
        """
        return self.snapshot(), self.to_dict()

    @classmethod
    def _small_group(cls, monitors: Sequence[Any]) -> list[int]:
        """Indexes of the monitors the vectorised pass takes: in the small form, holding 1 to
        ``min(FLEET_MAX_EVENTS, events_form_max)`` events, ``exact=False``, of the first such
        one's threshold and confidence."""
        if cls is not BinaryMonitor or not _DIRECT_STATE:
            return []
        chosen: list[int] = []
        first: Any = None
        cap = min(FLEET_MAX_EVENTS, cls.events_form_max)
        for i, m in enumerate(monitors):
            state = m.__dict__
            if m.__class__ is not BinaryMonitor or "_scores" in state or not 0 < len(state["_queue"]) <= cap:
                continue
            if first is None:
                if m.exact:
                    continue
                first = m
            elif m.threshold != first.threshold or m.exact or m.confidence != first.confidence:
                continue
            chosen.append(i)
        return chosen

    @classmethod
    def snapshot_many(cls, monitors: Sequence[Any], include_state: bool = True) -> list[tuple[Any, ...]]:
        """Per monitor ``(snapshot(), to_dict() or None, intervals())``: the monitors in the small
        form in one vectorised pass (:func:`~streammetrics.monitors.fleet_snapshot.binary_snapshot_states`
        over their queues), the others one by one (:meth:`snapshot_state`).

        >>> a = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.3})
        >>> b = BinaryMonitor().update({"y_true": 1, "score": 0.4})
        >>> BinaryMonitor.snapshot_many([a, b])[0] == (*a.snapshot_state(), a.intervals())
        True
        """
        out: list[Any] = [None] * len(monitors)
        chosen = cls._small_group(monitors)
        if chosen:
            records = binary_snapshot_states(monitors[chosen[0]], [monitors[i]._queue for i in chosen])
            for i, record in zip(chosen, records):
                out[i] = record if include_state or record is None else (record[0], None, record[2])
        for i, m in enumerate(monitors):
            if out[i] is None:
                if include_state:
                    metrics, state = m.snapshot_state()
                else:
                    metrics, state = m.snapshot(), None
                out[i] = (metrics, state, m.intervals(metrics=metrics))
        return out

    @classmethod
    def snapshot_texts(cls, monitors: Sequence[Any]) -> list[tuple[str, str, str] | None]:
        """:meth:`snapshot_many` as JSON text for the monitors in the small form: per monitor
        ``(metrics, state, intervals)``, the compact JSON of the two dicts (what ``snapshot_line``
        writes for them) and the intervals' fields as ``window_line`` inserts them, or None
        (:func:`~streammetrics.monitors.fleet_snapshot.binary_snapshot_texts`).

        >>> import json
        >>> m = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.3})
        >>> metrics, state, intervals = BinaryMonitor.snapshot_texts([m.copy()])[0]
        >>> json.loads(state) == m.to_dict()
        True
        """
        out: list[tuple[str, str, str] | None] = [None] * len(monitors)
        chosen = cls._small_group(monitors)
        if chosen:
            texts = binary_snapshot_texts(monitors[chosen[0]], [monitors[i]._queue for i in chosen])
            if len(chosen) == len(monitors):  # (every monitor: the texts in order)
                return texts
            for i, text in zip(chosen, texts):
                out[i] = text
        return out

    @classmethod
    def item_texts(cls, template: Any, item_lists: Sequence[Sequence[Any]]) -> list[tuple[str, str, str] | None]:
        """:meth:`snapshot_texts` of the monitors ``template.empty().update_items(items)`` would be,
        without making them: the lists that would stay in the small form (signed scores only,
        1 to ``min(FLEET_MAX_EVENTS, events_form_max)`` of them) in one vectorised pass over the
        lists as they are (:func:`~streammetrics.monitors.fleet_snapshot.binary_snapshot_texts`),
        None for the others and for a template ``exact=True`` or of a subclass.

        >>> m = BinaryMonitor().update_items([0.8, -0.3])
        >>> BinaryMonitor.item_texts(BinaryMonitor(), [[0.8, -0.3]]) == BinaryMonitor.snapshot_texts([m])
        True
        """
        out: list[tuple[str, str, str] | None] = [None] * len(item_lists)
        if cls is not BinaryMonitor or template.__class__ is not BinaryMonitor or not _DIRECT_STATE or template.exact:
            return out
        cap = min(FLEET_MAX_EVENTS, cls.events_form_max)
        sized = [i for i, items in enumerate(item_lists) if 0 < len(items) <= cap]
        every = chain.from_iterable([item_lists[i] for i in sized])
        if set(map(type, every)) == {float}:  # (floats only: their range checked at once, as _signed_scores)
            signed = np.fromiter(chain.from_iterable([item_lists[i] for i in sized]), dtype=np.float64)
            magnitude = np.abs(signed)
            common = bool(((magnitude < 1.0) & (magnitude > 0.0)).all())
        else:
            common = False
        chosen = sized if common else [i for i in sized if _signed_scores(item_lists[i])]
        if chosen:
            for i, text in zip(chosen, binary_snapshot_texts(template, [item_lists[i] for i in chosen])):
                out[i] = text
        return out


def _signed_scores(items: Sequence[Any]) -> bool:
    """Whether every item is a signed score (a float ``v``, ``0 < |v| < 1``: what
    :meth:`BinaryMonitor.update_items` keeps in the small form)."""
    for v in items:
        if v.__class__ is not float or not -1.0 < v < 1.0 or v == 0.0:
            return False
    return True


#: the state keys :meth:`BinaryMonitor._state` writes directly (another declaration: generic)
_DIRECT_STATE = tuple(k for f in BinaryMonitor.state_fields for k in f.keys) == ("predictions", "scores", "confusion")
#: per (type, threshold, exact): the empty parts promotion copies
_EMPTY_PARTS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
