"""BinaryScores.intervals: the roc_auc, log_loss and brier_score intervals from one pass, each
as interval(metric) gives it (the --compare reference baseline reads the three)."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.metrics.binary_scores import BinaryScores


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [0, 15, 400])
def test_intervals_are_each_interval(weighted, n):
    rng = np.random.default_rng(n)
    y = rng.integers(0, 2, n)
    s = np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1)
    b = BinaryScores().update_many(y, s, rng.random(n) * 2 if weighted else None)
    for confidence in (0.9, 0.95):
        got = b.intervals(confidence)
        assert list(got) == ["roc_auc", "log_loss", "brier_score"]
        assert got == {name: b.interval(name, confidence) for name in got}
    if n == 400:
        assert all(pair is not None for pair in b.intervals().values())
    with pytest.raises(ValueError, match="confidence"):
        b.intervals(1.5)
