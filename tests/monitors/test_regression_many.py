"""``RegressionMonitor.snapshot_many`` (issue 24, point 3): the exact sums of many small windows
folded in one vectorised pass (``metrics.regression.fold_many``) and each window's record equal
to its own ``snapshot()``, ``to_dict()`` and ``intervals()``, on random and hostile states; a
window engine holding regression monitors builds its small closed windows together."""
from __future__ import annotations

import math
import random

import pytest

from streammetrics.metrics.regression import Regression, fold_many
from streammetrics.monitors.regression import RegressionMonitor

HOSTILE = [0.0, -0.0, 1e-310, -1e-310, 5e-324, 1e300, -1e300, 1e154, -0.999999, -1.0, -5.0, 1e-160, 3.0, 0.1]


def _events(rng: random.Random, n: int, hostile: bool, weights: bool) -> list[dict]:
    out = []
    for _ in range(n):
        if hostile and rng.random() < 0.5:
            t, p = rng.choice(HOSTILE), rng.choice(HOSTILE)
        else:
            t = rng.gauss(10.0, 3.0)
            t, p = t, t + rng.gauss(0.0, 1.0)
        e = {"y_true": t, "y_pred": p}
        if weights:
            e["weight"] = rng.choice([1.0, 0.0, 2.5, 1e-300, 1e15, 3.0])
        out.append(e)
    return out


def _monitors(seed: int, hostile: bool) -> list[RegressionMonitor]:
    rng = random.Random(seed)
    monitors = []
    for _ in range(60):
        m = RegressionMonitor()
        for _ in range(rng.choice([1, 1, 2])):  # one batch, or two (the second into the buffer)
            m.update_many(_events(rng, rng.randint(0, 120), hostile, rng.random() < 0.3))
        if rng.random() < 0.2:
            m.update({"y_true": 1.0, "y_pred": 2.0})
        monitors.append(m)
    return monitors


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("hostile", [False, True])
def test_each_record_equals_the_monitors_own(seed, hostile):
    many, stateless, own = _monitors(seed, hostile), _monitors(seed, hostile), _monitors(seed, hostile)
    for i in range(0, len(many), 9):
        many[i].confidence = stateless[i].confidence = own[i].confidence = 0.9
    got = [repr(r) for r in RegressionMonitor.snapshot_many(many)]
    assert got == [repr((m.snapshot(), m.to_dict(), m.intervals())) for m in own]
    got = [repr(r) for r in RegressionMonitor.snapshot_many(stateless, False)]
    assert got == [repr((m.snapshot(), None, m.intervals())) for m in own]


@pytest.mark.parametrize("hostile", [False, True])
def test_fold_many_gives_each_accumulators_own_state(hostile):
    rng = random.Random(5)
    batches = [_events(rng, rng.randint(0, 60), hostile, rng.random() < 0.5) for _ in range(80)]

    def build() -> list[Regression]:
        out = []
        for b in batches:
            r = Regression()
            if b:
                r.update_many([e["y_true"] for e in b], [e["y_pred"] for e in b], [e.get("weight", 1.0) for e in b])
            out.append(r)
        return out

    together, alone = build(), build()
    fold_many(together)
    assert [r.to_dict() for r in together] == [r.to_dict() for r in alone]
    values = [(r.mse(), r.mae()) for r in together if r.count and r.total_weight > 0]
    assert values and all(math.isfinite(v) or v != v or abs(v) == math.inf for pair in values for v in pair)


def test_a_batch_whose_terms_overflow_folds_at_once_as_before():
    """Only ordinary batches wait in the buffer: numpy's warnings about hostile values come when
    the batch is added, as before (replay prints them in the order they first come)."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = Regression().update_many([1e300, 1.0], [-1e300, 2.0])
        assert any(issubclass(w.category, RuntimeWarning) for w in seen)
        seen.clear()
        Regression().update_many([1e10, 1.0], [-1e10, 2.0])
        assert not seen
    assert r.count == 2


def test_a_batch_buffers_its_prediction_sum_as_events_do():
    """``update_events`` of unit-weight events buffers the prediction sum's terms (folded with
    other windows' by ``snapshot_many``): the same state and snapshot as one event at a time,
    also past the buffer's size and with weights."""
    rng = random.Random(7)
    for n, weights in ((25, False), (700, False), (1500, False), (40, True)):
        events = _events(rng, n, False, weights)
        batch, single, two = RegressionMonitor(), RegressionMonitor(), RegressionMonitor()
        batch.update_many(events)
        two.update_many(events[: n // 2]).update_many(events[n // 2:])
        for e in events:
            single.update(e)
        assert batch.to_dict() == single.to_dict() == two.to_dict()
        assert batch.snapshot() == single.snapshot()
        many = [RegressionMonitor().update_many(events), RegressionMonitor().update_many(events[:3])]
        records = RegressionMonitor.snapshot_many(many)
        assert repr(records[0]) == repr((single.snapshot(), single.to_dict(), single.intervals()))
