"""``MulticlassMonitor.snapshot_many`` (issue 24, point 3): the label metrics of many small windows
in one vectorised pass (``monitors.labels.label_parts_many``), the score metrics by each monitor;
every record equal to the monitor's own ``snapshot()``, ``to_dict()`` and ``intervals()``, on
random and hostile states (absent classes, one-hot and tied scores, weights, 2 to 9 classes,
windows with and without labelled events); a window engine builds them together."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.monitors.multiclass import MulticlassMonitor
from streammetrics.stream.pipeline import Pipeline, PipelineConfig

POOLS = [list("abcdefghi"), list(range(9)), ["", "é", "x y", "10", "9", "A", "a", "b", "c"]]


def _monitors(seed: int) -> list[MulticlassMonitor]:
    rng = random.Random(seed)
    out = []
    for _ in range(120):
        classes = rng.choice(POOLS)[:rng.randint(2, 9)]
        k = len(classes)
        m = MulticlassMonitor(classes)
        events = []
        for _ in range(rng.choice([0, 1, 5, 25, 29, 30, 70])):
            raw = [rng.random() for _ in classes]
            shape = rng.random()
            if shape < 0.1:
                raw = [1.0] + [0.0] * (k - 1)  # one-hot
            elif shape < 0.2:
                raw = [0.5] * k  # tied
            total = sum(raw)
            e = {"y_true": rng.choice(classes[:rng.randint(1, k)]), "scores": [x / total for x in raw]}
            if rng.random() < 0.05:
                e["weight"] = rng.choice([2.0, 0.5, 0.0])
            events.append(e)
        if events:
            m.update_many(events)
        if rng.random() < 0.1:
            m.confidence = 0.9
        out.append(m)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_each_record_equals_the_monitors_own(seed):
    got = [repr(r) for r in MulticlassMonitor.snapshot_many(_monitors(seed))]
    assert got == [repr((m.snapshot(), m.to_dict(), m.intervals())) for m in _monitors(seed)]
    got = [repr(r) for r in MulticlassMonitor.snapshot_many(_monitors(seed), False)]
    assert got == [repr((m.snapshot(), None, m.intervals())) for m in _monitors(seed)]


def test_windows_of_multiclass_monitors_are_built_together(monkeypatch):
    rng = random.Random(11)
    stream = [{"ts": t * 0.5, "model": f"m{t % 37}", "y_true": rng.choice("abc"),
               "scores": [round(x, 6) for x in (lambda r: [v / sum(r) for v in r])([rng.random() for _ in range(3)])]}
              for t in range(1500)]
    out = {}
    for together in (True, False):
        monkeypatch.setattr(MulticlassMonitor, "snapshots_together", together)
        pipeline = Pipeline(PipelineConfig(window=10.0, max_future=None, task="multiclass", classes=["a", "b", "c"]))
        for e in stream:
            pipeline.process(json.dumps(e))
        out[together] = (pipeline.windows.deferred_count, pipeline.poll() + pipeline.flush())
    assert out[True][0] > 0 and out[False][0] == 0
    assert out[True][1] == out[False][1] and len(out[True][1]) > 100
