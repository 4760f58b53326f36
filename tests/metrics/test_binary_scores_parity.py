"""BinaryScores(exact=True) against scikit-learn on hypothesis-generated streams.

Streams mix per-event updates, batches and merges in random order; scores are drawn
from small pools (ties), weights include zeros. Weights are dyadic (k/4) wherever a
curve is compared point by point: scikit-learn drops "collinear" ROC points with exact
float tests, so only exactly representable cumulative sums make the comparison
meaningful. Warnings are compared by class name and message.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.kernels.ranking import rounding_slack

TOL = 1e-12
DYADIC = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.75]


# ----------------------------------------------------------------------------- streams
@st.composite
def streams(draw, weights="dyadic", max_size=40, kind="mixed"):
    n = draw(st.integers(1, max_size))
    if kind == "probabilities":
        pool_values = st.one_of(
            st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e-12, 1 - 1e-12, 1 - 2**-53, 2**-60]),
            st.floats(0.0, 1.0),
        )
    else:
        pool_values = st.one_of(
            st.sampled_from([0.0, 1.0, 0.5, -0.0, 1e-12, 1 - 1e-12, -3.0, 40.0]),
            st.floats(0.0, 1.0),
            st.floats(-1e6, 1e6),
        )
    pool = draw(st.lists(pool_values, min_size=1, max_size=8))
    scores = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    y = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if weights is None:
        w = None
    elif weights == "dyadic":
        w = draw(st.one_of(st.none(), st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n)))
    else:
        # positive weights are normal floats: a subnormal weight's products w * term fall below
        # 2**-1074, where float (sklearn's and our exact sums' resolution alike) has no digits left
        # (weights [0]*7 + [5e-324] gave a Brier of 1.0 here and 0.5 in sklearn)
        w = draw(st.lists(st.one_of(st.just(0.0), st.floats(2.0**-1022, 100.0)), min_size=n, max_size=n))
    return np.array(y), np.array(scores, dtype=np.float64), None if w is None else np.array(w)


def accumulate(draw, y, s, w, **config) -> sm.BinaryScores:
    """Feed the events through a random mix of update, update_many and merge."""
    parts = []
    n = len(y)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [0, *cuts, n]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        acc = sm.BinaryScores(**config)
        if draw(st.booleans()):
            for i in range(lo, hi):
                yi = bool(y[i]) if draw(st.booleans()) else int(y[i])
                if w is None:
                    acc.update(yi, float(s[i]))
                else:
                    acc.update(yi, float(s[i]), float(w[i]))
        else:
            acc.update_many(y[lo:hi], s[lo:hi], None if w is None else w[lo:hi])
        parts.append(acc)
    order = draw(st.permutations(range(len(parts))))
    total = parts[order[0]].copy()
    for i in order[1:]:
        total.merge(parts[i])
    return total


def run(fn, *args, **kwargs):
    """(result or the exception, [(warning class name, message)]) of a call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except (ValueError, IndexError) as exc:
            result = exc
    notes = sorted(
        (w.category.__name__, str(w.message))
        for w in caught
        if w.category.__name__ in ("UndefinedMetricWarning", "UserWarning")
    )
    return result, notes


def same_value(a, b, tol=TOL) -> bool:
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol


def same_array(a, b, tol=TOL) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    close = np.isclose(a, b, rtol=0, atol=tol) | (a == b)
    return bool(np.all(both_nan | close))


def same_scalar(ours, our_notes, theirs, their_notes) -> None:
    """Equal values and warnings; where scikit-learn raises on a degenerate input (e.g.
    ``max_fpr`` with no negative weight: "At least 2 points are needed") we return nan
    with an UndefinedMetricWarning instead (documented)."""
    if isinstance(theirs, Exception):
        assert math.isnan(ours)
        assert any(name == "UndefinedMetricWarning" for name, _ in our_notes)
        return
    assert same_value(ours, theirs), (ours, theirs)
    assert our_notes == their_notes


def sk_defined(w) -> bool:
    """scikit-learn raises when every weight is zero (we return nan / raise instead)."""
    return w is None or bool(np.any(w != 0))


# ----------------------------------------------------------------------------- ROC AUC
@given(data=st.data())
def test_roc_auc_matches_sklearn(data):
    y, s, w = data.draw(streams(weights="dyadic"))
    acc = accumulate(data.draw, y, s, w, exact=True)
    assume(sk_defined(w))
    ours, our_notes = run(acc.roc_auc)
    theirs, their_notes = run(skm.roc_auc_score, y, s, sample_weight=w)
    same_scalar(ours, our_notes, theirs, their_notes)
    bounds, _ = run(acc.roc_auc_bounds)
    # an exact state's bounds are its value widened by the bound on float rounding only
    levels = len(set(np.asarray(s).tolist()))  # at least the levels holding weight
    assert math.isnan(ours) or (bounds[0] <= ours <= bounds[1]
                                and bounds[1] - bounds[0] <= 2 * rounding_slack(levels) + 4e-16)


@given(data=st.data())
def test_roc_auc_arbitrary_weights(data):
    y, s, w = data.draw(streams(weights="any"))
    acc = accumulate(data.draw, y, s, w, exact=True)
    assume(sk_defined(w))
    ours, _ = run(acc.roc_auc)
    theirs, _ = run(skm.roc_auc_score, y, s, sample_weight=w)
    assert same_value(ours, theirs, 1e-12), (ours, theirs)


@settings(max_examples=100)
@given(data=st.data(), max_fpr=st.one_of(st.floats(0.01, 1.0), st.sampled_from([1.0, 0.5, 0.25, 1e-3])))
def test_partial_roc_auc_matches_sklearn(data, max_fpr):
    y, s, w = data.draw(streams(weights="dyadic"))
    acc = accumulate(data.draw, y, s, w, exact=True)
    assume(sk_defined(w))
    ours, our_notes = run(acc.roc_auc, max_fpr=max_fpr)
    theirs, their_notes = run(skm.roc_auc_score, y, s, sample_weight=w, max_fpr=max_fpr)
    same_scalar(ours, our_notes, theirs, their_notes)


def test_partial_auc_without_negative_weight_is_nan_where_sklearn_raises():
    acc = sm.BinaryScores(exact=True).update_many([0, 1], [0.0, 0.0], [0.0, 0.25])
    with pytest.raises(ValueError, match="At least 2 points"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skm.roc_auc_score([0, 1], [0.0, 0.0], sample_weight=[0.0, 0.25], max_fpr=0.5)
    with pytest.warns(sm.UndefinedMetricWarning, match="No negative samples"):
        assert math.isnan(acc.roc_auc(max_fpr=0.5))


def test_partial_auc_rejects_bad_max_fpr():
    acc = sm.BinaryScores(exact=True).update_many([0, 1], [0.2, 0.7])
    for bad in (0, 0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="max_fpr"):
            acc.roc_auc(max_fpr=bad)
    with pytest.raises(TypeError, match="max_fpr"):
        acc.roc_auc(max_fpr="0.5")


# ----------------------------------------------------------------------------- curves
@given(data=st.data(), drop=st.booleans())
def test_roc_curve_matches_sklearn(data, drop):
    y, s, w = data.draw(streams(weights="dyadic"))
    acc = accumulate(data.draw, y, s, w, exact=True)
    assume(sk_defined(w))
    ours, our_notes = run(acc.roc_curve, drop_intermediate=drop)
    theirs, their_notes = run(skm.roc_curve, y, s, sample_weight=w, drop_intermediate=drop)
    assert our_notes == their_notes
    for a, b in zip(ours, theirs):
        assert same_array(a, b), (a, b)
    assert np.array_equal(ours[2], theirs[2])  # thresholds: the scores themselves, inf first


@given(data=st.data(), drop=st.booleans())
def test_precision_recall_curve_matches_sklearn(data, drop):
    y, s, w = data.draw(streams(weights="dyadic"))
    acc = accumulate(data.draw, y, s, w, exact=True)
    assume(sk_defined(w))
    ours, our_notes = run(acc.precision_recall_curve, drop_intermediate=drop)
    theirs, their_notes = run(
        skm.precision_recall_curve, y, s, sample_weight=w, drop_intermediate=drop
    )
    assert our_notes == their_notes
    for a, b in zip(ours, theirs):
        assert same_array(a, b), (a, b)


@given(data=st.data())
def test_average_precision_matches_sklearn(data):
    y, s, w = data.draw(streams(weights=data.draw(st.sampled_from(["dyadic", "any"]))))
    acc = accumulate(data.draw, y, s, w, exact=True)
    assume(sk_defined(w))
    ours, our_notes = run(acc.average_precision)
    theirs, their_notes = run(skm.average_precision_score, y, s, sample_weight=w)
    same_scalar(ours, our_notes, theirs, their_notes)


def test_average_precision_is_a_step_sum():
    y, s = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]
    acc = sm.BinaryScores(exact=True).update_many(y, s)
    assert acc.average_precision() == pytest.approx(0.8333333333333333, abs=1e-15)
    precision, recall, _ = acc.precision_recall_curve()
    trapezoid = -getattr(np, "trapezoid", getattr(np, "trapz", None))(precision, recall)
    assert abs(trapezoid - acc.average_precision()) > 0.03  # 0.79 vs 0.83


def test_sklearn_raise_cases_give_nan_or_valueerror():
    empty = sm.BinaryScores(exact=True)
    zero = sm.BinaryScores(exact=True).update_many([0, 1], [0.2, 0.7], [0.0, 0.0])
    for acc in (empty, zero):
        for metric in (acc.roc_auc, acc.average_precision):
            with pytest.warns(sm.UndefinedMetricWarning):
                assert math.isnan(metric())
        for curve in (acc.roc_curve, acc.precision_recall_curve):
            with pytest.raises(ValueError, match="non-zero weight"):
                curve()
    with pytest.warns(sm.UndefinedMetricWarning, match="No event"):
        assert math.isnan(empty.roc_auc())


# ----------------------------------------------------------------------------- probabilities
@given(data=st.data())
def test_log_loss_and_brier_match_sklearn(data):
    y, s, w = data.draw(streams(weights=data.draw(st.sampled_from(["dyadic", "any"])), kind="probabilities"))
    acc = accumulate(data.draw, y, s, w, exact=data.draw(st.booleans()))
    assume(sk_defined(w))
    theirs = skm.log_loss(y, s, sample_weight=w, labels=[0, 1])
    assert acc.log_loss() == pytest.approx(theirs, rel=1e-12, abs=1e-12)
    theirs = skm.brier_score_loss(y, s, sample_weight=w)
    assert acc.brier_score() == pytest.approx(theirs, rel=1e-12, abs=1e-12)


def test_log_loss_clips_at_float64_eps_not_1e15():
    acc = sm.BinaryScores().update_many([1, 0], [0.0, 1.0])
    expected = -math.log(np.finfo(np.float64).eps)
    assert acc.log_loss() == pytest.approx(expected, rel=1e-15)
    assert acc.log_loss() == pytest.approx(skm.log_loss([1, 0], [0.0, 1.0]), rel=1e-15)
    assert abs(acc.log_loss() - (-math.log(1e-15))) > 1.0


def test_a_score_of_negative_zero_is_a_score_of_zero():
    """-0.0 is 0.0: its log-loss and Brier terms are those of 0.0 on every path (per event,
    weighted, batch, removal; the monitor's), as scikit-learn's (it signs events internally)."""
    y, s, w = [0, 1, 1], [-0.0, 0.9, -0.0], [1.0, 1.0, 2.0]
    zero = [0.0, 0.9, 0.0]
    theirs = (skm.log_loss(y, zero, sample_weight=w), skm.brier_score_loss(y, zero, sample_weight=w))
    per_event = sm.BinaryScores()
    for args in zip(y, s, w):
        per_event.update(*args)
    batch = sm.BinaryScores().update_many(y, s, w)
    removed = sm.BinaryScores().update_many(y + [0], s + [-0.0], w + [3.0]).remove(0, -0.0, 3.0)
    monitor = sm.BinaryMonitor().update_many([{"y_true": a, "score": b, "weight": c} for a, b, c in zip(y, s, w)])
    for acc in (per_event, batch, removed, monitor.scores):
        assert (acc.log_loss(), acc.brier_score()) == pytest.approx(theirs, rel=1e-14)


def test_one_event_per_event_log_loss_matches_sklearn():
    acc = sm.BinaryScores()
    for y, s, w in [(1, 0.9, 2.0), (0, 0.2, 1.0), (True, 1e-300, 0.5), (False, 1.0, 1.0)]:
        acc.update(y, s, w)
    theirs = skm.log_loss([1, 0, 1, 0], [0.9, 0.2, 1e-300, 1.0], sample_weight=[2, 1, 0.5, 1])
    assert acc.log_loss() == pytest.approx(theirs, rel=1e-14)


# ----------------------------------------------------------------------------- confusion
@given(data=st.data())
def test_confusion_at_matches_sklearn(data):
    y, s, w = data.draw(streams(weights="dyadic"))
    w = None if w is None else w + 0.25  # zero-weight cells are not kept (documented)
    acc = accumulate(data.draw, y, s, w, exact=True)
    threshold = data.draw(st.one_of(st.sampled_from(s.tolist()), st.floats(-10, 10)))
    cm = acc.confusion_at(threshold)
    expected = skm.confusion_matrix(y, s >= threshold, labels=[0, 1], sample_weight=w)
    assert np.allclose(cm.matrix(labels=[0, 1]), expected, rtol=0, atol=1e-9)
    assert cm.count == len(y)
    pred = (s >= threshold).astype(int)
    for metric in ("precision_score", "recall_score", "f1_score"):
        ours, _ = run(getattr(cm, metric.split("_")[0]))
        theirs, _ = run(getattr(skm, metric), y.astype(int), pred, sample_weight=w, labels=[0, 1])
        assert same_value(ours, theirs), metric


def test_confusion_at_binned_thresholds_are_exact():
    rng = np.random.default_rng(3)
    y = rng.random(500) < 0.4
    s = np.concatenate([rng.random(400), rng.normal(0, 5, 100)])
    acc = sm.BinaryScores().update_many(y, s)
    _, _, thresholds = acc.roc_curve(drop_intermediate=False)
    for t in list(thresholds[1:50]) + [0.0, 0.5, 1.0]:
        expected = skm.confusion_matrix(y, s >= t, labels=[False, True])
        assert np.array_equal(acc.confusion_at(t).matrix(labels=[0, 1]), expected)
