"""Monitors: snapshots equal scikit-learn on the same events; protocol; bad events."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.monitors import (
    BinaryMonitor,
    LabelMonitor,
    MulticlassMonitor,
    RegressionMonitor,
)

TOL = 1e-12


def close(ours, theirs):
    if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
        return ours is None
    return ours is not None and abs(ours - theirs) <= TOL * max(1.0, abs(theirs))


def sk(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return float(fn(*args, **kwargs))
        except ValueError:
            return None


binary_events = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from([0.0, 0.1, 0.5, 0.7, 1.0]) | st.floats(0, 1),
              st.sampled_from([1.0, 1.0, 0.0, 2.5])),
    min_size=1, max_size=60,
)


@given(binary_events, st.sampled_from([0.5, 0.3]), st.integers(1, 4))
def test_binary_monitor_snapshot_matches_sklearn(rows, threshold, parts):
    events = [{"y_true": y, "score": s, "weight": w} for y, s, w in rows]
    y = np.array([r[0] for r in rows])
    s = np.array([r[1] for r in rows])
    w = np.array([r[2] for r in rows])
    # split into parts, half per event, half as batches, then merge
    chunks = np.array_split(np.arange(len(events)), parts)
    monitors = []
    for i, idx in enumerate(chunks):
        m = BinaryMonitor(threshold=threshold, exact=True)
        if i % 2:
            m.update_many([events[j] for j in idx])
        else:
            for j in idx:
                m.update(events[j])
        monitors.append(m)
    mon = monitors[0]
    for m in monitors[1:]:
        mon.merge(m)
    snap = mon.snapshot()
    json.dumps(snap, allow_nan=False)
    pred = (s >= threshold).astype(int)
    assert snap["count"] == len(events)
    if w.sum() == 0:
        assert snap["accuracy"] is None and snap["roc_auc"] is None
        return
    kw = {"sample_weight": w}
    assert close(snap["accuracy"], sk(skm.accuracy_score, y, pred, **kw))
    assert close(snap["precision"], sk(skm.precision_score, y, pred, zero_division=np.nan, **kw))
    assert close(snap["recall"], sk(skm.recall_score, y, pred, zero_division=np.nan, **kw))
    assert close(snap["f1"], sk(skm.f1_score, y, pred, zero_division=np.nan, **kw))
    assert close(snap["matthews_corrcoef"], sk(skm.matthews_corrcoef, y, pred, **kw))
    nz = w > 0
    one_class = len(set(y[nz].tolist())) < 2
    expected_auc = None if one_class else sk(skm.roc_auc_score, y, s, **kw)
    assert close(snap["roc_auc"], expected_auc)
    assert close(snap["roc_auc_low"], expected_auc) and close(snap["roc_auc_high"], expected_auc)
    assert close(snap["log_loss"], sk(skm.log_loss, y, s, labels=[0, 1], **kw))
    assert close(snap["brier_score"], sk(skm.brier_score_loss, y, s, pos_label=1, **kw))
    assert close(snap["positive_rate"], float(np.average(y, weights=w)))
    assert close(snap["mean_score"], float(np.average(s, weights=w)))
    if not one_class and y[nz].sum() > 0:
        assert close(snap["average_precision"], sk(skm.average_precision_score, y, s, **kw))


def test_binary_monitor_default_bins_bounds_contain_exact_auc():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 5000)
    s = 1 / (1 + np.exp(-(rng.normal(size=5000) + y)))
    m = BinaryMonitor()
    m.update_many([{"y_true": int(a), "score": float(b)} for a, b in zip(y, s)])
    snap = m.snapshot()
    exact = skm.roc_auc_score(y, s)
    assert snap["roc_auc_low"] <= exact <= snap["roc_auc_high"]
    assert abs(snap["roc_auc"] - exact) < 1e-3


def test_binary_monitor_margins_make_log_loss_undefined_not_an_error():
    m = BinaryMonitor(threshold=0.0)
    m.update({"y_true": 1, "score": 2.5}).update({"y_true": 0, "score": -1.0})
    snap = m.snapshot()
    assert snap["log_loss"] is None and snap["brier_score"] is None
    assert snap["roc_auc"] == 1.0 and snap["accuracy"] == 1.0


def test_empty_monitors_snapshot_is_json_safe_and_undefined():
    for mon in (BinaryMonitor(), LabelMonitor(), RegressionMonitor()):
        snap = mon.snapshot()
        json.dumps(snap, allow_nan=False)
        assert snap["count"] == 0
        assert all(v is None for k, v in snap.items() if k not in ("count", "total_weight", "per_class"))


label_rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["a", "b", "c", "d"]),
                                st.sampled_from([1.0, 0.5, 0.0])), min_size=1, max_size=50)


@given(label_rows)
def test_label_monitor_matches_sklearn(rows):
    mon = LabelMonitor()
    for t, p, w in rows:
        mon.update({"y_true": t, "y_pred": p, "weight": w})
    snap = mon.snapshot()
    y = [r[0] for r in rows]
    p = [r[1] for r in rows]
    w = np.array([r[2] for r in rows])
    if w.sum() == 0:
        assert snap["accuracy"] is None
        return
    kw = {"sample_weight": w}
    assert close(snap["accuracy"], sk(skm.accuracy_score, y, p, **kw))
    assert close(snap["macro_f1"], sk(skm.f1_score, y, p, average="macro", zero_division=np.nan, **kw))
    assert close(snap["weighted_f1"], sk(skm.f1_score, y, p, average="weighted", zero_division=np.nan, **kw))
    assert close(snap["macro_precision"], sk(skm.precision_score, y, p, average="macro", zero_division=np.nan, **kw))
    assert close(snap["matthews_corrcoef"], sk(skm.matthews_corrcoef, y, p, **kw))
    assert close(snap["cohen_kappa"], sk(skm.cohen_kappa_score, y, p, **kw))
    labels = sorted(set(y) | set(p))
    rec = skm.recall_score(y, p, labels=labels, average=None, zero_division=np.nan, sample_weight=w)
    for i, label in enumerate(labels):
        assert close(snap["per_class"][label]["recall"], float(rec[i]))


@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.sampled_from([1.0, 3.0])),
                min_size=2, max_size=40))
@example(rows=[(0.0, 0.0, 1.0), (2.0833400691926453e-160, 0.0, 1.0)])  # CI: subnormal squares, R2 -1 +- 2e-4
def test_regression_monitor_matches_sklearn(rows):
    mon = RegressionMonitor()
    mon.update_many([{"y_true": a, "y_pred": b, "weight": w} for a, b, w in rows])
    snap = mon.snapshot()
    y = np.array([r[0] for r in rows])
    p = np.array([r[1] for r in rows])
    w = np.array([r[2] for r in rows])
    kw = {"sample_weight": w}
    assert snap["mse"] == pytest.approx(skm.mean_squared_error(y, p, **kw), rel=1e-12, abs=1e-12)
    assert snap["mae"] == pytest.approx(skm.mean_absolute_error(y, p, **kw), rel=1e-12, abs=1e-12)
    assert snap["max_error"] == pytest.approx(skm.max_error(y, p), rel=1e-12)
    if np.ptp(y) == 0:  # constant truth: sklearn's documented force_finite rule (its two-pass mean can be noise):
        r2 = 1.0 if float(np.dot(w, (y - p) ** 2)) == 0.0 else 0.0  # a perfect score iff the error sum is 0
    else:
        r2 = skm.r2_score(y, p, **kw)
    if not math.isfinite(r2):  # a denormal denominator overflows the ratio: snapshots carry JSON-safe null
        assert snap["r2"] is None and mon.regression.r2() == r2
    else:  # squares below 2**-1022 are subnormal: each carries up to 2**-1075 of absolute rounding in
        # float (sklearn's and ours alike), so R2 = 1 - sse/sst is only known to ~n*2**-1074/sst
        sst = float(np.dot(w, (y - np.average(y, weights=w)) ** 2))
        subnormal_slack = 4 * len(rows) * w.max() * 2.0**-1074 / sst * (1 + abs(r2)) if sst else 0.0
        assert snap["r2"] == pytest.approx(r2, rel=1e-9, abs=1e-9 + subnormal_slack)


def test_monitor_update_rejects_bad_event_and_keeps_state():
    mon = BinaryMonitor()
    mon.update({"y_true": 1, "score": 0.9})
    before = mon.to_dict()
    with pytest.raises(ValueError, match="score"):
        mon.update({"y_true": 1, "score": "high"})
    with pytest.raises(ValueError, match=r"events\[1\].*y_true"):
        mon.update_many([{"y_true": 0, "score": 0.1}, {"y_true": 7, "score": 0.2}])
    assert mon.to_dict() == before


def test_monitor_protocol_round_trip_merge_and_config_mismatch():
    a = BinaryMonitor(threshold=0.3).update({"y_true": 1, "score": 0.4})
    b = BinaryMonitor(threshold=0.3).update({"y_true": 0, "score": 0.2})
    both = a + b
    assert both.count == 2 and a.count == 1
    again = sm.from_dict(json.loads(json.dumps(both.to_dict())))
    assert again == both and again.snapshot() == both.snapshot()
    with pytest.raises(ValueError):
        a.merge(BinaryMonitor(threshold=0.9))
    with pytest.raises(ValueError):
        a.merge(LabelMonitor())
    bad = both.to_dict()  # the events form
    bad["state"]["y_true"][0] = 2
    with pytest.raises(ValueError, match=r"state\['y_true'\]\[0\] must be 0, 1 or null"):
        sm.from_dict(bad)
    bad = (both + BinaryMonitor(threshold=0.3).update({"y_true": 0, "score": 0.2, "weight": 2.0})).to_dict()
    bad["state"]["confusion"]["state"]["count"] = 5  # the parts' layout
    with pytest.raises(ValueError):
        sm.from_dict(bad)
    assert both.copy().reset().count == 0 and both.count == 2


probability_rows = st.lists(
    st.tuples(st.sampled_from(["cat", "dog", "eel"]),
              st.tuples(st.integers(1, 20), st.integers(1, 20), st.integers(1, 20)),
              st.sampled_from([1.0, 2.0])),
    min_size=1, max_size=40,
)


@given(probability_rows)
def test_multiclass_monitor_matches_sklearn(rows):
    classes = ["cat", "dog", "eel"]
    mon = MulticlassMonitor(classes)
    events = []
    for y, raw, w in rows:
        total = sum(raw)
        events.append({"y_true": y, "scores": {c: v / total for c, v in zip(classes, raw)}, "weight": w})
    mon.update_many(events[: len(events) // 2])
    for ev in events[len(events) // 2:]:
        mon.update(ev)
    snap = mon.snapshot()
    json.dumps(snap, allow_nan=False)
    y = [r[0] for r in rows]
    prob = np.array([[v / sum(r[1]) for v in r[1]] for r in rows])
    w = np.array([r[2] for r in rows])
    pred = [classes[i] for i in prob.argmax(axis=1)]
    kw = {"sample_weight": w}
    assert close(snap["accuracy"], sk(skm.accuracy_score, y, pred, **kw))
    assert close(snap["macro_f1"], sk(skm.f1_score, y, pred, labels=classes, average="macro",
                                      zero_division=np.nan, **kw))
    assert close(snap["log_loss"], sk(skm.log_loss, y, prob, labels=classes, **kw))
    assert close(snap["top_k_accuracy"], sk(skm.top_k_accuracy_score, y, prob, k=2, labels=classes, **kw))
    if len(set(y)) == 3:
        exact = skm.roc_auc_score(y, prob, multi_class="ovr", average="macro", labels=classes, **kw)
        low, high = mon.scores.roc_auc_bounds(multi_class="ovr", average="macro")
        assert low <= exact <= high and low <= snap["roc_auc"] <= high
    assert snap["count"] == len(rows)


@given(st.lists(st.fixed_dictionaries(
    {"y_true": st.sampled_from([0, 1, True, False, 0.0, 1.0]), "score": st.floats(-5, 5)},
    optional={"weight": st.sampled_from([1.0, 2.0, 0.0]), "ts": st.sampled_from(["bogus", 1.5]),
              "model": st.sampled_from(["m", ""])}), max_size=30))
def test_binary_monitor_fast_and_general_paths_agree(events):
    fast, general = BinaryMonitor(), BinaryMonitor()
    for ev in events:
        fast.update(ev)  # plain dicts take the inlined path when they can
        general.update({**ev, "weight": ev.get("weight", 1.0)})  # a weight key sends it through the parser
    assert fast.to_dict() == general.to_dict()


@pytest.mark.parametrize("event,field", [
    ({"y_true": 1, "score": float("nan")}, "score"), ({"y_true": 2, "score": 0.5}, "y_true"),
    ({"y_true": np.array([0, 1]), "score": 0.5}, "y_true"), ({"y_true": 1, "score": True}, "score"),
    ({"y_true": 1}, "score"),
])
def test_binary_monitor_update_names_the_bad_field(event, field):
    mon = BinaryMonitor()
    with pytest.raises(ValueError, match=field):
        mon.update(event)
    assert mon.count == 0


def test_r2_of_a_constant_tiny_truth_follows_the_force_finite_rule():
    """y**2 below 2**-1074 (the exact sums' unit) truncates: m2 of a constant truth came out a
    denormal, not 0, and R2 was -1.2e19 instead of scikit-learn's force_finite 0.0 (hypothesis)."""
    mon = RegressionMonitor()
    mon.update_many([{"y_true": 7.649332145972639e-153, "y_pred": 0.0}] * 2)
    assert mon.regression.r2() == 0.0 and mon.snapshot()["r2"] == 0.0
    mon = RegressionMonitor()
    mon.update_many([{"y_true": 7.649332145972639e-153, "y_pred": 7.649332145972639e-153}] * 2)
    assert mon.regression.r2() == 1.0


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("events", [
    [(0.0, 1.797693134862316e293, 1e15)],        # one y_pred * weight beyond the float range
    [(0.0, 1e308, 1.0), (1.0, 1e308, 1.0)],      # a sum beyond it
    [(0.0, 1e294, 1e15), (0.0, -1e294, 1e15)],   # +inf and -inf terms: nan
    [(1.3393857589828342e300, 0.0, 1.0)],        # y_true too large for Dekker's split (Regression)
])
def test_regression_monitor_with_huge_predictions_round_trips(events):
    # the overflowed prediction sum was written as a float inf, which from_dict refused
    # ("prediction_sum must hold finite floats"): the window's state could not be restored
    m = sm.RegressionMonitor()
    for yt, yp, w in events:
        m.update({"y_true": yt, "y_pred": yp, "weight": w})
    d = json.loads(json.dumps(m.to_dict()))
    assert sm.from_dict(d).to_dict() == m.to_dict()
    # an overflowed sum as 'inf', '-inf' or 'nan', which JSON can hold
    assert isinstance(d["state"]["prediction_sum"], str) == (events[0][1] != 0.0)
    more = sm.RegressionMonitor().update({"y_true": 1.0, "y_pred": 2.0})
    assert sm.from_dict(d).merge(more).to_dict() == m.merge(more).to_dict()
    assert (m.snapshot()["mean_prediction"] is None) == (events[0][1] != 0.0)  # None: not finite


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("rows", [
    [[0.0, 0.0, 8.988465674311579e307], [0.0, 0.0, 8.98846567431158e307]],   # a class's sum beyond the range
    [[0.0, 1e294, 0.0], [0.0, -1e294, 1.0]],                                 # +inf and -inf: nan
    [[1e308, -1e308, 0.5], [1e308, -1e308, 0.5]],
])
def test_multiclass_monitor_with_huge_scores_round_trips(rows):
    # an overflowed per-class score sum was written as a float inf, which from_dict refused
    # ("score_sums[2] must be a finite number"): the window's state could not be restored
    classes = ["a", "b", "c"]
    mon = MulticlassMonitor(classes)
    for row in rows:
        mon.update({"y_true": "a", "scores": dict(zip(classes, row)), "weight": 1e15 if 1e294 in row else 1.0})
    d = json.loads(json.dumps(mon.to_dict()))
    assert sm.from_dict(d).to_dict() == mon.to_dict()
    assert any(isinstance(v, str) for v in d["state"]["score_sums"])  # 'inf', '-inf' or 'nan'
    more = MulticlassMonitor(classes).update({"y_true": "b", "scores": {"a": 0.2, "b": 0.5, "c": 0.3}})
    assert sm.from_dict(d).merge(more).to_dict() == mon.merge(more).to_dict()
    json.dumps(mon.snapshot(), allow_nan=False)
    bad = json.loads(json.dumps(d))
    bad["state"]["score_sums_residue"] = [[[1, 0]] if isinstance(v, str) else [] for v in d["state"]["score_sums"]]
    with pytest.raises(ValueError, match="score_sums"):
        sm.from_dict(bad)
