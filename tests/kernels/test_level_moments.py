"""``level_second_moments`` is, per window, the correctly rounded sum over its levels of ``neg l^2``
and ``pos l^2`` (and the Brier terms), each term from the level's own score bound, whatever the
windows, the levels without weight of a class, or scores outside [0, 1] (its shortcut for
probabilities - levels without weight of a class skipped - gives the same bits)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from streammetrics.kernels.exact_sum import probability_terms
from streammetrics.kernels.intervals import level_second_moments


def _by_definition(lo, hi, neg, pos, starts, need):
    bounds = list(starts) + [len(neg)]
    out_l, out_b = [], []
    for w in range(len(starts)):
        if need is not None and not need[w]:
            out_l.append(math.nan)
            out_b.append(math.nan)
            continue
        terms_l, terms_b = [], []
        for i in range(bounds[w], bounds[w + 1]):
            (ln,), (bn,) = probability_terms(np.array([-hi[i]]))
            (lp,), (bp,) = probability_terms(np.array([lo[i]]))
            terms_l += [neg[i] * ln * ln, pos[i] * lp * lp]
            terms_b += [neg[i] * bn * bn, pos[i] * bp * bp]
        out_l.append(math.fsum(terms_l))
        out_b.append(math.fsum(terms_b))
    return np.array(out_l), np.array(out_b)


@pytest.mark.parametrize("seed", range(40))
def test_level_second_moments_is_the_sum_of_every_level_term(seed):
    rng = np.random.default_rng(seed)
    windows = int(rng.integers(1, 4))
    sizes = rng.integers(1, 30, windows)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    n = int(sizes.sum())
    lo = np.sort(rng.random(n)) * (3.0 if seed % 5 == 0 else 1.0) - (1.0 if seed % 5 == 0 else 0.0)
    if seed % 3 == 0:
        lo[0], lo[-1] = 0.0, 1.0
    hi = lo if seed % 2 else np.minimum(lo + 0.001, max(1.0, float(lo.max())))
    neg = rng.integers(0, 3, n) * (rng.random(n) if seed % 4 == 0 else 1.0)
    pos = rng.integers(0, 3, n).astype(float)
    need = None if seed % 6 else rng.random(windows) < 0.5
    got = level_second_moments(lo, hi, neg, pos, starts, need)
    want = _by_definition(lo, hi, neg, pos, starts.tolist(), need)
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()
