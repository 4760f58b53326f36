"""Small multiclass windows are cheap (issue 24, --task multiclass on sparse windows): the window
engine copies an empty template instead of constructing, and the one-vs-rest columns of exact
float-mode state are read in one pass; the same values as the general path."""
from __future__ import annotations

import warnings

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


def _windows(rng: np.random.Generator, sizes: list[int], k: int, weights: bool = False) -> list[MulticlassMonitor]:
    out = []
    for n in sizes:
        m = MulticlassMonitor(CLASSES[:k])
        m.update_many(_events(rng, n, k, weights))
        out.append(m)
    return out


@pytest.mark.parametrize("k", [2, 3, 5])
def test_windows_built_together_equal_each_built_alone(k):
    rng = np.random.default_rng(k)
    sizes = [1, 2, 25, 25, 60, 150, 300, 400]
    together = _windows(rng, sizes, k)
    together[1].confidence = 0.9
    alone = [m.copy() for m in together]
    for m, a in zip(together, alone):
        a.confidence = m.confidence
    records = MulticlassMonitor.snapshot_many(together)
    assert any(r[2] is not None and r[2]["intervals"]["roc_auc"] is not None for r in records)
    for (metrics, state, intervals), a in zip(records, alone):
        assert (metrics, state, intervals) == (a.snapshot(), a.to_dict(), a.intervals())


def test_ovr_many_keeps_the_scalar_values_and_leaves_other_windows_alone():
    rng = np.random.default_rng(11)
    accs = [m.scores for m in _windows(rng, [30, 200, 300], 3)]
    weighted = _windows(rng, [200], 3, weights=True)[0].scores
    one_class = MulticlassScores(CLASSES[:3]).update_many(["a"] * 5, [[0.5, 0.3, 0.2]] * 5)
    binned = MulticlassScores(CLASSES[:3], max_exact=16).update_many(["a", "b", "c"] * 10, rng.random((30, 3)))
    alone = [acc.copy() for acc in accs + [weighted, one_class, binned]]
    MulticlassScores.ovr_many(accs + [weighted, one_class, binned], [0.95] * 6)
    for acc, a in zip(accs + [weighted, one_class, binned], alone):
        for average in ("macro", "weighted", None):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (the one-class window's: the same on both paths)
                got, want = acc.roc_auc(average=average), a.roc_auc(average=average)
            assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
        assert acc.interval("roc_auc", 0.95) == a.interval("roc_auc", 0.95)
        assert acc.interval("roc_auc", 0.95, average="weighted") == a.interval("roc_auc", 0.95, average="weighted")
    assert not binned.exact  # (on a grid: left to its own path)


@pytest.mark.parametrize("n", [3, 40, 300])
@pytest.mark.parametrize("weights", [False, True])
def test_the_batch_kept_by_an_empty_accumulator_gives_the_same_state_and_metrics(n, weights):
    """update_many on an empty accumulator keeps its batch's entries (they are the pair
    histograms'); the state written and the AUCs read from them equal those of the same events
    added one by one, or in two batches (nothing kept), and of the state loaded back."""
    rng = np.random.default_rng(n + weights)
    events = _events(rng, n, 5, weights)
    y, s, w = [e["y_true"] for e in events], [e["scores"] for e in events], [e.get("weight", 1.0) for e in events]
    batch = MulticlassScores(CLASSES).update_many(y, s, w)
    one_by_one = MulticlassScores(CLASSES)
    for args in zip(y, s, w):
        one_by_one.update(*args)
    halves = MulticlassScores(CLASSES).update_many(y[: n // 2], s[: n // 2], w[: n // 2])
    halves.update_many(y[n // 2:], s[n // 2:], w[n // 2:])
    loaded = MulticlassScores.from_dict(batch.to_dict())
    for other in (one_by_one, halves, loaded):
        assert other.to_dict() == batch.to_dict()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got, want = other.roc_auc(average=None), batch.roc_auc(average=None)
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    batch.update(y[0], s[0], w[0])  # (a change: the batch kept is dropped)
    one_by_one.update(y[0], s[0], w[0])
    assert batch.to_dict() == one_by_one.to_dict()


@pytest.mark.parametrize("first", [0, 3, 10])
def test_a_batch_taking_the_pairs_past_max_exact_keeps_the_one_vs_rest_sums_of_before(first):
    """The one-vs-rest set kept when the pair histograms leave exact scores starts from their sums
    before the batch (computed only when a batch can take them past max_exact): the same state as
    the events added one by one."""
    rng = np.random.default_rng(first)
    events = _events(rng, 12, 3)
    y, s = [e["y_true"] for e in events], [e["scores"] for e in events]
    batches = MulticlassScores(CLASSES[:3], max_exact=20)
    if first:
        batches.update_many(y[:first], s[:first])
    batches.update_many(y[first:], s[first:])
    one_by_one = MulticlassScores(CLASSES[:3], max_exact=20)
    for args in zip(y, s):
        one_by_one.update(*args)
    assert not batches.exact and batches.to_dict() == one_by_one.to_dict()
