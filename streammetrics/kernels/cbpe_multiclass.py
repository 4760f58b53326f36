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

4. **Intervals** (:func:`estimated_intervals`; derivation in ``docs/intervals.md``): each row's
   label a categorical draw of its ``p``, so a metric's gradient ``h`` over the labels gives the
   row's variance ``w^2 (sum_y p_y h_y^2 - (sum_y p_y h_y)^2)``, summed exactly from three
   mergeable ``K x K`` sums of ``t = w p`` (:func:`second_order_sums`). The label variance is
   widened by ``n_eff / n_reference``; ``t`` with ``n_eff - 1`` (accuracy) or the rarest expected
   class's effective events ``- 1`` (macro F1) d.f., clipped to [0, 1]; the realised metrics'
   minimum rule, and none for a window larger than half the reference (:data:`MAX_REFERENCE_SHARE`).

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
from collections.abc import Sequence

import numpy as np

from streammetrics.core.exceptions import undefined
from streammetrics.kernels.cbpe import calibrate

__all__ = ["MAX_REFERENCE_SHARE", "calibrated_rows", "estimated_intervals", "estimated_metrics", "expected_sums",
           "second_order_sums"]

Fit = tuple[np.ndarray, np.ndarray]

#: the intervals are given for windows of at most this share of the reference's effective size:
#: the calibration maps' error is only approximated (term (b); the isotonic blocks' own variance,
#: the binary intervals' term (a), is not kept per class), enough up to half (measured 94.8-96.0%
#: at 2,000 and 2,500 events against 5,000), not for a window as large as the reference (92.4%)
MAX_REFERENCE_SHARE = 0.5


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
        undefined("No event with a non-zero weight in the window: multiclass performance cannot be estimated.", 2)
        return {"accuracy": math.nan, "macro_f1": math.nan}
    tp = np.asarray(tp, dtype=np.float64)
    fp = np.asarray(predicted, dtype=np.float64) - tp
    fn = np.asarray(prob, dtype=np.float64) - tp
    den = tp + 0.5 * (fp + fn)
    f1 = np.divide(tp, den, out=np.zeros_like(tp), where=den != 0)
    return {"accuracy": float(tp.sum()) / total, "macro_f1": float(f1.mean())}


def second_order_sums(terms: np.ndarray, w: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(u, r, v)`` of rows of terms ``t = w p`` (:func:`expected_sums`' ``w p_c``), weights ``w``
    and arg-max classes ``pred`` (floats summed by numpy: the reference formula; monitors keep
    them as exact sums of the same products): per predicted class ``c`` ``u[c][y] = sum w t_y``,
    ``r[c][y] = sum t_c t_y``; over every row ``v[y][z] = sum t_y t_z``."""
    t = np.asarray(terms, dtype=np.float64)
    n, k = t.shape
    u, r = np.zeros((k, k)), np.zeros((k, k))
    rows = np.arange(n)
    np.add.at(u, pred, np.asarray(w, dtype=np.float64)[:, None] * t)
    np.add.at(r, pred, t[rows, pred][:, None] * t)
    return u, r, t.T @ t


def estimated_intervals(tp: np.ndarray, predicted: np.ndarray, prob: np.ndarray, total: float, u: np.ndarray,
                        r: np.ndarray, v: np.ndarray, z: float,
                        reference_events: float = math.inf) -> dict[str, tuple[float, float] | None]:
    """``{"accuracy", "macro_f1"}`` intervals of the realised metrics from :func:`expected_sums`
    and :func:`second_order_sums` (see the module docstring, point 4); None where the minimum
    rule leaves none. The window's ``sum w^2`` is ``sum u`` (each row's ``p`` sums to 1)."""
    from streammetrics.kernels.intervals import MIN_EVENTS, MIN_MEAN_EVENTS, t_values

    out: dict[str, tuple[float, float] | None] = {"accuracy": None, "macro_f1": None}
    tp, predicted, prob = (np.asarray(x, dtype=np.float64) for x in (tp, predicted, prob))
    u, r, v = (np.asarray(x, dtype=np.float64) for x in (u, r, v))
    squares = float(u.sum())
    if not total > 0 or not squares > 0 or not math.isfinite(squares):
        return out
    f = total / squares  # Kish: pseudo-counts f x, n_eff = total f
    n_eff = total * f
    if n_eff > MAX_REFERENCE_SHARE * reference_events:
        return out  # (the calibration error, only approximated, would dominate)
    widen = 1.0 + n_eff / reference_events  # the calibration maps' own error (term (b))
    k = len(tp)

    def put(name: str, value: float, var: float, events: float, minimum: int) -> None:
        var *= widen
        if n_eff >= minimum and events >= 2.0 and math.isfinite(var):
            half = float(t_values(z, [events - 1.0])[0]) * math.sqrt(max(var, 0.0))
            out[name] = (max(value - half, 0.0), min(value + half, 1.0))

    diag_u, diag_r = np.diag(u), np.diag(r)
    put("accuracy", float(tp.sum()) / total, float(np.sum(diag_u - diag_r)) / total ** 2, n_eff, MIN_EVENTS)
    den = predicted + prob  # P + T, T = TP + FN expected
    live = den > 0
    safe = np.where(live, den, 1.0)
    a = np.where(live, 2.0 * (den - tp) / (safe * safe), 0.0) / k  # d F1_c / d TP_c, of the mean over K
    b = np.where(live, -2.0 * tp / (safe * safe), 0.0) / k  # d F1_c / d FN_c
    d = a - b
    var = (float(np.sum(u.sum(axis=0) * b * b)) + float(np.sum(diag_u * (2.0 * b * d + d * d)))
           - float(b @ v @ b) - 2.0 * float(np.sum(d * (r @ b))) - float(np.sum(diag_r * d * d)))
    macro = estimated_metrics(tp, predicted, prob, total)["macro_f1"]
    rarest = float(np.min(np.where(live, prob, np.inf))) * f if live.any() else 0.0
    put("macro_f1", macro, var, min(rarest, n_eff), MIN_MEAN_EVENTS)
    return out
