"""Confidence-based performance estimation (NannyML's CBPE) from score histograms.

1. **Calibrate** on the reference's labelled levels: :func:`isotonic_fit` is
   ``sklearn.isotonic.IsotonicRegression(increasing=True, out_of_bounds="clip")`` fitted on
   the reference's ``(score, label, weight)`` events: per distinct score the weighted mean
   label, pooled by the pool-adjacent-violators algorithm, and :func:`calibrate` predicts by
   linear interpolation between the fitted points (``np.interp``), clipped to the fitted
   range; like scikit-learn, scores less than 1e-15 above the first of a run are pooled
   into one point. On bins (:func:`isotonic_fit_bins`) it is the same monotone fit on the
   bins' weights, constant across each bin and interpolated between bins.
   NannyML calibrates only when a cross-validated check on the reference rows says it
   helps (``needs_calibration``: random splits of the rows, which a histogram does not
   keep); we always calibrate, unless asked not to (``calibrated=None`` uses the scores).
2. **Expected confusion matrix** of the window's predictions ``score >= threshold``, the
   calibrated probability ``c`` of each event standing for its unknown label:
   ``TP = sum(w c)``, ``FP = sum(w (1 - c))`` over predicted positives, ``FN = sum(w c)``,
   ``TN = sum(w (1 - c))`` over predicted negatives; then NannyML's ``estimate_accuracy``
   ``(TP + TN) / W``, ``estimate_precision`` ``TP / (TP + FP)``, ``estimate_recall``
   ``TP / (TP + FN)``, ``estimate_f1`` ``TP / (TP + (FP + FN) / 2)`` (0 when a denominator
   is 0, as NannyML).
3. **Expected ROC AUC** (NannyML's ``estimate_roc_auc``): the ROC curve whose true-positive
   steps are the calibrated probabilities and false-positive steps their complements, in
   decreasing score order. Tied scores share one calibrated value, so their steps are
   collinear and the curve equals :func:`streammetrics.kernels.ranking.roc_auc` on the
   levels' expected positive weight ``w c`` and negative weight ``w (1 - c)``. (NannyML
   rounds the cumulative sums to 5 decimals before dividing; we do not.)

An empty window (no weight) gives nan with an
:class:`~streammetrics.core.exceptions.UndefinedMetricWarning`.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import ranking

__all__ = [
    "calibrate",
    "estimated_metrics",
    "estimated_roc_auc",
    "expected_confusion",
    "isotonic_fit",
    "isotonic_fit_bins",
]


def _pava(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted non-decreasing least-squares fit (pool adjacent violators)."""
    means: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for yi, wi in zip(y.tolist(), w.tolist()):
        m, ww, n = yi, wi, 1
        while means and means[-1] >= m:
            pm, pw, pn = means.pop(), weights.pop(), sizes.pop()
            total = pw + ww
            m = (pm * pw + m * ww) / total
            ww, n = total, n + pn
        means.append(m)
        weights.append(ww)
        sizes.append(n)
    return np.repeat(np.array(means), sizes)


def isotonic_fit(x: np.ndarray, neg: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x_thresholds, y_thresholds)`` of the isotonic fit of the labels on ascending level
    scores ``x`` (levels without weight ignored). ValueError without any weight."""
    x = np.asarray(x, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    w = neg + pos
    keep = w > 0
    if not keep.any():
        raise ValueError("the reference has no labelled event with a non-zero weight")
    x, w, pos = _merge_close(x[keep], w[keep], pos[keep])
    return x, _pava(pos / w, w)


def isotonic_fit_bins(
    lo: np.ndarray, hi: np.ndarray, neg: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The isotonic fit on binned levels (scores in ``[lo, hi]``, ascending, disjoint) as
    interpolation knots for :func:`calibrate`: the pooled value is constant across each
    bin (every reference event of a bin gets it) and interpolated linearly between bins."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    w = np.asarray(neg, dtype=np.float64) + np.asarray(pos, dtype=np.float64)
    keep = w > 0
    if not keep.any():
        raise ValueError("the reference has no labelled event with a non-zero weight")
    y = _pava(np.asarray(pos, dtype=np.float64)[keep] / w[keep], w[keep])
    return np.column_stack((lo[keep], hi[keep])).ravel(), np.repeat(y, 2)


_RESOLUTION = float(np.finfo(np.float64).resolution)  # 1e-15


def _merge_close(x: np.ndarray, w: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's ``_make_unique``: a run of scores less than 1e-15 above its first one
    is one point (at that first score)."""
    if len(x) < 2 or float(np.min(np.diff(x))) >= _RESOLUTION:
        return x, w, pos
    starts = [0]
    first = float(x[0])
    for i, xi in enumerate(x.tolist()):
        if xi - first >= _RESOLUTION:
            starts.append(i)
            first = xi
    idx = np.array(starts)
    return x[idx], np.add.reduceat(w, idx), np.add.reduceat(pos, idx)


def calibrate(scores: np.ndarray, x_thresholds: np.ndarray, y_thresholds: np.ndarray) -> np.ndarray:
    """``IsotonicRegression.predict``: linear interpolation, clipped to the fitted range."""
    s = np.asarray(scores, dtype=np.float64)
    if len(x_thresholds) == 1:
        return np.full(s.shape, float(y_thresholds[0]))
    return np.interp(s, x_thresholds, y_thresholds)


def expected_confusion(c: np.ndarray, w: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Expected ``tp``, ``fp``, ``fn``, ``tn`` weights (see the module docstring)."""
    c = np.asarray(c, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    p = np.asarray(predicted, dtype=bool)
    wc = w * c
    wn = w * (1.0 - c)
    return {
        "tp": float(wc[p].sum()),
        "fp": float(wn[p].sum()),
        "fn": float(wc[~p].sum()),
        "tn": float(wn[~p].sum()),
    }


def _undefined(name: str) -> float:
    warnings.warn(
        f"No event with a non-zero weight in the window: {name} cannot be estimated.",
        UndefinedMetricWarning,
        stacklevel=3,
    )
    return math.nan


def _ratio(num: float, den: float) -> float:
    return num / den if den != 0 else 0.0


def estimated_metrics(c: np.ndarray, w: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """``{"accuracy", "precision", "recall", "f1"}`` estimated from calibrated probabilities
    ``c`` of levels of weight ``w`` predicted positive where ``predicted``."""
    total = float(np.sum(w))
    if not total > 0:
        nan = _undefined("performance")
        return {"accuracy": nan, "precision": nan, "recall": nan, "f1": nan}
    m = expected_confusion(c, w, predicted)
    tp, fp, fn, tn = m["tp"], m["fp"], m["fn"], m["tn"]
    return {
        "accuracy": (tp + tn) / total,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(tp, tp + 0.5 * (fp + fn)),
    }


def estimated_roc_auc(c: np.ndarray, w: np.ndarray) -> float:
    """Expected ROC AUC of levels (ascending scores) of weight ``w`` and calibrated
    probability ``c``; nan with a warning when the window is empty or every calibrated
    probability is 0 (or every one is 1)."""
    w = np.asarray(w, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if not float(w.sum()) > 0:
        return _undefined("ROC AUC")
    pos = w * c
    neg = w * (1.0 - c)
    if not (pos.sum() > 0 and neg.sum() > 0):
        warnings.warn(
            "Every calibrated probability of the window is 0 (or every one is 1): the "
            "expected ROC AUC is not defined.",
            UndefinedMetricWarning,
            stacklevel=2,
        )
        return math.nan
    return ranking.roc_auc(neg, pos)
