"""Exact weight sums in ConfusionMatrix and LabelMonitor: residue keys (``cells_residues``,
``weight_residues``) validated on decode, whole-number weights keeping the bytes written
before exact sums, merges of a whole-float state with a units state in both orders, exact
``remove``, and scikit-learn parity with weights such as 0.1 and random floats."""
from __future__ import annotations

import copy
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_weights import UNIT, units_of, value_of


def _label_events(rows):
    return [Event(i, "m", y_true=t, y_pred=p, weight=w) for i, (t, p, w) in enumerate(rows)]


def _feed_labels(mon: sm.LabelMonitor, events) -> sm.LabelMonitor:
    for e in events:
        if e.y_true is None:
            mon.update_prediction(e)
        else:
            mon.update_event(e)
    return mon


# ----------------------------------------------------------- whole weights: today's bytes
# written by main before exact sums (commit 8502aaf), json.dumps without sort_keys
CM_BEFORE = ('{"type": "ConfusionMatrix", "version": 1, "config": {"labels": null}, "state": {"unit_weights": false, '
             '"count": 8, "total_weight": 19.0, "cells": [["a", "a", 1.0], ["a", "b", 6.0], ["b", "b", 1.0], '
             '["c", "a", 10.0], ["c", "c", 1.0]]}}')
LM_BEFORE = ('{"type": "LabelMonitor", "version": 2, "config": {"labels": null}, "state": {"count": 5, '
             '"prediction_weight": 9.0, "predicted_labels": [["x", 2.0], ["y", 2.0], ["z", 5.0]], "confusion": '
             '{"type": "ConfusionMatrix", "version": 1, "config": {"labels": null}, "state": {"unit_weights": false, '
             '"count": 3, "total_weight": 3.0, "cells": [["x", "x", 1.0], ["x", "y", 2.0], ["y", "y", 0.0]]}}}}')
LM_SNAPSHOT_BEFORE = (
    '{"count": 5, "total_weight": 9.0, "accuracy": 0.3333333333333333, "balanced_accuracy": 0.3333333333333333, '
    '"macro_precision": 0.5, "macro_recall": 0.3333333333333333, "macro_f1": 0.25, "weighted_f1": 0.5, '
    '"matthews_corrcoef": 0.0, "cohen_kappa": 0.0, "per_class": {"x": {"precision": 1.0, "recall": '
    '0.3333333333333333, "f1": 0.5, "support": 3.0, "predicted_rate": 0.2222222222222222}, "y": {"precision": 0.0, '
    '"recall": null, "f1": 0.0, "support": 0.0, "predicted_rate": 0.2222222222222222}, "z": {"predicted_rate": '
    '0.5555555555555556}}}')
LM_ROWS = [("x", "x", 1.0), ("x", "y", 2.0), (None, "z", 5.0), ("y", "y", 0.0), (None, "x", 1.0)]


def _without_squares(value):
    if isinstance(value, dict):
        return {k: _without_squares(v) for k, v in value.items()
                if k not in ("cells_squares", "cells_squares_residues")}
    return value


def test_whole_weights_keep_their_bytes():
    cm = sm.ConfusionMatrix()
    for t, p, w in [("a", "a", 1.0), ("a", "b", 2.0), ("b", "b", 0.0), ("c", "a", 3.0), ("b", "b", 1.0)]:
        cm.update(t, p, w)
    cm.update_many(np.array(["a", "c", "c"]), np.array(["b", "c", "a"]), np.array([4.0, 1.0, 7.0]))
    # (weights other than 1 write their sums of squared weights since issue 26: the rest keeps its bytes)
    assert "cells_squares" in json.dumps(cm.to_dict())
    assert json.dumps(_without_squares(cm.to_dict())) == CM_BEFORE
    assert not cm._exact
    assert json.dumps(sm.from_dict(json.loads(CM_BEFORE)).to_dict()) == CM_BEFORE

    mon = _feed_labels(sm.LabelMonitor(), _label_events(LM_ROWS))
    assert json.dumps(_without_squares(mon.to_dict())) == LM_BEFORE
    assert json.dumps(mon.snapshot()) == LM_SNAPSHOT_BEFORE
    back = sm.from_dict(json.loads(LM_BEFORE))
    assert json.dumps(back.to_dict()) == LM_BEFORE and json.dumps(back.snapshot()) == LM_SNAPSHOT_BEFORE


# ------------------------------------------------------------------ residues on decode
def _cm_with_residues() -> dict:
    cm = sm.ConfusionMatrix().update("a", "a", 0.1).update("a", "a", 0.2).update("a", "b").update("b", "b", 2.0)
    data = cm.to_dict()
    assert data["state"]["cells"][0] == ["a", "a", 0.30000000000000004]
    assert data["state"]["cells_residues"] == [[0, [[-4503599627370496, -107]]]]
    return data


def _lm_with_residues() -> dict:
    mon = _feed_labels(sm.LabelMonitor(), _label_events([("x", "x", 0.1), ("x", "x", 0.2), (None, "y", 1.0)]))
    data = mon.to_dict()
    assert data["state"]["weight_residues"] == [[0, [[-4503599627370496, -107]]], [1, [[-4503599627370496, -107]]]]
    return data


BAD_RESIDUES = [
    "x",  # not a list
    [],  # empty: must be omitted instead
    [[9, [[1, -60]]]],  # index beyond the values
    [[0, [[3, -60]]]],  # not the canonical expansion of the sum
    [[0, [[1, 0]]]],  # a residue larger than the float
    [[0, [[-4503599627370496, -107]]], [0, [[-4503599627370496, -107]]]],  # repeated index
    [[0, "r"]],  # residue not a list of pairs
    [["0", [[-4503599627370496, -107]]]],  # index not an int
    [[0, [[-4503599627370496, -107]], 5]],  # not [index, residue]
    {"0": 1},
]


@pytest.mark.parametrize("bad", BAD_RESIDUES)
@pytest.mark.parametrize("which", ["cm", "labels"])
def test_malformed_residues_are_a_one_line_error_naming_the_key(bad, which):
    data = _cm_with_residues() if which == "cm" else _lm_with_residues()
    key = "cells_residues" if which == "cm" else "weight_residues"
    data["state"][key] = bad
    with pytest.raises(ValueError, match=key) as info:
        sm.from_dict(data)
    assert "\n" not in str(info.value)


def test_residues_are_refused_where_they_cannot_apply():
    data = _cm_with_residues()
    ok = copy.deepcopy(data)
    assert sm.from_dict(ok).to_dict() == data
    # a residue on a whole cell of unit-weight events (unit_weights=True)
    unit = sm.ConfusionMatrix().update("a", "a").to_dict()
    unit["state"]["cells_residues"] = [[0, [[4503599627370496, -112]]]]  # + 2**-60
    with pytest.raises(ValueError, match="unit_weights"):
        sm.from_dict(unit)
    # a residue on a cell that is then not its state's total_weight
    data["state"]["cells_residues"] = [[1, [[4503599627370496, -112]]]]
    with pytest.raises(ValueError, match="total_weight"):  # written as 0.3 + 1 + 2: not this total
        sm.from_dict(copy.deepcopy(data))
    exact_total = units_of(0.30000000000000004) + units_of(1.0) + units_of(2.0**-60) + units_of(2.0)
    assert value_of(exact_total) != data["state"]["total_weight"]
    data["state"]["total_weight"] = value_of(exact_total)
    state = sm.from_dict(data).to_dict()["state"]  # (a, b) = 1 + 2**-60: a valid (if odd) exact cell
    assert state["cells_residues"] == [[1, [[4503599627370496, -112]]]]
    assert state["cells"][0] == ["a", "a", 0.30000000000000004]


def test_residue_free_non_whole_state_decodes_to_units():
    """A state written before exact sums (non-whole cells, no residues) loads in units."""
    cm = sm.ConfusionMatrix().update("a", "a", 0.5).update("a", "b", 0.25)
    back = sm.from_dict(cm.to_dict())
    assert back._exact and back == cm and back.to_dict() == cm.to_dict()
    assert "cells_residues" not in cm.to_dict()["state"]


# ------------------------------------------------------------------ merges of two modes
def _cm_parts():
    whole = sm.ConfusionMatrix().update("a", "a", 2.0).update("b", "a").update_many(["a", "b"], ["b", "b"], [3.0, 0.0])
    frac = sm.ConfusionMatrix().update("a", "a", 0.1).update("b", "b", 0.7).update_many(["a", "a"], ["a", "b"],
                                                                                           [0.2, 2.5])
    one = sm.ConfusionMatrix()
    for t, p, w in [("a", "a", 2.0), ("b", "a", 1.0), ("a", "b", 3.0), ("b", "b", 0.0), ("a", "a", 0.1),
                    ("b", "b", 0.7), ("a", "a", 0.2), ("a", "b", 2.5)]:
        one.update(t, p, w)
    return whole, frac, one


def test_merge_of_a_float_mode_and_a_units_mode_matrix_in_both_orders():
    whole, frac, one = _cm_parts()
    assert not whole._exact and frac._exact
    before = (json.dumps(whole.to_dict()), json.dumps(frac.to_dict()))
    ab, ba = whole + frac, frac + whole
    assert json.dumps(ab.to_dict()) == json.dumps(ba.to_dict()) == json.dumps(one.to_dict())
    assert ab._exact and ba._exact and ab == one
    assert (json.dumps(whole.to_dict()), json.dumps(frac.to_dict())) == before  # operands untouched
    in_place = whole.copy().merge(frac)
    assert in_place == one and json.dumps(frac.to_dict()) == before[1]
    # the cell (a, a): 2.0 + 0.1 + 0.2 exactly, correctly rounded
    assert one.counts()[("a", "a")] == value_of(2 * UNIT + units_of(0.1) + units_of(0.2)) == 2.3  # not (2 + .1) + .2
    assert one.total_weight == value_of(sum(units_of(w) for w in (2.0, 1.0, 3.0, 0.0, 0.1, 0.7, 0.2, 2.5)))


def test_label_monitor_merge_of_both_modes_in_both_orders():
    rows = [("x", "x", 2.0), (None, "y", 1.0), ("y", "x", 3.0), ("x", "x", 0.1), (None, "z", 0.7),
            ("y", "y", 0.2)]
    events = _label_events(rows)
    whole, frac = _feed_labels(sm.LabelMonitor(), events[:3]), _feed_labels(sm.LabelMonitor(), events[3:])
    one = _feed_labels(sm.LabelMonitor(), events)
    assert whole._ptotal.__class__ is float and frac._ptotal.__class__ is int
    before = json.dumps(whole.to_dict())
    for merged in (whole + frac, frac + whole):
        assert json.dumps(merged.to_dict()) == json.dumps(one.to_dict())
        assert json.dumps(merged.snapshot()) == json.dumps(one.snapshot())
    assert json.dumps(whole.to_dict()) == before
    assert one.total_weight == value_of(sum(units_of(w) for _, _, w in rows))


def test_batch_with_whole_weights_after_units_stays_exact():
    cm = sm.ConfusionMatrix().update(0, 1, 0.1)
    cm.update_many([0, 0, 1], [1, 1, 1], [2.0, 0.2, 1.0])
    want = sm.ConfusionMatrix()
    for t, p, w in [(0, 1, 0.2), (1, 1, 1.0), (0, 1, 2.0), (0, 1, 0.1)]:
        want.update(t, p, w)
    assert json.dumps(cm.to_dict()) == json.dumps(want.to_dict())


# ------------------------------------------------------------------------ exact remove
def test_remove_is_exact_with_fractional_weights():
    base = sm.ConfusionMatrix().update("a", "a", 0.1).update("a", "b", 0.3).update("a", "a")
    cm = base.copy().update("a", "a", 0.2).update("a", "b", 2.0)
    cm.remove("a", "a", 0.2).remove("a", "b", 2.0)
    assert json.dumps(cm.to_dict()) == json.dumps(base.to_dict())
    cm.remove("a", "b", 0.3)
    assert ("a", "b") not in cm.counts()  # exactly 0: the cell goes
    cm.remove("a", "a", 0.1)
    assert cm.to_dict() == sm.ConfusionMatrix().update("a", "a").to_dict() and not cm._exact
    with pytest.raises(ValueError, match="never added"):
        sm.ConfusionMatrix().update("a", "a", 2.0).remove("a", "a", 2.5)


def test_from_counts_takes_exact_units():
    units = {("a", "a"): units_of(0.1) + units_of(0.2), ("a", "b"): 3 * UNIT}
    cm = sm.ConfusionMatrix._from_counts(None, units, 5, units=True)
    state = cm.to_dict()["state"]
    assert state["cells"] == [["a", "a", 0.30000000000000004], ["a", "b", 3.0]]
    assert state["cells_residues"] == [[0, [[-4503599627370496, -107]]]]
    floats = sm.ConfusionMatrix._from_counts(None, {("a", "b"): 3.0}, 3)
    assert floats.to_dict()["state"]["unit_weights"] is True
    with pytest.raises(ValueError, match="units"):
        sm.ConfusionMatrix._from_counts(None, {("a", "a"): 0.5}, 1, units=True)


# --------------------------------------------------------------- scikit-learn parity
WEIGHTS = st.sampled_from([0.1, 0.0, 1.0, 2.0, 0.3, 2.7]) | st.floats(0.0, 10.0, allow_nan=False)


@st.composite
def weighted_streams(draw):
    n = draw(st.integers(1, 40))
    used = draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=4, unique=True))
    y_true = draw(st.lists(st.sampled_from(used), min_size=n, max_size=n))
    y_pred = draw(st.lists(st.sampled_from(used), min_size=n, max_size=n))
    weights = draw(st.lists(WEIGHTS, min_size=n, max_size=n))
    return y_true, y_pred, weights


def _close(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return math.isnan(got)
    return abs(got - want) <= 1e-12


@settings(max_examples=150, deadline=None)
@given(weighted_streams(), st.data())
def test_metrics_match_sklearn_with_any_weights(stream, data):
    y_true, y_pred, w = stream
    n = len(y_true)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    parts = []
    for lo, hi in zip([0, *cuts], [*cuts, n]):
        acc = sm.ConfusionMatrix()
        if data.draw(st.booleans(), label="per event"):
            for i in range(lo, hi):
                acc.update(y_true[i], y_pred[i], w[i])
        else:
            acc.update_many(np.array(y_true[lo:hi]), np.array(y_pred[lo:hi]), np.array(w[lo:hi]))
        parts.append(acc)
    order = data.draw(st.permutations(range(len(parts))), label="merge order")
    cm = sm.ConfusionMatrix()
    for i in order:
        cm.merge(parts[i])
    if sum(w) == 0:  # scikit-learn refuses all-zero weights
        assert cm.total_weight == 0.0 and cm.count == n
        return
    labels = sorted(set(y_true) | set(y_pred))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(cm.matrix(labels), skm.confusion_matrix(y_true, y_pred, labels=labels,
                                                                           sample_weight=w), rtol=1e-12, atol=1e-12)
    checks = [
        (cm.accuracy, lambda: skm.accuracy_score(y_true, y_pred, sample_weight=w)),
        (lambda: cm.accuracy(normalize=False), lambda: skm.accuracy_score(y_true, y_pred, normalize=False,
                                                                          sample_weight=w)),
        (cm.balanced_accuracy, lambda: skm.balanced_accuracy_score(y_true, y_pred, sample_weight=w)),
        (cm.matthews_corrcoef, lambda: skm.matthews_corrcoef(y_true, y_pred, sample_weight=w)),
        (cm.cohen_kappa, lambda: skm.cohen_kappa_score(y_true, y_pred, sample_weight=w)),
    ]
    for average in ("micro", "macro", "weighted"):
        for ours, theirs in (("precision", "precision_score"), ("recall", "recall_score"), ("f1", "f1_score"),
                             ("jaccard", "jaccard_score")):
            checks.append((lambda o=ours, a=average: getattr(cm, o)(average=a, zero_division=0),
                           lambda t=theirs, a=average: getattr(skm, t)(y_true, y_pred, average=a, zero_division=0,
                                                                       sample_weight=w)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ours, theirs in checks:
            assert _close(float(ours()), float(theirs())), (ours, theirs)


# ------------------------------------------------------------------ MultilabelConfusion
ML_BEFORE = ('{"type": "MultilabelConfusion", "version": 1, "config": {"labels": ["a", "b", "c"]}, "state": '
             '{"count": 5, "total_weight": 7.0, "tp": [5.0, 1.0, 1.0], "pred": [5.0, 3.0, 1.0], '
             '"true": [5.0, 1.0, 4.0], '
             '"subset_correct": 4.0, "wrong_labels": 5.0, "samples": [[1, 1, 1, 4.0, 0], [1, 2, 1, 1.0, 0], '
             '[1, 2, 2, 2.0, 0], [2, 2, 2, 0.0, 1]]}}')


def test_multilabel_whole_weights_keep_their_bytes():
    m = sm.MultilabelConfusion(["a", "b", "c"])
    m.update([1, 0, 1], [1, 1, 0], 2.0).update([0, 0, 1], [0, 0, 1]).update([1, 1, 0], [1, 1, 0], 0.0)
    m.update_many([[1, 0, 0], [0, 1, 1]], [[1, 0, 0], [0, 1, 0]], [3.0, 1.0])
    assert json.dumps(m.to_dict()) == ML_BEFORE and not m._exact
    assert json.dumps(sm.from_dict(json.loads(ML_BEFORE)).to_dict()) == ML_BEFORE


def _ml_events(seed: int, n: int):
    rng = np.random.default_rng(seed)
    T = (rng.random((n, 3)) < 0.5).astype(int)
    P = np.where(rng.random((n, 3)) < 0.7, T, 1 - T)
    pool = np.array([1.0, 0.1, 2.7, 0.0, 3.0, 0.3])
    w = np.where(rng.random(n) < 0.5, pool[rng.integers(0, len(pool), n)], rng.random(n) * 3)
    return T, P, w


@pytest.mark.parametrize("seed", range(3))
def test_multilabel_state_is_order_free_with_any_weights(seed):
    T, P, w = _ml_events(seed, 200)
    one = sm.MultilabelConfusion(3)
    for t, p, x in zip(T.tolist(), P.tolist(), w.tolist()):
        one.update(t, p, x)
    want = json.dumps(one.to_dict())
    assert one._exact and "weight_residues" in one.to_dict()["state"]
    assert json.dumps(sm.MultilabelConfusion(3).update_many(T, P, w).to_dict()) == want
    rng = np.random.default_rng(seed + 100)
    order = rng.permutation(len(w))
    parts = []
    for chunk in np.array_split(order, 4):
        acc = sm.MultilabelConfusion(3)
        if rng.random() < 0.5:
            acc.update_many(T[chunk], P[chunk], w[chunk])
        else:
            for i in chunk.tolist():
                acc.update(T[i].tolist(), P[i].tolist(), float(w[i]))
        parts.append(acc)
    merged = parts[3] + parts[1]
    merged = (parts[2] + merged) + parts[0]
    assert json.dumps(merged.to_dict()) == want
    back = sm.from_dict(json.loads(want))
    assert json.dumps(back.to_dict()) == want and back == one
    whole = sm.MultilabelConfusion(3).update_many(T, P, np.round(w))  # a float-mode part
    assert not whole._exact
    assert json.dumps((whole + one).to_dict()) == json.dumps((one + whole).to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in ("micro", "macro", "weighted", "samples"):
            assert _close(one.f1(average=average, zero_division=0),
                          skm.f1_score(T, P, average=average, zero_division=0, sample_weight=w))
            assert _close(one.jaccard(average=average, zero_division=0),
                          skm.jaccard_score(T, P, average=average, zero_division=0, sample_weight=w))
        assert _close(one.accuracy(), skm.accuracy_score(T, P, sample_weight=w))
        assert _close(one.hamming_loss(), skm.hamming_loss(T, P, sample_weight=w))


@pytest.mark.parametrize("bad", BAD_RESIDUES)
def test_multilabel_malformed_residues_name_the_key(bad):
    m = sm.MultilabelConfusion(2).update([1, 0], [1, 1], 0.1).update([1, 0], [1, 0], 0.2)
    data = m.to_dict()
    assert data["state"]["weight_residues"]
    data["state"]["weight_residues"] = bad
    with pytest.raises(ValueError, match="weight_residues") as info:
        sm.from_dict(data)
    assert "\n" not in str(info.value)
