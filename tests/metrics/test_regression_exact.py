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


def _per_event_and_split(evs: list, seed: int) -> Regression:
    """``evs`` event by event; asserts that a shuffled split (a batch, then events, merged) gives
    the same dict, and that the dict round-trips through JSON."""
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
    return one


@settings(max_examples=150, deadline=None)
@given(events, st.integers(0, 2**32 - 1))
def test_state_is_a_function_of_the_multiset(evs, seed):
    one = _per_event_and_split(evs, seed)
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


# values and weights near the float floor: w*y and w*y**2 fall below 2**-1074 (the fine sums)
tiny = st.one_of(st.sampled_from([5e-324, -5e-324, 1e-310, 2.2e-308, 5.520599206375581e-155, -1e-200, 1e-160, 0.0]),
                 st.floats(-1e-150, 1e-150), values)
tiny_events = st.lists(st.tuples(tiny, values, st.sampled_from([1.0, 0.1, 2.7, 0.0, 5e-324, 1e-300])), max_size=30)


def _exact_moments(evs):
    pos = [(Fraction(yt), Fraction(w)) for yt, _, w in evs if w > 0]
    wsum = sum(w for _, w in pos)
    mean = sum(w * y for y, w in pos) / wsum
    return mean, sum(w * (y - mean) ** 2 for y, w in pos)


@settings(max_examples=200, deadline=None)
@given(tiny_events, st.integers(0, 2**32 - 1))
def test_tiny_values_keep_mean_and_m2_exact(evs, seed):
    one = _per_event_and_split(evs, seed)
    if one.total_weight > 0:
        mean, m2 = _exact_moments(evs)
        _, hi, lo, got_m2 = one._sums.moments()
        assert got_m2 == float(m2)
        assert hi == float(mean) and lo == float(mean - Fraction(hi))


def test_products_below_the_float_floor_are_exact():
    # y**2 = 3e-309 and 0.1 * 5e-324 underflow: m2 of a constant truth is exactly 0, and the
    # weighted mean of two tiny values is exact
    r = Regression().update(5.520599206375581e-155, 0.0)
    assert r._m2 == 0.0
    r = Regression().update(5e-324, 0.0, 0.1).update(5e-324, 0.0, 0.1)
    assert r._m2 == 0.0 and r._sums.moments()[1] == 5e-324
    r = Regression().update(1e-160, 0.0).update(3e-160, 0.0)  # m2 = 2e-320 (subnormal, exact)
    assert r._m2 == float(_exact_moments([(1e-160, 0, 1.0), (3e-160, 0, 1.0)])[1]) and r._m2 > 0
    d = r.to_dict()["state"]["exact_sums"]
    assert set(d) == {"weight", "wy", "wyy", "sse", "sae", "sle", "ape", "wy_fine", "wyy_fine",
                      "wd4", "wy3", "wy4", "wd2y", "wd2y2"}  # (R²'s moments; unit weights: no "ww")
    # removal cancels the fine sums exactly: the state of the event left
    r.remove(1e-160, 0.0)  # (|d| below max_error, which stays known)
    assert r.to_dict() == Regression().update(3e-160, 0.0).to_dict()


# values and weights too large for Dekker's split (|a| >= 2**996 made nan: y = 0 with w = 1e300
# wrote mean "nan", which from_dict refused) or whose products overflow: the fine sums too
huge = st.one_of(st.sampled_from([1e300, -1e300, 2.0**996, 1.3e154, -1e200, 1.7976931348623157e308, 0.0, 1.0]),
                 st.floats(allow_nan=False, allow_infinity=False), values)
huge_events = st.lists(st.tuples(huge, values, st.sampled_from([1.0, 0.1, 0.0, 1e300, 2.0**996, 1e-300, 1e100])),
                       max_size=20)


@settings(max_examples=200, deadline=None)
@given(huge_events, st.integers(0, 2**32 - 1))
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_huge_values_and_weights_keep_mean_and_m2_exact(evs, seed):
    one = _per_event_and_split(evs, seed)
    total, hi, lo, got_m2 = one._sums.moments()
    if 0 < total < math.inf:
        mean, m2 = _exact_moments(evs)
        assert hi == float(mean) and lo == float(mean - Fraction(hi))
        assert got_m2 == (float(m2) if m2 <= Fraction(1.7976931348623157e308) else math.inf)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize(("y", "w"), [(0.0, 1e300), (1e300, 1.0), (2.0**996, 1.0), (-1e300, 1e300), (3.0, 2.0**996)])
def test_huge_values_or_weights_round_trip(y, w):
    r = Regression().update(y, 0.5, w).update(y, -0.5, w)
    d = r.to_dict()
    assert d["state"]["mean"] == [y, 0.0] and r._m2 == 0.0  # (was: mean nan, refused by from_dict)
    assert from_dict(json.loads(json.dumps(d))).to_dict() == d
    assert Regression().update_many([y, y], [0.5, -0.5], [w, w]).to_dict() == d
    r.remove(y, -0.5, w)  # weight, mean and m2 of the event left (an overflowed error sum, inf, cannot be
    left, want = r.to_dict()["state"], Regression().update(y, 0.5, w).to_dict()["state"]  # undone)
    assert [left[k] for k in ("weight", "mean", "m2")] == [want[k] for k in ("weight", "mean", "m2")]
    assert {k: v for k, v in left["exact_sums"].items() if k.startswith("w")} == {
        k: v for k, v in want["exact_sums"].items() if k.startswith("w")}


def test_total_weight_beyond_the_float_range_reads_as_loaded():
    # the exact sum of the weights is written only as its float (inf) when it overflows: the live
    # state reads mean and m2 as the loaded one does (was: mean 0.4999.. live, 0.0 loaded: refused)
    r = Regression().update(0.0, 0.0, 2.0**1023).update(1.0, 0.0, 2.0**1023)
    assert r._sums.moments() == (math.inf, 0.0, 0.0, 0.0)
    d = r.to_dict()
    assert from_dict(json.loads(json.dumps(d))).to_dict() == d


@pytest.mark.parametrize("bad", [
    [[1, -2148], [1, -2148]],                 # not canonical (repeated chunk)
    [[0, -2148]],                             # zero chunk
    [[1 << 53, -2148]],                       # mantissa too wide
    [[1, -3000]],                             # below the unit
    "1",
])
def test_fine_sums_are_validated(bad):
    d = Regression().update(1e-160, 0.0).update(3e-160, 0.0).to_dict()
    d["state"]["exact_sums"]["wy_fine"] = bad
    with pytest.raises(ValueError, match="wy_fine"):
        from_dict(d)


def test_moments_read_twice_follow_every_change():
    """The moments a snapshot and its state both read are computed once per state: a later
    update, merge or load reads the new ones."""
    from streammetrics.monitors import RegressionMonitor

    events = [{"y_true": float(i % 7), "y_pred": float(i % 5) + 0.25} for i in range(40)]
    a = RegressionMonitor().update_many(events[:20])
    first = (a.snapshot(), a.to_dict())
    a.update_many(events[20:])
    whole = RegressionMonitor().update_many(events)
    assert (a.snapshot(), a.to_dict()) == (whole.snapshot(), whole.to_dict()) != first
    b = RegressionMonitor().update_many(events[:20])
    b.snapshot()
    b.merge(RegressionMonitor().update_many(events[20:]))
    assert (b.snapshot(), b.to_dict()) == (whole.snapshot(), whole.to_dict())
