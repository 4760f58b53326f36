"""kernels.exact_sum: any split, merge order or batching gives the same state, equal to the
exact sum of the terms (fractions) and, rounded, to math.fsum."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics.kernels.exact_sum import (
    BUFFER,
    SMALL,
    ExactSum,
    ProbabilitySums,
    exact_units,
    exact_units_rows,
    expansion_of,
    from_expansion,
    probability_terms,
    small_units,
)

finite = st.floats(allow_nan=False, allow_infinity=False)
wide = st.one_of(finite, st.floats(-1.0, 1.0), st.sampled_from([0.1, 1e300, -1e300, 5e-324, 2.0**-1022, -0.0]))
terms = st.lists(wide, max_size=60)


def exact(xs: list[float]) -> Fraction:
    return sum((Fraction(x) for x in xs), Fraction(0))


def rounded(q: Fraction) -> float:
    """``q`` correctly rounded (what math.fsum returns when it does not overflow midway)."""
    try:
        return q.numerator / q.denominator
    except OverflowError:
        return math.inf if q > 0 else -math.inf


@settings(max_examples=300, deadline=None)
@given(terms, st.integers(0, 2**32 - 1))
def test_any_split_and_merge_order_gives_the_exact_sum(xs, seed):
    rng = random.Random(seed)
    whole = ExactSum()
    for x in xs:  # per term, through the buffer
        whole.add(x)
    shuffled = xs[:]
    rng.shuffle(shuffled)
    cuts = sorted(rng.randint(0, len(xs)) for _ in range(3))
    parts = [ExactSum().add_array(np.array(shuffled[a:b], dtype=np.float64))
             for a, b in zip([0, *cuts], [*cuts, len(xs)])]
    rng.shuffle(parts)
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    assert merged == whole
    assert merged.expansion() == whole.expansion()
    assert Fraction(merged.units, 1 << 1074) == exact(xs)
    assert whole.value == rounded(exact(xs))
    if math.isfinite(whole.value):  # (a sum beyond the float range reads as +-inf, no expansion)
        assert sum((Fraction(c) for c in whole.expansion()), Fraction(0)) == exact(xs)
        assert ExactSum.from_parts(whole.value, whole.residue()) == whole


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(wide, min_size=5, max_size=5), max_size=40))
def test_rows_equal_single_sums(rows):
    a = np.array(rows, dtype=np.float64).reshape(-1, 5).T.copy()
    assert exact_units_rows(a) == [exact_units(r) for r in a]


spread = st.one_of(wide, st.floats(-1e-3, 1e-3), st.sampled_from([1.0, 2.0**-300, 3.0**-250, 0.0]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(spread, st.floats(0.0, 1.0), spread), min_size=1, max_size=80))
def test_rows_summed_at_once_are_exact(columns):
    """Several rows of at most 1,024 terms go through the levels together (one sigma per row);
    rows spanning more than the levels take, zero rows and huge terms fall back: all exact."""
    a = np.array(columns, dtype=np.float64).T.copy()
    assert [Fraction(u, 1 << 1074) for u in exact_units_rows(a)] == [exact(list(r)) for r in a]


def test_buffer_is_bounded_and_large_batches_are_exact():
    s = ExactSum()
    xs = [0.1 * i for i in range(3 * BUFFER + 7)]
    for x in xs:
        s.add(x)
        assert len(s.terms) < BUFFER
    big = np.random.default_rng(1).standard_normal(50_000) * 1e6
    assert Fraction(exact_units(big), 1 << 1074) == exact(big.tolist())
    assert s.value == math.fsum(xs)


def test_expansion_is_canonical_and_validated():
    assert expansion_of(0) == [0.0]
    s = ExactSum().add_array(np.array([1e100, 1.0, 1e-100]))
    assert s.expansion() == [1e100, 1.0, 1e-100]
    with pytest.raises(ValueError, match="canonical"):
        from_expansion([1.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        from_expansion([1.0, math.inf])
    with pytest.raises(ValueError, match="list"):
        ExactSum.from_parts(1.0, "x")


def test_non_finite_terms_make_the_value_non_finite():
    s = ExactSum().add_array(np.array([1.0, math.inf]))
    assert s.value == math.inf
    assert math.isnan(s.copy().merge(ExactSum().add_array(np.array([-math.inf]))).value)


def test_numpy_log_is_elementwise_deterministic():
    """The log-loss terms come from np.log on buffers of any length and offset: the same
    element gives the same bits whatever array it sits in (so per-event and batch agree)."""
    p = np.random.default_rng(2).random(4099)
    whole = np.log(p)
    for start, stop in ((0, 1), (3, 20), (5, 1029), (17, 4099)):
        assert np.array_equal(np.log(p[start:stop].copy()), whole[start:stop])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 1.0), st.sampled_from([1.0, 0.3, 2.5, 0.0])), max_size=80),
       st.integers(0, 2**32 - 1))
def test_binary_probability_sums_are_a_function_of_the_multiset(events, seed):
    per_event = ProbabilitySums()
    for y, s, w in events:
        signed = s if y else -s
        if w == 1.0:
            per_event.unit.append(signed)
        else:
            per_event.weighted += (w, signed)
    rng = random.Random(seed)
    shuffled = events[:]
    rng.shuffle(shuffled)
    batch = ProbabilitySums().add_batch(np.array([s if y else -s for y, s, _ in shuffled]),
                                        np.array([w for _, _, w in shuffled]))
    assert per_event.log == batch.log and per_event.brier == batch.brier
    log_terms, brier_terms = probability_terms(np.array([s if y else -s for y, s, _ in events]),
                                               np.array([w for _, _, w in events]))
    assert batch.log.value == math.fsum(log_terms.tolist())
    assert batch.brier.value == math.fsum(brier_terms.tolist())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 1.0), st.sampled_from([1.0, 0.1, 2.7])), max_size=60),
       st.integers(0, 2**32 - 1))
def test_binary_monitor_state_is_split_and_order_independent(events, seed):
    """BinaryMonitor's whole dict (log-loss, Brier and score sums included) is the same per event,
    in one batch, or split, shuffled and merged; weights 0.1 and 2.7 are not dyadic, so only the
    summed weights of weighted events (``weighted``, ``weights``, ``total_weight``, cells) may
    differ - they are compared after removing those fields."""
    from streammetrics.events.parser import Event

    evs = [Event(1000.0 + i, "m", y_true=int(y), score=s, weight=w) for i, (y, s, w) in enumerate(events)]
    one = sm.BinaryMonitor()
    for e in evs:
        one.update_event(e)
    rng = random.Random(seed)
    shuffled = evs[:]
    rng.shuffle(shuffled)
    cut = rng.randint(0, len(evs))
    a = sm.BinaryMonitor().update_events(shuffled[:cut]) if cut else sm.BinaryMonitor()
    b = sm.BinaryMonitor().update_events(shuffled[cut:]) if cut < len(evs) else sm.BinaryMonitor()
    merged = b.merge(a)

    def sums(m):
        st_ = m._parts_state()  # (a small monitor of unit weights writes its events: the parts' sums here)
        s, p = st_["scores"]["state"], st_["predictions"]["state"]
        return (s["log_loss_sum"], s["brier_sum"], s["sum_residues"], p["score_sum"], p["score_sum_residue"])

    assert sums(merged) == sums(one)


def _vectorised_units(xs: list[float]) -> int:
    """The numpy extraction path (kernels.exact_sum._row_units beyond SMALL terms): the
    terms repeated past SMALL, divided back."""
    reps = SMALL // max(len(xs), 1) + 1
    return exact_units_rows(np.tile(np.asarray(xs, dtype=np.float64), reps).reshape(1, -1))[0] // reps


@settings(max_examples=300, deadline=None)
@given(terms)
def test_small_buffers_give_the_vectorised_integer(xs):
    """Buffers of at most SMALL terms are summed in plain ints: the same exact integer as the
    vectorised path, and through ExactSum.fold the same units and special value."""
    assert small_units(xs) == _vectorised_units(xs) == exact_units(xs)
    folded = ExactSum()
    folded.terms.extend(xs + [math.inf])
    folded.fold()
    assert folded.units == exact_units(xs) and folded.value == math.inf


signed_scores = st.one_of(st.floats(-1.0, 1.0), st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e-20, -1e-20, 1 - 1e-17]))
pairs = st.tuples(st.sampled_from([0.0, 0.5, 2.0, 3.7, 1e-300, 1e6]), signed_scores)


@settings(max_examples=300, deadline=None)
@given(st.lists(signed_scores, max_size=40), st.lists(pairs, max_size=20))
def test_small_probability_fold_gives_the_vectorised_terms(unit, weighted):
    """ProbabilitySums' plain-float fold of a few events gives the units of the numpy terms
    (probability_terms: clipping, -0.0 as a negative scored 0, weights)."""
    small = ProbabilitySums()
    small.unit.extend(unit)
    small.weighted.extend(x for p in weighted for x in p)
    small.fold()
    log_terms, brier_terms = probability_terms(np.asarray(unit, dtype=np.float64))
    w = np.asarray([p[0] for p in weighted], dtype=np.float64)
    wlog, wbrier = probability_terms(np.asarray([p[1] for p in weighted], dtype=np.float64), w)
    assert small.log.units == _vectorised_units(log_terms.tolist() + wlog.tolist())
    assert small.brier.units == _vectorised_units(brier_terms.tolist() + wbrier.tolist())


def test_fold_sums_gives_each_sum_its_own_fold():
    """``fold_sums`` (many sums' pending terms in one pass) leaves each sum as its own ``fold``:
    the same units, random and hostile terms, sums without terms, an overflowed term, a long
    buffer and a ``LogLossSum`` (its terms are (w, p) pairs: folded alone)."""
    import random

    from streammetrics.kernels.exact_sum import BUFFER, ExactSum, LogLossSum, fold_sums

    rng = random.Random(24)
    hostile = [0.0, -0.0, 5e-324, -1e-310, 1e300, -1e300, 1e-160, 0.1, -3.5]
    for case in range(6):
        pairs = []
        for i in range(40):
            terms = [rng.choice(hostile) if case % 2 and rng.random() < 0.5 else rng.gauss(0.0, 10.0)
                     for _ in range(rng.choice([0, 1, 3, 25, 200]))]
            if case == 2 and i == 7:
                terms.append(math.inf)
            if case == 4 and i == 3:
                terms = [0.1] * (BUFFER + 5)
            a, b = ExactSum(rng.randrange(1 << 1080)), None
            b = a.copy()
            a.terms.extend(terms)
            b.terms.extend(terms)
            pairs.append((a, b))
        log_a, log_b = LogLossSum(), LogLossSum()
        for s in (log_a, log_b):
            s.add_log(2.0, 0.25).add_log(1.0, 0.5)
        fold_sums([a for a, _ in pairs] + [log_a])
        for a, b in pairs:
            b.fold()
            assert not a.terms
            assert a == b
        assert not log_a.terms and log_a.value == log_b.value


def test_the_expansion_read_once_follows_every_change():
    """``value`` / ``expansion()`` / ``parts()`` are computed once per value of the sum: every
    change (add, add_array, merge, fold, add_rows, reset, an overflowed term) is seen, and the
    list ``expansion()`` returns may be changed by the caller without harm."""
    from streammetrics.kernels.exact_sum import ExactSum, add_rows, expansion_of

    s = ExactSum()
    assert s.value == 0.0
    s.add(0.1)
    assert s.value == 0.1
    s.add_array(np.array([0.2, 1e-30]))
    assert s.expansion() == expansion_of(s.units) and s.value == math.fsum([0.1, 0.2, 1e-30])
    got = s.expansion()
    got.append(5.0)
    assert s.expansion() == expansion_of(s.units)
    s.merge(ExactSum().add_array([1e100]))
    assert s.value == 1e100 and s.parts()[1]
    add_rows([s], [np.array([-1e100])])
    assert s.value == math.fsum([0.1, 0.2, 1e-30])
    s.reset()
    assert s.value == 0.0 and s.parts() == (0.0, [])
    s.add(math.inf)
    assert s.value == math.inf


def test_add_units_is_a_merge_of_those_units():
    from streammetrics.kernels.exact_sum import ExactSum, exact_units

    a, b = ExactSum().add_array([0.1, 1e-300]), ExactSum().add_array([0.1, 1e-300])
    assert a.value == b.value
    units = exact_units(np.array([3.5, -1e200, 1e-310]))
    assert a.add_units(units) == b.merge(ExactSum(units))
    assert a.value == b.value and a.parts() == b.parts()


def test_rows_at_once_are_each_rows_exact_sum():
    """``exact_units_rows`` over many rows (the levels read for every row at once) gives each row's
    exact sum (``Fraction``): negative terms (the spacing below ``sigma`` is half its ulp), rows of
    zeros, tiny and huge magnitudes, one row per magnitude."""
    from streammetrics.kernels.exact_sum import exact_units_rows

    rng = np.random.default_rng(24)
    for _ in range(40):
        rows, width = int(rng.integers(2, 30)), int(rng.integers(1, 40))
        a = rng.normal(0.0, 1.0, (rows, width)) * 10.0 ** rng.integers(-250, 250, (rows, 1))
        a *= rng.random((rows, width)) < 0.8
        a[0] = 0.0
        a[-1] = -np.abs(a[-1])
        want = [int(sum((Fraction(x) for x in row.tolist()), Fraction(0)) * 2**1074) for row in a]
        assert exact_units_rows(a) == want
