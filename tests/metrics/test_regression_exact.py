"""Regression's exact sums: any split, batching, merge order or removal gives the same dict."""
from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics import from_dict
from streammetrics.metrics.regression import Regression

values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, -1.0, -2.5, 1e9 + 0.1, 1e9 + 0.2]))
events = st.lists(st.tuples(values, values, st.sampled_from([1.0, 0.1, 2.7, 0.0])), max_size=50)


@settings(max_examples=150, deadline=None)
@given(events, st.integers(0, 2**32 - 1))
def test_state_is_a_function_of_the_multiset(evs, seed):
    one = Regression()
    for yt, yp, w in evs:
        one.update(yt, yp, w)
    rng = random.Random(seed)
    shuffled = evs[:]
    rng.shuffle(shuffled)
    cut = rng.randint(0, len(evs))
    a = Regression().update_many([e[0] for e in shuffled[:cut]], [e[1] for e in shuffled[:cut]],
                                 [e[2] for e in shuffled[:cut]])
    b = Regression()
    for yt, yp, w in shuffled[cut:]:
        b.update(yt, yp, w)
    assert json.dumps(b.merge(a).to_dict()) == json.dumps(one.to_dict())
    assert from_dict(json.loads(json.dumps(one.to_dict()))).to_dict() == one.to_dict()
    if one.total_weight > 0:  # m2 is the exact weighted sum of squares, rounded once
        pos = [(yt, w) for yt, _, w in evs if w > 0]
        wsum = sum(Fraction(w) for _, w in pos)
        mean = sum(Fraction(w) * Fraction(y) for y, w in pos) / wsum
        assert one._m2 == float(sum(Fraction(w) * (Fraction(y) - mean) ** 2 for y, w in pos))


def test_removal_is_exact():
    base = Regression().update_many([1.0, 2.5, 3.25], [0.5, 2.0, 4.0], [0.1, 2.7, 1.0])
    more = base.copy().update(7.3, 7.0, 0.3).update(-0.2, 0.4)  # |d| below max_error (not reversible)
    more.remove(7.3, 7.0, 0.3).remove(-0.2, 0.4)
    assert more.to_dict() == base.to_dict()


def test_version_1_dict_loads():
    d = {"type": "Regression", "version": 1, "config": {},
         "state": {"count": 3, "weight": 3.0, "mean": [2.0, 0.0], "m2": 2.0, "sse": 1.5, "sae": 1.5, "sle": 0.25,
                   "ape": 0.75, "max_error": 1.0, "log_invalid": 0}}
    r = from_dict(d)
    assert r.mse() == 0.5 and r.r2() == pytest.approx(0.25) and r.total_weight == 3.0
    assert r.to_dict()["version"] == 2 and r.to_dict()["state"]["mean"] == [2.0, 0.0]
    assert math.isclose(r._m2, 2.0)
