"""The exact-score entries of a batch (score_columns._columns_flat on an exact binning, every column
in one pass) against a plain dict of (histogram, score) -> summed weight."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.kernels.binning import ExactBinning
from streammetrics.kernels.exact_weights import units_of
from streammetrics.metrics.score_columns import _columns_flat


def _oracle(S, groups, stride, offsets, w, units):
    out: dict = {}
    for i in range(len(S)):
        for c, offset in enumerate(offsets):
            key = (int(groups[c][i]) * stride + offset, float(S[i, c]) + 0.0)
            weight = 1.0 if w is None else float(w[i])
            add = units_of(weight) if units else weight
            out[key] = out.get(key, 0 if units else 0.0) + add
    items = sorted(out.items())
    return [k[0] for k, _ in items], [k[1] for k, _ in items], [v for _, v in items]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["unit", "whole", "units"])
def test_exact_entries_equal_a_dict_of_sums(seed, mode):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 60)), int(rng.integers(2, 6))
    S = np.round(rng.random((n, k)), int(rng.integers(1, 4)))  # ties within and across columns
    S[rng.random((n, k)) < 0.1] = -0.0  # (read as 0.0)
    t = rng.integers(0, k, n)
    groups = [t] * k if seed % 2 else [(t == c).astype(np.int64) for c in range(k)]
    stride, offsets = (k, list(range(k))) if seed % 2 else (1, [2 * c for c in range(k)])
    w = None if mode == "unit" else (rng.integers(1, 4, n).astype(float) if mode == "whole" else rng.random(n) + 0.1)
    units = mode == "units"
    ids, keys, weights = _columns_flat(S, lambda c: groups[c], k, stride, offsets, w, ExactBinning(), units=units)
    want = _oracle(S, groups, stride, offsets, w, units)
    assert ids.tolist() == want[0] and keys.tolist() == want[1]
    assert (weights.tolist() == want[2]) if units else np.array_equal(weights, np.array(want[2]))
    assert not np.signbit(keys).any()
    limit = len(want[0])
    assert _columns_flat(S, lambda c: groups[c], k, stride, offsets, w, ExactBinning(), limit, units) is not None
    assert _columns_flat(S, lambda c: groups[c], k, stride, offsets, w, ExactBinning(), limit - 1, units) is None
