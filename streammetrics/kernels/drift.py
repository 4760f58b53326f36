"""Drift of a weighted score distribution against a reference one, from histograms.

Inputs are *aligned levels* (see :mod:`streammetrics.kernels.levels`): ascending score
levels, the closed interval ``[lo, hi]`` holding each level's scores, and the weight of
the window (``a``) and of the reference (``b``) at each level (0 where absent). With
``F(x)`` the weighted ECDF ``sum(w_i for s_i <= x) / sum(w_i)``:

* **KS** ``sup_x |F_a(x) - F_b(x)|``: ``scipy.stats.ks_2samp(a, b).statistic`` for unit
  weights (same arithmetic: integral cumulative counts divided by ``n``), the weighted ECDF
  version otherwise.
* **Wasserstein** ``integral |F_a(x) - F_b(x)| dx``: ``scipy.stats.wasserstein_distance``
  (with ``u_weights``/``v_weights``).

Both are exact on distinct-score levels. On bins only the ECDFs at bin boundaries are
known; :func:`ks_bounds` and :func:`wasserstein_bounds` return ``(low, high)`` that hold the
statistic of the underlying events for *any* arrangement of the events inside their bins:
inside level ``k`` each ECDF moves monotonically between its values before and after the
level, so ``|F_a - F_b| <= max(A_k - B_{k-1}, B_k - A_{k-1})`` there, and ``>= A_{k-1} - B_k``
(or ``B_{k-1} - A_k``) when that is positive. The point values :func:`ks` /
:func:`wasserstein` on bins put every event at a score of its level (``lo`` for KS, the
midpoint for Wasserstein): one possible arrangement, so they lie inside the bounds.

**PSI and JS** compare masses on a coarse partition: :func:`quantile_groups` cuts the
levels at the reference's weighted deciles (``n_groups=10``; a cut is placed after the
first level where the reference's cumulative share reaches ``j / n_groups``; tied cuts
collapse, the outer groups extend to -inf/+inf so no window mass falls outside). The cuts
fall on level boundaries, so the window's masses per group are exact even on bins, and
the partition is fixed by the reference, so windows merge. For comparison: Evidently's
``psi``/``jensenshannon`` stat tests cut ``n_bins=30`` equal-width bins over the range of
reference *and* current data together (recomputed on every run, so not mergeable), and
NannyML's Jensen-Shannon method uses ``np.histogram_bin_edges(reference, bins="doane")``
with an extra bin for current data outside the reference range.

* **PSI** ``sum((p_a - p_b) * ln(p_a / p_b))`` over groups, natural log, empty groups'
  shares replaced by ``eps = 1e-4`` (Evidently's rule for zero shares).
* **JS** ``scipy.spatial.distance.jensenshannon(p_b, p_a, base=2)``: the Jensen-Shannon
  *distance* (square root of the divergence) in base 2, in [0, 1]; no epsilon needed
  (``0 * log 0 = 0``).

Levels with no weight in either histogram are ignored. An empty window or reference
(total weight 0) gives nan and an :class:`~streammetrics.core.exceptions.UndefinedMetricWarning`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from streammetrics.core.exceptions import undefined
from streammetrics.kernels.levels import row_sums, to_front

__all__ = [
    "PSI_EPS",
    "ecdfs",
    "group_masses",
    "integral",
    "js",
    "ks",
    "ks_bounds",
    "psi",
    "quantile_cuts",
    "quantile_groups",
    "rows_drift",
    "wasserstein",
    "wasserstein_bounds",
]

#: share given to an empty group by :func:`psi` (Evidently's value)
PSI_EPS = 1e-4
_EPS = float(np.finfo(np.float64).eps)
_KS_EXACT_N = 10000  # scipy's MAX_AUTO_N



def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """``sum(x * y)`` without BLAS (``np.dot`` on a shared machine waits for its threads)."""
    return float(np.sum(np.multiply(x, y)))

def _undefined(name: str) -> float:
    return undefined(f"{name}: the window or the reference has no event with a non-zero weight; "
                     "the statistic is not defined.", 3)


def ecdfs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """ECDFs after each level (None when a side has no weight): the ``cdfs`` that :func:`ks`,
    :func:`ks_bounds`, :func:`wasserstein` and :func:`wasserstein_bounds` take from a caller
    computing several of them (each computes them itself without it)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ta, tb = float(a.sum()), float(b.sum())
    if not (ta > 0 and tb > 0):
        return None
    return np.cumsum(a) / ta, np.cumsum(b) / tb


def integral(x: np.ndarray) -> bool:
    """Whether every weight is an integer (events counted)."""
    x = np.asarray(x, dtype=np.float64)
    return bool(np.all(x == np.floor(x)))


def ks(a: np.ndarray, b: np.ndarray, cdfs: Any = False) -> float:
    """``max |F_a - F_b|`` at the levels (scipy's ``ks_2samp`` statistic on distinct scores:
    ``max(clip(-min(d), 0, 1), max(d))`` with ``d = F_a - F_b``; when every level's weight
    is an integer - counts - and both totals are at most 10000, rounded to a multiple of
    ``1 / lcm(n_a, n_b)`` as ``ks_2samp``'s exact mode does; weights such as 0.5 summing to
    an integer are not counts and are not rounded). ``cdfs``: :func:`ecdfs` of ``a, b`` when
    the caller has it."""
    if cdfs is False:
        cdfs = ecdfs(a, b)
    if cdfs is None:
        return _undefined("KS")
    d = cdfs[0] - cdfs[1]
    return _ks_of(np.min(d), np.max(d), float(np.sum(a)), float(np.sum(b)), lambda: integral(a) and integral(b))


def _ks_of(low: Any, high: Any, na: float, nb: float, counts: Any) -> float:
    """:func:`ks` from ``min(d)``, ``max(d)`` and the totals (``counts()``: every weight an integer)."""
    # a distance between two CDFs is at most 1; weighted cumulative sums can round past it
    stat = min(1.0, float(max(np.clip(-low, 0, 1), high)))
    if (max(na, nb) <= _KS_EXACT_N and na.is_integer() and nb.is_integer()
            and counts()):  # counts, not weights summing to an integer
        # ks_2samp's exact mode (both sizes <= 10000) snaps d to a multiple of 1 / lcm(n1, n2)
        n1, n2 = int(na), int(nb)
        lcm = (n1 // math.gcd(n1, n2)) * n2
        stat = int(np.round(stat * lcm)) * 1.0 / lcm
    return stat


def ks_bounds(a: np.ndarray, b: np.ndarray, singleton: np.ndarray, cdfs: Any = False) -> tuple[float, float]:
    """``(low, high)`` around the KS statistic of the events behind binned levels
    (``singleton[k]``: level ``k`` holds one distinct score, so its inside is known)."""
    if cdfs is False:
        cdfs = ecdfs(a, b)
    if cdfs is None:
        return _undefined("KS"), math.nan
    fa, fb = cdfs
    d = fa - fb
    low = float(np.max(np.abs(d)))
    slack = (4 * len(d) + 32) * _EPS
    singleton = np.asarray(singleton, dtype=bool)
    if singleton.all():  # (every level's inside known: the statistic itself)
        return max(0.0, low - slack), min(1.0, max(low, 0.0) + slack)
    pa = np.concatenate(([0.0], fa[:-1]))
    pb = np.concatenate(([0.0], fb[:-1]))
    inside = np.maximum(fa - pb, fb - pa)
    inside = np.where(singleton, 0.0, inside)
    high = max(low, float(np.max(inside)))
    return max(0.0, low - slack), min(1.0, high + slack)


def wasserstein(values: np.ndarray, a: np.ndarray, b: np.ndarray, cdfs: Any = False) -> float:
    """``sum(|F_a - F_b| * diff(values))``: ``scipy.stats.wasserstein_distance`` on
    distinct ascending ``values`` (on bins, pass :func:`levels.representative`)."""
    if cdfs is False:
        cdfs = ecdfs(a, b)
    if cdfs is None:
        return _undefined("Wasserstein distance")
    keep = (np.asarray(a) > 0) | (np.asarray(b) > 0)
    values = np.asarray(values, dtype=np.float64)[keep]
    fa, fb = cdfs[0][keep], cdfs[1][keep]
    return float(_dot(np.abs(fa[:-1] - fb[:-1]), np.diff(values)))


def wasserstein_bounds(
    lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray, cdfs: Any = False
) -> tuple[float, float]:
    """``(low, high)`` around the Wasserstein distance of the events behind levels whose
    scores lie in ``[lo, hi]`` (non-overlapping, ascending; exact levels have lo == hi)."""
    if cdfs is False:
        cdfs = ecdfs(a, b)
    if cdfs is None:
        return _undefined("Wasserstein distance"), math.nan
    keep = (np.asarray(a) > 0) | (np.asarray(b) > 0)
    lo = np.asarray(lo, dtype=np.float64)[keep]
    hi = np.asarray(hi, dtype=np.float64)[keep]
    fa, fb = cdfs[0][keep], cdfs[1][keep]
    slack = (4 * len(lo) + 32) * _EPS
    with np.errstate(over="ignore", invalid="ignore"):
        gaps = lo[1:] - hi[:-1]  # F_a, F_b constant between levels
        between = float(_dot(np.abs(fa[:-1] - fb[:-1]), gaps))
        if np.array_equal(lo, hi):  # (distinct scores: nothing inside a level)
            return max(0.0, (between + 0.0) * (1 - slack)), (between + 0.0) * (1 + slack)
        width = hi - lo
    pa = np.concatenate(([0.0], fa[:-1]))
    pb = np.concatenate(([0.0], fb[:-1]))
    with np.errstate(over="ignore", invalid="ignore"):
        up_in = np.maximum(np.maximum(fa - pb, fb - pa), 0.0)
        low_in = np.maximum(np.maximum(pa - fb, pb - fa), 0.0)
        high = between + float(_dot(up_in, width))
        low = between + float(_dot(low_in, width))
    return max(0.0, low * (1 - slack)), high * (1 + slack)


def quantile_groups(b: np.ndarray, n_groups: int = 10) -> np.ndarray:
    """Group index (0..G-1) of each level: cuts after the first level where the reference
    weights ``b`` reach each ``j / n_groups`` of their total (duplicate cuts dropped)."""
    if type(n_groups) is not int or n_groups < 1:
        raise ValueError(f"n_groups must be a positive int, got {n_groups!r}")
    b = np.asarray(b, dtype=np.float64)
    total = float(b.sum())
    if not total > 0 or not len(b):
        return np.zeros(len(b), dtype=np.int64)
    cuts = quantile_cuts(b, n_groups)
    cuts = cuts[cuts < len(b) - 1]
    # level k belongs to the group of the number of cuts strictly before it
    return np.searchsorted(cuts, np.arange(len(b)), side="left")


def quantile_cuts(b: np.ndarray, n_groups: int) -> np.ndarray:
    """The distinct levels after which :func:`quantile_groups` cuts (a cut at the last level kept)."""
    share = np.cumsum(b) / float(b.sum())
    targets = np.arange(1, n_groups) / n_groups
    return np.unique(np.searchsorted(share, targets - 1e-12, side="left"))


def group_masses(weights: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Summed weight per group."""
    n = int(groups.max()) + 1 if len(groups) else 0
    return np.bincount(groups, weights=np.asarray(weights, dtype=np.float64), minlength=n)


def psi(a_mass: np.ndarray, b_mass: np.ndarray, eps: float = PSI_EPS) -> float:
    """Population stability index ``sum((p_a - p_b) * ln(p_a / p_b))`` of group masses,
    zero shares replaced by ``eps``."""
    ta, tb = float(np.sum(a_mass)), float(np.sum(b_mass))
    if not (ta > 0 and tb > 0):
        return _undefined("PSI")
    pa = np.asarray(a_mass, dtype=np.float64) / ta
    pb = np.asarray(b_mass, dtype=np.float64) / tb
    pa = np.where(pa == 0, eps, pa)
    pb = np.where(pb == 0, eps, pb)
    return float(np.sum((pa - pb) * np.log(pa / pb)))


def _rel_entr(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(x / y), 0.0)


def js(a_mass: np.ndarray, b_mass: np.ndarray, base: float = 2.0) -> float:
    """``scipy.spatial.distance.jensenshannon(b_mass, a_mass, base)``: the square root of
    ``(KL(p || m) + KL(q || m)) / 2 / ln(base)`` with ``m = (p + q) / 2``."""
    p = np.asarray(b_mass, dtype=np.float64)
    q = np.asarray(a_mass, dtype=np.float64)
    tp, tq = float(p.sum()), float(q.sum())
    if not (tp > 0 and tq > 0):
        return _undefined("Jensen-Shannon distance")
    p = p / tp
    q = q / tq
    m = (p + q) / 2.0
    d = float(np.sum(_rel_entr(p, m)) + np.sum(_rel_entr(q, m)))
    d /= math.log(base)
    return math.sqrt(max(d, 0.0) / 2.0)


# ----------------------------------------------------------------------------- many windows at once
def _shifted(x: np.ndarray) -> np.ndarray:
    """Each row's values one level later (0 first): the ECDF before each level."""
    out = np.zeros_like(x)
    out[:, 1:] = x[:, :-1]
    return out


def rows_drift(values: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None, a: np.ndarray, b: np.ndarray,
               singleton: np.ndarray | None, n: np.ndarray, a_mass: np.ndarray, b_mass: np.ndarray,
               groups: np.ndarray) -> list[dict[str, float]]:
    """The vectorised twin of :func:`ks`, :func:`ks_bounds`, :func:`wasserstein`,
    :func:`wasserstein_bounds`, :func:`psi` and :func:`js` for many windows of **count** weights
    (every ``a`` and ``b`` an integer: the sums are exact in any order) against one reference, each
    row a window's aligned levels (the first ``n[i]`` of row ``i``; past them ``a = b = 0``), with
    its group masses (the first ``groups[i]`` of ``a_mass[i]``, ``b_mass[i]``): one dict per row of
    ``drift_ks``, ``drift_ks_low``, ... as the scalar functions give them, bit for bit. Each row
    needs some weight on both sides. ``lo``, ``hi`` and ``singleton`` None: distinct scores (each
    level's interval its score ``values``, nothing unknown inside a level: the bounds are the
    statistics, as the scalar functions find)."""
    cols = np.arange(a.shape[1])
    valid = cols < n[:, None]
    ta, tb = a.sum(axis=1), b.sum(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        fa = np.cumsum(a, axis=1) / ta[:, None]
        fb = np.cumsum(b, axis=1) / tb[:, None]
        d = fa - fb
        d_min = np.where(valid, d, np.inf).min(axis=1)
        d_max = np.where(valid, d, -np.inf).max(axis=1)
        low_ks = np.where(valid, np.abs(d), -np.inf).max(axis=1)
        keep = ((a > 0) | (b > 0)) & valid
        if singleton is None or lo is None or hi is None:
            inside = np.zeros(len(a))
            m, (values, fa, fb) = to_front(keep, n, values, fa, fb)
            step = np.abs(fa[:, :-1] - fb[:, :-1])
            w_point = row_sums(np.multiply(step, np.diff(values, axis=1)), m - 1)
            w_high = w_low = w_point + 0.0
        else:
            inside = np.maximum(fa - _shifted(fb), fb - _shifted(fa))
            inside = np.where(singleton | ~valid, np.where(valid, 0.0, -np.inf), inside).max(axis=1)
            m, (values, lo, hi, fa, fb) = to_front(keep, n, values, lo, hi, fa, fb)
            step = np.abs(fa[:, :-1] - fb[:, :-1])
            w_point = row_sums(np.multiply(step, np.diff(values, axis=1)), m - 1)
            pa, pb = _shifted(fa), _shifted(fb)
            between = row_sums(np.multiply(step, lo[:, 1:] - hi[:, :-1]), m - 1)
            width = hi - lo
            up_in = np.maximum(np.maximum(fa - pb, fb - pa), 0.0)
            low_in = np.maximum(np.maximum(pa - fb, pb - fa), 0.0)
            w_high = between + row_sums(np.multiply(up_in, width), m)
            w_low = between + row_sums(np.multiply(low_in, width), m)
        # PSI and JS on the group masses
        pa_m = a_mass / a_mass.sum(axis=1)[:, None]
        pb_m = b_mass / b_mass.sum(axis=1)[:, None]
        m_m = (pb_m + pa_m) / 2.0
        js_p, js_q = row_sums(_rel_entr(pb_m, m_m), groups), row_sums(_rel_entr(pa_m, m_m), groups)
        pa_m = np.where(pa_m == 0, PSI_EPS, pa_m)
        pb_m = np.where(pb_m == 0, PSI_EPS, pb_m)
        psi_sum = row_sums((pa_m - pb_m) * np.log(pa_m / pb_m), groups)
    log_base = math.log(2.0)
    out = []
    for i in range(len(a)):
        na, nb = float(ta[i]), float(tb[i])
        ks_low, ks_high = float(low_ks[i]), max(float(low_ks[i]), float(inside[i]))
        slack = (4 * int(n[i]) + 32) * _EPS
        w_slack = (4 * int(m[i]) + 32) * _EPS
        js_d = float(js_p[i] + js_q[i]) / log_base
        out.append({
            "drift_ks": _ks_of(d_min[i], d_max[i], na, nb, _true),
            "drift_ks_low": max(0.0, ks_low - slack),
            "drift_ks_high": min(1.0, ks_high + slack),
            "drift_wasserstein": float(w_point[i]),
            "drift_wasserstein_low": max(0.0, float(w_low[i]) * (1 - w_slack)),
            "drift_wasserstein_high": float(w_high[i]) * (1 + w_slack),
            "drift_psi": float(psi_sum[i]),
            "drift_js": math.sqrt(max(js_d, 0.0) / 2.0),
        })
    return out


def _true() -> bool:
    return True
