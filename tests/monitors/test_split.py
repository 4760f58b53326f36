"""Monitors: the label-free part (every prediction) and the label-based part (labelled
predictions) fed apart or together (``update_prediction`` / ``update_outcome`` /
``update_event``), and snapshots without delayed labels unchanged."""
import json
import math
import random

import pytest

import streammetrics as sm
from streammetrics.events.parser import Event


def _events(task, n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        w = rng.choice([1.0, 1.0, 0.5, 2.0])
        if task == "binary":
            out.append(Event(i, "m", y_true=int(rng.random() < 0.4), score=rng.random(), weight=w))
        elif task == "multiclass":
            raw = [rng.random() for _ in range(3)]
            out.append(Event(i, "m", y_true=rng.choice("abc"), scores=tuple(r / sum(raw) for r in raw), weight=w))
        elif task == "labels":
            out.append(Event(i, "m", y_true=rng.choice("xyz"), y_pred=rng.choice("xyz"), weight=w))
        else:
            y = rng.uniform(0, 5)
            out.append(Event(i, "m", y_true=y, y_pred=y + rng.gauss(0, 1), weight=w))
    return out


MONITORS = {
    "binary": lambda: sm.BinaryMonitor(threshold=0.4),
    "multiclass": lambda: sm.MulticlassMonitor(list("abc")),
    "labels": sm.LabelMonitor,
    "regression": sm.RegressionMonitor,
}
LABEL_FREE = {"count", "total_weight", "mean_score", "predicted_positive_rate", "mean_prediction"}


def _strip_label(e):
    return Event(e.ts, e.model, y_true=None, score=e.score, scores=e.scores, y_pred=e.y_pred, weight=e.weight)


@pytest.mark.parametrize("task", sorted(MONITORS))
@pytest.mark.parametrize("batch", [False, True])
def test_delayed_labels_split_the_parts(task, batch):
    evs = _events(task, 80, 1)
    labelled = evs[::3]
    split = MONITORS[task]()
    if batch:
        split.update_predictions([_strip_label(e) for e in evs])  # no y_true at prediction time
        split.update_outcomes(labelled)
    else:
        for e in evs:
            split.update_prediction(_strip_label(e))
        for e in labelled:
            split.update_outcome(e)
    assert split.count == len(evs) and split.labeled == len(labelled)
    everything = MONITORS[task]()
    for e in evs:
        everything.update_event(e)
    only_labelled = MONITORS[task]()
    for e in labelled:
        only_labelled.update_event(e)
    got, free, based = split.snapshot(), everything.snapshot(), only_labelled.snapshot()
    assert got.keys() == free.keys()
    for key in got:
        if key == "per_class":
            for label, row in got[key].items():
                for k, v in row.items():
                    want = free if k in ("predicted_rate", "mean_score") else based
                    assert v == pytest.approx(want[key][label][k]), (label, k)
        else:
            want = free if key in LABEL_FREE else based
            assert got[key] == pytest.approx(want[key]), key
    # a round trip keeps both parts
    back = sm.from_dict(json.loads(json.dumps(split.to_dict())))
    assert back == split and back.labeled == split.labeled and back.count == split.count


@pytest.mark.parametrize("task", sorted(MONITORS))
def test_update_event_is_prediction_plus_outcome_and_batches_agree(task):
    evs = _events(task, 60, 2)
    a, b, c = MONITORS[task](), MONITORS[task](), MONITORS[task]()
    for e in evs:
        a.update_event(e)
        b.update_prediction(e)
        b.update_outcome(e)
    c.update_events(evs[:25]).update_events(evs[25:])
    assert a == b
    assert json.dumps(a.snapshot()) == json.dumps(b.snapshot())
    sa, sc = a.snapshot(), c.snapshot()
    for key, v in sa.items():
        if not isinstance(v, dict):
            assert (sc[key] is None and v is None) or sc[key] == pytest.approx(v, rel=1e-9), key
    assert a.labeled == a.count == len(evs)


def test_binary_label_free_metrics_are_the_old_formulas():
    """Without delayed labels, count/total_weight/mean_score/predicted_positive_rate equal the
    values main computed from the label-based part (score_sum / confusion totals)."""
    evs = _events("binary", 200, 3)
    m = sm.BinaryMonitor(threshold=0.4)
    for e in evs:
        m.update_event(e)
    cm = m.confusion
    mat = cm.matrix([0, 1])
    snap = m.snapshot()
    assert snap["count"] == cm.count and snap["total_weight"] == cm.total_weight
    # the score sum is exact (kernels.exact_sum): math.fsum of the per-event terms, rounded once
    assert snap["mean_score"] == math.fsum(e.weight * e.score for e in evs) / cm.total_weight
    assert snap["predicted_positive_rate"] == mat[:, 1].sum() / cm.total_weight


def test_binary_monitor_version_3_writes_both_layouts_and_reads_version_2():
    m = sm.BinaryMonitor().update({"y_true": 1, "score": 0.5, "weight": 2.0})  # (the parts' layout)
    assert m.to_dict()["version"] == 3 and set(m.to_dict()["state"]) == {"predictions", "scores", "confusion"}
    assert type(m).readable_versions() == (1, 2, 3)
    assert sm.from_dict({**m.to_dict(), "version": 2}) == m  # version 2: the parts' layout only
    small = sm.BinaryMonitor().update({"y_true": 1, "score": 0.5})
    assert set(small.to_dict()["state"]) == {"score", "y_true"}  # the events form
    parts = {**small.to_dict(), "version": 2, "state": small._parts_state()}  # as version 2 wrote it
    assert sm.from_dict(parts) == small and sm.from_dict(parts).to_dict() == small.to_dict()
