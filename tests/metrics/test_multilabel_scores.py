"""MultilabelScores against scikit-learn's roc_auc_score / average_precision_score on
indicator matrices (every average), plus its protocol.

Streams mix per-event updates (indicator lists, numpy rows or label sets; score lists,
numpy rows or mappings), batches (arrays, lists of sets, DataFrames) and merges in random
order. Scores come from small pools (ties within rows and across events), labels may be
absent (no positives) or always present (no negatives), rows may hold one class only, and
weights are dyadic with zeros.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics import UndefinedMetricWarning
from streammetrics.metrics.multilabel_scores import _row_stats, _row_stats_batch

TOL = 1e-12
DYADIC = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.75]
AVERAGES = ["micro", "macro", "weighted", "samples", None]


@st.composite
def streams(draw, max_n=30, max_labels=5):
    """(labels argument, names, (n, L) indicator, (n, L) scores, weights or None)."""
    n_labels = draw(st.integers(2, max_labels))
    if draw(st.booleans()):
        labels: object = n_labels
        names = list(range(n_labels))
    else:
        names = ["x", "y", "z", "u", "v", "w"][:n_labels]
        labels = names
    n = draw(st.integers(1, max_n))
    # per label a chance of being never / always present
    rates = draw(st.lists(st.sampled_from([0.0, 0.3, 0.5, 1.0]), min_size=n_labels, max_size=n_labels))
    Y = np.array([[int(draw(st.floats(0, 1)) < r) if 0 < r < 1 else int(r) for r in rates]
                  for _ in range(n)])
    pool = draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.25, 0.75, -2.0, 3.5, 1e-300]), min_size=1, max_size=5))
    S = np.array(draw(st.lists(st.lists(st.sampled_from(pool), min_size=n_labels, max_size=n_labels),
                               min_size=n, max_size=n)), dtype=np.float64)
    w = None
    if draw(st.booleans()):
        w = np.array(draw(st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n)))
    return labels, names, Y, S, w


def accumulate(draw, labels, names, Y, S, w, **config) -> sm.MultilabelScores:
    n = len(Y)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    bounds = [0, *cuts, n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        acc = sm.MultilabelScores(labels, **config)
        mode = draw(st.sampled_from(["events", "array", "sets", "frame"]), label="mode")
        ww = None if w is None else w[lo:hi]
        if mode == "events":
            for i in range(lo, hi):
                truth = draw(st.sampled_from(["list", "numpy", "set", "bools"]), label="truth")
                truth = {"list": lambda i=i: Y[i].tolist(), "numpy": lambda i=i: Y[i],
                         "bools": lambda i=i: [bool(v) for v in Y[i]],
                         "set": lambda i=i: {names[j] for j in np.flatnonzero(Y[i])}}[truth]()
                scores = draw(st.sampled_from(["list", "numpy", "mapping"]), label="scores")
                scores = {"list": lambda i=i: S[i].tolist(), "numpy": lambda i=i: S[i],
                          "mapping": lambda i=i: dict(zip(names, S[i].tolist()))}[scores]()
                if w is None:
                    acc.update(truth, scores)
                else:
                    acc.update(truth, scores, float(w[i]))
        elif mode == "array":
            acc.update_many(Y[lo:hi], S[lo:hi], ww)
        elif mode == "sets":
            sets = [{names[j] for j in np.flatnonzero(row)} for row in Y[lo:hi]]
            acc.update_many(sets, S[lo:hi].tolist(), None if ww is None else ww.tolist())
        else:
            acc.update_many(pd.DataFrame(Y[lo:hi]), pd.DataFrame(S[lo:hi]), None if ww is None else pd.Series(ww))
        parts.append(acc)
    order = draw(st.permutations(range(len(parts))), label="order")
    total = parts[order[0]].copy()
    for i in order[1:]:
        total.merge(parts[i])
    return total


def run(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except (ValueError, ZeroDivisionError) as exc:
            result = exc
    notes = sorted({
        (w.category.__name__, str(w.message)) for w in caught
        if w.category.__name__ in ("UndefinedMetricWarning", "UserWarning")
    })
    return result, notes


def same(a, b, tol=TOL) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.all((np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= tol)))


def state_close(a, b, path="state"):
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), path
        for key in a:
            state_close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, z) in enumerate(zip(a, b)):
            state_close(x, z, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (path, a, b)
    else:
        assert a == b and type(a) is type(b), (path, a, b)


# ----------------------------------------------------------------------------- parity
@settings(max_examples=80)
@given(data=st.data())
def test_roc_auc_matches_sklearn(data):
    labels, names, Y, S, w = data.draw(streams())
    assume(w is None or w.sum() > 0)
    acc = accumulate(data.draw, labels, names, Y, S, w, exact=True)
    for average in AVERAGES:
        ours, our_notes = run(acc.roc_auc, average)
        theirs, their_notes = run(skm.roc_auc_score, Y, S, average=average, sample_weight=w)
        assert same(ours, theirs), (average, ours, theirs)
        assert our_notes == their_notes, average
        bounds, _ = run(acc.roc_auc_bounds, average)
        assert same(bounds, (ours, ours)), average


@settings(max_examples=80)
@given(data=st.data())
def test_average_precision_matches_sklearn(data):
    labels, names, Y, S, w = data.draw(streams())
    assume(w is None or w.sum() > 0)
    acc = accumulate(data.draw, labels, names, Y, S, w, exact=data.draw(st.booleans()))
    for average in AVERAGES:
        ours, our_notes = run(acc.average_precision, average)
        theirs, their_notes = run(skm.average_precision_score, Y, S, average=average, sample_weight=w)
        if acc.exact or average == "samples":
            assert same(ours, theirs), (average, ours, theirs)
        assert our_notes == their_notes, average


@settings(max_examples=60)
@given(data=st.data())
def test_row_statistics_match_sklearn_per_row(data):
    n_labels = data.draw(st.integers(1, 7))
    pool = data.draw(st.lists(st.sampled_from([0.0, -0.0, 1.0, 0.5, 2.0, -1.0]), min_size=1, max_size=4))
    rows = data.draw(st.lists(st.tuples(
        st.lists(st.booleans(), min_size=n_labels, max_size=n_labels),
        st.lists(st.sampled_from(pool), min_size=n_labels, max_size=n_labels)), min_size=1, max_size=10))
    T = np.array([r[0] for r in rows], dtype=bool)
    S = np.array([r[1] for r in rows], dtype=np.float64)
    P, N, U2, AP = _row_stats_batch(T, S)
    for i, (truth, row) in enumerate(rows):
        p, n, u2, ap = _row_stats(truth, row)
        assert (p, n, u2, ap) == (P[i], N[i], U2[i], AP[i])  # the two paths agree exactly
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert same(ap, skm.average_precision_score(np.array(truth), np.array(row)))
            if p and n:
                assert same(u2 / (2 * p * n), skm.roc_auc_score(np.array(truth), np.array(row)))


def test_samples_average_mirrors_sklearn_edge_cases():
    Y = np.array([[0, 1, 0], [0, 0, 1], [0, 1, 1], [0, 0, 0]])
    S = np.array([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.5, 0.5, 0.1]])
    acc = sm.MultilabelScores(3, exact=True).update_many(Y, S)
    # the last row has no positive label: its ROC AUC is undefined, so is the samples mean
    with pytest.warns(UndefinedMetricWarning, match="Only one class"):
        assert math.isnan(acc.roc_auc("samples"))
    # ... its average precision is 0, with scikit-learn's warning
    with pytest.warns(UserWarning, match="No positive class found"):
        assert acc.average_precision("samples") == pytest.approx(
            skm.average_precision_score(Y, S, average="samples"), abs=TOL)
    # with weight 0 the undefined row no longer counts
    w = [1.0, 2.0, 0.5, 0.0]
    weighted = sm.MultilabelScores(3, exact=True)
    for row_y, row_s, wi in zip(Y, S, w):
        weighted.update(row_y, row_s, wi)
    with pytest.warns(UserWarning, match="Only one class"):  # scikit-learn's own warning class
        expected = skm.roc_auc_score(Y, S, average="samples", sample_weight=w)
    with pytest.warns(UndefinedMetricWarning):
        assert weighted.roc_auc("samples") == pytest.approx(expected, abs=TOL)
    # label 0 has no positives: nan for macro, zero weight for weighted, 0 AP
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(acc.roc_auc("macro"))
    with pytest.warns(UndefinedMetricWarning):
        value = acc.roc_auc("weighted")
    with pytest.warns(UserWarning):
        assert value == pytest.approx(skm.roc_auc_score(Y, S, average="weighted"), abs=TOL)


def test_weighted_average_of_no_positive_weight_is_zero_as_sklearn():
    Y = np.zeros((3, 3), dtype=int)
    S = np.array([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    acc = sm.MultilabelScores(3, exact=True).update_many(Y, S)
    assert acc.roc_auc("weighted") == skm.roc_auc_score(Y, S, average="weighted") == 0
    assert acc.average_precision("weighted") == skm.average_precision_score(Y, S, average="weighted") == 0
    with pytest.warns(UndefinedMetricWarning, match="Only one class"):
        assert math.isnan(acc.roc_auc("micro"))
    with pytest.warns(UserWarning, match="No positive class found"):
        assert acc.average_precision("micro") == 0.0


def test_empty_and_zero_weight_accumulators():
    acc = sm.MultilabelScores(["a", "b"])
    for average in AVERAGES:
        with pytest.warns(UndefinedMetricWarning):
            assert np.all(np.isnan(acc.roc_auc(average)))
        with pytest.warns(UndefinedMetricWarning):
            assert np.all(np.isnan(acc.average_precision(average)))
    acc.update([1, 0], [0.3, 0.7], 0.0)
    assert acc.count == 1 and acc.total_weight == 0.0
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(acc.roc_auc("samples"))
    with pytest.raises(ValueError, match="average must be one of"):
        acc.roc_auc("binary")
    with pytest.raises(ValueError, match="average must be one of"):
        acc.average_precision("ovr")


# ----------------------------------------------------------------------------- bounds
@settings(max_examples=40)
@given(data=st.data(), bins=st.sampled_from([1, 8, 64]))
def test_bounds_contain_the_exact_value(data, bins):
    n_labels = data.draw(st.integers(2, 4))
    n = data.draw(st.integers(1, 40))
    Y = np.array(data.draw(st.lists(st.lists(st.integers(0, 1), min_size=n_labels, max_size=n_labels),
                                    min_size=n, max_size=n)))
    cont = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 1e-9, 1 - 1e-9]), st.floats(-50, 50))
    S = np.array(data.draw(st.lists(st.lists(cont, min_size=n_labels, max_size=n_labels), min_size=n, max_size=n)))
    w = np.array(data.draw(st.lists(st.sampled_from(DYADIC + [0.3, 7.1]), min_size=n, max_size=n)))
    binned = sm.MultilabelScores(n_labels, bins=bins).update_many(Y, S, w)
    exact = sm.MultilabelScores(n_labels, exact=True).update_many(Y, S, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in AVERAGES:
            value = np.atleast_1d(exact.roc_auc(average))
            low, high = map(np.atleast_1d, binned.roc_auc_bounds(average))
            defined = ~np.isnan(value)
            assert np.array_equal(defined, ~np.isnan(low)) and np.array_equal(defined, ~np.isnan(high))
            assert np.all(low[defined] <= value[defined]) and np.all(value[defined] <= high[defined]), average
            if average == "samples":  # exact in every mode
                assert same(binned.roc_auc(average), exact.roc_auc(average))


# ----------------------------------------------------------------------------- protocol
@settings(max_examples=40)
@given(data=st.data())
def test_per_event_equals_batch_and_merge_order_does_not_matter(data):
    labels, names, Y, S, w = data.draw(streams(max_n=25))
    exact = data.draw(st.booleans())
    batch = sm.MultilabelScores(labels, exact=exact).update_many(Y, S, w)
    events = sm.MultilabelScores(labels, exact=exact)
    for i in range(len(Y)):
        events.update(Y[i].tolist(), S[i].tolist(), 1.0 if w is None else float(w[i]))
    mixed = accumulate(data.draw, labels, names, Y, S, w, exact=exact)
    state_close(batch.to_dict(), events.to_dict())
    state_close(batch.to_dict(), mixed.to_dict())
    assert batch.count == len(Y) and batch.total_weight == (len(Y) if w is None else w.sum())


@settings(max_examples=30)
@given(data=st.data())
def test_json_round_trip(data):
    labels, names, Y, S, w = data.draw(streams(max_n=20))
    acc = accumulate(data.draw, labels, names, Y, S, w, exact=data.draw(st.booleans()))
    d = json.loads(json.dumps(acc.to_dict(), allow_nan=False))
    back = sm.from_dict(d)
    assert isinstance(back, sm.MultilabelScores) and back == acc and back.labels == names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in AVERAGES:
            assert same(back.roc_auc_bounds(average), acc.roc_auc_bounds(average), 0)
            assert same(back.average_precision(average), acc.average_precision(average), 0)
    back.update(Y[0], S[0])
    assert back.count == acc.count + 1


def test_mapping_set_and_sequence_rows_give_the_same_state():
    a = sm.MultilabelScores(["cat", "dog", "emu"]).update({"dog"}, {"emu": 0.1, "cat": 0.2, "dog": 0.9})
    b = sm.MultilabelScores(["cat", "dog", "emu"]).update([0, 1, 0], [0.2, 0.9, 0.1])
    c = sm.MultilabelScores(["cat", "dog", "emu"]).update_many([frozenset({"dog"})], [[0.2, 0.9, 0.1]])
    d = sm.MultilabelScores(["cat", "dog", "emu"]).update_many(np.array([[False, True, False]]),
                                                                [{"dog": 0.9, "cat": 0.2, "emu": 0.1}])
    assert a == b == c == d


@pytest.mark.parametrize("args, error, match", [
    (([0, 2, 0], [0.2, 0.3, 0.5]), ValueError, r"y_true\[1\] must be 0 or 1, got 2"),
    ((["1", 0, 0], [0.2, 0.3, 0.5]), ValueError, r"y_true\[0\] must be 0 or 1, got '1'"),
    (([0, 1], [0.2, 0.3, 0.5]), ValueError, "y_true has 2 entries, expected 3"),
    (({"q"}, [0.2, 0.3, 0.5]), ValueError, "y_true holds 'q', which is not one of labels"),
    (({1}, [0.2, 0.3, 0.5]), ValueError, "y_true holds 1, which is not one of labels"),
    (("abc", [0.2, 0.3, 0.5]), TypeError, "y_true must be an indicator sequence"),
    (([0, 1, 0], [0.2, 0.3]), ValueError, "scores has 2 values, expected 3"),
    (([0, 1, 0], [0.2, np.nan, 0.5]), ValueError, r"scores\[1\] must be finite, got nan"),
    (([0, 1, 0], {"a": 0.2, "b": 0.3}), ValueError, r"scores is missing labels \['c'\]"),
    (([0, 1, 0], {"a": 0.2, "b": 0.3, "c": 0.1, "d": 0.0}), ValueError, "scores has unknown label 'd'"),
    (([0, 1, 0], [0.2, 0.3, 0.5], -0.5), ValueError, "weight must be finite and non-negative, got -0.5"),
    (([0, 1, 0], [0.2, 0.3, 0.5], np.inf), ValueError, "weight must be finite and non-negative, got inf"),
])
def test_bad_events_raise_and_leave_the_state_unchanged(args, error, match):
    acc = sm.MultilabelScores(["a", "b", "c"]).update([1, 0, 1], [0.9, 0.1, 0.5])
    before = acc.to_dict()
    with pytest.raises(error, match=match):
        acc.update(*args)
    assert acc.to_dict() == before


@pytest.mark.parametrize("args, error, match", [
    (([[0, 1, 0], [0, 3, 0]], [[0.2, 0.3, 0.5]] * 2), ValueError, r"y_true\[1\]\[1\] must be 0 or 1, got 3"),
    (([[0, 1, 0]], [[0.2, 0.3, 0.5]] * 2), ValueError, "inconsistent batch lengths"),
    (([[0, 1]] * 2, [[0.2, 0.3, 0.5]] * 2), ValueError, r"y_true must have shape \(n, 3\)"),
    (([[0, 1, 0]] * 2, [[0.2, 0.3, 0.5], [0.1, np.inf, 0.0]]), ValueError, r"score_matrix\[1\]\[1\] must be finite"),
    (([{"a"}, {"z"}], [[0.2, 0.3, 0.5]] * 2), ValueError, r"y_true\[1\] holds 'z'"),
    (([[0, 1, 0]] * 2, [[0.2, 0.3, 0.5]] * 2, [1.0, -1.0]), ValueError, r"sample_weight\[1\] must be non-negative"),
    (([[0, 1, 0]] * 2, [[0.2, 0.3, 0.5]] * 2, [1e300, 1e300]), ValueError, "exceed"),
])
def test_bad_batches_raise_and_leave_the_state_unchanged(args, error, match):
    acc = sm.MultilabelScores(["a", "b", "c"]).update([1, 0, 1], [0.9, 0.1, 0.5])
    before = acc.to_dict()
    with pytest.raises(error, match=match):
        acc.update_many(*args)
    assert acc.to_dict() == before
    acc.update_many([], [])
    assert acc.to_dict() == before


@pytest.mark.parametrize("labels, error", [
    (0, ValueError), ([], ValueError), (["a", "a"], ValueError), ([1, "a"], ValueError), ("ab", TypeError),
])
def test_bad_labels(labels, error):
    with pytest.raises(error, match="labels"):
        sm.MultilabelScores(labels)


def test_hostile_dicts_raise_value_error():
    acc = sm.MultilabelScores(["a", "b", "c"])
    acc.update_many([[1, 0, 1], [0, 0, 0], [1, 1, 0]], [[0.9, 0.1, 0.5], [0.2, 0.2, 0.2], [0.4, 0.6, 0.1]], [1, 2, 0])
    d = acc.to_dict()
    assert sm.from_dict(json.loads(json.dumps(d))) == acc

    def edit(fn):
        c = json.loads(json.dumps(d))
        fn(c)
        return c

    s = "state"
    variants = [
        edit(lambda c: c[s].pop("count")),
        edit(lambda c: c[s].__setitem__("count", 2)),
        edit(lambda c: c[s].__setitem__("total_weight", -1.0)),
        edit(lambda c: c[s]["positive_events"].__setitem__(0, 3)),
        edit(lambda c: c[s]["positive_weights"].__setitem__(0, 9.0)),
        edit(lambda c: c[s].__setitem__("samples_roc_auc_sum", 100.0)),
        edit(lambda c: c[s].__setitem__("samples_average_precision_sum", float("inf"))),
        edit(lambda c: c[s].__setitem__("one_class_rows", [0, 1])),
        edit(lambda c: c[s].__setitem__("no_positive_rows", 5)),
        edit(lambda c: c[s]["histograms"].pop("lengths")),
        edit(lambda c: c[s]["histograms"].__setitem__("data", "AAAAAAAA")),
        edit(lambda c: c[s]["histograms"].__setitem__("keys", ["x"])),
        edit(lambda c: c[s].__setitem__("histograms", [{"neg": [], "pos": [], "key_deltas": []}] * 3)),
        edit(lambda c: c[s].__setitem__("bins_per_octave", 64)),  # an exact state read as a grid
        edit(lambda c: c["config"].__setitem__("labels", ["a", "b"])),
        edit(lambda c: c["config"].__setitem__("labels", {"a": 1})),
        edit(lambda c: c["config"].__setitem__("bins", 0)),
        edit(lambda c: c["config"].pop("exact")),
    ]
    for i, bad in enumerate(variants):
        with pytest.raises(ValueError):
            sm.from_dict(bad)
            pytest.fail(f"variant {i} was accepted")


def test_copy_reset_add_and_kinds():
    a = sm.MultilabelScores(2).update([1, 0], [0.8, 0.3])
    b = a.copy().update([0, 1], [0.1, 0.9], 2.0)
    assert a.count == 1 and b.count == 2 and b.total_weight == 3.0
    c = a + b
    assert c.count == 3 and c.roc_auc("micro") == 1.0
    c.reset()
    assert c == sm.MultilabelScores(2)
    with pytest.raises(ValueError, match="merge"):
        sm.MultilabelScores([0, 1]).merge(sm.MultilabelScores([False, True]))
    assert sm.MultilabelScores(3).labels == [0, 1, 2]
