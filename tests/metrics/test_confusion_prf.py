"""ConfusionMatrix.precision_recall_f1: the three metrics from one pass, each equal to its own
method (the label monitors' snapshots read them so)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from streammetrics.metrics.confusion import ConfusionMatrix


def _matrices():
    rng = np.random.default_rng(7)
    y = rng.choice(["a", "b", "c"], 60)
    p = np.where(rng.random(60) < 0.6, y, rng.choice(["a", "b", "d"], 60))
    yield ConfusionMatrix().update_many(list(y), list(p))
    yield ConfusionMatrix().update_many(list(y), list(p), rng.random(60) * 3)
    yield ConfusionMatrix(labels=["a", "b", "c", "d", "e"]).update_many(list(y), list(p))
    yield ConfusionMatrix().update_many([0, 1, 1, 0], [1, 1, 1, 1])
    yield ConfusionMatrix()


@pytest.mark.parametrize("average", [None, "macro", "weighted", "micro", "binary"])
@pytest.mark.parametrize("zero_division", [np.nan, 0.0, "warn"])
def test_equals_each_method(average, zero_division):
    for cm in _matrices():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = [cm.precision(average=average, zero_division=zero_division),
                            cm.recall(average=average, zero_division=zero_division),
                            cm.f1(average=average, zero_division=zero_division)]
            except ValueError as exc:
                with pytest.raises(ValueError, match=str(exc)[:30]):
                    cm.precision_recall_f1(average=average, zero_division=zero_division)
                continue
            got = cm.precision_recall_f1(average=average, zero_division=zero_division)
        for a, b in zip(got, expected):
            assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
            assert type(a) is type(b)
