"""MulticlassMonitor.update_events reads the batch's score rows once for both parts (a (n, K)
array of floats built from the events), with the state the two parts give one after the other."""
from __future__ import annotations

import numpy as np

import streammetrics.monitors.multiclass as multiclass_module
from streammetrics.events.parser import EventParser
from streammetrics.monitors import MulticlassMonitor


def _events(n: int, weighted: bool):
    rng = np.random.default_rng(n)
    parser = EventParser("multiclass", require_key=False, classes=["a", "b", "c"])
    out = []
    for i in range(n):
        raw = rng.random(3)
        row = {"y_true": "abc"[i % 3], "scores": (raw / raw.sum()).round(6).tolist()}
        if weighted:
            row["weight"] = float(rng.integers(0, 4))
        out.append(parser.parse(row))
    return out


def test_one_score_matrix_per_batch(monkeypatch):
    built: list[int] = []
    real = multiclass_module._score_matrix
    monkeypatch.setattr(multiclass_module, "_score_matrix", lambda ev: built.append(1) or real(ev))
    for weighted in (False, True):
        events = _events(120, weighted)
        built.clear()
        both = MulticlassMonitor(["a", "b", "c"]).update_events(events)
        assert len(built) == 1
        parts = MulticlassMonitor(["a", "b", "c"]).update_outcomes(events).update_predictions(events)
        assert both.to_dict() == parts.to_dict() and both.snapshot() == parts.snapshot()
    assert MulticlassMonitor(["a", "b", "c"]).update_events([]).count == 0


def test_a_batch_equals_its_events_one_by_one():
    """The batch path (class columns in one pass, their exact sums shared with the per-class score
    sums) leaves the state the per-event path does, into a fresh window and into a held one."""
    for weighted in (False, True):
        events = _events(40, weighted)
        batch = MulticlassMonitor(["a", "b", "c"]).update_events(events[:25])
        single = MulticlassMonitor(["a", "b", "c"])
        for e in events[:25]:
            single.update_event(e)
        assert batch.to_dict() == single.to_dict() and batch.snapshot() == single.snapshot()
        batch.update_events(events[25:])
        for e in events[25:]:
            single.update_event(e)
        assert batch.to_dict() == single.to_dict() and batch.snapshot() == single.snapshot()
