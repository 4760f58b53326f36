"""Exact weight sums in BinaryScores, ScoreDistribution and BinaryMonitor (kernels.exact_weights):
float mode while every weight is whole (the bytes of today's states), units mode once one is
not; malformed residues refused; merges of the two modes in either order; the grid regime;
scikit-learn parity with non-whole weights; the fused and one-pass snapshot paths."""
from __future__ import annotations

import hashlib
import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.core.accumulator import Accumulator
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_weights import units_of, value_of


def state_bytes(acc) -> str:
    return json.dumps(acc.to_dict())


def exact_sum(ws) -> float:
    return value_of(sum(units_of(float(w)) for w in ws))


# ----------------------------------------------------------------------------- whole weights: today's bytes
def whole_weight_cases() -> dict:
    rng = np.random.default_rng(7)
    y = (rng.random(300) < 0.4).astype(int)
    s = np.round(rng.random(300), 3)
    w = rng.integers(0, 4, 300).astype(float)
    out = {}
    a = sm.BinaryScores()
    for t, x, v in zip(y[:20], s[:20], w[:20]):
        a.update(int(t), float(x), float(v))
    out["binary-small"] = a
    out["binary-grid"] = sm.BinaryScores(max_bins=16).update_many(y, s, w)
    out["binary-exact-many"] = sm.BinaryScores().update_many(y, s, w)
    out["dist-grid"] = sm.ScoreDistribution(max_bins=16).update_many(s, w)
    e = sm.ScoreDistribution()
    for x, v in zip(s[:30], w[:30]):
        e.update(float(x), float(v))
    out["dist-small"] = e
    m = sm.BinaryMonitor(threshold=0.4)
    for i in range(200):
        ev = Event(i, "m", y_true=int(y[i]), score=float(s[i]), weight=float(w[i]))
        (m.update_prediction if i % 5 == 0 else m.update_event)(ev)
    out["monitor"] = m
    return out


#: sha256 (first 16 hex digits) of ``json.dumps(to_dict())`` + the sorted snapshot JSON, written by
#: the code before exact weight sums (commit 8502aaf): whole weights keep their bytes
WHOLE_WEIGHT_BYTES = {
    "binary-small": "55513bc8df3e605a",
    "binary-grid": "6ff04eb952e92d16",
    "binary-exact-many": "746e6789ac6b63c7",
    "dist-grid": "04e1f56f6133d2a0",
    "dist-small": "3c9b7089bd92c89d",
    "monitor": "67190e541a83f867",
}


#: the sums of squared weights (issue 26), written since for weights other than 1: taken out, the
#: rest of the state keeps the bytes above
SQUARE_KEYS = ("weighted_squares", "weighted_squares_residues", "cells_squares", "cells_squares_residues",
               "weight_squares", "weight_squares_residue")


def without_squares(value):
    if isinstance(value, dict):
        return {k: without_squares(v) for k, v in value.items() if k not in SQUARE_KEYS}
    return value


@pytest.mark.parametrize("name", sorted(WHOLE_WEIGHT_BYTES))
def test_whole_weights_keep_their_bytes(name):
    acc = whole_weight_cases()[name]
    snap = json.dumps(acc.snapshot(), sort_keys=True) if hasattr(acc, "snapshot") else ""
    assert any(k in state_bytes(acc) for k in SQUARE_KEYS)  # (weights other than 1: squares written)
    written = json.dumps(without_squares(acc.to_dict()))
    if isinstance(acc, sm.BinaryMonitor):  # version 3 writes these weights in version 2's layout
        head = '{"type": "BinaryMonitor", "version": '
        assert written.startswith(head + "3, ")
        written = head + "2, " + written[len(head) + 3:]
    assert hashlib.sha256((written + snap).encode()).hexdigest()[:16] == WHOLE_WEIGHT_BYTES[name]
    assert "residues" not in state_bytes(acc).replace("sum_residues", "").replace("score_sum_residue", "")
    parts = [acc] if not isinstance(acc, sm.BinaryMonitor) else [acc.scores, acc.predictions]
    assert not any(p._units for p in parts)  # float mode: the fast paths add 1.0


# ----------------------------------------------------------------------------- units mode
def weighted_binary(n: int, seed: int, many: bool = False):
    rng = random.Random(seed)
    pool = [lambda: 1.0, lambda: 0.1, lambda: 2.7, lambda: rng.random() * 3, lambda: float(rng.randint(0, 4)),
            lambda: 0.0, lambda: 1e-3 * rng.random()]
    y = [int(rng.random() < 0.4) for _ in range(n)]
    s = [round(rng.random(), 3) if many else rng.choice([0.0, 1.0, 0.1, 0.3, 0.5, 0.7, 0.9]) for _ in range(n)]
    w = [rng.choice(pool)() for _ in range(n)]
    return y, s, w


def test_units_mode_starts_at_the_first_weight_that_is_not_whole():
    b = sm.BinaryScores().update(1, 0.3).update(0, 0.2, 2.0)
    assert not b._units and b._inc == 1.0
    b.update(1, 0.4, 0.1)
    assert b._units and b._inc == 1 << 1074
    b.update(1, 0.3)  # unit weight in units mode: UNIT, an int
    assert all(v.__class__ is int for h in (b._neg, b._pos) for v in h.weights.values())
    assert b._pos.weights[0.3] == 2 << 1074
    assert b.total_weight == 4.1 and b._class_weight(1) == exact_sum([1.0, 0.1, 1.0])
    d = sm.ScoreDistribution().update(0.3).update_many([0.2, 0.9], [0.1, 0.2])
    assert d._units and d.total_weight == exact_sum([1.0, 0.1, 0.2]) and d.positive_weight == 0.2


@pytest.mark.parametrize("seed", range(3))
def test_merge_float_and_units_mode_states_in_both_orders(seed):
    y, s, w = weighted_binary(200, seed)
    whole = [float(int(x)) for x in w]  # whole weights: float mode
    for make in (sm.BinaryScores, lambda: sm.BinaryScores(max_bins=8)):
        a = make().update_many(y, s, whole)
        b = make().update_many(y, s, w)
        assert not a._units and b._units
        want = make().update_many(y + y, s + s, whole + w)
        for merged in (a + b, b + a, a.copy().merge(b), b.copy().merge(a)):
            assert merged._units and state_bytes(merged) == state_bytes(want)
        assert not a._units and b._units  # the operands are unchanged
    da = sm.ScoreDistribution(max_bins=8).update_many(s, whole)
    db = sm.ScoreDistribution(max_bins=8).update_many(s, w)
    want_d = sm.ScoreDistribution(max_bins=8).update_many(s + s, whole + w)
    for merged in (da + db, db + da):
        assert merged._units and state_bytes(merged) == state_bytes(want_d)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("max_bins", [4, 16])
def test_grid_regime_with_weights_that_are_not_whole(seed, max_bins):
    y, s, w = weighted_binary(400, seed, many=True)
    one = sm.BinaryScores(max_bins=max_bins)
    for t, x, v in zip(y, s, w):
        one.update(t, x, v)
    assert not one.exact and one._units
    assert len(one._neg) + len(one._pos) <= max_bins or one.bins_per_octave == 1
    many = sm.BinaryScores(max_bins=max_bins).update_many(y, s, w)
    halves = sm.BinaryScores(max_bins=max_bins).update_many(y[1::2], s[1::2], w[1::2])
    halves = sm.BinaryScores(max_bins=max_bins).update_many(y[::2], s[::2], w[::2]).merge(halves)
    assert state_bytes(one) == state_bytes(many) == state_bytes(halves)
    # the summed weights are the exact sums, correctly rounded
    for c in (0, 1):
        assert one._class_weight(c) == exact_sum([v for t, v in zip(y, w) if t == c])
    low, high = one.roc_auc_bounds()
    auc = skm.roc_auc_score(y, s, sample_weight=w)
    assert low - 1e-12 <= auc <= high + 1e-12
    back = sm.from_dict(json.loads(state_bytes(one)))
    assert back == one and back._units and state_bytes(back) == state_bytes(one)
    d = sm.ScoreDistribution(max_bins=max_bins)
    for x, v in zip(s, w):
        d.update(x, v)
    assert state_bytes(d) == state_bytes(sm.ScoreDistribution(max_bins=max_bins).update_many(s, w))
    assert d.total_weight == exact_sum(w) and d.positive_weight == exact_sum([v for x, v in zip(s, w) if x >= 0.5])
    assert sm.from_dict(json.loads(state_bytes(d))) == d


def test_direct_state_writes_what_the_declared_fields_write():
    y, s, w = weighted_binary(50, 1)
    for acc in (sm.BinaryScores().update_many(y, s, w), sm.ScoreDistribution().update_many(s, w),
                sm.BinaryScores().update_many(y, s), sm.ScoreDistribution().update_many(s)):
        direct, generic = acc._state(), Accumulator._state(acc)
        assert json.dumps(direct) == json.dumps(generic)
    units = sm.BinaryScores().update(1, 0.3, 0.1).update(1, 0.3, 0.2)
    assert "weighted_residues" in units._state()
    assert "weight_residues" in sm.ScoreDistribution().update(0.3, 0.1).update(0.6, 0.2)._state()


def test_a_state_whose_floats_are_exact_loads_in_float_mode():
    b = sm.BinaryScores().update(1, 0.3, 0.5).update(1, 0.3, 0.5).update(0, 0.2, 1.5).update(0, 0.2, 0.5)
    assert b._units and "residues" not in state_bytes(b).replace("sum_residues", "")
    back = sm.from_dict(b.to_dict())
    assert not back._units and back == b  # (the in-memory mode never shows)
    back.update(1, 0.3)
    assert state_bytes(back) == state_bytes(b.update(1, 0.3))


# ----------------------------------------------------------------------------- malformed residues
def units_state(kind: str) -> dict:
    if kind == "BinaryScores":
        return sm.BinaryScores().update(1, 0.3, 0.1).update(1, 0.3, 0.2).update(0, 0.2, 0.1).to_dict()
    return sm.ScoreDistribution().update(0.3, 0.1).update(0.3, 0.2).update(0.7, 0.3).to_dict()


RESIDUE_KEY = {"BinaryScores": "weighted_residues", "ScoreDistribution": "weight_residues"}


@pytest.mark.parametrize("kind", sorted(RESIDUE_KEY))
@pytest.mark.parametrize("bad", ["x", [], [[0]], [[0, [[1, 0]]], [0, [[1, 0]]]], [[9, [[1, -80]]]],
                                 [[0, [[3, -60]]]], [[0, [[1, -2000]]]], {"0": 1}, [["0", [[1, -80]]]]])
def test_malformed_weight_residues_are_refused(kind, bad):
    d = units_state(kind)
    key = RESIDUE_KEY[kind]
    assert key in d["state"]
    d["state"][key] = bad
    with pytest.raises(ValueError, match=key) as exc:
        sm.from_dict(d)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("kind", sorted(RESIDUE_KEY))
def test_malformed_histogram_residues_are_refused(kind):
    d = units_state(kind)
    hist = d["state"]["histogram"]
    assert "residues" in hist
    for bad in ("x", {"nope": []}, {name: [[99, [[1, -80]]]] for name in hist["residues"]}):
        d["state"]["histogram"] = {**hist, "residues": bad}
        with pytest.raises(ValueError, match="residues"):
            sm.from_dict(d)


def test_residues_without_the_key_they_complete_are_refused():
    d = units_state("BinaryScores")
    d["state"]["weighted"] = None  # a version-1 layout cannot carry residues
    with pytest.raises(ValueError, match="weighted_residues"):
        sm.from_dict(d)


# ----------------------------------------------------------------------------- scikit-learn parity
WEIGHTS = st.one_of(st.just(0.1), st.just(2.7), st.just(1.0), st.just(0.0),
                    st.floats(2.0**-20, 10.0, allow_nan=False, allow_infinity=False))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([0.05, 0.1, 0.3, 0.5, 0.5, 0.8, 0.99, 1.0, 0.0]), WEIGHTS),
                min_size=2, max_size=60),
       st.randoms(use_true_random=False))
def test_sklearn_parity_with_weights_that_are_not_whole(events, rnd):
    y = np.array([int(t) for t, _, _ in events])
    s = np.array([x for _, x, _ in events])
    w = np.array([v for _, _, v in events])
    acc = sm.BinaryScores()
    cut = rnd.randrange(len(events) + 1)
    for t, x, v in zip(y[:cut], s[:cut], w[:cut]):
        acc.update(int(t), float(x), float(v))
    acc.merge(sm.BinaryScores().update_many(y[cut:], s[cut:], w[cut:]))
    assert acc.exact
    if w[y == 1].sum() > 0 and w[y == 0].sum() > 0:
        assert acc.roc_auc() == pytest.approx(skm.roc_auc_score(y, s, sample_weight=w), rel=1e-12, abs=1e-12)
    if w[y == 1].sum() > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ap = skm.average_precision_score(y, s, sample_weight=w)
        assert acc.average_precision() == pytest.approx(ap, rel=1e-12, abs=1e-12)
    if w.sum() > 0 and (y == 1).any() and (y == 0).any():
        assert acc.log_loss() == pytest.approx(skm.log_loss(y, s, sample_weight=w, labels=[0, 1]),
                                               rel=1e-12, abs=1e-12)
        assert acc.brier_score() == pytest.approx(skm.brier_score_loss(y, s, sample_weight=w),
                                                  rel=1e-12, abs=1e-12)
    assert acc.total_weight == pytest.approx(w.sum(), rel=1e-15)


def test_sklearn_parity_with_random_float_weights_on_the_grid():
    rng = np.random.default_rng(3)
    y = (rng.random(5000) < 0.3).astype(int)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    w = rng.random(5000) * 3
    acc = sm.BinaryScores(max_bins=256).update_many(y, s, w)
    assert not acc.exact and acc._units
    low, high = acc.roc_auc_bounds()
    assert low <= skm.roc_auc_score(y, s, sample_weight=w) <= high
    assert acc.log_loss() == pytest.approx(skm.log_loss(y, s, sample_weight=w), rel=1e-12)
    assert acc.brier_score() == pytest.approx(skm.brier_score_loss(y, s, sample_weight=w), rel=1e-12)


# ----------------------------------------------------------------------------- remove
def test_remove_undoes_weights_that_are_not_whole_exactly():
    base = sm.BinaryScores().update_many([0, 1, 1], [0.2, 0.4, 0.8], [1.0, 2.0, 3.0])
    want = state_bytes(base)
    b = base.copy().update(1, 0.4, 0.1).update(0, 0.3, 0.7)
    assert b._units
    b.remove(1, 0.4, 0.1).remove(0, 0.3, 0.7)
    assert state_bytes(b) == want
    with pytest.raises(ValueError, match="never added"):
        b.remove(1, 0.4, 2.5)
    assert state_bytes(b) == want
    # a state of non-whole weights whose sums are whole loads in float mode: removal switches
    c = sm.from_dict(sm.BinaryScores().update(1, 0.4, 0.5).update(1, 0.4, 0.5).to_dict())
    assert not c._units
    c.remove(1, 0.4, 0.5)
    assert state_bytes(c) == state_bytes(sm.BinaryScores().update(1, 0.4, 0.5))


# ----------------------------------------------------------------------------- BinaryMonitor
def monitor_events(n: int, seed: int) -> list[Event]:
    y, s, w = weighted_binary(n, seed)
    return [Event(i, "m", y_true=t, score=x, weight=v) for i, (t, x, v) in enumerate(zip(y, s, w))]


@pytest.mark.parametrize("seed", range(3))
def test_monitor_fused_paths_in_units_mode(seed):
    """After a weight that is not whole, the fused per-event paths (update(dict),
    update_event) add UNIT: the same state as the accumulators' own paths."""
    rng = random.Random(seed)
    evs = monitor_events(60, seed)
    unit = [{"y_true": rng.randint(0, 1), "score": rng.choice([0.2, 0.45, 0.6, 0.93, round(rng.random(), 4)])}
            for _ in range(300)]
    for grid in (False, True):
        fused, plain = sm.BinaryMonitor(threshold=0.4), sm.BinaryMonitor(threshold=0.4)
        if grid:  # both histograms on the grid: the inline path of update(dict)
            warm = [{"y_true": i % 2, "score": (i + 0.5) / 6000} for i in range(6000)]
            for m in (fused, plain):
                for e in warm:
                    m.update(e)
        for m in (fused, plain):
            m.update_events(evs[:40])
        assert fused.scores._units and fused.predictions._units
        for i, e in enumerate(unit):
            if i % 2:
                fused.update(e)
            else:
                fused.update_event(Event(i, "m", y_true=e["y_true"], score=e["score"]))
            plain.predictions.update(e["score"], 1.0)
            plain.scores.update(e["y_true"], e["score"], 1.0)
            plain.confusion.update(e["y_true"], int(e["score"] >= 0.4), 1.0)
        assert fused.scores._binning.exact is not grid
        assert state_bytes(fused) == state_bytes(plain)
        assert json.dumps(fused.snapshot()) == json.dumps(plain.snapshot())


@pytest.mark.parametrize("seed", range(3))
def test_one_pass_snapshot_with_weights_that_are_not_whole(seed):
    for n in (3, 12, 40):
        m = sm.BinaryMonitor()
        for e in monitor_events(n, seed):
            m.update_event(e)
        snap, state = m.snapshot_state()
        assert json.dumps(snap) == json.dumps(m.snapshot())
        assert json.dumps(state) == json.dumps(m.to_dict())
        back = sm.from_dict(json.loads(json.dumps(state)))
        assert json.dumps(back.snapshot()) == json.dumps(snap)
        assert snap["total_weight"] == exact_sum([e.weight for e in monitor_events(n, seed)])
