"""LabelMonitor ``max_labels`` (``--max-labels``): discovered labels bounded per window, the
rest folded into ``__other__`` / ``__other_mismatch__`` and counted (issue 30, finding 1)."""
from __future__ import annotations

import json
import random

import pytest

import streammetrics as sm
from streammetrics.core.state import set_limits
from streammetrics.monitors.labels import OTHER_LABELS, LabelMonitor

OTHER, MISMATCH = OTHER_LABELS["str"]


def _events(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        t = f"c{min(int(rng.expovariate(0.05)), 400)}"
        p = t if rng.random() < 0.6 else f"c{min(int(rng.expovariate(0.05)), 400)}"
        out.append({"y_true": t, "y_pred": p, "weight": rng.choice([1.0, 1.0, 2.0, 0.5])})
    return out


def test_folding_keeps_accuracy_and_the_kept_labels_exact():
    evs = _events(3000)
    full = LabelMonitor().update_many(evs).snapshot()
    bounded = LabelMonitor(max_labels=20).update_many(evs[:40])  # then folds: the frequent labels stay kept
    bounded.update_many(evs[40:])
    snap = bounded.snapshot()
    assert snap["accuracy"] == full["accuracy"]
    assert snap["count"] == full["count"] and snap["total_weight"] == full["total_weight"]
    kept = set(snap["per_class"]) - {OTHER, MISMATCH}
    assert len(kept) == 20 and snap["labels_folded"] > 0
    for label in kept:  # tp, predicted and true weight of a kept label are unchanged by folding
        for metric in ("precision", "recall", "f1", "support"):
            assert snap["per_class"][label][metric] == pytest.approx(full["per_class"][label][metric], abs=1e-12)


def test_at_the_edge():
    evs = [{"y_true": f"l{i}", "y_pred": f"l{i}"} for i in range(10)]
    m = LabelMonitor(max_labels=10).update_many(evs)
    snap = m.snapshot()
    assert snap["labels_folded"] == 0 and OTHER not in snap["per_class"] and snap["accuracy"] == 1.0
    m.update({"y_true": "l10", "y_pred": "l3"})  # an 11th label: one folded (the smallest weight)
    snap = m.snapshot()
    assert snap["labels_folded"] == 1
    assert set(snap["per_class"]) == {f"l{i}" for i in range(10)} | {OTHER}
    assert snap["per_class"][OTHER]["support"] == 1.0 and snap["accuracy"] == 10 / 11
    # the state holds at most 2 L labels (+ the two fold labels) whatever comes
    for i in range(5000):
        m.update({"y_true": f"x{i}", "y_pred": f"y{i}"})
        assert m.labels_held <= 2 * 10 + 2
    snap = m.snapshot()
    assert len(snap["per_class"]) <= 12 and snap["count"] == 5011 and snap["accuracy"] == 10 / 5011


def test_wrong_predictions_of_folded_labels_stay_wrong():
    """Both labels folded: (t, p) with t != p must not land on the diagonal (__other__, __other__)."""
    evs = [{"y_true": "a", "y_pred": "a"}] * 5 + [{"y_true": f"t{i}", "y_pred": f"p{i}"} for i in range(50)]
    snap = LabelMonitor(max_labels=2).update_many(evs).snapshot()
    assert snap["accuracy"] == 5 / 55
    assert snap["per_class"][MISMATCH]["support"] == 0.0 and snap["per_class"][OTHER]["support"] == 50.0


def test_number_labels_fold_into_reserved_numbers():
    m = LabelMonitor(max_labels=2).update_many([{"y_true": i, "y_pred": i + 1} for i in range(30)])
    assert set(m.snapshot()["per_class"]) >= {str(x) for x in OTHER_LABELS["number"]}
    assert sm.from_dict(json.loads(json.dumps(m.to_dict()))) == m


def test_round_trip_and_merge_order():
    evs = _events(800, seed=3)
    parts = [LabelMonitor(max_labels=30).update_many(evs[i:i + 100]) for i in range(0, 800, 100)]
    a = LabelMonitor(max_labels=30)
    for p in parts:
        a.merge(p)
    b = LabelMonitor(max_labels=30)
    for p in reversed(parts):
        b.merge(p)
    assert a.labels_held <= 62 and b.labels_held <= 62
    back = sm.from_dict(json.loads(json.dumps(a.to_dict())))
    assert back == a and back.snapshot() == a.snapshot()
    # fewer than 2 L distinct labels: the same snapshot whatever the order
    small = [e for e in evs if int(e["y_true"][1:]) < 50 and int(e["y_pred"][1:]) < 50]
    one = LabelMonitor(max_labels=30).update_many(small)
    two = LabelMonitor(max_labels=30).update_many(small[::-1])
    assert one.snapshot() == two.snapshot()


def test_from_dict_bounds_discovered_labels():
    m = LabelMonitor(max_labels=3).update_many([{"y_true": f"l{i}", "y_pred": f"l{i}"} for i in range(6)])
    d = json.loads(json.dumps(m.to_dict()))
    cm = d["state"]["confusion"]["state"]
    cm["cells"] += [[f"z{i}", f"z{i}", 1.0] for i in range(3)]
    cm["count"] += 3
    cm["total_weight"] += 3.0
    d["state"]["count"] += 3
    d["state"]["prediction_weight"] += 3.0
    d["state"]["predicted_labels"] += [[f"z{i}", 1.0] for i in range(3)]
    with pytest.raises(ValueError, match="more than 2 \\* max_labels"):
        sm.from_dict(d)
    d2 = m.to_dict()
    d2["config"]["max_labels"] = 10**9  # a hostile bound cannot lift the cap
    with pytest.raises(ValueError, match="max_labels"):
        sm.from_dict(d2)


def test_confusion_matrix_from_dict_bounds_discovered_labels():
    """p_state's cm_300k_distinct_labels, at a small cap: refused like a configured list."""
    cm = sm.ConfusionMatrix().update_many([f"x{i}" for i in range(60)], [f"y{i}" for i in range(60)])
    d = cm.to_dict()
    old = set_limits(max_labels=100)
    try:
        with pytest.raises(ValueError, match="more than max_labels=100 distinct labels"):
            sm.from_dict(d)
        assert sm.from_dict(sm.ConfusionMatrix().update_many(["a"] * 3, ["b"] * 3).to_dict()).count == 3
    finally:
        set_limits(max_labels=old.max_labels)


def test_max_labels_is_checked():
    with pytest.raises(ValueError, match="max_labels"):
        LabelMonitor(max_labels=1)
    with pytest.raises(ValueError, match="cannot be given with labels"):
        LabelMonitor(labels=["a", "b"], max_labels=5)


def test_fold_labels_sums_exactly():
    rng = random.Random(5)
    yt = [f"l{rng.randrange(30)}" for _ in range(500)]
    yp = [t if rng.random() < 0.5 else f"l{rng.randrange(30)}" for t in yt]
    w = [rng.random() * 3 for _ in yt]  # weights that are not whole: exact sums in units
    cm = sm.ConfusionMatrix().update_many(yt, yp, w)
    folded = cm.fold_labels({f"l{i}" for i in range(5)}, OTHER, MISMATCH)
    assert folded.count == cm.count and folded.total_weight == cm.total_weight
    assert folded.accuracy() == cm.accuracy()
    assert set(folded.labels) == {f"l{i}" for i in range(5)} | {OTHER, MISMATCH}
    with pytest.raises(ValueError, match="other and mismatch must differ"):
        cm.fold_labels([], OTHER, OTHER)
    with pytest.raises(ValueError, match="discovered labels"):
        sm.ConfusionMatrix(["a", "b"]).fold_labels(["a"], OTHER, MISMATCH)
