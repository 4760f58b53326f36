"""Exact sums in MultilabelScores (kernels.exact_weights, kernels.exact_sum).

Summed weights (total, positive weights, the 2 L label histograms) are floats while every
weight is whole and exact units otherwise; the ``samples`` sums (``w * row_auc``,
``w * row_ap``) are exact sums of terms rounded once per row, identically on the per-event and
batch paths. So the state's JSON bytes depend only on the multiset of events; whole-weight
states keep their former bytes except the samples sums (golden digests below, computed with
the code before exact sums); residues are validated on decode."""
from __future__ import annotations

import copy
import hashlib
import json
import pickle
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from order_free import check_mode_merges, check_order_free, state_bytes
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.kernels.exact_sum import small_units
from streammetrics.kernels.exact_weights import units_of, value_of
from streammetrics.metrics.multilabel_scores import _row_stats, _row_stats_batch

SCORES = [0.0, 1.0, 0.5, 0.05, 0.1, 0.2, 0.3, 0.7, 0.9, 0.99]
SAMPLES = ("samples_roc_auc_sum", "samples_average_precision_sum", "samples_sums_residues")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # one-class labels and rows


def digest(acc, drop=()) -> str:
    d = acc.to_dict()
    d["state"] = {k: v for k, v in d["state"].items() if k not in drop}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def events(L: int, n: int, seed: int, whole: bool = False, many: bool = False) -> list[tuple]:
    """(indicator row, score row, weight); ``many``: distinct scores (the grid), else ties."""
    rng = random.Random(seed)
    pool = [lambda: 1.0, lambda: 0.1, lambda: 2.7, lambda: rng.random() * 3, lambda: float(rng.randint(0, 4)),
            lambda: rng.random() * 1e-3, lambda: 0.0]
    out = []
    for _ in range(n):
        truth = [int(rng.random() < 0.4) for _ in range(L)]
        scores = [round(rng.random(), 3) if many else rng.choice(SCORES) for _ in range(L)]
        w = float(rng.choice([0, 1, 1, 1, 2, 5])) if whole else rng.choice(pool)()
        out.append((truth, scores, w))
    return out


def feed(acc, evs, batch: bool):
    if batch:
        shape = (len(evs), len(acc.labels))
        return acc.update_many(np.array([e[0] for e in evs]).reshape(shape),
                               np.array([e[1] for e in evs], dtype=np.float64).reshape(shape), [e[2] for e in evs])
    for t, s, w in evs:
        acc.update(t, s, w)
    return acc


# ------------------------------------------------------------------ whole weights: former bytes
def whole_weight_states() -> dict[str, sm.MultilabelScores]:
    out = {}
    for name, L, config, n, many in [("L2", 2, {}, 200, False), ("L4", 4, {}, 200, False),
                                     ("L3-grid", 3, {"max_exact": 20, "max_bins": 40}, 300, True),
                                     ("L5-exact", 5, {"exact": True}, 150, True), ("L30", 30, {}, 100, True)]:
        acc = sm.MultilabelScores(L, **config)
        for batch in (False, True):
            out[f"{name}-{'batch' if batch else 'events'}"] = feed(acc.copy(), events(L, n, 7, whole=True, many=many),
                                                                   batch)
        out[f"{name}-unit"] = feed(acc.copy(), [(t, s, 1.0) for t, s, _ in events(L, n, 3, many=many)], True)
    return out


#: sha256 (first 16 hex digits) of the sorted-key JSON without the samples sums, written by
#: the code before exact sums (main at ab33373): whole weights keep these bytes
GOLDEN_WITHOUT_SAMPLES = {
    "L2-events": "6634d2bb660fbffe", "L2-batch": "6634d2bb660fbffe", "L2-unit": "6c3fff18a7dd8e1d",
    "L4-events": "2add86a798ea9fe1", "L4-batch": "2add86a798ea9fe1", "L4-unit": "fefcca7124d7e5c4",
    "L3-grid-events": "72b4128a482562c3", "L3-grid-batch": "72b4128a482562c3", "L3-grid-unit": "0fb688a1379b01e2",
    "L5-exact-events": "532e0e99eb1e04a8", "L5-exact-batch": "532e0e99eb1e04a8", "L5-exact-unit": "b50ece254b0bf734",
    "L30-events": "b17af4be3d7adf17", "L30-batch": "b17af4be3d7adf17", "L30-unit": "876daea7ad65db43",
}
#: the whole states (samples sums included) of two labels: every row term is a multiple of
#: 1/2 there, so the former float sums were exact and the bytes are unchanged too
GOLDEN_L2 = {"L2-events": "9d932a77eb46a8d3", "L2-batch": "9d932a77eb46a8d3", "L2-unit": "aed31ed981a184aa"}


def test_whole_weights_keep_their_former_bytes_but_the_samples_sums():
    states = whole_weight_states()
    assert {name: digest(acc, SAMPLES) for name, acc in states.items()} == GOLDEN_WITHOUT_SAMPLES
    assert {name: digest(states[name]) for name in GOLDEN_L2} == GOLDEN_L2
    for acc in states.values():
        state = acc.to_dict()["state"]
        assert "residues" not in json.dumps({k: v for k, v in state.items() if k not in SAMPLES})
        assert not acc._units and type(acc._total) is float and all(type(w) is float for w in acc._w_pos)


def test_samples_sums_are_the_correctly_rounded_exact_sums():
    """With unit weights the samples sums were order-dependent float sums (1/3, 2/3, ...):
    now the correctly rounded exact sum of the per-row values, with its residue."""
    evs = events(4, 300, 11, whole=True)
    acc = feed(sm.MultilabelScores(4), evs, False)
    auc, ap = [], []
    for t, s, w in evs:
        n_pos, n_neg, u2, row_ap = _row_stats([bool(v) for v in t], s)
        auc.append(w * (u2 / (2 * n_pos * n_neg)) if n_pos and n_neg else 0.0)
        ap.append(w * row_ap)
    state = acc.to_dict()["state"]
    exact = [small_units(auc), small_units(ap)]
    assert [state["samples_roc_auc_sum"], state["samples_average_precision_sum"]] == [value_of(u) for u in exact]
    assert state.get("samples_sums_residues") is not None
    back = sm.from_dict(acc.to_dict())
    assert back._samples.units() == exact


# ------------------------------------------------------------------ the per-row terms
@settings(max_examples=150, deadline=None)
@given(L=st.integers(1, 12), seed=st.integers(0, 10**6))
def test_per_event_and_batch_row_values_are_the_same_floats(L, seed):
    rng = random.Random(seed)
    n = 20
    T = np.array([[rng.random() < 0.5 for _ in range(L)] for _ in range(n)])
    pool = [rng.choice(SCORES + [rng.random()]) for _ in range(4)]
    S = np.array([[rng.choice(pool) if rng.random() < 0.5 else rng.random() for _ in range(L)] for _ in range(n)])
    P, N, U2, AP = _row_stats_batch(T, S)
    defined = (P > 0) & (N > 0)
    auc = np.zeros(n)
    auc[defined] = U2[defined] / (2 * P[defined] * N[defined])
    for i in range(n):
        n_pos, n_neg, u2, ap = _row_stats(T[i].tolist(), S[i].tolist())
        assert (n_pos, n_neg, u2) == (P[i], N[i], U2[i])
        assert ap.hex() == float(AP[i]).hex()
        if n_pos and n_neg:
            assert (u2 / (2 * n_pos * n_neg)).hex() == float(auc[i]).hex()


# ------------------------------------------------------------------ any weights: order-free
CONFIGS = [({}, False), ({"exact": True}, True),
           # the budgeted regime: exact while small, then the log grid coarsened together
           ({"max_exact": 10, "max_bins": 24}, True), ({"max_exact": 30, "max_bins": 200}, True),
           ({"bins": 4, "max_exact": 1, "max_bins": 1}, True)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("L", [2, 4])
@pytest.mark.parametrize("config,many", CONFIGS)
@pytest.mark.parametrize("whole", [False, True])
def test_any_weights_order_free(seed, L, config, many, whole):
    acc = check_order_free(lambda: sm.MultilabelScores(L, **config), events(L, 200, seed, whole, many), feed, seed)
    assert acc._units != whole
    if config.get("max_bins", 10**6) < 100:
        assert not acc.exact  # the grid was reached


@pytest.mark.parametrize("w", [0.1, 0.0, 3.0])
def test_constant_weights_order_free(w):
    evs = [(t, s, w) for t, s, _ in events(3, 150, 5, many=True)]
    acc = check_order_free(lambda: sm.MultilabelScores(3, max_exact=40, max_bins=60), evs, feed, 5)
    assert acc._units == (w == 0.1)


WEIGHTS = st.sampled_from([0.0, 1.0, 2.0, 0.1, 0.2, 0.3, 2.7, 1e-3, 5e-324, 1e10]) | st.floats(0, 10)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 5), seed=st.integers(0, 10**6),
       evs=st.lists(st.tuples(st.lists(st.booleans(), min_size=5, max_size=5),
                              st.lists(st.sampled_from(SCORES), min_size=5, max_size=5), WEIGHTS),
                    min_size=1, max_size=40),
       config=st.sampled_from([{}, {"max_exact": 3, "max_bins": 6}, {"bins": 2, "max_exact": 1, "max_bins": 1},
                               {"exact": True}]))
def test_any_stream_order_free(L, seed, evs, config):
    evs = [([int(v) for v in t[:L]], s[:L], w) for t, s, w in evs]
    check_order_free(lambda: sm.MultilabelScores(L, **config), evs, feed, seed, rounds=2)


def test_many_labels_order_free():
    acc = check_order_free(lambda: sm.MultilabelScores(30, max_exact=100, max_bins=400), events(30, 120, 1, many=True),
                           feed, 1, rounds=2)
    assert acc._units and not acc.exact


def test_residues_appear_only_where_needed():
    acc = sm.MultilabelScores(["x", "y"]).update([1, 0], [0.9, 0.2], 0.5)
    state = acc.to_dict()["state"]
    assert acc._units and not any(k.endswith(("residue", "residues")) for k in state)  # 0.5: exact
    assert "residues" not in state["histograms"]
    acc.update([1, 0], [0.9, 0.2], 0.1).update([1, 1], [0.9, 0.3], 0.2)
    state = acc.to_dict()["state"]
    assert state["total_weight"] == value_of(units_of(0.5) + units_of(0.1) + units_of(0.2))
    assert {k for k in state if k.endswith(("residue", "residues"))} == {
        "total_weight_residue", "positive_weights_residues", "samples_sums_residues"}
    assert state["positive_weights_residues"][0][0] == 0 and "residues" in state["histograms"]


# ------------------------------------------------------------------ merges across modes, copies
@pytest.mark.parametrize("config", [{}, {"max_exact": 10, "max_bins": 30}])
def test_merge_float_and_units_modes_in_both_orders(config):
    check_mode_merges(lambda: sm.MultilabelScores(3, **config), events(3, 120, 1, whole=True, many=True),
                      events(3, 120, 2, many=True), feed)


def test_units_mode_survives_copies_and_reset_returns_to_float_mode():
    acc = feed(sm.MultilabelScores(3), events(3, 50, 3), False)
    assert acc._units
    more = events(3, 40, 4, whole=True)
    want = state_bytes(feed(acc.copy(), more, False))
    for dup in (acc.copy(), copy.deepcopy(acc), copy.copy(acc), pickle.loads(pickle.dumps(acc))):
        assert dup._units and state_bytes(feed(dup, more, True)) == want
    acc.reset()
    assert not acc._units and type(acc._total) is float and acc._samples.units() == [0, 0]


def test_total_weight_bound_in_units_mode():
    acc = sm.MultilabelScores(2).update([1, 0], [0.5, 0.1], 0.1)
    before = state_bytes(acc)
    with pytest.raises(ValueError, match="total weight"):
        acc.update([1, 0], [0.5, 0.1], 1e300)
    with pytest.raises(ValueError, match="total weight"):
        acc.update_many([[1, 0], [0, 1]], [[0.5, 0.1], [0.2, 0.3]], [0.1, 1e300])
    assert state_bytes(acc) == before


# ------------------------------------------------------------------ malformed residues
def units_state(**config) -> dict:
    """A state with residues in every container (tied scores: histogram sums of 0.1 and 0.2)."""
    evs = [(t, s, 0.1 if i % 2 else 0.2) for i, (t, s, _) in enumerate(events(3, 60, 4))]
    evs += events(3, 100, 5, many=True)
    return feed(sm.MultilabelScores(3, **config), evs, False).to_dict()


#: where each residue lives: a state key, or the "residues" of the packed histograms
RESIDUES = {"total_weight_residue": ("total_weight_residue",),
            "positive_weights_residues": ("positive_weights_residues",),
            "samples_sums_residues": ("samples_sums_residues",), "histograms": ("histograms", "residues")}
SCALAR = {"total_weight_residue"}  # a residue (list of pairs), not [[index, residue], ...]


def set_residue(state: dict, where: str, value) -> None:
    path = RESIDUES[where]
    target = state["state"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


BAD_INDEXED = ["junk", [], [[0, "x"]], [[0, [[3, -60]]]], [[10**6, [[1, -1074]]]],
               [[1, [[1, -1074]]], [0, [[1, -1074]]]], [[0, [[1, -1074]]], [0, [[1, -1074]]]],
               [[0, [[4503599627370496, -52]]]]]  # a residue of 1.0: not below half an ulp
BAD_SCALAR = ["junk", [], [[3, -60]], [[1, -1074]], [[4503599627370496, -10]], [["a", 1]], [[1]]]


@pytest.mark.parametrize("where,bad", [(w, b) for w in sorted(RESIDUES) for b in
                                       (BAD_SCALAR if w in SCALAR else BAD_INDEXED)])
def test_malformed_residues_are_refused(where, bad):
    state = units_state()
    path = RESIDUES[where]
    assert (state["state"][path[0]] if len(path) == 1 else state["state"][path[0]].get("residues")) is not None
    set_residue(state, where, bad)
    with pytest.raises(ValueError, match=path[0]) as info:
        sm.from_dict(state)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("where", sorted(RESIDUES))
def test_residue_of_an_exact_value_is_refused(where):
    """A residue (1.0) on a whole-weight state: not the canonical expansion of the sum."""
    state = feed(sm.MultilabelScores(3), events(3, 40, 1, whole=True), False).to_dict()
    state["state"]["samples_sums_residues"] = None
    residue = [[4503599627370496, -52]] if where in SCALAR else [[0, [[4503599627370496, -52]]]]
    set_residue(state, where, residue)
    with pytest.raises(ValueError, match=RESIDUES[where][0]):
        sm.from_dict(state)


def test_samples_sums_beyond_the_total_weight_are_refused():
    state = units_state()
    state["state"]["samples_average_precision_sum"] = state["state"]["total_weight"] * 2
    with pytest.raises(ValueError, match="samples_average_precision_sum"):
        sm.from_dict(state)


def test_a_valid_residue_round_trips_and_decodes_to_units():
    state = units_state()
    back = sm.from_dict(copy.deepcopy(state))
    assert back._units and back.to_dict() == state
    # the same state without its residues: still units mode (non-whole floats), other bytes
    stripped = copy.deepcopy(state)
    stripped["state"] = {k: v for k, v in stripped["state"].items() if not k.endswith(("residue", "residues"))}
    del stripped["state"]["histograms"]["residues"]
    approx = sm.from_dict(stripped)
    assert approx._units and approx.to_dict() == stripped


def test_old_states_without_residue_keys_load():
    """States written before exact sums (no residue keys, float samples sums) load as exact."""
    state = feed(sm.MultilabelScores(3), events(3, 80, 2, whole=True), False).to_dict()
    state["state"].pop("samples_sums_residues", None)
    state["state"]["samples_roc_auc_sum"] = 12.345
    back = sm.from_dict(state)
    assert back.to_dict() == state and not back._units


# ------------------------------------------------------------------ scikit-learn parity
def sk_inputs(L: int, n: int, seed: int, kind: str):
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, L)) < 0.4).astype(int)
    Y[0], Y[1] = 1, 0  # every label present and absent
    S = rng.random((n, L)).round(2)
    w = {"tenth": np.full(n, 0.1), "random": rng.random(n) * 3, "mixed": rng.choice([0.1, 0.0, 1.0, 2.7], n)}[kind]
    return Y, S, w


@pytest.mark.parametrize("kind", ["tenth", "random", "mixed"])
@pytest.mark.parametrize("L", [2, 5])
@pytest.mark.parametrize("batch", [False, True])
def test_sklearn_parity_with_non_whole_weights(kind, L, batch):
    Y, S, w = sk_inputs(L, 300, L, kind)
    acc = sm.MultilabelScores(L, exact=True)
    if batch:
        acc.update_many(Y, S, w)
    else:
        for t, row, x in zip(Y.tolist(), S.tolist(), w.tolist()):
            acc.update(t, row, x)
    assert acc._units
    tol = 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # samples: scikit-learn's per-row scores need both classes in every row there
        keep = (Y.sum(axis=1) > 0) & (Y.sum(axis=1) < L)
        for average in ("micro", "macro", "weighted", None):
            assert np.allclose(acc.roc_auc(average), skm.roc_auc_score(Y, S, average=average, sample_weight=w),
                               rtol=0, atol=tol)
            assert np.allclose(acc.average_precision(average),
                               skm.average_precision_score(Y, S, average=average, sample_weight=w), rtol=0, atol=tol)
        rows = sm.MultilabelScores(L).update_many(Y[keep], S[keep], w[keep])
        assert rows.roc_auc("samples") == pytest.approx(
            skm.roc_auc_score(Y[keep], S[keep], average="samples", sample_weight=w[keep]), abs=tol)
        assert acc.average_precision("samples") == pytest.approx(
            skm.average_precision_score(Y, S, average="samples", sample_weight=w), abs=tol)
