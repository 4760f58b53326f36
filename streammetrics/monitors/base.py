"""The monitor base class: event parsing, the label-free / label-based split, snapshot helpers.

A monitor is one accumulator per stream key bundling what its task reports. Its state has
two parts:

* the **label-free part** sees every prediction (``update_prediction(event)`` /
  ``update_predictions(events)``; such events may lack ``y_true``): prediction counts,
  score or prediction distributions. :attr:`Monitor.count` counts these predictions;
* the **label-based part** sees the predictions whose truth is known
  (``update_outcome(event)`` / ``update_outcomes(events)``: the same prediction, now with
  its ``y_true``): every metric that compares predictions with truth.
  :attr:`Monitor.labeled` counts these events.

``update_event(event)`` / ``update_events(events)`` feed both parts at once (a prediction
that arrives with its label: today's hot path, written out per task for speed), and
``update(event_dict)`` / ``update_many(event_dicts)`` parse dicts first.
With delayed labels a prediction goes through ``update_prediction`` when it arrives and
through ``update_outcome`` when its label does; without them ``update_event`` does both, and
``labeled == count``.

Version 2 of the dict layout holds both parts; version-1 dicts (label-based part only)
are read through each monitor's ``migrations[1]``, which rebuilds the label-free part from
the label-based one where the information is there (and marks sums it cannot recover as
unknown, ``null``).
"""
from __future__ import annotations

import json
import math
import warnings
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.state import Field
from streammetrics.events.parser import Event, EventParser, Rejection
from streammetrics.metrics.binary_scores import one_element_score

__all__ = ["Monitor", "part", "json_number", "quiet", "quiet_pair", "batch_weights", "empty_like"]


def json_number(value: Any) -> float | int | None:
    """A finite metric value as a plain float (ints stay ints); NaN/inf and None become None."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def quiet(fn: Any, *args: Any, **kwargs: Any) -> float | None:
    """Call a metric; undefined (warning, NaN or ValueError) becomes None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return json_number(fn(*args, **kwargs))
        except (ValueError, ZeroDivisionError):
            return None


def quiet_pair(fn: Any) -> tuple[float | None, float | None]:
    """:func:`quiet` for a metric returning a pair (e.g. ROC AUC bounds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            low, high = fn()
        except ValueError:
            return None, None
    return json_number(low), json_number(high)


_BUILTIN = (str, int, float, bool, type(None))
A = TypeVar("A", bound=Accumulator)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (and mappings / sequences of them) as the built-in values
    the event parser reads: ``np.int64(1)`` -> ``1``, ``np.bool_(True)`` -> ``True``,
    ``ndarray`` -> ``list`` (accumulators accept the same values directly)."""
    cls = value.__class__
    if cls in _BUILTIN:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):  # a scores object: keys as JSON names them (1 -> "1", True -> "true")
        return {_json_key(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _json_key(key: Any) -> Any:
    return key if key.__class__ is str or key.__class__ not in _BUILTIN else json.dumps(key)


def batch_weights(events: Sequence[Event]) -> np.ndarray | None:
    """Batch weights, or None when every event has weight 1 (the unweighted fast path)."""
    weights = [e.weight for e in events]
    for w in weights:
        if w != 1.0:
            return np.asarray(weights, dtype=np.float64)
    return None


def part(name: str, make: Callable[[Any], Accumulator]) -> Field:
    """A monitor's sub-accumulator as a declared state field (written as its ``to_dict()``)."""

    def decode(raw: Any, mon: Any, loaded: Mapping[str, Any]) -> Accumulator:
        current = getattr(mon, name)
        sub = type(current).from_dict(raw)
        if sub._config() != current._config():
            raise ValueError(f"has configuration {sub._config()} != {current._config()}")
        return sub

    return Field(name, make, "accumulator", attrs=name, decode=decode)


def empty_like(template: A) -> A:
    """A new accumulator of ``template``'s type and configuration holding no events, built
    without its constructor: ``template``'s attributes (its configuration, validated when it
    was built) are copied and every declared state field is set to its default, the
    sub-accumulators of ``part`` fields likewise, recursively. ~5x cheaper than constructing
    a ``BinaryMonitor`` (one per key and window at fleet scale, issue 12).

    ``template`` must be empty, and its type must keep no mutable attribute other than its
    declared state (they would be shared): :meth:`Monitor.empty` offers it where that holds.
    """
    cls = type(template)
    fields = cls.state_fields
    plan = _EMPTY_PLANS.get(cls)
    if plan is None or plan[0] is not fields:
        plan = _EMPTY_PLANS[cls] = (fields, tuple(
            (f.kind == "accumulator", f._multi, f._attrs, f.default) for f in fields))
    new = cls.__new__(cls)
    new.__dict__.update(template.__dict__)
    for is_part, multi, attrs, default in plan[1]:  # Field.get / Field.set, inlined
        value = empty_like(getattr(template, attrs[0])) if is_part else default(new)
        if multi:
            for a, v in zip(attrs, value):
                setattr(new, a, v)
        else:
            setattr(new, attrs[0], value)
    new._refresh()
    return new


# per accumulator type: (its state_fields, (is a part, multi-attribute, attrs, default) per field)
_EMPTY_PLANS: dict[type, tuple[Any, tuple[tuple[bool, bool, tuple[str, ...], Callable[[Any], Any]], ...]]] = {}


class Monitor(Accumulator):
    """Base class: parsing of event dicts, the two parts, the protocol over declared state."""

    version = 2
    task: ClassVar[str] = ""
    #: state keys of the label-based sub-accumulators (they must agree on their count)
    parts: ClassVar[tuple[str, ...]] = ()
    #: the event fields the task reads; others (ts, model, segment, id: the window engine's
    #: business) are ignored by ``update``
    fields: ClassVar[tuple[str, ...]] = ("y_true", "weight")

    def _parser(self) -> EventParser:
        parser = self.__dict__.get("_event_parser")
        if parser is None:
            parser = self._event_parser = EventParser(self.task, require_key=False, **self._parser_options())
        return parser

    def _parser_options(self) -> dict[str, Any]:
        return {}

    def _parse(self, event: Any) -> Event:
        if isinstance(event, Event):
            return event
        if isinstance(event, Mapping):
            event = {k: _plain(one_element_score(event[k]) if k == "score" else event[k])
                     for k in self.fields if k in event}
        parsed = self._parser().parse(event)
        if isinstance(parsed, Rejection):
            raise ValueError(f"event rejected: {parsed.reason}")
        return parsed

    def parse_event(self, event: Mapping[str, Any] | Event) -> Event:
        """``event`` (a dict with the contract's fields, or an Event) as :meth:`update` reads it;
        ValueError (one line, naming the field) when the monitor cannot take it."""
        return self._parse(event)

    def parse_prediction(self, event: Mapping[str, Any] | Event) -> Event:
        """A prediction whose label comes later (``y_true`` absent or None), checked as
        :meth:`parse_event` checks the rest of it; its ``y_true`` is None. For
        :meth:`update_prediction` now and :meth:`update_outcome` once the label is known."""
        if isinstance(event, Event):
            if event.y_true is not None:
                raise ValueError("event rejected: a prediction awaiting its label has no y_true")
            return event
        if not isinstance(event, Mapping):
            return self._parse(event)  # the parser says why
        if event.get("y_true") is not None:
            raise ValueError("event rejected: a prediction awaiting its label has no field 'y_true' "
                             "(update() takes a prediction with its label)")
        probe = {k: event[k] for k in self.fields if k in event and k != "y_true"}
        if self.task == "labels":
            if "y_pred" not in probe:
                raise ValueError("event rejected: missing field 'y_pred'")
            probe["y_true"] = probe["y_pred"]  # a label of the prediction's own kind
        elif self.task == "multiclass":
            probe["y_true"] = (self._parser().classes or [None])[0]
        else:
            probe["y_true"] = 0.0 if self.task == "regression" else 0
        parsed = self._parse(probe)
        parsed.y_true = None
        return parsed

    # -------------------------------------------------------------- protocol
    def update(self, event: Mapping[str, Any] | Event) -> "Monitor":
        """Add one prediction event with its label (a dict with the contract's fields, or a
        parsed Event) to both parts."""
        self.update_event(self._parse(event))
        return self

    def update_many(self, events: Iterable[Mapping[str, Any] | Event]) -> "Monitor":
        """Add a batch of events to both parts; every event is validated before any is applied."""
        parsed = []
        for i, event in enumerate(events):
            try:
                parsed.append(self._parse(event))
            except ValueError as exc:
                raise ValueError(f"events[{i}]: {exc}") from None
        if parsed:
            self.update_events(parsed)
        return self

    def update_prediction(self, event: Event) -> "Monitor":  # pragma: no cover - abstract
        """Label-free part only: one parsed prediction (``y_true`` may be missing)."""
        raise NotImplementedError

    def update_predictions(self, events: Sequence[Event]) -> "Monitor":
        """Label-free part only: a batch of parsed predictions."""
        for e in events:
            self.update_prediction(e)
        return self

    def update_outcome(self, event: Event) -> "Monitor":  # pragma: no cover - abstract
        """Label-based part only: a parsed prediction with its ``y_true``."""
        raise NotImplementedError

    def update_outcomes(self, events: Sequence[Event]) -> "Monitor":  # pragma: no cover - abstract
        """Label-based part only: a batch of parsed predictions with their ``y_true``."""
        raise NotImplementedError

    def update_event(self, event: Event) -> "Monitor":
        """Both parts: a parsed prediction that arrives with its label."""
        self.update_prediction(event)
        return self.update_outcome(event)

    def update_events(self, events: Sequence[Event]) -> "Monitor":
        """Both parts: a batch of parsed predictions with their labels."""
        self.update_predictions(events)
        return self.update_outcomes(events)

    def snapshot(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    #: True for a type that keeps a cheap small form while it holds few events: its
    #: :meth:`update_event` appends to it (a window engine in batch mode gives such a monitor its
    #: events one by one instead of queueing them for :meth:`update_events`), and its
    #: :meth:`snapshot_many` summarises many small monitors at once (a window engine holds its
    #: small closed windows until the next poll to build them together)
    small_form: ClassVar[bool] = False
    #: True for a type whose :meth:`snapshot_many` builds many small monitors at once (without a
    #: small form): a window engine holds its small closed windows until the next poll likewise
    snapshots_together: ClassVar[bool] = False

    @property
    def updates_commute(self) -> bool:
        """Whether the state after any updates is a function of their multiset: the same in any
        order and grouping (:meth:`update_predictions` / :meth:`update_outcomes` of a batch equal
        to one by one, predictions and outcomes apart). A window engine may then queue a
        monitor's delayed-label updates and apply them together. True here (exact sums and
        counts); a type whose state depends on arrival order says False."""
        return True

    def update_items(self, items: Sequence[Any]) -> "Monitor":
        """Both parts: a batch of events given in this type's small form where it has one (a
        columnar batch: ``BinaryMonitor`` takes the common event as its signed score), parsed
        events otherwise. This default: :meth:`update_events`."""
        return self.update_events(items)

    @classmethod
    def snapshot_many(cls, monitors: Sequence["Monitor"], include_state: bool = True) -> list[tuple[Any, ...]]:
        """Per monitor (each of this type), ``(snapshot(), to_dict() or None, intervals())``:
        what a window engine publishes for the windows it closes together. This default is a
        loop; a type may compute many small monitors at once (``BinaryMonitor``: one vectorised pass).

        >>> from streammetrics.monitors import RegressionMonitor
        >>> m = RegressionMonitor().update({"y_true": 1.0, "y_pred": 1.5})
        >>> RegressionMonitor.snapshot_many([m])[0][0] == m.snapshot()
        True
        """
        out = []
        for m in monitors:
            metrics = m.snapshot()
            out.append((metrics, m.to_dict() if include_state else None, m.intervals(metrics=metrics)))
        return out

    @classmethod
    def snapshot_texts(cls, monitors: Sequence["Monitor"]) -> list[tuple[str, str, str] | None]:
        """Per monitor, :meth:`snapshot_many`'s record as JSON text ``(metrics, state, intervals)``
        where the type writes it directly, else None (this default: None for every monitor; the
        window engine then encodes the record)."""
        return [None] * len(monitors)

    @classmethod
    def item_texts(cls, template: "Monitor", item_lists: Sequence[Sequence[Any]]) -> list[tuple[str, str, str] | None]:
        """Per list of events in the small form's input (:meth:`update_items`, one event an item),
        :meth:`snapshot_texts` of the monitor ``template.empty().update_items(items)`` would be,
        written without making that monitor where the type can, else None (this default: None for
        every list; a window engine then makes the monitor). ``template``: an empty monitor of the
        configuration."""
        return [None] * len(item_lists)

    #: the confidence of the intervals a snapshot carries (contract section 9; not part of the
    #: state: a window engine sets it on its template and the monitors made from it inherit it)
    confidence: float = 0.95

    def intervals(self, confidence: float | None = None,
                  metrics: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """``{"intervals": {"confidence": c, "<metric>": [low, high] | None, ...}, "insufficient":
        [...]}`` of the labelled events (:mod:`streammetrics.kernels.intervals`), None without
        labelled events or for a task without intervals. ``confidence`` defaults to
        :attr:`confidence`; ``metrics``: this monitor's :meth:`snapshot`, when the caller has it."""
        return None

    def interval(self, metric: str, confidence: float = 0.95) -> tuple[float, float] | None:
        """The ``(low, high)`` confidence interval of one snapshot metric, None where the snapshot
        writes null (too few events, weights other than 1, undefined). ``ValueError`` for a
        metric without an interval."""
        from streammetrics.kernels.intervals import check_confidence

        record = self.intervals(check_confidence(confidence))
        names = self.interval_metrics
        if metric not in names:
            raise ValueError(f"metric must be one of {', '.join(names) or '(none)'}, got {metric!r:.40}")
        value = None if record is None else record["intervals"][metric]
        return None if value is None else (value[0], value[1])

    #: the snapshot metrics :meth:`intervals` covers, in order
    interval_metrics: ClassVar[tuple[str, ...]] = ()

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen (label-free part)
        """Predictions seen (the label-free part)."""
        raise NotImplementedError

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        """Summed weight of the predictions seen."""
        raise NotImplementedError

    @property
    def labeled(self) -> int:
        """Events in the label-based part (predictions with their label)."""
        return getattr(self, self.parts[0]).count

    def _check_state(self, loaded: dict[str, Any]) -> None:
        counts = {loaded[name].count for name in self.parts}
        if len(counts) > 1:
            raise ValueError(f"sub-accumulators disagree on the event count: {sorted(counts)}")
