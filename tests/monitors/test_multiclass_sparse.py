"""Small multiclass windows are cheap (issue 24, --task multiclass on sparse windows): the window
engine copies an empty template instead of constructing, and the one-vs-rest columns of exact
float-mode state are read in one pass; the same values as the general path."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.monitors import MulticlassMonitor

CLASSES = ["a", "b", "c", "d", "e"]


def _events(rng: np.random.Generator, n: int, k: int, weights: bool = False) -> list[dict]:
    out = []
    for _ in range(n):
        y = int(rng.integers(0, k))
        raw = rng.random(k) + np.eye(k)[y]
        s = np.round(raw / raw.sum(), int(rng.choice([1, 2, 6])))  # ties within and across columns
        e = {"y_true": CLASSES[y], "scores": s.tolist()}
        if weights:
            e["weight"] = float(rng.choice([0.0, 1.0, 2.0, 5.0]))
        out.append(e)
    return out


def test_empty_copies_a_template_without_sharing_state():
    template = MulticlassMonitor(CLASSES[:3])
    a, b = template.empty(), template.empty()
    a.update({"y_true": "a", "scores": [0.5, 0.3, 0.2]})
    assert a.count == 1 and b.count == 0 and template.count == 0
    assert b == template == MulticlassMonitor(CLASSES[:3])
    assert a.snapshot() == MulticlassMonitor(CLASSES[:3]).update({"y_true": "a", "scores": [0.5, 0.3, 0.2]}).snapshot()
    with pytest.raises(ValueError, match="empty"):
        a.empty()


def test_the_pipeline_factory_makes_empty_multiclass_monitors_by_copy():
    from streammetrics.stream.pipeline import PipelineConfig

    factory = PipelineConfig(task="multiclass", classes=CLASSES[:3]).monitor_factory()
    assert getattr(factory, "__name__", "") == "empty"
    m1, m2 = factory(), factory()
    m1.update({"y_true": "b", "scores": [0.2, 0.5, 0.3]})
    assert m1.count == 1 and m2.count == 0 and m2 == MulticlassMonitor(CLASSES[:3])


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("n", [1, 3, 25, 300])
def test_one_pass_ovr_columns_equal_the_aligned_sums(k, weights, n):
    rng = np.random.default_rng(k * 1000 + n + weights)
    events = _events(rng, n, k, weights)
    sc = MulticlassScores(CLASSES[:k])
    sc.update_many([e["y_true"] for e in events], [e["scores"] for e in events],
                   [e.get("weight", 1.0) for e in events])
    assert sc.exact and not sc._units
    binning, fast = sc._ovr_cached()
    slow = sc._ovr_columns()  # (the sums of the pair histograms, aligned per column)
    assert len(fast) == len(slow) == k
    for (k1, n1, p1), (k2, n2, p2) in zip(fast, slow):
        for x, y in ((k1, k2), (n1, n2), (p1, p2)):
            assert x.dtype == y.dtype == np.float64
            assert np.array_equal(x, y)
