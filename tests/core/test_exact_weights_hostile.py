"""Exact weight sums under hostile use (review of the exact-weights change): malformed
residues in dicts, mode edges (merge, reset, copy, remove) and extreme weights."""
from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest
from order_free import state_bytes
from test_hostile_state import rejection

import streammetrics as sm
from streammetrics.events.parser import Event
from streammetrics.monitors.reference_multiclass import MulticlassReference


# ----------------------------------------------------------------------------- remove()
@pytest.mark.parametrize("big,small", [(2.7, 1e-300), (2.7, 5e-324), (2.0**31, 2.0), (1000.0, 1e-7)])
@pytest.mark.parametrize("make", [sm.BinaryScores, lambda: sm.BinaryScores(max_bins=4)])
def test_binary_scores_remove_keeps_a_small_weight_sharing_the_bin(make, big, small):
    # exact sums: removing the big event leaves exactly the small one in the bin (was: dropped
    # as "rounding residue" below 1e-9 of the bin, so removing the small one then failed)
    base = make().update(1, 0.5, 1.0).update(0, 0.5, small)
    acc = base.copy().update(0, 0.5, big).remove(0, 0.5, big)
    assert state_bytes(acc) == state_bytes(base)
    acc.remove(0, 0.5, small)
    assert state_bytes(acc) == state_bytes(make().update(1, 0.5, 1.0))


@pytest.mark.parametrize("make", [sm.BinaryScores, lambda: sm.BinaryScores(max_bins=4)])
def test_binary_scores_remove_from_a_rounded_older_state_leaves_the_unit_counts(make):
    # a state written before exact sums (no residue keys: its sums rounded) loads in units mode;
    # once its weighted events are removed, the bins are the unit-weight events' counts again
    # (was: a residue of 2**-55 stayed in the bin shared with a unit-weight event)
    a = make().update(0, 0.5, 1.0).update(0, 0.7, 1.0).update(0, 0.5, 0.1).update(0, 0.5, 0.2).update(1, 0.5, 1.0)
    d = a.to_dict()
    d["state"].pop("weighted_residues", None)
    d["state"]["histogram"].pop("residues")
    b = sm.from_dict(d).remove(0, 0.5, 0.1).remove(0, 0.5, 0.2)
    assert state_bytes(b) == state_bytes(make().update(0, 0.5, 1.0).update(0, 0.7, 1.0).update(1, 0.5, 1.0))


# ----------------------------------------------------------------------------- hostile residues
def _events(task: str, n: int = 60, seed: int = 1) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        w = rng.choice([0.1, 1.0, 2.7, 0.3])
        if task == "binary":
            e = Event(i, "m", y_true=int(rng.random() < 0.4), score=rng.choice([0.1, 0.5, 0.9]), weight=w)
        elif task == "multiclass":
            raw = [rng.choice([1.0, 2.0, 3.0]) for _ in range(3)]
            e = Event(i, "m", y_true=rng.choice("abc"), scores=tuple(r / sum(raw) for r in raw), weight=w)
        elif task == "labels":
            e = Event(i, "m", y_true=rng.choice("xyz"), y_pred=rng.choice("xyz"), weight=w)
        else:
            e = Event(i, "m", y_true=rng.uniform(0, 5), y_pred=rng.uniform(0, 5), weight=w)
        if i % 5 == 0:
            e.y_true = None
        out.append(e)
    return out


def _monitor(make, task):
    m = make()
    for e in _events(task):
        m.update_prediction(e) if e.y_true is None else m.update_event(e)
    return m


def _fed(acc, rows):
    rng = random.Random(3)
    for row in rows(rng):
        acc.update(*row)
    return acc


def _mc_rows(k):
    def rows(rng):
        for _ in range(60):
            raw = [rng.choice([1.0, 2.0, 3.0]) for _ in range(k)]
            yield "abc"[rng.randrange(k)], tuple(r / sum(raw) for r in raw), rng.choice([0.1, 1.0, 2.7])
    return rows


def _estimate_monitor():
    rng = np.random.default_rng(5)
    y, s = rng.integers(0, 3, 300), rng.dirichlet([1, 1, 1], 300)
    ref = MulticlassReference.from_arrays(np.array(list("abc"))[y], s, classes=list("abc"))
    m = sm.MulticlassMonitor(list("abc"), reference=ref)
    for e in _events("multiclass"):
        m.update_prediction(e)
    return m


#: a units-mode accumulator of every type (weights 0.1, 2.7 among whole ones)
UNITS = {
    "ConfusionMatrix": lambda: _fed(sm.ConfusionMatrix(list("abc")), lambda rng: (
        (rng.choice("abc"), rng.choice("abc"), rng.choice([0.1, 1.0, 2.7])) for _ in range(40))),
    "BinaryScores": lambda: _fed(sm.BinaryScores(), lambda rng: (
        (int(rng.random() < 0.5), rng.choice([0.1, 0.3, 0.9]), rng.choice([0.1, 1.0, 2.7])) for _ in range(40))),
    "BinaryScores-grid": lambda: _fed(sm.BinaryScores(max_bins=16), lambda rng: (
        (i % 2, (i * 37 % 101) / 101, 0.1 if i % 3 else 1.0) for i in range(200))),
    "ScoreDistribution": lambda: _fed(sm.ScoreDistribution(max_bins=16), lambda rng: (
        ((i * 37 % 101) / 101, 0.1 if i % 3 else 1.0) for i in range(200))),
    "MulticlassScores": lambda: _fed(sm.MulticlassScores(list("abc")), _mc_rows(3)),
    "MulticlassScores-2": lambda: _fed(sm.MulticlassScores(list("ab")), _mc_rows(2)),
    "MultilabelConfusion": lambda: _fed(sm.MultilabelConfusion(3), lambda rng: (
        ([rng.randint(0, 1) for _ in range(3)], [rng.randint(0, 1) for _ in range(3)], rng.choice([0.1, 1.0, 2.7]))
        for _ in range(60))),
    "MultilabelScores": lambda: _fed(sm.MultilabelScores(3), lambda rng: (
        ([rng.randint(0, 1) for _ in range(3)], [rng.choice([0.1, 0.5, 0.9]) for _ in range(3)],
         rng.choice([0.1, 1.0, 2.7])) for _ in range(60))),
    "BinaryMonitor": lambda: _monitor(lambda: sm.BinaryMonitor(threshold=0.4), "binary"),
    "MulticlassMonitor": lambda: _monitor(lambda: sm.MulticlassMonitor(list("abc")), "multiclass"),
    "MulticlassMonitor-estimate": _estimate_monitor,
    "LabelMonitor": lambda: _monitor(sm.LabelMonitor, "labels"),
    "RegressionMonitor": lambda: _monitor(sm.RegressionMonitor, "regression"),
}


def _residue_paths(d, path=()):
    """Paths of the residue keys in a state (nested accumulator states included)."""
    if isinstance(d, dict):
        for k, v in d.items():
            if k.endswith("residues") or k.endswith("_residue"):
                yield path + (k,)
            else:
                yield from _residue_paths(v, path + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _residue_paths(v, path + (i,))


def _get(d, path):
    for k in path:
        d = d[k]
    return d


def _put(d, path, v):
    _get(d, path[:-1])[path[-1]] = v


BIG_PAIR = [4503599627370496, -100]
DEEP: list = []
for _ in range(100):
    DEEP = [DEEP]


def _mutations(v):
    """Malformed replacements of the residue value ``v`` (every shape the state keys use)."""
    yield "true", True
    yield "float", 1.5
    yield "str", "x"
    yield "object", {"0": 1}
    yield "deep", DEEP
    yield "huge-int", 10**400
    if isinstance(v, dict):  # packed / per-histogram residues: {"neg": [...], ...} or {"tp": ..., "prob": ...}
        for k in v:
            for label, m in _mutations(v[k]):
                yield f"{k}:{label}", {**v, k: m}
        yield "extra-key", {**v, "zz": []}
        return
    first = v[0] if isinstance(v, list) and v else None
    if isinstance(first, list) and len(first) == 2 and first[0].__class__ is int and isinstance(first[1], list):
        i, r = first  # [[index, residue], ...]
        rest = v[1:]
        m, e = r[0]
        yield "index-bool", [[True, r], *rest]
        yield "index-float", [[float(i), r], *rest]
        yield "index-huge", [[10**30, r], *rest]
        yield "index-negative", [[-1, r], *rest]
        yield "duplicate", [first, first, *rest]
        if rest:
            yield "unsorted", [rest[0], first, *rest[1:]]
        yield "mantissa-bool", [[i, [[True, e]]], *rest]
        yield "mantissa-float", [[i, [[float(m), e]]], *rest]
        yield "mantissa-huge", [[i, [[10**40, e]]], *rest]
        yield "exponent-huge", [[i, [[m, 10**6]]], *rest]
        yield "exponent-low", [[i, [[m, -1199]]], *rest]
        yield "not-below-half-ulp", [[i, [[m, e + 40]]], *rest]
        yield "zero-pair", [[i, [[0, 0]]], *rest]
        yield "too-long", [[i, [r[0]] * 60], *rest]
        yield "million", [first] * 1_000_001
    elif isinstance(first, list) and len(first) == 2 and all(x.__class__ is int for x in first):
        m, e = first  # one residue: [[mantissa, exponent], ...]
        yield "pair-bool", [[True, e], *v[1:]]
        yield "pair-float", [[float(m), e], *v[1:]]
        yield "pair-exponent-huge", [[m, 10**6], *v[1:]]
        yield "pair-not-below-half-ulp", [[m, e + 40], *v[1:]]
        yield "pair-zero", [[0, 0], *v[1:]]
        yield "pair-too-long", v * 60
    elif isinstance(first, list):  # one residue per sum: [[[m, e], ...], ...]
        for label, m in _mutations(first or [BIG_PAIR]):
            yield f"first:{label}", [m, *v[1:]]
        yield "short", v[:-1]
        yield "long", [*v, first]
    else:
        raise AssertionError(f"unknown residue shape {v!r:.80}")


def _cases():
    for name, make in UNITS.items():
        state = make().to_dict()["state"]
        for path in _residue_paths(state):
            if _get(state, path) is None:  # (a sum's residue written as null: nothing to mutate)
                continue
            yield pytest.param(name, path, id=f"{name}-{'.'.join(map(str, path))}")


@pytest.fixture(scope="module")
def units_states():
    return {name: make().to_dict() for name, make in UNITS.items()}


def test_every_residue_key_is_exercised(units_states):
    keys = {p[-1] if p[-1] != "residues" else f"{p[-2]}.residues"
            for d in units_states.values() for p in _residue_paths(d["state"])}
    assert {"cells_residues", "weight_residues", "weighted_residues", "weights_residues", "ranks_residues",
            "binary_top1_residues", "prediction_weight_residue", "predicted_weights_residues",
            "total_weight_residue", "positive_weights_residues", "samples_sums_residues", "histogram.residues",
            "histograms.residues", "cells.residues", "estimate.residues"} <= keys, keys


@pytest.mark.parametrize("name,path", list(_cases()))
def test_malformed_residues_are_a_one_line_value_error(units_states, name, path):
    d = units_states[name]
    text = json.dumps(d)
    target = UNITS[name]()
    before = state_bytes(target)
    field = path[-1] if path[-1] != "residues" else path[-2]
    for label, bad in _mutations(_get(d["state"], path)):
        dd = json.loads(text)
        _put(dd["state"], path, bad)
        msg, peak = rejection(dd)
        assert field in msg or path[-1] in msg, (label, msg)
        assert peak < 64 << 20, (label, peak)
        if label in ("true", "duplicate", "not-below-half-ulp", "pair-not-below-half-ulp"):  # into a live one
            with pytest.raises(ValueError):
                target.__setstate__({"config": dd["config"], "state": dd["state"]})
            assert state_bytes(target) == before


# ----------------------------------------------------------------------------- float mode past 2**53
N53 = 2**21 + 8  # events of weight 2**32 (WHOLE_MAX, a whole weight): their sum passes 2**53


def _past_2_53(kind):
    """(empty accumulator, feed N53 events of weight 2**32 in 4 batches, feed one of weight 3)"""
    acc, quarter, small = _quarter_2_53(kind)
    return acc, lambda a: [quarter(a) for _ in range(4)], small


def _quarter_2_53(kind):
    n = N53 // 4  # a batch sums to 2**51 + 2**33: below 2**52
    w = np.full(n, 2.0**32)
    zeros, halves = np.zeros(n, dtype=np.int64), np.full(n, 0.5)
    if kind == "ConfusionMatrix":
        return sm.ConfusionMatrix([0, 1]), lambda a: a.update_many(zeros, zeros, w), lambda a: a.update(0, 0, 3.0)
    if kind == "MultilabelConfusion":
        ones = np.ones((n, 2), dtype=np.int64)
        return (sm.MultilabelConfusion(2), lambda a: a.update_many(ones, ones, w),
                lambda a: a.update([1, 1], [1, 1], 3.0))
    if kind == "BinaryScores":
        return sm.BinaryScores(), lambda a: a.update_many(zeros, halves, w), lambda a: a.update(0, 0.5, 3.0)
    if kind == "ScoreDistribution":
        return sm.ScoreDistribution(), lambda a: a.update_many(halves, w), lambda a: a.update(0.5, 3.0)
    if kind == "MultilabelScores":
        ones = np.ones((n, 2), dtype=np.int64)
        return (sm.MultilabelScores(2), lambda a: a.update_many(ones, np.full((n, 2), 0.5), w),
                lambda a: a.update([1, 1], [0.5, 0.5], 3.0))
    scores = np.tile([0.6, 0.4], (n, 1))
    return (sm.MulticlassScores(["a", "b"]), lambda a: a.update_many(["a"] * n, scores, w),
            lambda a: a.update("a", (0.6, 0.4), 3.0))


@pytest.mark.parametrize("kind", ["ConfusionMatrix", "MultilabelConfusion",
                                  "BinaryScores",
                                  "ScoreDistribution",
                                  "MulticlassScores", "MultilabelScores"])
@pytest.mark.slow  # 2**21 events: up to ~7 s each
def test_whole_weight_sums_past_2_53_stay_exact(kind):
    # 2**21 + 8 events of weight 2**32 and two of weight 3: past 2**53 a float sum rounds each
    # odd partial sum, differently in different orders (was: float mode kept summing floats
    # past 2**53); the exact total n * 2**32 + 6 is a float
    def build(*steps):
        acc, big, small = _past_2_53(kind)
        parts = []
        for step in steps:  # "b": the big batch, "s": one event of weight 3, "|": a new part
            if step == "|":
                parts.append(acc)
                acc = _past_2_53(kind)[0]
            else:
                (big if step == "b" else small)(acc)
        for part in parts:
            acc = part + acc
        return state_bytes(acc), acc.total_weight

    got = {order: build(*order) for order in ("bss", "ssb", "s|bs", "bs|s", "b|ss", "ss|b", "sbs")}
    assert len(set(got.values())) == 1, got
    assert got["bss"][1] == N53 * 2**32 + 6


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LabelMonitor", "MulticlassMonitor"])
def test_prediction_weights_past_2_53_stay_exact(kind):
    # the monitors' own float sums (prediction_weight, predicted weights per label / class)
    if kind == "LabelMonitor":
        make, big_e, small_e = (sm.LabelMonitor, Event(0, "m", y_pred="x", weight=2.0**32),
                                Event(0, "m", y_pred="x", weight=3.0))
    else:
        make, big_e, small_e = (lambda: sm.MulticlassMonitor(["a", "b"]),
                                Event(0, "m", scores=(0.6, 0.4), weight=2.0**32),
                                Event(0, "m", scores=(0.6, 0.4), weight=3.0))
    quarter = [big_e] * (N53 // 4)

    def big(m):
        for _ in range(4):
            m.update_predictions(quarter)
        return m

    a = big(make()).update_prediction(small_e).update_prediction(small_e)
    b = big(make().update_prediction(small_e).update_prediction(small_e))
    c = make().update_prediction(small_e) + big(make()).update_prediction(small_e)
    assert state_bytes(a) == state_bytes(b) == state_bytes(c)
    assert a.to_dict()["state"]["prediction_weight"] == N53 * 2**32 + 6


# ----------------------------------------------------------------------------- mode edges
def _rows(kind, rng, w):
    if kind == "ConfusionMatrix":
        return rng.choice("abc"), rng.choice("abc"), w
    if kind in ("BinaryScores", "BinaryScores-grid"):
        return int(rng.random() < 0.5), rng.choice([0.1, 0.3, 0.9]) if kind == "BinaryScores" else rng.random(), w
    if kind == "ScoreDistribution":
        return rng.random(), w
    if kind == "MulticlassScores":
        raw = [rng.choice([1.0, 2.0, 3.0]) for _ in range(3)]
        return rng.choice("abc"), tuple(r / sum(raw) for r in raw), w
    if kind == "MultilabelConfusion":
        return [rng.randint(0, 1) for _ in range(3)], [rng.randint(0, 1) for _ in range(3)], w
    return [rng.randint(0, 1) for _ in range(3)], [rng.choice([0.1, 0.5, 0.9]) for _ in range(3)], w


MAKE = {
    "ConfusionMatrix": lambda: sm.ConfusionMatrix(list("abc")),
    "BinaryScores": sm.BinaryScores,
    "BinaryScores-grid": lambda: sm.BinaryScores(max_bins=4),
    "ScoreDistribution": lambda: sm.ScoreDistribution(max_bins=4),
    "MulticlassScores": lambda: sm.MulticlassScores(list("abc")),
    "MultilabelConfusion": lambda: sm.MultilabelConfusion(3),
    "MultilabelScores": lambda: sm.MultilabelScores(3),
    "BinaryMonitor": lambda: sm.BinaryMonitor(threshold=0.4),
    "MulticlassMonitor": lambda: sm.MulticlassMonitor(list("abc")),
    "LabelMonitor": sm.LabelMonitor,
    "RegressionMonitor": sm.RegressionMonitor,
}
TASK = {"BinaryMonitor": "binary", "MulticlassMonitor": "multiclass", "LabelMonitor": "labels",
        "RegressionMonitor": "regression"}


def _feed(kind, acc, weights, seed):
    rng = random.Random(seed)
    if kind in TASK:
        for e, w in zip(_events(TASK[kind], len(weights), seed), weights):
            e.weight = w
            acc.update_prediction(e) if e.y_true is None else acc.update_event(e)
        return acc
    for w in weights:
        acc.update(*_rows(kind, rng, w))
    return acc


@pytest.mark.parametrize("kind", sorted(MAKE))
def test_mode_edges(kind):
    make = MAKE[kind]
    units = _feed(kind, make(), [0.1, 1.0, 2.7, 3.0, 0.3] * 4, 1)
    whole = _feed(kind, make(), [1.0, 2.0, 1.0] * 4, 2)
    empty = make()
    for a, b in [(units, whole), (units, empty), (whole, empty)]:
        before = state_bytes(a), state_bytes(b)
        assert state_bytes(a + b) == state_bytes(b + a)
        merged = b.copy().merge(a)
        _feed(kind, merged, [0.1, 1.0], 9)  # a later event changes neither operand
        assert (state_bytes(a), state_bytes(b)) == before
    # reset: float mode again, a unit-weight stream gives a fresh accumulator's bytes
    again = _feed(kind, units.copy().reset(), [1.0, 2.0, 1.0], 3)
    assert state_bytes(units.copy().reset()) == state_bytes(make())
    assert state_bytes(again) == state_bytes(_feed(kind, make(), [1.0, 2.0, 1.0], 3))
    for src in (units, whole, empty):
        before = state_bytes(src)
        for twin in (src.copy(), pickle.loads(pickle.dumps(src)), sm.from_dict(json.loads(before))):
            assert state_bytes(twin) == before
            _feed(kind, twin, [0.1, 5e-324, 2.0**32, 2.0**32 + 1], 4)
            assert state_bytes(src) == before
            assert state_bytes(twin) == state_bytes(_feed(kind, src.copy(), [0.1, 5e-324, 2.0**32, 2.0**32 + 1], 4))
