"""Multiclass confidence-based performance estimation (NannyML's multiclass CBPE).

1. **Calibrate** each class one-vs-rest: class ``c``'s isotonic map is fitted on the
   reference's column-``c`` scores against the labels ``y_true == c``
   (:func:`streammetrics.kernels.cbpe.isotonic_fit`, on bins
   :func:`~streammetrics.kernels.cbpe.isotonic_fit_bins`); :func:`calibrated_rows` applies
   the ``K`` maps to a score matrix and **normalises** each row to sum 1 (a row whose
   calibrated values sum to 0 becomes uniform ``1 / K``), as NannyML's
   ``_calibrate_predicted_probabilities``.
2. **Expected sums** (:func:`expected_sums`): the predicted class of a row is the arg-max
   of its raw scores (numpy's first maximum, as ``MulticlassMonitor``), ``p`` its
   normalised calibrated row, ``w`` its weight. Per class ``c``:
   ``tp[c] = sum(w p_c)`` over rows predicted ``c``, ``predicted[c] = sum(w)`` over rows
   predicted ``c``, ``prob[c] = sum(w p_c)`` over every row; and ``total = sum(w)``.
   These add up over any split of the rows, so a window's estimate is mergeable and its
   state is ``3K + 1`` numbers.
3. **Estimates** (:func:`estimated_metrics`), NannyML's formulas:
   ``accuracy = sum(tp) / total`` (``MulticlassClassificationAccuracy``: the mean
   probability of the predicted class) and ``macro_f1 = mean_c F1_c`` with
   ``F1_c = tp / (tp + (fp + fn) / 2)``, ``fp = predicted - tp``, ``fn = prob - tp`` (0 when
   the denominator is 0, as ``estimate_f1``).

NannyML calibrates a class only when a cross-validated check on the reference rows says it
helps; we always calibrate (a histogram keeps no rows to split). Weights generalise its
row counts. No weight: nan with an :class:`~streammetrics.core.exceptions.UndefinedMetricWarning`.

>>> import numpy as np
>>> fits = [(np.array([0.0, 1.0]), np.array([0.0, 1.0]))] * 2  # identity maps
>>> p = calibrated_rows(np.array([[0.8, 0.4], [0.1, 0.3]]), fits)
>>> p.round(3).tolist()
[[0.667, 0.333], [0.25, 0.75]]
>>> s = expected_sums(np.array([[0.8, 0.4], [0.1, 0.3]]), p, None)
>>> {k: round(v, 3) for k, v in estimated_metrics(*s).items()}
{'accuracy': 0.708, 'macro_f1': 0.708}
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels.cbpe import calibrate

__all__ = ["calibrated_rows", "estimated_metrics", "expected_sums"]

Fit = tuple[np.ndarray, np.ndarray]


def calibrated_rows(scores: np.ndarray, fits: Sequence[Fit]) -> np.ndarray:
    """``(n, K)`` normalised one-vs-rest calibrated probabilities of a score matrix."""
    s = np.asarray(scores, dtype=np.float64)
    k = len(fits)
    if s.ndim != 2 or s.shape[1] != k:
        raise ValueError(f"scores must have shape (n, {k}), got {s.shape}")
    out = np.empty_like(s)
    for c, (x, y) in enumerate(fits):
        out[:, c] = calibrate(s[:, c], x, y)
    den = out.sum(axis=1)[:, None]
    uniform = np.full_like(out, 1.0 / k)
    return np.divide(out, den, out=uniform, where=den != 0)


def expected_sums(
    scores: np.ndarray, calibrated: np.ndarray, sample_weight: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(tp, predicted, prob, total)`` of rows (see the module docstring); they add up over
    any split of the rows."""
    s = np.asarray(scores, dtype=np.float64)
    p = np.asarray(calibrated, dtype=np.float64)
    n, k = p.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    pred = s.argmax(axis=1) if n else np.zeros(0, dtype=np.int64)
    tp = np.bincount(pred, weights=w * p[np.arange(n), pred], minlength=k)
    predicted = np.bincount(pred, weights=w, minlength=k)
    prob = np.sum(p * w[:, None], axis=0) if n else np.zeros(k)
    return tp, predicted, prob, float(w.sum())


def estimated_metrics(
    tp: np.ndarray, predicted: np.ndarray, prob: np.ndarray, total: float
) -> dict[str, float]:
    """``{"accuracy", "macro_f1"}`` from :func:`expected_sums` (NannyML's formulas)."""
    if not total > 0:
        warnings.warn(
            "No event with a non-zero weight in the window: multiclass performance cannot be estimated.",
            UndefinedMetricWarning,
            stacklevel=2,
        )
        return {"accuracy": math.nan, "macro_f1": math.nan}
    tp = np.asarray(tp, dtype=np.float64)
    fp = np.asarray(predicted, dtype=np.float64) - tp
    fn = np.asarray(prob, dtype=np.float64) - tp
    den = tp + 0.5 * (fp + fn)
    f1 = np.divide(tp, den, out=np.zeros_like(tp), where=den != 0)
    return {"accuracy": float(tp.sum()) / total, "macro_f1": float(f1.mean())}
