"""Calibration kernels: torchmetrics' ECE formula (numpy reimplementation, and torchmetrics
itself where installed), sklearn's calibration_curve, bounds on binned levels."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import calibration as cal
from streammetrics.kernels.binning import ExactBinning, LogGridBinning
from streammetrics.kernels.histogram import ScoreHistogram, add_grouped, aligned
from streammetrics.kernels.levels import level_bounds, representative

POOL = [0.0, 0.05, 0.1, 0.2, 1 / 3, 0.5, 0.6, 0.8, 0.95, 1.0]
scores_st = st.one_of(st.sampled_from(POOL), st.floats(0.0, 1.0))


@st.composite
def labelled(draw, weighted=False, min_size=1):
    n = draw(st.integers(min_size, 50))
    s = np.array(draw(st.lists(scores_st, min_size=n, max_size=n)))
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    w = (np.array(draw(st.lists(st.floats(0.1, 4.0), min_size=n, max_size=n)))
         if weighted else np.ones(n))
    return y, s, w


def levels_of(y, s, w, binning):
    neg, pos = ScoreHistogram(binning), ScoreHistogram(binning)
    add_grouped([neg, pos], binning.keys(s), y, w)
    keys, table = aligned(neg, pos)
    return keys, table[0], table[1]


def ece_direct(y, s, w, n_bins, norm):
    """torchmetrics' _ce_compute written out on the events, with weights for counts."""
    b = cal.torch_linspace(n_bins)
    idx = np.searchsorted(b, s, side="right") - 1
    count = np.bincount(idx, weights=w, minlength=n_bins + 1)
    with np.errstate(invalid="ignore"):
        conf = np.nan_to_num(np.bincount(idx, weights=s * w, minlength=n_bins + 1) / count)
        acc = np.nan_to_num(np.bincount(idx, weights=y * w, minlength=n_bins + 1) / count)
    prop = count / count.sum()
    if norm == "l1":
        return float(np.sum(np.abs(acc - conf) * prop))
    if norm == "max":
        return float(np.max(np.abs(acc - conf)))
    ce = float(np.sum((acc - conf) ** 2 * prop))
    return math.sqrt(ce) if ce > 0 else 0.0


@given(labelled(weighted=True), st.integers(1, 20), st.sampled_from(cal.NORMS))
def test_ece_matches_the_formula_on_events(data, n_bins, norm):
    y, s, w = data
    keys, neg, pos = levels_of(y, s, w, ExactBinning())
    got = cal.calibration_error(keys, neg, pos, n_bins, norm)
    assert got == pytest.approx(ece_direct(y, s, w, n_bins, norm), abs=1e-12)
    low, high = cal.calibration_error_bounds(keys, keys, neg, pos, n_bins, norm)
    assert low <= got <= high and high - low < 1e-9


def test_torch_linspace_matches_torch():
    torch = pytest.importorskip("torch")
    for n in range(1, 40):
        expected = torch.linspace(0, 1, n + 1, dtype=torch.float64).numpy()
        assert np.array_equal(cal.torch_linspace(n), expected)


@settings(max_examples=60)
@given(labelled(), st.integers(1, 20), st.sampled_from(cal.NORMS))
def test_ece_matches_torchmetrics(data, n_bins, norm):
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.classification")
    y, s, w = data
    keys, neg, pos = levels_of(y, s, w, ExactBinning())
    metric = tm.BinaryCalibrationError(n_bins=n_bins, norm=norm)
    expected = float(metric(torch.tensor(s, dtype=torch.float64), torch.tensor(y)))
    assert cal.calibration_error(keys, neg, pos, n_bins, norm) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=200)
@given(labelled(weighted=True), st.integers(1, 20), st.sampled_from(cal.NORMS),
       st.sampled_from([1, 2, 8, 64, 1024]))
def test_binned_ece_bounds_hold_the_events_value(data, n_bins, norm, bins):
    y, s, w = data
    binning = LogGridBinning(bins)
    keys, neg, pos = levels_of(y, s, w, binning)
    lo, hi = level_bounds(binning, keys)
    low, high = cal.calibration_error_bounds(lo, hi, neg, pos, n_bins, norm)
    assert low <= ece_direct(y, s, w, n_bins, norm) <= high
    point = cal.calibration_error(representative(lo, hi), neg, pos, n_bins, norm)
    assert low <= point <= high


@given(labelled(), st.integers(1, 12), st.sampled_from(["uniform", "quantile"]))
def test_reliability_curve_equals_sklearn(data, n_bins, strategy):
    y, s, w = data
    keys, neg, pos = levels_of(y, s, w, ExactBinning())
    got = cal.reliability_curve(keys, neg, pos, n_bins, strategy)
    expected = calibration_curve(y, s, n_bins=n_bins, strategy=strategy)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-15)


def test_empty_and_invalid_inputs():
    z = np.zeros(2)
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(cal.calibration_error(np.array([0.1, 0.2]), z, z))
    with pytest.raises(ValueError, match="norm"):
        cal.calibration_error(np.array([0.1]), np.ones(1), z[:1], norm="l3")
    with pytest.raises(ValueError, match="probabilities"):
        cal.calibration_error(np.array([1.5]), np.ones(1), z[:1])
    with pytest.raises(ValueError, match="at least one event"):
        cal.reliability_curve(np.array([0.1]), z[:1], z[:1])


def test_known_value():
    # two events at 0.2 (one positive) and one at 0.9 (positive), 10 buckets:
    # bucket 2: acc 0.5, conf 0.2, prop 2/3; bucket 9: acc 1, conf 0.9, prop 1/3
    keys, neg, pos = np.array([0.2, 0.9]), np.array([1.0, 0.0]), np.array([1.0, 1.0])
    assert cal.calibration_error(keys, neg, pos, 10, "l1") == pytest.approx(0.3 * 2 / 3 + 0.1 / 3)
    assert cal.calibration_error(keys, neg, pos, 10, "max") == pytest.approx(0.3)


@settings(max_examples=200)
@given(labelled(weighted=True), st.integers(1, 12), st.sampled_from([1, 2, 8, 64, 1024]))
def test_binned_reliability_bounds_hold_sklearns_curve(data, n_bins, bins):
    y, s, w = data
    binning = LogGridBinning(bins)
    keys, neg, pos = levels_of(y, s, w, binning)
    lo, hi = level_bounds(binning, keys)
    b = cal.reliability_curve_bounds(lo, hi, neg, pos, n_bins)
    # sklearn's curve of the raw events, generalised to weights (bin ids as sklearn)
    ids = np.searchsorted(np.linspace(0, 1, n_bins + 1)[1:-1], s)
    total = np.bincount(ids, weights=w, minlength=n_bins)
    true = np.bincount(ids, weights=y * w, minlength=n_bins)
    pred = np.bincount(ids, weights=s * w, minlength=n_bins)
    raw_bins = np.flatnonzero(total)
    assert set(b["bin"][b["sure"]]) <= set(raw_bins) <= set(b["bin"])
    at = {j: i for i, j in enumerate(b["bin"])}
    for j in raw_bins:
        i = at[j]
        assert b["true_low"][i] <= true[j] / total[j] <= b["true_high"][i]
        assert b["pred_low"][i] <= pred[j] / total[j] <= b["pred_high"][i]
    if np.all(w == 1):
        prob_true, prob_pred = calibration_curve(y, s, n_bins=n_bins)
        assert len(prob_true) == len(raw_bins)


def test_reliability_bounds_collapse_on_exact_levels():
    keys, neg, pos = np.array([0.1, 0.3, 0.9]), np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 2.0])
    b = cal.reliability_curve_bounds(keys, keys, neg, pos, 5)
    prob_true, prob_pred = cal.reliability_curve(keys, neg, pos, 5)
    np.testing.assert_allclose(b["true_low"], prob_true, atol=1e-11)
    np.testing.assert_allclose(b["pred_high"], prob_pred, atol=1e-11)
    assert b["sure"].all()
