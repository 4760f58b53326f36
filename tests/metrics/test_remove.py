"""``remove()`` on ConfusionMatrix, BinaryScores and Regression: ``update`` then ``remove``
equals never adding the event (exact state for unit weights, float sums approximately),
sliding windows equal a fresh accumulator of the window, and events that were never
added are refused with the state unchanged."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.kernels.binning import LogGridBinning
from streammetrics.kernels.histogram import to_grid

UNIT = None  # marker: update/remove without a weight argument (the default weight)

labels = st.sampled_from(["a", "b", "c"])
weights = st.sampled_from([UNIT, UNIT, 1.0, 0.5, 2.0, 7.25])
positive_weights = st.sampled_from([1.0, 0.5, 2.0, 7.25])
probabilities = st.one_of(
    st.floats(0.0, 1.0, allow_nan=False),
    st.sampled_from([0.0, 1.0, 1e-17, 1.0 - 1e-16, 0.5]),
)
scores = st.one_of(probabilities, st.floats(-1e6, 1e6, allow_nan=False))


def _apply(acc, method, event):
    *args, w = event
    getattr(acc, method)(*args) if w is UNIT else getattr(acc, method)(*args, w)


def _shuffled(draw, events):
    return draw(st.permutations(events)) if events else []


# ----------------------------------------------------------------------------- ConfusionMatrix
cm_events = st.tuples(labels, labels, weights)


@given(st.data(), st.lists(cm_events, max_size=30), st.lists(st.tuples(labels, labels, st.just(UNIT)), max_size=10))
def test_confusion_unit_update_then_remove_is_never_added(data, base, extra):
    expected = sm.ConfusionMatrix()
    for e in base:
        _apply(expected, "update", e)
    got = expected.copy()
    for e in extra:
        _apply(got, "update", e)
    for e in _shuffled(data.draw, extra):
        _apply(got, "remove", e)
    assert got.to_dict() == expected.to_dict()
    assert got.count == expected.count and got.labels == expected.labels


@given(st.data(), st.lists(cm_events, max_size=30), st.lists(st.tuples(labels, labels, positive_weights), max_size=10))
def test_confusion_weighted_update_then_remove(data, base, extra):
    expected = sm.ConfusionMatrix()
    for e in base:
        _apply(expected, "update", e)
    got = expected.copy()
    for e in extra:
        _apply(got, "update", e)
    for e in _shuffled(data.draw, extra):
        _apply(got, "remove", e)
    assert got.count == expected.count
    want = expected.counts()
    have = got.counts()
    # zero-weight events keep their cell; with weights >= 0.5 no cell is mistaken for residue
    assert {k for k, v in have.items() if v > 0} == {k for k, v in want.items() if v > 0}
    for key, v in want.items():
        assert have.get(key, 0.0) == pytest.approx(v, rel=1e-12, abs=1e-12)
    if all(e[2] in (UNIT, 1.0) for e in base):  # no weighted event is left: exact again
        assert got.to_dict() == expected.to_dict()


@given(st.lists(cm_events, min_size=1, max_size=60), st.integers(1, 8))
def test_confusion_sliding_window_equals_fresh_window(events, k):
    cm = sm.ConfusionMatrix()
    unit = all(e[2] in (UNIT, 1.0) for e in events)
    for i, e in enumerate(events):
        if i >= k:
            _apply(cm, "remove", events[i - k])
        _apply(cm, "update", e)
        fresh = sm.ConfusionMatrix()
        for f in events[max(0, i - k + 1): i + 1]:
            _apply(fresh, "update", f)
        if unit:
            assert cm.to_dict() == fresh.to_dict()
        assert cm.count == fresh.count
        assert cm.total_weight == pytest.approx(fresh.total_weight, rel=1e-12, abs=1e-12)


def test_confusion_remove_refuses_events_never_added():
    cm = sm.ConfusionMatrix().update("a", "b").update("a", "a", 2.0)
    before = cm.to_dict()
    # ("a", "a", 0.0): the cell exists, but the last weighted event must take its 2.0 along
    for args in [("b", "a"), ("a", "c"), ("a", "a", 3.0), ("a", "b", 0.0), ("a", "a", 0.0)]:
        with pytest.raises(ValueError, match="never added"):
            cm.remove(*args)
    with pytest.raises(ValueError, match="a str label"):
        sm.ConfusionMatrix().update(1, 1).remove("1", "1")
    with pytest.raises(ValueError, match="a bool label"):  # True == 1, but a bool is not a number label
        sm.ConfusionMatrix().update(1, 1).remove(True, True)
    with pytest.raises(ValueError, match="weight"):
        cm.remove("a", "b", -1.0)
    assert cm.to_dict() == before
    cm.remove("a", "b")
    assert cm.labels == ["a"]  # with labels=None, a label no event uses any more is gone
    cm.remove("a", "a", 2.0)
    assert cm.to_dict() == sm.ConfusionMatrix().to_dict()
    cm.update(True, False)  # empty again: the label kind is free again
    assert cm.labels == [False, True]


def test_confusion_zero_weight_and_numpy_labels():
    cm = sm.ConfusionMatrix().update(1, 2)
    expected = cm.to_dict()
    cm.update(np.int64(3), 3.0, 0.0)  # a zero-weight event still marks its labels as seen
    assert cm.labels == [1, 2, 3]
    cm.remove(3, np.float64(3.0), 0)
    assert cm.to_dict() == expected


def test_confusion_remove_after_from_dict():
    cm = sm.ConfusionMatrix().update("x", "y", 0.5).update("x", "x")
    back = sm.from_dict(cm.to_dict())  # weighted state: cells are float sums
    back.remove("x", "x").remove("x", "y", 0.5)
    assert back.count == 0 and back.to_dict() == sm.ConfusionMatrix().to_dict()


# ----------------------------------------------------------------------------- BinaryScores
bs_events = st.tuples(st.booleans(), probabilities, weights)


def _bs_state(b: sm.BinaryScores) -> tuple[dict, float, float]:
    state = b.to_dict()["state"]
    state.pop("sum_residues"), state.pop("weighted")  # weighted: a float sum, order-dependent
    return state, state.pop("log_loss_sum"), state.pop("brier_sum")


def _assert_bs_equal(got: sm.BinaryScores, want: sm.BinaryScores, exact_weights: bool) -> None:
    (gs, gl, gb), (ws, wl, wb) = _bs_state(got), _bs_state(want)
    assert gl == pytest.approx(wl, rel=1e-12, abs=1e-12)
    assert gb == pytest.approx(wb, rel=1e-12, abs=1e-12)
    if exact_weights:
        assert gs == ws
    else:
        assert gs["events"] == ws["events"] and gs["bins_per_octave"] == ws["bins_per_octave"]
        assert gs["weights"] == pytest.approx(ws["weights"], rel=1e-12, abs=1e-12)
        field = "scores" if gs["bins_per_octave"] is None else "key_deltas"
        gk, wk = (np.cumsum(s["histogram"][field]) for s in (gs, ws))
        np.testing.assert_array_equal(gk, wk)
        for c in ("neg", "pos"):
            np.testing.assert_allclose(gs["histogram"][c], ws["histogram"][c], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("exact", [False, True])
@given(data=st.data(), base=st.lists(bs_events, max_size=30),
       extra=st.lists(st.tuples(st.booleans(), probabilities, st.just(UNIT)), max_size=10))
def test_binary_unit_update_then_remove_is_never_added(exact, data, base, extra):
    expected = sm.BinaryScores(exact=exact)
    for e in base:
        _apply(expected, "update", e)
    got = expected.copy()
    for e in extra:
        _apply(got, "update", e)
    for e in _shuffled(data.draw, extra):
        _apply(got, "remove", e)
    _assert_bs_equal(got, expected, exact_weights=True)
    if expected.count and expected.total_weight:
        assert got.log_loss() == pytest.approx(expected.log_loss(), rel=1e-12, abs=1e-12)


@given(data=st.data(), base=st.lists(bs_events, max_size=30),
       extra=st.lists(st.tuples(st.booleans(), scores, positive_weights), max_size=10))
def test_binary_weighted_update_then_remove(data, base, extra):
    expected = sm.BinaryScores()
    for e in base:
        _apply(expected, "update", e)
    got = expected.copy()
    for e in extra:
        _apply(got, "update", e)
    for e in _shuffled(data.draw, extra):
        _apply(got, "remove", e)
    if any(not 0.0 <= e[1] <= 1.0 for e in extra) and got.count:
        # a removed margin keeps log loss undefined until the accumulator is empty
        with pytest.raises(ValueError, match="outside"):
            got.log_loss()
        got._outside = [None, None]  # compare the rest of the state
    _assert_bs_equal(got, expected, exact_weights=False)


@given(st.lists(st.tuples(st.booleans(), scores), min_size=1, max_size=80), st.integers(1, 10))
def test_binary_sliding_window_equals_fresh_window(events, k):
    b = sm.BinaryScores(exact=True)
    for i, (y, s) in enumerate(events):
        if i >= k:
            b.remove(*events[i - k])
        b.update(y, s)
        window = events[max(0, i - k + 1): i + 1]
        fresh = sm.BinaryScores(exact=True).update_many([e[0] for e in window], [e[1] for e in window])
        assert b._neg == fresh._neg and b._pos == fresh._pos
        assert b.count == fresh.count and b.total_weight == fresh.total_weight
    y = [e[0] for e in window]
    s = [e[1] for e in window]
    if len(set(y)) == 2:
        assert b.roc_auc() == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)


def test_binary_long_window_log_loss_stays_accurate():
    """20 000 events through a window of 100: the running product is divided on removal,
    so the log loss keeps ~1e-13 relative accuracy (clipped scores 0, 1 and 1e-17 included)."""
    rng = np.random.default_rng(7)
    n, k = 20_000, 100
    y = rng.random(n) < 0.3
    s = np.clip(rng.beta(2, 5, n) + 0.3 * y, 0.0, 1.0)
    s[::97], s[::89], s[::83] = 1.0, 0.0, 1e-17
    b = sm.BinaryScores()
    for i in range(n):
        if i >= k:
            b.remove(bool(y[i - k]), float(s[i - k]))
        b.update(bool(y[i]), float(s[i]))
    yw, sw = y[-k:], s[-k:]
    assert b.log_loss() == pytest.approx(skm.log_loss(yw, sw, labels=[0, 1]), rel=1e-11)
    assert b.brier_score() == pytest.approx(skm.brier_score_loss(yw, sw), rel=1e-11)
    fresh = sm.BinaryScores().update_many(yw, sw)
    assert b._neg == fresh._neg and b._pos == fresh._pos
    assert b.roc_auc() == fresh.roc_auc()


def test_binary_remove_refuses_events_never_added():
    b = sm.BinaryScores(exact=True).update(1, 0.3).update(0, 0.6, 2.0)
    before = b.to_dict()
    cases = [(1, 0.4), (0, 0.3), (0, 0.6, 3.0), (1, 0.3, 2.0), (1, 0.3, 0.0), (2, 0.3), (1, math.nan)]
    for args in cases:
        with pytest.raises(ValueError):
            b.remove(*args)
    assert b.to_dict() == before
    binned = sm.BinaryScores(max_bins=1).update(1, 0.3).update(1, 0.31)  # on the grid
    with pytest.raises(ValueError, match="never added"):
        binned.remove(1, 0.9)  # another bin
    with pytest.raises(ValueError, match="never added"):
        binned.remove(0, 0.3)  # no negative at all


def test_binary_remove_keeps_coarse_grid_and_restores_fresh_state_when_empty():
    b = sm.BinaryScores(max_bins=4)
    events = [(i % 2 == 0, (i + 1) / 11) for i in range(10)]
    for e in events:
        b.update(*e)
    coarse = b.bins_per_octave
    assert coarse < 1024
    for e in events[:6]:
        b.remove(*e)
    assert b.bins_per_octave == coarse  # removal never refines the grid
    rest = events[6:]
    fresh = sm.BinaryScores(exact=True).update_many([e[0] for e in rest], [e[1] for e in rest])
    to_grid([fresh._neg, fresh._pos], LogGridBinning(coarse))  # the remaining events on that grid
    assert b._neg.weights == fresh._neg.weights and b._pos.weights == fresh._pos.weights
    for e in rest:
        b.remove(*e)
    assert b.to_dict() == sm.BinaryScores(max_bins=4).to_dict() and b.exact  # fresh: exact again


def test_binary_margin_removal_keeps_log_loss_undefined_until_empty():
    b = sm.BinaryScores().update(1, 0.9).update(0, 2.5)
    b.remove(0, 2.5)
    with pytest.raises(ValueError, match="outside"):
        b.log_loss()
    assert b.roc_auc_bounds  # ranking metrics are unaffected
    b.remove(1, 0.9)
    assert b.to_dict() == sm.BinaryScores().to_dict()
    assert b.update(1, 0.25).log_loss() == pytest.approx(-math.log(0.25))


# ----------------------------------------------------------------------------- Regression
values = st.floats(-1e3, 1e3, allow_nan=False)
reg_events = st.tuples(values, values, weights)


def _reg_close(got: sm.Regression, want: sm.Regression, peak: sm.Regression) -> None:
    """Equal up to rounding: a sum that lost terms keeps an error of a few ulps of its
    largest value (``peak``, before the removals; MAPE terms with y_true = 0 are ~1e16)."""
    g, w, top = (a.to_dict()["state"] for a in (got, want, peak))
    assert g["count"] == w["count"] and g["log_invalid"] == w["log_invalid"]
    for key in ("weight", "sse", "sae", "sle", "ape", "m2"):
        scale = max(1.0, w[key], g[key], top[key])
        assert g[key] == pytest.approx(w[key], rel=1e-9, abs=1e-12 * scale), key
    assert g["mean"][0] + g["mean"][1] == pytest.approx(w["mean"][0] + w["mean"][1], rel=1e-9, abs=1e-9)
    assert g["max_error"] == "nan" or g["max_error"] == w["max_error"]


@given(data=st.data(), base=st.lists(reg_events, max_size=25), extra=st.lists(reg_events, max_size=8))
def test_regression_update_then_remove_is_never_added(data, base, extra):
    expected = sm.Regression()
    for e in base:
        _apply(expected, "update", e)
    got = expected.copy()
    for e in extra:
        _apply(got, "update", e)
    peak = got.copy()
    for e in _shuffled(data.draw, extra):
        _apply(got, "remove", e)
    _reg_close(got, expected, peak)
    assert sm.from_dict(got.to_dict()).to_dict() == got.to_dict()  # a valid state


@given(st.lists(st.tuples(values, values), min_size=1, max_size=60), st.integers(2, 10))
def test_regression_sliding_window_matches_sklearn(events, k):
    r = sm.Regression()
    for i, (t, p) in enumerate(events):
        if i >= k:
            r.remove(*events[i - k])
        r.update(t, p)
    window = events[-k:]
    yt = np.array([e[0] for e in window])
    yp = np.array([e[1] for e in window])
    assert r.count == len(window)
    scale = max(1.0, float(np.max(np.abs(yt - yp))) ** 2)
    assert r.mse() == pytest.approx(skm.mean_squared_error(yt, yp), rel=1e-9, abs=1e-9 * scale)
    assert r.mae() == pytest.approx(skm.mean_absolute_error(yt, yp), rel=1e-9, abs=1e-9 * math.sqrt(scale))
    if len(window) >= 2:
        var = float(np.sum((yt - yt.mean()) ** 2))
        if var > 1e-6 * max(1.0, float(np.max(np.abs(yt)))) ** 2:  # well-conditioned R²
            assert r.r2() == pytest.approx(skm.r2_score(yt, yp), rel=1e-6, abs=1e-6)


def test_regression_reversal_on_large_offset():
    """1e6 + noise over a sliding window of 100 (20 000 events): R² and MSE stay within 1e-9."""
    rng = np.random.default_rng(3)
    n, k = 20_000, 100
    yt = 1e6 + rng.normal(size=n)
    yp = yt + rng.normal(size=n)
    r = sm.Regression()
    for i in range(n):
        if i >= k:
            r.remove(float(yt[i - k]), float(yp[i - k]))
        r.update(float(yt[i]), float(yp[i]))
    assert r.r2() == pytest.approx(skm.r2_score(yt[-k:], yp[-k:]), abs=1e-9)
    assert r.mse() == pytest.approx(skm.mean_squared_error(yt[-k:], yp[-k:]), rel=1e-9)


def test_regression_constant_rest_has_zero_m2():
    r = sm.Regression().update_many([1.0, 1.0, 2.0], [1.0, 1.5, 2.0])
    r.remove(2.0, 2.0)
    assert r.to_dict()["state"]["m2"] == 0.0
    assert r.r2() == 0.0  # scikit-learn's force_finite rule for constant y_true
    assert r.r2() == skm.r2_score([1.0, 1.0], [1.0, 1.5])


def test_regression_max_error_becomes_unknown_when_its_event_leaves():
    r = sm.Regression().update(0.0, 5.0).update(0.0, 1.0)
    r.remove(0.0, 1.0)
    assert r.max_error() == 5.0  # the maximum is still there
    r.update(0.0, 1.0).remove(0.0, 5.0)
    assert math.isnan(r.max_error())
    assert r.mae() == 1.0
    r.remove(0.0, 1.0)
    assert r.to_dict() == sm.Regression().to_dict()


def test_regression_remove_refuses_events_never_added():
    r = sm.Regression().update(1.0, 2.0).update(3.0, 3.5, 2.0)
    before = r.to_dict()
    for args in [(0.0, 5.0), (1.0, 2.0, 5.0), (-2.0, 0.0), (1.0, math.inf), ("1", 2.0)]:
        with pytest.raises((ValueError, TypeError)):
            r.remove(*args)
    assert r.to_dict() == before
    one = sm.Regression().update(1.0, 2.0)
    with pytest.raises(ValueError, match="last event"):
        one.remove(1.0, 2.0, 0.0)  # a zero-weight event that was never added
    with pytest.raises(ValueError, match="no event is left"):
        sm.Regression().remove(1.0, 1.0)


def test_regression_zero_weight_and_log_invalid_events():
    r = sm.Regression().update(1.0, 2.0)
    expected = r.to_dict()
    r.update(-3.0, 0.5, 0.0).update(-2.0, 1.0)
    with pytest.raises(ValueError, match="-1"):
        r.rmsle()
    r.remove(-3.0, 0.5, 0.0).remove(-2.0, 1.0)
    assert r.rmsle() == pytest.approx(abs(math.log1p(1.0) - math.log1p(2.0)))
    state = r.to_dict()["state"]
    assert state["count"] == 1 and state["log_invalid"] == 0
    assert state["sse"] == pytest.approx(expected["state"]["sse"])
    # every positive weight removed, a zero-weight event left: the sums of no event
    r.update(5.0, 5.0, 0.0).remove(1.0, 2.0)
    assert r.count == 1 and r.total_weight == 0.0
    assert sm.from_dict(r.to_dict()).count == 1
