"""MulticlassMonitor's CBPE estimate sums are exact (contract section 1): per event, in
batches, split and merged in any order, or through a dict round trip, a stream gives the same
``to_dict()`` bytes and the same snapshot; the estimate's optional ``residues`` key is
validated on decode and old dicts without it load."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.core.accumulator import from_dict
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_sum import BUFFER
from streammetrics.monitors import MulticlassMonitor
from streammetrics.monitors.reference_multiclass import MulticlassReference, estimate_terms

CLASSES = ["a", "b", "c", "d"]
L = np.array(CLASSES)


def _reference(exact: bool) -> MulticlassReference:
    rng = np.random.default_rng(5)
    y = rng.integers(0, 4, 800)
    s = rng.dirichlet([1, 1, 1, 1], 800)
    s[np.arange(800), y] += 0.4  # informative scores: calibration maps with many knots
    s /= s.sum(axis=1, keepdims=True)
    return MulticlassReference.from_arrays(L[y], s, classes=CLASSES, exact=exact)


REFS = {True: _reference(True), False: _reference(False)}

score_st = st.one_of(st.floats(0.0, 1.0, allow_subnormal=False), st.sampled_from([0.0, 0.25, 0.5, 1.0]))
weight_st = st.one_of(st.just(1.0), st.sampled_from([0.0, 2.0, 3.0]), st.floats(0.01, 50.0, allow_subnormal=False))


def _events(rows: list, weights: list, labelled: bool) -> list[Event]:
    return [Event(float(i), "m", y_true=CLASSES[i % 4] if labelled else None, scores=tuple(r), weight=w)
            for i, (r, w) in enumerate(zip(rows, weights))]


def _feed(m: MulticlassMonitor, evs: list[Event], labelled: bool, batch: bool) -> MulticlassMonitor:
    if batch:
        return m.update_events(evs) if labelled else m.update_predictions(evs)
    for e in evs:
        m.update_event(e) if labelled else m.update_prediction(e)
    return m


def _bytes(m: MulticlassMonitor) -> bytes:
    return json.dumps(m.to_dict(), sort_keys=True).encode()


def _view(m: MulticlassMonitor, ref: MulticlassReference) -> str:
    """The snapshot and the estimated metrics, as JSON text (nan compares as text)."""
    return json.dumps([m.snapshot(), ref.metrics(m), ref.monitor_intervals(m)], sort_keys=True)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 60).flatmap(lambda n: st.tuples(
    st.lists(st.lists(score_st, min_size=4, max_size=4), min_size=n, max_size=n),
    st.lists(weight_st, min_size=n, max_size=n))), st.booleans(), st.booleans(), st.data())
def test_any_split_order_batching_or_round_trip_gives_the_same_bytes(data, labelled, exact, draw):
    rows, weights = data
    if draw.draw(st.booleans()):
        weights = [1.0] * len(rows)  # unit weights: the terms are still not whole
    ref = REFS[exact]
    evs = _events(rows, weights, labelled)
    per_event = _feed(MulticlassMonitor(CLASSES, reference=ref), evs, labelled, batch=False)
    batch = _feed(MulticlassMonitor(CLASSES, reference=ref), evs, labelled, batch=True)
    want, view = _bytes(per_event), _view(per_event, ref)
    assert _bytes(batch) == want and _view(batch, ref) == view
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(evs)), max_size=4)))
    parts = []
    for lo, hi in zip([0, *cuts], [*cuts, len(evs)]):
        m = _feed(MulticlassMonitor(CLASSES, reference=ref), evs[lo:hi], labelled, draw.draw(st.booleans()))
        if draw.draw(st.booleans()):  # through a dict (JSON text) and bound again
            m = from_dict(json.loads(json.dumps(m.to_dict()))).bind(ref)
        parts.append(m)
    merged = MulticlassMonitor(CLASSES, reference=ref)
    for i in draw.draw(st.permutations(range(len(parts)))):
        merged.merge(parts[i])
    assert _bytes(merged) == want and _view(merged, ref) == view
    restored = from_dict(json.loads(want))
    assert _bytes(restored) == want and restored == per_event
    if evs:  # a restored state continues exactly (its residues are kept)
        more = _feed(restored.bind(ref), evs, labelled, batch=True)
        twice = _feed(MulticlassMonitor(CLASSES, reference=ref), evs + evs, labelled, batch=False)
        assert _bytes(more) == _bytes(twice)


def test_buffered_rows_fold_at_the_buffer_and_in_large_batches():
    """Past BUFFER rows per event, and batches past the small-fold size: same bytes."""
    rng = np.random.default_rng(3)
    n = BUFFER + 300
    rows = rng.dirichlet([1, 2, 1, 1], n).tolist()
    weights = rng.choice([1.0, 0.3, 2.7], n).tolist()
    evs = _events(rows, weights, labelled=False)
    ref = REFS[False]
    per_event = _feed(MulticlassMonitor(CLASSES, reference=ref), evs, False, batch=False)
    batch = _feed(MulticlassMonitor(CLASSES, reference=ref), evs, False, batch=True)
    chunks = MulticlassMonitor(CLASSES, reference=ref)
    for lo in range(n - 100, -1, -100):  # batches of 100 rows, last first
        chunks.merge(_feed(MulticlassMonitor(CLASSES, reference=ref), evs[lo:lo + 100], False, batch=True))
    chunks.merge(_feed(MulticlassMonitor(CLASSES, reference=ref), evs[: n % 100], False, batch=False))
    assert _bytes(per_event) == _bytes(batch) == _bytes(chunks)
    assert per_event._estimate[1] == n and "residues" in per_event.to_dict()["state"]["estimate"]


def test_estimates_match_the_normalised_formula():
    """The exact sums read as the correctly rounded sums of ``w * p_c`` (``p`` normalised
    np.interp calibration), so the estimates agree with the array estimate."""
    rng = np.random.default_rng(4)
    s = rng.dirichlet([3, 1, 1, 1], 500)
    w = rng.choice([0.0, 0.5, 1.0, 2.5], 500)
    ref = REFS[True]
    m = _feed(MulticlassMonitor(CLASSES, reference=ref), _events(s.tolist(), w.tolist(), False), False, batch=False)
    got, want = ref.metrics(m), ref.estimate(s, w)
    for name in ("estimated_accuracy", "estimated_macro_f1"):
        assert got[name] == pytest.approx(want[name], rel=1e-13)
    terms = estimate_terms(ref.calibrated_matrix(s), w)
    assert [x.value for x in m._estimate[3]] == [math.fsum(c) for c in terms.T.tolist()]


@settings(max_examples=100, deadline=None)
@given(st.lists(score_st, min_size=4, max_size=4), st.booleans())
def test_calibrated_matrix_is_the_per_event_calibration(row, exact):
    """The batch calibration takes the per-event arithmetic, bit for bit (and np.interp's)."""
    ref = REFS[exact]
    got = ref.calibrated_matrix(np.array([row])).tolist()[0]
    assert got == ref._calibrate_row(row)
    cal = ref.calibrated(np.array([row]))[0]
    total = sum(got)
    assert (np.array(got) / total if total else np.full(4, 0.25)) == pytest.approx(cal, abs=1e-15)


def test_uniform_rows_and_zero_weights():
    assert estimate_terms(np.zeros((1, 4)), np.array([2.0])).tolist() == [[0.5, 0.5, 0.5, 0.5]]  # w / K each
    assert estimate_terms(np.ones((2, 4)), np.zeros(2)).tolist() == [[0.0] * 4] * 2


def _estimate_dict(weights: list) -> dict:
    rows = np.random.default_rng(6).dirichlet([1, 1, 1, 1], len(weights)).tolist()
    m = _feed(MulticlassMonitor(CLASSES, reference=REFS[False]), _events(rows, weights, False), False, batch=False)
    return json.loads(json.dumps(m.to_dict()))


def test_old_dicts_without_residues_load_and_exact_sums_write_none():
    d = _estimate_dict([1.0, 0.1, 2.0])
    est = d["state"]["estimate"]
    assert "residues" in est and set(est["residues"]) == {"tp", "prob", "second"}
    del est["residues"], est["second"]  # an older writer: its floats are the exact values, no interval sums
    m = from_dict(d)
    assert json.loads(json.dumps(m.to_dict())) == d  # (nor written: the same bytes)
    assert [x.value for x in m._estimate[2]] == est["tp"]
    assert REFS[False].monitor_intervals(m) == {"estimated_accuracy": None, "estimated_macro_f1": None}


def test_sums_that_are_floats_write_no_residues():
    ref = REFS[False]
    m = MulticlassMonitor(CLASSES, reference=ref).update_predictions(
        _events([[1.0, 0.0, 0.0, 0.0]] * 3, [0.0, 0.0, 0.0], False))
    est = m.to_dict()["state"]["estimate"]
    assert "residues" not in est and est["tp"] == [0.0] * 4 and est["count"] == 3


@pytest.mark.parametrize("change, needle", [
    (lambda e: e.update(residues=[1, 2]), "residues"),
    (lambda e: e.update(residues={"tp": []}), "residues"),
    (lambda e: e["residues"].update(tp=[[]] * 3), "residues tp"),
    (lambda e: e["residues"].update(prob="x"), "residues prob"),
    (lambda e: e["residues"]["tp"].__setitem__(0, [[1, 2, 3]]), "residues tp"),
    (lambda e: e["residues"]["prob"].__setitem__(1, [[3, -60]]), "residues prob"),  # not canonical
    (lambda e: e["residues"]["prob"].__setitem__(2, [[2**52, 0]]), "residues prob"),  # overlaps the value
    (lambda e: e.update(extra=1), "estimate"),
])
def test_malformed_residues_are_one_line_errors_naming_the_key(change, needle):
    d = _estimate_dict([1.0, 0.1, 2.0, 0.7])
    change(d["state"]["estimate"])
    with pytest.raises(ValueError) as info:
        from_dict(d)
    text = str(info.value)
    assert "\n" not in text and needle in text and "estimate" in text


@pytest.mark.parametrize("k", [2, 7])
def test_any_number_of_classes_per_event_batch_and_merge_agree(k):
    """Few classes (tp hits summed with the prob terms) and many (grouped by class): per
    event (past BUFFER), one batch, and reversed batches of 150 give the same bytes."""
    rng = np.random.default_rng(k)
    classes = [f"k{i}" for i in range(k)]
    y = rng.integers(0, k, 600)
    s = rng.dirichlet([1] * k, 600)
    s[np.arange(600), y] += 0.5
    ref = MulticlassReference.from_arrays(np.array(classes)[y], s / s.sum(axis=1, keepdims=True), classes=classes)
    n = BUFFER + 200
    rows = np.round(rng.dirichlet([1] * k, n), int(rng.integers(2, 6))).tolist()  # ties
    weights = rng.choice([1.0, 0.0, 0.3, 2.7, 7.0], n).tolist()
    evs = [Event(float(i), "m", scores=tuple(r), weight=w) for i, (r, w) in enumerate(zip(rows, weights))]
    per_event = MulticlassMonitor(classes, reference=ref)
    for e in evs:
        per_event.update_prediction(e)
    batch = MulticlassMonitor(classes, reference=ref).update_predictions(evs)
    chunks = MulticlassMonitor(classes)
    for lo in range(0, n, 150)[::-1]:
        chunks.merge(MulticlassMonitor(classes, reference=ref).update_predictions(evs[lo:lo + 150]))
    assert _bytes(per_event) == _bytes(batch) == _bytes(chunks)
    assert _view(per_event, ref) == _view(chunks, ref)


def test_multiclass_estimate_merges_exactly_in_any_order():
    rng = np.random.default_rng(8)
    s = rng.dirichlet([2, 1, 1, 1], 300)
    w = rng.random(300) * 3
    ref = REFS[False]
    whole = ref.estimator().update_many(s, w)
    parts = [ref.estimator().update_many(s[lo:lo + 70], w[lo:lo + 70]) for lo in range(0, 300, 70)]
    merged = ref.estimator()
    for p in parts[::-1]:
        merged.merge(p)
    for name in ("tp", "prob", "predicted"):
        assert getattr(merged, name).tolist() == getattr(whole, name).tolist()
    assert merged.total == whole.total == math.fsum(w.tolist()) and merged.metrics() == whole.metrics()
    m = _feed(MulticlassMonitor(CLASSES, reference=ref), _events(s.tolist(), w.tolist(), False), False, batch=False)
    assert ref.metrics(m)["estimated_accuracy"] == pytest.approx(whole.metrics()["estimated_accuracy"], rel=1e-15)
