"""MulticlassReference: per-class score drift (scipy), predicted-class PSI/JS (scipy,
Evidently's PSI), and NannyML's multiclass CBPE formulas (sklearn isotonic one-vs-rest,
normalised rows, ``estimate_f1`` / accuracy of the predicted class)."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.stats import ks_2samp, wasserstein_distance
from sklearn.isotonic import IsotonicRegression

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.monitors import MulticlassMonitor
from streammetrics.monitors.reference_multiclass import (
    MULTICLASS_METRICS,
    MulticlassReference,
)
from streammetrics.stream.references import load_references

CLASSES = ["a", "b", "c"]
L = np.array(CLASSES)


def _rows(seed: int, n: int, alpha: tuple[float, ...] = (1.0, 1.0, 1.0), decimals: int | None = None):
    rng = np.random.default_rng(seed)
    s = rng.dirichlet(alpha, n)
    if decimals is not None:  # ties
        s = np.round(s, decimals)
    y = np.array([rng.choice(3, p=r / r.sum()) if r.sum() > 0 else 0 for r in np.clip(s, 1e-9, None)])
    return y, s


def _nannyml_estimate(y_ref, s_ref, s, w=None):
    """NannyML's multiclass CBPE (cbpe._calibrate_predicted_probabilities, metrics.estimate_f1,
    MulticlassClassificationAccuracy._estimate), with weights as repeated rows."""
    k = s_ref.shape[1]
    cal = np.zeros_like(s)
    for c in range(k):
        iso = IsotonicRegression(out_of_bounds="clip", increasing=True).fit(s_ref[:, c], (y_ref == c).astype(float))
        cal[:, c] = iso.predict(s[:, c])
    den = cal.sum(axis=1)[:, None]
    p = np.divide(cal, den, out=np.full_like(cal, 1 / k), where=den != 0)
    w = np.ones(len(s)) if w is None else w
    pred = s.argmax(axis=1)
    acc = float(np.sum(w * p[np.arange(len(s)), pred]) / w.sum())
    f1s = []
    for c in range(k):
        yp = pred == c
        tp = np.sum(w * np.where(yp, p[:, c], 0))
        fp = np.sum(w * np.where(yp, 1 - p[:, c], 0))
        fn = np.sum(w * np.where(~yp, p[:, c], 0))
        d = tp + 0.5 * (fp + fn)
        f1s.append(tp / d if d != 0 else 0)
    return acc, float(np.mean(f1s))


@pytest.mark.parametrize("decimals", [None, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_estimate_equals_nannyml_formula(seed, decimals):
    y_ref, s_ref = _rows(seed, 800, decimals=decimals)
    _, s = _rows(seed + 100, 300, alpha=(3.0, 1.0, 0.5), decimals=decimals)
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES, exact=True)
    got = ref.estimate(s)
    acc, f1 = _nannyml_estimate(y_ref, s_ref, s)
    assert got["estimated_accuracy"] == pytest.approx(acc, abs=1e-12)
    assert got["estimated_macro_f1"] == pytest.approx(f1, abs=1e-12)


def test_weighted_estimate_equals_repeated_rows():
    y_ref, s_ref = _rows(3, 500)
    _, s = _rows(4, 60)
    w = np.random.default_rng(5).integers(0, 4, len(s)).astype(float)
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES, exact=True)
    got = ref.estimate(s, w)
    rep = ref.estimate(np.repeat(s, w.astype(int), axis=0))
    assert got == pytest.approx(rep, abs=1e-12)
    acc, f1 = _nannyml_estimate(y_ref, s_ref, s, w)
    assert got["estimated_accuracy"] == pytest.approx(acc, abs=1e-12)
    assert got["estimated_macro_f1"] == pytest.approx(f1, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(0, 40))
def test_estimate_merges_in_any_split(seed, n, cut):
    y_ref, s_ref = _rows(seed, 200, decimals=2)
    _, s = _rows(seed + 1, n, decimals=1)
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES)
    cut = min(cut, n)
    a = ref.estimator().update_many(s[:cut])
    b = ref.estimator().update_many(s[cut:])
    whole = ref.estimate(s)
    merged = a.merge(b).metrics()
    assert merged == pytest.approx(whole, abs=1e-12)


def test_empty_window_estimate_is_nan_with_warning_and_bad_rows_change_nothing():
    y_ref, s_ref = _rows(0, 100)
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES)
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(ref.estimate(np.zeros((0, 3)))["estimated_accuracy"])
    est = ref.estimator().update_many(s_ref[:5])
    before = est.tp.copy()
    with pytest.raises(ValueError, match="score_matrix"):
        est.update_many([[0.1, 0.2]])
    with pytest.raises(ValueError, match="sample_weight"):
        est.update_many(s_ref[:2], [1.0, -1.0])
    assert (est.tp == before).all()


@pytest.mark.parametrize("seed", [0, 7])
def test_exact_drift_per_class_equals_scipy(seed):
    y_ref, s_ref = _rows(seed, 400, decimals=3)
    y, s = _rows(seed + 1, 150, alpha=(2.0, 1.0, 1.0), decimals=3)
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES, exact=True)
    window = MulticlassScores(CLASSES, exact=True).update_many(L[y], s)
    m = ref.metrics(window)
    for c, name in enumerate(CLASSES):
        row = m["per_class"][name]
        assert row["drift_ks"] == pytest.approx(ks_2samp(s[:, c], s_ref[:, c]).statistic, abs=1e-12)
        assert row["drift_wasserstein"] == pytest.approx(wasserstein_distance(s[:, c], s_ref[:, c]), abs=1e-12)
        assert row["drift_ks_low"] == row["drift_ks"] == row["drift_ks_high"] or (
            row["drift_ks_low"] <= row["drift_ks"] <= row["drift_ks_high"])
    assert m["drift_ks"] == max(m["per_class"][c]["drift_ks"] for c in CLASSES)
    # predicted-class distribution: one group per class
    pw = np.bincount(s.argmax(axis=1), minlength=3).astype(float)
    pr = np.bincount(s_ref.argmax(axis=1), minlength=3).astype(float)
    assert m["drift_predicted_js"] == pytest.approx(jensenshannon(pr, pw, base=2), abs=1e-12)
    pa, pb = pw / pw.sum(), pr / pr.sum()
    pa, pb = np.where(pa == 0, 1e-4, pa), np.where(pb == 0, 1e-4, pb)
    assert m["drift_predicted_psi"] == pytest.approx(float(np.sum((pa - pb) * np.log(pa / pb))), abs=1e-12)
    assert m["estimated_accuracy"] is None  # a window state holds no joint rows
    assert set(MULTICLASS_METRICS) <= set(m)


def test_binned_monitor_window_bounds_hold_scipy_values():
    y_ref, s_ref = _rows(11, 500)
    y, s = _rows(12, 200, alpha=(1.0, 2.0, 1.0))
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES, exact=True)
    mon = MulticlassMonitor(CLASSES).update_many(
        [{"y_true": CLASSES[t], "scores": row.tolist()} for t, row in zip(y, s)])
    m = ref.metrics(mon)
    for c, name in enumerate(CLASSES):
        row = m["per_class"][name]
        ks = ks_2samp(s[:, c], s_ref[:, c]).statistic
        wd = wasserstein_distance(s[:, c], s_ref[:, c])
        assert row["drift_ks_low"] <= ks <= row["drift_ks_high"]
        assert row["drift_wasserstein_low"] <= wd <= row["drift_wasserstein_high"]
    assert m["drift_ks_low"] <= max(ks_2samp(s[:, c], s_ref[:, c]).statistic for c in range(3)) <= m["drift_ks_high"]
    # label-free: a monitor fed predictions only has the same per-class score drift
    from streammetrics.events.records import Event

    free = MulticlassMonitor(CLASSES).update_predictions([Event(0.0, "m", scores=tuple(r.tolist())) for r in s])
    mf = ref.metrics(free)
    assert mf["per_class"] == m["per_class"] and mf["drift_ks"] == m["drift_ks"]
    assert mf["drift_predicted_js"] == pytest.approx(m["drift_predicted_js"], abs=1e-12)


def test_from_states_and_dict_round_trip():
    y_ref, s_ref = _rows(2, 300)
    whole = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES)
    a = MulticlassScores(CLASSES).update_many(L[y_ref[:100]], s_ref[:100])
    b = MulticlassMonitor(CLASSES).update_many(
        [{"y_true": CLASSES[t], "scores": r.tolist()} for t, r in zip(y_ref[100:], s_ref[100:])])
    merged = MulticlassReference.from_states([a.to_dict(), b])
    _, s = _rows(3, 50)
    assert merged.estimate(s) == pytest.approx(whole.estimate(s), abs=1e-12)
    again = MulticlassReference.from_dict(json.loads(json.dumps(whole.to_dict())))
    assert again.estimate(s) == whole.estimate(s)
    with pytest.raises(ValueError):
        MulticlassReference.from_states([])


def test_load_references_multiclass_and_limit(tmp_path):
    y_ref, s_ref = _rows(4, 60)
    path = tmp_path / "ref.jsonl"
    with open(path, "w") as f:
        for i, (t, r) in enumerate(zip(y_ref, s_ref)):
            f.write(json.dumps({"ts": 1767225600 + i, "model": f"m{i % 2}", "y_true": CLASSES[t],
                                "scores": r.tolist()}) + "\n")
    refs = load_references(str(path), task="multiclass", classes=CLASSES)
    assert sorted(refs) == [("m0", ""), ("m1", "")]
    assert all(isinstance(r, MulticlassReference) for r in refs.values())
    assert refs[("m0", "")].count == 30
    with pytest.raises(ValueError, match="more than 1 .*--max-references 1"):
        load_references(str(path), task="multiclass", classes=CLASSES, max_references=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="classes"):
            load_references(str(path), task="multiclass")
