"""``BinaryMonitor``: a binary classifier's score stream (``y_true`` in {0, 1}, ``score``)."""
from __future__ import annotations

import math
from typing import Any, Generic, Mapping, Sequence, TypeVar

import numpy as np

from streammetrics.core.exceptions import InvalidEvent
from streammetrics.core.state import describe
from streammetrics.core.validation import check_number
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_sum import BUFFER, fold_together
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
from streammetrics.monitors.binary_events import EVENTS_FORM_MAX, events_form, load_events_form
from streammetrics.monitors.binary_packed import (
    ONE_INT,
    ZERO_INT,
    batch_labels,
    binary_label,
    checked_pack,
    pack_binary_event,
)
from streammetrics.monitors.fast_snapshot import binary_snapshot, binary_snapshot_state
from streammetrics.monitors.fleet_snapshot import FLEET_MAX_EVENTS, binary_snapshot_states, binary_snapshot_texts

__all__ = ["BinaryMonitor"]

_INF = math.inf
_BINARY_TRUTH = (int, bool, float)
P = TypeVar("P")
#: batches up to this size are applied event by event (numpy's set-up costs more than it saves)
SMALL_BATCH = 32


def _nan(value: float | None) -> float:
    """A snapshot value as a float for the interval kernels (None: nan)."""
    return math.nan if value is None else value


class _QueuedPart(Generic[P]):
    """A part of :class:`BinaryMonitor` (kept in ``_<name>``): reading it applies the events
    :meth:`BinaryMonitor.update` queued first; setting it applies them too (to the parts being
    replaced: the others keep them), then gives the monitor a queue of its own (a copy or an
    empty monitor made from this one's ``__dict__`` shares none)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = "_" + name

    def __get__(self, monitor: "BinaryMonitor | None", owner: type | None = None) -> P:
        if monitor is None:
            return self  # type: ignore[return-value]  # (the class attribute: the descriptor)
        if monitor._queue:
            monitor._apply_queue()
        return monitor.__dict__[self.attr]

    def __set__(self, monitor: "BinaryMonitor", value: P) -> None:
        state = monitor.__dict__
        if state.get("_queue"):
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

    def copy(self) -> "BinaryMonitor":
        """An independent monitor with the same state (the queued events applied first: the
        copy starts from this one's ``__dict__``)."""
        if self._queue:
            self._apply_queue()
        return super().copy()

    def _state(self) -> dict[str, Any]:
        """The events form while it applies (:func:`~streammetrics.monitors.binary_events.events_form`),
        else the three parts' ``to_dict()`` (as the declared ``part`` fields write them)."""
        small = events_form(self)
        return self._parts_state() if small is None else small

    def _parts_state(self) -> dict[str, Any]:
        """The parts' layout: the three parts' ``to_dict()`` (as the declared ``part`` fields write them)."""
        if not _DIRECT_STATE:
            return super()._state()
        return {"predictions": self.predictions.to_dict(), "scores": self.scores.to_dict(),
                "confusion": self.confusion.to_dict()}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        """The parts' layout, or the events form (``score`` and ``y_true``: the predictions added back)."""
        if "score" in state or "y_true" in state:
            load_events_form(self, state)
            self._refresh()
        else:
            super()._load_state(state)

    def empty(self) -> "BinaryMonitor":
        """A new monitor with this one's configuration and no events, built without the
        constructors (:func:`~streammetrics.monitors.base.empty_like`; the window engine
        makes one per key and window). Called on an empty monitor (a factory's template).

        >>> BinaryMonitor(threshold=0.7).empty() == BinaryMonitor(threshold=0.7)
        True
        """
        if self.count or self.labeled:
            raise ValueError("empty() is called on an empty monitor (a template)")
        return empty_like(self)

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen
        return self.predictions.count

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        return self.predictions.total_weight

    @property
    def score_sum(self) -> float:
        """``sum(weight * score)`` over every prediction."""
        return self.predictions.score_sum

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
        """Apply the queued events to the parts: event by event up to :data:`SMALL_BATCH` of
        them, else through the parts' ``update_many`` (signed score ``v``: ``y_true`` is
        ``v > 0``, the score ``abs(v)``)."""
        queue, self._queue = self._queue, []
        if len(queue) <= SMALL_BATCH:
            for v in queue:
                if v > 0.0:
                    if not self._unit_event(1, v):
                        self._unit_parts(1, v)
                elif not self._unit_event(0, -v):
                    self._unit_parts(0, -v)
            return
        signed = np.array(queue)
        s = np.abs(signed)
        y = (signed > 0.0).view(np.int8).astype(np.int64)
        self._predictions.update_many(s)
        self._scores.update_many(y, s)
        self._confusion.update_many(y, (s >= self.threshold).view(np.int8).astype(np.int64))

    def _unit_parts(self, y: int, s: float) -> None:
        """One unit-weight event (``y`` 0 or 1) through the three accumulators' own ``update``."""
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

    def _unit_event(self, y: int, s: float) -> bool:
        """The common event (weight 1, ``y`` 0 or 1, a float ``s`` strictly inside (0, 1)) in
        one frame: what ``predictions.update(s)``, ``scores.update(y, s)`` and
        ``confusion.update(y, s >= threshold)`` do for it, with the score's histogram key
        computed once when both histograms are on one binning, the confusion cell counted in
        the matrix's pending counts and both exact-sum buffers folded together. False
        (nothing changed) when the monitor is ``exact=True``: the accumulators' own paths
        then apply it."""
        sc = self._scores
        pr = self._predictions
        sf = sc._fast
        pf = pr._fast
        q = 1.0 - s
        if sf is not None:  # log grid: the key from the float's bits (see LogGridBinning.key)
            hists, events, unit, _, shift, rnd, c, as_float, as_int, inc = sf
            if s < 0.5:
                as_float[0] = s
                b = as_int[0]
                k: Any = (b + rnd) >> shift
            else:
                as_float[0] = q
                b = as_int[0]
                k = c - ((b + rnd) >> shift)
            if pf is not None:  # the predictions' histogram holds fewer keys: maybe a finer grid
                ph, pshift, prnd, pc, psums, threshold, pterms, _, _, pinc = pf
                if pshift == shift:
                    pk: Any = k
                elif s < 0.5:
                    pk = (b + prnd) >> pshift
                else:
                    pk = pc - ((b + prnd) >> pshift)
        else:
            xf = sc._xfast
            if xf is None:  # exact=True
                return False
            hists, events, unit, _, inc = xf
            k = s  # exact while small: the key is the score
            if pf is not None:  # predictions on the grid (more predictions than labelled ones)
                ph, pshift, prnd, pc, psums, threshold, pterms, as_float, as_int, pinc = pf
                as_float[0] = s if s < 0.5 else q
                if s < 0.5:
                    pk = (as_int[0] + prnd) >> pshift
                else:
                    pk = pc - ((as_int[0] + prnd) >> pshift)
        if pf is None:  # predictions exact while small
            if pr._max_bins is None:  # exact=True
                return False
            ph = pr._hist.weights
            psums = pr._sums
            pterms = psums[1].terms
            pk = s
            threshold = self.threshold
            pinc = pr._inc
        # (the increments: 1.0, or UNIT in units mode; an exact key is mostly a new one:
        # looked up with get, an exception per new key would cost more than the call)
        if pf is not None:
            try:
                ph[pk] += pinc
            except KeyError:
                ph[pk] = pinc
                if len(ph) > pr._max_bins:  # type: ignore[operator]  # an int on a grid
                    pr._collapse()
        else:
            old = ph.get(pk)
            ph[pk] = pinc if old is None else old + pinc
            if old is None and len(ph) > pr._max_bins:  # type: ignore[operator]  # an int unless exact=True
                pr._collapse()
        psums[0] += 1
        pterms.append(s)  # the score sum: buffered, folded exactly (kernels.exact_sum)
        h = hists[y]
        if sf is not None:
            try:
                h[k] += inc
            except KeyError:
                h[k] = inc
                if len(hists[0]) + len(hists[1]) > sc._max_bins:  # type: ignore[operator]  # an int on a grid
                    sc._collapse()
        else:
            old = h.get(k)
            h[k] = inc if old is None else old + inc
            if old is None and len(hists[0]) + len(hists[1]) > sc._max_bins:  # type: ignore[operator]  # an int unless exact=True
                sc._collapse()
        events[y] += 1
        unit.append(s if y else -s)  # log-loss and Brier terms: buffered, folded exactly
        pending = self._confusion._pending  # confusion cells: index y_true + 2 * y_pred
        if s >= threshold:
            psums[2] += 1
            pending[y + 2] += 1
        else:
            pending[y] += 1
        if len(unit) >= BUFFER or len(pterms) >= BUFFER:
            fold_together(sc._sums, psums[1])
        return True

    def update_prediction(self, event: Event) -> "BinaryMonitor":
        w = event.weight
        s: Any = event.score  # a float: the parser set it
        if w == 1.0:
            self._predictions.update(s)
        else:
            self._predictions.update(s, w)
        return self

    def update_predictions(self, events: Sequence[Event]) -> "BinaryMonitor":
        s = np.fromiter([e.score for e in events], dtype=np.float64, count=len(events))
        self._predictions.update_many(s, batch_weights(events))
        return self

    def update_outcome(self, event: Event) -> "BinaryMonitor":
        y, w = event.y_true, event.weight
        if y is not ONE_INT and y is not ZERO_INT:
            y = binary_label(y)
        s: Any = event.score  # a float: the parser set it
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
        self._scores.update_many(y, s, w)
        self._confusion.update_many(y, (s >= self.threshold).astype(np.int64), w)
        return self

    def update_event(self, event: Event) -> "BinaryMonitor":
        y, w = event.y_true, event.weight
        if y is not ONE_INT and y is not ZERO_INT:  # (the parser's labels: cached small ints)
            y = binary_label(y)
        s: Any = event.score  # a float: the parser set it
        if w == 1.0:  # the accumulators' unweighted fast paths
            if not (0.0 < s < 1.0 and self._unit_event(y, s)):
                self._unit_parts(y, s)
        else:
            self._predictions.update(s, w)
            self._scores.update(y, s, w)
            self._confusion.update(y, 1 if s >= self.threshold else 0, w)
        return self

    #: the form in which a window engine queues an event for this monitor
    #: (:func:`~streammetrics.monitors.binary_packed.pack_binary_event`): the common event
    #: (weight 1, ``y_true`` 0/1 or a bool, a float score strictly inside (0, 1)) as its
    #: signed score (one float, the form of :meth:`update`'s queue), any other event as itself;
    #: :meth:`update_packed` applies a list of them
    pack_event = staticmethod(pack_binary_event)

    def event_packer(self) -> Any:
        """The function a window engine queues this monitor's events with: :meth:`pack_event`,
        checking every event it does not pack (:func:`~streammetrics.monitors.binary_packed.
        checked_pack`: :class:`~streammetrics.core.exceptions.InvalidEvent` naming the field
        for an event built without the parser that the monitor cannot take, before it is
        queued); None for a subclass: its own update paths then see every event as an ``Event``."""
        return checked_pack if type(self) is BinaryMonitor else None

    @staticmethod
    def check_packed(item: Any) -> float:
        """A packed event read back from a checkpoint: the signed score of a common event
        (a float ``v`` with ``0 < |v| < 1``); ``ValueError`` otherwise."""
        if item.__class__ is not float or not 0.0 < abs(item) < 1.0:
            raise ValueError(f"a packed binary event must be a float v with 0 < |v| < 1, got {item!r:.80}")
        return item

    def update_packed(self, items: Sequence[float | Event]) -> "BinaryMonitor":
        """Apply events in :meth:`pack_event`'s form, in order: signed scores join the queue of
        :meth:`update` (applied at :attr:`update_queue_max` or at the next read of a part),
        other events go through :meth:`update_event`. The whole list is checked first
        (:class:`~streammetrics.core.exceptions.InvalidEvent`, nothing applied): a float must
        be a signed score (``0 < |v| < 1``), an event one this monitor takes (:func:`checked_pack`)."""
        for i, item in enumerate(items):
            if isinstance(item, float):
                if not 0.0 < abs(item) < 1.0:
                    raise InvalidEvent(f"items[{i}] must be a packed binary event, a float v with 0 < |v| < 1, "
                                       f"got {item!r:.40}", "score")
            else:
                checked_pack(item)
        queue = self._queue
        for item in items:
            if isinstance(item, float):
                queue.append(item)
            else:  # (straight into the parts, ahead of the queue: the state is a function of the multiset)
                self.update_event(item)
        if len(queue) >= self.update_queue_max:
            self._apply_queue()
        return self

    def update_events(self, events: Sequence[Event]) -> "BinaryMonitor":
        """A batch of parsed events: vectorised, or event by event up to :data:`SMALL_BATCH`
        events (numpy's per-call set-up costs more than a few events; the window engine's
        panes of sparse keys hold a handful)."""
        n = len(events)
        if n <= SMALL_BATCH:
            update = self.update_event
            for event in events:
                update(event)
            return self
        y = batch_labels(events)
        s = np.fromiter([e.score for e in events], dtype=np.float64, count=n)
        w = batch_weights(events)
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
                columns = binary_interval_columns(
                    cells, [0], lo, hi, neg, pos, *bounds, pr.total_weight, pr.positive_weight, z_value(c), squares)
        return interval_record(BINARY_INTERVALS, columns, 0, c)

    def snapshot_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(self.snapshot(), self.to_dict())``, computed together for a small window (what a
        window engine publishes for each closed window:
        :func:`~streammetrics.monitors.fast_snapshot.binary_snapshot_state`).

        >>> m = BinaryMonitor().update({"y_true": 1, "score": 0.8})
        >>> m.snapshot_state() == (m.snapshot(), m.to_dict())
        True
        """
        if not _DIRECT_STATE or type(self) is not BinaryMonitor:  # a subclass may write either otherwise
            return self.snapshot(), self.to_dict()
        return binary_snapshot_state(self)

    @property
    def snapshot_states_max_events(self) -> int:
        """Most events of a pane :meth:`snapshot_states` takes (more: None, built window by
        window): the vectorised pass's bound, within the events form's."""
        return min(FLEET_MAX_EVENTS, self.events_form_max)

    def snapshot_states(
        self, panes: Sequence[Sequence[Event | float]],
    ) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None]:
        """Called on an empty monitor (a template): per list of parsed events (or their
        :meth:`pack_event` forms), the
        :meth:`snapshot_state` of a new monitor of this configuration given those events, with its
        :meth:`intervals` third, or
        None where the caller must build that monitor (the window engine closing many small
        windows at once: :func:`~streammetrics.monitors.fleet_snapshot.binary_snapshot_states`).

        >>> from streammetrics.events.parser import EventParser
        >>> parse = EventParser("binary").parse
        >>> events = [parse({"ts": 0, "model": "m", "y_true": y, "score": s}) for y, s in [(1, 0.8), (0, 0.3)]]
        >>> m = BinaryMonitor().update_events(events)
        >>> BinaryMonitor().snapshot_states([events])[0] == (*m.snapshot_state(), m.intervals())
        True
        """
        if not _DIRECT_STATE or type(self) is not BinaryMonitor:
            return [None] * len(panes)
        return binary_snapshot_states(self, panes)

    def snapshot_texts(self, panes: Sequence[Sequence[Event | float]]) -> list[tuple[str, str, str] | None]:
        """:meth:`snapshot_states` as JSON text: per pane ``(metrics, state, intervals)``, the
        compact JSON of the two dicts (what ``snapshot_line`` writes for them) and the intervals'
        fields as ``window_line`` inserts them, or None
        (:func:`~streammetrics.monitors.fleet_snapshot.binary_snapshot_texts`).

        >>> import json
        >>> from streammetrics.events.parser import EventParser
        >>> parse = EventParser("binary").parse
        >>> events = [parse({"ts": 0, "model": "m", "y_true": y, "score": s}) for y, s in [(1, 0.8), (0, 0.3)]]
        >>> metrics, state, intervals = BinaryMonitor().snapshot_texts([events])[0]
        >>> json.loads(state) == BinaryMonitor().update_events(events).to_dict()
        True
        """
        if not _DIRECT_STATE or type(self) is not BinaryMonitor:
            return [None] * len(panes)
        return binary_snapshot_texts(self, panes)


#: the state keys :meth:`BinaryMonitor._state` writes directly (another declaration: generic)
_DIRECT_STATE = tuple(k for f in BinaryMonitor.state_fields for k in f.keys) == ("predictions", "scores", "confusion")
