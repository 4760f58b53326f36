"""BinaryScores intervals of a state whose events all weigh 0 (count > 0, total weight 0): None
each (undefined, as for an empty state), not an IndexError from the interval kernels' empty
levels; the same one by one, in a batch and after a merge."""
from __future__ import annotations

import pytest

from streammetrics.metrics.binary_scores import BinaryScores


@pytest.mark.parametrize("y", [[0, 1], [1, 1], [0]])
def test_zero_weight_state_has_no_intervals(y):
    s = [0.2, 0.7][:len(y)]
    batch = BinaryScores().update_many(y, s, [0.0] * len(y))
    one = BinaryScores()
    for t, score in zip(y, s):
        one.update(t, score, 0.0)
    merged = BinaryScores().merge(batch)
    for b in (batch, one, merged):
        assert b.count == len(y) and b.total_weight == 0
        assert b.intervals() == {"roc_auc": None, "log_loss": None, "brier_score": None}
        assert all(b.interval(name, 0.9) is None for name in ("roc_auc", "log_loss", "brier_score"))
    b = batch.update(1, 0.4, 1.0).update(0, 0.1, 1.0)  # (a weight > 0 later: defined again, or None by its minimum)
    assert set(b.intervals()) == {"roc_auc", "log_loss", "brier_score"}
