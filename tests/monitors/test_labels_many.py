"""``LabelMonitor.snapshot_many`` (issue 24, point 3): the vectorised pass over many small windows
gives each window's record exactly as its own ``snapshot()``, ``to_dict()`` and ``intervals()``
(every metric, per-class row, interval and state field), on random and hostile states; the
``*_many`` kernel twins equal their scalar twins bit for bit; a window engine holding labels
monitors builds its small closed windows together."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from streammetrics.kernels import sparse_confusion as sc
from streammetrics.monitors.labels import MANY_MAX_LABELS, LabelMonitor, label_metrics, label_metrics_many

POOLS = [list("abcdefghi"), list(range(9)), [-(2**63) + 5, 0, 3, 2**40, -7, 11, 12, 13, 14], [False, True],
         ["", "é", "__other__", "x\ny", "9", "10", "A", "a", "b"]]


def _monitor(rng: random.Random, labels_held: int, events: int, weights: bool = False,
             max_labels: int | None = None, delayed: int = 0) -> LabelMonitor:
    m = LabelMonitor(max_labels=max_labels)
    pool = rng.choice(POOLS)[:labels_held]
    batch = [{"y_true": rng.choice(pool), "y_pred": rng.choice(pool)} for _ in range(events)]
    if weights:
        for e in batch:
            e["weight"] = rng.choice([1.0, 2.0, 0.5, 0.0, 1e-300, 3.0])
    m.update_many(batch)
    for _ in range(delayed):  # predictions still awaiting their label (the label-free part only)
        m.update_prediction(m.parse_prediction({"y_pred": rng.choice(pool)}))
    return m


def _records(monitors: list[LabelMonitor], include_state: bool = True) -> list[str]:
    return [repr(r) for r in LabelMonitor.snapshot_many(monitors, include_state)]


def _one_by_one(monitors: list[LabelMonitor], include_state: bool = True) -> list[str]:
    return [repr((m.snapshot(), m.to_dict() if include_state else None, m.intervals())) for m in monitors]


@pytest.mark.parametrize("seed", range(6))
def test_each_vectorised_record_equals_the_monitors_own(seed):
    rng = random.Random(seed)
    monitors = [_monitor(rng, rng.randint(2, 9), rng.randint(1, 80), weights=rng.random() < 0.15,
                         max_labels=rng.choice([None, None, 2, 3, 1000]), delayed=rng.choice([0, 0, 2]))
                for _ in range(150)]
    for m in monitors[::7]:
        m.confidence = 0.9  # (the engine sets it on its template; a pass may hold several)
    assert _records(monitors) == _one_by_one(monitors)
    assert _records(monitors, False) == _one_by_one(monitors, False)


def test_hostile_states_equal_their_own_records():
    rng = random.Random(7)
    monitors = [
        _monitor(rng, 2, 1), _monitor(rng, 7, 7), _monitor(rng, 7, 29), _monitor(rng, 2, 29),
        _monitor(rng, 3, 30), _monitor(rng, 8, 20),  # first beyond the pass's bounds
        LabelMonitor().update_many([{"y_true": "a", "y_pred": "b"}] * 12),  # nothing right
        LabelMonitor().update_many([{"y_true": "a", "y_pred": "b"}, {"y_true": "b", "y_pred": "a"}] * 6),
        LabelMonitor().update_many([{"y_true": True, "y_pred": True}] * 15 + [{"y_true": False, "y_pred": True}]),
        LabelMonitor().update_many([{"y_true": 1, "y_pred": 2, "weight": 2.5}] * 3),  # weighted: its own
        LabelMonitor(labels=["a", "b", "c"]).update_many([{"y_true": "a", "y_pred": "b"}] * 3),  # fixed labels
        _monitor(rng, 5, 25, max_labels=2),  # folds: its own
        LabelMonitor(), _monitor(rng, 3, 0, delayed=4),  # no labelled event
    ]
    assert _records(monitors) == _one_by_one(monitors)


def test_label_metrics_many_is_label_metrics_column_by_column():
    rng = random.Random(3)
    for k in range(2, MANY_MAX_LABELS + 1):
        monitors = [_monitor(rng, k, rng.randint(1, 60)) for _ in range(40)]
        monitors = [m for m in monitors if len(m.confusion.labels) == k]
        counts = np.zeros((len(monitors), k, k))
        for row, m in enumerate(monitors):
            index = {label: j for j, label in enumerate(m.confusion.labels)}
            for (t, p), w in m.confusion.counts().items():
                counts[row, index[t], index[p]] = w
        columns, _ = label_metrics_many(counts)
        for row, m in enumerate(monitors):
            want = label_metrics(m.confusion, None)
            got = {name: columns[name][row] for name in columns}
            assert repr(got) == repr({n: want[n] for n in columns}), (k, m.confusion.counts())


@pytest.mark.parametrize("whole", [True, False])
def test_kernel_twins_equal_the_scalar_kernels_bit_for_bit(whole):
    rng = np.random.default_rng(5)
    for k in range(2, MANY_MAX_LABELS + 1):
        c = rng.integers(0, 6, size=(300, k, k)).astype(np.float64)
        c[::9] = 0.0
        c[1::11, :, 1:] = 0.0  # one predicted label: kappa undefined, Matthews 0
        if not whole:
            c = c * rng.choice([0.5, 1e-3, 3.7, 1e10], size=c.shape)
        tp = np.ascontiguousarray(np.diagonal(c, axis1=1, axis2=2))
        true, pred = c.sum(axis=2), c.sum(axis=1)
        kappa = sc.kappa_dense_many(c)
        balanced = sc.balanced_accuracy_many(tp, true)
        matthews = sc.matthews_many(true, pred, tp.sum(axis=1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(len(c)):
                rows, cols = np.nonzero(np.ones((k, k)))
                want = sc.kappa_dense(rows, cols, c[i].ravel(), k, None)
                assert repr(float(kappa[i])) == repr(want)
                if true[i].any():
                    assert repr(float(balanced[i])) == repr(sc.balanced_accuracy(tp[i], true[i], False))
                if whole:  # (dot products of whole numbers: exact in any order)
                    assert repr(float(matthews[i])) == repr(sc.matthews(true[i], pred[i], float(np.sum(tp[i]))))


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_gives_the_state_of_its_events_one_by_one(seed):
    rng = random.Random(seed)
    for _ in range(40):
        pool = rng.choice(POOLS)[:rng.randint(1, 9)]
        events = [{"y_true": rng.choice(pool), "y_pred": rng.choice(pool)} for _ in range(rng.randint(1, 40))]
        if rng.random() < 0.2:
            for e in events:
                e["y_pred"] = np.array([e["y_pred"]])[0]  # numpy scalars: their built-in labels
        if rng.random() < 0.2:
            events[0]["weight"] = rng.choice([2.0, 0.5])
        batch, one_by_one = LabelMonitor(), LabelMonitor()
        for _ in range(2):
            batch.update_many(events)
            for e in events:
                one_by_one.update(e)
        assert batch.to_dict() == one_by_one.to_dict()
        assert repr(batch.snapshot()) == repr(one_by_one.snapshot())


def test_empty_copies_a_template_without_sharing_state():
    from streammetrics.stream.pipeline import PipelineConfig

    for kwargs in ({}, {"labels": ["a", "b"]}, {"max_labels": 3}):
        template = LabelMonitor(**kwargs)
        a, b = template.empty(), template.empty()
        a.update({"y_true": "a", "y_pred": "b"})
        assert a.count == 1 and b.count == 0 and template.count == 0
        assert b == template == LabelMonitor(**kwargs)
        assert a == LabelMonitor(**kwargs).update({"y_true": "a", "y_pred": "b"})
        with pytest.raises(ValueError, match="empty"):
            a.empty()
    factory = PipelineConfig(task="labels").monitor_factory()
    assert getattr(factory, "__name__", "") == "empty"
