"""Drift kernels against scipy (exact levels) and bound checks on binned levels."""
from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.stats import ks_2samp, wasserstein_distance

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import drift
from streammetrics.kernels.binning import ExactBinning, LogGridBinning
from streammetrics.kernels.histogram import ScoreHistogram, add_grouped
from streammetrics.kernels.levels import (
    common_levels,
    histogram_arrays,
    level_bounds,
    representative,
)

POOL = [0.0, 1e-9, 0.01, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9, 0.99, 1 - 1e-9, 1.0]
scores_st = st.one_of(
    st.sampled_from(POOL),  # ties
    st.floats(0.0, 1.0, allow_nan=False),
)


@st.composite
def sample(draw, min_size=1, weighted=False):
    n = draw(st.integers(min_size, 40))
    s = np.array(draw(st.lists(scores_st, min_size=n, max_size=n)), dtype=np.float64)
    if weighted:
        w = np.array(draw(st.lists(st.floats(0.01, 5.0), min_size=n, max_size=n)))
    else:
        w = np.ones(n)
    return s, w


def hist(s, w, binning):
    h = ScoreHistogram(binning)
    add_grouped([h], binning.keys(s), None, w)
    return (*histogram_arrays(h.weights, binning), binning)


def levels(x, y, binning):
    keys, a, b, binning = common_levels(hist(*x, binning), hist(*y, binning))
    return keys, a, b, binning


def weighted_ecdf_stats(x, wx, y, wy):
    """Direct numpy weighted ECDFs on all points: (sup |Fx - Fy|, integral |Fx - Fy|)."""
    pts = np.sort(np.concatenate((x, y)))
    ox, oy = np.argsort(x), np.argsort(y)
    cx = np.concatenate(([0.0], np.cumsum(wx[ox]))) / wx.sum()
    cy = np.concatenate(([0.0], np.cumsum(wy[oy]))) / wy.sum()
    fx = cx[np.searchsorted(x[ox], pts, "right")]
    fy = cy[np.searchsorted(y[oy], pts, "right")]
    return float(np.max(np.abs(fx - fy))), float(np.sum(np.abs(fx - fy)[:-1] * np.diff(pts)))


@given(sample(), sample())
def test_ks_equals_scipy_unweighted(x, y):
    _, a, b, _ = levels(x, y, ExactBinning())
    assert drift.ks(a, b) == ks_2samp(x[0], y[0]).statistic


@given(sample(weighted=True), sample(weighted=True))
def test_weighted_ks_and_wasserstein_match_direct_ecdf(x, y):
    keys, a, b, binning = levels(x, y, ExactBinning())
    ks_direct, w_direct = weighted_ecdf_stats(x[0], x[1], y[0], y[1])
    assert drift.ks(a, b) == pytest.approx(ks_direct, abs=1e-12)
    assert drift.wasserstein(keys, a, b) == pytest.approx(w_direct, rel=1e-9, abs=1e-12)
    low, high = drift.ks_bounds(a, b, binning.singleton(keys))
    assert low <= drift.ks(a, b) <= high and high - low < 1e-12


@given(sample(weighted=True), sample(weighted=True))
def test_wasserstein_equals_scipy(x, y):
    keys, a, b, _ = levels(x, y, ExactBinning())
    expected = wasserstein_distance(x[0], y[0], x[1], y[1])
    assert drift.wasserstein(keys, a, b) == pytest.approx(expected, rel=1e-9, abs=1e-13)


@settings(max_examples=200)
@given(
    sample(weighted=True),
    sample(weighted=True),
    st.sampled_from([1, 2, 4, 16, 1024]),
    st.booleans(),
)
def test_binned_bounds_hold_the_raw_statistic(x, y, bins, margins):
    if margins:  # unbounded scores too (margins): bins relative to |s|
        x = (x[0] * 20 - 10, x[1])
        y = (y[0] * 7 - 2, y[1])
    keys, a, b, binning = levels(x, y, LogGridBinning(bins))
    lo, hi = level_bounds(binning, keys)
    raw_ks = ks_2samp(x[0], y[0]).statistic
    raw_ks_w = weighted_ecdf_stats(x[0], x[1], y[0], y[1])[0]
    raw_w = wasserstein_distance(x[0], y[0], x[1], y[1])
    # the unweighted statistic is bounded by the bounds of the unit-weight histograms
    _, ua, ub, _ = levels((x[0], np.ones(len(x[0]))), (y[0], np.ones(len(y[0]))), binning)
    low, high = drift.ks_bounds(ua, ub, binning.singleton(keys))
    assert low <= raw_ks <= high
    low, high = drift.ks_bounds(a, b, binning.singleton(keys))
    assert low - 1e-12 <= raw_ks_w <= high + 1e-12
    assert low <= drift.ks(a, b) <= high
    wlow, whigh = drift.wasserstein_bounds(lo, hi, a, b)
    assert wlow - 1e-12 * (1 + raw_w) <= raw_w <= whigh + 1e-12 * (1 + raw_w)
    point = drift.wasserstein(representative(lo, hi), a, b)
    assert wlow - 1e-12 <= point <= whigh + 1e-12


@given(sample(weighted=True), sample(weighted=True))
def test_exact_levels_give_collapsed_wasserstein_bounds(x, y):
    keys, a, b, binning = levels(x, y, ExactBinning())
    lo, hi = level_bounds(binning, keys)
    low, high = drift.wasserstein_bounds(lo, hi, a, b)
    value = drift.wasserstein(keys, a, b)
    assert low <= value * (1 + 1e-12) + 1e-15 and value <= high * (1 + 1e-12) + 1e-15
    assert high - low <= 1e-12 * (1 + value)


@given(sample(min_size=2), st.integers(1, 5), st.randoms(use_true_random=False))
def test_any_split_merged_gives_the_same_statistics(x, parts, rnd):
    """The kernels act on merged histograms: any split of the events, merged in any order,
    gives the statistics of the whole stream."""
    s, w = x
    ref = np.linspace(0, 1, 17) ** 2
    binning = LogGridBinning(64)
    whole = ScoreHistogram(binning)
    add_grouped([whole], binning.keys(s), None, w)
    cut = sorted(rnd.sample(range(1, len(s)), min(parts - 1, len(s) - 1)))
    pieces = []
    for chunk in np.split(np.arange(len(s)), cut):
        h = ScoreHistogram(binning)
        for i in chunk:  # per-event path for the parts, batch path for the whole
            k = binning.key(float(s[i]))
            h.weights[k] = h.weights.get(k, 0.0) + float(w[i])
        pieces.append(h)
    rnd.shuffle(pieces)
    merged = ScoreHistogram(binning)
    for h in pieces:
        merged.merge(h)
    reference = hist(ref, np.ones(len(ref)), binning)
    stats = []
    for h in (whole, merged):
        keys, a, b, _ = common_levels((*histogram_arrays(h.weights, binning), binning), reference)
        lo, hi = level_bounds(binning, keys)
        groups = drift.quantile_groups(b)
        stats.append((
            drift.ks(a, b),
            drift.ks_bounds(a, b, binning.singleton(keys)),
            drift.wasserstein_bounds(lo, hi, a, b),
            drift.psi(drift.group_masses(a, groups), drift.group_masses(b, groups)),
            drift.js(drift.group_masses(a, groups), drift.group_masses(b, groups)),
        ))
    assert stats[0] == stats[1]


@given(sample(weighted=True), sample(weighted=True), st.integers(1, 12))
def test_psi_and_js_on_reference_quantile_groups(x, y, n_groups):
    _, a, b, _ = levels(x, y, ExactBinning())
    groups = drift.quantile_groups(b, n_groups)
    assert groups.min() == 0 and groups.max() < n_groups
    assert (np.diff(groups) >= 0).all()  # contiguous groups of ascending levels
    ma, mb = drift.group_masses(a, groups), drift.group_masses(b, groups)
    with np.errstate(invalid="ignore"):  # scipy: sqrt of a divergence rounded below 0 is nan
        expected = float(np.nan_to_num(jensenshannon(mb, ma, base=2)))
    assert drift.js(ma, mb) == pytest.approx(expected, abs=1e-7)
    pa, pb = ma / ma.sum(), mb / mb.sum()
    pa[pa == 0] = 1e-4
    pb[pb == 0] = 1e-4
    assert drift.psi(ma, mb) == pytest.approx(float(np.sum((pa - pb) * np.log(pa / pb))), abs=1e-12)
    # a window distributed as the reference shows no drift
    assert drift.psi(mb, mb) == 0.0 and drift.js(mb, mb) == 0.0


def test_quantile_groups_are_reference_deciles():
    b = np.ones(100)
    groups = drift.quantile_groups(b, 10)
    assert np.array_equal(np.bincount(groups), np.full(10, 10))
    # one atom holding half the weight: its cuts collapse
    b = np.array([50.0] + [1.0] * 50)
    groups = drift.quantile_groups(b, 10)
    assert groups[0] == 0 and groups.max() < 10


def test_empty_window_or_reference_is_nan_with_a_warning():
    a, b = np.zeros(3), np.array([1.0, 2.0, 3.0])
    for fn in (
        lambda: drift.ks(a, b),
        lambda: drift.wasserstein(np.arange(3.0), a, b),
        lambda: drift.ks_bounds(b, a, np.ones(3, bool))[0],
        lambda: drift.wasserstein_bounds(np.arange(3.0), np.arange(3.0), a, b)[0],
        lambda: drift.psi(a, b),
        lambda: drift.js(b, a),
    ):
        with pytest.warns(UndefinedMetricWarning):
            assert math.isnan(fn())


def test_known_values():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = np.array([0.1, 0.2, 0.3])
        y = np.array([0.2, 0.4])
        keys, a, b, _ = levels((x, np.ones(3)), (y, np.ones(2)), ExactBinning())
        assert drift.ks(a, b) == ks_2samp(x, y).statistic == pytest.approx(0.5)
        assert drift.wasserstein(keys, a, b) == pytest.approx(wasserstein_distance(x, y))
    random.seed(0)


def test_ks_of_fractional_weights_with_an_integral_total_is_not_snapped():
    """Weights 0.5 summing to an integer are not counts: the statistic is that of the rows
    repeated in proportion (scipy on them), not rounded to 1 / lcm of the weight totals."""
    a = np.array([0.0, 0.5, 1.0, 0.5])  # total 2.0, not counts
    b = np.array([1.0, 1.0, 1.0, 0.0])
    x = np.array([1.0, 2.0, 3.0, 4.0])
    rows_a = np.repeat(x, (2 * a).astype(int))
    rows_b = np.repeat(x, (2 * b).astype(int))
    assert drift.ks(a, b) == pytest.approx(ks_2samp(rows_a, rows_b).statistic, abs=1e-12)
    assert drift.ks(a, b) == pytest.approx(5 / 12, abs=1e-12)  # snapped to 1/6 it would be 1/3 or 1/2


def test_statistics_read_given_ecdfs_as_their_own():
    """ks, ks_bounds, wasserstein and wasserstein_bounds take the ECDFs from a caller computing
    several of them (the reference's drift: once per window) and give the same values."""
    from streammetrics.kernels import drift as dk

    rng = np.random.default_rng(11)
    for a, b in ((rng.random(40), rng.random(40)), (np.zeros(5), rng.random(5)),
                 (rng.integers(0, 3, 30).astype(float), rng.integers(0, 4, 30).astype(float))):
        values = np.cumsum(rng.random(len(a)))
        lo, hi = values - 0.01, values
        single = rng.random(len(a)) < 0.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cdfs = dk.ecdfs(a, b)
            pairs = [(dk.ks(a, b), dk.ks(a, b, cdfs)),
                     (dk.ks_bounds(a, b, single), dk.ks_bounds(a, b, single, cdfs)),
                     (dk.wasserstein(values, a, b), dk.wasserstein(values, a, b, cdfs)),
                     (dk.wasserstein_bounds(lo, hi, a, b), dk.wasserstein_bounds(lo, hi, a, b, cdfs))]
        for own, passed in pairs:
            assert np.array_equal(np.asarray(own), np.asarray(passed), equal_nan=True)


def test_reference_drift_reads_the_ecdfs_once(monkeypatch):
    from streammetrics.kernels import drift as dk
    from streammetrics.monitors.reference import Reference

    rng = np.random.default_rng(12)
    s = rng.random(300)
    ref = Reference.from_arrays(rng.random(300) < s, s)
    calls = []
    real = dk.ecdfs
    monkeypatch.setattr(dk, "ecdfs", lambda a, b: calls.append(1) or real(a, b))
    ref.drift((rng.random(50), np.ones(50), ExactBinning()))
    assert len(calls) == 1
