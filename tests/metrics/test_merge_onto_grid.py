"""An exact-while-small state merged into a binned one goes straight to the binned grid (the
roll-ups of many small slices, issue 28): the same state as the stream's own, whatever the split."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.score_distribution import ScoreDistribution


@pytest.mark.parametrize("seed", range(12))
def test_many_small_states_merged_equal_the_whole(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 5000))
    s = rng.random(n) ** float(rng.integers(1, 6))
    if seed % 3 == 0:  # margins too: keys below 0 and above 1
        s = np.concatenate([s, rng.normal(0, 3, 50)])
    y = (rng.random(len(s)) < np.clip(s, 0, 1)).astype(int)
    max_bins = int(rng.choice([8, 40, 300]))
    idx = rng.permutation(len(s))
    merged = merged_sd = None
    for part in np.array_split(idx, int(rng.integers(5, 60))):
        b = BinaryScores(max_bins=max_bins).update_many(y[part], s[part])
        d = ScoreDistribution(max_bins=max_bins).update_many(s[part])
        merged = b if merged is None else merged.merge(b)
        merged_sd = d if merged_sd is None else merged_sd.merge(d)
    assert merged.to_dict() == BinaryScores(max_bins=max_bins).update_many(y, s).to_dict()
    assert merged_sd.to_dict() == ScoreDistribution(max_bins=max_bins).update_many(s).to_dict()
