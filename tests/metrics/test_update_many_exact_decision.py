"""``BinaryScores.update_many`` decides exact-while-small without sorting a large batch (issue 24):
the state equals the one built from the same events in small batches (each sorted), whichever
way the decision goes - many grid cells (to the grid), few cells of one score each (exact, no
sort), cells of several scores (sorted), zero weights, -0.0 beside 0.0."""
from __future__ import annotations

import json

import numpy as np
import pytest

import streammetrics as sm
from streammetrics.metrics.binary_scores import _one_score_per_key


def _in_small_batches(y, s, w, size=1000):
    acc = sm.BinaryScores()
    for i in range(0, len(y), size):
        acc.update_many(y[i:i + size], s[i:i + size], None if w is None else w[i:i + size])
    return acc


def _streams():
    rng = np.random.default_rng(11)
    n = 20_000
    y = rng.random(n) < 0.3
    yield "discrete", y, np.round(rng.random(n), 2), None
    s = np.round(rng.random(n), 2)
    s[::5] = -0.0
    s[1::5] = 0.0
    yield "zeros of both signs", y, s, rng.integers(0, 3, n).astype(float)
    s = np.round(rng.random(n), 2)
    s[::97] += 1e-9  # a second score in some grid keys: sorted
    yield "two scores in a key", y, s, None
    s = np.round(rng.random(n), 2)
    w = np.ones(n)
    w[::3] = 0.0
    s[::3] = np.round(s[::3] + 2e-9, 12)  # zero-weight events with their own scores
    yield "zero weights", y, s, w
    narrow = np.round(0.3 + 0.4 * rng.random(n), 3)  # a narrow key range: decided by scatter and gather
    yield "discrete narrow", y, narrow, None
    yield "discrete narrow, weights", y, narrow, rng.integers(0, 4, n).astype(float)
    two = narrow.copy()
    two[::101] += 1e-9
    yield "discrete narrow, two scores in a key", y, two, None
    w = rng.random(n)
    w[::4] = 0.0
    yield "discrete narrow, fractional and zero weights", y, narrow, w
    yield "many cells", y, rng.random(n), None
    yield "margins", y, np.round(rng.normal(0.0, 3.0, n), 1), None


@pytest.mark.parametrize("case", list(_streams()), ids=lambda c: c[0])
def test_one_batch_equals_small_batches(case):
    _, y, s, w = case
    whole = sm.BinaryScores().update_many(y, s, w)
    assert json.dumps(whole.to_dict()) == json.dumps(_in_small_batches(y, s, w).to_dict())


def test_one_score_per_key():
    g = np.array([5, 7, 5, 9, 7])
    keys = np.array([5, 7, 9])
    assert _one_score_per_key(g, np.array([0.1, 0.2, 0.1, 0.3, 0.2]), keys).tolist() == [0.1, 0.2, 0.3]
    assert _one_score_per_key(g, np.array([0.1, 0.2, 0.15, 0.3, 0.2]), keys) is None  # key 5: two scores
    got = _one_score_per_key(np.array([0, 0]), np.array([-0.0, 0.0]), np.array([0]))
    assert got.tolist() == [0.0] and not np.signbit(got[0])
    assert _one_score_per_key(np.array([0, 100]), np.array([0.1, 0.9]), np.array([0, 100])) is None  # wide range


def test_the_narrow_discrete_batch_is_decided_without_a_sort():
    from streammetrics.kernels.binning import LogGridBinning

    s = np.round(0.3 + 0.4 * np.random.default_rng(2).random(20_000), 3)
    g = LogGridBinning(1024).keys(s)
    assert _one_score_per_key(g, s, np.unique(g)) is not None
