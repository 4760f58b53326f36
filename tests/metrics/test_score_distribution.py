"""ScoreDistribution: label-free score summary on BinaryScores' grid."""
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.metrics.score_distribution import ScoreDistribution

scores = st.one_of(st.floats(0.0, 1.0), st.floats(-50.0, 50.0), st.sampled_from([0.0, 1.0, 0.5]))
weights = st.sampled_from([1.0, 0.0, 0.5, 2.0, 0.3])
events = st.lists(st.tuples(scores, weights), max_size=80)


@settings(max_examples=60, deadline=None)
@given(events, st.sampled_from([0.0, 0.5, 0.7]))
def test_mean_score_rate_and_histogram(evs, threshold):
    d = sm.ScoreDistribution(threshold=threshold)
    b = sm.BinaryScores()
    for s, w in evs:
        d.update(s, w)
        b.update(0, s, w)
    s = np.array([e[0] for e in evs], dtype=float)
    w = np.array([e[1] for e in evs], dtype=float)
    assert d.count == len(evs)
    assert d.total_weight == pytest.approx(w.sum(), rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if w.sum() > 0:
            assert d.mean_score() == pytest.approx(np.average(s, weights=w), rel=1e-9, abs=1e-12)
            assert d.predicted_positive_rate() == pytest.approx(w[s >= threshold].sum() / w.sum(), rel=1e-12)
        else:
            assert math.isnan(d.mean_score()) and math.isnan(d.predicted_positive_rate())
    # the same grid as BinaryScores: all scores of one class give the same histogram
    thresholds, hist = d.histogram()
    assert d.bins_per_octave == b.bins_per_octave
    bt = b.roc_curve(drop_intermediate=False)[2] if len(evs) and w.sum() > 0 else None
    assert hist.sum() == pytest.approx(w.sum(), rel=1e-12)
    if bt is not None:
        assert sorted(thresholds.tolist()) == sorted(x for x in bt.tolist() if np.isfinite(x))


@settings(max_examples=40, deadline=None)
@given(events)
def test_batch_equals_per_event(evs):
    one = sm.ScoreDistribution(max_bins=16)
    for s, w in evs:
        one.update(s, w)
    batch = sm.ScoreDistribution(max_bins=16).update_many([e[0] for e in evs], [e[1] for e in evs])
    a, b = one.to_dict(), batch.to_dict()
    assert a["state"]["histogram"] == b["state"]["histogram"] and a["state"]["count"] == b["state"]["count"]
    assert a["state"]["score_sum"] == pytest.approx(b["state"]["score_sum"], rel=1e-9, abs=1e-9)


def test_exact_keeps_every_distinct_score_and_empty_warns():
    d = sm.ScoreDistribution(exact=True).update_many([0.3, 0.1, 0.3, 0.9])
    t, w = d.histogram()
    assert t.tolist() == [0.1, 0.3, 0.9] and w.tolist() == [1.0, 2.0, 1.0]
    with pytest.warns(UndefinedMetricWarning, match="No prediction"):
        assert math.isnan(sm.ScoreDistribution().mean_score())


def test_bad_input_changes_nothing():
    d = sm.ScoreDistribution().update(0.2)
    before = d.to_dict()
    for args in [(float("nan"),), ("x",), (0.1, -1.0), (True,)]:
        with pytest.raises((TypeError, ValueError)):
            d.update(*args)
    with pytest.raises(ValueError, match="scores"):
        d.update_many([0.1, float("inf")])
    with pytest.raises(ValueError):
        d.update_many([0.1, 0.2], [1.0])
    assert d.to_dict() == before


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("events", [
    [(1.797693134862316e293, 1e15)],             # one score times its weight beyond the float range
    [(1e308, 1.0), (1e308, 1.0)],                # a sum beyond it
    [(-1e308, 1.0), (-1e308, 1.0), (0.5, 1.0)],
    [(1e294, 1e15), (-1e294, 1e15)],             # +inf and -inf terms: nan
])
def test_overflowed_score_sum_survives_a_round_trip(events):
    # an overflowed score sum is written as 'inf', '-inf' or 'nan'; it was read back as 0.0 (the
    # restored window's mean score changed from inf to 0)
    a = sm.ScoreDistribution()
    for s, w in events:
        a.update(s, weight=w)
    d = a.to_dict()
    b = sm.from_dict(json.loads(json.dumps(d)))
    assert b.to_dict() == d
    assert repr(b.score_sum) == repr(a.score_sum) == d["state"]["score_sum"]
    more = sm.ScoreDistribution().update(0.25)
    assert b.merge(more).to_dict() == a.merge(more).to_dict()


def test_a_restored_unit_weight_state_keeps_its_unit_weights():
    """The intervals' sample size needs it: a window restored from a checkpoint gives the
    intervals of the live one (the service's finals equal replay's)."""
    from streammetrics import ScoreDistribution, from_dict

    live = ScoreDistribution().update_many([0.2, 0.7, 0.9])
    assert live.unit_weights and from_dict(live.to_dict()).unit_weights
    assert from_dict(live.to_dict()) == live and from_dict(live.to_dict()).to_dict() == live.to_dict()
    weighted = ScoreDistribution().update_many([0.2, 0.7], sample_weight=[0.5, 2.0])
    assert not weighted.unit_weights and not from_dict(weighted.to_dict()).unit_weights
    restored = from_dict(live.to_dict()).update(0.4)  # later events add as before
    assert restored.to_dict() == ScoreDistribution().update_many([0.2, 0.7, 0.9, 0.4]).to_dict()


@pytest.mark.parametrize("kw", [dict(bins=64, max_bins=512), dict(bins=64, max_bins=3), dict(exact=True)])
def test_update_columns_equals_column_by_column(kw):
    """update_columns (one pass over fresh exact columns) leaves the states update_many of each
    column does: histograms (ties, -0.0, subnormals), sums, levels, later updates alike."""
    rng = np.random.default_rng(7)
    for trial in range(60):
        n, k = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        values = np.array([0.0, -0.0, 0.1, 0.5, 0.25, 1.0, 0.7, 1e-300, 5e-324, 0.3333333333333333])
        S = rng.choice(values, size=(n, k)) if trial % 2 else np.round(rng.random((n, k)), 2)
        a, b = ([ScoreDistribution(**kw) for _ in range(k)] for _ in range(2))
        if trial % 5 == 0:  # not fresh: column by column
            for d in a + b:
                d.update(0.3)
        ScoreDistribution.update_columns(a, S)
        for c, d in enumerate(b):
            d.update_many(S[:, c])
        for x, y in zip(a, b):
            assert x.to_dict() == y.to_dict() and x == y
            assert all(np.array_equal(p, q) for p, q in zip(x.histogram(), y.histogram()))
            x.update(0.3)
            y.update(0.3)
            assert x.to_dict() == y.to_dict()


def test_update_columns_refuses_a_bad_batch_whole():
    dists = [ScoreDistribution() for _ in range(2)]
    with pytest.raises(ValueError, match=r"scores\[1\] must be finite"):
        ScoreDistribution.update_columns(dists, np.array([[0.1, 0.2], [np.nan, 0.3]]))
    assert all(d.count == 0 for d in dists)


@pytest.mark.parametrize("kw", [dict(bins=64, max_bins=512), dict(bins=8, max_bins=4), dict(exact=True)])
def test_a_state_written_from_its_levels_equals_one_written_from_its_dict(kw):
    """to_dict reads the histogram's levels when it holds them (a batch into an empty one): the
    same JSON as a histogram built event by event (its dict)."""
    scores = [0.5, 0.25, 0.25, 0.0, -0.0, 1.0, 0.125, 0.7, 3.0, 1e-300]
    batch = ScoreDistribution(**kw).update_many(scores)
    one_by_one = ScoreDistribution(**kw)
    for s in scores:
        one_by_one.update(s)
    assert batch.to_dict() == one_by_one.to_dict()
