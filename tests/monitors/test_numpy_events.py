"""Monitors accept the numpy scalars and arrays the accumulators accept (issue 10 point 14)."""
import numpy as np
import pytest

import streammetrics as sm


@pytest.mark.parametrize("make,numpy_event,plain_event", [
    (sm.BinaryMonitor, {"y_true": np.int64(1), "score": np.float64(0.3)}, {"y_true": 1, "score": 0.3}),
    (sm.BinaryMonitor, {"y_true": np.bool_(True), "score": np.float32(0.25), "weight": np.float64(2)},
     {"y_true": True, "score": 0.25, "weight": 2.0}),
    (lambda: sm.MulticlassMonitor(["a", "b"]), {"y_true": np.str_("a"), "scores": np.array([0.25, 0.75])},
     {"y_true": "a", "scores": [0.25, 0.75]}),
    (lambda: sm.MulticlassMonitor([1, 2]), {"y_true": np.int64(1), "scores": {np.int64(1): 0.5, 2: np.float64(0.5)}},
     {"y_true": 1, "scores": [0.5, 0.5]}),
    (lambda: sm.MulticlassMonitor([True, False]), {"y_true": np.bool_(False), "scores": {True: 0.5, False: 0.5}},
     {"y_true": False, "scores": [0.5, 0.5]}),
    (sm.LabelMonitor, {"y_true": np.int64(1), "y_pred": np.int32(2)}, {"y_true": 1, "y_pred": 2}),
    (sm.RegressionMonitor, {"y_true": np.float32(1.5), "y_pred": np.int64(2)}, {"y_true": 1.5, "y_pred": 2}),
])
def test_numpy_values_give_the_state_of_plain_values(make, numpy_event, plain_event):
    a, b = make().update(numpy_event), make().update(plain_event)
    assert a == b and a.count == 1
    assert make().update_many([numpy_event, numpy_event]) == make().update_many([plain_event, plain_event])


def test_bad_numpy_values_are_still_rejected():
    with pytest.raises(ValueError, match="y_true"):
        sm.BinaryMonitor().update({"y_true": np.int64(2), "score": 0.5})
    with pytest.raises(ValueError, match="score"):
        sm.BinaryMonitor().update({"y_true": 1, "score": np.float64("nan")})
    with pytest.raises(ValueError, match="scores"):
        sm.MulticlassMonitor(["a", "b"]).update({"y_true": "a", "scores": np.array([0.5, 0.2, 0.3])})
