"""Intervals below their minimum rule are None before their inputs are computed: a regression
window under MIN_R2_EVENTS builds no fourth moments (exact fractions), a unit-weight confusion
matrix under MIN_MEAN_EVENTS no matrix for the delta-method metrics; the values are unchanged."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.kernels import intervals as iv
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.regression import Regression


def test_regression_below_the_minimum_reads_no_moments(monkeypatch):
    rng = np.random.default_rng(1)
    y = rng.normal(10, 3, 60)
    small = Regression().update_many(y[:25], y[:25] + rng.normal(0, 1, 25))
    mid = Regression().update_many(y[:50], y[:50] + rng.normal(0, 1, 50))
    expected = {name: mid.interval(name) for name in ("mae", "mse", "rmse", "r2")}
    assert expected["r2"] is None and expected["mae"] is not None

    def boom(self):
        raise AssertionError("moments read below the minimum rule")

    monkeypatch.setattr(Regression, "_r2_moments", boom)
    for name in ("mae", "mse", "rmse", "r2"):
        assert small.interval(name) is None
    assert {name: mid.interval(name) for name in ("mae", "mse", "rmse", "r2")} == expected


@pytest.mark.parametrize("n", [12, 29, 30, 45])
def test_confusion_below_the_minimum_builds_no_matrix(monkeypatch, n):
    rng = np.random.default_rng(n)
    y = list(rng.choice(["a", "b", "c"], n))
    p = [t if rng.random() < 0.8 else "b" for t in y]
    cm = ConfusionMatrix().update_many(y, p)
    names = ("accuracy", "macro_f1", *iv.MATRIX_INTERVALS)
    expected = {name: cm.interval(name) for name in names}
    if n < iv.MIN_MEAN_EVENTS:
        real = ConfusionMatrix._matrix
        monkeypatch.setattr(ConfusionMatrix, "_matrix", lambda self, labels: (_ for _ in ()).throw(
            AssertionError("matrix built below the minimum rule")) if len(labels) == 3 else real(self, labels))
        for name in ("macro_f1", *iv.MATRIX_INTERVALS):
            assert cm.interval(name) is None
    else:
        assert any(v is not None for k, v in expected.items() if k != "accuracy")
