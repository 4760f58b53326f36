"""monitors.fast_snapshot.binary_snapshot (BinaryMonitor.snapshot) == the snapshot computed
through the accumulators' own metric methods (numpy, scikit-learn's machinery), as
BinaryMonitor.snapshot did before: same keys in the same order, values within 1e-12 and None
in the same places, on hypothesis streams (ties, 0.0 and
1.0 scores, scores outside [0, 1], unit/dyadic/zero weights, one-class and empty windows,
label-free predictions, binned and exact monitors, windows above SMALL_LEVELS levels that take the numpy path)."""
from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streammetrics.kernels.ranking_small import SMALL_LEVELS
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.base import json_number, quiet, quiet_pair
from streammetrics.monitors.fast_snapshot import binary_snapshot

_NAN = math.nan


def reference_snapshot(monitor: BinaryMonitor) -> dict:
    """BinaryMonitor.snapshot() before fast_snapshot: every metric from its accumulator method."""
    cm, sc, pr = monitor.confusion, monitor.scores, monitor.predictions
    total = cm.total_weight
    m = cm.matrix([0, 1])
    low, high = quiet_pair(sc.roc_auc_bounds)
    return {
        "count": monitor.count,
        "total_weight": json_number(pr.total_weight),
        "accuracy": quiet(cm.accuracy),
        "balanced_accuracy": quiet(cm.balanced_accuracy),
        "precision": quiet(cm.precision, zero_division=_NAN),
        "recall": quiet(cm.recall, zero_division=_NAN),
        "f1": quiet(cm.f1, zero_division=_NAN),
        "specificity": quiet(cm.specificity, zero_division=_NAN),
        "matthews_corrcoef": quiet(cm.matthews_corrcoef) if total > 0 else None,
        "roc_auc": quiet(sc.roc_auc),
        "roc_auc_low": low,
        "roc_auc_high": high,
        "average_precision": quiet(sc.average_precision),
        "log_loss": quiet(sc.log_loss),
        "brier_score": quiet(sc.brier_score),
        "positive_rate": json_number(m[1].sum() / total) if total > 0 else None,
        "predicted_positive_rate": quiet(pr.predicted_positive_rate),
        "mean_score": quiet(pr.mean_score),
    }

score = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 0.25, 1.0 - 2.0**-53, 1.0 + 2.0**-52, 2.0**-60]),
    st.floats(0.0, 1.0).map(lambda s: round(s, 2)),
    st.floats(0.0, 1.0),
    st.floats(-3.0, 4.0),
)
# (y_true, score, weight, label-free: the prediction only, as before its label arrives)
event = st.tuples(st.integers(0, 1), score, st.sampled_from([None, None, None, 0.0, 0.5, 2.0, 3.25]),
                  st.sampled_from([False, False, False, True]))


def check(monitor):
    ref = reference_snapshot(monitor)
    ours = monitor.snapshot()
    assert ours == binary_snapshot(monitor)
    # snapshot_state (the window engine's one pass) gives the same two dicts, byte for byte
    fresh = BinaryMonitor.from_dict(monitor.to_dict())
    metrics, state = fresh.snapshot_state()
    assert json.dumps([metrics, state]) == json.dumps([ours, monitor.to_dict()])
    assert list(ours) == list(ref)
    for name, value in ref.items():
        if value is None or ours[name] is None:
            assert ours[name] is None and value is None, (name, ours[name], value)
        else:
            assert abs(ours[name] - value) <= 1e-12, (name, ours[name], value)
            assert type(ours[name]) is type(value), (name, ours[name], value)


def fill(events, threshold=0.5, exact=False):
    monitor = BinaryMonitor(threshold=threshold, exact=exact)
    for y, s, w, label_free in events:
        event = {"y_true": y, "score": s, **({} if w is None else {"weight": w})}
        if label_free:
            monitor.update_prediction(monitor._parse(event))
        else:
            monitor.update(event)
    return monitor


@given(st.lists(event, max_size=100), st.sampled_from([0.5, 0.0, 0.3, 1.0]), st.booleans())
def test_equals_the_monitor_snapshot(events, threshold, exact):
    check(fill(events, threshold, exact))


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("n", [SMALL_LEVELS - 10, 3 * SMALL_LEVELS])
def test_large_windows(n, exact):
    """Around and above SMALL_LEVELS levels (the numpy path past it)."""
    rng = random.Random(n)
    events = [(int(rng.random() < 0.3), rng.random(), None if i % 3 else rng.choice([0.0, 0.5, 2.0]), i % 7 == 0)
              for i in range(n)]
    monitor = fill(events, exact=exact)
    levels = len(monitor.scores._neg.weights.keys() | monitor.scores._pos.weights.keys())
    assert (levels > SMALL_LEVELS) == (n > SMALL_LEVELS)
    check(monitor)


def test_empty_monitor():
    monitor = BinaryMonitor()
    assert monitor.snapshot() == reference_snapshot(monitor)


@pytest.mark.parametrize("order", [[0.0, -0.0], [-0.0, 0.0]])
def test_snapshot_state_keeps_each_histograms_zero(order):
    """0.0 and -0.0 share a histogram key, written as whichever came first in that histogram:
    the predictions' histogram may write it differently from the labelled ones."""
    monitor = BinaryMonitor()
    monitor.update_prediction(monitor._parse({"y_true": 0, "score": order[0]}))
    monitor.update_outcome(monitor._parse({"y_true": 0, "score": order[1]}))
    monitor.update({"y_true": 1, "score": 0.75})
    metrics, state = monitor.snapshot_state()
    assert json.dumps([metrics, state]) == json.dumps([monitor.snapshot(), monitor.to_dict()])


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("weights", [(5e-324, 0.1), (5e-324, 5e-324), (1e-200, 1e-150), (1e15, 5e-324)])
def test_class_weights_whose_product_underflows(weights, exact):
    # a negative of weight 5e-324 and a positive of weight 0.1 (both accepted by the event
    # parser): N*P underflowed to 0 and the snapshot raised ZeroDivisionError
    wn, wp = weights
    monitor = fill([(0, 0.2, wn, False), (1, 0.7, wp, False), (1, 0.1, wp, False)], exact=exact)
    check(monitor)
    assert monitor.snapshot()["roc_auc"] == 0.5
