"""MultilabelConfusion == scikit-learn on indicator matrices, plus its protocol."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.metrics.multilabel_confusion import MultilabelConfusion

DYADIC = [0.0, 0.5, 1.0, 2.0, 3.25]
ZERO_DIVISIONS = ["warn", 0, 1, np.nan]


@st.composite
def indicator_streams(draw):
    n_labels = draw(st.integers(2, 5))
    n = draw(st.integers(1, 25))
    row = st.lists(st.integers(0, 1), min_size=n_labels, max_size=n_labels)
    y_true = draw(st.lists(row, min_size=n, max_size=n))
    y_pred = draw(st.lists(row, min_size=n, max_size=n))
    weights = draw(st.none() | st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n))
    return n_labels, np.array(y_true), np.array(y_pred), weights


def accumulate(n_labels, T, P, weights, data):
    n = len(T)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    bounds = [0, *cuts, n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        acc = MultilabelConfusion(n_labels)
        w = None if weights is None else weights[lo:hi]
        mode = data.draw(st.sampled_from(["rows", "sets", "matrix", "set-batch"]), label="mode")
        for i in range(lo, hi) if mode in ("rows", "sets") else ():
            t, p = T[i].tolist(), P[i].tolist()
            if mode == "sets":
                t = {j for j, v in enumerate(t) if v}
                p = frozenset(j for j, v in enumerate(p) if v)
            acc.update(t, p) if weights is None else acc.update(t, p, weights[i])
        if mode == "matrix":
            acc.update_many(T[lo:hi], P[lo:hi].astype(bool), w)
        elif mode == "set-batch":
            acc.update_many([set(np.flatnonzero(r).tolist()) for r in T[lo:hi]],
                            [set(np.flatnonzero(r).tolist()) for r in P[lo:hi]], w)
        parts.append(acc)
    total = MultilabelConfusion(n_labels)
    for i in data.draw(st.permutations(range(len(parts))), label="merge order"):
        total.merge(parts[i])
    return total


def run(f, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome = ("ok", f(*args, **kwargs))
        except ValueError:
            outcome = ("raise", "ValueError")
    return outcome, sorted({(w.category.__name__, str(w.message)) for w in caught})


def assert_same(ours, theirs):
    assert ours[0][0] == theirs[0][0], (ours, theirs)
    if ours[0][0] == "ok":
        a, b = np.asarray(ours[0][1], dtype=float), np.asarray(theirs[0][1], dtype=float)
        assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=1e-12, equal_nan=True), (a, b)
    assert ours[1] == theirs[1]


@given(stream=indicator_streams(), data=st.data())
def test_set_wise_metrics_match_sklearn(stream, data):
    n_labels, T, P, w = stream
    assume(w is None or sum(w) > 0)
    acc = accumulate(n_labels, T, P, w, data)
    average = data.draw(st.sampled_from([None, "micro", "macro", "weighted", "samples", "binary"]))
    zd = data.draw(st.sampled_from(ZERO_DIVISIONS))
    labels = None
    if average != "samples":
        labels = data.draw(st.none() | st.lists(st.integers(0, n_labels - 1), min_size=1, unique=True))
    kw = dict(average=average, zero_division=zd, labels=labels)
    sk = dict(kw, sample_weight=w)
    assert_same(run(acc.precision, **kw), run(skm.precision_score, T, P, **sk))
    assert_same(run(acc.recall, **kw), run(skm.recall_score, T, P, **sk))
    assert_same(run(acc.f1, **kw), run(skm.f1_score, T, P, **sk))
    beta = data.draw(st.sampled_from([0.0, 0.5, 3.0, math.inf]))
    assert_same(run(acc.fbeta, beta, **kw), run(skm.fbeta_score, T, P, beta=beta, **sk))
    if not (isinstance(zd, float) and math.isnan(zd)):
        assert_same(run(acc.jaccard, **kw), run(skm.jaccard_score, T, P, **sk))


@given(stream=indicator_streams(), data=st.data())
def test_accuracy_hamming_and_matrix_match_sklearn(stream, data):
    n_labels, T, P, w = stream
    assume(w is None or sum(w) > 0)
    acc = accumulate(n_labels, T, P, w, data)
    for normalize in (True, False):
        assert_same(run(acc.accuracy, normalize),
                    run(skm.accuracy_score, T, P, normalize=normalize, sample_weight=w))
    assert_same(run(acc.hamming_loss), run(skm.hamming_loss, T, P, sample_weight=w))
    np.testing.assert_array_equal(acc.matrix(), skm.multilabel_confusion_matrix(T, P, sample_weight=w))


@given(stream=indicator_streams(), data=st.data())
def test_split_merge_json_round_trip_give_the_whole_stream_state(stream, data):
    n_labels, T, P, w = stream
    whole = MultilabelConfusion(n_labels)
    for i in range(len(T)):
        whole.update(T[i].tolist(), P[i].tolist(), 1.0 if w is None else w[i])
    batch = MultilabelConfusion(n_labels).update_many(T, P, w)
    split = accumulate(n_labels, T, P, w, data)
    assert whole.to_dict() == batch.to_dict() == split.to_dict()
    back = sm.from_dict(json.loads(json.dumps(split.to_dict(), allow_nan=False)))
    assert back == whole


@settings(max_examples=50)
@given(stream=indicator_streams())
def test_named_labels_and_label_sets(stream):
    n_labels, T, P, w = stream
    names = ["cat", "dog", "eel", "fox", "gnu"][:n_labels]
    named = MultilabelConfusion(names)
    for i in range(len(T)):
        named.update({names[j] for j in np.flatnonzero(T[i])}, [int(v) for v in P[i]],
                     1.0 if w is None else w[i])
    by_index = MultilabelConfusion(n_labels).update_many(T, P, w)
    assert named.to_dict()["state"] == by_index.to_dict()["state"]
    assume(w is None or sum(w) > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sub = named.f1(labels=["dog", "cat"], average=None)
        ref = skm.f1_score(T, P, labels=[1, 0], average=None, sample_weight=w)
    np.testing.assert_allclose(sub, ref, rtol=0, atol=1e-12)


# --------------------------------------------------------------------- validation
def filled():
    return MultilabelConfusion(["a", "b", "c"]).update_many([[1, 0, 1], [0, 1, 0]], [[1, 1, 0], [0, 0, 0]],
                                                           [1.0, 2.0])


@pytest.mark.parametrize(
    "exc, match, call",
    [
        (ValueError, r"y_true has 2 entries, expected 3", lambda m: m.update([1, 0], [1, 0, 0])),
        (ValueError, r"y_pred\[1\] must be 0 or 1, got 2", lambda m: m.update([1, 0, 0], [0, 2, 0])),
        (ValueError, r"y_true\[0\] must be 0 or 1, got nan", lambda m: m.update([math.nan, 0, 0], [0, 0, 0])),
        (ValueError, r"y_true holds 'z', which is not one of labels", lambda m: m.update({"z"}, set())),
        (TypeError, r"y_pred must be an indicator sequence or a set", lambda m: m.update({"a"}, "a")),
        (ValueError, r"weight must be finite and non-negative, got -1", lambda m: m.update({"a"}, set(), -1)),
        (ValueError, r"y_true must have shape \(n, 3\), got \(2, 2\)",
         lambda m: m.update_many([[1, 0], [0, 1]], [[1, 0, 0], [0, 1, 0]])),
        (ValueError, r"y_pred\[1\]\[2\] must be 0 or 1, got 5",
         lambda m: m.update_many([[1, 0, 0], [0, 1, 0]], [[1, 0, 0], [0, 1, 5]])),
        (ValueError, r"inconsistent batch lengths", lambda m: m.update_many([[1, 0, 0]], [[1, 0, 0], [0, 0, 0]])),
        (ValueError, r"sample_weight\[0\] must be non-negative, got -2.0",
         lambda m: m.update_many([[1, 0, 0]], [[1, 0, 0]], [-2.0])),
        (ValueError, r"y_true\[1\] holds 'q'", lambda m: m.update_many([{"a"}, {"q"}], [set(), set()])),
    ],
)
def test_bad_input_names_the_argument_and_leaves_state_unchanged(exc, match, call):
    m = filled()
    before = json.dumps(m.to_dict())
    with pytest.raises(exc, match=match):
        call(m)
    assert json.dumps(m.to_dict()) == before


def test_constructor_and_parameters():
    with pytest.raises(ValueError):
        MultilabelConfusion(0)
    with pytest.raises(ValueError, match="duplicates"):
        MultilabelConfusion(["a", "a"])
    with pytest.raises(ValueError, match="mixes label kinds"):
        MultilabelConfusion([1, "a"])
    m = filled()
    with pytest.raises(ValueError, match="multilabel-indicator but average='binary'"):
        m.f1(average="binary")
    with pytest.raises(ValueError, match="not among"):
        m.recall(labels=["zz"], average="macro")
    with pytest.raises(ValueError, match="all labels only"):
        m.precision(labels=["a"], average="samples")
    with pytest.raises(ValueError, match="zero_division"):
        m.jaccard(zero_division=np.nan)
    assert m.labels == ["a", "b", "c"]


def test_empty_and_zero_weight_accumulators_are_undefined():
    m = MultilabelConfusion(2)
    with pytest.warns(sm.UndefinedMetricWarning):
        assert math.isnan(m.f1(average="samples"))
    with pytest.warns(sm.UndefinedMetricWarning):
        assert math.isnan(m.hamming_loss())
    m.update([1, 0], [1, 0], 0.0)
    with pytest.warns(sm.UndefinedMetricWarning):
        assert np.isnan(m.precision(average=None)).all()
    assert m.accuracy(normalize=False) == 0.0
    m.update_many([], [])
    assert m.count == 1


def test_copy_reset_merge():
    a = filled()
    b = a.copy().update({"a"}, {"a"})
    assert a.count == 2 and b.count == 3
    assert (a + b).count == 5
    with pytest.raises(ValueError, match="different configurations"):
        a.merge(MultilabelConfusion(3))
    a.reset()
    assert a == MultilabelConfusion(["a", "b", "c"])


def _mutate(path, value):
    d = json.loads(json.dumps(filled().to_dict()))
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return d


@pytest.mark.parametrize(
    "d",
    [
        _mutate(["state", "tp"], [1.0, 0.0]),
        _mutate(["state", "tp"], [1.0, 0.0, -1.0]),
        _mutate(["state", "tp"], [9.0, 0.0, 0.0]),  # more true positives than predictions
        _mutate(["state", "count"], -3),
        _mutate(["state", "count"], 0),
        _mutate(["state", "total_weight"], 7.0),
        _mutate(["state", "subset_correct"], 100.0),
        _mutate(["state", "samples"], [[5, 1, 1, 1.0, 0]]),
        _mutate(["state", "samples"], [[1, 2, 2, 1.0, 0], [1, 2, 2, 2.0, 0]]),
        _mutate(["state", "samples"], [[1, 2, 2, 3.0, "0"]]),
        _mutate(["state", "samples"], "[]"),
        _mutate(["state", "wrong_labels"], math.inf),
        _mutate(["config", "labels"], ["a", "b"]),
        _mutate(["config", "labels"], 3),
    ],
)
def test_from_dict_rejects_malformed_dicts(d):
    with pytest.raises(ValueError):
        sm.from_dict(d)


@pytest.mark.parametrize("n_events", [1, 3])
def test_samples_warning_wording_follows_the_number_of_events(n_events):
    # identical events share one histogram entry; the wording must still follow n_events
    T = np.zeros((n_events, 2), dtype=int)
    acc = MultilabelConfusion(2).update_many(T, T)
    for ours, theirs in ((acc.precision, skm.precision_score), (acc.jaccard, skm.jaccard_score)):
        assert_same(run(ours, average="samples"), run(theirs, T, T, average="samples"))
