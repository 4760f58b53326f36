"""Exact while small: a default BinaryScores keeps exact scores while the distinct (class,
score) keys fit ``max_bins`` and moves to the log grid when they do not, so its state is a
function of the multiset of events: any split, merge order or batching gives the same state,
including streams that cross the switch in different parts (issue 12, point 3)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score
from test_score_budget import check_any_split

import streammetrics as sm
from streammetrics.kernels.ranking import rounding_slack

# few distinct scores, so small max_bins budgets are crossed in some parts and not others
scores = st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.2000001, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0, 1.5, -0.5])
events = st.lists(st.tuples(st.booleans(), scores), min_size=0, max_size=80)


def structure(acc: sm.BinaryScores) -> dict:
    """The whole state (unit weights: histogram weights are integral, and the log-loss and
    Brier sums are exact, so everything is compared exactly)."""
    return dict(acc.to_dict()["state"])


@settings(max_examples=150, deadline=None)
@given(events, st.sampled_from([1, 3, 6, 12, 4096]), st.integers(0, 2**32 - 1))
def test_any_split_merge_order_and_batching_gives_the_same_state(evs, max_bins, seed):
    config = {"bins": 64, "max_bins": max_bins}
    whole = check_any_split(lambda: sm.BinaryScores(**config), evs, lambda acc, e: acc.update(*e),
                            lambda acc, chunk: acc.update_many([e[0] for e in chunk], [e[1] for e in chunk]),
                            seed, structure=structure)
    distinct = len({(y, s) for y, s in evs})
    assert whole.exact == (distinct <= max_bins)


@settings(max_examples=150, deadline=None)
@given(st.integers(20, 80), st.integers(0, 2**32 - 1), st.sampled_from([2, 10, 100, None]))
def test_small_window_auc_equals_sklearn_exactly(n, seed, levels):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    y[:2] = [False, True]
    s = rng.random(n) if levels is None else rng.integers(0, levels, n) / levels
    want = roc_auc_score(y, s)
    per_event = sm.BinaryScores()
    for yi, si in zip(y.tolist(), s.tolist()):
        per_event.update(yi, si)
    for acc in (per_event, sm.BinaryScores().update_many(y, s)):
        assert acc.exact and acc.bins_per_octave is None
        assert acc.roc_auc() == want
        low, high = acc.roc_auc_bounds()  # collapsed to the value, up to the bound on float rounding
        # the width is 2 * slack up to the rounding of the two subtractions (a few ulps of 0.5)
        assert low <= want <= high and high - low <= 2 * rounding_slack(len(set(s.tolist()))) + 4e-16


def test_switch_to_grid_past_max_bins_and_bounds_widen():
    acc = sm.BinaryScores(max_bins=8)
    for i in range(8):
        acc.update(i % 2, 0.1 + i / 100)
    assert acc.exact
    acc.update(1, 0.95)  # the ninth distinct (class, score): onto the grid
    assert not acc.exact and acc.bins_per_octave < 1024  # 9 grid keys at 1024: coarsened
    assert len(acc._neg) + len(acc._pos) <= 8
    low, high = acc.roc_auc_bounds()
    assert low <= acc.roc_auc() <= high
    assert acc.to_dict()["config"] == {"bins": 1024, "exact": False, "max_bins": 8}


def test_exact_state_over_budget_refused():
    d = sm.BinaryScores().update_many([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4]).to_dict()
    d["config"]["max_bins"] = 3
    with pytest.raises(ValueError, match="max_bins"):
        sm.from_dict(d)


# ----------------------------------------------------------------------------- ScoreDistribution
def dist_structure(acc: sm.ScoreDistribution) -> dict:
    state = dict(acc.to_dict()["state"])
    state.pop("score_sum")  # a float sum: depends on the order of additions
    return state


@settings(max_examples=100, deadline=None)
@given(events, st.sampled_from([1, 3, 6, 4096]), st.integers(0, 2**32 - 1))
def test_score_distribution_state_is_a_function_of_the_events(evs, max_bins, seed):
    rng = random.Random(seed)
    s = [e[1] for e in evs]
    config = {"bins": 64, "max_bins": max_bins}
    whole = sm.ScoreDistribution(**config)
    for v in s:
        whole.update(v)
    assert dist_structure(sm.ScoreDistribution(**config).update_many(s)) == dist_structure(whole)
    cut = rng.randint(0, len(s))
    a = sm.ScoreDistribution(**config).update_many(s[:cut])
    b = sm.ScoreDistribution(**config)
    for v in s[cut:]:
        b.update(v)
    merged = b + a if rng.random() < 0.5 else a + b
    assert dist_structure(merged) == dist_structure(whole)
    assert dist_structure(sm.from_dict(whole.to_dict())) == dist_structure(whole)
    assert (whole.bins_per_octave is None) == (len(set(s)) <= max_bins)
    if whole.bins_per_octave is None and s:  # exact: the histogram holds the scores themselves
        thresholds, weights = whole.histogram()
        values, counts = np.unique(np.asarray(s) + 0.0, return_counts=True)
        np.testing.assert_array_equal(thresholds, values)
        np.testing.assert_array_equal(weights, counts)
