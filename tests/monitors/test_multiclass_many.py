"""``MulticlassMonitor.snapshot_many`` (issue 24, point 3): the label metrics of many small windows
in one vectorised pass (``monitors.labels.label_parts_many``), the score metrics by each monitor;
every record equal to the monitor's own ``snapshot()``, ``to_dict()`` and ``intervals()``, on
random and hostile states (absent classes, one-hot and tied scores, weights, 2 to 9 classes,
windows with and without labelled events); a window engine builds them together."""
from __future__ import annotations

import random

import pytest

from streammetrics.monitors.multiclass import MulticlassMonitor

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
