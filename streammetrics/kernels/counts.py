"""Hard-label metrics of a small confusion matrix in plain Python floats, for snapshots.

The monitors' snapshots need a handful of scalars from a 2x2 (binary) or K x K (multiclass)
weighted confusion matrix. Pushing each through numpy and scikit-learn's general machinery
(:mod:`streammetrics.kernels.classification`) costs tens of microseconds per metric; here
all of them come from the cell sums in one pass of float arithmetic, with the values
scikit-learn 1.9 gives on the events behind the cells (``zero_division=np.nan``, NaN and
undefined reported as ``None``, as the snapshots report them):

* ``accuracy`` = (tn + tp) / n; ``balanced_accuracy`` = mean recall over the classes with
  true weight > 0 (``balanced_accuracy_score``: classes only predicted are dropped);
* ``precision`` = tp / (tp + fp), ``recall`` = tp / (tp + fn), ``f1`` = 2 tp / ((tp + fn) +
  (tp + fp)) (``f1_score``'s ``(1 + b^2) tp / (b^2 true + pred)``), ``specificity`` =
  tn / (tn + fp) (``recall_score(pos_label=0)``): None on 0/0;
* ``matthews_corrcoef`` from scikit-learn's covariance formula, 0.0 when a marginal is
  constant; ``cohen_kappa`` (unweighted) = 1 - off-diagonal weight / (sum(pred * (n - true)) / n);
* macro averages skip the classes whose value is 0/0 (``_nanaverage``), ``weighted_f1``
  weights by support.

Everything is None when the matrix holds no weight (scikit-learn raises on such input).

>>> m = binary_confusion_metrics(tn=5.0, fp=2.0, fn=1.0, tp=2.0)
>>> m["accuracy"], m["precision"], m["recall"], m["specificity"]
(0.7, 0.5, 0.6666666666666666, 0.7142857142857143)
>>> binary_confusion_metrics(tn=3.0, fp=0.0, fn=0.0, tp=0.0)["precision"] is None
True
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["BINARY_METRICS", "binary_confusion_columns", "binary_confusion_metrics", "label_metrics"]

#: the keys of :func:`binary_confusion_metrics`, in the order BinaryMonitor reports them
BINARY_METRICS = (
    "accuracy", "balanced_accuracy", "precision", "recall", "f1", "specificity", "matthews_corrcoef",
    "positive_rate", "predicted_positive_rate",
)


def _div(num: float, den: float) -> float | None:
    """num / den, None on a zero denominator (``zero_division=np.nan`` reported as None)."""
    return num / den if den != 0 else None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def one_class(t_sum: Sequence[float], p_sum: Sequence[float]) -> bool:
    """True when at most one class holds true weight or at most one predicted weight: a
    variance of the Matthews correlation is then exactly zero and scikit-learn defines the
    coefficient as 0.0 (its float formula can leave rounding noise or NaN there instead, with
    arbitrary float weights)."""
    return sum(1 for v in t_sum if v) <= 1 or sum(1 for v in p_sum if v) <= 1


def _mcc(t_sum: Sequence[float], p_sum: Sequence[float], n_correct: float) -> float:
    """scikit-learn's ``matthews_corrcoef`` from the row sums, column sums and trace (0.0 for
    :func:`one_class` matrices; NaN, as ``np.sqrt`` of a negative, if rounding leaves a
    negative variance product)."""
    if one_class(t_sum, p_sum):
        return 0.0
    n_samples = sum(p_sum)
    cov_ytyp = n_correct * n_samples - _dot(t_sum, p_sum)
    cov_ypyp = n_samples**2 - _dot(p_sum, p_sum)
    cov_ytyt = n_samples**2 - _dot(t_sum, t_sum)
    product = cov_ypyp * cov_ytyt
    if product == 0:
        return 0.0
    return cov_ytyp / math.sqrt(product) if product > 0 else math.nan


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    """Left-to-right sum of products, as numpy's dot of two short vectors (without FMA)."""
    acc = 0.0
    for x, y in zip(a, b):
        acc += x * y
    return acc


def binary_confusion_metrics(tn: float, fp: float, fn: float, tp: float) -> dict[str, float | None]:
    """The :data:`BINARY_METRICS` of a weighted 2x2 confusion matrix (positive class 1).

    ``tn``, ``fp``, ``fn``, ``tp``: non-negative finite cell weights (rows: true 0/1,
    columns: predicted 0/1). Values as scikit-learn's, None where undefined (see module).
    """
    n_true0, n_true1 = tn + fp, fn + tp
    total = n_true0 + n_true1
    if not total > 0:
        return dict.fromkeys(BINARY_METRICS)
    pred1 = tp + fp
    recalls = [r for r in (_div(tn, n_true0), _div(tp, n_true1)) if r is not None]
    return {
        "accuracy": (tn + tp) / total,
        "balanced_accuracy": math.fsum(recalls) / len(recalls),
        "precision": _div(tp, pred1),
        "recall": _div(tp, n_true1),
        "f1": _div(2.0 * tp, n_true1 + pred1),
        "specificity": _div(tn, n_true0),
        "matthews_corrcoef": _finite(_mcc((n_true0, n_true1), (tn + fn, pred1), tn + tp)),
        "positive_rate": n_true1 / total,
        "predicted_positive_rate": pred1 / total,
    }


def binary_confusion_columns(tn: np.ndarray, fp: np.ndarray, fn: np.ndarray,
                             tp: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """The vectorised twin of :func:`binary_confusion_metrics`: its :data:`BINARY_METRICS` for
    many matrices of whole counts (one per row of the four arrays, each holding an event), as
    ``{metric: (values, where undefined or None)}``. Every intermediate is a whole number below
    2**53 (exact in any order), so each value is the same float as the scalar twin's: one IEEE
    division (or square root) of the same operands (``tests/kernels/test_counts.py``).

    >>> cols = binary_confusion_columns(*(np.array([x]) for x in (1, 0, 1, 2)))
    >>> float(cols["accuracy"][0][0]), float(cols["precision"][0][0]), bool(cols["recall"][1][0])
    (0.75, 1.0, False)
    """
    tn, fp, fn, tp = (np.asarray(x, dtype=np.float64) for x in (tn, fp, fn, tp))
    n_true0, n_true1 = tn + fp, fn + tp
    total = n_true0 + n_true1  # > 0: every window holds an event
    pred0, pred1 = tn + fn, tp + fp
    with np.errstate(divide="ignore", invalid="ignore"):
        r0, r1 = tn / n_true0, tp / n_true1
        both = (n_true0 > 0) & (n_true1 > 0)
        balanced = np.where(both, (r0 + r1) / 2, np.where(n_true0 > 0, r0, r1))  # fsum of the defined / their number
        f1_den = n_true1 + pred1
        f1 = 2.0 * tp / f1_den
        # matthews_corrcoef: 0.0 for one class on either side, else cov / sqrt(var product)
        n_samples = pred0 + pred1
        square = n_samples * n_samples
        cov_ytyp = (tn + tp) * n_samples - (n_true0 * pred0 + n_true1 * pred1)
        product = (square - (pred0 * pred0 + pred1 * pred1)) * (square - (n_true0 * n_true0 + n_true1 * n_true1))
        mcc = np.where(both & (pred0 > 0) & (pred1 > 0) & (product != 0), cov_ytyp / np.sqrt(product), 0.0)
        return {
            "accuracy": ((tn + tp) / total, None),
            "balanced_accuracy": (balanced, None),
            "precision": (tp / np.where(pred1 > 0, pred1, 1.0), pred1 == 0),
            "recall": (r1, n_true1 == 0),
            "f1": (f1, f1_den == 0),
            "specificity": (r0, n_true0 == 0),
            "matthews_corrcoef": (mcc, None),
            "positive_rate": (n_true1 / total, None),
            "predicted_positive_rate": (pred1 / total, None),
        }


def _mean(values: Sequence[float | None], weights: Sequence[float] | None = None) -> float | None:
    """scikit-learn's ``_nanaverage``: mean (weighted) of the defined values; weights
    summing to zero count equally; None when no value is defined."""
    pairs = [(v, 1.0 if weights is None else weights[i]) for i, v in enumerate(values) if v is not None]
    if not pairs:
        return None
    wsum = math.fsum(w for _, w in pairs)
    if wsum == 0:
        return math.fsum(v for v, _ in pairs) / len(pairs)
    return math.fsum(v * w for v, w in pairs) / wsum


def label_metrics(matrix: Sequence[Sequence[float]]) -> dict[str, object]:
    """Hard-label metrics of a K x K weighted confusion matrix (rows true, columns
    predicted, both in the order of the monitor's labels), as the multiclass/label monitors
    report them with ``labels`` = those labels: ``accuracy``, ``balanced_accuracy``,
    ``macro_precision``, ``macro_recall``, ``macro_f1``, ``weighted_f1``,
    ``matthews_corrcoef``, ``cohen_kappa`` and ``per_class``: lists ``precision``,
    ``recall``, ``f1``, ``support`` (one entry per label, None where 0/0).

    >>> m = label_metrics([[3.0, 1.0, 0.0], [0.0, 2.0, 0.0], [1.0, 0.0, 1.0]])
    >>> m["accuracy"], m["macro_recall"], m["per_class"]["precision"]
    (0.75, 0.75, [0.75, 0.6666666666666666, 1.0])
    """
    k = len(matrix)
    true = [math.fsum(row) for row in matrix]
    pred = [math.fsum(matrix[r][c] for r in range(k)) for c in range(k)]
    tp = [float(matrix[i][i]) for i in range(k)]
    total = math.fsum(true)
    if not total > 0:
        return {name: None for name in ("accuracy", "balanced_accuracy", "macro_precision", "macro_recall",
                                        "macro_f1", "weighted_f1", "matthews_corrcoef", "cohen_kappa")} | {
            "per_class": {"precision": [None] * k, "recall": [None] * k, "f1": [None] * k, "support": true}}
    trace = math.fsum(tp)
    precision = [_div(tp[i], pred[i]) for i in range(k)]
    recall = [_div(tp[i], true[i]) for i in range(k)]
    f1 = [_div(2.0 * tp[i], true[i] + pred[i]) for i in range(k)]
    # scikit-learn's kappa: observed weight off the diagonal over the expected one, the
    # sum over i != j of pred[i] * true[j] / total (0 when one class is true and predicted);
    # true weight outside class i from prefix and suffix sums, so nothing cancels
    before, after = [0.0] * (k + 1), [0.0] * (k + 1)
    for i in range(k):
        before[i + 1] = before[i] + true[i]
        after[k - 1 - i] = after[k - i] + true[k - 1 - i]
    kappa_den = math.fsum(pred[i] * (before[i] + after[i + 1]) for i in range(k)) / total
    off_diagonal = math.fsum(matrix[r][c] for r in range(k) for c in range(k) if r != c)
    return {
        "accuracy": trace / total,
        "balanced_accuracy": _mean(recall),
        "macro_precision": _mean(precision),
        "macro_recall": _mean(recall),
        "macro_f1": _mean(f1),
        "weighted_f1": _mean(f1, true),
        "matthews_corrcoef": _finite(_mcc(true, pred, trace)),
        "cohen_kappa": _finite(1.0 - off_diagonal / kappa_den) if kappa_den != 0 else None,
        "per_class": {"precision": precision, "recall": recall, "f1": f1, "support": true},
    }
