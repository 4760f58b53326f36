"""ConfusionMatrix.intervals_of: every metric's interval read from one matrix, the values of
interval() metric by metric (a snapshot's label intervals)."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.monitors.labels import LABEL_INTERVALS

METRICS = ("accuracy", "macro_f1", "precision", "recall", "f1", "specificity", "balanced_accuracy",
           "matthews_corrcoef", "macro_precision", "macro_recall", "weighted_f1", "cohen_kappa")


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("n", [5, 60, 400])
@pytest.mark.parametrize("weighted", [False, True])
def test_each_interval_as_interval_gives_it(k, n, weighted):
    rng = np.random.default_rng(k * 100 + n + weighted)
    y = rng.integers(0, k, n)
    p = np.where(rng.random(n) < 0.7, y, rng.integers(0, k, n))
    w = rng.choice([0.5, 1.0, 2.0], n) if weighted else None
    cm = ConfusionMatrix().update_many(y.tolist(), p.tolist(), w)
    labels = cm.labels
    got = cm.intervals_of(METRICS, 0.9, pos_label=labels[-1], labels=labels)
    assert list(got) == list(METRICS)
    assert got == {m: cm.interval(m, 0.9, pos_label=labels[-1], labels=labels) for m in METRICS}
    assert any(v is not None for v in got.values()) == (n >= 60)


def test_an_unknown_metric_is_refused_before_any_is_computed():
    cm = ConfusionMatrix().update_many([0, 1] * 30, [0, 1] * 30)
    with pytest.raises(ValueError, match="metric must be one of"):
        cm.intervals_of((*LABEL_INTERVALS, "auc"))
