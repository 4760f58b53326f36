"""ROC AUC, its bounds and average precision of a few score levels in one pure-Python pass.

:mod:`streammetrics.kernels.ranking` builds numpy arrays per call: right for thousands of
levels, but a window of a few dozen events has a few dozen levels, where the array set-up
(tens of microseconds per metric) is all the cost. :func:`ranking_summary` computes the
three numbers a snapshot reports from plain lists in one pass, with the same definitions
and the same order of operations as ``ranking`` (scikit-learn's values; |diff| <= 1e-12 for
the levels up to :data:`SMALL_LEVELS`, where callers should switch to ``ranking``):

* ``roc_auc``: trapezoid under the ROC curve walked from the highest level down, pairs on
  one level counting half, ``sum(n_i * (2 P_above + p_i)) / (2 N P)``; None when a class
  has no weight (scikit-learn: NaN);
* ``roc_auc_low`` / ``roc_auc_high``: :func:`streammetrics.kernels.ranking.roc_auc_bounds`
  (pairs on a non-singleton level all wrong / all right, widened by ``(4 L + 32) eps``);
* ``average_precision``: the step sum ``sum((R_i - R_{i-1}) P_i)`` from the top level down;
  0.0 when no positive has weight (scikit-learn's value after its warning), None when no
  event has weight.

>>> s = ranking_summary([2.0, 1.0, 0.0], [0.0, 1.0, 1.0], [True, True, True])
>>> s["roc_auc"], s["average_precision"]
(0.9166666666666666, 0.8333333333333333)
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from streammetrics.kernels.ranking import rounding_interval, rounding_slack

__all__ = ["SMALL_LEVELS", "levels", "ranking_summary", "ranking_summary_columns"]

#: up to this many levels the one pure-Python pass beats the numpy path of a snapshot (AUC,
#: bounds and AP through ``ranking``, which sorts the dicts into arrays for each): measured
#: 48x faster at 30 levels, 5.6x at 119, 2.3x at 247, 1.4x at 921 (benchmarks/bench_snapshot.py)
SMALL_LEVELS = 256

_EPS = 2.0**-52
#: class totals between these keep ``area / (2 N P)`` and its terms far from the float range's
#: ends (products down to 2**-600 relative: what underflows is below 2**-474 of the area)
_SCALE_LOW, _SCALE_HIGH = 2.0**-300, 2.0**300


def levels(neg: Mapping, pos: Mapping) -> tuple[list, list[float], list[float]]:
    """``(keys, neg, pos)`` of two histograms given as ``{key: weight}`` dicts: the union
    of their keys ascending, and each one's weight per key (0.0 where absent)."""
    keys = sorted(neg.keys() | pos.keys())
    get_n, get_p = neg.get, pos.get
    return keys, [float(get_n(k, 0.0)) for k in keys], [float(get_p(k, 0.0)) for k in keys]


def ranking_summary(
    neg: Sequence[float], pos: Sequence[float], singleton: Sequence[bool] | None = None
) -> dict[str, float | None]:
    """``roc_auc``, ``roc_auc_low``, ``roc_auc_high``, ``average_precision`` of the levels
    (``neg``/``pos``: per-level weights in ascending score order; ``singleton``: levels that
    hold one distinct score, None for all, as for exact histograms, where the bounds are
    the AUC itself)."""
    total_n = math.fsum(neg)
    total_p = math.fsum(pos)
    out: dict[str, float | None] = dict.fromkeys(
        ("roc_auc", "roc_auc_low", "roc_auc_high", "average_precision"))
    if not (total_n > 0 or total_p > 0):
        return out
    # average precision, from the highest level down over the levels holding weight
    ap = 0.0
    fps = tps = 0.0
    prev_recall = 0.0
    for i in range(len(neg) - 1, -1, -1):
        n_i, p_i = neg[i], pos[i]
        if n_i == 0 and p_i == 0:
            continue
        fps += n_i
        tps += p_i
        recall = tps / total_p if total_p > 0 else 1.0
        ap += (recall - prev_recall) * (tps / (tps + fps))
        prev_recall = recall
    out["average_precision"] = max(0.0, ap)
    if not (total_n > 0 and total_p > 0):
        return out
    # AUC: trapezoid over the levels from the top (P_above: positive weight above level i);
    # class totals far from 1 (e.g. a weight of 5e-324, or 1e300) would make N*P underflow to 0
    # or overflow: then each class is scaled to a total of 1 first (scikit-learn's tpr, fpr)
    sn, sp, tn, tp = neg, pos, total_n, total_p
    if not (_SCALE_LOW < tn < _SCALE_HIGH and _SCALE_LOW < tp < _SCALE_HIGH):
        sn, sp = [n / tn for n in neg], [p / tp for p in pos]
        tn, tp = math.fsum(sn), math.fsum(sp)
    area = 0.0
    above = 0.0
    for i in range(len(sn) - 1, -1, -1):
        n_i, p_i = sn[i], sp[i]
        area += n_i * (above + above + p_i)
        above += p_i
    auc = area / (2.0 * tn * tp)
    out["roc_auc"] = auc
    if singleton is None:  # exact levels: the value, widened by its rounding bound
        out["roc_auc_low"], out["roc_auc_high"] = rounding_interval(auc, len(neg))
        return out
    # bounds, as ranking.roc_auc_bounds: below[i] = cumsum(n)[i] - n[i]
    low = high_extra = half = cum = 0.0
    for i, (n_raw, p_raw) in enumerate(zip(neg, pos)):
        n_i = n_raw / total_n
        p_i = p_raw / total_p
        cum += n_i
        low += p_i * (cum - n_i)
        if singleton[i]:
            half += p_i * n_i
        else:
            high_extra += p_i * n_i
    low += 0.5 * half
    slack = rounding_slack(len(neg))
    out["roc_auc_low"] = max(0.0, low - slack)
    out["roc_auc_high"] = min(1.0, low + high_extra + slack)
    return out


def ranking_summary_columns(window_of_level: np.ndarray, neg: np.ndarray, pos: np.ndarray, m: int,
                            one_class: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """The vectorised twin of :func:`ranking_summary` (exact levels: every level a single
    score) for ``m`` windows of whole counts at once, ``{value: (values, where undefined or
    None)}``; ``window_of_level``: each level's window, levels ascending within each window;
    ``one_class``: the windows where a class has no event (ROC AUC undefined).
    The levels are laid out one row per window, highest first (zeros after a window's last):
    the AUC's sums are whole numbers (exact in any order), and average precision adds its
    terms column by column (``np.add.accumulate`` along a row: the same sequence of IEEE
    additions as the one-window loop). Windows of very different numbers of levels (a few
    slices of many events among many of few) are laid out in groups of similar widths (each
    row's values do not depend on the width it is padded to), so the rows hold at most ~4x
    their levels."""
    counts = np.bincount(window_of_level, minlength=m)
    width = int(counts.max()) if m else 0
    if width > _GROUP_WIDTH and m * width > 4 * len(window_of_level):
        return _grouped(window_of_level, neg, pos, m, one_class, counts)
    return _rows_pass(window_of_level, neg, pos, m, one_class, counts, width)


#: windows of up to this many levels share one layout; wider ones are grouped by width (x4 steps)
_GROUP_WIDTH = 8


def _grouped(window_of_level: np.ndarray, neg: np.ndarray, pos: np.ndarray, m: int, one_class: np.ndarray,
             counts: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """:func:`ranking_summary_columns` of the windows in groups of widths ``(0, 8]``, ``(8, 32]``,
    ``(32, 128]``, ...: each group's rows as one pass, the values put back in window order."""
    out: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    low, high = 0, _GROUP_WIDTH
    while low < int(counts.max()):
        chosen = (counts > low) & (counts <= high)
        if chosen.any():
            windows = np.flatnonzero(chosen)
            levels = chosen[window_of_level]
            renumbered = (np.cumsum(chosen) - 1)[window_of_level[levels]]
            part = _rows_pass(renumbered, neg[levels], pos[levels], len(windows), one_class[windows],
                              counts[windows], int(counts[windows].max()))
            for name, (values, undefined) in part.items():
                if name not in out:
                    out[name] = (np.zeros(m), None if undefined is None else one_class)
                out[name][0][windows] = values
        low, high = high, high * 4
    return out


def _rows_pass(window_of_level: np.ndarray, neg: np.ndarray, pos: np.ndarray, m: int, one_class: np.ndarray,
               counts: np.ndarray, width: int) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """:func:`ranking_summary_columns` with every window a row of ``width`` levels."""
    ends = np.cumsum(counts)
    descending = (ends[window_of_level] - 1) - np.arange(len(window_of_level))  # column, from the top
    shape = (m, width)
    n_rows = np.zeros(shape)
    p_rows = np.zeros(shape)
    n_rows[window_of_level, descending] = neg
    p_rows[window_of_level, descending] = pos
    tps = np.add.accumulate(p_rows, axis=1)
    fps = np.add.accumulate(n_rows, axis=1)
    total_p, total_n = tps[:, -1:], fps[:, -1:]
    real = np.arange(width)[None, :] < counts[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(total_p > 0, tps / total_p, 1.0)
        prev = np.zeros(shape)
        prev[:, 1:] = recall[:, :-1]
        terms = np.where(real, (recall - prev) * (tps / (tps + fps)), 0.0)
        ap = np.maximum(0.0, np.add.accumulate(terms, axis=1)[:, -1])
        area = (n_rows * ((tps - p_rows) * 2.0 + p_rows)).sum(axis=1)  # whole numbers: exact
        auc = area / (2.0 * total_n[:, 0] * total_p[:, 0])
    slack = rounding_slack(counts)  # type: ignore[arg-type]  # (elementwise: each window's levels)
    return {
        "roc_auc": (auc, one_class),
        "roc_auc_low": (np.maximum(0.0, auc - slack), one_class),
        "roc_auc_high": (np.minimum(1.0, auc + slack), one_class),
        "average_precision": (ap, None),
    }
