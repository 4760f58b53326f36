"""Reference: label-free metrics of windows against scipy / sklearn / NannyML formulas on
the raw events, merge and split invariance, saved states, empty windows."""
from __future__ import annotations

import doctest
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp, wasserstein_distance
from sklearn.isotonic import IsotonicRegression

import streammetrics.monitors.reference as reference_module
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import calibration
from streammetrics.kernels.binning import ExactBinning, LogGridBinning
from streammetrics.kernels.histogram import ScoreHistogram, add_grouped
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.reference import METRICS, Reference

POOL = [0.0, 0.05, 0.1, 0.2, 1 / 3, 0.5, 0.6, 0.8, 0.95, 1.0]
scores_st = st.one_of(st.sampled_from(POOL), st.floats(0.0, 1.0))


@st.composite
def labelled(draw, min_size=1, max_size=60):
    n = draw(st.integers(min_size, max_size))
    s = np.array(draw(st.lists(scores_st, min_size=n, max_size=n)))
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    return y, s


def raw_metrics(ref_y, ref_s, y, s, threshold=0.5):
    """The contract's definitions on raw unit-weight events."""
    iso = IsotonicRegression(out_of_bounds="clip").fit(ref_s, ref_y)
    c = iso.predict(s)
    pred = s >= threshold
    tp, fp = c[pred].sum(), (1 - c[pred]).sum()
    fn, tn = c[~pred].sum(), (1 - c[~pred]).sum()
    def r(a, b):
        return a / b if b != 0 else 0.0
    out = {
        "drift_ks": ks_2samp(s, ref_s).statistic,
        "drift_wasserstein": wasserstein_distance(s, ref_s),
        "estimated_accuracy": (tp + tn) / len(s),
        "estimated_precision": r(tp, tp + fp),
        "estimated_recall": r(tp, tp + fn),
        "estimated_f1": r(tp, tp + 0.5 * (fp + fn)),
    }
    b = calibration.torch_linspace(15)
    idx = np.searchsorted(b, s, side="right") - 1
    cnt = np.bincount(idx, minlength=16).astype(float)
    with np.errstate(invalid="ignore"):
        conf = np.nan_to_num(np.bincount(idx, weights=s, minlength=16) / cnt)
        acc = np.nan_to_num(np.bincount(idx, weights=y, minlength=16) / cnt)
    out["ece"] = float(np.sum(np.abs(acc - conf) * cnt / cnt.sum()))
    return out


@settings(max_examples=80)
@given(labelled(min_size=2), labelled())
def test_exact_reference_matches_raw_definitions(ref, window):
    ry, rs = ref
    y, s = window
    r = Reference.from_arrays(ry, rs, exact=True)
    w = BinaryScores(exact=True).update_many(y, s)
    got = r.metrics(w)
    for name, value in raw_metrics(ry, rs, y, s).items():
        assert got[name] == pytest.approx(value, abs=1e-9), name
    assert got["drift_ks_low"] <= got["drift_ks"] <= got["drift_ks_high"]
    assert got["ece_low"] == got["ece"] == got["ece_high"]


@settings(max_examples=80)
@given(labelled(min_size=2), labelled(), st.sampled_from([4, 64, 1024]))
def test_binned_reference_bounds_hold_the_raw_values(ref, window, bins):
    ry, rs = ref
    y, s = window
    r = Reference.from_arrays(ry, rs, bins=bins)
    w = BinaryScores(bins=bins).update_many(y, s)
    got = r.metrics(w)
    raw = raw_metrics(ry, rs, y, s)
    assert got["drift_ks_low"] <= raw["drift_ks"] <= got["drift_ks_high"]
    tol = 1e-12 * (1 + raw["drift_wasserstein"])
    assert got["drift_wasserstein_low"] - tol <= raw["drift_wasserstein"] <= got["drift_wasserstein_high"] + tol
    etol = 1e-12  # a window whose scores fit max_bins is exact: bounds == value, up to rounding
    assert got["ece_low"] - etol <= raw["ece"] <= got["ece_high"] + etol


def test_fine_grid_is_close_to_exact():
    rng = np.random.default_rng(1)
    rs = rng.beta(2, 5, 5000)
    ry = (rng.random(5000) < rs).astype(int)
    s = rng.beta(2, 4, 2000)
    y = (rng.random(2000) < s).astype(int)
    exact = Reference.from_arrays(ry, rs, exact=True).metrics(BinaryScores(exact=True).update_many(y, s))
    grid = Reference.from_arrays(ry, rs).metrics(BinaryScores().update_many(y, s))
    for name in METRICS:
        assert grid[name] == pytest.approx(exact[name], abs=2e-3), name
    assert grid["drift_ks_high"] - grid["drift_ks_low"] < 5e-3


@settings(max_examples=40)
@given(labelled(min_size=4), labelled(min_size=2), st.integers(1, 4), st.randoms(use_true_random=False),
       st.booleans())
def test_any_split_of_reference_and_window_gives_the_same_metrics(ref, window, parts, rnd, exact):
    ry, rs = ref
    y, s = window

    def split(n):
        cut = sorted(rnd.sample(range(1, n), min(parts - 1, n - 1)))
        return np.split(np.arange(n), cut)

    whole_ref = Reference.from_arrays(ry, rs, exact=exact)
    states = [BinaryScores(exact=exact).update_many(ry[i], rs[i]).to_dict() for i in split(len(rs))]
    rnd.shuffle(states)
    merged_ref = Reference.from_states(states)
    whole = BinaryScores(exact=exact).update_many(y, s)
    pieces = [BinaryScores(exact=exact).update_many(y[i], s[i]) for i in split(len(s))]
    rnd.shuffle(pieces)
    merged = pieces[0].copy()
    for p in pieces[1:]:
        merged.merge(p)
    expected = whole_ref.metrics(whole)
    assert merged_ref.metrics(merged) == expected
    assert whole_ref.metrics(merged) == expected


def test_window_forms_agree():
    rng = np.random.default_rng(2)
    ref = Reference.from_arrays(rng.random(300) < 0.3, rng.random(300))
    s = rng.random(100)
    y = (rng.random(100) < s).astype(int)
    scores = BinaryScores().update_many(y, s)
    monitor = BinaryMonitor()
    monitor.update_many([{"y_true": int(a), "score": float(b)} for a, b in zip(y, s)])
    hist = ScoreHistogram(scores._binning)
    add_grouped([hist], hist.binning.keys(s), None, None)
    label_free = {k: v for k, v in ref.metrics(scores).items() if not k.startswith("ece")}
    assert ref.metrics(monitor) == ref.metrics(scores)
    assert ref.metrics(monitor.to_dict()) == ref.metrics(scores)
    for window in (hist, (list(hist.weights), list(hist.weights.values()), hist.binning)):
        got = ref.metrics(window)
        assert got["ece"] is None and got["ece_low"] is None
        assert {k: v for k, v in got.items() if not k.startswith("ece")} == label_free
    # a reference from monitor states equals one from their BinaryScores
    assert Reference.from_states([monitor]).metrics(scores) == Reference.from_states([scores]).metrics(scores)


def test_empty_window_gives_none_or_nan_with_warning():
    ref = Reference.from_arrays([0, 1, 1], [0.2, 0.7, 0.9])
    empty = BinaryScores()
    assert all(v is None for v in ref.metrics(empty).values())
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(ref.drift(empty)["drift_ks"])
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(ref.estimate(empty)["estimated_accuracy"])


def test_one_class_reference_and_window():
    ref = Reference.from_arrays([0, 0, 0], [0.2, 0.4, 0.9], exact=True)
    window = BinaryScores(exact=True).update_many([1, 1], [0.3, 0.95])
    m = ref.metrics(window)
    assert m["estimated_accuracy"] == 0.5  # calibrated to 0 everywhere: the 0.3 is a sure TN
    assert m["estimated_roc_auc"] is None  # no expected positive
    assert m["ece"] == pytest.approx(raw_metrics(np.zeros(3), np.array([0.2, 0.4, 0.9]),
                                                  np.ones(2), np.array([0.3, 0.95]))["ece"])


def test_saved_reference_round_trips():
    rng = np.random.default_rng(4)
    ref = Reference.from_arrays(rng.random(200) < 0.5, rng.random(200), threshold=0.3, psi_groups=5)
    again = Reference.from_dict(ref.to_dict())
    window = BinaryScores().update_many(np.zeros(50, int), rng.random(50))
    assert again.metrics(window) == ref.metrics(window)
    assert again.to_dict() == ref.to_dict()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no event"):
        Reference(BinaryScores())
    with pytest.raises(ValueError, match="scores"):
        Reference.from_arrays([0, 1], [0.1, float("nan")])
    with pytest.raises(ValueError, match="empty"):
        Reference.from_states([])
    ref = Reference.from_arrays([0, 1], [0.1, 0.9])
    with pytest.raises(TypeError, match="window"):
        ref.metrics([0.1, 0.2])
    with pytest.raises(ValueError, match="weights"):
        ref.metrics((np.array([0.1]), np.array([-1.0]), ExactBinning()))
    with pytest.raises(ValueError, match="Reference"):
        Reference.from_dict({"type": "BinaryScores"})


def test_margins_have_drift_but_no_calibration_error():
    ref = Reference.from_arrays([0, 1, 1, 0], [-3.0, 2.0, 5.0, -1.0])
    window = BinaryScores().update_many([0, 1], [-2.0, 7.0])
    m = ref.metrics(window)
    assert m["drift_ks"] is not None and m["ece"] is None
    assert window.exact  # 2 distinct scores: BinaryScores is exact while small


def test_doctest():
    random.seed(0)
    assert doctest.testmod(reference_module, raise_on_error=False).failed == 0


def test_reliability_of_a_labelled_window():
    from sklearn.calibration import calibration_curve

    rng = np.random.default_rng(5)
    s = rng.random(400)
    y = (rng.random(400) < s).astype(int)
    ref = Reference.from_arrays(y, s)
    exact = BinaryScores(exact=True).update_many(y, s)
    for strategy in ("uniform", "quantile"):
        got = ref.reliability(exact, 8, strategy)
        expected = calibration_curve(y, s, n_bins=8, strategy=strategy)
        np.testing.assert_allclose(got["prob_true"], expected[0], rtol=1e-12)
        np.testing.assert_allclose(got["prob_pred"], expected[1], rtol=1e-12)
        assert got["bounds"] is None
    got = ref.reliability(BinaryScores(bins=4, max_bins=64).update_many(y, s), 8)  # 400 scores > 64: binned
    b = got["bounds"]
    expected = calibration_curve(y, s, n_bins=8)
    sure = [i for i, flag in enumerate(b["sure"]) if flag]
    assert len(sure) <= len(expected[0]) <= len(b["bin"])
    with pytest.raises(TypeError, match="labelled"):
        ref.reliability(ScoreHistogram(LogGridBinning(4)))


class _Distribution:
    """Stand-in with ScoreDistribution's label-free interface (histogram(), bins_per_octave)."""

    def __init__(self, hist, bins_per_octave):
        self._hist, self.bins_per_octave = hist, bins_per_octave

    def histogram(self):
        keys = np.array(sorted(self._hist.weights))
        return self._hist.binning.lowest(keys), np.array([self._hist.weights[k] for k in keys])


class _Monitor:
    def __init__(self, predictions, scores):
        self.predictions, self.scores = predictions, scores


@pytest.mark.parametrize("exact", [False, True])
def test_score_distribution_windows(exact):
    rng = np.random.default_rng(6)
    ref = Reference.from_arrays(rng.random(300) < 0.4, rng.random(300))
    s = rng.random(80)
    scores = BinaryScores(exact=exact).update_many((rng.random(80) < s).astype(int), s)
    hist = ScoreHistogram(scores._binning)
    add_grouped([hist], hist.binning.keys(s), None, None)
    dist = _Distribution(hist, scores.bins_per_octave)
    expected = ref.metrics(scores)
    label_free = {k: v for k, v in expected.items() if not k.startswith("ece")}
    got = ref.metrics(dist)
    assert {k: v for k, v in got.items() if not k.startswith("ece")} == label_free
    assert got["ece"] is None
    # a monitor's predictions (every event) drive drift and estimates, its scores the ECE
    assert ref.metrics(_Monitor(dist, scores)) == expected


def test_load_references_from_events_and_snapshots(tmp_path):
    import json

    from streammetrics.stream.references import load_references
    from streammetrics.stream.snapshots import SNAPSHOT_SCHEMA

    rng = np.random.default_rng(8)
    s = rng.random(300)
    y = (rng.random(300) < s).astype(int)
    events = [{"ts": 1.0 + i, "model": "m", "segment": "a", "y_true": int(y[i]), "score": float(s[i])}
              for i in range(150)]
    monitors = [BinaryMonitor(), BinaryMonitor()]
    for i in range(150, 300):
        monitors[i % 2].update({"y_true": int(y[i]), "score": float(s[i])})

    def snap(mon, start, **extra):
        return {"schema": SNAPSHOT_SCHEMA, "key": {"model": "m", "segment": "b"},
                "window": {"start": start, "end": start + 60}, "final": True, "count": mon.count,
                "late": 0, "metrics": {}, "state": mon.to_dict(), **extra}

    lines = [json.dumps(e) for e in events]
    lines += [json.dumps(snap(BinaryMonitor(), 0)), "", json.dumps(snap(monitors[0], 0)),  # re-emitted
              json.dumps(snap(monitors[1], 60))]
    path = tmp_path / "ref.jsonl"
    path.write_text("\n".join(lines) + "\n")
    refs = load_references(str(path), threshold=0.4)
    assert set(refs) == {("m", "a"), ("m", "b")}
    window = BinaryScores().update_many(y, s)
    assert refs[("m", "a")].metrics(window) == Reference.from_arrays(y[:150], s[:150], threshold=0.4).metrics(window)
    assert refs[("m", "b")].metrics(window) == Reference.from_arrays(y[150:], s[150:], threshold=0.4).metrics(window)
    # a cumulative snapshot replaces the key's windows
    both = monitors[0] + monitors[1]
    path.write_text("\n".join([json.dumps(snap(monitors[0], 0)), json.dumps(snap(both, 0, cumulative=True))]))
    assert load_references(str(path))[("m", "b")].to_dict() == Reference.from_states([both]).to_dict()
    for bad, message in (('{"ts": 1, "model": "m", "score": 0.5}', "y_true"), ("{not json", "not JSON"),
                         ('{"schema": "other/1"}', "schema")):
        path.write_text(bad + "\n")
        with pytest.raises(ValueError, match=message):
            load_references(str(path))


@st.composite
def weighted(draw, min_size=1, max_size=50):
    y, s = draw(labelled(min_size, max_size))
    w = np.array(draw(st.lists(st.floats(0.1, 5.0), min_size=len(s), max_size=len(s))))
    return y, s, w


def weighted_ecdf_gaps(x, wx, y, wy):
    pts = np.sort(np.concatenate((x, y)))
    ox, oy = np.argsort(x), np.argsort(y)
    fx = (np.concatenate(([0.0], np.cumsum(wx[ox]))) / wx.sum())[np.searchsorted(x[ox], pts, "right")]
    fy = (np.concatenate(([0.0], np.cumsum(wy[oy]))) / wy.sum())[np.searchsorted(y[oy], pts, "right")]
    return float(np.max(np.abs(fx - fy)))


@settings(max_examples=60)
@given(weighted(min_size=2), weighted(), st.booleans())
def test_weighted_streams_match_weighted_definitions(ref, window, ref_exact):
    """Sample weights: weighted ECDFs, scipy's weighted Wasserstein, sklearn's weighted
    isotonic fit, weighted CBPE sums and weight-for-count ECE; a reference on either
    binning against an exact window."""
    ry, rs, rw = ref
    y, s, w = window
    r = Reference.from_arrays(ry, rs, rw, exact=True)
    got = r.metrics(BinaryScores(exact=True).update_many(y, s, w))
    assert got["drift_ks"] == pytest.approx(weighted_ecdf_gaps(s, w, rs, rw), abs=1e-12)
    assert got["drift_wasserstein"] == pytest.approx(wasserstein_distance(s, rs, w, rw), rel=1e-9, abs=1e-12)
    c = IsotonicRegression(out_of_bounds="clip").fit(rs, ry, sample_weight=rw).predict(s)
    pred = s >= 0.5
    tp, fp = (w * c)[pred].sum(), (w * (1 - c))[pred].sum()
    fn, tn = (w * c)[~pred].sum(), (w * (1 - c))[~pred].sum()
    assert got["estimated_accuracy"] == pytest.approx((tp + tn) / w.sum(), abs=1e-9)
    assert got["estimated_recall"] == pytest.approx(tp / (tp + fn) if tp + fn else 0.0, abs=1e-9)
    assert got["estimated_precision"] == pytest.approx(tp / (tp + fp) if tp + fp else 0.0, abs=1e-9)
    b = calibration.torch_linspace(15)
    idx = np.searchsorted(b, s, side="right") - 1
    cnt = np.bincount(idx, weights=w, minlength=16)
    with np.errstate(invalid="ignore"):
        conf = np.nan_to_num(np.bincount(idx, weights=s * w, minlength=16) / cnt)
        acc = np.nan_to_num(np.bincount(idx, weights=y * w, minlength=16) / cnt)
    assert got["ece"] == pytest.approx(float(np.sum(np.abs(acc - conf) * cnt / cnt.sum())), abs=1e-12)
    if not ref_exact:  # a binned reference: bounds around the events' values
        g = Reference.from_arrays(ry, rs, rw, bins=8).metrics(BinaryScores(exact=True).update_many(y, s, w))
        raw_ks = weighted_ecdf_gaps(s, w, rs, rw)
        raw_w = wasserstein_distance(s, rs, w, rw)
        assert g["drift_ks_low"] - 1e-12 <= raw_ks <= g["drift_ks_high"] + 1e-12
        tol = 1e-12 * (1 + raw_w)
        assert g["drift_wasserstein_low"] - tol <= raw_w <= g["drift_wasserstein_high"] + tol


@pytest.mark.filterwarnings("ignore::streammetrics.core.exceptions.UndefinedMetricWarning")
@settings(max_examples=60, deadline=None)
@given(labelled(min_size=0, max_size=80), st.lists(st.floats(0.001, 0.999), min_size=0, max_size=80),
       st.integers(0, 1), st.sampled_from([0.3, 0.5]))
def test_a_small_window_is_read_without_building_its_parts(ref, window_scores, first_label, threshold):
    """A BinaryMonitor in its small form (BinaryMonitor.small_columns) gives the metrics and
    estimate intervals of the same monitor with its parts, and keeps its small form."""
    reference = Reference.from_arrays(*ref, threshold=threshold) if ref[0].size and ref[0].any() and not ref[
        0].all() else Reference.from_arrays([0, 1, 1], [0.2, 0.7, 0.9], threshold=threshold)
    small = BinaryMonitor(threshold=threshold)
    for i, s in enumerate(window_scores):
        small.update({"y_true": (first_label + i * i) % 2, "score": float(s)})
    assert small.small_columns() is not None
    # (the queue stays below the parts' max_bins: the parts it would build are exact)
    assert BinaryMonitor.update_queue_max <= BinaryScores().max_bins
    with_parts = small.copy()
    with_parts.scores  # noqa: B018  (reading a part builds the parts)
    assert with_parts.small_columns() is None
    got = (reference.metrics(small), reference.estimate_intervals(small), reference.ece(small))
    assert small.small_columns() is not None  # (the parts were not built)
    want = (reference.metrics(with_parts), reference.estimate_intervals(with_parts), reference.ece(with_parts))
    assert repr(got) == repr(want)
    assert window_histogram_pairs(small) == window_histogram_pairs(with_parts)


def window_histogram_pairs(monitor):
    keys, weights, binning = reference_module.window_histogram(monitor)
    return keys.tolist(), weights.tolist(), keys.dtype, weights.dtype, binning.exact
