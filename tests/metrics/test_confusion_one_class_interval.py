"""A window whose events all hold one class (true and predicted alike), of at least 30 events:
the Matthews and kappa intervals are undefined (None, listed as insufficient), where
``ConfusionMatrix.interval`` raised ZeroDivisionError and stopped ``replay`` of the labels and
multiclass tasks (the delta method divides by a variance product, or ``1 - p_e``, that is 0)."""
from __future__ import annotations

import pytest

from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.monitors import LabelMonitor, MulticlassMonitor


@pytest.mark.parametrize("metric", ["matthews_corrcoef", "cohen_kappa"])
def test_one_class_has_no_matthews_or_kappa_interval(metric):
    assert ConfusionMatrix().update_many(["a"] * 40, ["a"] * 40).interval(metric) is None
    assert ConfusionMatrix(labels=["a", "b", "c"]).update_many(["a"] * 40, ["a"] * 40).interval(
        metric, labels=["a", "b", "c"]) is None
    two = ConfusionMatrix().update_many(["a"] * 20 + ["b"] * 20, ["a"] * 18 + ["b"] * 22)
    assert two.interval(metric, labels=["a", "b"], pos_label="b") is not None


def test_monitors_of_one_class_windows_snapshot_with_null_intervals():
    labels = LabelMonitor().update_many([{"y_true": "a", "y_pred": "a"}] * 40)
    multiclass = MulticlassMonitor(["a", "b", "c"]).update_many([{"y_true": "a", "scores": [0.8, 0.1, 0.1]}] * 40)
    for m in (labels, multiclass):
        record = m.intervals()
        assert record["intervals"]["matthews_corrcoef"] is None and record["intervals"]["cohen_kappa"] is None
        assert {"matthews_corrcoef", "cohen_kappa"} <= set(record["insufficient"])
        assert record["intervals"]["accuracy"] is not None
