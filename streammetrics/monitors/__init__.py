"""Monitors: one object per stream key bundling the accumulators of a prediction task.

A monitor takes whole prediction events (contract section 2) and reports every metric its
task supports in one JSON-safe :meth:`Monitor.snapshot` (``None`` where a metric is
undefined). Monitors follow the accumulator protocol, so windows merge them pane by pane
and checkpoints store them with ``to_dict``.

=====================  ======================================================================
monitor                accumulators
=====================  ======================================================================
``BinaryMonitor``      ``BinaryScores`` (AUC and bounds, AP, log loss, Brier) and a
                       ``ConfusionMatrix`` of ``score >= threshold`` (labels 0/1)
``MulticlassMonitor``  ``MulticlassScores`` (top-k, log loss, OvR AUC) and the arg-max
                       ``ConfusionMatrix``
``LabelMonitor``       ``ConfusionMatrix`` of hard labels
``RegressionMonitor``  ``Regression``
=====================  ======================================================================

Each has ``update(event)`` for one event dict (or a parsed :class:`~streammetrics.stream.events.Event`),
``update_many(events)`` for a list of them (all validated before any is applied), and the
fast paths ``update_event`` / ``update_events`` used by the window engine on events it has
already parsed.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, ClassVar, Hashable, Iterable, Mapping, Sequence

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.state import Field
from streammetrics.core.validation import check_number
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.metrics.regression import Regression
from streammetrics.stream.events import Event, EventParser, Rejection

__all__ = ["Monitor", "BinaryMonitor", "MulticlassMonitor", "LabelMonitor", "RegressionMonitor", "make_monitor"]

_NAN = math.nan
_INF = math.inf
_BINARY_TRUTH = (int, bool, float)
_LABEL_KINDS = {bool: "bool", int: "number", float: "number", str: "str"}


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


def _quiet(fn: Any, *args: Any, **kwargs: Any) -> float | None:
    """Call a metric; undefined (warning, NaN or ValueError) becomes None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return json_number(fn(*args, **kwargs))
        except (ValueError, ZeroDivisionError):
            return None


class Monitor(Accumulator):
    """Base class: parsing of event dicts and the protocol over named sub-accumulators."""

    task: ClassVar[str] = ""
    #: attribute names of the sub-accumulators, in state order
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
            event = {k: event[k] for k in self.fields if k in event}
        parsed = self._parser().parse(event)
        if isinstance(parsed, Rejection):
            raise ValueError(f"event rejected: {parsed.reason}")
        return parsed

    # -------------------------------------------------------------- protocol
    def update(self, event: Mapping[str, Any] | Event) -> "Monitor":
        """Add one prediction event (a dict with the contract's fields, or a parsed Event)."""
        self.update_event(self._parse(event))
        return self

    def update_many(self, events: Iterable[Mapping[str, Any] | Event]) -> "Monitor":
        """Add a batch of events; every event is validated before any is applied."""
        parsed = []
        for i, event in enumerate(events):
            try:
                parsed.append(self._parse(event))
            except ValueError as exc:
                raise ValueError(f"events[{i}]: {exc}") from None
        if parsed:
            self.update_events(parsed)
        return self

    def update_event(self, event: Event) -> "Monitor":  # pragma: no cover - abstract
        raise NotImplementedError

    def update_events(self, events: Sequence[Event]) -> "Monitor":  # pragma: no cover - abstract
        raise NotImplementedError

    def snapshot(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def count(self) -> int:  # type: ignore[override]
        return getattr(self, self.parts[0]).count

    @property
    def total_weight(self) -> float:  # type: ignore[override]
        return getattr(self, self.parts[0]).total_weight

    def _check_state(self, loaded: dict[str, Any]) -> None:
        counts = {loaded[name].count for name in self.parts}
        if len(counts) > 1:
            raise ValueError(f"sub-accumulators disagree on the event count: {sorted(counts)}")


def part(name: str, make: Callable[[Any], Accumulator]) -> Field:
    """A monitor's sub-accumulator as a declared state field (written as its ``to_dict()``)."""

    def decode(raw: Any, mon: Any, loaded: Mapping[str, Any]) -> Accumulator:
        current = getattr(mon, name)
        sub = type(current).from_dict(raw)
        if sub._config() != current._config():
            raise ValueError(f"has configuration {sub._config()} != {current._config()}")
        return sub

    return Field(name, make, "accumulator", attrs=name, decode=decode)


def _weights(events: Sequence[Event]) -> np.ndarray | None:
    """Batch weights, or None when every event has weight 1 (the unweighted fast path)."""
    weights = [e.weight for e in events]
    for w in weights:
        if w != 1.0:
            return np.asarray(weights, dtype=np.float64)
    return None


class BinaryMonitor(Monitor):
    """Binary task: ``y_true`` in {0, 1}, ``score`` of the positive class.

    Snapshot: ``accuracy``, ``balanced_accuracy``, ``precision``, ``recall``, ``f1``,
    ``specificity``, ``matthews_corrcoef`` of ``score >= threshold`` (positive class 1);
    ``roc_auc`` with its guaranteed bounds ``roc_auc_low``/``roc_auc_high``,
    ``average_precision``, ``log_loss``, ``brier_score`` (None once a score outside [0, 1]
    was seen), ``positive_rate`` (weighted share of ``y_true == 1``), ``predicted_positive_rate``,
    ``mean_score``, ``count`` and ``total_weight``.
    """

    type_name = "BinaryMonitor"
    task = "binary"
    parts = ("scores", "confusion")
    fields = ("y_true", "score", "weight")
    state_fields = (
        part("scores", lambda m: BinaryScores(exact=m.exact)),
        part("confusion", lambda m: ConfusionMatrix(labels=[0, 1])),
        # sum of weight * score, for mean_score
        Field("score_sum", lambda m: 0.0, "number", attrs="score_sum"),
    )

    def __init__(self, threshold: float = 0.5, exact: bool = False) -> None:
        self.threshold = check_number(threshold, "threshold")
        self.exact = bool(exact)
        self.reset()

    def _config(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "exact": self.exact}

    def update(self, event: Mapping[str, Any] | Event) -> "BinaryMonitor":
        """Add one event; an ``{"y_true": 0/1, "score": float}`` dict takes an inlined fast path."""
        if event.__class__ is dict and "weight" not in event:
            y = event.get("y_true")
            s = event.get("score")
            if y.__class__ in _BINARY_TRUTH and (y == 0 or y == 1) and s.__class__ is float and -_INF < s < _INF:
                y = 1 if y else 0
                self.scores.update(y, s)
                self.confusion.update(y, 1 if s >= self.threshold else 0)
                self.score_sum += s
                return self
        return super().update(event)  # type: ignore[return-value]

    def update_event(self, event: Event) -> "BinaryMonitor":
        y, s, w = event.y_true, event.score, event.weight
        if w == 1.0:  # the accumulators' unweighted fast paths
            self.scores.update(y, s)
            self.confusion.update(y, 1 if s >= self.threshold else 0)
            self.score_sum += s
        else:
            self.scores.update(y, s, w)
            self.confusion.update(y, 1 if s >= self.threshold else 0, w)
            self.score_sum += w * s
        return self

    def update_events(self, events: Sequence[Event]) -> "BinaryMonitor":
        y = np.fromiter([e.y_true for e in events], dtype=np.int64, count=len(events))
        s = np.fromiter([e.score for e in events], dtype=np.float64, count=len(events))
        w = _weights(events)
        self.scores.update_many(y, s, w)
        self.confusion.update_many(y, (s >= self.threshold).astype(np.int64), w)
        self.score_sum += float(s.sum() if w is None else np.dot(w, s))
        return self

    def snapshot(self) -> dict[str, Any]:
        cm, sc = self.confusion, self.scores
        total = cm.total_weight
        m = cm.matrix([0, 1])
        low, high = _quiet_pair(sc.roc_auc_bounds)
        return {
            "count": self.count,
            "total_weight": json_number(total),
            "accuracy": _quiet(cm.accuracy),
            "balanced_accuracy": _quiet(cm.balanced_accuracy),
            "precision": _quiet(cm.precision, zero_division=_NAN),
            "recall": _quiet(cm.recall, zero_division=_NAN),
            "f1": _quiet(cm.f1, zero_division=_NAN),
            "specificity": _quiet(cm.specificity, zero_division=_NAN),
            "matthews_corrcoef": _quiet(cm.matthews_corrcoef) if total > 0 else None,
            "roc_auc": _quiet(sc.roc_auc),
            "roc_auc_low": low,
            "roc_auc_high": high,
            "average_precision": _quiet(sc.average_precision),
            "log_loss": _quiet(sc.log_loss),
            "brier_score": _quiet(sc.brier_score),
            "positive_rate": json_number(m[1].sum() / total) if total > 0 else None,
            "predicted_positive_rate": json_number(m[:, 1].sum() / total) if total > 0 else None,
            "mean_score": json_number(self.score_sum / total) if total > 0 else None,
        }


def _quiet_pair(fn: Any) -> tuple[float | None, float | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            low, high = fn()
        except ValueError:
            return None, None
    return json_number(low), json_number(high)


def _class_report(cm: ConfusionMatrix, labels: list) -> dict[str, Any]:
    """Per-class precision/recall/F1/support (None where undefined), keyed by ``str(label)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not labels or cm.total_weight == 0:
            return {}
        p = cm.precision(labels=labels, average=None, zero_division=_NAN)
        r = cm.recall(labels=labels, average=None, zero_division=_NAN)
        f = cm.f1(labels=labels, average=None, zero_division=_NAN)
        support = cm.matrix(labels).sum(axis=1)
    return {
        str(label): {
            "precision": json_number(p[i]),
            "recall": json_number(r[i]),
            "f1": json_number(f[i]),
            "support": json_number(support[i]),
        }
        for i, label in enumerate(labels)
    }


def _label_metrics(cm: ConfusionMatrix, labels: list | None) -> dict[str, Any]:
    """Hard-label metrics shared by the multiclass and label monitors."""
    defined = cm.total_weight > 0
    kw = {"labels": labels} if labels else {}
    return {
        "count": cm.count,
        "total_weight": json_number(cm.total_weight),
        "accuracy": _quiet(cm.accuracy) if defined else None,
        "balanced_accuracy": _quiet(cm.balanced_accuracy) if defined else None,
        "macro_precision": _quiet(cm.precision, average="macro", zero_division=_NAN, **kw) if defined else None,
        "macro_recall": _quiet(cm.recall, average="macro", zero_division=_NAN, **kw) if defined else None,
        "macro_f1": _quiet(cm.f1, average="macro", zero_division=_NAN, **kw) if defined else None,
        "weighted_f1": _quiet(cm.f1, average="weighted", zero_division=_NAN, **kw) if defined else None,
        "matthews_corrcoef": _quiet(cm.matthews_corrcoef) if defined else None,
        "cohen_kappa": _quiet(cm.cohen_kappa) if defined else None,
    }


class MulticlassMonitor(Monitor):
    """Multiclass task: ``y_true`` in ``classes``, ``scores`` a vector over ``classes``.

    Snapshot: hard-label metrics of the arg-max prediction (``accuracy``, ``balanced_accuracy``,
    ``macro_precision``, ``macro_recall``, ``macro_f1``, ``weighted_f1``, ``matthews_corrcoef``,
    ``cohen_kappa``), ``top_k_accuracy`` (k=2), ``log_loss``, ``roc_auc`` (one-vs-rest, macro)
    with ``roc_auc_weighted``, and ``per_class`` precision/recall/F1/support/ROC AUC.
    """

    type_name = "MulticlassMonitor"
    task = "multiclass"
    parts = ("scores",)
    fields = ("y_true", "scores", "weight")
    state_fields = (part("scores", lambda m: MulticlassScores(m.classes)),)

    def __init__(self, classes: Sequence[Hashable]) -> None:
        self.classes = MulticlassScores(classes).classes
        self.reset()

    def _config(self) -> dict[str, Any]:
        return {"classes": self.scores._config()["classes"]}

    def _parser_options(self) -> dict[str, Any]:
        return {"classes": self.classes}

    def update_event(self, event: Event) -> "MulticlassMonitor":
        self.scores.update(event.y_true, event.scores, event.weight)
        return self

    def update_events(self, events: Sequence[Event]) -> "MulticlassMonitor":
        y = [e.y_true for e in events]
        s = np.asarray([e.scores for e in events], dtype=np.float64)
        self.scores.update_many(y, s, _weights(events))
        return self

    def snapshot(self) -> dict[str, Any]:
        sc = self.scores
        cm = sc.confusion()
        out = _label_metrics(cm, self.classes)
        out["top_k_accuracy"] = _quiet(sc.top_k_accuracy, k=2) if len(self.classes) > 2 else None
        out["log_loss"] = _quiet(sc.log_loss)
        out["roc_auc"] = _quiet(sc.roc_auc, multi_class="ovr", average="macro")
        out["roc_auc_weighted"] = _quiet(sc.roc_auc, multi_class="ovr", average="weighted")
        per_class = _class_report(cm, self.classes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                aucs = sc.roc_auc(multi_class="ovr", average=None)
            except ValueError:
                aucs = [None] * len(self.classes)
        for i, label in enumerate(self.classes):
            if str(label) in per_class:
                per_class[str(label)]["roc_auc"] = json_number(aucs[i])
        out["per_class"] = per_class
        return out


class LabelMonitor(Monitor):
    """Hard labels only (``y_true``, ``y_pred``): the ``ConfusionMatrix`` metrics with macro and
    weighted averages and ``per_class`` precision/recall/F1/support."""

    type_name = "LabelMonitor"
    task = "labels"
    parts = ("confusion",)
    fields = ("y_true", "y_pred", "weight")
    state_fields = (part("confusion", lambda m: ConfusionMatrix(labels=m._labels)),)

    def __init__(self, labels: Sequence[Hashable] | None = None) -> None:
        self._labels = ConfusionMatrix(labels=labels)._config()["labels"]
        self.reset()

    def _config(self) -> dict[str, Any]:
        return {"labels": self.confusion._config()["labels"]}

    @staticmethod
    def event_tag(event: Event) -> str:
        """The label kind ("bool", "number" or "str") of the event; ValueError if ``y_true``
        and ``y_pred`` differ in kind. Windows keep one kind per stream key."""
        t, p = _LABEL_KINDS.get(event.y_true.__class__), _LABEL_KINDS.get(event.y_pred.__class__)
        if t is None or t != p:
            raise ValueError(f"y_true={event.y_true!r} and y_pred={event.y_pred!r} must be labels of one kind "
                             "(all str, all numbers or all bool)")
        return t

    def update_event(self, event: Event) -> "LabelMonitor":
        self.confusion.update(event.y_true, event.y_pred, event.weight)
        return self

    def update_events(self, events: Sequence[Event]) -> "LabelMonitor":
        self.confusion.update_many([e.y_true for e in events], [e.y_pred for e in events], _weights(events))
        return self

    def snapshot(self) -> dict[str, Any]:
        cm = self.confusion
        labels = cm.labels
        out = _label_metrics(cm, None)
        out["per_class"] = _class_report(cm, labels)
        return out


class RegressionMonitor(Monitor):
    """Numeric truth and prediction (``y_true``, ``y_pred``): ``mse``, ``rmse``, ``mae``, ``r2``,
    ``rmsle`` (None once a value <= -1 was seen), ``mape``, ``max_error``, ``count``."""

    type_name = "RegressionMonitor"
    task = "regression"
    parts = ("regression",)
    fields = ("y_true", "y_pred", "weight")
    state_fields = (part("regression", lambda m: Regression()),)

    def __init__(self) -> None:
        self.reset()

    def update_event(self, event: Event) -> "RegressionMonitor":
        self.regression.update(event.y_true, event.y_pred, event.weight)
        return self

    def update_events(self, events: Sequence[Event]) -> "RegressionMonitor":
        n = len(events)
        y = np.fromiter([e.y_true for e in events], dtype=np.float64, count=n)
        p = np.fromiter([e.y_pred for e in events], dtype=np.float64, count=n)
        self.regression.update_many(y, p, _weights(events))
        return self

    def snapshot(self) -> dict[str, Any]:
        r = self.regression
        return {
            "count": r.count,
            "total_weight": json_number(r.total_weight),
            "mse": _quiet(r.mse),
            "rmse": _quiet(r.rmse),
            "mae": _quiet(r.mae),
            "r2": _quiet(r.r2),
            "rmsle": _quiet(r.rmsle),
            "mape": _quiet(r.mape),
            "max_error": _quiet(r.max_error),
        }


def make_monitor(task: str, *, threshold: float = 0.5, classes: Sequence[Hashable] | None = None,
                 labels: Sequence[Hashable] | None = None) -> Monitor:
    """An empty monitor for ``task`` in {"binary", "multiclass", "labels", "regression"}."""
    if task == "binary":
        return BinaryMonitor(threshold=threshold)
    if task == "multiclass":
        if not classes:
            raise ValueError("task 'multiclass' needs classes (e.g. --classes cat,dog,bird)")
        return MulticlassMonitor(classes)
    if task == "labels":
        return LabelMonitor(labels)
    if task == "regression":
        return RegressionMonitor()
    raise ValueError(f"task must be one of binary, multiclass, labels, regression; got {task!r}")
