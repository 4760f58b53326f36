"""Ranking metrics from aligned per-level weights, as scikit-learn computes them.

Every function takes ``neg`` and ``pos``: float64 arrays of the summed weight of the
negative and positive events at each score level, levels in *ascending* score order
(a level is a distinct score, or a bin of a binned histogram; see
:func:`streammetrics.kernels.histogram.aligned`). Levels holding no weight are ignored, as
scikit-learn drops zero-weight samples. Curves also take ``thresholds``: the score of
each level (for a bin, the smallest score that falls in it).

With one level per distinct score the results are scikit-learn's, step for step:
``fps``/``tps`` are cumulative weights from the highest score down
(``confusion_matrix_at_thresholds``), ROC AUC is the trapezoid under
``roc_curve(drop_intermediate=True)`` (tied scores count half a pair), ``max_fpr``
interpolates the curve at ``max_fpr`` then applies the McClish correction, and average
precision is the step sum ``sum((R[n] - R[n-1]) * P[n])``, not a trapezoid.

With bins, pairs of a negative and a positive in the same bin are the only pairs whose
order is unknown; :func:`roc_auc` counts them half and :func:`roc_auc_bounds` counts
them all wrong / all right (exactly half for bins that hold one distinct score).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from streammetrics.core.exceptions import undefined
from streammetrics.kernels.levels import row_sums, to_front

__all__ = [
    "cumulative",
    "roc_curve",
    "roc_auc",
    "roc_auc_bounds",
    "roc_auc_rows",
    "precision_recall_curve",
    "average_precision",
    "warn_one_class",
    "trapezoid",
    "check_max_fpr",
]

_EPS = float(np.finfo(np.float64).eps)


def trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    """Trapezoidal area under ``y(x)``: numpy's ``trapezoid`` (``trapz`` before numpy 2.0)
    formula, ``sum(diff(x) * (y[1:] + y[:-1]) / 2)``, written out so that every numpy
    from 1.23 on gives the same (bitwise) result."""
    y = np.asarray(y, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    return float(np.add.reduce(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


def warn_one_class() -> float:
    """scikit-learn's ``roc_auc_score`` when y_true holds a single class: warn, return nan."""
    return undefined("Only one class is present in y_true. ROC AUC score is not defined in that case.", 3)


def cumulative(
    neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(fps, tps, thresholds)`` from the highest level down, empty levels dropped:
    scikit-learn's ``confusion_matrix_at_thresholds`` on the events of the levels."""
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    keep = (neg > 0) | (pos > 0)
    if not keep.all():
        neg, pos = neg[keep], pos[keep]
        thresholds = None if thresholds is None else np.asarray(thresholds)[keep]
    fps = np.cumsum(neg[::-1])
    tps = np.cumsum(pos[::-1])
    return fps, tps, None if thresholds is None else np.asarray(thresholds, np.float64)[::-1]


def _require_weight(fps: np.ndarray) -> None:
    if not len(fps):
        raise ValueError("the curve needs at least one event with a non-zero weight")


def roc_curve(
    neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray, drop_intermediate: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)`` as ``sklearn.metrics.roc_curve``: decreasing thresholds
    starting at ``inf``; collinear points dropped when ``drop_intermediate``; nan rates and
    an UndefinedMetricWarning when a class has no weight."""
    fps, tps, thr = cumulative(neg, pos, thresholds)
    _require_weight(fps)
    return _roc_from_cumulative(fps, tps, thr, drop_intermediate)  # type: ignore[return-value]  # thr is an array: thresholds was


def _roc_from_cumulative(
    fps: np.ndarray, tps: np.ndarray, thr: np.ndarray | None, drop_intermediate: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    if drop_intermediate and len(fps) > 2:
        corner = np.concatenate(
            ([True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True])
        )
        keep = np.flatnonzero(corner)
        fps, tps = fps[keep], tps[keep]
        thr = None if thr is None else thr[keep]
    fps = np.concatenate(([0.0], fps))
    tps = np.concatenate(([0.0], tps))
    if thr is not None:
        thr = np.concatenate(([np.inf], thr))
    if fps[-1] <= 0:
        undefined("No negative samples in y_true, false positive value should be meaningless", 4)
        fpr = np.full(fps.shape, np.nan)
    else:
        fpr = fps / fps[-1]
    if tps[-1] <= 0:
        undefined("No positive samples in y_true, true positive value should be meaningless", 4)
        tpr = np.full(tps.shape, np.nan)
    else:
        tpr = tps / tps[-1]
    return fpr, tpr, thr


def check_max_fpr(max_fpr: float | None) -> float | None:
    if max_fpr is None:
        return None
    if isinstance(max_fpr, bool) or not isinstance(max_fpr, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_fpr must be a float in (0, 1] or None, got {max_fpr!r}")
    if not 0 < max_fpr <= 1:
        raise ValueError(f"max_fpr must be in the range (0, 1], got {max_fpr!r}")
    return float(max_fpr)


def roc_auc(neg: np.ndarray, pos: np.ndarray, max_fpr: float | None = None) -> float:
    """Area under :func:`roc_curve` (trapezoid: pairs on one level count half), or with
    ``max_fpr`` scikit-learn's McClish-standardised partial AUC
    ``0.5 * (1 + (A - max_fpr**2 / 2) / (max_fpr - max_fpr**2 / 2))`` where ``A`` is the
    area of the curve interpolated at ``max_fpr``. nan if no event has weight."""
    max_fpr = check_max_fpr(max_fpr)
    fps, tps, _ = cumulative(neg, pos)
    if not len(fps):
        return undefined("No event with a non-zero weight: ROC AUC is not defined.", 2)
    fpr, tpr, _ = _roc_from_cumulative(fps, tps, None, True)
    if max_fpr is None or max_fpr == 1:
        return float(trapezoid(tpr, fpr))
    if np.isnan(fpr[-1]) or np.isnan(tpr[-1]):
        return math.nan
    stop = int(np.searchsorted(fpr, max_fpr, "right"))
    x_interp = [fpr[stop - 1], fpr[stop]]
    y_interp = [tpr[stop - 1], tpr[stop]]
    tpr = np.append(tpr[:stop], np.interp(max_fpr, x_interp, y_interp))
    fpr = np.append(fpr[:stop], max_fpr)
    partial_auc = float(trapezoid(tpr, fpr))
    min_area = 0.5 * max_fpr**2
    max_area = max_fpr
    return 0.5 * (1 + (partial_auc - min_area) / (max_area - min_area))


def roc_auc_rows(neg: np.ndarray, pos: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The vectorised twin of :func:`roc_auc` (no ``max_fpr``): the ROC AUC of each row's first
    ``n[i]`` levels, bit for bit; each row needs weight in both classes."""
    cols = np.arange(neg.shape[1])
    m, (neg, pos) = to_front(((neg > 0) | (pos > 0)) & (cols < n[:, None]), n, neg, pos)
    inside = cols < m[:, None]
    back = np.maximum(m[:, None] - 1 - cols, 0)  # (each row's levels from the highest down)
    fps = np.cumsum(np.where(inside, np.take_along_axis(neg, back, axis=1), 0.0), axis=1)
    tps = np.cumsum(np.where(inside, np.take_along_axis(pos, back, axis=1), 0.0), axis=1)
    corner = inside.copy()  # (_roc_from_cumulative's drop_intermediate where a row has more than 2)
    if fps.shape[1] > 2:
        bend = (np.diff(fps, 2, axis=1) != 0) | (np.diff(tps, 2, axis=1) != 0)
        corner[:, 1:-1] &= bend | (cols[1:-1] >= m[:, None] - 1) | (m[:, None] <= 2)
    k, (fps, tps) = to_front(corner, m, fps, tps)
    fps = np.concatenate((np.zeros((len(fps), 1)), fps), axis=1)
    tps = np.concatenate((np.zeros((len(tps), 1)), tps), axis=1)
    last = np.arange(len(fps)), k
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = fps / fps[last][:, None]
        tpr = tps / tps[last][:, None]
        return row_sums(np.diff(fpr, axis=1) * (tpr[:, 1:] + tpr[:, :-1]) / 2.0, k)


def roc_auc_bounds(
    neg: np.ndarray, pos: np.ndarray, singleton: np.ndarray
) -> tuple[float, float]:
    """Interval guaranteed to hold the exact ROC AUC of the events behind the levels.

    With ``n = neg / N`` and ``p = pos / P`` (``N``, ``P`` the class weights) and
    ``below[i] = sum(n[:i])``, every negative-positive pair on different levels is ordered,
    so ``low = sum(p * below) + sum(p * n / 2 over singleton levels)`` and
    ``high = low + sum(p * n over the other levels)``. Both are widened by a bound on the
    float64 rounding of the sums (``(4 L + 32) * eps`` for ``L`` levels) and clipped to
    [0, 1]. ``(nan, nan)`` when a class has no weight.
    """
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    singleton = np.asarray(singleton, dtype=bool)
    total_n, total_p = float(neg.sum()), float(pos.sum())
    if not total_n > 0 or not total_p > 0:
        return math.nan, math.nan
    n = neg / total_n
    p = pos / total_p
    below = np.cumsum(n) - n
    same = p * n
    low = float(np.dot(p, below)) + 0.5 * float(same[singleton].sum())
    high = low + float(same[~singleton].sum())
    slack = rounding_slack(len(neg))
    return max(0.0, low - slack), min(1.0, high + slack)


def rounding_slack(levels: int) -> float:
    """Bound on the float64 rounding of an AUC summed over ``levels`` levels: ``(4 L + 32) * eps``."""
    return (4 * levels + 32) * _EPS


def rounding_interval(auc: float, levels: int) -> tuple[float, float]:
    """The bounds of an exact AUC: the value widened by :func:`rounding_slack`, clipped to [0, 1]
    (the float sum can miss the exact rational value by a few ulps)."""
    slack = rounding_slack(levels)
    return max(0.0, auc - slack), min(1.0, auc + slack)


def precision_recall_curve(
    neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray, drop_intermediate: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(precision, recall, thresholds)`` as ``sklearn.metrics.precision_recall_curve``:
    increasing thresholds, precision ending with 1 and recall with 0; recall set to 1 with
    a warning when no positive has weight."""
    fps, tps, thr = cumulative(neg, pos, thresholds)
    _require_weight(fps)
    precision, recall, thr = _pr_from_cumulative(fps, tps, thr, drop_intermediate)
    return precision, recall, thr  # type: ignore[return-value]  # thr is an array: thresholds was


def _pr_from_cumulative(
    fps: np.ndarray, tps: np.ndarray, thr: np.ndarray | None, drop_intermediate: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    if drop_intermediate and len(fps) > 2:
        keep = np.flatnonzero(
            np.concatenate(([True], np.logical_or(np.diff(tps[:-1]), np.diff(tps[1:])), [True]))
        )
        fps, tps = fps[keep], tps[keep]
        thr = None if thr is None else thr[keep]
    ps = tps + fps
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(ps != 0, tps / ps, 0.0)
    if tps[-1] == 0:
        warnings.warn(
            "No positive class found in y_true, recall is set to one for all thresholds.",
            UserWarning,
            stacklevel=4,
        )
        recall = np.full(tps.shape, 1.0)
    else:
        recall = tps / tps[-1]
    return (
        np.concatenate((precision[::-1], [1.0])),
        np.concatenate((recall[::-1], [0.0])),
        None if thr is None else thr[::-1],
    )


def average_precision(neg: np.ndarray, pos: np.ndarray) -> float:
    """scikit-learn's ``average_precision_score``: ``sum((R[n] - R[n-1]) * P[n])`` over
    thresholds (a step sum, not a trapezoid); nan with a warning if no event has weight."""
    fps, tps, _ = cumulative(neg, pos)
    if not len(fps):
        return undefined("No event with a non-zero weight: average precision is not defined.", 2)
    precision, recall, _ = _pr_from_cumulative(fps, tps, None, False)
    return float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))
