"""The blocked exact log-loss / Brier batch sums equal the exact sums of the per-event terms."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.kernels.exact_sum import (
    ProbabilitySums,
    _row_units,
    batch_probability_units,
    probability_terms,
)


def _reference(s: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> tuple[int, int]:
    signed = np.where(y.astype(bool), s + 0.0, -(s + 0.0))
    log_terms, brier_terms = probability_terms(signed, w)
    return _row_units(log_terms.copy()), _row_units(brier_terms.copy())


def _streams():
    rng = np.random.default_rng(7)
    for n in (1, 5, 1023, 1024, 1025, 16_384 + 3, 40_000):
        y = (rng.random(n) < 0.4).astype(np.uint8)
        yield "uniform", rng.random(n), y, None
        z = rng.normal(0.0, 30.0, n)
        yield "saturated", 1.0 / (1.0 + np.exp(-z)), y, None  # exact 0/1 and terms below 2**-71
        s = rng.random(n)
        s[::7] = 0.0
        s[1::7] = 1.0
        s[2::7] = -0.0
        s[3::7] = 1e-300
        s[4::7] = 5e-324
        yield "hostile", s, y, rng.integers(0, 5, n).astype(np.float64)
        yield "weights", rng.random(n), y, rng.random(n) * 10.0 ** rng.integers(-300, 12, n)
        yield "huge weights", rng.random(n), y, np.full(n, 1e290)  # levels leave the range: None


@pytest.mark.parametrize("case", list(_streams()), ids=lambda c: f"{c[0]}-{len(c[1])}")
def test_batch_units_equal_the_exact_sum_of_the_terms(case):
    _, s, y, w = case
    got = batch_probability_units(s, y, w)
    if got is None:  # refused: the caller takes the per-term path
        assert w is not None and w.max() > 1e250
        return
    assert got == _reference(s, y, w)


@pytest.mark.parametrize("case", list(_streams())[:15], ids=lambda c: f"{c[0]}-{len(c[1])}")
def test_add_scores_gives_the_state_of_add_batch(case):
    _, s, y, w = case
    a = ProbabilitySums().add_scores(s, y, w)
    b = ProbabilitySums().add_batch(np.where(y.astype(bool), s + 0.0, -(s + 0.0)), w)
    assert a.log == b.log and a.brier == b.brier


def test_a_wrong_level_unit_is_detected():
    # the test above can fail: a term changed by one ulp changes the exact sum
    s = np.random.default_rng(1).random(3000)
    y = np.ones(3000, dtype=np.uint8)
    t = s.copy()
    t[1234] = np.nextafter(t[1234], 1.0)
    assert batch_probability_units(s, y) != batch_probability_units(t, y)
    assert batch_probability_units(t, y) == _reference(t, y, None)
