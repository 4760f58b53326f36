"""``LabelMonitor``: hard predictions (``y_true``, ``y_pred`` labels), and the hard-label
snapshot helpers it shares with :mod:`streammetrics.monitors.multiclass`.

The prediction weight and each predicted label's weight are exact sums
(:mod:`streammetrics.kernels.exact_weights`): whole floats while every weight is a whole
number up to ``2**32`` (exact while a sum stays below ``2**53``), else ints of units of
``2**-1074``; written correctly rounded, with ``weight_residues`` (``[[index, residue], ...]``
over ``[prediction_weight, *predicted_labels]``) only when some float is not its exact sum.

Bounded labels (``max_labels=L``, discovered labels only; ``--max-labels``): the state holds at
most ``2 L`` labels besides the two of :data:`OTHER_LABELS`; when a new label passes that, the ``L`` most
frequent (true plus predicted weight; ties: the smaller label) are kept and every other label
is folded (:data:`OTHER_LABELS`): a true label into ``"__other__"``, a predicted one into
``"__other__"`` when right, else ``"__other_mismatch__"`` (number labels: ``-2**63`` and
``-2**63 + 1``), cells summed exactly, so accuracy and the kept labels' per-class metrics stay
exact. A snapshot
folds to the ``L`` most frequent likewise (on a copy) and reports ``labels_folded``, the labels
folded (counted once per fold). While a window holds at most ``2 L`` distinct labels its
snapshot keeps exactly its ``L`` most frequent; beyond, a label folded earlier keeps the weight
folded into the other labels. See docs/limits-labels.md."""
from __future__ import annotations

import math
import warnings
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from streammetrics.core.labels import LABEL_KINDS, label_kind
from streammetrics.core.state import Field, describe, state_limits
from streammetrics.core.validation import check_weight, to_builtin_label
from streammetrics.events.parser import Event
from streammetrics.kernels.classification import prf
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    WHOLE_MAX,
    decode_sums,
    encode_residues,
    units_of,
    value_of,
)
from streammetrics.kernels.sparse_confusion import balanced_accuracy_many, kappa_dense_many, matthews_many
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.monitors.base import Monitor, batch_weights, empty_like, json_number, part, quiet

__all__ = ["OTHER_LABELS", "LabelMonitor", "class_report", "label_metrics", "label_metrics_many", "label_parts_many"]

#: per label kind, the labels a label beyond ``max_labels`` is folded into: (other, mismatch)
#: (:meth:`ConfusionMatrix.fold_labels`; bool labels never fold: ``max_labels`` is at least 2)
OTHER_LABELS: dict[str, tuple[Any, Any]] = {"str": ("__other__", "__other_mismatch__"),
                                            "number": (-(2**63), -(2**63) + 1)}
#: ``--max-labels`` default: labels a window keeps (the state holds at most twice as many)
DEFAULT_MAX_LABELS = 1000
_SENTINELS = tuple(x for pair in OTHER_LABELS.values() for x in pair)

_NAN = math.nan
_LABEL_KINDS = LABEL_KINDS


# float mode while the prediction weight stays at most this (float sums of whole weights exact: < 2**53)
_FLOAT_EXACT = FLOAT_EXACT


def class_report(cm: ConfusionMatrix, labels: list) -> dict[str, Any]:
    """Per-class precision/recall/F1/support (None where undefined), keyed by ``str(label)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not labels or cm.total_weight == 0:
            return {}
        p, r, f = cm.precision_recall_f1(labels=labels, average=None, zero_division=_NAN)
        support = cm.support(labels)
    return {
        str(label): {
            "precision": json_number(p[i]),
            "recall": json_number(r[i]),
            "f1": json_number(f[i]),
            "support": json_number(support[i]),
        }
        for i, label in enumerate(labels)
    }


#: the snapshot metrics of the multiclass and label monitors with an interval
LABEL_INTERVALS = ("accuracy", "balanced_accuracy", "macro_precision", "macro_recall", "macro_f1", "weighted_f1",
                   "matthews_corrcoef", "cohen_kappa")


def label_intervals(cm: ConfusionMatrix, labels: list | None, confidence: float) -> dict[str, Any] | None:
    """The snapshot's ``intervals`` and ``insufficient`` of :data:`LABEL_INTERVALS`
    (``ConfusionMatrix.interval`` over ``labels``, default the matrix's), None without labelled
    events."""
    from streammetrics.kernels.intervals import pairs_record

    if not cm.count:
        return None
    return pairs_record(label_interval_pairs(cm, labels, confidence), confidence)


def label_interval_pairs(cm: ConfusionMatrix, labels: list | None,
                         confidence: float) -> dict[str, tuple[float, float] | None]:
    """``{metric: (low, high) | None}`` of :data:`LABEL_INTERVALS` (:func:`label_intervals`)."""
    names = labels or cm.labels  # (two labels: balanced accuracy and Matthews are symmetric: any pos_label)
    return cm.intervals_of(LABEL_INTERVALS, confidence, pos_label=names[-1], labels=names)


def label_metrics(cm: ConfusionMatrix, labels: list | None) -> dict[str, Any]:
    """Hard-label metrics shared by the multiclass and label monitors."""
    defined = cm.total_weight > 0
    kw = {"labels": labels} if labels else {}
    macro = _quiet_prf(cm, "macro", kw) if defined else (None, None, None)
    return {
        "count": cm.count,
        "total_weight": json_number(cm.total_weight),
        "accuracy": quiet(cm.accuracy) if defined else None,
        "balanced_accuracy": quiet(cm.balanced_accuracy) if defined else None,
        "macro_precision": macro[0],
        "macro_recall": macro[1],
        "macro_f1": macro[2],
        "weighted_f1": _quiet_prf(cm, "weighted", kw)[2] if defined else None,
        "matthews_corrcoef": quiet(cm.matthews_corrcoef) if defined else None,
        "cohen_kappa": quiet(cm.cohen_kappa) if defined else None,
    }


#: most labels a window may hold for :func:`label_metrics_many` (its averages then add at most 7
#: terms, in order, as the scalar path's numpy sums do)
MANY_MAX_LABELS = 7


def _nanaverage_rows(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """:func:`~streammetrics.kernels.classification.nanaverage` of each row of ``values`` ``(n, K)``
    (``K <= MANY_MAX_LABELS``: a nan left out of a sum or added as 0 gives the same value)."""
    mask = np.isnan(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.nanmean(values, axis=1) if weights is None else np.full(len(values), np.nan)
        if weights is None:
            return mean
        v, w = np.where(mask, 0.0, values), np.where(mask, 0.0, weights)
        scale = np.sum(w, axis=1)
        fallback = np.nanmean(values, axis=1)  # all weights zero: ignore them (as nanaverage)
        weighted = np.sum(v * w, axis=1) / np.where(scale == 0.0, 1.0, scale)
    return np.where(mask.all(axis=1), np.nan, np.where(scale == 0.0, fallback, weighted))


def label_metrics_many(counts: np.ndarray, order: np.ndarray | None = None) -> tuple[dict[str, list], tuple[list, ...]]:
    """:func:`label_metrics` (its metrics from ``accuracy`` on) and :func:`class_report`'s
    precision, recall, F1 and support of many windows at once: ``counts`` ``(n, K, K)``, each
    window's confusion matrix of unit-weight events over its labels seen, in order (``2 <= K <=
    MANY_MAX_LABELS``, every total > 0; ``order`` ``(n, K)``: each window's labels in sorted order,
    the order balanced accuracy adds its recalls in, as ``ConfusionMatrix.balanced_accuracy`` over
    the labels seen; default: the labels are in that order). Returns (columns by metric name, per-class rows ``(n, K)``)
    as lists of floats, None where the scalar path gives None. The same kernels, bit for bit
    (``tests/monitors/test_labels_many.py``)."""
    tp = np.ascontiguousarray(np.diagonal(counts, axis1=1, axis2=2))
    pred, true = np.sum(counts, axis=1), np.sum(counts, axis=2)
    total = np.sum(true, axis=1)
    nan = math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p, r, f, support = prf(tp, pred, true, average=None, zero_division=nan)
        correct = np.sum(tp, axis=1)
        columns = {
            "accuracy": correct / total,
            "balanced_accuracy": balanced_accuracy_many(tp, true) if order is None else balanced_accuracy_many(
                np.take_along_axis(tp, order, axis=1), np.take_along_axis(true, order, axis=1)),
            "macro_precision": _nanaverage_rows(p),
            "macro_recall": _nanaverage_rows(r),
            "macro_f1": _nanaverage_rows(f),
            "weighted_f1": _nanaverage_rows(f, support),
            "matthews_corrcoef": matthews_many(true, pred, correct),
            "cohen_kappa": kappa_dense_many(counts),
        }
    return ({name: _finite(col.tolist()) for name, col in columns.items()},
            tuple([_finite(row) for row in x.tolist()] for x in (p, r, f, support)))


def _finite(values: list[float]) -> list[float | None]:
    """``json_number`` of each float: itself when finite, else None."""
    return [x if x - x == 0.0 else None for x in values]


def label_intervals_many(counts: np.ndarray, z: float) -> dict[str, list]:
    """The intervals :func:`label_interval_pairs` gives windows of fewer than
    ``MIN_MEAN_EVENTS`` unit-weight events (``counts`` as :func:`label_metrics_many`'s): per
    metric of :data:`LABEL_INTERVALS` a list of ``(low, high)`` or None per window (the matrix
    intervals and macro F1's: None below that rule; two labels: balanced accuracy and Matthews
    of the last label against the other, as ``ConfusionMatrix.interval``)."""
    from streammetrics.kernels.intervals import confusion_intervals, wilson_many

    n, k = counts.shape[0], counts.shape[1]
    total = np.sum(counts.reshape(n, k * k), axis=1)
    correct = np.sum(np.diagonal(counts, axis1=1, axis2=2), axis=1)
    out: dict[str, list] = {name: [None] * n for name in LABEL_INTERVALS}
    out["accuracy"] = _pairs(*wilson_many(correct, total, z))
    if k == 2:
        tn, fp, fn, tp = counts[:, 0, 0], counts[:, 0, 1], counts[:, 1, 0], counts[:, 1, 1]
        both = confusion_intervals(tn, fp, fn, tp, z)
        for name in ("balanced_accuracy", "matthews_corrcoef"):
            out[name] = _pairs(*both[name])
    return out


def label_parts_many(matrices: Sequence[tuple[ConfusionMatrix, list, float]]) -> list[tuple[dict, dict, dict | None]]:
    """Per ``(matrix, labels, confidence)`` (unit weights, at least one event, ``2 <= K <=
    MANY_MAX_LABELS`` labels: the matrix's own, or the fixed labels it is held to), computed together
    per label count and confidence: ``(metrics, per_class, pairs)``, the values
    :func:`label_metrics` gives from ``accuracy`` on, :func:`class_report`'s rows and
    :func:`label_interval_pairs`'s intervals (None for a window of ``MIN_MEAN_EVENTS`` events or
    more: the caller's own :func:`label_interval_pairs`)."""
    from streammetrics.kernels.intervals import MIN_MEAN_EVENTS, z_value

    out: list[Any] = [None] * len(matrices)
    groups: dict[tuple[int, float], list[int]] = {}
    for i, (_, labels, confidence) in enumerate(matrices):
        groups.setdefault((len(labels), confidence), []).append(i)
    for (k, confidence), members in groups.items():
        counts = np.zeros((len(members), k, k), dtype=np.float64)
        order = np.zeros((len(members), k), dtype=np.intp)
        for row, i in enumerate(members):
            cm, labels, _ = matrices[i]
            index = {label: j for j, label in enumerate(labels)}
            for (t, p), w in cm.counts().items():
                counts[row, index[t], index[p]] += w
            order[row] = sorted(range(k), key=labels.__getitem__)
        columns, (precision, recall, f1, support) = label_metrics_many(counts, order)
        few = [row for row, i in enumerate(members) if matrices[i][0].count < MIN_MEAN_EVENTS]
        bounds = label_intervals_many(counts[few], z_value(confidence)) if few else {}
        at = {row: n for n, row in enumerate(few)}
        for row, i in enumerate(members):
            labels = matrices[i][1]
            metrics = {name: column[row] for name, column in columns.items()}
            p, r, f, s = precision[row], recall[row], f1[row], support[row]
            per_class = {str(label): {"precision": p[j], "recall": r[j], "f1": f[j], "support": s[j]}
                         for j, label in enumerate(labels)}
            n = at.get(row)
            out[i] = (metrics, per_class, None if n is None else {name: bounds[name][n] for name in LABEL_INTERVALS})
    return out


def _pairs(lo: np.ndarray, hi: np.ndarray) -> list[tuple[float, float] | None]:
    """Interval columns as ``(low, high)`` per row, None where nan (``intervals.as_pair`` of each)."""
    return [None if a != a or b != b else (a, b) for a, b in zip(lo.tolist(), hi.tolist())]


def _quiet_prf(cm: ConfusionMatrix, average: str, kw: dict[str, Any]) -> tuple[Any, Any, Any]:
    """:func:`~streammetrics.monitors.base.quiet` of ``cm.precision_recall_f1`` (one pass for the three)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            p, r, f = cm.precision_recall_f1(average=average, zero_division=_NAN, **kw)
        except (ValueError, ZeroDivisionError):
            return None, None, None
    return json_number(p), json_number(r), json_number(f)


def _sorted_predicted(predicted: dict) -> list[tuple[Any, Any]]:
    """``(label, summed weight)`` of the predicted labels by kind, then label: the order the state
    writes them in and the snapshot reports them in (independent of arrival or merge order)."""
    return sorted(predicted.items(), key=lambda kv: (label_kind(kv[0]), kv[0]))


def _in_units(total: float | int, predicted: dict) -> tuple[int, dict]:
    """The prediction weights in units (themselves if already)."""
    if total.__class__ is int:
        return int(total), predicted
    return units_of(total), {label: units_of(w) for label, w in predicted.items()}


def _merge_weights(mine: tuple, theirs: tuple, acc: Any) -> tuple:
    total, predicted = mine
    their_total, their_predicted = theirs
    zero: float | int = 0.0
    if (total.__class__ is int or their_total.__class__ is int  # a side in units, or float sums that
            or total + their_total > _FLOAT_EXACT):  # could round: both in units
        (total, predicted), (their_total, their_predicted) = _in_units(*mine), _in_units(*theirs)
        zero = 0
    for label, w in their_predicted.items():
        predicted[label] = predicted.get(label, zero) + w
    return total + their_total, predicted


def _encode_weights(value: tuple, mon: Any) -> tuple:
    total: Any
    total, predicted = value
    items = _sorted_predicted(predicted)
    if total.__class__ is float:  # whole weights: float sums are exact
        return total, [[k, w] for k, w in items], None
    return (value_of(total), [[k, value_of(w)] for k, w in items],
            encode_residues([total] + [w for _, w in items]))


def _decode_weights(raw: tuple, mon: "LabelMonitor", loaded: Mapping[str, Any]) -> tuple:
    total, labels, residues = raw
    if type(total) not in (int, float) or not 0.0 <= total < math.inf:
        raise ValueError(f"prediction_weight must be a finite non-negative number, got {describe(total)}")
    total = float(total)
    predicted = _decode_predicted(labels, mon, loaded)
    sums = decode_sums([total, *predicted.values()], residues, "weight_residues")
    return sums[0], dict(zip(predicted, sums[1:]))


def _decode_predicted(raw: Any, mon: "LabelMonitor", loaded: Mapping[str, Any]) -> dict:
    if not isinstance(raw, list):
        raise ValueError(f"predicted_labels must be a list of [label, weight], got {describe(raw)}")
    if len(raw) > loaded["count"]:
        raise ValueError(f"{len(raw)} labels cannot come from count={loaded['count']} predictions")
    cap = state_limits().max_labels
    if len(raw) > cap:
        raise ValueError(f"{len(raw)} labels, more than max_labels={cap}")
    out: dict = {}
    kinds = set()
    for i, pair in enumerate(raw):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"predicted_labels[{i}] must be [label, weight], got {describe(pair)}")
        label = to_builtin_label(pair[0], f"predicted_labels[{i}][0]")
        if label in out or label != pair[0]:
            raise ValueError(f"predicted_labels[{i}] repeats or mis-encodes the label {label!r}")
        kinds.add(label_kind(label))
        out[label] = check_weight(pair[1], f"predicted_labels[{i}][1]")
    allowed = mon._labels
    if len(kinds) > 1 or (allowed is not None and any(x not in allowed for x in out)):
        raise ValueError("predicted_labels: labels of several kinds, or outside the monitor's labels")
    return out


def _decode_folded(raw: Any, mon: "LabelMonitor", loaded: Mapping[str, Any]) -> int:
    if raw is None:
        return 0
    if type(raw) is not int or raw < 1 or mon.max_labels is None:
        raise ValueError(f"must be a positive int (with max_labels), got {describe(raw)}")
    return raw


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (``confusion`` only: every prediction was labelled) to version 2: the
    predicted-label weights are the column sums of the confusion cells."""
    confusion = state["confusion"]
    if not isinstance(confusion, Mapping) or not isinstance(confusion.get("state"), Mapping):
        raise ValueError("state['confusion'] must be an accumulator dict")
    c = confusion["state"]
    predicted: dict = {}
    for cell in c["cells"]:
        if not (isinstance(cell, list) and len(cell) == 3):
            raise ValueError(f"state['confusion'] cells must be [true, pred, weight], got {describe(cell)}")
        key = (cell[1].__class__ is bool, cell[1])
        predicted[key] = predicted.get(key, 0.0) + cell[2]
    return {
        "count": c["count"],
        "prediction_weight": c["total_weight"],
        "predicted_labels": [[k[1], w] for k, w in predicted.items()],
        "confusion": confusion,
    }


class LabelMonitor(Monitor):
    """Hard labels only (``y_true``, ``y_pred``).

    Label-free part: ``count``, ``total_weight`` and the weight of each predicted label
    (``per_class[label]["predicted_rate"]``, its share). Label-based part: the
    ``ConfusionMatrix`` metrics with macro and weighted averages and ``per_class``
    precision/recall/F1/support.

    >>> m = LabelMonitor().update_many([{"y_true": "a", "y_pred": "a"}, {"y_true": "b", "y_pred": "a"}])
    >>> s = m.snapshot()
    >>> per_class = s["per_class"]
    >>> s["accuracy"], per_class["a"].get("predicted_rate")
    (0.5, 1.0)
    """

    type_name = "LabelMonitor"
    task = "labels"
    parts = ("confusion",)
    fields = ("y_true", "y_pred", "weight")
    migrations = {1: _migrate_v1}
    state_fields = (
        Field("count", lambda m: 0, "count", attrs="_pcount"),
        # the weight of every prediction, and per predicted label (exact sums; residues when needed)
        Field(("prediction_weight", "predicted_labels", "weight_residues"), lambda m: (0.0, {}),
              attrs=("_ptotal", "_predicted"), merge=_merge_weights, copy=lambda v: (v[0], dict(v[1])),
              encode=_encode_weights, decode=_decode_weights, optional=("weight_residues",)),
        part("confusion", lambda m: ConfusionMatrix(labels=m._labels)),
        # labels folded into OTHER_LABELS (max_labels); written only when some were
        Field("labels_folded", lambda m: 0, "count", attrs="_folded", optional=("labels_folded",),
              encode=lambda v, m: v or None, decode=_decode_folded),
    )

    _pcount: int
    _ptotal: float | int  # a whole float, or units (then so are the values of _predicted)
    _predicted: dict
    confusion: ConfusionMatrix

    _folded: int
    _known: set | None  # labels held (derived; only with max_labels)

    def __init__(self, labels: Sequence[Hashable] | None = None, max_labels: int | None = None) -> None:
        self._labels = ConfusionMatrix(labels=labels)._config()["labels"]
        if max_labels is not None:
            if type(max_labels) is not int or max_labels < 2:
                raise ValueError(f"max_labels must be an int >= 2 or None, got {describe(max_labels)}")
            if self._labels is not None:
                raise ValueError("max_labels bounds discovered labels; it cannot be given with labels")
        self._max_labels = max_labels
        self.reset()

    def empty(self) -> "LabelMonitor":
        """A new monitor with this one's configuration and no events, built without the constructor
        (:func:`~streammetrics.monitors.base.empty_like`; the window engine makes one per key and
        window). Called on an empty monitor (a factory's template).

        >>> LabelMonitor(max_labels=4).empty() == LabelMonitor(max_labels=4)
        True
        """
        if self._pcount or self.confusion.count:
            raise ValueError("empty() is called on an empty monitor (a template)")
        return empty_like(self)

    def _config(self) -> dict[str, Any]:
        if self._max_labels is None:  # (the layout of monitors without the bound is unchanged)
            return {"labels": self._labels}
        return {"labels": self._labels, "max_labels": self._max_labels}

    @classmethod
    def _check_config(cls, config: Mapping[str, Any]) -> None:
        super()._check_config(config)
        cap = state_limits().max_labels
        bound = config.get("max_labels")
        if type(bound) is int and 2 * bound + 2 > cap:
            raise ValueError(f"config['max_labels']={bound} lets a state hold {2 * bound + 2} labels, "
                             f"more than max_labels={cap}")

    @property
    def max_labels(self) -> int | None:
        """The bound on discovered labels (None: unbounded)."""
        return self._max_labels

    @property
    def updates_commute(self) -> bool:
        """False with ``max_labels``: labels are folded when the bound is passed, so the state
        depends on the order events arrive in (see ``Monitor.updates_commute``)."""
        return self._max_labels is None

    @property
    def labels_held(self) -> int:
        """Distinct labels the state holds (true or predicted)."""
        return len(self._held())

    def _held(self) -> set:
        held = set(self._predicted)
        for t, p in self.confusion.counts():
            held.add(t)
            held.add(p)
        return held

    def _refresh(self) -> None:
        self._known = None if self._max_labels is None else self._held()
        self._check_bound()

    def _check_state(self, loaded: dict[str, Any]) -> None:
        super()._check_state(loaded)
        if self._max_labels is not None:
            held = set(loaded["prediction_weight"][1])
            for t, p in loaded["confusion"].counts():
                held.add(t)
                held.add(p)
            cap = 2 * self._max_labels + 2
            if len(held) > cap:
                raise ValueError(f"the state holds {len(held)} labels, more than 2 * max_labels + 2 = {cap}")

    def _track(self, *labels: Any) -> None:
        """Note labels just added (``max_labels``): fold when more than ``2 L`` are held."""
        known = self._known
        if known is not None:
            known.update(labels)
            self._check_bound()

    def _track_many(self, y_true: list, y_pred: list) -> None:
        """:meth:`_track` of a validated batch (labels equal to their built-in forms: same hash)."""
        known = self._known
        if known is not None:
            known.update(y_true)
            known.update(y_pred)
            self._check_bound()

    def _check_bound(self) -> None:
        known, bound = self._known, self._max_labels
        if known is None or bound is None or len(known) <= 2 * bound:
            return
        if len(known) - sum(x in known for x in _SENTINELS) > 2 * bound:
            self.confusion, self._predicted, folded = self._folded_to(bound)
            self._folded += folded
            self._known = self._held()

    def _folded_to(self, bound: int) -> tuple[ConfusionMatrix, dict, int]:
        """(confusion, predicted weights, labels folded) with every label but the ``bound`` most
        frequent folded into :data:`OTHER_LABELS` (new objects; ``self`` unchanged)."""
        cm, predicted = self.confusion, self._predicted
        held = self._held()
        pair = OTHER_LABELS.get(label_kind(next(iter(held)))) if held else None
        if pair is None:
            return cm, predicted, 0
        other, mismatch = pair
        candidates = [x for x in held if x != other and x != mismatch]
        if len(candidates) <= bound:
            return cm, predicted, 0
        freq: dict = dict.fromkeys(candidates, 0.0)
        for label, w in zip(cm.labels, cm.support()):
            if label in freq:
                freq[label] += float(w)
        read: Any = float if self._ptotal.__class__ is float else value_of
        for label, w in predicted.items():
            if label in freq:
                freq[label] += read(w)
        ranked = sorted(candidates, key=lambda x: (-freq[x], x))
        keep = set(ranked[:bound])
        folded: dict = {}
        zero: Any = 0.0 if self._ptotal.__class__ is float else 0
        for label, w in predicted.items():  # exact: whole floats below 2**53, or units
            key = label if label in keep else other
            folded[key] = folded.get(key, zero) + w
        return cm.fold_labels(keep, other, mismatch), folded, len(candidates) - bound

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen
        return self._pcount

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        total: Any = self._ptotal
        return total if total.__class__ is float else value_of(total)

    @staticmethod
    def event_tag(event: Event) -> str:
        """The label kind ("bool", "number" or "str") of the event; ValueError if ``y_true``
        and ``y_pred`` differ in kind. Windows keep one kind per stream key."""
        p = _LABEL_KINDS.get(event.y_pred.__class__)
        t = p if event.y_true is None else _LABEL_KINDS.get(event.y_true.__class__)
        if t is None or t != p:
            raise ValueError(f"y_true={event.y_true!r} and y_pred={event.y_pred!r} must be labels of one kind "
                             "(all str, all numbers or all bool)")
        return t

    def update_prediction(self, event: Event) -> "LabelMonitor":
        label, w = to_builtin_label(event.y_pred, "y_pred"), check_weight(event.weight)
        if self._labels is not None and label not in self._labels:
            raise ValueError(f"y_pred={label!r} is not one of labels {self._labels!r}")
        if self._predicted:
            first = next(iter(self._predicted))
            if label_kind(first) != label_kind(label):
                raise ValueError(f"y_pred={label!r} is a {label_kind(label)} label but this monitor holds "
                                 f"{label_kind(first)} labels")
        self._predict(label, w)
        self._track(label)
        return self

    def _predict(self, label: Any, w: float) -> None:
        self._pcount += 1
        p = self._predicted
        if (self._ptotal.__class__ is float and w.is_integer() and w <= WHOLE_MAX
                and self._ptotal <= _FLOAT_EXACT):  # exact as a float sum
            self._ptotal += w
            p[label] = p.get(label, 0.0) + w
        else:
            if self._ptotal.__class__ is float:  # the first weight that is not whole: to units
                self._ptotal, p = _in_units(self._ptotal, p)
                self._predicted = p
            u = units_of(w)
            self._ptotal += u
            p[label] = p.get(label, 0) + u

    def update_outcome(self, event: Event) -> "LabelMonitor":
        self.confusion.update(event.y_true, event.y_pred, event.weight)
        if self._known is not None:
            self._track(to_builtin_label(event.y_true, "y_true"), to_builtin_label(event.y_pred, "y_pred"))
        return self

    def update_outcomes(self, events: Sequence[Event]) -> "LabelMonitor":
        y_true, y_pred = [e.y_true for e in events], [e.y_pred for e in events]
        self.confusion.update_many(y_true, y_pred, batch_weights(events))
        self._track_many(y_true, y_pred)
        return self

    def update_event(self, event: Event) -> "LabelMonitor":
        cm = self.confusion
        cm.update(event.y_true, event.y_pred, event.weight)  # validates: the prediction is sound
        self._predict(to_builtin_label(event.y_pred, "y_pred"), float(event.weight))
        if self._known is not None:
            self._track(to_builtin_label(event.y_true, "y_true"), to_builtin_label(event.y_pred, "y_pred"))
        return self

    def update_events(self, events: Sequence[Event]) -> "LabelMonitor":
        y_true, y_pred = [e.y_true for e in events], [e.y_pred for e in events]
        weights = batch_weights(events)
        self.confusion.update_many(y_true, y_pred, weights)  # validates the whole batch first
        n = len(events)
        if weights is None and self._ptotal.__class__ is float and self._ptotal + n <= _FLOAT_EXACT:
            # unit weights: _predict's float sums, added at once (whole floats: exact)
            self._pcount += n
            self._ptotal += float(n)
            p = self._predicted
            for label in y_pred:
                if label.__class__ is not str:
                    label = to_builtin_label(label, "y_pred")
                p[label] = p.get(label, 0.0) + 1.0
        else:
            for e in events:
                self._predict(to_builtin_label(e.y_pred, "y_pred"), float(e.weight))
        self._track_many(y_true, y_pred)
        return self

    interval_metrics = LABEL_INTERVALS

    def intervals(self, confidence: float | None = None,
                  metrics: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The snapshot's ``intervals`` of :data:`LABEL_INTERVALS` on the snapshot's (with
        ``max_labels``: folded) matrix (:func:`label_intervals`)."""
        from streammetrics.kernels.intervals import check_confidence

        cm = self.confusion
        if self._max_labels is not None:  # the snapshot's folded matrix
            cm = self._folded_to(self._max_labels)[0]
        return label_intervals(cm, None, self.confidence if confidence is None else check_confidence(confidence))

    def snapshot(self) -> dict[str, Any]:
        cm, predicted, folded = self.confusion, self._predicted, 0
        if self._max_labels is not None:  # the max_labels most frequent, the rest as OTHER_LABELS
            cm, predicted, folded = self._folded_to(self._max_labels)
        out = label_metrics(cm, None)
        total = self.total_weight
        out["count"], out["total_weight"] = self.count, json_number(total)
        if self._max_labels is not None:
            out["labels_folded"] = self._folded + folded
        per_class = class_report(cm, cm.labels)
        read: Any = float if self._ptotal.__class__ is float else value_of
        # in the state's order, not arrival order: a snapshot is then the same after a checkpoint
        # round trip or a merge in another order (Spark partials)
        for label, weight in _sorted_predicted(predicted):
            w = read(weight)
            row = per_class.setdefault(str(label), {})
            row["predicted_rate"] = json_number(w / total) if total > 0 else None
        out["per_class"] = per_class
        return out

    #: small closed windows are built together (:meth:`snapshot_many`)
    snapshots_together = True

    def _many_labels(self) -> list | None:
        """The labels of this monitor's matrix when :meth:`snapshot_many` computes it in its
        vectorised pass (unit weights, whole-float prediction weights, discovered labels, nothing
        to fold, ``2 <= K <= MANY_MAX_LABELS``), else None (its own :meth:`snapshot`)."""
        cm = self.confusion
        if (self._labels is not None or self._ptotal.__class__ is not float or not cm.count
                or not cm.unit_weights):
            return None
        labels = cm.labels
        if not 2 <= len(labels) <= MANY_MAX_LABELS:
            return None
        bound = self._max_labels
        if bound is not None and len(labels) + len(self._predicted) > bound and len(self._held()) > bound:
            return None  # (labels held: those of the matrix and the predicted ones)
        return labels

    @classmethod
    def snapshot_many(cls, monitors: Sequence[Any], include_state: bool = True) -> list[tuple[Any, ...]]:
        """:meth:`Monitor.snapshot_many`: the label metrics of the unit-weight windows of at most
        ``MANY_MAX_LABELS`` labels in one vectorised pass (:func:`label_parts_many`), every other
        window by its own methods; the same records.

        >>> a = LabelMonitor().update_many([{"y_true": "a", "y_pred": "b"}, {"y_true": "b", "y_pred": "b"}])
        >>> LabelMonitor.snapshot_many([a])[0] == (a.snapshot(), a.to_dict(), a.intervals())
        True
        """
        from streammetrics.kernels.intervals import pairs_record

        out: list[Any] = [None] * len(monitors)
        chosen, matrices = [], []
        for i, m in enumerate(monitors):
            labels = m._many_labels()
            if labels is None:
                metrics = m.snapshot()
                out[i] = (metrics, m.to_dict() if include_state else None, m.intervals(metrics=metrics))
            else:
                chosen.append(i)
                matrices.append((m.confusion, labels, m.confidence))
        for i, (columns, per_class, pairs) in zip(chosen, label_parts_many(matrices)):
            m = monitors[i]
            metrics = {"count": m.count, "total_weight": json_number(m.total_weight), **columns}
            if m._max_labels is not None:
                metrics["labels_folded"] = m._folded
            metrics["per_class"] = m._with_rates(per_class)
            record = m.intervals(metrics=metrics) if pairs is None else pairs_record(pairs, m.confidence)
            out[i] = (metrics, m.to_dict() if include_state else None, record)
        return out

    def _with_rates(self, per_class: dict[str, Any]) -> dict[str, Any]:
        """:meth:`snapshot`'s ``per_class`` from :func:`label_parts_many`'s rows: each predicted
        label's ``predicted_rate`` added."""
        total = self.total_weight
        for label, weight in _sorted_predicted(self._predicted):
            row = per_class.setdefault(str(label), {})
            row["predicted_rate"] = json_number(weight / total) if total > 0 else None
        return per_class
