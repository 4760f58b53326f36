"""The default (binned) BinaryScores: the binning's guarantees and the AUC bounds.

* binning: the per-event key, the vectorised key and a slow reference agree on every
  float; keys are monotone; ``lowest(k)`` is the smallest score of bin ``k``; bins
  reported as singletons hold one distinct score;
* bounds: ``roc_auc_bounds()`` contains scikit-learn's exact ROC AUC and the binned
  ``roc_auc()`` on random streams (ties, zero weights, margins, probabilities crowded
  near 0 and 1, float32-saturated sigmoids), for several bin counts.
"""
from __future__ import annotations

import math
import struct
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score, roc_curve

import streammetrics as sm
from streammetrics.kernels.binning import (
    ExactBinning,
    LogGridBinning,
    binning_from_config,
)
from streammetrics.kernels.ranking import roc_auc_bounds


def _reference_key(binning: LogGridBinning, s: float) -> int:
    """Slow, obviously-correct key: the table of LogGridBinning's class docstring."""
    def up(x: float) -> int:
        bits = struct.unpack("<q", struct.pack("<d", abs(x)))[0]
        return -(-bits // (1 << binning.shift))

    if s < 0:
        return -up(-s)
    if s < 0.5:
        return up(s)
    if s <= 1.0:
        return binning.one_key - up(1.0 - s)
    return binning.one_key + up(s - 1.0)


finite = st.floats(allow_nan=False, allow_infinity=False)
near_edges = st.one_of(
    finite,
    st.floats(0.0, 1.0),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 5e-324, -5e-324, 2**-1022, 1 - 2**-53, 1 + 2**-52,
                     0.49999999999999994, 0.5000000000000001, 1.7976931348623157e308,
                     -1.7976931348623157e308, 2.0, -2.0]),
    st.integers(1, 2**20).map(lambda k: 1 - k * 2.0**-53),
    st.integers(1, 2**20).map(lambda k: 1 + k * 2.0**-52),
)
bins_per_octave = st.sampled_from([1, 2, 8, 64, 256, 1 << 20])


# ----------------------------------------------------------------------------- binning
@given(st.lists(near_edges, min_size=1, max_size=60), bins_per_octave)
def test_keys_agree_and_are_monotone(scores, bins):
    binning = LogGridBinning(bins)
    arr = np.array(scores, dtype=np.float64)
    per_event = [binning.key(float(x)) for x in scores]
    reference = [_reference_key(binning, float(x)) for x in scores]
    assert per_event == reference
    assert binning.keys(arr).tolist() == per_event
    order = np.argsort(arr, kind="stable")
    assert np.all(np.diff(binning.keys(arr[order])) >= 0)
    assert all(binning.min_key <= k <= binning.max_key for k in per_event)


@given(near_edges, bins_per_octave)
def test_lowest_is_the_smallest_score_of_its_bin(score, bins):
    binning = LogGridBinning(bins)
    key = binning.key(score)
    low = float(binning.lowest(np.array([key]))[0])
    assert low <= score
    assert binning.key(low) == key
    below = math.nextafter(low, -math.inf)
    if math.isfinite(below):
        assert binning.key(below) < key


@given(near_edges, bins_per_octave)
def test_singleton_bins_hold_one_score(score, bins):
    binning = LogGridBinning(bins)
    key = binning.key(score)
    if binning.singleton(np.array([key]))[0]:
        low = float(binning.lowest(np.array([key]))[0])
        assert low == score or (low == 0.0 and score == 0.0)
        assert binning.key(math.nextafter(low, math.inf)) > key


def test_dedicated_bins_for_zero_one_and_saturated_probabilities():
    binning = LogGridBinning(64)
    keys = np.array([binning.key(x) for x in (0.0, 1.0, 1 - 2**-53, 1 - 7 * 2**-53, 1 + 2**-52)])
    assert binning.singleton(keys).all()
    assert not binning.singleton(np.array([binning.key(x) for x in (0.3, 1e-12, -5.0, 7.0)])).any()
    # probabilities crowded near 1 stay apart; the grid is relative to the distance to 0 or 1
    assert binning.key(1 - 1e-12) != binning.key(1 - 2e-12)
    assert binning.key(1e-12) != binning.key(2e-12)
    assert binning.key(0.5) > binning.key(0.49999999999999994)
    assert binning.lowest(np.array([binning.key(0.5)]))[0] == 0.5


def test_binning_config_and_validation():
    assert binning_from_config(LogGridBinning(128).config()) == LogGridBinning(128)
    assert binning_from_config(ExactBinning().config()) == ExactBinning()
    for bad in (0, 3, 100, 2**21):
        with pytest.raises(ValueError, match="power of two"):
            LogGridBinning(bad)
    for bad in (64.0, "64", None, True):
        with pytest.raises(TypeError):
            LogGridBinning(bad)
    for bad in ({"bins": 64}, {"bins": 64, "exact": "no"}, {"bins": 63, "exact": False}):
        with pytest.raises(ValueError):
            binning_from_config(bad)
    binning = LogGridBinning(64)
    unreachable = binning.key(1 - 2**-53) - 1  # a u-bin narrower than the float spacing
    with pytest.raises(ValueError, match="no score maps"):
        binning.check_keys(np.array([unreachable]), "keys")
    with pytest.raises(ValueError, match="outside"):
        binning.check_keys(np.array([binning.max_key + 1]), "keys")


# ----------------------------------------------------------------------------- bounds
@st.composite
def score_streams(draw):
    n = draw(st.integers(2, 200))
    kind = draw(st.sampled_from(["uniform", "crowded", "margins", "float32", "ties"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    y = rng.random(n) < draw(st.floats(0.05, 0.95))
    shift = draw(st.floats(0.0, 3.0))
    if kind == "uniform":
        s = rng.random(n)
    elif kind == "crowded":  # sigmoids of large logits: probabilities within 1e-15 of 0 or 1
        z = np.where(y, shift, -shift) * 10 + rng.normal(0, 15, n)
        s = 1.0 / (1.0 + np.exp(-z))
    elif kind == "margins":
        s = (np.where(y, shift, -shift) + rng.normal(0, 2, n)) * draw(st.sampled_from([1e-3, 1.0, 1e4]))
    elif kind == "float32":  # float32 sigmoids saturate to exactly 1.0: real ties
        z = np.where(y, shift, -shift) * 8 + rng.normal(0, 10, n)
        s = (1.0 / (1.0 + np.exp(-z.astype(np.float32)))).astype(np.float64)
    else:
        s = rng.choice(np.array([0.0, 0.2, 0.2000001, 0.7, 1.0]), n)
    if draw(st.booleans()):
        w = rng.choice(np.array([0.0, 0.5, 1.0, 2.0, 7.3]), n)
    else:
        w = None
    return y, s, w


@given(score_streams(), st.sampled_from([1, 4, 64]))
def test_bounds_contain_exact_auc_and_binned_auc(stream, bins):
    y, s, w = stream
    assume(len(set(y[w > 0] if w is not None else y)) == 2)
    exact = roc_auc_score(y, s, sample_weight=w)
    for max_bins in (1, 4096):  # on the grid / exact while small
        acc = sm.BinaryScores(bins=bins, max_bins=max_bins).update_many(y, s, w)
        low, high = acc.roc_auc_bounds()
        auc = acc.roc_auc()
        tol = 1e-12 if acc.exact else 0.0  # exact: rounding of weight sums only
        assert 0.0 <= low <= high <= 1.0
        assert low - tol <= exact <= high + tol, (low, exact, high)
        assert low <= auc <= high
        assert abs(auc - exact) <= high - low + tol


@given(score_streams())
def test_bounds_are_exact_when_every_bin_holds_one_score(stream):
    """Scores that are the lowest score of distinct bins: binned results equal exact ones."""
    y, s, w = stream
    binning = LogGridBinning(64)
    s = binning.lowest(binning.keys(s))  # each event moved to the lowest score of its bin
    assume(len(set(y[w > 0] if w is not None else y)) == 2)
    binned = sm.BinaryScores(bins=64).update_many(y, s, w)
    exact = sm.BinaryScores(exact=True).update_many(y, s, w)
    assert binned.roc_auc() == pytest.approx(exact.roc_auc(), abs=1e-12)
    fpr, tpr, thr = binned.roc_curve(drop_intermediate=False)
    efpr, etpr, ethr = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    assert np.array_equal(thr, ethr)
    assert np.allclose(fpr, efpr, atol=1e-12) and np.allclose(tpr, etpr, atol=1e-12)


def test_bounds_count_ties_in_singleton_bins_exactly():
    # only 0.0, 1.0 and 1 - k * 2**-53 scores: every bin is a singleton, bounds collapse
    rng = np.random.default_rng(7)
    y = rng.random(1000) < 0.5
    s = rng.choice(np.array([0.0, 1.0, 1 - 2**-53, 1 - 3 * 2**-53]), 1000)
    acc = sm.BinaryScores().update_many(y, s)
    low, high = acc.roc_auc_bounds()
    exact = roc_auc_score(y, s)
    assert high - low < 1e-9
    assert low <= exact <= high
    assert acc.roc_auc() == pytest.approx(exact, abs=1e-12)


def test_bounds_widen_with_coarser_bins():
    rng = np.random.default_rng(11)
    y = rng.random(5000) < 0.3
    s = 1 / (1 + np.exp(-(np.where(y, 1.0, -1.0) + rng.normal(0, 2, 5000))))
    widths = []
    for bins in (1, 8, 64, 1024):
        low, high = sm.BinaryScores(bins=bins).update_many(y, s).roc_auc_bounds()
        widths.append(high - low)
    assert widths == sorted(widths, reverse=True)
    assert widths[2] < 5e-3


def test_ranking_bounds_slack_and_nan():
    neg, pos = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    low, high = roc_auc_bounds(neg, pos, np.array([True, True]))
    assert low <= 1.0 == high
    assert 1.0 - low < 1e-12
    assert all(math.isnan(v) for v in roc_auc_bounds(np.zeros(2), pos, np.ones(2, bool)))


@settings(max_examples=30)
@given(score_streams())
def test_bounds_survive_merge_and_round_trip(stream):
    y, s, w = stream
    assume(len(set(y[w > 0] if w is not None else y)) == 2)
    half = len(y) // 2
    a = sm.BinaryScores().update_many(y[:half], s[:half], None if w is None else w[:half])
    b = sm.BinaryScores().update_many(y[half:], s[half:], None if w is None else w[half:])
    merged = sm.from_dict(a.to_dict()) + sm.from_dict(b.to_dict())
    whole = sm.BinaryScores().update_many(y, s, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert merged.roc_auc_bounds() == pytest.approx(whole.roc_auc_bounds(), abs=1e-12)
