"""ranking.roc_auc_many: roc_auc of many windows in one pass, bit for bit (whole weights)."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.kernels import ranking


@pytest.mark.parametrize("seed", range(6))
def test_equals_roc_auc_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    negs, poss = [], []
    for _ in range(int(rng.integers(1, 30))):
        size = int(rng.choice([1, 2, 3, 7, 8, 9, 25, 129, 300, 1100]))  # (pairwise sums: short and long rows)
        neg = rng.integers(0, 3, size).astype(float) * rng.choice([1.0, 7.0])
        pos = rng.integers(0, 3, size).astype(float)
        neg[0] += 1.0 if not neg.sum() else 0.0
        pos[-1] += 2.0 if not pos.sum() else 0.0
        negs.append(neg)
        poss.append(pos)
    starts = np.cumsum([0] + [len(x) for x in negs[:-1]])
    got = ranking.roc_auc_many(starts, np.concatenate(negs), np.concatenate(poss))
    want = np.array([ranking.roc_auc(a, b) for a, b in zip(negs, poss)])
    assert got.tobytes() == want.tobytes()


def test_a_window_without_weight_on_a_side_is_refused():
    with pytest.raises(ValueError, match="both sides"):
        ranking.roc_auc_many(np.array([0, 2]), np.array([1.0, 2.0, 0.0, 0.0]), np.array([1.0, 0.0, 3.0, 1.0]))
