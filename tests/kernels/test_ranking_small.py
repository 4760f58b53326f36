"""kernels.ranking_small == kernels.ranking (|diff| <= 1e-12, None where ranking gives NaN) on
hypothesis levels (unit, dyadic, float and zero weights, one-class, empty), and == scikit-learn
on events with one distinct score per level."""
from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from streammetrics.kernels import ranking
from streammetrics.kernels.ranking import rounding_interval
from streammetrics.kernels.ranking_small import SMALL_LEVELS, levels, ranking_summary

TOL = 1e-12
weight = st.one_of(st.sampled_from([0.0, 0.0, 1.0, 2.0, 0.5, 3.25]), st.floats(1e-3, 1e3))


@st.composite
def level_lists(draw):
    n = draw(st.integers(0, min(SMALL_LEVELS, 80)))
    neg = draw(st.lists(weight, min_size=n, max_size=n))
    pos = draw(st.lists(weight, min_size=n, max_size=n))
    if draw(st.booleans()) and n:  # one-class streams
        (neg if draw(st.booleans()) else pos)[:] = [0.0] * n
    singleton = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return neg, pos, singleton


def value(x):
    return None if x is None or math.isnan(x) else float(x)


def same(ours, ref, name):
    ref = value(ref)
    if ours is None or ref is None:
        assert ours is None and ref is None, (name, ours, ref)
    else:
        assert abs(ours - ref) <= TOL, (name, ours, ref)


@given(level_lists())
def test_matches_ranking(levels_):
    neg, pos, singleton = levels_
    ours = ranking_summary(neg, pos, singleton)
    n, p = np.asarray(neg, dtype=np.float64), np.asarray(pos, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auc = ranking.roc_auc(n, p) if n.sum() > 0 and p.sum() > 0 else math.nan
        low, high = ranking.roc_auc_bounds(n, p, np.asarray(singleton, dtype=bool))
        ap = ranking.average_precision(n, p)
    same(ours["roc_auc"], auc, "roc_auc")
    same(ours["roc_auc_low"], low, "low")
    same(ours["roc_auc_high"], high, "high")
    same(ours["average_precision"], ap, "average_precision")
    if ours["roc_auc"] is not None:
        assert ours["roc_auc_low"] <= ours["roc_auc"] + TOL and ours["roc_auc"] <= ours["roc_auc_high"] + TOL


@given(level_lists())
def test_matches_sklearn_on_distinct_scores(levels_):
    neg, pos, _ = levels_
    y, s, w = [], [], []
    for i, (n_i, p_i) in enumerate(zip(neg, pos)):
        for label, wi in ((0, n_i), (1, p_i)):
            if wi > 0:
                y.append(label)
                s.append(float(i))
                w.append(wi)
    ours = ranking_summary(neg, pos)
    if len(set(y)) == 2:
        same(ours["roc_auc"], skm.roc_auc_score(y, s, sample_weight=w), "roc_auc")
        assert (ours["roc_auc_low"], ours["roc_auc_high"]) == rounding_interval(ours["roc_auc"], len(neg))
        same(ours["average_precision"], skm.average_precision_score(y, s, sample_weight=w), "ap")
    else:
        assert ours["roc_auc"] is None and ours["roc_auc_low"] is None


def test_levels_and_undefined():
    keys, n, p = levels({3: 1.0, 1: 2.0}, {2: 1.0, 3: 4.0})
    assert keys == [1, 2, 3] and n == [2.0, 0.0, 1.0] and p == [0.0, 1.0, 4.0]
    assert ranking_summary([], []) == dict.fromkeys(("roc_auc", "roc_auc_low", "roc_auc_high", "average_precision"))
    only_neg = ranking_summary([1.0, 2.0], [0.0, 0.0], [True, False])
    assert only_neg["roc_auc"] is None and only_neg["average_precision"] == 0.0


# class totals near the ends of the float range: N*P underflowed to 0 (ZeroDivisionError in a
# BinaryMonitor snapshot for a negative of weight 5e-324 and a positive of weight 0.1) or overflowed
scale = st.sampled_from([5e-324, 1e-320, 2.0**-1022, 1e-300, 1e-200, 1e200, 1e300, 1.0])


@given(level_lists(), scale, scale)
def test_extreme_class_totals_match_ranking(levels_, neg_scale, pos_scale):
    neg, pos, singleton = levels_
    neg = [n * neg_scale for n in neg]
    pos = [p * pos_scale for p in pos]
    test_matches_ranking.hypothesis.inner_test((neg, pos, singleton))


def test_subnormal_class_total_gives_the_auc():
    s = ranking_summary([5e-324, 0.0], [0.0, 0.1])  # (was: ZeroDivisionError)
    assert s["roc_auc"] == 1.0 and s["average_precision"] == 1.0
    s = ranking_summary([0.0, 5e-324, 5e-324], [0.1, 0.1, 0.0], [True, True, True])
    want = skm.roc_auc_score([1, 0, 1, 0], [0, 1, 1, 2], sample_weight=[0.1, 5e-324, 0.1, 5e-324])
    assert s["roc_auc"] == 0.125 == want
    s = ranking_summary([1e300, 1e300], [0.0, 1e300])  # N*P = inf (was: nan)
    assert s["roc_auc"] == 0.75


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)).filter(lambda c: sum(c) > 0),
                         min_size=1, max_size=20), min_size=1, max_size=10))
def test_ranking_summary_columns_are_the_scalar_twins_values(windows):
    """The vectorised twin (exact levels of whole counts, many windows at once) gives, window by
    window, the scalar twin's values (the same floats) and None in the same places."""
    import numpy as np

    from streammetrics.kernels.ranking_small import ranking_summary, ranking_summary_columns

    window_of_level = np.repeat(np.arange(len(windows)), [len(w) for w in windows])
    neg = np.array([float(n) for w in windows for n, _ in w])
    pos = np.array([float(p) for w in windows for _, p in w])
    one_class = np.array([sum(n for n, _ in w) == 0 or sum(p for _, p in w) == 0 for w in windows])
    cols = ranking_summary_columns(window_of_level, neg, pos, len(windows), one_class)
    for j, w in enumerate(windows):
        got = {k: None if undefined is not None and undefined[j] else float(values[j])
               for k, (values, undefined) in cols.items()}
        expected = ranking_summary([float(n) for n, _ in w], [float(p) for _, p in w], None)
        assert got == expected


def test_columns_grouped_by_width_equal_one_layout():
    """Windows of very different numbers of levels are laid out in groups of similar widths: every
    value (nan and inf where a class is absent included) is the one of a single padded layout."""
    import numpy as np

    from streammetrics.kernels import ranking_small

    rng = np.random.default_rng(4)
    sizes = np.where(rng.random(500) < 0.05, rng.integers(9, 200, 500), rng.integers(1, 6, 500))
    window_of_level = np.repeat(np.arange(500), sizes)
    neg = rng.integers(0, 4, len(window_of_level)).astype(np.float64)
    pos = rng.integers(0, 3, len(window_of_level)).astype(np.float64)
    neg[(neg == 0) & (pos == 0)] = 1.0
    totals_n, totals_p = np.bincount(window_of_level, neg), np.bincount(window_of_level, pos)
    one_class = (totals_n == 0) | (totals_p == 0)
    grouped = ranking_small.ranking_summary_columns(window_of_level, neg, pos, 500, one_class)
    counts = np.bincount(window_of_level, minlength=500)
    with np.errstate(all="ignore"):
        single = ranking_small._rows_pass(window_of_level, neg, pos, 500, one_class, counts, int(counts.max()))
    assert one_class.any() and counts.max() > 32
    for name, (values, undefined) in single.items():
        got, got_undefined = grouped[name]
        assert np.array_equal(got, values, equal_nan=True), name
        assert (got_undefined is None) == (undefined is None)
