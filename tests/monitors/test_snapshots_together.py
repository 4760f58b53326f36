"""The engine builds small closed windows of a monitor type together (``Monitor.snapshots_together``
and its ``snapshot_many``): the same snapshots, in the same order, as built one by one."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.monitors.labels import LabelMonitor
from streammetrics.monitors.multiclass import MulticlassMonitor
from streammetrics.monitors.regression import RegressionMonitor
from streammetrics.stream.pipeline import Pipeline, PipelineConfig


def _probabilities(rng: random.Random) -> list[float]:
    raw = [rng.random() for _ in range(3)]
    return [round(v / sum(raw), 6) for v in raw]


CASES = {
    "labels": (LabelMonitor, {}, 2000, lambda rng: {"y_true": rng.choice("abc"), "y_pred": rng.choice("abc")}),
    "regression": (RegressionMonitor, {}, 2000, lambda rng: {"y_true": rng.gauss(0, 1), "y_pred": rng.gauss(0, 1)}),
    "multiclass": (MulticlassMonitor, {"classes": ["a", "b", "c"]}, 1500,
                   lambda rng: {"y_true": rng.choice("abc"), "scores": _probabilities(rng)}),
}


@pytest.mark.parametrize("task", CASES)
def test_windows_of_a_monitor_type_are_built_together(monkeypatch, task):
    kind, options, n, fields = CASES[task]
    rng = random.Random(11)
    stream = [{"ts": t * 0.5, "model": f"m{t % 37}", **fields(rng)} for t in range(n)]
    out = {}
    for together in (True, False):
        monkeypatch.setattr(kind, "snapshots_together", together)
        pipeline = Pipeline(PipelineConfig(window=10.0, max_future=None, task=task, **options))
        for e in stream:
            pipeline.process(json.dumps(e))
        out[together] = (pipeline.windows.deferred_count, pipeline.poll() + pipeline.flush())
    assert out[True][0] > 0 and out[False][0] == 0
    assert out[True][1] == out[False][1] and len(out[True][1]) > 100
