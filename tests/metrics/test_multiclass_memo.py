"""MulticlassScores computes its one-vs-rest AUCs once per state (a snapshot reads the macro,
weighted and per-class AUCs and two intervals from them), and a change of the state empties
the memo."""
from __future__ import annotations

import numpy as np

from streammetrics.metrics import multiclass_scores as mcs
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.monitors import MulticlassMonitor


def _rows(rng: np.random.Generator, n: int) -> tuple[list[str], np.ndarray]:
    y = rng.integers(0, 3, n)
    s = rng.random((n, 3)) + np.eye(3)[y]
    return [["a", "b", "c"][i] for i in y], s / s.sum(axis=1, keepdims=True)


def test_snapshot_computes_each_class_auc_once(monkeypatch):
    rng = np.random.default_rng(3)
    y, s = _rows(rng, 200)
    m = MulticlassMonitor(["a", "b", "c"])
    m.update_many([{"y_true": t, "scores": list(r)} for t, r in zip(y, s)])
    calls = []
    real = mcs.binary_auc

    def counting(*args):
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(mcs, "binary_auc", counting)
    m.snapshot()
    m.intervals()
    assert calls == [False] * 3  # per class once: with exact scores the bounds are the value


def test_binned_scores_compute_each_class_auc_once_with_and_once_without_bounds(monkeypatch):
    rng = np.random.default_rng(3)
    y, s = _rows(rng, 200)
    sc = MulticlassScores(["a", "b", "c"], max_exact=16).update_many(y, s)  # (binned: bounds apart)
    calls = []
    real = mcs.binary_auc

    def counting(*args):
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(mcs, "binary_auc", counting)
    sc.roc_auc(), sc.roc_auc(average="weighted"), sc.roc_auc(average=None)
    sc.interval("roc_auc"), sc.interval("roc_auc", average="weighted")
    assert calls == [False] * 3 + [True] * 3
    low, high = sc.roc_auc_bounds()
    assert low < high  # (binned: the bounds differ from the value)


def test_memo_follows_every_change():
    rng = np.random.default_rng(4)
    y, s = _rows(rng, 300)
    grown = MulticlassScores(["a", "b", "c"])
    for lo, hi in ((0, 50), (50, 51), (51, 300)):
        grown.update_many(y[lo:hi], s[lo:hi])
        fresh = MulticlassScores(["a", "b", "c"]).update_many(y[:hi], s[:hi])
        for average in ("macro", "weighted", None):
            assert np.array_equal(grown.roc_auc(average=average), fresh.roc_auc(average=average), equal_nan=True)
        assert grown.interval("roc_auc") == fresh.interval("roc_auc")
    grown.update(y[0], s[0])
    fresh = MulticlassScores(["a", "b", "c"]).update_many([*y, y[0]], np.vstack([s, s[:1]]))
    assert grown.roc_auc() == fresh.roc_auc()
    other = MulticlassScores(["a", "b", "c"]).update_many(y[:40], s[:40])
    grown.merge(other)
    assert grown.roc_auc() == fresh.merge(other).roc_auc()
    grown.reset()
    grown.update_many(y[:40], s[:40])
    assert grown.roc_auc() == other.roc_auc()


def test_every_read_warns_as_the_first():
    """A class whose events all weigh 0 has no defined AUC: each call warns (the memo keeps its warnings)."""
    import warnings

    sc = MulticlassScores(["a", "b", "c"]).update_many(
        ["a", "b", "c", "a"], [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7], [0.5, 0.4, 0.1]],
        [1.0, 1.0, 0.0, 1.0])
    for _ in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sc.roc_auc(average="weighted")
        assert any("ROC AUC" in str(w.message) or "meaningless" in str(w.message) for w in caught)


def test_arg_max_matrix_built_once_and_given_as_copies(monkeypatch):
    from streammetrics.metrics.confusion import ConfusionMatrix

    rng = np.random.default_rng(5)
    y, s = _rows(rng, 60)
    m = MulticlassMonitor(["a", "b", "c"])
    m.update_many([{"y_true": t, "scores": list(r)} for t, r in zip(y, s)])
    built = []
    real = ConfusionMatrix._from_counts.__func__

    def counting(cls, *args, **kwargs):
        built.append(1)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(ConfusionMatrix, "_from_counts", classmethod(counting))
    first = m.snapshot(), m.intervals()
    assert len(built) == 1
    cm = m.scores.confusion()
    cm.update("a", "b", 3.0)  # the caller's copy: the monitor's matrix unchanged
    assert (m.snapshot(), m.intervals()) == first
    assert m.scores.confusion().to_dict() != cm.to_dict()
