"""Calibration of binary probability scores from labelled score histograms.

Inputs are levels (see :mod:`streammetrics.kernels.levels`): ascending score intervals
``[lo, hi]`` (``lo == hi`` for a distinct score) with the negative and positive weight at
each level.

**Expected calibration error** as torchmetrics' ``BinaryCalibrationError(n_bins, norm)``
(``_ce_compute``): the confidence of an event is its score, its accuracy its label;
boundaries ``torch.linspace(0, 1, n_bins + 1)`` (reproduced in float64 by
:func:`torch_linspace`), an event goes to bucket ``i`` with ``b[i] <= s < b[i + 1]``
(``torch.bucketize(right=True) - 1``; a score of exactly 1.0 gets bucket ``n_bins`` of its
own, as in torchmetrics), and per bucket ``acc``/``conf`` are the mean label and mean
score and ``prop`` its share of the weight:

* ``l1``: ``sum(|acc - conf| * prop)``; ``max``: ``max |acc - conf|`` (empty buckets count
  0); ``l2``: ``sqrt(sum((acc - conf)**2 * prop))`` (0 when the sum is 0).

Weights generalise torchmetrics' counts (it takes no sample weights). Scores must lie in
[0, 1] (torchmetrics would apply a sigmoid to logits; we refuse them).

With bins the events' scores are known only to lie in their level's interval, and a level
whose interval straddles a bucket boundary may have events on both sides.
:func:`calibration_error_bounds` returns ``(low, high)`` valid for any arrangement: per
bucket, the mean of ``label - score`` lies between the extremes reachable by its sure
events (levels inside the bucket) plus any part of the straddling levels' weight, and the
norms are bounded from those intervals. The point value on bins puts every level's events
at its midpoint (one possible arrangement, so inside the bounds).

**Reliability curve** as ``sklearn.calibration.calibration_curve(y_true, y_prob, n_bins,
strategy)``: ``(prob_true, prob_pred)`` per non-empty bin, bins from
``np.linspace(0, 1, n_bins + 1)`` (``uniform``) or ``np.percentile`` of the scores
(``quantile``, linear interpolation between order statistics, computed from the levels'
integral counts), an event going to bin ``searchsorted(edges[1:-1], s, "left")``. With
non-integral weights the quantile edges are weighted inverted-CDF quantiles. On bins,
:func:`reliability_curve_bounds` bounds each uniform bin's mean label and mean score (and
says which bins certainly hold events).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from streammetrics.core.exceptions import undefined

__all__ = [
    "NORMS",
    "calibration_error",
    "calibration_error_bounds",
    "calibration_error_rows",
    "reliability_curve",
    "reliability_curve_bounds",
    "torch_linspace",
]

NORMS = ("l1", "l2", "max")



def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """``sum(x * y)`` without BLAS (``np.dot`` on a shared machine waits for its threads)."""
    return float(np.sum(np.multiply(x, y)))

def check_bins(n_bins: int, norm: str) -> None:
    if type(n_bins) is not int or n_bins < 1:
        raise ValueError(f"n_bins must be an int >= 1, got {n_bins!r}")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def _levels(lo: Any, hi: Any, neg: Any, pos: Any) -> tuple[np.ndarray, ...]:
    """``lo, hi, neg, pos, neg + pos`` as float arrays; ValueError unless the scores are in [0, 1]."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if len(lo) and (lo.min() < 0.0 or hi.max() > 1.0):
        raise ValueError("scores must be probabilities in [0, 1] for calibration metrics")
    neg, pos = np.asarray(neg, dtype=np.float64), np.asarray(pos, dtype=np.float64)
    return lo, hi, neg, pos, neg + pos


@functools.lru_cache(maxsize=64)
def _linspace(n_bins: int) -> tuple[float, ...]:
    steps = n_bins + 1
    step = Fraction(1.0 / n_bins)  # the float step, exactly
    return tuple(
        float(step * i) if i < steps // 2 else float(1 - step * (steps - 1 - i))
        for i in range(steps)
    )


def torch_linspace(n_bins: int) -> np.ndarray:
    """``torch.linspace(0, 1, n_bins + 1, dtype=float64)`` bit for bit (CPU kernel): with
    ``step = 1 / n_bins`` rounded, ``step * i`` for the first half and ``1 - step * (n_bins - i)``
    with one rounding (a fused multiply-add) for the second half."""
    return np.array(_linspace(n_bins))


def _undefined() -> float:
    return undefined("No event with a non-zero weight: the calibration error is not defined.", 3)


def calibration_error(
    scores: np.ndarray, neg: np.ndarray, pos: np.ndarray, n_bins: int = 15, norm: str = "l1"
) -> float:
    """torchmetrics' binary calibration error of events at ``scores`` (one score per level;
    on bins pass :func:`levels.representative`)."""
    check_bins(n_bins, norm)
    s, _, neg, pos, w = _levels(scores, scores, neg, pos)
    total = float(w.sum())
    if not total > 0:
        return _undefined()
    idx = np.searchsorted(torch_linspace(n_bins), s, side="right") - 1
    count = np.bincount(idx, weights=w, minlength=n_bins + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.nan_to_num(np.bincount(idx, weights=s * w, minlength=n_bins + 1) / count)
        acc = np.nan_to_num(np.bincount(idx, weights=pos, minlength=n_bins + 1) / count)
    prop = count / count.sum()
    if norm == "l1":
        return float(np.sum(np.abs(acc - conf) * prop))
    if norm == "max":
        return float(np.max(np.abs(acc - conf)))
    ce = float(np.sum((acc - conf) ** 2 * prop))
    return math.sqrt(ce) if ce > 0 else 0.0


def calibration_error_rows(
    scores: np.ndarray, neg: np.ndarray, pos: np.ndarray, n: np.ndarray, n_bins: int = 15, norm: str = "l1"
) -> np.ndarray:
    """The vectorised twin of :func:`calibration_error`: of each row's first ``n[i]`` levels, bit
    for bit (nan for a row without weight or with a score outside [0, 1], where it warns or raises)."""
    check_bins(n_bins, norm)
    rows = len(scores)
    valid = np.arange(scores.shape[1]) < n[:, None]
    w = neg + pos
    bad = (((scores < 0.0) | (scores > 1.0)) & valid).any(axis=1) | ~(w.sum(axis=1) > 0)
    nb = n_bins + 1
    idx = np.clip(np.searchsorted(torch_linspace(n_bins), scores, side="right") - 1, 0, n_bins)
    at = (np.arange(rows)[:, None] * nb + np.where(valid, idx, 0)).ravel()  # (padding: weight 0)
    size = rows * nb
    count = np.bincount(at, weights=w.ravel(), minlength=size).reshape(rows, nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.nan_to_num(np.bincount(at, weights=(scores * w).ravel(), minlength=size).reshape(rows, nb) / count)
        acc = np.nan_to_num(np.bincount(at, weights=pos.ravel(), minlength=size).reshape(rows, nb) / count)
        prop = count / count.sum(axis=1)[:, None]
    if norm == "l1":
        out = np.sum(np.abs(acc - conf) * prop, axis=1)
    elif norm == "max":
        out = np.max(np.abs(acc - conf), axis=1)
    else:
        out = np.array([math.sqrt(ce) if ce > 0 else 0.0 for ce in np.sum((acc - conf) ** 2 * prop, axis=1).tolist()])
    return np.where(bad, math.nan, out)


def calibration_error_bounds(
    lo: np.ndarray, hi: np.ndarray, neg: np.ndarray, pos: np.ndarray,
    n_bins: int = 15, norm: str = "l1",
) -> tuple[float, float]:
    """``(low, high)`` around the calibration error of events whose scores lie in their
    level's ``[lo, hi]`` (see the module docstring)."""
    check_bins(n_bins, norm)
    lo, hi, neg, pos, w = _levels(lo, hi, neg, pos)
    total = float(w.sum())
    if not total > 0:
        return _undefined(), math.nan
    edges = torch_linspace(n_bins)
    first = np.searchsorted(edges, lo, side="right") - 1
    last = np.searchsorted(edges, hi, side="right") - 1
    sure = first == last
    nb = n_bins + 1
    # per event, label - score lies in [y - hi, y - lo]: summed over the sure levels
    w_sure = np.bincount(first[sure], weights=w[sure], minlength=nb)
    d_low_sure = np.bincount(first[sure], weights=(pos - w * hi)[sure], minlength=nb)
    d_high_sure = np.bincount(first[sure], weights=(pos - w * lo)[sure], minlength=nb)
    # straddling levels: any part of their weight may fall in each bucket they touch
    w_free = np.zeros(nb)
    v_low = np.full(nb, np.inf)  # most negative per-unit value of label - score
    v_high = np.full(nb, -np.inf)
    for k in np.flatnonzero(~sure):
        span = slice(first[k], last[k] + 1)
        w_free[span] += w[k]
        if neg[k] > 0:
            v_low[span] = np.minimum(v_low[span], -hi[k])
            v_high[span] = np.maximum(v_high[span], -lo[k])
        if pos[k] > 0:
            v_low[span] = np.minimum(v_low[span], 1.0 - hi[k])
            v_high[span] = np.maximum(v_high[span], 1.0 - lo[k])
    d_lo = np.empty(nb)
    d_hi = np.empty(nb)
    may_be_empty = w_sure <= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        m_lo = d_low_sure / w_sure
        m_hi = d_high_sure / w_sure
        f_lo = (d_low_sure + w_free * v_low) / (w_sure + w_free)
        f_hi = (d_high_sure + w_free * v_high) / (w_sure + w_free)
    has_free = w_free > 0
    d_lo = np.where(may_be_empty, np.where(has_free, v_low, 0.0), np.where(has_free, np.minimum(m_lo, f_lo), m_lo))
    d_hi = np.where(may_be_empty, np.where(has_free, v_high, 0.0), np.where(has_free, np.maximum(m_hi, f_hi), m_hi))
    abs_hi = np.maximum(np.abs(d_lo), np.abs(d_hi))
    abs_lo = np.where((d_lo <= 0) & (d_hi >= 0), 0.0, np.minimum(np.abs(d_lo), np.abs(d_hi)))
    abs_lo = np.where(may_be_empty, 0.0, abs_lo)  # a bucket that may be empty counts 0
    slack = 1e-12
    if norm == "max":
        return max(0.0, float(abs_lo.max()) - slack), min(1.0, float(abs_hi.max()) + slack)
    w_min, w_max = w_sure / total, (w_sure + w_free) / total
    if norm == "l1":
        low, high = float(_dot(abs_lo, w_min)), float(_dot(abs_hi, w_max))
        return max(0.0, low - slack), min(1.0, high + slack)
    low, high = float(_dot(abs_lo**2, w_min)), float(_dot(abs_hi**2, w_max))
    return max(0.0, math.sqrt(max(low, 0.0)) - slack), min(1.0, math.sqrt(high) + slack)


def _percentile_counts(values: np.ndarray, counts: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.percentile(events, q)`` (method "linear") of ``values`` repeated ``counts`` times."""
    n = int(counts.sum())
    cum = np.cumsum(counts)
    qq = np.true_divide(q, 100)
    virtual = (n - 1) * qq
    prev = np.floor(virtual)
    gamma = virtual - prev
    prev_i = np.clip(prev.astype(np.int64), 0, n - 1)
    next_i = np.clip(prev_i + 1, 0, n - 1)
    a = values[np.searchsorted(cum, prev_i, side="right")]
    b = values[np.searchsorted(cum, next_i, side="right")]
    diff = b - a
    out = a + diff * gamma
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), out)


def _weighted_quantiles(values: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inverted-CDF weighted quantiles: the smallest value whose cumulative share >= q."""
    share = np.cumsum(w) / w.sum()
    idx = np.searchsorted(share, q, side="left")
    return values[np.clip(idx, 0, len(values) - 1)]


def reliability_curve(
    scores: np.ndarray, neg: np.ndarray, pos: np.ndarray, n_bins: int = 5, strategy: str = "uniform"
) -> tuple[np.ndarray, np.ndarray]:
    """``(prob_true, prob_pred)`` as ``sklearn.calibration.calibration_curve`` on the events
    at ``scores`` (ascending, one per level); see the module docstring."""
    s, _, neg, pos, w = _levels(scores, scores, neg, pos)
    keep = w > 0
    s, neg, pos, w = s[keep], neg[keep], pos[keep], w[keep]
    if not len(s):
        raise ValueError("the reliability curve needs at least one event with a non-zero weight")
    if strategy == "quantile":
        q = np.linspace(0, 1, n_bins + 1) * 100
        if np.all(w == np.floor(w)):
            bins = _percentile_counts(s, w, q)
        else:
            bins = _weighted_quantiles(s, w, q / 100)
    elif strategy == "uniform":
        bins = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    ids = np.searchsorted(bins[1:-1], s)
    sums = np.bincount(ids, weights=s * w, minlength=n_bins)
    true = np.bincount(ids, weights=pos, minlength=n_bins)
    total = np.bincount(ids, weights=w, minlength=n_bins)
    nz = total != 0
    return true[nz] / total[nz], sums[nz] / total[nz]


def reliability_curve_bounds(
    lo: np.ndarray, hi: np.ndarray, neg: np.ndarray, pos: np.ndarray, n_bins: int = 5
) -> dict[str, np.ndarray]:
    """Bounds on ``calibration_curve(strategy="uniform")`` of events whose scores lie in
    their level's ``[lo, hi]``, per curve bin that may hold events: ``bin`` (index),
    ``sure`` (it certainly holds events, so the curve has a point for it), and
    ``true_low``/``true_high`` (mean label), ``pred_low``/``pred_high`` (mean score). A level
    straddling bin edges may put any part of its weight in each bin it touches; equal low
    and high when no level straddles an edge (pred bounds then span the levels' widths)."""
    lo, hi, neg, pos, w = _levels(lo, hi, neg, pos)
    keep = w > 0
    lo, hi, neg, pos, w = lo[keep], hi[keep], neg[keep], pos[keep], w[keep]
    if not len(w):
        raise ValueError("the reliability curve needs at least one event with a non-zero weight")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    inner = edges[1:-1]
    first = np.searchsorted(inner, lo)
    last = np.searchsorted(inner, hi)
    sure = first == last
    ws = np.bincount(first[sure], weights=w[sure], minlength=n_bins)
    ps = np.bincount(first[sure], weights=pos[sure], minlength=n_bins)
    s_lo = np.bincount(first[sure], weights=(w * lo)[sure], minlength=n_bins)
    s_hi = np.bincount(first[sure], weights=(w * hi)[sure], minlength=n_bins)
    nf = np.zeros(n_bins)
    pf = np.zeros(n_bins)
    v_lo = np.full(n_bins, np.inf)
    v_hi = np.full(n_bins, -np.inf)
    for k in np.flatnonzero(~sure):
        for j in range(first[k], last[k] + 1):
            nf[j] += neg[k]
            pf[j] += pos[k]
            v_lo[j] = min(v_lo[j], max(lo[k], edges[j]))
            v_hi[j] = max(v_hi[j], min(hi[k], edges[j + 1]))
    f = nf + pf
    present = (ws > 0) | (f > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        true_low = np.where(ws > 0, ps / (ws + nf), np.where(nf > 0, 0.0, 1.0))
        true_high = np.where(ws > 0, (ps + pf) / (ws + pf), np.where(pf > 0, 1.0, 0.0))
        m_lo, m_hi = s_lo / ws, s_hi / ws
        pred_low = np.where(ws > 0, np.where(f > 0, np.minimum(m_lo, (s_lo + f * v_lo) / (ws + f)), m_lo), v_lo)
        pred_high = np.where(ws > 0, np.where(f > 0, np.maximum(m_hi, (s_hi + f * v_hi) / (ws + f)), m_hi), v_hi)
    idx = np.flatnonzero(present)
    slack = 1e-12
    return {
        "bin": idx,
        "sure": ws[idx] > 0,
        "true_low": np.maximum(true_low[idx] - slack, 0.0),
        "true_high": np.minimum(true_high[idx] + slack, 1.0),
        "pred_low": np.maximum(pred_low[idx] - slack, 0.0),
        "pred_high": np.minimum(pred_high[idx] + slack, 1.0),
    }
