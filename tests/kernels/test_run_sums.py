"""``run_sums`` (the vectorised twin of ``math.fsum`` per run) equals ``fsum`` bit for bit."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from streammetrics.kernels.exact_sum import run_sums


def _fsums(terms: list[float], lengths: list[int]) -> list[float]:
    out, at = [], 0
    for n in lengths:
        out.append(math.fsum(terms[at:at + n]))
        at += n
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))


def _draw(rng: random.Random, kind: int) -> float:
    if kind == 0:  # probabilities rounded as events carry them
        return round(rng.random(), 6)
    if kind == 1:  # full-precision terms: exact ties of the double-double's rounding are frequent
        return rng.random()
    if kind == 2:  # mixed signs and magnitudes: cancellation
        return rng.uniform(-1.0, 1.0) * 10.0 ** rng.randrange(-30, 30)
    if kind == 3:  # hostile: half-ulp ties, subnormals, signed zeros, huge terms
        return rng.choice([1.0, 2.0**-53, 2.0**-54, 3 * 2.0**-54, -1.0, 1e300, -1e300, 5e-324, -0.0, 0.0, 1e16])
    return -math.log(max(rng.random(), 1e-300))  # log-loss terms


@pytest.mark.parametrize("seed", range(40))
def test_run_sums_equal_fsum(seed: int) -> None:
    rng = random.Random(seed)
    kind = seed % 5
    lengths = [rng.choice([0, 1, 2, 3, 10, 64, 65, rng.randrange(1, 40)]) for _ in range(rng.randrange(1, 120))]
    terms = [_draw(rng, kind) for _ in range(sum(lengths))]
    got = run_sums(np.array(terms, dtype=np.float64), np.array(lengths)).tolist()
    assert all(_same(g, w) for g, w in zip(got, _fsums(terms, lengths))), (kind, lengths)


def test_run_sums_ties_and_non_finite() -> None:
    # the double-double's result exactly halfway between two floats (exact errors: half to even),
    # a run summing to zero from signed terms, and runs fsum reads as inf / nan or refuses
    runs = [[1.0, 2.0**-53], [1.0, 3 * 2.0**-53], [1.0, 2.0**-53, 2.0**-80], [1.0, -1.0], [-0.0, -0.0],
            [math.inf, 1.0], [math.nan, 1.0], [0.1] * 64, [0.1] * 65]
    terms = [x for run in runs for x in run]
    lengths = [len(run) for run in runs]
    got = run_sums(np.array(terms), np.array(lengths)).tolist()
    assert [_same(g, w) for g, w in zip(got, map(math.fsum, runs))] == [True] * len(runs)
    with pytest.raises(ValueError):  # as fsum([inf, -inf]) does
        run_sums(np.array([1.0, math.inf, -math.inf]), np.array([1, 2]))
