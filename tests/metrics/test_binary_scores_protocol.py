"""BinaryScores and the score histograms follow the accumulator protocol.

Per-event == batch state, merge in any order of any split == the whole stream,
to_dict/from_dict through JSON, bad input rejected with the argument named and the
state untouched, hostile dicts rejected, and the log loss / Brier guard for scores
outside [0, 1] surviving merge and serialisation.

Weights here are dyadic (k/4), so that summed weights are exact whatever the order of
the additions and states can be compared with ``==``; the float sums behind log loss
and Brier score are compared to 1e-12 relative.
"""
from __future__ import annotations

import copy
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics.kernels.binning import ExactBinning, LogGridBinning
from streammetrics.kernels.histogram import (
    ScoreHistogram,
    add_grouped,
    aligned,
    coarsen_all,
    histograms_from_json,
    histograms_to_json,
    summed,
    to_grid,
)

DYADIC = [0.0, 0.25, 0.5, 1.0, 2.0, 3.75]
SCORES = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5, 1e-12, 1 - 1e-12, -2.5, 7.0]),
    st.floats(0.0, 1.0),
    st.floats(-1e3, 1e3),
)


@st.composite
def events(draw, max_size=60):
    n = draw(st.integers(0, max_size))
    y = draw(st.lists(st.sampled_from([0, 1, True, False]), min_size=n, max_size=n))
    s = draw(st.lists(SCORES, min_size=n, max_size=n))
    w = draw(st.one_of(st.none(), st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n)))
    return y, s, w


CONFIGS = st.sampled_from([
    {"exact": True},
    {},
    {"bins": 64, "max_bins": 6},  # small budgets force the grid to coarsen mid-stream
    {"bins": 1024, "max_bins": 25},
    {"bins": 2, "max_bins": 1},
])


def exact_part(acc: sm.BinaryScores) -> dict:
    """The state without the summed weights of weighted events (a float sum that depends on the
    order of additions; the log-loss and Brier sums are exact, kernels.exact_sum)."""
    state = acc.to_dict()
    state["state"] = dict(state["state"])
    state["state"].pop("weighted")
    return state


def assert_same_state(a: sm.BinaryScores, b: sm.BinaryScores) -> None:
    assert exact_part(a) == exact_part(b)


def per_event(y, s, w, **config) -> sm.BinaryScores:
    acc = sm.BinaryScores(**config)
    for i in range(len(y)):
        if w is None:
            assert acc.update(y[i], s[i]) is acc
        else:
            assert acc.update(y[i], s[i], w[i]) is acc
    return acc


# ----------------------------------------------------------------------------- state
@given(events(), CONFIGS)
def test_per_event_equals_batch(stream, config):
    y, s, w = stream
    a = per_event(y, s, w, **config)
    b = sm.BinaryScores(**config)
    assert b.update_many(y, s, w) is b
    assert_same_state(a, b)
    assert a.count == b.count == len(y)
    assert a.total_weight == b.total_weight == (len(y) if w is None else sum(w))


@given(events(), CONFIGS, st.data())
def test_merge_any_split_any_order_equals_whole(stream, config, data):
    y, s, w = stream
    n = len(y)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=5)))
    bounds = [0, *cuts, n]
    parts = [
        sm.BinaryScores(**config).update_many(
            y[lo:hi], s[lo:hi], None if w is None else w[lo:hi]
        )
        for lo, hi in zip(bounds[:-1], bounds[1:])
    ]
    whole = sm.BinaryScores(**config).update_many(y, s, w)
    order = data.draw(st.permutations(range(len(parts))))
    left = sm.BinaryScores(**config)
    for i in order:
        left.merge(parts[i])
    assert_same_state(left, whole)
    # associativity: ((a + b) + c) == (a + (b + c)) for the first three parts
    if len(parts) >= 3:
        assert_same_state((parts[0] + parts[1]) + parts[2], parts[0] + (parts[1] + parts[2]))


@given(events(), CONFIGS)
def test_round_trip_through_json(stream, config):
    y, s, w = stream
    acc = sm.BinaryScores(**config).update_many(y, s, w)
    text = json.dumps(acc.to_dict(), allow_nan=False)
    back = sm.from_dict(json.loads(text))
    assert isinstance(back, sm.BinaryScores)
    assert back == acc
    assert back.to_dict() == acc.to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("roc_auc", "average_precision"):
            a, b = getattr(acc, name)(), getattr(back, name)()
            assert a == b or (math.isnan(a) and math.isnan(b))
    # the restored accumulator keeps accumulating like the original
    back.update(1, 0.25)
    acc.update(1, 0.25)
    assert_same_state(back, acc)


def test_exact_scores_round_trip_bit_for_bit():
    scores = [0.1, 0.1 + 2**-56, 1 / 3, -0.0, 5e-324, 1 - 2**-53, 1e308, -7.25]
    acc = sm.BinaryScores(exact=True).update_many([0, 1] * 4, scores)
    back = sm.from_dict(json.loads(json.dumps(acc.to_dict())))
    assert back._neg.weights.keys() == acc._neg.weights.keys()
    assert back._pos.weights.keys() == acc._pos.weights.keys()
    assert len(acc._neg.weights) + len(acc._pos.weights) == 8


def test_inputs_lists_arrays_series_bools_ints_floats():
    y = [0, 1, 1, 0, 1]
    s = [0.1, 0.9, 0.4, 0.35, 0.8]
    w = [1.0, 2.0, 0.5, 1.0, 0.0]
    ref = sm.BinaryScores().update_many(y, s, w)
    variants = [
        (np.array(y, dtype=bool), np.array(s), np.array(w)),
        (pd.Series(y), pd.Series(s), pd.Series(w)),
        (np.array(y, dtype=float), tuple(s), np.array(w, dtype=np.float32)),
        (np.array(y, dtype=object), s, w),
        ([bool(v) for v in y], s, w),
    ]
    for yy, ss, ww in variants:
        assert_same_state(sm.BinaryScores().update_many(yy, ss, ww), ref)
    one = sm.BinaryScores()
    for yi, si, wi in zip([np.int64(0), np.bool_(True), 1.0, False, np.float64(1.0)], s, w):
        one.update(yi, np.float64(si), wi)
    assert_same_state(one, ref)
    assert sm.BinaryScores().update(1, 3).roc_auc_bounds is not None  # int scores accepted


def test_empty_batch_is_a_no_op():
    acc = sm.BinaryScores().update_many([1, 0], [0.3, 0.2])
    before = acc.to_dict()
    acc.update_many([], [])
    acc.update_many(np.array([], dtype=bool), np.array([]), np.array([]))
    assert acc.to_dict() == before


def test_copy_reset_deepcopy_and_add():
    a = sm.BinaryScores().update_many([0, 1, 1], [0.2, 0.7, 0.4])
    b = a.copy()
    b.update(0, 0.9)
    assert a.count == 3 and b.count == 4
    c = copy.deepcopy(a)
    c.update(1, 0.1)
    assert a.count == 3 and c.count == 4
    d = a + b
    assert d.count == 7 and a.count == 3 and b.count == 4
    a.reset()
    assert a.count == 0 and a.total_weight == 0.0 and a.to_dict() == sm.BinaryScores().to_dict()
    a.update(1, 0.5)  # the per-event path works on the reset containers
    assert a.count == 1 and a.to_dict()["state"]["events"] == [0, 1]


def test_merge_requires_same_configuration():
    with pytest.raises(ValueError, match="configuration"):
        sm.BinaryScores().merge(sm.BinaryScores(bins=128))
    with pytest.raises(ValueError, match="configuration"):
        sm.BinaryScores().merge(sm.BinaryScores(exact=True))
    with pytest.raises(ValueError, match="same type"):
        sm.BinaryScores().merge(sm.ConfusionMatrix())
    with pytest.raises(ValueError, match="configuration"):
        sm.BinaryScores(max_bins=100).merge(sm.BinaryScores())
    expected = {"bins": None, "exact": True, "max_bins": None}
    assert sm.BinaryScores(bins=32, exact=True).to_dict()["config"] == expected


@given(events(max_size=120), st.sampled_from([1, 5, 40]))
def test_exact_while_small_then_grid_coarsens_to_stay_within_max_bins(stream, max_bins):
    y, s, w = stream
    acc = per_event(y, s, w, bins=256, max_bins=max_bins)
    stored = len(acc._neg) + len(acc._pos)
    exact = sm.BinaryScores(exact=True).update_many(y, s, w)
    if acc.exact:  # exact exactly while the distinct (class, score) keys fit max_bins
        assert acc.bins_per_octave is None
        assert stored == len(exact._neg) + len(exact._pos) <= max_bins
        assert acc._neg.weights == pytest.approx(exact._neg.weights)
        assert acc._pos.weights == pytest.approx(exact._pos.weights)
        return
    assert len(exact._neg) + len(exact._pos) > max_bins
    assert stored <= max_bins or acc.bins_per_octave == 1
    assert acc.bins_per_octave <= 256
    # the grid histograms are the exact ones on the finest grid, adjacent bins merged
    # while the finer grid overflowed max_bins
    fine = exact.copy()
    fine._binning = to_grid([fine._neg, fine._pos], LogGridBinning(256))
    while fine.bins_per_octave > acc.bins_per_octave:
        assert len(fine._neg) + len(fine._pos) > max_bins
        fine._binning = coarsen_all([fine._neg, fine._pos])
    assert fine._neg.weights == pytest.approx(acc._neg.weights)
    assert fine._pos.weights == pytest.approx(acc._pos.weights)


def test_small_streams_stay_exact_and_big_ones_stay_bounded():
    rng = np.random.default_rng(5)
    small = sm.BinaryScores().update_many(rng.random(500) < 0.5, rng.random(500))
    assert small.exact and small.bins_per_octave is None
    mid = sm.BinaryScores().update_many(rng.random(5000) < 0.5, rng.random(5000))
    assert not mid.exact and mid.bins_per_octave <= 1024  # 5000 distinct scores > max_bins
    n = 200_000
    big = sm.BinaryScores().update_many(rng.random(n) < 0.5, 1 / (1 + np.exp(-rng.normal(0, 20, n))))
    assert big.bins_per_octave < 1024
    assert len(big._neg) + len(big._pos) <= 4096
    assert len(json.dumps(big.to_dict())) < 128 * 1024


def test_constructor_validation():
    for bad in (0, 3, 1000):
        with pytest.raises(ValueError, match="power of two"):
            sm.BinaryScores(bins=bad)
    for bad in ("64", 64.0, None):
        with pytest.raises(TypeError, match="bins"):
            sm.BinaryScores(bins=bad)
        with pytest.raises(TypeError, match="max_bins"):
            sm.BinaryScores(max_bins=bad)
    with pytest.raises(ValueError, match="max_bins"):
        sm.BinaryScores(max_bins=0)
    with pytest.raises(TypeError, match="exact"):
        sm.BinaryScores(exact=1)


# ----------------------------------------------------------------------------- bad input
BAD_EVENTS = [
    ((2, 0.5), ValueError, "y_true"),
    ((-1, 0.5), ValueError, "y_true"),
    (("1", 0.5), ValueError, "y_true"),
    ((None, 0.5), TypeError, "y_true"),
    ((0.5, 0.5), ValueError, "y_true"),
    ((1, float("nan")), ValueError, "score"),
    ((1, float("inf")), ValueError, "score"),
    ((1, -float("inf")), ValueError, "score"),
    ((1, "0.5"), TypeError, "score"),
    ((1, True), TypeError, "score"),
    ((1, None), TypeError, "score"),
    ((1, 0.5, -1.0), ValueError, "weight"),
    ((1, 0.5, float("nan")), ValueError, "weight"),
    ((1, 0.5, float("inf")), ValueError, "weight"),
    ((1, 0.5, "2"), TypeError, "weight"),
    ((1, 0.5, 1e301), ValueError, "weight"),
]


@pytest.mark.parametrize("args, error, name", BAD_EVENTS)
@pytest.mark.parametrize("exact", [False, True])
def test_bad_event_raises_and_leaves_state_unchanged(args, error, name, exact):
    acc = sm.BinaryScores(exact=exact).update_many([0, 1, 1], [0.2, 0.8, 3.0], [1.0, 2.0, 0.5])
    before = acc.to_dict()
    with pytest.raises(error, match=name):
        acc.update(*args)
    assert acc.to_dict() == before


BAD_BATCHES = [
    (([0, 1, 2], [0.1, 0.2, 0.3]), ValueError, r"y_true\[2\]"),
    (([0, 1, 0.5], [0.1, 0.2, 0.3]), ValueError, r"y_true\[2\]"),
    ((["a", "b", "c"], [0.1, 0.2, 0.3]), TypeError, "y_true"),
    (([0, 1, None], [0.1, 0.2, 0.3]), TypeError, r"y_true\[2\]"),
    (([0, 1, 1], [0.1, float("nan"), 0.3]), ValueError, r"scores\[1\]"),
    (([0, 1, 1], [0.1, 0.2, float("inf")]), ValueError, r"scores\[2\]"),
    (([0, 1, 1], ["x", 0.2, 0.3]), TypeError, "scores"),
    (([0, 1, 1], [0.1, 0.2]), ValueError, "inconsistent batch lengths"),
    (([0, 1, 1], [0.1, 0.2, 0.3], [1.0, -1.0, 1.0]), ValueError, r"sample_weight\[1\] must be non-negative, got -1.0"),
    (([0, 1, 1], [0.1, 0.2, 0.3], [1.0, 1.0, float("nan")]), ValueError, r"sample_weight\[2\]"),
    (([0, 1, 1], [0.1, 0.2, 0.3], [1.0, 1.0]), ValueError, "sample_weight"),
    (([0, 1, 1], [0.1, 0.2, 0.3], [1e300, 1e300, 1e300]), ValueError, "sample_weight"),
    (([[0, 1], [1, 0]], [[0.1, 0.2], [0.3, 0.4]]), ValueError, "one-dimensional"),
]


@pytest.mark.parametrize("args, error, pattern", BAD_BATCHES)
def test_bad_batch_raises_and_leaves_state_unchanged(args, error, pattern):
    acc = sm.BinaryScores().update_many([0, 1], [0.2, 0.8])
    before = acc.to_dict()
    with pytest.raises(error, match=pattern):
        acc.update_many(*args)
    assert acc.to_dict() == before


# ----------------------------------------------------------------------------- log loss guard
def test_log_loss_guard_for_scores_outside_unit_interval():
    acc = sm.BinaryScores().update_many([0, 1], [0.2, 0.9])
    assert math.isfinite(acc.log_loss())
    margins = sm.BinaryScores().update(1, 2.5).update(0, -0.5)
    for broken in (acc + margins, sm.from_dict(json.loads(json.dumps((acc + margins).to_dict())))):
        with pytest.raises(ValueError, match=r"\[0, 1\].*-0.5.*2.5"):
            broken.log_loss()
        with pytest.raises(ValueError, match="brier_score"):
            broken.brier_score()
        assert 0.0 <= broken.roc_auc() <= 1.0  # ranking metrics still work on margins
    batch = sm.BinaryScores().update_many([0, 1, 1], [0.1, 1.5, 0.3])
    with pytest.raises(ValueError, match="below 0: None, highest above 1: 1.5"):
        batch.log_loss()
    mixed = batch + sm.BinaryScores().update(0, -4.0).update(1, -1.0)
    assert mixed.to_dict()["state"]["outside_unit"] == [-4.0, 1.5]


def test_undefined_probability_metrics_warn():
    for acc in (sm.BinaryScores(), sm.BinaryScores().update(1, 0.3, 0.0)):
        for metric in (acc.log_loss, acc.brier_score):
            with pytest.warns(sm.UndefinedMetricWarning):
                assert math.isnan(metric())
        with pytest.warns(sm.UndefinedMetricWarning):
            assert all(math.isnan(v) for v in acc.roc_auc_bounds())


# ----------------------------------------------------------------------------- hostile dicts
def _good() -> dict:
    # max_bins=3 < 4 distinct (class, score) keys: on the grid (coarsened to 1 bin per octave)
    return sm.BinaryScores(max_bins=3).update_many([0, 1, 1, 0], [0.1, 0.9, 0.4, 2.0], [1, 2, 0.5, 1]).to_dict()


def _good_exact() -> dict:
    """Exact while small (the default config, 4 distinct scores)."""
    return sm.BinaryScores().update_many([0, 1, 1, 0], [0.1, 0.9, 0.4, 2.0], [1, 2, 0.5, 1]).to_dict()


@pytest.mark.parametrize("path, value, words", [
    (("config", "max_bins"), 3, "max_bins"),  # 4 exact scores cannot be held exactly under 3
    (("state", "bins_per_octave"), 1024, "key_deltas"),  # exact scores are not grid keys
    (("state", "histogram", "scores"), [0.1, 0.1, 0.4, 0.9], "ascending"),
    (("state", "histogram", "scores"), [0.1, 0.4, 0.9, float("inf")], "finite"),
    (("state", "weighted"), [2, 2, 2.0, 2.0], "weighted"),
])
def test_hostile_exact_while_small_dicts_raise_valueerror(path, value, words):
    d = _good_exact()
    assert d["state"]["bins_per_octave"] is None
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValueError, match=words):
        sm.from_dict(d)


def _mutations():
    def setter(path, value):
        def apply(d):
            node = d
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        return apply

    hist = ("state", "histogram")
    return [
        setter(("config", "bins"), 63),
        setter(("config", "bins"), "64"),
        setter(("config", "exact"), "yes"),
        setter(("config", "max_bins"), None),
        setter(("config", "max_bins"), 0),
        setter(("state", "bins_per_octave"), 2048),
        setter(("state", "bins_per_octave"), 48),
        setter(("state", "bins_per_octave"), None),
        setter(("state", "events"), [-1, 3]),
        setter(("state", "events"), [1, 1.5]),
        setter(("state", "events"), [0, 0]),
        setter(("state", "weights"), [1.0, -2.0]),
        setter(("state", "weights"), [1.0, float("inf")]),
        setter(("state", "weights"), [1.0, 99.0]),
        setter(("state", "log_loss_sum"), -1.0),
        setter(("state", "brier_sum"), "0"),
        setter(("state", "outside_unit"), [0.5, 2.0]),
        setter(("state", "outside_unit"), [3.0, 2.0]),
        setter(("state", "outside_unit"), [None, None]),
        setter(("state", "outside_unit"), [None, 0.5]),
        setter(("state", "outside_unit"), "__import__('os')"),
        setter((*hist, "neg"), [1, 0, 0]),
        setter((*hist, "neg"), ["1", 0, 0, 1]),
        setter((*hist, "pos"), [0, -2, 1, 0]),
        setter((*hist, "key_deltas"), [5, 0, 3, 1]),
        setter((*hist, "key_deltas"), [5, -1, 3, 1]),
        setter((*hist, "key_deltas"), [10**12, 1, 1, 1]),
        setter((*hist, "key_deltas"), [1.5, 1, 1, 1]),
        setter((*hist, "key_deltas"), [LogGridBinning(1024).key(1 - 2**-53) - 1, 1, 1, 1]),
        setter((*hist, "pos"), [0, 0.5, 2, 1e308]),
        setter((*hist, "scores"), [0.1, 0.2, 0.3, 0.4]),
        setter(hist, {"key_deltas": []}),
        setter(hist, None),
        setter(("state",), {}),
        setter(("version",), 99),
        setter(("type",), "os.system"),
    ]


@pytest.mark.parametrize("mutate", _mutations())
def test_hostile_dicts_raise_valueerror(mutate):
    d = json.loads(json.dumps(_good()))
    sm.from_dict(d)  # the unmutated dict loads
    mutate(d)
    with pytest.raises(ValueError):
        sm.from_dict(d)


def test_exact_dict_rejects_unsorted_or_non_finite_scores():
    d = sm.BinaryScores(exact=True).update_many([0, 1], [0.1, 0.9]).to_dict()
    sm.from_dict(d)
    for scores in ([0.9, 0.1], [0.1, 0.1], [0.1, None], [0.1, "inf"]):
        bad = json.loads(json.dumps(d))
        bad["state"]["histogram"]["scores"] = scores
        with pytest.raises(ValueError):
            sm.from_dict(bad)
    bad = json.loads(json.dumps(d))
    bad["state"]["histogram"]["scores"] = [0.1, 1e400]
    with pytest.raises(ValueError):
        sm.from_dict(bad)


# ----------------------------------------------------------------------------- histograms
@settings(max_examples=50)
@given(st.lists(st.tuples(SCORES, st.sampled_from(DYADIC)), max_size=50), st.booleans())
def test_histogram_helpers(items, exact):
    binning = ExactBinning() if exact else LogGridBinning(64)
    a, b = ScoreHistogram(binning), ScoreHistogram(binning)
    for i, (s, w) in enumerate(items):
        if w:
            h = (a if i % 2 else b).weights
            k = binning.key(s)
            h[k] = h.get(k, 0.0) + w
    batch = ScoreHistogram(binning)
    if items:
        scores, weights = map(np.array, zip(*items))
        add_grouped([batch], binning.keys(scores), None, weights)
    assert summed([a, b], binning) == batch
    keys, weights = aligned(a, b)
    assert np.all(np.diff(keys) > 0)
    assert weights.sum() == pytest.approx(sum(w for _, w in items))
    data = json.loads(json.dumps(histograms_to_json([a, b], ["a", "b"])))
    assert histograms_from_json(data, binning, ["a", "b"]) == [a, b]
    with pytest.raises(ValueError):
        histograms_from_json(data, binning, ["a", "c"])
    with pytest.raises(ValueError, match="different binnings"):
        aligned(a, ScoreHistogram(LogGridBinning(128)))


@pytest.mark.parametrize("exact", [False, True])
def test_levels_built_once_give_each_metric_its_own_value_and_are_rebuilt_after_a_change(exact):
    rng = np.random.default_rng(5)
    s = sm.BinaryScores(exact=True) if exact else sm.BinaryScores(max_bins=64)
    s.update_many(rng.integers(0, 2, 3000), rng.random(3000), rng.choice([0.5, 1.0, 2.0], 3000))
    alone = (s.roc_auc(), s.roc_auc_bounds(), s.average_precision(), s.roc_curve()[0].tolist())
    assert (s.roc_auc(), s.roc_auc_bounds(), s.average_precision(), s.roc_curve()[0].tolist()) == alone
    fresh = sm.BinaryScores.from_dict(s.to_dict())
    assert (fresh.roc_auc(), fresh.average_precision(), fresh.roc_curve()[0].tolist()) == (alone[0], *alone[2:])
    s.update(1, 0.123456)  # a change is read again
    assert s.roc_auc_bounds() != alone[1] or s.roc_auc() != alone[0]
    before = s.roc_auc()
    s.update(0, 0.99)  # the levels built once are not read after a change
    assert s.roc_auc() != before
    assert s.roc_auc() == sm.BinaryScores.from_dict(s.to_dict()).roc_auc()
