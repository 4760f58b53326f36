"""CBPE kernels: sklearn's IsotonicRegression and NannyML's estimators, on exact levels."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import cbpe
from streammetrics.kernels.binning import ExactBinning
from streammetrics.kernels.histogram import ScoreHistogram, add_grouped, aligned

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


def levels_of(y, s, w):
    b = ExactBinning()
    neg, pos = ScoreHistogram(b), ScoreHistogram(b)
    add_grouped([neg, pos], b.keys(s), y, w)
    keys, table = aligned(neg, pos)
    return keys, table[0], table[1]


def window_levels(s, w):
    keys, inv = np.unique(s, return_inverse=True)
    return keys, np.bincount(inv.reshape(-1), weights=w)


@given(labelled(weighted=True), st.lists(st.floats(-0.5, 1.5), min_size=1, max_size=30))
def test_isotonic_equals_sklearn(ref, queries):
    y, s, w = ref
    x, fit = cbpe.isotonic_fit(*levels_of(y, s, w))
    model = IsotonicRegression(out_of_bounds="clip").fit(s, y, sample_weight=w)
    t = np.array(queries)
    np.testing.assert_allclose(cbpe.calibrate(t, x, fit), model.predict(t), rtol=1e-12, atol=1e-12)
    assert (np.diff(fit) >= 0).all()


def nannyml_formulas(y_pred, proba):
    """NannyML's estimate_accuracy/precision/recall/f1 written out (unit weights)."""
    tp = np.sum(np.where(y_pred == 1, proba, 0))
    fp = np.sum(np.where(y_pred == 1, 1 - proba, 0))
    fn = np.sum(np.where(y_pred == 0, proba, 0))
    tn = np.sum(np.where(y_pred == 0, 1 - proba, 0))
    def r(a, b):
        return a / b if b != 0 else 0
    return {"accuracy": (tp + tn) / len(y_pred), "precision": r(tp, tp + fp),
            "recall": r(tp, tp + fn), "f1": r(tp, tp + 0.5 * (fp + fn))}


def nannyml_roc_auc(calibrated, scores, rounding=True):
    """NannyML's estimate_roc_auc (rounding its cumulative sums to 5 decimals, or not)."""
    order = np.argsort(scores)[::-1]
    c = calibrated[order]
    tps = np.r_[0, np.cumsum(c)]
    fps = np.r_[0, 1 + np.arange(len(c)) - np.cumsum(c)]
    if rounding:
        tps, fps = np.round(tps, 5), np.round(fps, 5)
    return float(np.trapezoid(tps / tps[-1], fps / fps[-1]))


@given(labelled(min_size=2), labelled(), st.sampled_from([0.3, 0.5, 0.7]))
def test_estimates_equal_nannyml_formulas(ref, window, threshold):
    x, fit = cbpe.isotonic_fit(*levels_of(*ref))
    _, s, w = window
    keys, lw = window_levels(s, w)
    c_levels = cbpe.calibrate(keys, x, fit)
    got = cbpe.estimated_metrics(c_levels, lw, keys >= threshold)
    proba = cbpe.calibrate(s, x, fit)
    expected = nannyml_formulas((s >= threshold).astype(int), proba)
    for name in expected:
        assert got[name] == pytest.approx(expected[name], abs=1e-12)
    if 0 < proba.sum() < len(proba) and not np.allclose(proba, proba[0]):
        auc = cbpe.estimated_roc_auc(c_levels, lw)
        assert auc == pytest.approx(nannyml_roc_auc(proba, s, rounding=False), abs=1e-9)


def test_estimates_equal_nannyml_itself():
    os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")
    nml = pytest.importorskip("nannyml.performance_estimation.confidence_based.metrics")
    rng = np.random.default_rng(3)
    s = np.round(rng.random(500), 3)  # ties
    c = np.clip(s + rng.normal(0, 0.1, 500), 0, 1)
    x, fit = np.sort(s), np.sort(c)  # a monotone map standing in for the calibration
    proba = cbpe.calibrate(s, x, fit)
    keys, lw = window_levels(s, np.ones(500))
    cl = cbpe.calibrate(keys, x, fit)
    y_pred = (s >= 0.5).astype(int)
    got = cbpe.estimated_metrics(cl, lw, keys >= 0.5)
    assert got["accuracy"] == pytest.approx(nml.estimate_accuracy(y_pred, proba), abs=1e-12)
    assert got["precision"] == pytest.approx(nml.estimate_precision(y_pred, proba), abs=1e-12)
    assert got["recall"] == pytest.approx(nml.estimate_recall(y_pred, proba), abs=1e-12)
    assert got["f1"] == pytest.approx(nml.estimate_f1(y_pred, proba), abs=1e-12)
    assert cbpe.estimated_roc_auc(cl, lw) == pytest.approx(nml.estimate_roc_auc(proba, s), abs=1e-4)


def test_empty_window_and_degenerate_calibration():
    with pytest.warns(UndefinedMetricWarning):
        out = cbpe.estimated_metrics(np.array([0.5]), np.zeros(1), np.array([True]))
    assert all(math.isnan(v) for v in out.values())
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(cbpe.estimated_roc_auc(np.array([0.5]), np.zeros(1)))
    with pytest.warns(UndefinedMetricWarning):  # a one-class reference calibrates all to 0
        assert math.isnan(cbpe.estimated_roc_auc(np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match="reference"):
        cbpe.isotonic_fit(np.array([0.1]), np.zeros(1), np.zeros(1))
    # a single reference score calibrates every score to its mean label
    x, fit = cbpe.isotonic_fit(np.array([0.3]), np.array([3.0]), np.array([1.0]))
    assert np.array_equal(cbpe.calibrate(np.array([0.0, 0.9]), x, fit), [0.25, 0.25])


@given(labelled(weighted=True), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30),
       st.sampled_from([1, 4, 64]))
def test_isotonic_fit_on_bins(ref, queries, bins):
    from streammetrics.kernels.binning import LogGridBinning
    from streammetrics.kernels.levels import level_bounds

    y, s, w = ref
    # distinct-score levels as bins of zero width: sklearn's fit, except its 1e-15 pooling
    keys, neg, pos = levels_of(y, s, w)
    if len(keys) < 2 or np.min(np.diff(keys)) >= 1e-15:
        xk, yk = cbpe.isotonic_fit_bins(keys, keys, neg, pos)
        model = IsotonicRegression(out_of_bounds="clip").fit(s, y, sample_weight=w)
        t = np.array(queries)
        np.testing.assert_allclose(cbpe.calibrate(t, xk, yk), model.predict(t), rtol=1e-12, atol=1e-12)
    # on a grid: monotone, constant across each bin, and equal to the pooled weighted mean
    binning = LogGridBinning(bins)
    gneg, gpos = ScoreHistogram(binning), ScoreHistogram(binning)
    add_grouped([gneg, gpos], binning.keys(s), y, w)
    gkeys, table = aligned(gneg, gpos)
    lo, hi = level_bounds(binning, gkeys)
    xk, yk = cbpe.isotonic_fit_bins(lo, hi, table[0], table[1])
    c = cbpe.calibrate(s, xk, yk)
    order = np.argsort(s)
    assert (np.diff(c[order]) >= -1e-12).all()
    assert np.allclose(cbpe.calibrate(lo, xk, yk), cbpe.calibrate(hi, xk, yk))
    # the isotonic fit preserves the weighted mean label
    assert float(np.sum(w * c)) == pytest.approx(float(np.sum(w * y)), abs=1e-9 * (1 + w.sum()))
