"""``MulticlassMonitor``: a multiclass classifier's score vectors (``y_true``, ``scores``)."""
from __future__ import annotations

import math
import warnings
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from streammetrics.core.state import Field, decode_list, describe
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_sum import ExactSum, add_rows
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    UNIT,
    WHOLE_MAX,
    all_whole,
    decode_sums,
    encode_sums,
    grouped_units,
    is_whole,
    residue_of,
    to_units,
    units_of,
    value_of,
    values_of,
    with_residue,
)
from streammetrics.kernels.histogram import MAX_TOTAL_WEIGHT
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.metrics.score_distribution import ScoreDistribution
from streammetrics.monitors.base import Monitor, batch_weights, empty_like, json_number, part, quiet
from streammetrics.monitors.labels import (
    LABEL_INTERVALS,
    MANY_MAX_LABELS,
    class_report,
    label_interval_pairs,
    label_metrics,
    label_parts_many,
)
from streammetrics.monitors.reference_multiclass import add_estimate_terms, estimate_terms, fold_estimate, new_estimate

#: the snapshot metrics of the multiclass monitor with an interval, in order
MULTICLASS_INTERVALS = LABEL_INTERVALS + ("top_k_accuracy", "roc_auc", "roc_auc_weighted")

__all__ = [
    "CLASS_SCORE_BINS", "CLASS_SCORE_BUDGET", "CLASS_SCORE_MAX_BINS", "MulticlassMonitor", "class_score_max_bins",
]

#: per-class label-free score histograms: every distinct score while a column holds at most
#: ``class_score_max_bins(K)`` of them (exact), beyond that a log grid of ``CLASS_SCORE_BINS``
#: bins per octave (``MulticlassScores``' default grid), halved while it holds more keys
CLASS_SCORE_BINS = 64
CLASS_SCORE_MAX_BINS = 512
#: entries shared by the ``K`` columns: each column keeps at most ``CLASS_SCORE_BUDGET // K``
#: (so a 50-class monitor's snapshot stays within 256 KiB; issue 12)
CLASS_SCORE_BUDGET = 4096
#: fewest keys a column may be limited to, whatever ``K``
CLASS_SCORE_MIN_BINS = 16


# float mode while the prediction weight stays at most this (float sums of whole weights exact: < 2**53)
_FLOAT_EXACT = FLOAT_EXACT


def class_score_max_bins(k: int) -> int:
    """Keys per class column: ``max(CLASS_SCORE_MIN_BINS, min(CLASS_SCORE_MAX_BINS, CLASS_SCORE_BUDGET // k))``.

    >>> class_score_max_bins(3), class_score_max_bins(50), class_score_max_bins(1000)
    (512, 81, 16)
    """
    return max(CLASS_SCORE_MIN_BINS, min(CLASS_SCORE_MAX_BINS, CLASS_SCORE_BUDGET // max(k, 1)))


def _k(m: Any) -> int:
    return len(m.classes)


def _merge_sums(mine: list | None, theirs: list | None, acc: Any) -> list | None:
    if mine is None or theirs is None:
        return None  # unknown on either side (state from a version-1 dict; class_scores: version 2)
    for a, b in zip(mine, theirs):
        a.merge(b)  # exact sums, score distributions: independent of the merge order
    return mine


#: an overflowed sum's value as written (huge ``w * score``: |sum| beyond the float range)
_OVERFLOWED = ("inf", "-inf", "nan")


def _encode_sums(v: list | None, m: Any) -> tuple:
    """The rounded per-class sums and the rest of their exact expansions (null when none); a
    sum beyond the float range as ``'inf'``, ``'-inf'`` or ``'nan'`` (JSON has no such
    numbers) with an empty residue, as ScoreDistribution writes its score sum."""
    if v is None:
        return None, None
    parts = [s.parts() for s in v]  # (value and residue from one expansion)
    values = [p[0] for p in parts]
    residues = [p[1] if math.isfinite(x) else [] for p, x in zip(parts, values)]
    return [x if math.isfinite(x) else repr(x) for x in values], (residues if any(residues) else None)


def _decode_sums(raw: tuple, m: Any, loaded: Mapping[str, Any]) -> list | None:
    values, residues = raw
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != _k(m):
        raise ValueError(f"must be null or a list of {_k(m)} numbers, got {describe(values)}")
    special = [float(x) if isinstance(x, str) and x in _OVERFLOWED else None for x in values]
    values = decode_list([0.0 if x is not None else v for v, x in zip(values, special)], "number", _k(m))
    if residues is None:
        residues = [[] for _ in values]
    if not isinstance(residues, list) or len(residues) != _k(m):
        raise ValueError(f"score_sums_residue must be null or a list of {_k(m)} lists, got {describe(residues)}")
    out = [ExactSum.from_parts(v, r, "score_sums") for v, r in zip(values, residues)]
    for s, x, r in zip(out, special, residues):
        if x is not None:  # an overflowed sum: only its float survives
            if r:
                raise ValueError(f"score_sums_residue of an overflowed sum ({x!r}) must be empty, got {describe(r)}")
            s._special = x
    return out


# prediction_weight and predicted_weights: floats while every weight is whole, else exact
# units (kernels.exact_weights; both in the same mode); written as floats plus residues
def _merge_total(mine: float | int, theirs: float | int, m: Any) -> float | int:
    if mine.__class__ is theirs.__class__ and (mine.__class__ is int or mine + theirs <= _FLOAT_EXACT):
        return mine + theirs
    return to_units(mine) + to_units(theirs)  # one side in units mode (or a float sum could round): units


def _merge_pweights(mine: list, theirs: list, m: Any) -> list:
    if mine[0].__class__ is not theirs[0].__class__ or (
            mine[0].__class__ is float and sum(mine) + sum(theirs) > _FLOAT_EXACT):  # (as _merge_total)
        return [to_units(a) + to_units(b) for a, b in zip(mine, theirs)]
    for i, v in enumerate(theirs):
        mine[i] += v
    return mine


def _encode_total(v: float | int, m: Any) -> tuple[float, list | None]:
    return (v, None) if isinstance(v, float) else (value_of(v), residue_of(v))


def _decode_total(raw: tuple, m: Any, loaded: Mapping[str, Any]) -> float | int:
    value, residue = raw
    if type(value) not in (int, float) or not 0.0 <= value < math.inf:
        raise ValueError(f"must be a finite non-negative number, got {describe(value)}")
    value = float(value)
    if residue is not None:
        return with_residue(value, residue, "prediction_weight_residue")
    return value if is_whole(value) else units_of(value)


def _decode_pweights(raw: tuple, m: Any, loaded: Mapping[str, Any]) -> list:
    values, residues = raw
    return decode_sums(decode_list(values, "weight", _k(m)), residues, "predicted_weights_residues")


def _migrate_v3(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 3 had float score sums: taken as exact (no residues)."""
    return {**state, "score_sums_residue": None}


def _new_class_scores(m: Any) -> list[ScoreDistribution]:
    """``K`` empty class-score columns: copies of an empty one of this limit (no constructor; one
    monitor per key and window)."""
    limit = class_score_max_bins(_k(m))
    template = _EMPTY_COLUMNS.get(limit)
    if template is None:
        template = _EMPTY_COLUMNS[limit] = ScoreDistribution(bins=CLASS_SCORE_BINS, max_bins=limit)
    return [empty_like(template) for _ in range(_k(m))]


#: per column limit (at most CLASS_SCORE_MAX_BINS - CLASS_SCORE_MIN_BINS + 1 of them), the empty
#: column the new ones copy (never handed out itself)
_EMPTY_COLUMNS: dict[int, ScoreDistribution] = {}


def _decode_class_scores(raw: Any, m: Any, loaded: Mapping[str, Any]) -> list | None:
    if raw is None:
        return None
    k = _k(m)
    if not isinstance(raw, list) or len(raw) != k:
        raise ValueError(f"must be null or a list of {k} ScoreDistribution dicts, got {describe(raw)}")
    expected = _new_class_scores(m)[0]._config()
    out = []
    for i, item in enumerate(raw):
        d = ScoreDistribution.from_dict(item)
        if d._config() != expected:
            raise ValueError(f"[{i}] has configuration {d._config()} != {expected}")
        if d.count != loaded["count"]:
            raise ValueError(f"[{i}] counts {d.count} predictions, the monitor {loaded['count']}")
        out.append(d)
    return out


# estimate sums against a reference: [fingerprint, rows fed, tp per class, prob per class,
# pending rows, the 3 K^2 sums of the intervals or None] (monitors.reference_multiclass.new_estimate;
# exact sums, residues when needed; None: no row fed yet; fingerprint "": sums of different
# references were merged)
def _merge_estimate(mine: list | None, theirs: list | None, acc: Any) -> list | None:
    if theirs is None:
        return mine
    if mine is None:
        return _copy_estimate(theirs)
    fold_estimate(theirs)
    if mine[0] != theirs[0]:
        mine[0] = ""
    mine[1] += theirs[1]
    for dst, src in ((mine[2], theirs[2]), (mine[3], theirs[3])):
        for a, b in zip(dst, src):
            a.merge(b)  # exact: independent of the merge order
    if mine[5] is None or theirs[5] is None:
        mine[5] = None  # (unknown on one side: unknown)
    else:
        for a, b in zip(mine[5], theirs[5]):
            a.merge(b)
    return mine


def _copy_estimate(v: list | None) -> list | None:
    if v is None:
        return None
    fold_estimate(v)
    return [v[0], v[1], [s.copy() for s in v[2]], [s.copy() for s in v[3]], [],
            None if v[5] is None else [s.copy() for s in v[5]]]


def _encode_estimate(v: list | None, m: Any) -> dict[str, Any] | None:
    """``{reference, count, tp, prob, second}`` (the correctly rounded sums; ``second`` the
    ``3 K^2`` sums of the intervals, written only when kept) and, only when some sum is not a
    float, ``residues: {tp, prob[, second]}`` (per sum the rest of its exact expansion)."""
    if v is None:
        return None
    fold_estimate(v)
    out: dict[str, Any] = {"reference": v[0], "count": v[1]}
    residues = {}
    for name, sums in (("tp", v[2]), ("prob", v[3]), ("second", v[5])):
        if sums is None:
            continue
        parts = [s.parts() for s in sums]
        out[name] = [p[0] for p in parts]
        residues[name] = [p[1] for p in parts]
    if any(any(r) for r in residues.values()):
        out["residues"] = residues
    return out


_ESTIMATE_KEYS = {"reference", "count", "tp", "prob"}


def _decode_estimate(raw: Any, m: Any, loaded: Mapping[str, Any]) -> list | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not _ESTIMATE_KEYS <= set(raw) <= {*_ESTIMATE_KEYS, "second", "residues"}:
        raise ValueError(f"must be null or {{reference, count, tp, prob[, second][, residues]}}, got {describe(raw)}")
    fp, count = raw["reference"], raw["count"]
    if not isinstance(fp, str) or len(fp) > 64:
        raise ValueError(f"reference must be a fingerprint string, got {describe(fp)}")
    if type(count) is not int or not 0 <= count <= loaded["count"]:
        raise ValueError(f"count must be an int in [0, {loaded['count']}], got {describe(count)}")
    k = _k(m)
    names = ("tp", "prob", "second") if "second" in raw else ("tp", "prob")
    residues = raw.get("residues")
    if residues is not None and (not isinstance(residues, Mapping) or set(residues) != set(names)):
        raise ValueError(f"residues must be {{{', '.join(names)}}}, got {describe(residues)}")
    sums = []
    for name in names:
        size = 3 * k * k if name == "second" else k
        try:
            values = decode_list(raw[name], "weight", size)
        except ValueError as exc:
            raise ValueError(f"{name} {exc}") from None
        rest = [[] for _ in values] if residues is None else residues[name]
        if not isinstance(rest, list) or len(rest) != size:
            raise ValueError(f"residues {name} must be a list of {size} lists, got {describe(rest)}")
        sums.append([ExactSum.from_parts(v, r, f"residues {name}") for v, r in zip(values, rest)])
    return [fp, count, sums[0], sums[1], [], sums[2] if len(sums) > 2 else None]


def _migrate_v2(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 2 to 3: the per-class label-free score histograms and the estimate sums were
    not kept (``null``: unknown; per-class drift then reads the labelled histograms when every
    prediction is labelled, and the estimates are null)."""
    return {**state, "class_scores": None, "estimate": None}


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (``scores`` only: every prediction was labelled) to version 2: predicted-class
    weights are the column sums of the arg-max cells; the per-class score sums were not kept
    (``null``: per-class ``mean_score`` stays None for such state)."""
    scores = state["scores"]
    if not isinstance(scores, Mapping) or not isinstance(scores.get("state"), Mapping):
        raise ValueError("state['scores'] must be an accumulator dict")
    s = scores["state"]
    k = len(config["classes"])
    predicted = [0.0] * k
    for cell in s["cells"]:
        if not (isinstance(cell, list) and len(cell) == 3 and type(cell[1]) is int and 0 <= cell[1] < k):
            raise ValueError(f"state['scores'] cells must be [true, argmax, weight], got {describe(cell)}")
        predicted[cell[1]] += cell[2]
    return {
        "count": sum(s["events"]),
        "prediction_weight": sum(s["weights"]),
        "predicted_weights": predicted,
        "score_sums": None,
        "scores": scores,
    }



def _score_matrix(events: Sequence[Event]) -> np.ndarray:
    """The events' score rows as one float64 array (read-only: both parts of a batch read it)."""
    S = np.asarray([e.scores for e in events], dtype=np.float64)
    S.flags.writeable = False
    return S

class MulticlassMonitor(Monitor):
    """Multiclass task: ``y_true`` in ``classes``, ``scores`` a vector over ``classes``.

    Label-free part (every prediction): ``count``, ``total_weight``, the weight of each
    arg-max class (``per_class[c]["predicted_rate"]``, its share), each class's weighted
    mean score (``per_class[c]["mean_score"]``), one score histogram per class
    (``class_scores``: ``K`` ScoreDistributions, exact up to :func:`class_score_max_bins`
    distinct scores per column (512, or ``CLASS_SCORE_BUDGET`` = 4,096 shared by the columns
    when ``K > 8``, at least 16), then a log grid of ``CLASS_SCORE_BINS`` bins per octave
    with at most as many keys) for per-class score drift, and, when the
    monitor is bound to a :class:`~streammetrics.monitors.reference_multiclass.MulticlassReference`
    (``reference=``, or :meth:`use_references` per key), the ``2K + 1`` CBPE sums of its
    predictions against it (``estimate``, exact sums written with an optional ``residues`` key; see
    :meth:`MulticlassReference.metrics <streammetrics.monitors.reference_multiclass.MulticlassReference.metrics>`).
    ``total_weight`` and the predicted-class weights are exact sums (floats while every
    weight is whole, else units: see :mod:`~streammetrics.kernels.exact_weights`; written
    with optional ``prediction_weight_residue`` / ``predicted_weights_residues``).
    The binding is not state: ``copy`` keeps it, ``to_dict``/pickling drop it (bind again
    after loading; the sums carry the reference's fingerprint, so sums of another reference
    are never read as this one's). Label-based part: hard-label metrics of the
    arg-max prediction (``accuracy``, ``balanced_accuracy``, ``macro_precision``,
    ``macro_recall``, ``macro_f1``, ``weighted_f1``, ``matthews_corrcoef``, ``cohen_kappa``),
    ``top_k_accuracy`` (k=2), ``log_loss``, ``roc_auc`` (one-vs-rest, macro) with
    ``roc_auc_weighted``, and ``per_class`` precision/recall/F1/support/ROC AUC.

    >>> m = MulticlassMonitor(["a", "b", "c"])
    >>> s = m.update({"y_true": "a", "scores": [0.7, 0.2, 0.1]}).snapshot()
    >>> per_class = s["per_class"]
    >>> s["accuracy"], per_class["a"].get("predicted_rate"), per_class["b"].get("mean_score")
    (1.0, 1.0, 0.2)
    """

    type_name = "MulticlassMonitor"
    task = "multiclass"
    parts = ("scores",)
    fields = ("y_true", "scores", "weight")
    #: version 4: exact per-class score sums (``score_sums_residue``); versions 1 to 3 load
    version = 4
    migrations = {1: _migrate_v1, 2: _migrate_v2, 3: _migrate_v3}
    state_fields = (
        Field("count", lambda m: 0, "count", attrs="_pcount"),
        # summed weight of the predictions (exact: see _merge_total)
        Field(("prediction_weight", "prediction_weight_residue"), lambda m: 0.0, attrs="_ptotal",
              merge=_merge_total, copy=lambda v: v, encode=_encode_total, decode=_decode_total,
              optional=("prediction_weight_residue",)),
        # weight of the predictions whose arg-max (first maximum) is each class
        Field(("predicted_weights", "predicted_weights_residues"), lambda m: [0.0] * _k(m), attrs="_pweights",
              merge=_merge_pweights, copy=list, encode=lambda v, m: encode_sums(v), decode=_decode_pweights,
              optional=("predicted_weights_residues",)),
        # per class: sum of weight * score (None: unknown, state from a version-1 dict)
        Field(("score_sums", "score_sums_residue"), lambda m: [ExactSum() for _ in range(_k(m))], attrs="_psums",
              merge=_merge_sums, copy=lambda v: None if v is None else [s.copy() for s in v], encode=_encode_sums,
              decode=_decode_sums),
        part("scores", lambda m: MulticlassScores(m.classes)),
        # one label-free score histogram per class column (None: unknown, migrated state)
        Field("class_scores", _new_class_scores, attrs="_class_scores", merge=_merge_sums,
              copy=lambda v: None if v is None else [d.copy() for d in v],
              encode=lambda v, m: None if v is None else [d.to_dict() for d in v], decode=_decode_class_scores),
        # CBPE sums against the bound reference (see _merge_estimate)
        Field("estimate", lambda m: None, attrs="_estimate", merge=_merge_estimate, copy=_copy_estimate,
              encode=_encode_estimate, decode=_decode_estimate),
    )

    _pcount: int
    _ptotal: float | int  # float mode, or units (kernels.exact_weights)
    _pweights: list
    _psums: list | None
    scores: MulticlassScores
    _class_scores: list | None
    _estimate: list | None

    def __init__(self, classes: Sequence[Hashable], reference: Any = None) -> None:
        self.classes = MulticlassScores(classes).classes
        self._reference: Any = None
        self._references: Mapping[Any, Any] | None = None
        self.reset()
        if reference is not None:
            self.bind(reference)

    def empty(self) -> "MulticlassMonitor":
        """A new monitor with this one's configuration, binding and no events, built without the
        constructor (:func:`~streammetrics.monitors.base.empty_like`; the window engine makes one
        per key and window). Called on an empty monitor (a factory's template).

        >>> MulticlassMonitor(["a", "b"]).empty() == MulticlassMonitor(["a", "b"])
        True
        """
        if self._pcount or self.scores.count:
            raise ValueError("empty() is called on an empty monitor (a template)")
        return empty_like(self)

    # -------------------------------------------------------------- reference binding
    def bind(self, reference: Any) -> "MulticlassMonitor":
        """Feed the estimate sums of every later prediction against ``reference`` (a
        ``MulticlassReference`` over the same classes; None: stop)."""
        if reference is not None:
            classes = getattr(reference, "classes", None)
            if not hasattr(reference, "calibrated_row") or classes is None:
                raise TypeError(f"reference must be a MulticlassReference, got {type(reference).__name__}")
            if list(classes) != list(self.classes):
                raise ValueError(f"reference classes {list(classes)!r} != monitor classes {list(self.classes)!r}")
        self._reference, self._references = reference, None
        return self

    def use_references(self, references: Mapping[Any, Any] | None) -> "MulticlassMonitor":
        """Bind to ``references[(model, segment)]`` of the first prediction seen (a pipeline
        monitor holds one key); keys without a reference stay unbound."""
        self._reference, self._references = None, references
        return self

    @property
    def reference(self) -> Any:
        """The bound ``MulticlassReference`` (None if unbound)."""
        return self._reference

    def _bind_key(self, event: Event) -> Any:
        refs, self._references = self._references, None
        ref = refs.get((event.model, event.segment)) if refs is not None else None
        if ref is not None:
            self.bind(ref)
        return ref

    def merge(self, other: Any) -> "MulticlassMonitor":
        super().merge(other)
        if self._reference is None and self._references is None:  # an empty unbound copy merging panes
            self._reference = getattr(other, "_reference", None)
            self._references = getattr(other, "_references", None)
        return self

    def _check_merge(self, other: Any) -> None:
        mine, theirs = self._class_scores, other._class_scores
        if mine is not None and theirs is not None:
            for a, b in zip(mine, theirs):
                a._check_mergeable(b)
                a._check_merge(b)

    def _config(self) -> dict[str, Any]:
        return {"classes": self.scores._config()["classes"]}

    def _parser_options(self) -> dict[str, Any]:
        return {"classes": self.classes}

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen
        return self._pcount

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        t = self._ptotal
        return t if isinstance(t, float) else value_of(t)

    @property
    def predicted_weights(self) -> list[float]:
        """Weight of the predictions whose arg-max (first maximum) is each class."""
        return values_of(self._pweights)

    def _check_state(self, loaded: dict[str, Any]) -> None:
        super()._check_state(loaded)
        # exact weight sums: both in units mode as soon as one is
        total, weights = loaded["prediction_weight"], loaded["predicted_weights"]
        if total.__class__ is int or weights[0].__class__ is int:
            loaded["prediction_weight"] = to_units(total)
            loaded["predicted_weights"] = [to_units(x) for x in weights]

    def _add_units(self, pred: np.ndarray | int, w: np.ndarray | float | None) -> None:
        """Add prediction weights exactly (units mode; switching to it if need be): one
        weight ``w`` to class ``pred``, or a batch (``w`` None: unit weights)."""
        if isinstance(self._ptotal, float):
            self._ptotal = units_of(self._ptotal)
            self._pweights = [units_of(x) for x in self._pweights]
        if isinstance(pred, np.ndarray):
            keys, units = grouped_units(pred, np.ones(len(pred)) if w is None else w)  # type: ignore[arg-type]  # an array
            for p, u in zip(keys.tolist(), units):
                self._pweights[p] += u
            self._ptotal += sum(units)
        else:
            u = UNIT if w == 1.0 else units_of(float(w))  # type: ignore[arg-type]  # a float here
            self._ptotal += u
            self._pweights[pred] += u

    def update_prediction(self, event: Event) -> "MulticlassMonitor":
        s, w = event.scores, event.weight
        if s is None or len(s) != len(self.classes):
            raise ValueError(f"scores must hold {len(self.classes)} numbers aligned with the classes")
        ref = self._reference
        if ref is None and self._references is not None:
            ref = self._bind_key(event)
        columns = self._class_scores
        if w != 1.0 and columns is not None and columns[0].total_weight + w > MAX_TOTAL_WEIGHT:
            raise ValueError(f"weight {w!r} would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
        pred = max(range(len(s)), key=s.__getitem__)
        self._pcount += 1
        total = self._ptotal
        if total.__class__ is float and total <= _FLOAT_EXACT and (
                w == 1.0 or (w.__class__ is float and w.is_integer() and w <= WHOLE_MAX)):
            self._ptotal = total + w
            self._pweights[pred] += w
        else:
            self._add_units(pred, w)
        sums = self._psums
        if sums is not None:
            for i, v in enumerate(s):
                sums[i].add(w * v)
        if columns is not None:
            if w == 1.0:
                for d, v in zip(columns, s):
                    d.update(v)
            else:
                for d, v in zip(columns, s):
                    d.update(v, w)
        if ref is not None:
            est = self._estimate
            if est is None:
                est = self._estimate = new_estimate(ref.fingerprint, len(s))
            est[1] += 1
            ref.feed_row(s, w, pred, est)
        return self

    def update_predictions(self, events: Sequence[Event]) -> "MulticlassMonitor":
        if not len(events):
            return self
        return self._predictions(events, _score_matrix(events), batch_weights(events))

    def _predictions(self, events: Sequence[Event], S: np.ndarray, w: np.ndarray | None) -> "MulticlassMonitor":
        """:meth:`update_predictions` given the events' score matrix and :func:`batch_weights`."""
        S = S.reshape(len(events), -1)
        if S.shape[1] != len(self.classes):
            raise ValueError(f"scores must hold {len(self.classes)} numbers aligned with the classes")
        wv = np.ones(len(events)) if w is None else w
        ref = self._reference
        if ref is None and self._references is not None:
            ref = self._bind_key(events[0])
        pred = S.argmax(axis=1)
        if ref is not None:  # before any change: may raise (the per-event path's terms)
            terms = estimate_terms(ref.calibrated_matrix(S), wv)
        columns = self._class_scores
        total = float(len(events)) if w is None else float(w.sum())
        if columns is not None and columns[0].total_weight + total > MAX_TOTAL_WEIGHT:
            raise ValueError(f"sample weights would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
        self._pcount += len(events)
        if self._ptotal.__class__ is float and self._ptotal + total <= _FLOAT_EXACT and (w is None or all_whole(w)):
            self._ptotal += total
            counts = np.bincount(pred, weights=wv, minlength=len(self.classes))
            for i, v in enumerate(counts.tolist()):
                self._pweights[i] += v
        else:
            self._add_units(pred, w)
        # the class columns first: their one pass gives the exact column sums of unit weights
        column_sums = None if columns is None else ScoreDistribution.update_columns(columns, S, w)
        if self._psums is not None:  # exact sums of the per-event terms w * s
            if column_sums is not None:
                for total_sum, units in zip(self._psums, column_sums):
                    total_sum.add_units(units)
            else:
                add_rows(self._psums, list((wv[:, None] * S).T))
        if ref is not None:
            est = self._estimate
            if est is None:
                est = self._estimate = new_estimate(ref.fingerprint, len(self.classes))
            est[1] += len(events)
            add_estimate_terms(est, terms, pred, wv)
        return self

    def update_outcome(self, event: Event) -> "MulticlassMonitor":
        self.scores.update(event.y_true, event.scores, event.weight)
        return self

    def update_outcomes(self, events: Sequence[Event]) -> "MulticlassMonitor":
        self.scores.update_many([e.y_true for e in events], _score_matrix(events), batch_weights(events))
        return self

    def update_event(self, event: Event) -> "MulticlassMonitor":
        self.scores.update(event.y_true, event.scores, event.weight)  # validates the event first
        return self.update_prediction(event)

    def update_events(self, events: Sequence[Event]) -> "MulticlassMonitor":
        S, w = _score_matrix(events), batch_weights(events)  # (read once for both parts)
        self.scores.update_many([e.y_true for e in events], S, w)  # validates the whole batch first
        return self._predictions(events, S, w) if len(events) else self

    interval_metrics = MULTICLASS_INTERVALS

    def intervals(self, confidence: float | None = None,
                  metrics: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The snapshot's ``intervals`` of :data:`MULTICLASS_INTERVALS`: the confusion-matrix
        metrics over :attr:`classes` (:func:`~streammetrics.monitors.labels.label_interval_pairs`),
        ``top_k_accuracy`` (k = 2, more than two classes) and the one-vs-rest ``roc_auc`` macro and
        weighted (``MulticlassScores.interval``). ``log_loss`` has none (documented in
        docs/intervals.md)."""
        from streammetrics.kernels.intervals import check_confidence

        c = self.confidence if confidence is None else check_confidence(confidence)
        sc = self.scores
        cm = sc.confusion()
        if not cm.count:
            return None
        return self._score_intervals(label_interval_pairs(cm, list(self.classes), c), c)

    def _score_intervals(self, pairs: dict[str, Any], c: float) -> dict[str, Any]:
        """:meth:`intervals` from its label metrics' ``pairs`` on: the score metrics' intervals added."""
        from streammetrics.kernels.intervals import pairs_record

        sc = self.scores
        pairs["top_k_accuracy"] = sc.interval("top_k_accuracy", c, k=2) if len(self.classes) > 2 else None
        pairs["roc_auc"] = sc.interval("roc_auc", c)
        pairs["roc_auc_weighted"] = sc.interval("roc_auc", c, average="weighted")
        return pairs_record(pairs, c)

    def snapshot(self) -> dict[str, Any]:
        cm = self.scores.confusion()
        return self._scored(label_metrics(cm, self.classes), class_report(cm, self.classes))

    def _scored(self, out: dict[str, Any], per_class: dict[str, Any]) -> dict[str, Any]:
        """:meth:`snapshot` from its label metrics (``out``, from ``count`` or ``accuracy`` on) and
        ``per_class`` rows on: the score metrics and per-class rates added."""
        sc = self.scores
        head: dict[str, Any] = {"count": self.count, "total_weight": json_number(self.total_weight)}
        head.update((k, v) for k, v in out.items() if k not in head)  # (label_metrics' own count first)
        out = head
        out["top_k_accuracy"] = quiet(sc.top_k_accuracy, k=2) if len(self.classes) > 2 else None
        out["log_loss"] = quiet(sc.log_loss)
        out["roc_auc"] = quiet(sc.roc_auc, multi_class="ovr", average="macro")
        out["roc_auc_weighted"] = quiet(sc.roc_auc, multi_class="ovr", average="weighted")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                aucs = sc.roc_auc(multi_class="ovr", average=None)
            except ValueError:
                aucs = [None] * len(self.classes)
        for i, label in enumerate(self.classes):
            if str(label) in per_class:
                per_class[str(label)]["roc_auc"] = json_number(aucs[i])
        total = self.total_weight
        pweights = self.predicted_weights
        if self._pcount:
            for i, label in enumerate(self.classes):
                row = per_class.setdefault(str(label), {})
                row["predicted_rate"] = json_number(pweights[i] / total) if total > 0 else None
                sums = self._psums
                row["mean_score"] = json_number(sums[i].value / total) if sums is not None and total > 0 else None
        out["per_class"] = per_class
        return out

    #: small closed windows are built together (:meth:`snapshot_many`)
    snapshots_together = True

    @classmethod
    def snapshot_many(cls, monitors: Sequence[Any], include_state: bool = True) -> list[tuple[Any, ...]]:
        """:meth:`Monitor.snapshot_many`: the label metrics of the windows of unit-weight events over
        at most ``MANY_MAX_LABELS`` classes in one vectorised pass
        (:func:`~streammetrics.monitors.labels.label_parts_many`), the score metrics and every other
        window by the monitor's own methods; the same records.

        >>> a = MulticlassMonitor(["a", "b", "c"]).update({"y_true": "b", "scores": [0.2, 0.5, 0.3]})
        >>> MulticlassMonitor.snapshot_many([a])[0] == (a.snapshot(), a.to_dict(), a.intervals())
        True
        """
        out: list[Any] = [None] * len(monitors)
        chosen, matrices = [], []
        MulticlassScores.ovr_many([m.scores for m in monitors], [m.confidence for m in monitors])  # (at once)
        wide = [m for m in monitors if len(m.classes) > 2]  # (top_k_accuracy's intervals, k = 2: at once)
        MulticlassScores.top_k_intervals([m.scores for m in wide], [m.confidence for m in wide], k=2)
        for i, m in enumerate(monitors):
            cm = m.scores.confusion()
            if cm.count and cm.unit_weights and 2 <= len(m.classes) <= MANY_MAX_LABELS:
                chosen.append(i)
                matrices.append((cm, list(m.classes), m.confidence))
            else:
                metrics = m.snapshot()
                out[i] = (metrics, m.to_dict() if include_state else None, m.intervals(metrics=metrics))
        for i, (columns, per_class, pairs) in zip(chosen, label_parts_many(matrices)):
            m = monitors[i]
            metrics = m._scored(columns, per_class)
            if pairs is None:
                record = m.intervals(metrics=metrics)
            else:
                record = m._score_intervals(pairs, m.confidence)
            out[i] = (metrics, m.to_dict() if include_state else None, record)
        return out
