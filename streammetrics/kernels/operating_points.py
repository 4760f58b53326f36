"""Operating points of a binary score stream from its two histograms (issue 28, point 5).

Every function takes ``neg`` and ``pos`` (summed weight of the negatives / positives per level,
levels in *ascending* score order, as :mod:`streammetrics.kernels.ranking`), ``thresholds``
(the smallest score of each level) and ``singleton`` (per level: does it hold one distinct
score? None: every level does, an exact state). The curve points are those of
``sklearn.metrics.precision_recall_curve`` / ``roc_curve(drop_intermediate=False)``: one per
non-empty level, "predict positive when ``score >= threshold``" (and, for the ROC curve, the
point (0, 0) at threshold ``inf``).

==========================  ======================================================================
function                    value (torchmetrics' conventions)
==========================  ======================================================================
:func:`precision_at_recall` ``max precision`` over the points with ``recall >= min_recall``
                            (``BinaryPrecisionAtFixedRecall``); ties: the highest recall, then
                            the highest threshold
:func:`recall_at_precision` ``max recall`` over the points with ``precision >= min_precision``
                            (``BinaryRecallAtFixedPrecision``); ties: the highest precision,
                            then the highest threshold
:func:`tpr_at_fpr`          ``max TPR`` over the points with ``FPR <= max_fpr``, the (0, 0)
                            point included (``BinarySensitivityAtSpecificity`` with
                            ``min_specificity = 1 - max_fpr``); ties: the highest threshold
:func:`expected_cost`       ``(cost_fp * FP + cost_fn * FN) / W``: the cost per event (weight)
==========================  ======================================================================

Each returns ``(value, threshold, high)``. When no point qualifies, or the best value is 0, the
value is 0.0 and the threshold ``inf`` ("predict nothing positive"; torchmetrics writes the
sentinel 1e6). Undefined (nan, nan, nan): no positive weight (precision / recall), or a class
without weight (TPR at FPR) - where scikit-learn warns and fills the rates with nan or 1.

Binned states: a bin's smallest score is an exact threshold (the events at or above it are the
bin's and the higher ones'), so ``value`` is attained - its threshold really gives it - and is
a lower bound of the exact value over every distinct score. ``high`` is an upper bound: a
threshold inside a bin of several scores splits its events, at best every positive above
every negative (``TP = TP_above + pos_bin``, ``FP = FP_above``). Exact levels: ``high == value``.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["expected_cost", "expected_cost_bounds", "precision_at_recall", "recall_at_precision", "tpr_at_fpr"]

_NAN3 = (math.nan, math.nan, math.nan)


def check_target(value: float, name: str) -> float:
    """A rate target in [0, 1]; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_cost(value: float, name: str) -> float:
    """A cost: a finite number >= 0; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value < math.inf):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _points(neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray, singleton: np.ndarray | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(fps, tps, thresholds, fps_above, loose)`` from the highest non-empty level down:
    cumulative weights at each level, the false positives strictly above it, and whether it is
    a bin of several scores (a threshold inside it splits it)."""
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    thr = np.asarray(thresholds, dtype=np.float64)
    keep = (neg > 0) | (pos > 0)
    one = np.ones(len(neg), dtype=bool) if singleton is None else np.asarray(singleton, dtype=bool)
    neg, pos, thr, one = neg[keep][::-1], pos[keep][::-1], thr[keep][::-1], one[keep][::-1]
    fps, tps = np.cumsum(neg), np.cumsum(pos)
    return fps, tps, thr, fps - neg, ~one


def _best(values: np.ndarray, second: np.ndarray, thr: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    """Lexicographic max of ``(value, second, threshold)`` over ``ok``; (0.0, inf) when none
    qualifies or the best value is 0."""
    if not ok.any():
        return 0.0, math.inf
    idx = np.flatnonzero(ok)
    order = np.lexsort((thr[idx], second[idx], values[idx]))  # last key sorts first
    i = idx[order[-1]]
    v = float(values[i])
    return (0.0, math.inf) if v == 0.0 else (v, float(thr[i]))


def _precision(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    ps = tp + fp
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ps != 0, tp / np.where(ps != 0, ps, 1.0), 0.0)


def precision_at_recall(neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray, min_recall: float,
                        singleton: np.ndarray | None = None) -> tuple[float, float, float]:
    """``(precision, threshold, high)``: see the module docstring."""
    fps, tps, thr, above, loose = _points(neg, pos, thresholds, singleton)
    if not len(tps) or not tps[-1] > 0:
        return _NAN3
    recall = tps / tps[-1]
    precision = _precision(tps, fps)
    value, t = _best(precision, recall, thr, recall >= min_recall)
    high = value
    inner = loose & (recall >= min_recall)
    if inner.any():  # a threshold inside the bin: its positives above its negatives
        high = max(high, float(_precision(tps[inner], above[inner]).max()))
    return value, t, high


def recall_at_precision(neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray, min_precision: float,
                        singleton: np.ndarray | None = None) -> tuple[float, float, float]:
    """``(recall, threshold, high)``: see the module docstring."""
    fps, tps, thr, above, loose = _points(neg, pos, thresholds, singleton)
    if not len(tps) or not tps[-1] > 0:
        return _NAN3
    recall = tps / tps[-1]
    precision = _precision(tps, fps)
    value, t = _best(recall, precision, thr, precision >= min_precision)
    high = value
    inner = loose & (_precision(tps, above) >= min_precision)
    if inner.any():
        high = max(high, float(recall[inner].max()))
    return value, t, high


def tpr_at_fpr(neg: np.ndarray, pos: np.ndarray, thresholds: np.ndarray, max_fpr: float,
               singleton: np.ndarray | None = None) -> tuple[float, float, float]:
    """``(tpr, threshold, high)``: see the module docstring."""
    fps, tps, thr, above, loose = _points(neg, pos, thresholds, singleton)
    if not len(tps) or not (tps[-1] > 0 and fps[-1] > 0):
        return _NAN3
    tpr = np.concatenate(([0.0], tps / tps[-1]))
    fpr = np.concatenate(([0.0], fps / fps[-1]))
    thr = np.concatenate(([math.inf], thr))
    value, t = _best(tpr, np.zeros(len(tpr)), thr, fpr <= max_fpr)
    high = value
    inner = loose & (above / fps[-1] <= max_fpr)
    if inner.any():
        high = max(high, float(tpr[1:][inner].max()))
    return value, t, high


def expected_cost(fp: float, fn: float, total: float, cost_fp: float, cost_fn: float) -> float:
    """``(cost_fp * fp + cost_fn * fn) / total``: the cost per unit of weight (nan when no weight)."""
    if not total > 0:
        return math.nan
    return (cost_fp * fp + cost_fn * fn) / total


def expected_cost_bounds(neg: np.ndarray, pos: np.ndarray, at: np.ndarray, split: np.ndarray,
                         cost_fp: float, cost_fn: float) -> tuple[float, float, float]:
    """``(cost, low, high)`` per event of predicting ``score >= t``: ``at`` marks the levels
    at or above ``t`` (a bin holding ``t`` counts as predicted positive), ``split`` the level
    a threshold strictly inside a bin of several scores splits (its events may fall either
    side: ``low``/``high`` take each the cheaper / dearer side)."""
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    total = float(neg.sum() + pos.sum())
    fp, fn = float(neg[at].sum()), float(pos[~at].sum())
    cost = expected_cost(fp, fn, total, cost_fp, cost_fn)
    n_split, p_split = float(neg[split].sum()), float(pos[split].sum())
    low = expected_cost(fp - n_split, fn, total, cost_fp, cost_fn)
    high = expected_cost(fp, fn + p_split, total, cost_fp, cost_fn)
    return cost, low, high
