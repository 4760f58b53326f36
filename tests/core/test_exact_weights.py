"""Exact weight sums (kernels.exact_weights): with weights that are not whole numbers (0.1,
2.7, random floats) every accumulator's state - its JSON bytes - is still a function of the
multiset of events: per-event and batch paths, any split merged in any order and the dict
round trip give the same bytes (contract section 1; replay and Spark, issue 16)."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from order_free import check_order_free, per_event_or_batch, state_bytes

import streammetrics as sm
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_weights import (
    all_whole,
    decode_residues,
    encode_residues,
    grouped_units,
    is_whole,
    units_of,
    value_of,
)

FINITE = st.floats(0.0, 1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), FINITE | st.sampled_from([0.1, 1.0, 5e-324, 2.5])), max_size=60))
def test_grouped_units_is_the_exact_sum_per_key(items):
    keys = np.array([k for k, _ in items], dtype=np.int64)
    w = np.array([x for _, x in items], dtype=np.float64)
    got_keys, got = grouped_units(keys, w)
    want: dict[int, int] = {}
    for k, x in items:
        want[k] = want.get(k, 0) + units_of(x)
    assert dict(zip(got_keys.tolist(), got)) == want
    assert got_keys.tolist() == sorted(want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(FINITE, max_size=5), max_size=8))
def test_residues_round_trip(groups):
    sums = [sum(units_of(x) for x in g) for g in groups]
    sums = [s if s % (1 << 1074) else float(s >> 1074) for s in sums]  # whole sums stay floats
    values = [s if isinstance(s, float) else value_of(s) for s in sums]
    raw = json.loads(json.dumps(encode_residues(sums)))
    back = decode_residues(raw, values, "x")
    if raw is None:
        assert all(isinstance(s, float) or units_of(value_of(s)) == s for s in sums)
    else:
        assert back == [s if isinstance(s, int) else units_of(s) for s in sums]


@pytest.mark.parametrize("raw", [[], [[0, [[1, 0]]], [0, [[1, 0]]]], [[5, [[1, -60]]]], [[0, [[3, -60]]]],
                                 [[0, "x"]], [["0", [[4503599627370496, -100]]]], {"0": 1}])
def test_malformed_residues_are_refused(raw):
    with pytest.raises(ValueError, match="x"):
        decode_residues(raw, [0.5, 1.0], "x")


def test_whole_weights():
    assert is_whole(1.0) and is_whole(0.0) and not is_whole(0.1) and not is_whole(2.0**33)
    assert all_whole(np.array([0.0, 1.0, 7.0])) and not all_whole(np.array([1.0, 0.5]))


# ------------------------------------------------------------------ every accumulator
SCORES = [0.0, 1.0, 0.5, 0.05, 0.1, 0.2, 0.3, 0.7, 0.9, 0.99]


def weights(rng: random.Random, n: int) -> list[float]:
    pool = [lambda: 1.0, lambda: 0.1, lambda: 2.7, lambda: rng.random() * 3, lambda: float(rng.randint(0, 4)),
            lambda: rng.random() * 1e-3, lambda: 0.0]
    return [rng.choice(pool)() for _ in range(n)]


def _scores(rng, n, many):
    return [rng.choice(SCORES) if not many else round(rng.random(), 3) for _ in range(n)]


def _binary(n, seed, many=False):
    rng = random.Random(seed)
    return list(zip([int(rng.random() < 0.4) for _ in range(n)], _scores(rng, n, many), weights(rng, n)))


ACCUMULATORS = {
    "ConfusionMatrix": (
        sm.ConfusionMatrix,
        lambda n, seed: [(t, p, w) for (t, _, w), p in zip(_binary(n, seed), random.Random(seed).choices("abc", k=n))
                         for t in [("a", "b", "c")[t]]],
        lambda acc, e: acc.update(*e),
        lambda acc, es: acc.update_many([e[0] for e in es], [e[1] for e in es], [e[2] for e in es]),
    ),
    "BinaryScores": (
        sm.BinaryScores, _binary,
        lambda acc, e: acc.update(*e),
        lambda acc, es: acc.update_many([e[0] for e in es], [e[1] for e in es], [e[2] for e in es]),
    ),
    "BinaryScores-grid": (
        lambda: sm.BinaryScores(max_bins=16), lambda n, seed: _binary(n, seed, many=True),
        lambda acc, e: acc.update(*e),
        lambda acc, es: acc.update_many([e[0] for e in es], [e[1] for e in es], [e[2] for e in es]),
    ),
    "ScoreDistribution": (
        lambda: sm.ScoreDistribution(max_bins=16), lambda n, seed: _binary(n, seed, many=True),
        lambda acc, e: acc.update(e[1], e[2]),
        lambda acc, es: acc.update_many([e[1] for e in es], [e[2] for e in es]),
    ),
    "MulticlassScores": (
        lambda: sm.MulticlassScores(["a", "b", "c"]),
        lambda n, seed: [(("a", "b", "c")[t], (s, (1 - s) / 2, (1 - s) / 2), w) for t, s, w in _binary(n, seed)],
        lambda acc, e: acc.update(*e),
        lambda acc, es: acc.update_many([e[0] for e in es], np.array([e[1] for e in es]), [e[2] for e in es]),
    ),
}


@pytest.mark.parametrize("name", sorted(ACCUMULATORS))
@pytest.mark.parametrize("seed", range(4))
def test_accumulator_state_is_order_free_with_any_weights(name, seed):
    make, events, one, many = ACCUMULATORS[name]
    check_order_free(make, events(300, seed), per_event_or_batch(one, many), seed)


def monitor_events(task: str, n: int, seed: int) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for i, w in enumerate(weights(rng, n)):
        if task == "binary":
            out.append(Event(i, "m", y_true=int(rng.random() < 0.4), score=rng.choice(SCORES), weight=w))
        elif task == "multiclass":
            raw = [rng.choice([1.0, 2.0, 3.0]) for _ in range(3)]
            out.append(Event(i, "m", y_true=rng.choice("abc"), scores=tuple(r / sum(raw) for r in raw), weight=w))
        elif task == "labels":
            out.append(Event(i, "m", y_true=rng.choice("xyz"), y_pred=rng.choice("xyz"), weight=w))
        else:
            y = rng.uniform(0, 5)
            out.append(Event(i, "m", y_true=y, y_pred=y + rng.gauss(0, 1), weight=w))
    for e in out[::5]:  # some predictions without a label
        e.y_true = None
    return out


MONITORS = {
    "binary": lambda: sm.BinaryMonitor(threshold=0.4),
    "multiclass": lambda: sm.MulticlassMonitor(list("abc")),
    "labels": sm.LabelMonitor,
    "regression": sm.RegressionMonitor,
}


@pytest.mark.parametrize("task", sorted(MONITORS))
@pytest.mark.parametrize("seed", range(4))
def test_monitor_state_and_snapshot_are_order_free_with_any_weights(task, seed):
    evs = monitor_events(task, 400, seed)

    def one(mon, e):
        if e.y_true is None:
            mon.update_prediction(e)
        else:
            mon.update_event(e)

    def many(mon, es):
        mon.update_predictions([e for e in es if e.y_true is None])
        return mon.update_events([e for e in es if e.y_true is not None])

    whole = check_order_free(MONITORS[task], evs, per_event_or_batch(one, many), seed)
    snap = json.dumps(whole.snapshot(), sort_keys=True)
    for other in (sm.from_dict(json.loads(state_bytes(whole))),):
        assert json.dumps(other.snapshot(), sort_keys=True) == snap
