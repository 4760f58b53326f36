"""Confidence intervals of windowed metrics from an accumulator's state.

Every interval is a function of the state alone (counts, the two score histograms, exact sums):
no resampling, mergeable, deterministic. Each formula is written once, vectorised over numpy
rows (one row per window); the scalar entry points call the same code on one-row arrays, so a
monitor's interval and the fleet pass's (many small windows at once) are the same floats.

Methods (``z`` the two-sided normal quantile of ``confidence``; references and the table of
metrics in ``docs/intervals.md``): proportions by Wilson's score interval with continuity
correction (Newcombe 1998, method 4); F1 = 2q / (1 + q) through the Wilson interval of
q = tp / (tp + fp + fn); balanced accuracy by MOVER (Newcombe 1998 method 10, Zou & Donner 2008);
Matthews correlation and the ``K x K`` metrics (:func:`matrix_interval`) by the delta method on
the cell shares (Fisher ``atanh`` or logit scale); ROC AUC by DeLong's variance from the
histograms' placement values on the logit scale, widened by the guaranteed bounds of a binned
state; means of per-event terms by ``mean +- z * s / sqrt(n)``.

Minimum rule (:data:`MIN_EVENTS`, :data:`MIN_CLASS_EVENTS`, :data:`MIN_MEAN_EVENTS`,
:data:`MIN_R2_EVENTS`): below it the interval is None (the snapshot writes ``null`` and lists
the metric in ``"insufficient"``).

Weighted events (Kish 1965): each formula reads *pseudo-counts*, the summed weights scaled by
``f = sum w / sum w^2`` (:func:`kish_factor`; exactly 1 for unit weights), so they add up to the
effective sample size ``n_eff = (sum w)^2 / sum w^2``.
"""
from __future__ import annotations

import json
import math
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

__all__ = [
    "JEFFREYS",
    "MATRIX_INTERVALS",
    "MIN_AUC_EVENTS",
    "MIN_CLASS_EVENTS",
    "MIN_EVENTS",
    "MIN_MEAN_EVENTS",
    "MIN_R2_EVENTS",
    "HEAVY_TAIL_Z",
    "as_pair",
    "auc_interval",
    "auc_intervals",
    "binary_interval_columns",
    "score_interval_columns",
    "BINARY_INTERVALS",
    "CONFUSION_INTERVALS",
    "confusion_intervals",
    "interval_record",
    "kish_factor",
    "r2_intervals",
    "root_intervals",
    "intervals_text",
    "balanced_accuracy_intervals",
    "check_confidence",
    "f1_intervals",
    "level_second_moments",
    "macro_f1_interval",
    "matrix_interval",
    "matrix_value_gradient",
    "mcc_interval",
    "mcc_intervals",
    "mean_intervals",
    "ovr_auc_interval",
    "pairs_record",
    "benjamini_hochberg",
    "differences",
    "compare",
    "wilson",
    "t_values",
    "wilson_many",
    "z_value",
]

#: events a proportion's denominator needs (F1: tp + fp + fn)
MIN_EVENTS = 10
#: events of each class ROC AUC, balanced accuracy and Matthews correlation need
MIN_CLASS_EVENTS = 10
#: events of each class ROC AUC needs (DeLong covers 93.5% at 10-20 events of the rarer class)
MIN_AUC_EVENTS = 20
#: events a mean of per-event terms (log loss, Brier, MAE) and macro F1 need
MIN_MEAN_EVENTS = 30
#: (effective) events R² needs: its delta method reads fourth moments, whose estimate from fewer
#: leaves the interval short (93.7% at 50 events of normal errors, 93.4% at 100, 95.3% at 200)
MIN_R2_EVENTS = 100
#: R²: errors whose kurtosis about 0 exceeds ``3 + HEAVY_TAIL_Z sqrt(24 / n)`` are heavy-tailed
#: (a one-sided 0.5% test of normal tails): their interval bounds ``E d^4`` by ``max d^2 E d^2``
HEAVY_TAIL_Z = 2.576

Pair = tuple[float, float]


def check_confidence(confidence: Any) -> float:
    """``confidence`` as a float strictly inside (0, 1); ``ValueError`` naming it otherwise."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number strictly between 0 and 1, got {confidence!r:.40}")
    return float(confidence)


def z_value(confidence: float) -> float:
    """Two-sided normal quantile: ``Phi^-1((1 + confidence) / 2)`` (1.959963984540054 at 0.95)."""
    return NormalDist().inv_cdf((1.0 + check_confidence(confidence)) / 2.0)


def t_values(z: float, df: Any) -> np.ndarray:
    """Student-t quantiles from the normal one ``z`` (same tail probability) for ``df`` degrees of
    freedom (array, >= 1): the Cornish-Fisher expansion of Hill (1970), to ``1/df^4``::

        t = z + (z^3 + z) / (4 v) + (5 z^5 + 16 z^3 + 3 z) / (96 v^2)
              + (3 z^7 + 19 z^5 + 17 z^3 - 15 z) / (384 v^3)
              + (79 z^9 + 776 z^7 + 1482 z^5 - 1920 z^3 - 945 z) / (92160 v^4)

    (2.2622 for 9 degrees of freedom at 0.95, exact 2.2622; 2.0930 for 19, exact 2.0930)."""
    v = np.maximum(np.asarray(df, dtype=np.float64), 1.0)
    g = _HILL.get(z)
    if g is None:
        z2 = z * z
        g = _HILL[z] = ((z2 + 1.0) * z / 4.0, ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0,
                        (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0,
                        ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0)
    g1, g2, g3, g4 = g
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


#: the coefficients of :func:`t_values` per ``z`` (a few confidences in a run)
_HILL: dict[float, tuple[float, float, float, float]] = {}


def _rows(*values: Any) -> list[np.ndarray]:
    """Each value as a float64 array of at least one dimension (a float64 array: itself)."""
    return [v if v.__class__ is np.ndarray and v.ndim and v.dtype == _F8 else np.atleast_1d(np.asarray(v, dtype=_F8))
            for v in values]


_F8 = np.dtype(np.float64)


def as_pair(lo: np.ndarray, hi: np.ndarray) -> Pair | None:
    """The first row of interval columns as ``(low, high)``, None where it is nan."""
    a, b = float(lo[0]), float(hi[0])
    return None if math.isnan(a) or math.isnan(b) else (a, b)


def kish_factor(total: Any, squares: Any) -> np.ndarray:
    """``f = sum w / sum w^2`` (arrays; nan where ``sum w^2`` is not positive): the pseudo-counts
    ``f x`` of summed weights ``x`` add up to Kish's effective sample size ``(sum w)^2 / sum w^2``;
    exactly 1 for unit weights (``sum w^2 = sum w``).

    >>> kish_factor([4.0, 4.0], [4.0, 8.0]).tolist()
    [1.0, 0.5]
    """
    total, squares = _rows(total, squares)
    ok = squares > 0
    return np.where(ok, total / np.where(ok, squares, 1.0), np.nan)


# ---------------------------------------------------------------------------- proportions
def wilson_many(k: Any, n: Any, z: float, minimum: Any = MIN_EVENTS) -> tuple[np.ndarray, np.ndarray]:
    """Continuity-corrected Wilson intervals of ``k`` successes in ``n`` (arrays; nan where
    ``n < minimum``). Newcombe (1998), method 4::

        low  = (2 n p + z^2 - 1 - z sqrt(z^2 - 2 - 1/n + 4 p (n q + 1))) / (2 (n + z^2)), 0 if p = 0
        high = (2 n p + z^2 + 1 + z sqrt(z^2 + 2 - 1/n + 4 p (n q - 1))) / (2 (n + z^2)), 1 if p = 1
    """
    k, n = _rows(k, n)
    ok = n >= minimum
    nn = np.where(ok, n, 1.0)
    p = np.clip(np.where(ok, k, 0.0) / nn, 0.0, 1.0)
    q = 1.0 - p
    z2 = z * z
    den = 2.0 * (nn + z2)
    with np.errstate(invalid="ignore"):
        root_lo = np.sqrt(np.maximum(z2 - 2.0 - 1.0 / nn + 4.0 * p * (nn * q + 1.0), 0.0))
        root_hi = np.sqrt(np.maximum(z2 + 2.0 - 1.0 / nn + 4.0 * p * (nn * q - 1.0), 0.0))
        lo = (2.0 * nn * p + z2 - 1.0 - z * root_lo) / den
        hi = (2.0 * nn * p + z2 + 1.0 + z * root_hi) / den
    lo = np.where(p <= 0.0, 0.0, np.clip(lo, 0.0, 1.0))
    hi = np.where(p >= 1.0, 1.0, np.clip(hi, 0.0, 1.0))
    lo = np.minimum(lo, p)
    hi = np.maximum(hi, p)
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


def wilson(k: float, n: float, confidence: float = 0.95, minimum: int = MIN_EVENTS) -> Pair | None:
    """:func:`wilson_many` of one proportion ``k / n``; None when ``n < minimum``.

    >>> [round(x, 4) for x in wilson(8, 10)]
    [0.4422, 0.9646]
    """
    return as_pair(*wilson_many(k, n, z_value(confidence), minimum))


def f1_intervals(tp: Any, fp: Any, fn: Any, z: float) -> tuple[np.ndarray, np.ndarray]:
    """F1 = 2 q / (1 + q), ``q = tp / (tp + fp + fn)``: the Wilson interval of q (given
    ``tp + fp + fn`` events, tp is binomial) mapped through the monotone ``2 q / (1 + q)``."""
    tp, fp, fn = _rows(tp, fp, fn)
    return _f1_of(*wilson_many(tp, tp + fp + fn, z))


def _f1_of(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`f1_intervals` from the Wilson interval of ``q = tp / (tp + fp + fn)``."""
    return 2.0 * lo / (1.0 + lo), 2.0 * hi / (1.0 + hi)


def balanced_accuracy_intervals(tn: Any, fp: Any, fn: Any, tp: Any, z: float) -> tuple[np.ndarray, np.ndarray]:
    """(recall + specificity) / 2 by MOVER on the two Wilson intervals (each class >=
    :data:`MIN_CLASS_EVENTS` events): ``low = t - sqrt((r - l_r)^2 + (s - l_s)^2)``, ``high``
    alike, then halved."""
    tn, fp, fn, tp = _rows(tn, fp, fn, tp)
    pos, neg = tp + fn, tn + fp
    lo, hi = wilson_many(np.concatenate((tp, tn)), np.concatenate((pos, neg)), z, MIN_CLASS_EVENTS)
    return _balanced_of(tn, fp, fn, tp, _halves(lo, hi, 2))


def _halves(lo: np.ndarray, hi: np.ndarray, parts: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Interval columns of ``parts`` stacked blocks of rows (one :func:`wilson_many` call for
    several proportions: elementwise, so each block as if alone), block by block."""
    rows = len(lo) // parts
    return [(lo[i * rows:(i + 1) * rows], hi[i * rows:(i + 1) * rows]) for i in range(parts)]


def _balanced_of(tn: np.ndarray, fp: np.ndarray, fn: np.ndarray, tp: np.ndarray,
                 wilsons: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`balanced_accuracy_intervals` from the Wilson intervals (minimum
    :data:`MIN_CLASS_EVENTS`) of recall and specificity, ``wilsons[0]`` and ``wilsons[1]``."""
    pos, neg = tp + fn, tn + fp
    ok = (pos >= MIN_CLASS_EVENTS) & (neg >= MIN_CLASS_EVENTS)
    (rl, rh), (sl, sh) = wilsons[0], wilsons[1]
    r = tp / np.where(ok, pos, 1.0)
    s = tn / np.where(ok, neg, 1.0)
    t = r + s
    lo = (t - np.sqrt((r - rl) ** 2 + (s - sl) ** 2)) / 2.0
    hi = (t + np.sqrt((rh - r) ** 2 + (sh - s) ** 2)) / 2.0
    return np.where(ok, np.clip(lo, 0.0, 1.0), np.nan), np.where(ok, np.clip(hi, 0.0, 1.0), np.nan)


def mcc_intervals(tn: Any, fp: Any, fn: Any, tp: Any, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Matthews correlation ``(a d - b c) / sqrt((a+b)(a+c)(d+b)(d+c))`` (a = tp, b = fp,
    c = fn, d = tn as shares): delta method over the multinomial shares (the coefficient is
    homogeneous of degree 0, so ``Var = sum g_i^2 p_i / N``), interval on the ``atanh`` scale
    (the coefficient clipped to ``+-(1 - 1/N)``; ``t`` of :func:`t_values` with the smallest
    margin minus one degrees of freedom). Needs :data:`MIN_CLASS_EVENTS` events of each
    true class and each predicted class."""
    tn, fp, fn, tp = _rows(tn, fp, fn, tp)
    n = tn + fp + fn + tp
    margin = np.minimum(np.minimum(tp + fn, tn + fp), np.minimum(tp + fp, tn + fn))
    ok = margin >= MIN_CLASS_EVENTS
    nn = np.where(ok, n, 1.0)
    a, b, c, d = (np.where(ok, x, 0.25) / nn for x in (tp, fp, fn, tn))
    ab, ac, db, dc = a + b, a + c, d + b, d + c
    root = np.sqrt(ab * ac * db * dc)
    m = (a * d - b * c) / root
    half = m / 2.0
    ga = d / root - half * (1.0 / ab + 1.0 / ac)
    gb = -c / root - half * (1.0 / ab + 1.0 / db)
    gc = -b / root - half * (1.0 / ac + 1.0 / dc)
    gd = a / root - half * (1.0 / db + 1.0 / dc)
    se = np.sqrt((ga * ga * a + gb * gb * b + gc * gc * c + gd * gd * d) / nn)
    edge = 1.0 - 1.0 / nn
    mc = np.clip(m, -edge, edge)
    centre = np.arctanh(mc)
    width = t_values(z, np.where(ok, margin, 2.0) - 1.0) * se / (1.0 - mc * mc)
    lo, hi = np.tanh(centre - width), np.tanh(centre + width)
    return np.where(ok, np.minimum(lo, m), np.nan), np.where(ok, np.maximum(hi, m), np.nan)


def mcc_interval(tn: float, fp: float, fn: float, tp: float, confidence: float = 0.95) -> Pair | None:
    """:func:`mcc_intervals` of one binary confusion matrix."""
    return as_pair(*mcc_intervals(tn, fp, fn, tp, z_value(confidence)))


# ---------------------------------------------------------------------------- ROC AUC
def auc_intervals(starts: Any, neg: Any, pos: Any, low: Any, high: Any, z: float) -> tuple[np.ndarray, np.ndarray]:
    """DeLong intervals of the ROC AUC of many windows given as levels: ``neg``/``pos`` the
    counts per level (ascending score within a window), ``starts`` the index of each window's
    first level, ``low``/``high`` each window's guaranteed AUC bounds (the AUC itself, up to
    rounding, when exact).

    Placement values with ties counting half: a positive at level ``l`` has
    ``V10 = (neg below l + neg_l / 2) / N``, a negative ``V01 = (pos above l + pos_l / 2) / P``;
    ``A = sum pos_l V10_l / P``, ``S10 = sum pos_l (V10_l - A)^2 / (P - 1)``, ``S01`` alike and
    ``Var = S10 / P + S01 / N`` (DeLong, DeLong & Clarke-Pearson 1988; Sun & Xu 2014). The interval
    is ``logit(A) +- t sqrt(Var) / (A (1 - A))`` mapped back (``t``: :func:`t_values` with
    ``min(P, N) - 1`` degrees of freedom, for the rarer class's few placements) (A clipped to
    ``[1/(2 P N), 1 - 1/(2 P N)]``), then widened by ``A - low`` below and ``high - A`` above.
    Needs :data:`MIN_AUC_EVENTS` events of each class (nan otherwise). Per-window sums are
    ``np.add.reduceat`` (one order on every path)."""
    starts = np.asarray(starts, dtype=np.int64)
    neg, pos, low, high = _rows(neg, pos, low, high)
    total_n = np.add.reduceat(neg, starts)
    total_p = np.add.reduceat(pos, starts)
    win: Any = slice(None)  # (one window: its values broadcast over its levels)
    if len(starts) > 1:
        win = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(neg))))
    cum_n = np.cumsum(neg)
    cum_p = np.cumsum(pos)
    first_n = (cum_n - neg)[starts]  # (whole counts: exact)
    first_p = (cum_p - pos)[starts]
    below_n = cum_n - neg - first_n[win]  # negatives strictly below the level, within its window
    above_p = (first_p + total_p)[win] - cum_p  # positives strictly above
    ok = (total_n >= MIN_AUC_EVENTS) & (total_p >= MIN_AUC_EVENTS)
    tn_, tp_ = np.where(ok, total_n, 1.0), np.where(ok, total_p, 1.0)
    v10 = (below_n + neg / 2.0) / tn_[win]
    v01 = (above_p + pos / 2.0) / tp_[win]
    auc = np.add.reduceat(pos * (2.0 * below_n + neg), starts) / (2.0 * tn_ * tp_)
    s10 = np.add.reduceat(pos * (v10 - auc[win]) ** 2, starts) / np.maximum(tp_ - 1.0, 1.0)
    s01 = np.add.reduceat(neg * (v01 - auc[win]) ** 2, starts) / np.maximum(tn_ - 1.0, 1.0)
    se = np.sqrt(s10 / tp_ + s01 / tn_)
    edge = 0.5 / (tn_ * tp_)
    a = np.clip(auc, edge, 1.0 - edge)
    centre = np.log(a / (1.0 - a))
    width = t_values(z, np.minimum(tn_, tp_) - 1.0) * se / (a * (1.0 - a))
    with np.errstate(over="ignore"):
        lo = 1.0 / (1.0 + np.exp(width - centre))
        hi = 1.0 / (1.0 + np.exp(-(centre + width)))
    lo = np.minimum(lo, auc) - np.maximum(auc - low, 0.0)
    hi = np.maximum(hi, auc) + np.maximum(high - auc, 0.0)
    return np.where(ok, np.clip(lo, 0.0, 1.0), np.nan), np.where(ok, np.clip(hi, 0.0, 1.0), np.nan)


def auc_interval(neg: Sequence[float], pos: Sequence[float], low: float, high: float,
                 confidence: float = 0.95) -> Pair | None:
    """:func:`auc_intervals` of one window's levels (ascending score).

    >>> lo, hi = auc_interval([6] * 4 + [0] * 4, [0] * 4 + [6] * 4, 1.0, 1.0)
    >>> hi, lo < 1.0
    (1.0, True)
    """
    if not len(neg):
        return None
    return as_pair(*auc_intervals([0], neg, pos, low, high, z_value(confidence)))


def ovr_auc_interval(levels: Sequence[tuple[Any, Any, float, float]], weights: Any = None,
                     confidence: float = 0.95, classes: tuple[Any, Any] | None = None) -> Pair | None:
    """Interval of a mean of one-vs-rest ROC AUCs (multiclass ``roc_auc`` macro, or weighted by
    ``weights``): ``levels`` per class ``(neg, pos, low, high)`` (its levels in ascending score and
    guaranteed AUC bounds). Each class's :func:`auc_intervals`; the classes' AUCs share events, and
    their covariance is not kept, so they are combined conservatively: the weighted mean of the
    endpoints (the standard deviation of a mean is at most the mean of the standard deviations,
    equality at correlation 1; MOVER with correlation 1 for the asymmetric ends). None when a
    class has fewer than :data:`MIN_AUC_EVENTS` events on either side. ``classes``: the classes'
    :func:`auc_intervals` ``(low, high)`` of these levels, when the caller computed them (with many
    windows' in one call).

    >>> up = [0] * 30 + [30] * 30
    >>> lo, hi = ovr_auc_interval([(up[::-1], up, 1.0, 1.0)] * 3)
    >>> hi, lo < 1.0
    (1.0, True)
    """
    if not len(levels):
        return None
    sizes = [len(neg) for neg, _, _, _ in levels]
    if not all(sizes):
        return None
    if classes is None:
        starts = np.cumsum([0] + sizes[:-1])
        neg = np.concatenate([np.asarray(x[0], dtype=np.float64) for x in levels])
        pos = np.concatenate([np.asarray(x[1], dtype=np.float64) for x in levels])
        classes = auc_intervals(starts, neg, pos, [x[2] for x in levels], [x[3] for x in levels], z_value(confidence))
    lo, hi = classes
    if np.isnan(lo).any() or np.isnan(hi).any():
        return None
    w = np.ones(len(levels)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not (w.sum() > 0 and (w >= 0).all()):
        return None
    return float(np.clip(np.average(lo, weights=w), 0.0, 1.0)), float(np.clip(np.average(hi, weights=w), 0.0, 1.0))


# ---------------------------------------------------------------------------- means
def level_second_moments(scores_low: Any, scores_high: Any, neg: Any, pos: Any, starts: Any = (0,),
                         need: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Per window (``starts``: the index of each window's first level), ``sum w l^2`` and
    ``sum w b^2`` over the levels of a binary score histogram: ``l`` the log-loss term, ``b`` the
    Brier term (:func:`~streammetrics.kernels.exact_sum.probability_terms`, the formula every
    path uses) of each level's class. A level holds scores in ``[scores_low, scores_high]``
    (equal for exact levels); the larger term of the range is taken (negatives: the high end,
    positives: the low end), so on bins the moments are upper bounds and the interval
    conservative. Each sum is ``math.fsum`` of the window's per-level products (correctly
    rounded: one value on every path). ``need``: the windows whose sums are wanted (the others
    get nan; default all)."""
    from streammetrics.kernels.exact_sum import exact_units_rows, float_of, probability_terms

    lo, hi, neg, pos = _rows(scores_low, scores_high, neg, pos)
    bounds = np.append(np.asarray(starts, dtype=np.int64), len(neg))
    windows = np.arange(len(bounds) - 1) if need is None else np.flatnonzero(need)
    if len(lo) and lo.min() >= 0.0 and hi.max() <= 1.0:
        # probabilities: every term is finite, so a level's class without weight adds an exact 0 to
        # the sums: the terms of the levels each class has only (the rest of this function alike)
        n_at, p_at = np.flatnonzero(neg), np.flatnonzero(pos)
        neg, hi, pos, lo = neg[n_at], hi[n_at], pos[p_at], lo[p_at]
        if len(bounds) == 2 and len(windows) == 1:  # one window: its terms in one array per sum
            w = np.concatenate((neg, pos))
            terms_l, terms_b = probability_terms(np.concatenate((-hi, lo)))
            rows = np.vstack((w * terms_l * terms_l, w * terms_b * terms_b))
            if np.isfinite(rows).all():  # (correctly rounded sums: math.fsum's values)
                sum_l, sum_b = exact_units_rows(rows)
                return np.array([float_of(sum_l)]), np.array([float_of(sum_b)])
        n_bounds, p_bounds = np.searchsorted(n_at, bounds), np.searchsorted(p_at, bounds)
    else:
        n_bounds = p_bounds = bounds
    ln, bn = probability_terms(-hi)  # (a negative's terms grow with its score)
    lp, bp = probability_terms(lo)
    n_first, n_last = n_bounds[windows].tolist(), n_bounds[windows + 1].tolist()
    p_first, p_last = p_bounds[windows].tolist(), p_bounds[windows + 1].tolist()
    out = []
    for a, b in ((neg * ln * ln, pos * lp * lp), (neg * bn * bn, pos * bp * bp)):
        la, lb = a.tolist(), b.tolist()
        sums = np.full(len(bounds) - 1, np.nan)
        sums[windows] = [math.fsum(la[i:j] + lb[k:m]) for i, j, k, m in zip(n_first, n_last, p_first, p_last)]
        out.append(sums)
    return out[0], out[1]


def mean_intervals(mean: Any, second: Any, n: Any, z: float, low: Any = 0.0, high: Any = math.inf,
                   df: Any = None, log_scale: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``mean +- t s / sqrt(n)`` of per-event terms, ``s^2 = (second - n mean^2) / (n - 1)``
    (``second`` the sum of squared terms), ``t`` the Student quantile (:func:`t_values`) of ``df``
    degrees of freedom (default ``n - 1``; nan: no interval), clipped to ``[low, high]``; nan
    where ``n <`` :data:`MIN_MEAN_EVENTS`. ``log_scale`` (a mean of non-negative terms, e.g. MAE):
    the delta method on ``log mean``, ``mean exp(+- t s / (mean sqrt(n)))`` (the upper end
    stretched: a right-skewed term's mean is more often under- than over-estimated, and its
    ``s`` with it; ``(0, 0)`` for a mean of 0)."""
    mean, second, n, low, high = _rows(mean, second, n, low, high)
    df = n - 1.0 if df is None else _rows(df)[0]
    ok = (n >= MIN_MEAN_EVENTS) & np.isfinite(mean) & np.isfinite(second) & ~np.isnan(df)
    nn = np.where(ok, n, 2.0)
    var = np.maximum(np.where(ok, second, 0.0) - nn * np.where(ok, mean, 0.0) ** 2, 0.0) / (nn - 1.0)
    half = t_values(z, np.where(ok, df, 1.0)) * np.sqrt(var / nn)
    if log_scale:
        m = np.where(ok, mean, 0.0)
        live = m > 0.0
        rel = np.where(live, half / np.where(live, m, 1.0), 0.0)
        with np.errstate(over="ignore"):
            lo, hi = m * np.exp(-rel), m * np.exp(rel)
        return (np.where(ok, np.maximum(np.minimum(lo, m), low), np.nan),
                np.where(ok, np.minimum(np.maximum(hi, m), high), np.nan))
    return (np.where(ok, np.maximum(mean - half, low), np.nan),
            np.where(ok, np.minimum(mean + half, high), np.nan))


def root_intervals(low: Any, high: Any) -> tuple[np.ndarray, np.ndarray]:
    """An interval of a non-negative quantity (the MSE) mapped to its square root (the RMSE):
    ``sqrt`` is increasing, so ``[sqrt low, sqrt high]`` covers exactly as often."""
    low, high = _rows(low, high)
    return np.sqrt(np.maximum(low, 0.0)), np.sqrt(np.maximum(high, 0.0))


def r2_intervals(a: Any, b: Any, d4: Any, y4: Any, d2y2: Any, n: Any, z: float,
                 d4_bound: Any = math.nan) -> tuple[np.ndarray, np.ndarray]:
    """R² ``= 1 - A / B`` (``A = E d^2`` the mean squared error, ``B = E (y - mean)^2``) by the
    delta method on ``log(1 - R²) = log A - log B``: the influence of an event is
    ``(d^2 - A) / A - ((y - mean)^2 - B) / B``, of variance ``V = E d^4 / A^2 + E (y - mean)^4 / B^2
    - 2 E d^2 (y - mean)^2 / (A B)`` (``d4``, ``y4``, ``d2y2``: those means); the interval
    ``log(A / B) +- t sqrt(V / (n - 1))`` (``t``: :func:`t_values`, ``n - 1`` degrees of freedom;
    ``n`` the effective sample size) mapped back to ``1 - exp(.)``, so the high end stays below 1.

    Heavy tails: ``V`` rests on the sample ``E d^4``, whose own spread needs the eighth moment; with
    heavy-tailed errors it is mostly too small exactly where the MSE is (Student-t(5) errors: 92.5%
    at 100 events, 93.3% at 200). So where the errors' kurtosis about 0, ``E d^4 / A^2``, exceeds
    the normal one by more than 2.576 of its standard errors under normal errors (``3 + 2.576
    sqrt(24 / n)``, a one-sided 0.5% test), ``E d^4`` is replaced by its bound ``d4_bound`` (``max
    d^2 A``, as the MSE interval does): conservative. Needs :data:`MIN_R2_EVENTS` events, ``A > 0``
    and ``B > 0`` (and a finite bound where the errors are heavy-tailed; nan otherwise)."""
    a, b, d4, y4, d2y2, n, d4_bound = _rows(a, b, d4, y4, d2y2, n, d4_bound)
    ok = (n >= MIN_R2_EVENTS) & (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)
    aa, bb, nn = np.where(ok, a, 1.0), np.where(ok, b, 1.0), np.where(ok, n, 2.0)
    heavy = d4 / (aa * aa) > 3.0 + HEAVY_TAIL_Z * np.sqrt(24.0 / nn)
    d4 = np.where(heavy, d4_bound, d4)
    ok &= ~(heavy & ~np.isfinite(d4_bound))
    v = np.maximum(d4 / (aa * aa) + y4 / (bb * bb) - 2.0 * d2y2 / (aa * bb), 0.0)
    ok &= np.isfinite(v)
    half = t_values(z, nn - 1.0) * np.sqrt(np.where(ok, v, 0.0) / (nn - 1.0))
    centre = np.log(aa / bb)
    r2 = 1.0 - aa / bb
    with np.errstate(over="ignore"):
        lo = np.minimum(1.0 - np.exp(centre + half), r2)
        hi = np.maximum(1.0 - np.exp(centre - half), r2)
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


# ---------------------------------------------------------------------------- multiclass
def macro_f1_interval(matrix: Any, confidence: float = 0.95) -> Pair | None:
    """Macro F1 (mean over the classes with ``row + column > 0``) of a ``K x K`` count matrix
    (rows: true class): delta method over the cell shares ``p_ij``. With ``F_c = 2 p_cc /
    (r_c + s_c)``, ``d F / d p_ij = (delta_ij 2 / (r_i + s_i) - G_i - G_j) / K``, ``G_c = 2 p_cc /
    (r_c + s_c)^2``; ``Var = (sum g^2 p - (sum g p)^2) / N``; ``+- t sqrt(Var)`` with the rarest
    true class's events minus one degrees of freedom (:func:`t_values`). Needs :data:`MIN_MEAN_EVENTS` events."""
    z = z_value(confidence)
    c = np.asarray(matrix, dtype=np.float64)
    n = float(c.sum())
    if n < MIN_MEAN_EVENTS:
        return None
    p = c / n
    r, s = p.sum(axis=1), p.sum(axis=0)
    rs = r + s
    live = rs > 0
    k = int(live.sum())
    if not k:
        return None
    d = np.diag(p)
    safe = np.where(live, rs, 1.0)
    f = np.where(live, 2.0 * d / safe, 0.0)
    macro = float(f.sum()) / k
    big_g = np.where(live, 2.0 * d / (safe * safe), 0.0)
    g = -(big_g[:, None] + big_g[None, :])
    g[np.diag_indices_from(g)] += np.where(live, 2.0 / safe, 0.0)
    g /= k
    var = max(float((g * g * p).sum()) - float((g * p).sum()) ** 2, 0.0) / n
    smallest = float(np.min(np.where(live, c.sum(axis=1), np.inf)))  # the rarest true class sets df
    half = float(t_values(z, [max(smallest, 2.0) - 1.0])[0]) * math.sqrt(var)
    return max(macro - half, 0.0), min(macro + half, 1.0)


#: events added to each cell of a present true class where :func:`matrix_interval` reads the variance
JEFFREYS = 0.5
#: the metrics of a ``K x K`` confusion matrix :func:`matrix_interval` gives
MATRIX_INTERVALS = ("balanced_accuracy", "macro_precision", "macro_recall", "weighted_f1",
                    "matthews_corrcoef", "cohen_kappa")


def matrix_value_gradient(p: np.ndarray, metric: str) -> tuple[float, np.ndarray, bool]:
    """``(value, d value / d p_ij, bounded in [-1, 1])`` of a metric of the cell shares ``p``
    (rows true, columns predicted; ``r``/``s`` the row/column sums, ``d`` the diagonal). Each
    gradient has the form ``delta_ij a_i + b_i + c_j``:

    * macro recall = balanced accuracy = mean over ``r_c > 0`` of ``d_c / r_c``:
      ``a_i = 1 / (k r_i)``, ``b_i = -d_i / (k r_i^2)``;
    * macro precision = mean over ``s_c > 0`` of ``d_c / s_c``: ``a_j = 1 / (k s_j)``,
      ``c_j = -d_j / (k s_j^2)``;
    * weighted F1 = ``sum r_c F_c``, ``F_c = 2 d_c / u_c``, ``u_c = r_c + s_c``:
      ``a_i = 2 r_i / u_i``, ``b_i = F_i - G_i``, ``c_j = -G_j``, ``G_c = 2 r_c d_c / u_c^2``;
    * Matthews ``M = (tr - sum r s) / sqrt((1 - sum s^2)(1 - sum r^2))`` (scikit-learn's R_K):
      ``dM = (delta_ij - s_i - r_j) / sqrt(B C) + M (s_j / B + r_i / C)``;
    * Cohen's kappa ``(tr - e) / (1 - e)``, ``e = sum r s``:
      ``d kappa = (delta_ij - (1 - kappa)(s_i + r_j)) / (1 - e)``."""
    r, s, d = p.sum(axis=1), p.sum(axis=0), np.diag(p).copy()
    if metric in ("balanced_accuracy", "macro_recall", "macro_precision"):
        m = r if metric != "macro_precision" else s
        live = m > 0
        k = float(live.sum())
        safe = np.where(live, m, 1.0)
        value = float(np.where(live, d / safe, 0.0).sum()) / k
        a = np.where(live, 1.0 / (k * safe), 0.0)
        off = np.where(live, -d / (k * safe * safe), 0.0)
        if metric == "macro_precision":
            return value, np.diag(a) + off[None, :], False
        return value, np.diag(a) + off[:, None], False
    if metric == "weighted_f1":
        u = r + s
        live = u > 0
        safe = np.where(live, u, 1.0)
        f = np.where(live, 2.0 * d / safe, 0.0)
        big_g = np.where(live, 2.0 * r * d / (safe * safe), 0.0)
        a = np.where(live, 2.0 * r / safe, 0.0)
        return float((r * f).sum()), np.diag(a) + (f - big_g)[:, None] - big_g[None, :], False
    tr, e = float(d.sum()), float((r * s).sum())
    eye = np.eye(len(d))
    if metric == "matthews_corrcoef":
        b, c = 1.0 - float((s * s).sum()), 1.0 - float((r * r).sum())
        root = math.sqrt(b * c)
        m_val = (tr - e) / root
        g = (eye - s[:, None] - r[None, :]) / root + m_val * (s[None, :] / b + r[:, None] / c)
        return m_val, g, True
    kappa = (tr - e) / (1.0 - e)
    g = (eye - (1.0 - kappa) * (s[:, None] + r[None, :])) / (1.0 - e)
    return kappa, g, True


def matrix_interval(matrix: Any, metric: str, confidence: float = 0.95) -> Pair | None:
    """Interval of a :data:`MATRIX_INTERVALS` metric of a ``K x K`` (pseudo-)count matrix (rows:
    true class; weighted windows: counts scaled by :func:`kish_factor`) by the delta method on the
    cell shares with the multinomial covariance ``(diag(p) - p p^T) / N``: ``Var = (sum g^2 p -
    (sum g p)^2) / N`` (``g``: :func:`matrix_value_gradient`), both read at the shares with
    :data:`JEFFREYS` events added to every cell of each true class present (a class all right or
    all wrong otherwise has no variance: 90% coverage at 50 events and 95% accuracy; the value
    itself is the observed one), on the logit scale for the metrics in
    ``[0, 1]`` and the Fisher ``atanh`` scale for Matthews and kappa (the value clipped ``1/(2N)``
    inside its range), ``t`` of :func:`t_values` with the rarest class's events minus one degrees of
    freedom. Minimum rule: :data:`MIN_MEAN_EVENTS` events, and :data:`MIN_CLASS_EVENTS` in every
    class the metric averages over (macro precision: every predicted class; macro recall, balanced
    accuracy, weighted F1: every true class; Matthews and kappa: every class, as truth and as
    prediction, that occurs at all); None otherwise or where the metric is undefined.

    >>> lo, hi = matrix_interval([[40, 5, 5], [4, 30, 6], [3, 7, 20]], "cohen_kappa")
    >>> round(lo, 3), round(hi, 3)
    (0.479, 0.728)
    """
    if metric not in MATRIX_INTERVALS:
        raise ValueError(f"metric must be one of {', '.join(MATRIX_INTERVALS)}; got {metric!r:.40}")
    z = z_value(confidence)
    c = np.asarray(matrix, dtype=np.float64)
    n = float(c.sum())
    if not n >= MIN_MEAN_EVENTS:
        return None
    rows, cols = c.sum(axis=1), c.sum(axis=0)
    if metric == "macro_precision":
        margins = cols[cols > 0]
    elif metric in ("matthews_corrcoef", "cohen_kappa"):
        seen = (rows > 0) | (cols > 0)
        margins = np.concatenate([rows[seen], cols[seen]])
    else:
        margins = rows[rows > 0]
    smallest = float(margins.min()) if len(margins) else 0.0
    if smallest < MIN_CLASS_EVENTS:
        return None
    p = c / n
    smoothed = c + JEFFREYS * (rows > 0)[:, None]
    q = smoothed / float(smoothed.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        value, _, signed = matrix_value_gradient(p, metric)
        _, g, _ = matrix_value_gradient(q, metric)
    if not (math.isfinite(value) and np.isfinite(g).all()):
        return None
    var = max(float((g * g * q).sum()) - float((g * q).sum()) ** 2, 0.0) / n
    t = float(t_values(z, [smallest - 1.0])[0])
    edge = 0.5 / n
    if signed:
        v = min(max(value, -1.0 + edge), 1.0 - edge)
        half = t * math.sqrt(var) / (1.0 - v * v)
        lo, hi = math.tanh(math.atanh(v) - half), math.tanh(math.atanh(v) + half)
    else:
        v = min(max(value, edge), 1.0 - edge)
        half = t * math.sqrt(var) / (v * (1.0 - v))
        centre = math.log(v / (1.0 - v))
        lo, hi = 1.0 / (1.0 + math.exp(half - centre)), 1.0 / (1.0 + math.exp(-(centre + half)))
    return min(lo, value), max(hi, value)


# ---------------------------------------------------------------------------- changes
def _normal_sf(x: np.ndarray) -> np.ndarray:
    """``1 - Phi(x)`` for ``x >= 0`` (``erfc(x / sqrt 2) / 2``, elementwise through ``math.erfc``)."""
    return np.array([math.erfc(v / math.sqrt(2.0)) / 2.0 for v in x.tolist()], dtype=np.float64)


def differences(value: Any, low: Any, high: Any, baseline: Any, baseline_low: Any, baseline_high: Any,
                z: Any) -> dict[str, np.ndarray]:
    """Two-sample comparisons of metrics with baselines (arrays) by MOVER (Newcombe 1998 method 10,
    Zou & Donner 2008), which keeps each side's asymmetric interval: ``d = value - baseline``,
    ``low_d = d - sqrt((value - low)^2 + (baseline_high - baseline)^2)``, ``high_d = d +
    sqrt((high - value)^2 + (baseline - baseline_low)^2)`` (a baseline whose interval is nan counts
    as exact). The two-sided p-value reads the standard error from the side of the interval facing
    0 (``se = (d - low_d) / z`` for ``d >= 0``): ``p = 2 (1 - Phi(|d| / se))``, so ``p < 1 -
    confidence`` exactly when the interval excludes 0 (1 where ``d = se = 0``, 0 where only
    ``se = 0``). ``z``: one normal quantile, or one per comparison."""
    value, low, high, baseline, baseline_low, baseline_high = _rows(
        value, low, high, baseline, baseline_low, baseline_high)
    exact = np.isnan(baseline_low) | np.isnan(baseline_high)
    b_down = np.where(exact, 0.0, baseline - baseline_low)
    b_up = np.where(exact, 0.0, baseline_high - baseline)
    d = value - baseline
    down = np.hypot(value - low, b_up)
    up = np.hypot(high - value, b_down)
    se = np.where(d >= 0, down, up) / z
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(se > 0, np.abs(d) / np.where(se > 0, se, 1.0), np.where(d == 0, 0.0, np.inf))
    p = np.minimum(2.0 * _normal_sf(stat), 1.0)
    return {"difference": d, "low": d - down, "high": d + up, "p_value": p}


def compare(value: float, interval: Pair, baseline: float, baseline_interval: Pair | None,
                    confidence: float = 0.95) -> dict[str, Any]:
    """:func:`differences` of one metric with its baseline: ``{"baseline", "difference",
    "interval", "p_value"}`` (a snapshot's ``changes`` entry without ``significant``).

    >>> r = compare(0.80, (0.76, 0.84), 0.90, None)
    >>> round(r["difference"], 2), r["p_value"] < 1e-6
    (-0.1, True)
    """
    bl, bh = (math.nan, math.nan) if baseline_interval is None else baseline_interval
    out = differences(value, interval[0], interval[1], baseline, bl, bh, z_value(confidence))
    return {"baseline": baseline, "difference": float(out["difference"][0]),
            "interval": [float(out["low"][0]), float(out["high"][0])], "p_value": float(out["p_value"][0])}


def benjamini_hochberg(p_values: Any, fdr: float = 0.05) -> np.ndarray:
    """Benjamini-Hochberg (1995) at false discovery rate ``fdr``: the tests with ``p <= k fdr / m``
    for the largest ``k`` with ``p_(k) <= k fdr / m`` (``m`` tests) are significant.

    >>> benjamini_hochberg([0.001, 0.02, 0.04, 0.5], 0.05).tolist()
    [True, True, False, False]
    """
    p = np.asarray(p_values, dtype=np.float64).ravel()
    m = len(p)
    if not m:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p, kind="stable")
    passed = p[order] <= fdr * np.arange(1, m + 1) / m
    out = np.zeros(m, dtype=bool)
    if passed.any():
        k = int(np.flatnonzero(passed)[-1])
        out[order[: k + 1]] = True
    return out


# ---------------------------------------------------------------------------- binary windows
#: the intervals of a binary window (``BinaryMonitor``'s snapshot), in snapshot order
BINARY_INTERVALS = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "specificity",
                    "matthews_corrcoef", "roc_auc", "log_loss", "brier_score", "positive_rate",
                    "predicted_positive_rate")
#: the metrics of a binary confusion matrix :func:`confusion_intervals` gives
CONFUSION_INTERVALS = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "specificity",
                       "matthews_corrcoef", "positive_rate")


def confusion_intervals(tn: Any, fp: Any, fn: Any, tp: Any, z: float, squares: Any = None,
                        more: tuple[Any, Any] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every interval of :data:`CONFUSION_INTERVALS` for rows of binary cell counts (nan where the
    minimum rule leaves none). ``squares``: rows ``(tn, fp, fn, tp)`` of the cells' ``sum w^2``
    for weighted cells (``tn`` ... their summed weights): each interval on Kish pseudo-counts
    (:func:`kish_factor`; the module docstring). ``more`` (unit weights): ``(k, n)`` of one more
    proportion per row, whose :func:`wilson_many` interval comes back under ``"more"`` (computed
    with the others: elementwise, so as if alone)."""
    if squares is not None:
        return _weighted_confusion_intervals(tn, fp, fn, tp, squares, z)
    tn, fp, fn, tp = _rows(tn, fp, fn, tp)
    n = tn + fp + fn + tp
    pos, neg = tp + fn, tn + fp
    # the seven Wilson intervals in one call (rows stacked; minimum MIN_EVENTS, or
    # MIN_CLASS_EVENTS for balanced accuracy's two): accuracy, precision, recall, specificity,
    # positive rate, F1's q, balanced accuracy's recall and specificity (then ``more``'s)
    rows = len(n)
    k_rows, n_rows = [tn + tp, tp, tp, tn, pos, tp, tp, tn], [n, tp + fp, pos, neg, n, tp + fp + fn, pos, neg]
    minima = [MIN_EVENTS] * 6 + [MIN_CLASS_EVENTS] * 2
    if more is not None:
        more_k, more_n = _rows(*more)
        k_rows.append(more_k)
        n_rows.append(more_n)
        minima.append(MIN_EVENTS)
    minimum = np.repeat(np.array(minima, dtype=np.float64), rows)
    lo, hi = wilson_many(np.concatenate(k_rows), np.concatenate(n_rows), z, minimum)
    accuracy, precision, recall, specificity, rate, q, *balanced = _halves(lo, hi, len(minima))
    if more is not None:
        balanced, extra = balanced[:2], {"more": balanced[2]}
    else:
        extra = {}
    return {
        "accuracy": accuracy,
        "balanced_accuracy": _balanced_of(tn, fp, fn, tp, balanced),
        "precision": precision,
        "recall": recall,
        "f1": _f1_of(*q),
        "specificity": specificity,
        "matthews_corrcoef": mcc_intervals(tn, fp, fn, tp, z),
        "positive_rate": rate,
        **extra,
    }


def _weighted_confusion_intervals(tn: Any, fp: Any, fn: Any, tp: Any, squares: Any,
                                  z: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """:func:`confusion_intervals` of weighted cells: a proportion's cells scaled by its
    denominator's :func:`kish_factor`, balanced accuracy each class by its own, Matthews the
    whole matrix by one (its minimum rule on each margin's own effective size: the whole
    matrix's factor overstates a margin of a few heavy events)."""
    tn, fp, fn, tp = _rows(tn, fp, fn, tp)
    q = np.asarray(squares, dtype=np.float64).reshape(-1, 4)
    qtn, qfp, qfn, qtp = q[:, 0], q[:, 1], q[:, 2], q[:, 3]

    def prop(k: np.ndarray, cells: tuple, cell_squares: tuple) -> tuple[np.ndarray, np.ndarray]:
        n = sum(cells)
        f = kish_factor(n, sum(cell_squares))
        return wilson_many(k * f, n * f, z)

    n, qn = tn + fp + fn + tp, qtn + qfp + qfn + qtp
    f_all = kish_factor(n, qn)
    f_pos, f_neg = kish_factor(tp + fn, qtp + qfn), kish_factor(tn + fp, qtn + qfp)
    f_q = kish_factor(tp + fp + fn, qtp + qfp + qfn)
    margins = [(tp + fn, qtp + qfn), (tn + fp, qtn + qfp), (tp + fp, qtp + qfp), (tn + fn, qtn + qfn)]
    with np.errstate(invalid="ignore", divide="ignore"):
        smallest = np.min([m * kish_factor(m, q) for m, q in margins], axis=0)
    mcc_lo, mcc_hi = mcc_intervals(tn * f_all, fp * f_all, fn * f_all, tp * f_all, z)
    mcc_ok = smallest >= MIN_CLASS_EVENTS
    return {
        "accuracy": prop(tn + tp, (tn, fp, fn, tp), (qtn, qfp, qfn, qtp)),
        "balanced_accuracy": balanced_accuracy_intervals(tn * f_neg, fp * f_neg, fn * f_pos, tp * f_pos, z),
        "precision": prop(tp, (tp, fp), (qtp, qfp)),
        "recall": prop(tp, (tp, fn), (qtp, qfn)),
        "f1": f1_intervals(tp * f_q, fp * f_q, fn * f_q, z),
        "specificity": prop(tn, (tn, fp), (qtn, qfp)),
        "matthews_corrcoef": (np.where(mcc_ok, mcc_lo, np.nan), np.where(mcc_ok, mcc_hi, np.nan)),
        "positive_rate": prop(tp + fn, (tn, fp, fn, tp), (qtn, qfp, qfn, qtp)),
    }


def interval_record(names: Sequence[str], columns: dict[str, tuple[np.ndarray, np.ndarray]] | None, row: int,
                    confidence: float) -> dict[str, Any]:
    """``{"intervals": {"confidence": c, name: [low, high] | None, ...}, "insufficient": [...]}`` of
    one window (``row``) of the interval columns, in the order of ``names`` (``columns`` None:
    every interval None)."""
    out: dict[str, Any] = {"confidence": confidence}
    missing = []
    for name in names:
        if columns is None:
            out[name] = None
            missing.append(name)
            continue
        lo, hi = columns[name]
        a, b = float(lo[row]), float(hi[row])
        if math.isnan(a) or math.isnan(b):
            out[name] = None
            missing.append(name)
        else:
            out[name] = [a, b]
    return {"intervals": out, "insufficient": missing}


def score_interval_columns(starts: Any, lo: Any, hi: Any, neg: Any, pos: Any, auc_low: Any, auc_high: Any,
                           log_loss: Any, brier: Any, z: float,
                           class_squares: Any = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``roc_auc`` (:func:`auc_intervals`), ``log_loss`` and ``brier_score`` (:func:`mean_intervals`
    with the second moments of :func:`level_second_moments`) of many windows given as levels (see
    :func:`binary_interval_columns`). Log loss and Brier score are means over a mixture of the two
    classes' terms: both classes need :data:`MIN_CLASS_EVENTS` events and the rarer one sets the
    degrees of freedom. ``class_squares``: per window ``(sum w^2 of the negatives, of the
    positives)`` of weighted windows: ROC AUC on each class's Kish pseudo-counts, the means on the
    window's (:func:`kish_factor`)."""
    starts = np.asarray(starts, dtype=np.int64)
    neg, pos = _rows(neg, pos)
    total_n, total_p = np.add.reduceat(neg, starts), np.add.reduceat(pos, starts)
    if class_squares is not None:
        q = np.asarray(class_squares, dtype=np.float64).reshape(-1, 2)
        sizes = np.diff(np.append(starts, len(neg)))
        win = np.repeat(np.arange(len(starts)), sizes)
        f_neg, f_pos = kish_factor(total_n, q[:, 0]), kish_factor(total_p, q[:, 1])
        f_all = kish_factor(total_n + total_p, q[:, 0] + q[:, 1])
        auc = auc_intervals(starts, neg * f_neg[win], pos * f_pos[win], auc_low, auc_high, z)
        minority = np.minimum(total_n * f_neg, total_p * f_pos)
        df = np.where(minority >= MIN_CLASS_EVENTS, minority - 1.0, np.nan)
        n_eff = (total_n + total_p) * f_all
        need = (minority >= MIN_CLASS_EVENTS) & (n_eff >= MIN_MEAN_EVENTS)
        second_log, second_brier = level_second_moments(lo, hi, neg, pos, starts, need)
        return {"roc_auc": auc,
                "log_loss": mean_intervals(log_loss, second_log * f_all, n_eff, z, df=df),
                "brier_score": mean_intervals(brier, second_brier * f_all, n_eff, z, 0.0, 1.0, df=df)}
    minority = np.minimum(total_n, total_p)
    df = np.where(minority >= MIN_CLASS_EVENTS, minority - 1.0, np.nan)
    need = (minority >= MIN_CLASS_EVENTS) & (total_n + total_p >= MIN_MEAN_EVENTS)  # (the others get none)
    second_log, second_brier = level_second_moments(lo, hi, neg, pos, starts, need)
    # the two means in one call (rows stacked: elementwise, so each as if alone)
    rows, n = len(starts), total_n + total_p
    log_loss, brier = _rows(log_loss, brier)
    lows, highs = mean_intervals(np.concatenate((np.broadcast_to(log_loss, rows), np.broadcast_to(brier, rows))),
                                 np.concatenate((second_log, second_brier)), np.concatenate((n, n)), z, 0.0,
                                 np.repeat([math.inf, 1.0], rows), df=np.concatenate((df, df)))
    return {"roc_auc": auc_intervals(starts, neg, pos, auc_low, auc_high, z),
            "log_loss": (lows[:rows], highs[:rows]), "brier_score": (lows[rows:], highs[rows:])}


def binary_interval_columns(cells: Any, starts: Any, lo: Any, hi: Any, neg: Any, pos: Any, auc_low: Any,
                            auc_high: Any, log_loss: Any, brier: Any, predictions: Any, predicted_positive: Any,
                            z: float, squares: Any = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every interval of :data:`BINARY_INTERVALS` for many binary windows (one row each):
    ``cells`` rows ``(tn, fp, fn, tp)``; the windows' levels concatenated (``starts``: each
    window's first; ``lo``/``hi`` the scores a level holds, ``neg``/``pos`` its counts); per
    window the guaranteed AUC bounds, log loss and Brier score (nan where undefined), the
    predictions (labelled or not) and those at or above the threshold. The one formula behind
    ``BinaryMonitor.intervals`` and the fleet pass's. Weighted windows: ``squares`` rows of the
    ``sum w^2`` of ``(tn, fp, fn, tp, negatives, positives, predictions)`` (pseudo-counts,
    :func:`kish_factor`); None: unit weights."""
    c = np.asarray(cells, dtype=np.float64).reshape(-1, 4)
    tn, fp, fn, tp = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    if squares is None:
        out = confusion_intervals(tn, fp, fn, tp, z, more=(predicted_positive, predictions))
        out.update(score_interval_columns(starts, lo, hi, neg, pos, auc_low, auc_high, log_loss, brier, z))
        out["predicted_positive_rate"] = out.pop("more")
        return out
    q = np.asarray(squares, dtype=np.float64).reshape(-1, 7)
    out = confusion_intervals(tn, fp, fn, tp, z, q[:, :4])
    out.update(score_interval_columns(starts, lo, hi, neg, pos, auc_low, auc_high, log_loss, brier, z, q[:, 4:6]))
    predictions, predicted_positive = _rows(predictions, predicted_positive)
    f = kish_factor(predictions, q[:, 6])
    out["predicted_positive_rate"] = wilson_many(predicted_positive * f, predictions * f, z)
    return out


def pairs_record(pairs: dict[str, Pair | None], confidence: float) -> dict[str, Any]:
    """:func:`interval_record` of intervals given one by one (``{name: (low, high) | None}``, in order)."""
    out: dict[str, Any] = {"confidence": confidence}
    missing = []
    for name, pair in pairs.items():
        out[name] = None if pair is None else [pair[0], pair[1]]
        if pair is None:
            missing.append(name)
    return {"intervals": out, "insufficient": missing}


#: ``snapshot_line``'s canonical encoder (compact, no NaN)
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def intervals_text(record: dict[str, Any] | None) -> str:
    """The text ``window_line`` inserts after a snapshot's metrics for an intervals record
    (contract section 9): ``,"intervals":{...},"insufficient":[...]`` as ``snapshot_line`` writes
    them, or empty for None."""
    if record is None:
        return ""
    return ',"intervals":' + _JSON.encode(record["intervals"]) + ',"insufficient":' + _JSON.encode(
        record["insufficient"])
