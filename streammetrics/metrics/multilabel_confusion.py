"""``MultilabelConfusion``: per-label confusion counts of multilabel hard predictions, with
scikit-learn's precision/recall/F-beta/Jaccard (micro, macro, weighted, samples, None),
subset accuracy and Hamming loss, equal to scikit-learn on the indicator matrices.

An event is a pair of rows, each either an indicator sequence aligned with ``labels``
(0/1 or bools) or a ``set``/``frozenset`` of the labels present.

State, all weighted sums: per label ``tp``, ``pred`` (predicted) and ``true`` (support);
the weight of events predicted exactly right (subset accuracy); the weighted number of
wrong label decisions (Hamming loss); and for ``average="samples"`` a histogram
``{(tp, n_true, n_pred) of one event: [summed weight, number of zero-weight events]}``.
Any per-sample score (precision tp/n_pred, recall tp/n_true, F-beta for any beta, Jaccard
tp/(n_true + n_pred - tp)) is a function of that triple, so the samples average is exact
for every beta and mergeable; zero-weight events are kept apart because scikit-learn
scores them as 0/0 (``zero_division``, warning) before weighting them by 0.

Summed weights are exact (:mod:`streammetrics.kernels.exact_weights`), so the state depends
only on the multiset of events: whole floats while every weight is a whole number up to
``2**32`` and total + wrong_labels stays at most ``2**52`` (so float sums are exact), else ints
of units of ``2**-1074`` in every container. They are written correctly rounded;
``weight_residues`` (only when some float is not its exact sum) lists ``[index, residue]`` over
the flat sequence ``[total_weight, *tp, *pred, *true, subset_correct, wrong_labels, *samples'
weights]``. Metrics read the floats.

Empty input: as for :class:`~streammetrics.ConfusionMatrix`, metrics of an accumulator
without any event of non-zero weight return NaN with an ``UndefinedMetricWarning``
(scikit-learn raises).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.labels import check_label_list, label_kind
from streammetrics.core.state import Field, decode_list, describe
from streammetrics.core.validation import (
    as_weight_array,
    check_weight,
    to_builtin_label,
)
from streammetrics.kernels import classification as _cls
from streammetrics.kernels.exact_sum import exact_units
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    WHOLE_MAX,
    all_whole,
    decode_sums,
    encode_residues,
    grouped_units,
    units_by_key,
    units_of,
    value_of,
)
from streammetrics.metrics.rows import Columns

__all__ = ["MultilabelConfusion"]

_INF = math.inf
# whole weights are summed as floats (a batch in float64) while total + wrong stays at most this
_FLOAT_EXACT = FLOAT_EXACT


# ----------------------------------------------------------------------------- declared state
def _n(acc: Any) -> int:
    return len(acc._labels)


def _decode_samples(groups: Any, acc: Any, count: int, total: float) -> dict[tuple[int, int, int], list]:
    n = _n(acc)
    if not isinstance(groups, list):
        raise ValueError("samples must be a list of [tp, n_true, n_pred, weight, n_zero_weight]")
    if len(groups) > count:
        raise ValueError(f"samples: {len(groups)} groups cannot come from count={count} events")
    samples: dict[tuple[int, int, int], list] = {}
    events = 0
    for i, g in enumerate(groups):
        if not isinstance(g, list) or len(g) != 5:
            raise ValueError(f"samples[{i}] must be [tp, n_true, n_pred, weight, n_zero_weight], got {describe(g)}")
        ni, nt, np_, w, nz = g
        if not all(type(x) is int for x in (ni, nt, np_, nz)):
            raise ValueError(f"samples[{i}] counts must be ints, got {describe(g)}")
        if not (0 <= ni <= nt <= n and ni <= np_ <= n and nz >= 0):
            raise ValueError(f"samples[{i}] is not a possible (tp, n_true, n_pred) of {n} labels: {describe(g)}")
        key = (ni, nt, np_)
        if key in samples:
            raise ValueError(f"samples[{i}] repeats {key!r}")
        samples[key] = [check_weight(w, f"samples[{i}][3]"), nz]
        events += 1 if w > 0 else 0
        events += nz
    if events > count or (count > 0) != bool(samples):
        raise ValueError(f"samples do not describe count={count} events")
    if abs(math.fsum(v[0] for v in samples.values()) - total) > 1e-9 * max(1.0, total):
        raise ValueError("total_weight differs from the summed sample weights")
    return samples


def _weight(raw: Any, name: str) -> float:
    if type(raw) not in (int, float) or not 0.0 <= raw < _INF:
        raise ValueError(f"{name} must be a finite non-negative number, got {describe(raw)}")
    return float(raw)


def _is_units(sums: tuple) -> bool:
    """True if the summed weights (the declared tuple) are held in units."""
    return sums[0].__class__ is int


def _to_units(sums: tuple) -> tuple:
    """The summed weights in units: ``sums`` itself if already, else a converted copy."""
    if _is_units(sums):
        return sums
    total, tp, pred, true, correct, wrong, samples = sums
    return (units_of(total), [units_of(x) for x in tp], [units_of(x) for x in pred], [units_of(x) for x in true],
            units_of(correct), units_of(wrong), {k: [units_of(g[0]), g[1]] for k, g in samples.items()})


def _merge_sums(mine: tuple, theirs: tuple, acc: Any) -> tuple:
    if (_is_units(mine) or _is_units(theirs)  # a side in units, or float sums that could round: both in units
            or mine[0] + mine[5] + theirs[0] + theirs[5] > _FLOAT_EXACT):
        mine, theirs = _to_units(mine), _to_units(theirs)
    total, tp, pred, true, correct, wrong, samples = mine
    for lst, add in zip((tp, pred, true), theirs[1:4]):
        for j, x in enumerate(add):
            lst[j] += x
    for key, (w, nz) in theirs[6].items():
        g = samples.get(key)
        if g is None:
            samples[key] = [w, nz]
        else:
            g[0] += w
            g[1] += nz
    return total + theirs[0], tp, pred, true, correct + theirs[4], wrong + theirs[5], samples


def _flat(sums: tuple) -> tuple[list, list]:
    """(the summed weights in the order of ``weight_residues``, the sorted samples' keys)."""
    total, tp, pred, true, correct, wrong, samples = sums
    keys = sorted(samples)
    return [total, *tp, *pred, *true, correct, wrong, *(samples[k][0] for k in keys)], keys


def _encode_sums(sums: tuple, acc: Any) -> tuple:
    total, tp, pred, true, correct, wrong, samples = sums
    if not _is_units(sums):  # whole weights: float sums are exact
        return (total, list(tp), list(pred), list(true), correct, wrong,
                [[k[0], k[1], k[2], float(g[0]), g[1]] for k, g in sorted(samples.items())], None)
    n = len(tp)
    flat, keys = _flat(sums)
    values = [value_of(u) for u in flat]
    rows = [[k[0], k[1], k[2], v, samples[k][1]] for k, v in zip(keys, values[3 * n + 3:])]
    return (values[0], values[1:n + 1], values[n + 1:2 * n + 1], values[2 * n + 1:3 * n + 1], values[3 * n + 1],
            values[3 * n + 2], rows, encode_residues(flat))


def _decode_sums(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> tuple:
    total, tp, pred, true, correct, wrong, groups, residues = raw
    total = _weight(total, "total_weight")
    lists = []
    for name, value in (("tp", tp), ("pred", pred), ("true", true)):
        try:
            lists.append(decode_list(value, "weight", _n(acc)))
        except ValueError as exc:
            raise ValueError(f"{name}{'' if str(exc).startswith('[') else ': '}{exc}") from None
    decoded = _decode_samples(groups, acc, loaded["count"], total)
    sums = (total, *lists, _weight(correct, "subset_correct"), _weight(wrong, "wrong_labels"), decoded)
    flat, keys = _flat(sums)
    units = decode_sums(flat, residues, "weight_residues")
    if not units or units[0].__class__ is float:  # float mode
        return sums
    n = _n(acc)
    samples = {k: [u, decoded[k][1]] for k, u in zip(keys, units[3 * n + 3:])}
    return (units[0], units[1:n + 1], units[n + 1:2 * n + 1], units[2 * n + 1:3 * n + 1], units[3 * n + 1],
            units[3 * n + 2], samples)


_MULTILABEL_CONFUSION_STATE = (
    Field("count", lambda acc: 0, "count", attrs="count"),
    # the summed weights: of every event; per label, of true positives, of predictions, of truths
    # (support); of events predicted exactly right; the weighted number of wrong label decisions;
    # {(tp, n_true, n_pred): [summed weight, zero-weight events]}; and their residues if needed
    Field(("total_weight", "tp", "pred", "true", "subset_correct", "wrong_labels", "samples", "weight_residues"),
          lambda acc: (0.0, [0.0] * _n(acc), [0.0] * _n(acc), [0.0] * _n(acc), 0.0, 0.0, {}),
          attrs=("_total", "_tp", "_pred", "_true", "_correct", "_wrong", "_samples"), merge=_merge_sums,
          copy=lambda v: (v[0], list(v[1]), list(v[2]), list(v[3]), v[4], v[5], {k: list(g) for k, g in v[6].items()}),
          encode=_encode_sums, decode=_decode_sums, optional=("weight_residues",)),
)


def _column_units(M: np.ndarray, w: np.ndarray, n: int) -> list[int]:
    """Per column of the indicator matrix ``M``, the exact sum in units of the weights of
    its rows that hold a 1."""
    rows, cols = np.nonzero(M)
    got = units_by_key(cols, w[rows])
    return [got.get(j, 0) for j in range(n)]


class MultilabelConfusion(Accumulator):
    """Confusion counts for multilabel hard predictions.

    ``labels`` is the number of labels ``n`` (labels are then the column indices
    ``0 .. n-1``, as in scikit-learn's indicator matrices) or a sequence of distinct label
    names (int, str or bool, one kind) giving the column order.

    >>> m = MultilabelConfusion(["x", "y"]).update_many([[1, 0], [0, 1], [1, 1]], [[1, 0], [0, 0], [1, 1]])
    >>> round(m.accuracy(), 4), round(m.f1(average="samples"), 4), round(m.hamming_loss(), 4)
    (0.6667, 0.6667, 0.1667)
    """

    type_name = "MultilabelConfusion"
    state_fields = _MULTILABEL_CONFUSION_STATE

    # the declared state (see _MULTILABEL_CONFUSION_STATE): whole floats, or all ints of units
    _total: Any
    _tp: list[Any]
    _pred: list[Any]
    _true: list[Any]
    _correct: Any
    _wrong: Any
    _samples: dict[tuple[int, int, int], list]
    _exact: bool  # the summed weights are in units (derived)

    def __init__(self, labels: int | Sequence[Hashable]) -> None:
        names = check_label_list(labels, "labels", allow_count=True)
        self._labels = names
        self._kind = label_kind(names[0])
        self._index = {name: j for j, name in enumerate(names)}
        self._cols = Columns(names, "label", "labels")
        self.reset()

    @property
    def labels(self) -> list:
        """Label names in column order."""
        return list(self._labels)

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, Any]:
        return {"labels": list(self._labels)}

    def _refresh(self) -> None:
        self._exact = self._total.__class__ is int
        self._read: Any = value_of if self._exact else float

    def _sums_tuple(self) -> tuple:
        return self._total, self._tp, self._pred, self._true, self._correct, self._wrong, self._samples

    def _switch_to_units(self) -> None:
        """Hold every summed weight in units from now on (exactly)."""
        if not self._exact:
            (self._total, self._tp, self._pred, self._true, self._correct, self._wrong,
             self._samples) = _to_units(self._sums_tuple())
            self._refresh()

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only property over the declared state
        return self._read(self._total)

    def _check_state(self, loaded: dict[str, Any]) -> None:
        total, tp, pred, true, correct = loaded["total_weight"][:5]
        tol: Any = 0 if total.__class__ is int else 1e-9 * max(1.0, total)  # units: exact, compared exactly
        if correct > total + tol or any(t > min(p, tr) + tol for t, p, tr in zip(tp, pred, true)):
            raise ValueError("tp or subset_correct exceed the weights they count")

    @classmethod
    def _from_config(cls, config: Mapping[str, Any]) -> "MultilabelConfusion":
        if set(config) != {"labels"} or not isinstance(config["labels"], list):
            raise ValueError(f"config must be {{'labels': [label, ...]}}, got {dict(config)!r}")
        return cls(config["labels"])

    # ---------------------------------------------------------------- updates
    def _row(self, row: Any, name: str) -> set:
        """Column indices of the labels present in one row (indicator sequence or set)."""
        return {j for j, present in enumerate(self._cols.indicator_row(row, name)) if present}

    def update(self, y_true: Any, y_pred: Any, weight: float = 1.0) -> "MultilabelConfusion":
        """Add one event: true and predicted rows (indicator sequences or label sets)."""
        if weight.__class__ is not float or not 0.0 <= weight < _INF:
            weight = check_weight(weight)
        t = self._row(y_true, "y_true")
        p = self._row(y_pred, "y_pred")
        zero_weight = weight == 0.0
        if self._exact or not (weight.is_integer() and weight <= WHOLE_MAX) or self._total + self._wrong > _FLOAT_EXACT:
            self._switch_to_units()  # (float sums stay exact: every sum <= total + wrong <= 2**52 + one event)
            weight = units_of(weight)  # units: the sums are ints
        both = t & p
        true, pred, tp = self._true, self._pred, self._tp
        for j in t:
            true[j] += weight
        for j in p:
            pred[j] += weight
        for j in both:
            tp[j] += weight
        ni, nt, np_ = len(both), len(t), len(p)
        if ni == nt == np_:
            self._correct += weight
        self._wrong += weight * (nt + np_ - 2 * ni)
        key = (ni, nt, np_)
        g = self._samples.get(key)
        if g is None:
            self._samples[key] = [weight, 1 if zero_weight else 0]
        else:
            g[0] += weight
            if zero_weight:
                g[1] += 1
        self.count += 1
        self._total += weight
        return self

    def update_many(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> "MultilabelConfusion":
        """Add a batch: indicator matrices (n, n_labels) or sequences of label sets."""
        T = self._cols.indicator_matrix(y_true, "y_true")
        P = self._cols.indicator_matrix(y_pred, "y_pred")
        if len(T) != len(P):
            raise ValueError(f"inconsistent batch lengths: y_true has {len(T)}, y_pred has {len(P)}")
        n = len(T)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        both = T & P
        nt = T.sum(axis=1)
        np_ = P.sum(axis=1)
        ni = both.sum(axis=1)
        exact = (nt == ni) & (np_ == ni)
        wrong = nt + np_ - 2 * ni
        L = len(self._labels)
        code = (ni * (L + 1) + nt) * (L + 1) + np_
        keys, inverse = np.unique(code, return_inverse=True)
        inverse = inverse.reshape(-1)
        units = False
        if w is None:
            add_true, add_pred, add_tp = T.sum(axis=0), P.sum(axis=0), both.sum(axis=0)
            correct, wrong_sum, total = float(exact.sum()), float(wrong.sum()), float(n)
            group_w: Any = np.bincount(inverse, minlength=len(keys)).astype(np.float64)
            group_zero = np.zeros(len(keys), dtype=np.int64)
        else:
            group_zero = np.bincount(inverse[w == 0], minlength=len(keys))
            wrong_sum = float(np.dot(w, wrong.astype(np.float64)))
            if (not self._exact and all_whole(w)
                    and wrong_sum + float(w.sum()) + self._total + self._wrong <= _FLOAT_EXACT):
                add_true, add_pred, add_tp = (w @ M.astype(np.float64) for M in (T, P, both))  # whole: exact
                correct = float(w[exact].sum())
                total = float(w.sum())
                group_w = np.bincount(inverse, weights=w, minlength=len(keys))
            else:  # exact sums in units, grouped in one vectorised pass each
                units = True
                add_true, add_pred, add_tp = (_column_units(M, w, L) for M in (T, P, both))
                correct = exact_units(w[exact])
                wrong_keys, wrong_units = grouped_units(wrong, w)
                wrong_sum = sum(k * u for k, u in zip(wrong_keys.tolist(), wrong_units))
                total = exact_units(w)
                group_w = grouped_units(inverse, w)[1]  # every group has a row: one sum per key
        # ---- commit
        if units:
            self._switch_to_units()
        for mine, add in ((self._true, add_true), (self._pred, add_pred), (self._tp, add_tp)):
            for j, v in enumerate(add if units else add.tolist()):
                mine[j] += v
        self._correct += correct
        self._wrong += wrong_sum
        samples = self._samples
        for c, gw, gz in zip(keys.tolist(), group_w if units else group_w.tolist(), group_zero.tolist()):
            key = (c // (L + 1) ** 2, (c // (L + 1)) % (L + 1), c % (L + 1))
            g = samples.get(key)
            if g is None:
                samples[key] = [gw, gz]
            else:
                g[0] += gw
                g[1] += gz
        self.count += n
        self._total += total
        return self

    # ------------------------------------------------------------- metrics
    def matrix(self) -> np.ndarray:
        """(n_labels, 2, 2) array [[tn, fp], [fn, tp]] per label, as
        ``sklearn.metrics.multilabel_confusion_matrix``."""
        tp, pred, true = self._sums(self._labels)
        fp, fn = pred - tp, true - tp
        tn = self.total_weight - tp - fp - fn
        return np.stack([tn, fp, fn, tp]).T.reshape(-1, 2, 2)

    def _sums(self, labels: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = [self._index[x] for x in labels]
        read = self._read
        return (
            np.array([read(self._tp[j]) for j in idx], dtype=np.float64),
            np.array([read(self._pred[j]) for j in idx], dtype=np.float64),
            np.array([read(self._true[j]) for j in idx], dtype=np.float64),
        )

    def _labels_for(self, labels: Any, pos_label: Any, average: Any) -> list:
        """scikit-learn's ``_check_set_wise_labels`` for multilabel-indicator targets."""
        _cls.check_average(average)
        if average == "binary":
            raise ValueError(
                "Target is multilabel-indicator but average='binary'. Please choose another "
                "average setting, one of [None, 'micro', 'macro', 'weighted', 'samples']."
            )
        if pos_label not in (None, 1):
            warnings.warn(
                f"Note that pos_label (set to {pos_label!r}) is ignored when average != 'binary' "
                f"(got {average!r}). You may use labels=[pos_label] to specify a single positive class.",
                UserWarning,
                stacklevel=3,
            )
        if labels is None:
            return list(self._labels)
        if isinstance(labels, (str, bytes)) or not isinstance(labels, Iterable):
            raise TypeError(f"labels must be a sequence of labels, got {labels!r}")
        out = [to_builtin_label(v, f"labels[{i}]") for i, v in enumerate(labels)]
        unknown = [x for x in out if x not in self._index]
        if unknown:
            raise ValueError(f"labels {unknown!r} are not among this accumulator's labels {self._labels!r}")
        if average == "samples" and sorted(self._index[x] for x in out) != list(range(len(self._labels))):
            raise ValueError(
                "average='samples' is available for all labels only (labels=None): the per-event "
                "histogram is kept over every label"
            )
        return out

    def _sample_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-sample (tp, pred, true, weight) rows: one per histogram key with positive weight,
        plus an all-zero row of weight 0 for keys seen with zero-weight events (scikit-learn
        multiplies a sample's counts by its weight, so those samples are 0/0)."""
        tp, pred, true, weights = [], [], [], []
        for (ni, nt, np_), (w, nz) in self._samples.items():
            if w > 0:
                tp.append(ni)
                pred.append(np_)
                true.append(nt)
                weights.append(self._read(w))
            if nz:
                tp.append(0)
                pred.append(0)
                true.append(0)
                weights.append(0.0)
        return (np.array(tp, dtype=np.float64), np.array(pred, dtype=np.float64),
                np.array(true, dtype=np.float64), np.array(weights, dtype=np.float64))

    def _prf(self, which: int, what: str, beta: float, labels: Any, pos_label: Any,
             average: Any, zero_division: Any, warn_for: tuple[str, ...]) -> Any:
        _cls.check_zero_division(zero_division)
        labels = self._labels_for(labels, pos_label, average)
        if self.total_weight == 0.0:
            _cls.warn_undefined_state(what)
            return np.full(len(labels), np.nan) if average is None else math.nan
        if average == "samples":
            tp, pred, true, sw = self._sample_rows()
            return _cls.prf(tp, pred, true, beta=beta, average="samples", warn_for=warn_for,
                            zero_division=zero_division, sample_weight=sw, n_samples=self.count)[which]
        tp, pred, true = self._sums(labels)
        return _cls.prf(tp, pred, true, beta=beta, average=average, warn_for=warn_for,
                        zero_division=zero_division)[which]

    def precision(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
                  average: str | None = "micro", zero_division: Any = "warn") -> Any:
        """tp / (tp + fp), as ``sklearn.metrics.precision_score`` on indicator matrices."""
        return self._prf(0, "precision", 1.0, labels, pos_label, average, zero_division, ("precision",))

    def recall(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
               average: str | None = "micro", zero_division: Any = "warn") -> Any:
        """tp / (tp + fn), as ``sklearn.metrics.recall_score`` on indicator matrices."""
        return self._prf(1, "recall", 1.0, labels, pos_label, average, zero_division, ("recall",))

    def f1(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
           average: str | None = "micro", zero_division: Any = "warn") -> Any:
        """2 tp / (2 tp + fp + fn), as ``sklearn.metrics.f1_score`` on indicator matrices."""
        return self._prf(2, "f1", 1.0, labels, pos_label, average, zero_division, ("f-score",))

    def fbeta(self, beta: float, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
              average: str | None = "micro", zero_division: Any = "warn") -> Any:
        """(1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp), as ``sklearn.metrics.fbeta_score``."""
        beta = _cls.check_beta(beta)
        return self._prf(2, "fbeta", beta, labels, pos_label, average, zero_division, ("f-score",))

    def jaccard(self, labels: Sequence[Hashable] | None = None, pos_label: Hashable = 1,
                average: str | None = "micro", zero_division: Any = "warn") -> Any:
        """tp / (tp + fp + fn), as ``sklearn.metrics.jaccard_score`` on indicator matrices."""
        _cls.check_zero_division(zero_division, allow_nan=False)
        labels = self._labels_for(labels, pos_label, average)
        if self.total_weight == 0.0:
            _cls.warn_undefined_state("jaccard")
            return np.full(len(labels), np.nan) if average is None else math.nan
        if average == "samples":
            tp, pred, true, sw = self._sample_rows()
            return _cls.jaccard(tp, pred, true, average="samples", zero_division=zero_division,
                                sample_weight=sw, n_samples=self.count)
        tp, pred, true = self._sums(labels)
        return _cls.jaccard(tp, pred, true, average=average, zero_division=zero_division)

    def accuracy(self, normalize: bool = True) -> float:
        """Subset accuracy: weighted fraction (or weighted count) of events whose predicted
        label set equals the true one, as ``sklearn.metrics.accuracy_score``."""
        correct = self._read(self._correct)
        if not normalize:
            return correct
        if self.total_weight == 0.0:
            _cls.warn_undefined_state("accuracy")
            return math.nan
        return correct / self.total_weight

    def hamming_loss(self) -> float:
        """Weighted fraction of wrong label decisions, as ``sklearn.metrics.hamming_loss``:
        sum(w * n_wrong) / (n_events * n_labels * mean(w))."""
        if self.total_weight == 0.0:
            _cls.warn_undefined_state("hamming_loss")
            return math.nan
        weight_average = self.total_weight / self.count
        return self._read(self._wrong) / (self.count * len(self._labels) * weight_average)
