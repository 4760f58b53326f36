"""Score levels of weighted histograms: the common input of the label-free kernels.

A *level* is a distinct score (``exact`` histograms) or a bin of a
:class:`~streammetrics.kernels.binning.LogGridBinning`. The kernels of
:mod:`~streammetrics.kernels.drift`, :mod:`~streammetrics.kernels.calibration` and
:mod:`~streammetrics.kernels.cbpe` take levels in ascending score order with, per level,
the closed interval ``[lo, hi]`` that holds every score of the level (``lo == hi`` for a
distinct score) and one weight per histogram.

:func:`level_bounds` gives the interval of each key: ``lo`` is the smallest score of the
bin (:meth:`Binning.lowest`), ``hi`` the largest score the bin can hold, clamped below the
next level's ``lo`` so that the intervals of consecutive levels never overlap. A score
with key ``k`` always lies in ``[lo(k), hi(k)]`` (tested on every region of the grid).

:func:`common_levels` brings two histograms, possibly on different binnings (exact, or
log grids of different resolutions), onto one: both exact stay exact; otherwise both go
to the coarser of the (nested) log grids, exact scores being mapped to their keys.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from streammetrics.kernels.binning import Binning, LogGridBinning

__all__ = [
    "clamp_bounds",
    "common_binning",
    "common_levels",
    "histogram_arrays",
    "level_bounds",
    "raw_bounds",
    "representative",
    "row_sums",
    "to_binning",
    "to_front",
]

_DBL_MAX = float(np.finfo(np.float64).max)


def _edge(binning: LogGridBinning, up: np.ndarray) -> np.ndarray:
    """Upper edge of the x-bin ``up`` (x-bins are ``(edge(up - 1), edge(up)]``)."""
    with np.errstate(over="ignore"):
        e = (np.maximum(np.asarray(up, dtype=np.int64), 0) << binning.shift).view(np.float64)
    return np.minimum(e, _DBL_MAX)


def level_bounds(binning: Binning, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: closed score intervals of ascending ``keys`` (see the module docstring)."""
    return clamp_bounds(*raw_bounds(binning, keys))


def clamp_bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clamp each ``hi`` below the next level's ``lo`` (ascending levels along the last axis)."""
    hi = hi.copy()
    hi[..., :-1] = np.minimum(hi[..., :-1], np.nextafter(lo[..., 1:], -np.inf))
    return lo, np.maximum(hi, lo)


def raw_bounds(binning: Binning, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`level_bounds` of each key on its own (not clamped by the next level)."""
    keys = np.asarray(keys)
    lo = np.asarray(binning.lowest(keys), dtype=np.float64)
    if binning.exact or not len(keys):
        return lo, lo.copy()
    assert isinstance(binning, LogGridBinning)
    k = keys.astype(np.int64)
    c, half = binning.one_key, binning.half_key
    hi = np.empty(len(k), dtype=np.float64)
    neg = k < 0
    low = (k >= 0) & (k <= half)
    mid = (k > half) & (k <= c)
    high = k > c
    with np.errstate(over="ignore", invalid="ignore"):
        # s < 0: s in [-edge(u), -edge(u - 1)), u = -k
        hi[neg] = -_edge(binning, -k[neg] - 1)
        # 0 <= s < 0.5: s = x in (edge(k - 1), edge(k)]
        hi[low] = _edge(binning, k[low])
        # 0.5 <= s <= 1: s = 1 - x, x in (edge(u - 1), edge(u)], u = c - k
        hi[mid] = 1.0 - _edge(binning, c - k[mid] - 1)
        hi[mid & (k == c)] = 1.0
        # s > 1: s - 1 in (edge(u - 1), edge(u)], u = k - c
        hi[high] = 1.0 + _edge(binning, k[high] - c)
    hi = np.nextafter(hi, np.inf)  # one ulp of slack against the roundings above
    hi[neg] = np.minimum(hi[neg], np.nextafter(0.0, -1.0))
    hi[low] = np.minimum(hi[low], np.nextafter(0.5, 0.0))
    hi[mid] = np.minimum(hi[mid], 1.0)
    hi = np.minimum(hi, _DBL_MAX)
    single = binning.singleton(keys)
    hi[single] = lo[single]
    return lo, np.maximum(hi, lo)


def representative(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A score inside each level (its midpoint): the point estimates of binned kernels put
    every event of a level there, which is one possible arrangement of the events."""
    return lo + (hi - lo) / 2.0


def to_binning(keys: np.ndarray, weights: np.ndarray, src: Binning, dst: Binning) -> tuple[np.ndarray, np.ndarray]:
    """Re-key an ascending histogram ``(keys, weights)`` from ``src`` onto ``dst``: exact
    scores are keyed by ``dst``; log-grid keys are coarsened to ``dst``'s (coarser or equal)
    resolution. Returns ascending distinct keys and summed weights."""
    keys = np.asarray(keys)
    weights = np.asarray(weights, dtype=np.float64)
    if src == dst:
        return keys, weights
    if dst.exact:
        raise ValueError(f"a histogram over {src!r} cannot be made exact")
    assert isinstance(dst, LogGridBinning)
    if src.exact:
        new = dst.keys(np.asarray(keys, dtype=np.float64))
    else:
        assert isinstance(src, LogGridBinning)
        if src.per_octave < dst.per_octave:
            raise ValueError(f"cannot refine {src!r} to {dst!r}")
        new = np.asarray(keys, dtype=np.int64)
        b = src
        while b.per_octave > dst.per_octave:
            new = b.coarsen_keys(new)
            b = b.coarser()
    uniq, inv = np.unique(new, return_inverse=True)
    return uniq, np.bincount(inv.reshape(-1), weights=weights, minlength=len(uniq))


def common_binning(a: Binning, b: Binning) -> Binning:
    """The binning two histograms can both be expressed on (see the module docstring)."""
    if a.exact and b.exact:
        return a
    grids = [x for x in (a, b) if not x.exact]
    return min(grids, key=lambda g: g.per_octave)  # type: ignore[attr-defined]


def common_levels(
    a: tuple[np.ndarray, np.ndarray, Binning], b: tuple[np.ndarray, np.ndarray, Binning]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Binning]:
    """``(keys, wa, wb, binning)``: two ``(keys, weights, binning)`` histograms aligned on the
    union of their keys over :func:`common_binning` (weight 0 where a key is absent)."""
    binning = common_binning(a[2], b[2])
    ka, wa = to_binning(a[0], a[1], a[2], binning)
    kb, wb = to_binning(b[0], b[1], b[2], binning)
    keys = np.union1d(ka, kb)
    out_a = np.zeros(len(keys))
    out_b = np.zeros(len(keys))
    out_a[np.searchsorted(keys, ka)] = wa
    out_b[np.searchsorted(keys, kb)] = wb
    return keys, out_a, out_b, binning


def histogram_arrays(weights: dict[Any, float], binning: Binning) -> tuple[np.ndarray, np.ndarray]:
    """Ascending ``(keys, weights)`` arrays of a ``key -> weight`` dict."""
    dtype = np.float64 if binning.exact else np.int64
    keys = np.fromiter(weights.keys(), dtype=dtype, count=len(weights))
    vals = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    order = np.argsort(keys, kind="stable")
    return keys[order], vals[order]


# ----------------------------------------------------------------------------- rows of levels
# (the vectorised twins of the label-free kernels take many windows' levels as the rows of 2-d
# arrays, row ``i`` holding its ``n[i]`` levels first)
def row_sums(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``np.sum(x[i, :n[i]])`` of each row, bit for bit: numpy's pairwise summation depends on the
    length, so the rows of one length are summed together (``np.sum(axis=1)`` of a row-major block
    sums each row as ``np.sum`` sums it alone)."""
    out = np.zeros(len(x))
    if not len(x):
        return out
    lengths = np.unique(n)
    if len(lengths) == 1:
        m = int(lengths[0])
        return np.sum(x[:, :m], axis=1) if m else out
    for m in lengths.tolist():
        if m:
            rows = np.flatnonzero(n == m)
            out[rows] = np.sum(x[rows, :m], axis=1)
    return out


def to_front(keep: np.ndarray, n: np.ndarray, *rows: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The levels ``keep`` marks in each row (of its first ``n[i]``) moved to the row's front, in
    order: ``(how many per row, the rows of each array)`` (the rows as they are when every level
    is kept)."""
    m = keep.sum(axis=1)
    if (m == n).all():
        return m, list(rows)
    order = np.argsort(~keep, axis=1, kind="stable")
    return m, [np.take_along_axis(r, order, axis=1) for r in rows]
