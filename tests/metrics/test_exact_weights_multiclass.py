"""Exact weight sums in MulticlassScores and MulticlassMonitor (kernels.exact_weights).

Summed weights (class weights, ranks, binary top-1 hits, arg-max cells, the K x K pair
histograms and the one-vs-rest set; the monitor's prediction weights) are floats while every
weight is whole and exact units otherwise, so that the state's JSON bytes depend only on the
multiset of events; whole-weight states keep exactly their former bytes (golden digests below,
computed with the code before exact sums); residues are validated on decode."""
from __future__ import annotations

import copy
import hashlib
import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from order_free import check_mode_merges, check_order_free, state_bytes
from sklearn import metrics as skm
from test_multiclass_scores import weighted_ovo

import streammetrics as sm
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_weights import units_of, value_of

SCORES = [0.0, 1.0, 0.5, 0.05, 0.1, 0.2, 0.3, 0.7, 0.9, 0.99]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # rows not summing to 1, k >= n_classes


def digest(acc) -> str:
    return hashlib.sha256(state_bytes(acc).encode()).hexdigest()[:16]


def rows(k: int, n: int, seed: int, many: bool = False) -> list[tuple[int, list[float]]]:
    """(true class index, score row summing to about 1) events; ``many``: distinct scores."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        raw = [rng.random() if many else rng.choice([1.0, 2.0, 3.0]) for _ in range(k)]
        out.append((rng.randrange(k), [round(r / sum(raw), 6 if many else 17) for r in raw]))
    return out


def weights(rng: random.Random, n: int, whole: bool = False) -> list[float]:
    if whole:
        return [float(rng.choice([0, 1, 1, 1, 2, 5])) for _ in range(n)]
    pool = [lambda: 1.0, lambda: 0.1, lambda: 2.7, lambda: rng.random() * 3, lambda: float(rng.randint(0, 4)),
            lambda: rng.random() * 1e-3, lambda: 0.0]
    return [rng.choice(pool)() for _ in range(n)]


def events(k: int, n: int, seed: int, whole: bool = False, many: bool = False) -> list[tuple]:
    rng = random.Random(seed + 1000)
    return [(t, s, w) for (t, s), w in zip(rows(k, n, seed, many), weights(rng, n, whole))]


def feed(acc, evs, batch: bool):
    names = acc.classes
    if batch:
        return acc.update_many([names[t] for t, _, _ in evs], np.array([s for _, s, _ in evs]),
                               [w for _, _, w in evs])
    for t, s, w in evs:
        acc.update(names[t], s, w)
    return acc


def check_splits(make, evs, seed: int, rounds: int = 3) -> sm.MulticlassScores:
    """:func:`order_free.check_order_free` of the (true class, row, weight) events."""
    return check_order_free(make, evs, feed, seed, rounds)


# ------------------------------------------------------------------ whole weights: former bytes
def whole_weight_states() -> dict[str, object]:
    """Accumulators and monitors of whole-number weights (golden digests below)."""
    out: dict[str, object] = {}
    for name, k, config, n, many in [("k3", 3, {}, 200, False), ("k2", 2, {}, 120, False),
                                     ("k3-grid", 3, {"max_exact": 20, "max_bins": 40}, 300, True),
                                     ("k5-exact", 5, {"exact": True}, 150, True), ("k50", 50, {}, 200, True)]:
        acc = sm.MulticlassScores(list(range(k)), **config)
        for batch in (False, True):
            out[f"{name}-{'batch' if batch else 'events'}"] = feed(acc.copy(), events(k, n, 7, whole=True, many=many),
                                                                   batch)
        out[f"{name}-unit"] = feed(acc.copy(), [(t, s, 1.0) for t, s, _ in events(k, n, 3, many=many)], True)
    rng = random.Random(5)
    mon = sm.MulticlassMonitor(list("abc"))
    for i, ((t, s), w) in enumerate(zip(rows(3, 150, 11), weights(rng, 150, whole=True))):
        e = Event(i, "m", y_true="abc"[t] if i % 4 else None, scores=tuple(s), weight=w)
        mon.update_prediction(e) if e.y_true is None else mon.update_event(e)
    out["monitor"] = mon
    return out


#: sha256 (first 16 hex digits) of the sorted-key JSON of each state, written by the code
#: before exact weight sums (commit 8502aaf): whole weights keep these bytes
GOLDEN = {
    "k3-events": "53765c694e5924f7", "k3-batch": "53765c694e5924f7", "k3-unit": "c298083c3658f09e",
    "k2-events": "60e3b73ac700ba39", "k2-batch": "60e3b73ac700ba39", "k2-unit": "339463bf0ab99686",
    "k3-grid-events": "2cfb29d6f43ae046", "k3-grid-batch": "2cfb29d6f43ae046", "k3-grid-unit": "da6513c1fa90b76d",
    "k5-exact-events": "fb42d82d7b3430c2", "k5-exact-batch": "fb42d82d7b3430c2", "k5-exact-unit": "14f72583a488a0da",
    "k50-events": "67168165def77368", "k50-batch": "67168165def77368", "k50-unit": "c50319a1aef08adf",
    "monitor": "660ebea1b92a09fd",
}


#: sums of squared weights, written for weights other than 1 since issue 26 (the rest keeps its bytes)
SQUARE_KEYS = ("weight_squares", "weight_squares_residue", "cells_squares", "cells_squares_residues")


def _without_squares(value):
    if isinstance(value, dict):
        return {k: _without_squares(v) for k, v in value.items() if k not in SQUARE_KEYS}
    if isinstance(value, list):
        return [_without_squares(v) for v in value]
    return value


def test_whole_weights_keep_their_former_bytes():
    states = whole_weight_states()
    got = {name: hashlib.sha256(json.dumps(_without_squares(acc.to_dict()), sort_keys=True).encode()).hexdigest()[:16]
           for name, acc in states.items()}
    assert got == GOLDEN
    for acc in states.values():
        text = state_bytes(acc)
        assert "residues" not in text and "prediction_weight_residue" not in text


def test_whole_weights_stay_in_float_mode():
    for acc in whole_weight_states().values():
        scores = acc.scores if isinstance(acc, sm.MulticlassMonitor) else acc
        assert not scores._units and all(type(w) is float for w in scores._weights)


# ------------------------------------------------------------------ any weights: order-free
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k,config,n,many", [
    (2, {}, 200, False), (3, {}, 300, False), (4, {"exact": True}, 200, True),
    # the budgeted regime: exact while small, then the log grid coarsened for both sets
    (3, {"max_exact": 10, "max_bins": 24}, 400, True), (4, {"max_exact": 30, "max_bins": 200}, 300, True),
    (5, {"bins": 4, "max_exact": 1, "max_bins": 1}, 200, True),
])
def test_any_weights_order_free(seed, k, config, n, many):
    check_splits(lambda: sm.MulticlassScores(list(range(k)), **config), events(k, n, seed, many=many), seed)


WEIGHTS = st.sampled_from([0.0, 1.0, 2.0, 0.1, 0.2, 0.3, 2.7, 1e-3, 5e-324, 1e10]) | st.floats(0, 10)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 5), seed=st.integers(0, 10**6),
       evs=st.lists(st.tuples(st.integers(0, 4), st.lists(st.sampled_from(SCORES), min_size=5, max_size=5), WEIGHTS),
                    min_size=1, max_size=40),
       config=st.sampled_from([{}, {"max_exact": 3, "max_bins": 6}, {"bins": 2, "max_exact": 1, "max_bins": 1},
                               {"exact": True}]))
def test_any_stream_order_free(k, seed, evs, config):
    evs = [(t % k, s[:k], w) for t, s, w in evs]
    check_splits(lambda: sm.MulticlassScores(list(range(k)), **config), evs, seed, rounds=2)


@pytest.mark.parametrize("k,config", [(20, {}), (50, {}), (50, {"max_exact": 100, "max_bins": 400})])
def test_many_classes_order_free(k, config):
    whole = check_splits(lambda: sm.MulticlassScores(list(range(k)), **config), events(k, 150, k, many=True), k,
                         rounds=2)
    assert whole._units


def test_residues_appear_only_where_needed():
    acc = sm.MulticlassScores(list("abc")).update("a", [0.5, 0.3, 0.2], 0.5)
    assert acc._units and "residues" not in state_bytes(acc)  # 0.5 is exact as a float
    acc.update("a", [0.5, 0.3, 0.2], 0.1).update("a", [0.5, 0.3, 0.2], 0.2)
    state = acc.to_dict()["state"]
    assert state["weights"][0] == value_of(units_of(0.5) + units_of(0.1) + units_of(0.2))
    assert {k for k in state if k.endswith("residues")} == {"weights_residues", "ranks_residues"}
    assert state["weights_residues"][0][0] == 0
    assert "residues" in state["cells"] and "residues" in state["histograms"]  # the packed sets' own


# ------------------------------------------------------------------ merges across modes
@pytest.mark.parametrize("config", [{}, {"max_exact": 10, "max_bins": 30}])
def test_merge_float_and_units_modes_in_both_orders(config):
    check_mode_merges(lambda: sm.MulticlassScores(list(range(3)), **config), events(3, 120, 1, whole=True, many=True),
                      events(3, 120, 2, many=True), feed)


def test_units_mode_with_unit_weights_and_empty_sides():
    acc = sm.MulticlassScores([0, 1, 2]).update(0, [0.2, 0.3, 0.5], 0.1)
    acc.update(1, [0.2, 0.3, 0.5]).update_many([2, 2], [[0.1, 0.1, 0.8], [0.2, 0.2, 0.6]])
    ref = sm.MulticlassScores([0, 1, 2]).update_many([0, 1, 2, 2], [[0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8],
                                                                    [0.2, 0.2, 0.6]], [0.1, 1, 1, 1])
    assert state_bytes(acc) == state_bytes(ref)
    assert state_bytes(acc + sm.MulticlassScores([0, 1, 2])) == state_bytes(sm.MulticlassScores([0, 1, 2]) + acc)
    assert acc.total_weight == value_of(units_of(0.1) + 3 * units_of(1.0))


def test_budget_moves_with_non_whole_weights():
    """Exact while small, then the grid (one-vs-rest kept from then on) in units mode."""
    acc = sm.MulticlassScores([0, 1, 2], max_exact=8, max_bins=20)
    evs = events(3, 200, 9, many=True)
    feed(acc, evs[:2], False)
    assert acc.exact and acc._units
    feed(acc, evs[2:], False)
    assert not acc.exact and acc._units
    assert all(type(v) is int for h in acc._hist_list() for v in h.weights.values())
    assert all(type(v) is int for pair in acc._ovr for h in pair for v in h.weights.values())
    assert acc.bins_per_octave < 64


# ------------------------------------------------------------------ malformed residues
def units_state(k: int = 3, **config) -> dict:
    """A state with residues in every container (tied scores: histogram sums of 0.1 and 0.2)."""
    evs = [(t, s, 0.1 if i % 2 else 0.2) for i, (t, s, _) in enumerate(events(k, 60, 4, many=False))]
    evs += events(k, 100, 5, many=True)
    return feed(sm.MulticlassScores(list(range(k)), **config), evs, False).to_dict()


#: where each residue lives: a state key, or the "residues" of a packed set
RESIDUES = {"weights_residues": ("weights_residues",), "ranks_residues": ("ranks_residues",),
            "binary_top1_residues": ("binary_top1_residues",), "cells": ("cells", "residues"),
            "histograms": ("histograms", "residues"), "ovr_histograms": ("ovr_histograms", "residues")}


def set_residue(state: dict, where: str, value) -> None:
    path = RESIDUES[where]
    target = state["state"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


@pytest.mark.parametrize("where", sorted(RESIDUES))
@pytest.mark.parametrize("bad", ["junk", [], [[0, "x"]], [[0, [[3, -60]]]], [[10**6, [[1, -1074]]]],
                                 [[1, [[1, -1074]]], [0, [[1, -1074]]]], [[0, [[1, -1074]]], [0, [[1, -1074]]]]])
def test_malformed_residues_are_refused(where, bad):
    k = 2 if where == "binary_top1_residues" else 3
    config = {"max_exact": 10, "max_bins": 30} if where == "ovr_histograms" else {}
    state = units_state(k, **config)
    path = RESIDUES[where]
    assert (state["state"][path[0]] if len(path) == 1 else state["state"][path[0]].get("residues")) is not None
    set_residue(state, where, bad)
    with pytest.raises(ValueError, match=path[0]):
        sm.from_dict(state)


@pytest.mark.parametrize("where", sorted(set(RESIDUES) - {"ovr_histograms"}))
def test_residue_of_an_exact_value_is_refused(where):
    """A residue on a whole-weight state: not the canonical expansion of its sum."""
    k = 2 if where == "binary_top1_residues" else 3
    acc = feed(sm.MulticlassScores(list(range(k))), events(k, 40, 1, whole=True), False)
    state = acc.to_dict()
    set_residue(state, where, [[0, [[1, -1074]]]])
    with pytest.raises(ValueError, match=RESIDUES[where][0]):
        sm.from_dict(state)


def test_non_canonical_residues_in_multilabel_packed_sets_are_refused():
    """MultilabelScores' packed sets (exact weight sums too) refuse a residue that is not a
    canonical pair ([1, -1074] has no normalised mantissa)."""
    state = units_state()
    assert "residues" in state["state"]["histograms"]
    ml = sm.MultilabelScores(["x", "y"]).update_many([[1, 0], [0, 1]], [[0.2, 0.7], [0.6, 0.1]]).to_dict()
    ml["state"]["histograms"]["residues"] = [[0, [[1, -1074]]]]
    with pytest.raises(ValueError, match="residues"):
        sm.from_dict(ml)


def test_a_valid_residue_round_trips_and_decodes_to_units():
    state = units_state()
    assert any(k.endswith("residues") for k in state["state"])
    back = sm.from_dict(copy.deepcopy(state))
    assert back._units and back.to_dict() == state
    # the same state without its residues: still units mode (non-whole floats), other bytes
    stripped = copy.deepcopy(state)
    stripped["state"] = {k: v for k, v in stripped["state"].items() if not k.endswith("residues")}
    for key in ("cells", "histograms"):
        del stripped["state"][key]["residues"]
    approx = sm.from_dict(stripped)
    assert approx._units and approx.to_dict() == stripped


# ------------------------------------------------------------------ scikit-learn parity
def sk_inputs(k: int, n: int, seed: int, kind: str):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)  # every class present
    s = rng.dirichlet(np.ones(k), n).round(3)
    s[:, 0] = 1.0 - s[:, 1:].sum(axis=1)
    s = np.clip(s, 0.0, 1.0)
    s = s / s.sum(axis=1, keepdims=True)
    w = {"tenth": np.full(n, 0.1), "random": rng.random(n) * 3, "mixed": rng.choice([0.1, 0.0, 1.0, 2.7], n)}[kind]
    return y, s, w


@pytest.mark.parametrize("kind", ["tenth", "random", "mixed"])
@pytest.mark.parametrize("k", [3, 5, 12])
@pytest.mark.parametrize("batch", [False, True])
def test_sklearn_parity_with_non_whole_weights(kind, k, batch):
    y, s, w = sk_inputs(k, 300, k, kind)
    classes = list(range(k))
    acc = sm.MulticlassScores(classes, exact=True)
    if batch:
        acc.update_many(y, s, w)
    else:
        for t, row, x in zip(y.tolist(), s.tolist(), w.tolist()):
            acc.update(t, row, x)
    assert acc._units
    tol = 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in ("macro", "weighted", "micro"):
            want = skm.roc_auc_score(y, s, multi_class="ovr", average=average, sample_weight=w, labels=classes) \
                if average != "micro" else skm.roc_auc_score(np.eye(k)[y], s, average="micro", sample_weight=w)
            assert acc.roc_auc("ovr", average) == pytest.approx(want, abs=tol)
        assert acc.roc_auc("ovr", None) == pytest.approx(
            skm.roc_auc_score(np.eye(k)[y], s, average=None, sample_weight=w), abs=tol)
        for average in ("macro", "weighted"):
            assert acc.roc_auc("ovo", average) == pytest.approx(weighted_ovo(y, s, w, average), abs=tol)
        assert acc.log_loss() == pytest.approx(skm.log_loss(y, s, sample_weight=w, labels=classes), rel=1e-12)
        for top in (1, 2, 3):
            assert acc.top_k_accuracy(top) == pytest.approx(
                skm.top_k_accuracy_score(y, s, k=top, sample_weight=w, labels=classes), abs=tol)
        assert acc.average_precision("macro") == pytest.approx(
            skm.average_precision_score(np.eye(k)[y], s, average="macro", sample_weight=w), abs=tol)
        cm = acc.confusion()
        want_cm = skm.confusion_matrix(y, s.argmax(axis=1), labels=classes, sample_weight=w)
        assert np.allclose(cm.matrix(classes), want_cm, rtol=0, atol=1e-12)


def test_ovo_with_uniform_tenths_equals_sklearn_unweighted():
    """scikit-learn's ovo refuses sample_weight; uniform weights 0.1 give the unweighted value."""
    y, s, w = sk_inputs(4, 200, 2, "tenth")
    acc = sm.MulticlassScores(list(range(4))).update_many(y, s, w)
    for average in ("macro", "weighted"):
        assert acc.roc_auc("ovo", average) == pytest.approx(
            skm.roc_auc_score(y, s, multi_class="ovo", average=average), abs=1e-12)


def test_two_classes_top1_with_non_whole_weights():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 200)
    p = rng.random(200).round(2)
    s = np.stack([1 - p, p], axis=1)
    w = rng.random(200)
    acc = sm.MulticlassScores([0, 1])
    for t, row, x in zip(y.tolist(), s.tolist(), w.tolist()):
        acc.update(t, row, x)
    want = skm.accuracy_score(y, (p > 0.5).astype(int), sample_weight=w)
    assert acc.top_k_accuracy(1) == pytest.approx(want, abs=1e-12)
    assert state_bytes(acc) == state_bytes(sm.MulticlassScores([0, 1]).update_many(y, s, w))


# ------------------------------------------------------------------ MulticlassMonitor
def monitor_events(n: int, seed: int, whole: bool = False) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for i, ((t, s), w) in enumerate(zip(rows(3, n, seed), weights(rng, n, whole))):
        out.append(Event(i, "m", y_true="abc"[t] if rng.random() < 0.7 else None, scores=tuple(s), weight=w))
    return out


def feed_monitor(mon, evs, batch: bool):
    if batch:
        mon.update_predictions([e for e in evs if e.y_true is None])
        return mon.update_events([e for e in evs if e.y_true is not None])
    for e in evs:
        mon.update_prediction(e) if e.y_true is None else mon.update_event(e)
    return mon


def test_monitor_merge_float_and_units_modes_in_both_orders():
    make = lambda: sm.MulticlassMonitor(list("abc"))  # noqa: E731
    whole_evs, any_evs = monitor_events(100, 1, whole=True), monitor_events(100, 2)
    a, b = feed_monitor(make(), whole_evs, False), feed_monitor(make(), any_evs, True)
    assert type(a._ptotal) is float and type(b._ptotal) is int
    want = feed_monitor(feed_monitor(make(), any_evs, False), whole_evs, True)
    own = ("count", "prediction_weight", "prediction_weight_residue", "predicted_weights", "predicted_weights_residues",
           "scores")  # (class_scores: ScoreDistribution's own exact sums, tested with it)
    for merged in (a + b, b + a):
        got, expected = merged.to_dict()["state"], want.to_dict()["state"]
        assert json.dumps([got.get(k) for k in own]) == json.dumps([expected.get(k) for k in own])
        snap, want_snap = merged.snapshot(), want.snapshot()
        assert json.dumps(snap["per_class"], sort_keys=True) == json.dumps(want_snap["per_class"], sort_keys=True)
        assert snap["total_weight"] == want_snap["total_weight"]
    assert type(a._ptotal) is float  # __add__ copies
    total = sum(units_of(e.weight) for e in whole_evs + any_evs)
    assert want.total_weight == value_of(total)
    state = want.to_dict()["state"]
    assert state["prediction_weight"] == value_of(total)
    assert "prediction_weight_residue" in state and "predicted_weights_residues" in state


def test_monitor_whole_weights_stay_floats():
    mon = feed_monitor(sm.MulticlassMonitor(list("abc")), monitor_events(80, 3, whole=True), True)
    assert type(mon._ptotal) is float and all(type(w) is float for w in mon._pweights)
    assert "residue" not in json.dumps(mon.to_dict()["state"]["prediction_weight"])


@pytest.mark.parametrize("key,bad", [
    ("prediction_weight_residue", "x"), ("prediction_weight_residue", [[3, -60]]),
    ("prediction_weight_residue", []), ("predicted_weights_residues", [[5, [[1, -1074]]]]),
    ("predicted_weights_residues", [[0, [[3, -60]]]]), ("predicted_weights_residues", {"0": 1}),
])
def test_monitor_malformed_residues_are_refused(key, bad):
    state = feed_monitor(sm.MulticlassMonitor(list("abc")), monitor_events(60, 4), False).to_dict()
    state["state"][key] = bad
    with pytest.raises(ValueError, match=key):
        sm.from_dict(state)


def test_monitor_decodes_units_when_one_sum_needs_it():
    mon = sm.MulticlassMonitor(list("abc"))
    mon.update_prediction(Event(0, "m", scores=(0.5, 0.3, 0.2), weight=0.25))
    mon.update_prediction(Event(1, "m", scores=(0.2, 0.3, 0.5), weight=0.75))
    state = mon.to_dict()
    assert state["state"]["prediction_weight"] == 1.0 and "prediction_weight_residue" not in state["state"]
    back = sm.from_dict(state)
    assert type(back._ptotal) is int and all(type(w) is int for w in back._pweights)
    assert back.predicted_weights == [0.25, 0.0, 0.75]


def test_reference_reads_monitor_predicted_weights_as_floats():
    from streammetrics.monitors.reference_multiclass import MulticlassReference, _predicted_shares

    rng = np.random.default_rng(0)
    s = rng.dirichlet(np.ones(3), 300)
    y = np.array([rng.choice(3, p=row) for row in s])
    ref = MulticlassReference.from_arrays(np.array(list("abc"))[y], s, rng.random(300), classes=list("abc"))
    evs = monitor_events(100, 6)
    mon = feed_monitor(sm.MulticlassMonitor(list("abc"), reference=ref), evs, False)
    assert type(mon._ptotal) is int
    out = ref.metrics(mon)
    assert out["estimated_accuracy"] is not None and out["drift_predicted_psi"] is not None
    # the monitor's predicted weights: exact sums, correctly rounded
    assert mon.predicted_weights == [value_of(sum(units_of(e.weight) for e in evs
                                                  if max(range(3), key=e.scores.__getitem__) == c)) for c in range(3)]
    labelled = [e for e in evs if e.y_true is not None]
    shares = _predicted_shares(mon.scores).tolist()
    assert shares == [value_of(sum(units_of(e.weight) for e in labelled
                                   if max(range(3), key=e.scores.__getitem__) == c)) for c in range(3)]


def test_units_mode_survives_pickle_copy_and_resets_to_float_mode():
    import pickle

    acc = feed(sm.MulticlassScores([0, 1, 2], max_exact=10, max_bins=30), events(3, 80, 8, many=True), False)
    assert acc._units and not acc.exact
    for other in (pickle.loads(pickle.dumps(acc)), copy.deepcopy(acc), acc.copy()):
        assert other._units and state_bytes(other) == state_bytes(acc)
        feed(other, events(3, 20, 9, whole=True), True)
        assert state_bytes(other) == state_bytes(feed(acc.copy(), events(3, 20, 9, whole=True), False))
    acc.reset()
    assert not acc._units and state_bytes(acc) == state_bytes(sm.MulticlassScores([0, 1, 2], max_exact=10,
                                                                                  max_bins=30))
    mon = feed_monitor(sm.MulticlassMonitor(list("abc")), monitor_events(30, 1), False)
    assert type(mon._ptotal) is int
    assert type(mon.copy()._ptotal) is int and type(mon.reset()._ptotal) is float
