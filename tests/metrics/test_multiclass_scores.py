"""MulticlassScores against scikit-learn on hypothesis-generated streams, plus its protocol.

Streams mix per-event updates (sequence, numpy or mapping rows), batches and merges in a
random order. Scores come from small integer pools (ties within and across rows), either
normalised to probability rows (so that scikit-learn's multiclass ``roc_auc_score``
accepts them) or raw (margins, values above 1). Weights are dyadic, zeros included.

References: the public scikit-learn functions where they accept the input (K >= 3,
probability rows, OvO without weights), otherwise the code path scikit-learn itself uses
("ovr is same as multi-label": ``roc_auc_score`` / ``average_precision_score`` of the
one-hot targets; ``_average_multiclass_ovo_score`` for OvO).
"""
from __future__ import annotations

import json
import math
import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm
from sklearn.metrics._base import _average_multiclass_ovo_score
from sklearn.metrics._ranking import _binary_roc_auc_score

import streammetrics as sm
from streammetrics import UndefinedMetricWarning

TOL = 1e-12
DYADIC = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.75]
CLASS_SETS = {
    "int": lambda k: sorted([-7, 0, 2, 3, 10, 11][:k]),
    "str": lambda k: ["ant", "bee", "cat", "dog", "eel", "fox"][:k],
}
ROWS_MSG = "score rows do not sum to 1"
pytestmark = pytest.mark.filterwarnings(f"ignore:.*{ROWS_MSG}")


# ----------------------------------------------------------------------------- streams
@st.composite
def streams(draw, normalised=None, weights=True, min_k=2, max_k=5, max_n=30):
    """(classes, y index array, (n, K) scores, weights or None)."""
    k = draw(st.integers(min_k, max_k))
    classes = CLASS_SETS[draw(st.sampled_from(sorted(CLASS_SETS)))](k)
    n = draw(st.integers(1, max_n))
    present = draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=k, unique=True))
    y = np.array(draw(st.lists(st.sampled_from(present), min_size=n, max_size=n)))
    if normalised is None:
        normalised = draw(st.booleans())
    if normalised:
        pool = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
        raw = np.array(draw(st.lists(st.lists(st.sampled_from(pool), min_size=k, max_size=k),
                                     min_size=n, max_size=n)), dtype=np.float64)
        raw[raw.sum(axis=1) == 0] = 1.0
        s = raw / raw.sum(axis=1, keepdims=True)
    else:
        pool = draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.25, -2.0, 3.5, 1e-300, -0.0]),
                             min_size=1, max_size=5))
        s = np.array(draw(st.lists(st.lists(st.sampled_from(pool), min_size=k, max_size=k),
                                   min_size=n, max_size=n)), dtype=np.float64)
    w = None
    if weights and draw(st.booleans()):
        w = np.array(draw(st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n)))
    return classes, y, s, w


def accumulate(draw, classes, y, s, w, **config) -> sm.MulticlassScores:
    """Feed the events through a random mix of update forms, update_many and merges."""
    n = len(y)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    bounds = [0, *cuts, n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        acc = sm.MulticlassScores(classes, **config)
        mode = draw(st.sampled_from(["events", "array", "lists", "frame"]), label="mode")
        labels = [classes[i] for i in y[lo:hi]]
        ww = None if w is None else w[lo:hi]
        if mode == "events":
            for i in range(lo, hi):
                form = draw(st.sampled_from(["list", "numpy", "mapping", "tuple"]), label="row")
                row = {"list": lambda i=i: s[i].tolist(), "numpy": lambda i=i: s[i], "tuple": lambda i=i: tuple(s[i]),
                       "mapping": lambda i=i: dict(zip(classes, s[i].tolist()))}[form]()
                if w is None:
                    acc.update(classes[y[i]], row)
                else:
                    acc.update(classes[y[i]], row, float(w[i]))
        elif mode == "array":
            acc.update_many(np.array(labels), s[lo:hi], ww)
        elif mode == "lists":
            acc.update_many(labels, s[lo:hi].tolist(), None if ww is None else ww.tolist())
        else:
            acc.update_many(pd.Series(labels, dtype=object), pd.DataFrame(s[lo:hi]),
                            None if ww is None else pd.Series(ww))
        parts.append(acc)
    order = draw(st.permutations(range(len(parts))), label="order")
    total = parts[order[0]].copy()
    for i in order[1:]:
        total.merge(parts[i])
    return total


def run(fn, *args, **kwargs):
    """(result or the exception, sorted [(warning class, message)]) of a call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except (ValueError, ZeroDivisionError) as exc:
            result = exc
    notes = sorted({
        (w.category.__name__, str(w.message)) for w in caught
        if w.category.__name__ in ("UndefinedMetricWarning", "UserWarning") and ROWS_MSG not in str(w.message)
    })
    return result, notes


def same(a, b, tol=TOL) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.all((np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= tol)))


def onehot(y, k):
    return np.eye(k, dtype=int)[y]


def weighted_ovo(y, s, w, average):
    """Hand & Till with weights (our documented generalisation), from scikit-learn's
    weighted binary AUCs; pairs over the classes with weight, weighted by weight share."""
    cw = np.bincount(y, weights=w, minlength=s.shape[1])
    present = [c for c in range(s.shape[1]) if cw[c] > 0]
    scores, prevalence = [], []
    for a, b in combinations(present, 2):
        m = (y == a) | (y == b)
        pa = skm.roc_auc_score(y[m] == a, s[m, a], sample_weight=w[m])
        pb = skm.roc_auc_score(y[m] == b, s[m, b], sample_weight=w[m])
        scores.append((pa + pb) / 2)
        prevalence.append((cw[a] + cw[b]) / cw.sum())
    return np.average(scores, weights=prevalence if average == "weighted" else None)


def state_close(a, b, path="state"):
    """Equal JSON states, floats to a relative 1e-12 (running sums add in another order)."""
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
@settings(max_examples=60)
@given(data=st.data())
def test_roc_auc_ovr_matches_sklearn(data):
    classes, y, s, w = data.draw(streams())
    assume(w is None or w.sum() > 0)
    acc = accumulate(data.draw, classes, y, s, w, exact=True)
    k = len(classes)
    for average in ["macro", "weighted", "micro", None]:
        ours, our_notes = run(acc.roc_auc, "ovr", average)
        theirs, their_notes = run(skm.roc_auc_score, onehot(y, k), s, average=average, sample_weight=w)
        assert same(ours, theirs), (average, ours, theirs)
        assert our_notes == their_notes, average
        assert same(run(acc.roc_auc_bounds, "ovr", average)[0], (ours, ours)), average
        public = k >= 3 and np.allclose(1, s.sum(axis=1))
        if public:  # the multiclass entry point itself
            labels = [classes[i] for i in y]
            theirs2, _ = run(skm.roc_auc_score, labels, s, multi_class="ovr", average=average,
                             sample_weight=w, labels=classes)
            assert same(ours, theirs2), (average, ours, theirs2)


@settings(max_examples=60)
@given(data=st.data())
def test_roc_auc_ovo_matches_sklearn(data):
    classes, y, s, w = data.draw(streams())
    assume(w is None or w.sum() > 0)
    acc = accumulate(data.draw, classes, y, s, w, exact=True)
    k = len(classes)
    for average in ["macro", "weighted"]:
        ours, our_notes = run(acc.roc_auc, "ovo", average)
        class_w = np.bincount(y, weights=w, minlength=k)
        if np.count_nonzero(class_w) < 2:
            assert math.isnan(ours) and our_notes[0][0] == "UndefinedMetricWarning"
            continue
        if w is None:
            theirs = _average_multiclass_ovo_score(_binary_roc_auc_score, y, s, average=average)
            if k >= 3 and np.allclose(1, s.sum(axis=1)):
                theirs2 = skm.roc_auc_score([classes[i] for i in y], s, multi_class="ovo",
                                            average=average, labels=classes)
                assert same(theirs, theirs2)
        else:
            theirs = weighted_ovo(y, s, w, average)
        assert same(ours, theirs), (average, ours, theirs)
        assert same(run(acc.roc_auc_bounds, "ovo", average)[0], (ours, ours))  # up to the rounding slack


@settings(max_examples=60)
@given(data=st.data(), k_top=st.integers(1, 6))
def test_top_k_log_loss_confusion_match_sklearn(data, k_top):
    classes, y, s, w = data.draw(streams())
    assume(w is None or w.sum() > 0)
    acc = accumulate(data.draw, classes, y, s, w, exact=data.draw(st.booleans()))
    labels = [classes[i] for i in y]
    k = len(classes)
    for normalize in (True, False):
        ours, our_notes = run(acc.top_k_accuracy, k_top, normalize)
        score = s[:, 1] if k == 2 else s  # two classes: scikit-learn takes the score of classes[1]
        theirs, their_notes = run(skm.top_k_accuracy_score, labels, score, k=k_top,
                                  normalize=normalize, sample_weight=w, labels=classes)
        assert same(ours, theirs), (k_top, normalize, ours, theirs)
        assert our_notes == their_notes
    ours, our_notes = run(acc.log_loss)
    theirs, their_notes = run(skm.log_loss, labels, s, sample_weight=w, labels=classes)
    if isinstance(theirs, ValueError):
        assert isinstance(ours, ValueError) and "outside" in str(ours)
    else:
        assert math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=TOL), (ours, theirs)
        assert our_notes == their_notes
    predicted = [classes[i] for i in s.argmax(axis=1)]
    expected = skm.confusion_matrix(labels, predicted, labels=classes, sample_weight=w)
    cm = acc.confusion()
    assert cm.labels == classes and cm.count == len(y)
    assert same(cm.matrix(), expected)


@settings(max_examples=50)
@given(data=st.data())
def test_average_precision_matches_sklearn(data):
    classes, y, s, w = data.draw(streams())
    assume(w is None or w.sum() > 0)
    acc = accumulate(data.draw, classes, y, s, w, exact=True)
    k = len(classes)
    for average in ["macro", "weighted", "micro", None]:
        ours, our_notes = run(acc.average_precision, average)
        theirs, their_notes = run(skm.average_precision_score, onehot(y, k), s, average=average,
                                  sample_weight=w)
        assert same(ours, theirs), (average, ours, theirs)
        assert our_notes == their_notes
    if k >= 3 and len(set(y.tolist())) == k:
        ours, our_notes = run(acc.average_precision)
        theirs, their_notes = run(skm.average_precision_score, [classes[i] for i in y], s, sample_weight=w)
        assert same(ours, theirs) and our_notes == their_notes


def test_top_k_ties_go_to_the_higher_class_index():
    s = [[0.2, 0.4, 0.4], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]]
    y = [1, 0, 2]
    acc = sm.MulticlassScores([0, 1, 2], exact=True).update_many(y, s)
    # class 1 ties class 2 and ranks second; class 0 ties class 1 and ranks third
    assert acc.top_k_accuracy(1) == skm.top_k_accuracy_score(y, s, k=1, labels=[0, 1, 2]) == 0.0
    assert acc.top_k_accuracy(2) == skm.top_k_accuracy_score(y, s, k=2, labels=[0, 1, 2]) == 2 / 3
    assert acc.top_k_accuracy(2, normalize=False) == 2.0
    with pytest.warns(UndefinedMetricWarning, match="perfect score"):
        assert acc.top_k_accuracy(3) == 1.0
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="k must be an int"):
            acc.top_k_accuracy(bad)


def test_two_classes_top1_follows_sklearn_binary_rule():
    y = ["no", "yes", "yes", "no"]
    s = [[0.5, 0.5], [0.4, 0.6], [0.7, 0.3], [0.8, 0.2]]
    acc = sm.MulticlassScores(["no", "yes"], exact=True).update_many(y, s)
    positive = [row[1] for row in s]
    expected = skm.top_k_accuracy_score(y, positive, k=1, labels=["no", "yes"])
    assert acc.top_k_accuracy(1) == expected == 0.75  # s > 0.5 predicts "yes"
    acc.update("no", [3.0, -1.0])  # a margin: scikit-learn switches to the threshold 0
    expected = skm.top_k_accuracy_score(y + ["no"], positive + [-1.0], k=1, labels=["no", "yes"])
    assert acc.top_k_accuracy(1) == expected == 0.6
    with pytest.warns(UndefinedMetricWarning, match="perfect score"):
        assert acc.top_k_accuracy(2) == 1.0


@pytest.mark.parametrize("delta", [0.0, 2e-8, 2.4e-8, 2.5e-8, -3e-8, 9e-6, 1.1e-5, -1.1e-5, 0.5])
def test_sum_to_one_tolerances_are_sklearns(delta):
    s = np.array([[0.25, 0.25 + delta, 0.5], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    y = [0, 1, 2]
    acc = sm.MulticlassScores([0, 1, 2], exact=True)
    acc.update(0, s[0].tolist()).update_many(y[1:], s[1:])
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = skm.log_loss(y, s, labels=[0, 1, 2])
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        assert math.isclose(acc.log_loss(), expected, rel_tol=1e-14)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    try:
        skm.roc_auc_score(y, s, multi_class="ovr", labels=[0, 1, 2])
        rejected = False
    except ValueError:
        rejected = True
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        acc.roc_auc()
    assert any(ROWS_MSG in str(w.message) for w in ours) == rejected


def test_log_loss_warns_without_renormalising_and_refuses_scores_above_one():
    acc = sm.MulticlassScores(["a", "b", "c"], exact=True)
    s = [[0.2, 0.3, 0.4], [0.1, 0.5, 0.3]]
    acc.update_many(["a", "c"], s)
    with pytest.warns(UserWarning, match="do not sum to one"):
        value = acc.log_loss()
    assert value == pytest.approx(-(math.log(0.2) + math.log(0.3)) / 2, rel=1e-15)
    with pytest.warns(UserWarning, match="do not sum to one"):
        assert math.isclose(value, skm.log_loss(["a", "c"], s, labels=["a", "b", "c"]), rel_tol=1e-14)
    acc.update("b", [0.0, 1.5, -0.5])
    with pytest.raises(ValueError, match=r"outside it were seen \(from -0.5 to 1.5\)"):
        acc.log_loss()
    assert acc.top_k_accuracy(1) == 1 / 3  # other metrics are unaffected


def test_log_loss_clips_at_float64_eps():
    acc = sm.MulticlassScores([0, 1, 2], exact=True).update(0, [0.0, 0.5, 0.5])
    assert acc.log_loss() == -math.log(np.finfo(np.float64).eps)


def test_roc_auc_of_rows_not_summing_to_one_is_computed_with_a_warning():
    y = [0, 1, 2, 2]
    s = np.array([[3.0, -1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 1.0, 5.0], [0.0, 0.0, 0.5]])
    acc = sm.MulticlassScores([0, 1, 2], exact=True).update_many(y, s)
    with pytest.raises(ValueError, match="probabilities"):
        skm.roc_auc_score(y, s, multi_class="ovr", labels=[0, 1, 2])
    with pytest.warns(UserWarning, match="4 of 4 score rows do not sum to 1"):
        value = acc.roc_auc()
    assert value == skm.roc_auc_score(onehot(np.array(y), 3), s)
    with pytest.warns(UserWarning, match="do not sum to 1"):
        assert acc.roc_auc("ovo") == _average_multiclass_ovo_score(_binary_roc_auc_score, np.array(y), s)
    ok = sm.MulticlassScores([0, 1, 2]).update(0, [0.2, 0.3, 0.5 + 5e-6])  # within np.allclose
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok.roc_auc("ovr", "micro")


def test_ovo_needs_two_classes_and_rejects_average_none():
    acc = sm.MulticlassScores([0, 1, 2], exact=True).update_many([1, 1], [[0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    with pytest.warns(UndefinedMetricWarning, match="two classes"):
        assert math.isnan(acc.roc_auc("ovo", "weighted"))
    with pytest.raises(ValueError, match="not implemented"):
        acc.roc_auc("ovo", None)
    with pytest.raises(ValueError, match="multi_class"):
        acc.roc_auc("raise")
    with pytest.raises(ValueError, match="average must be one of"):
        acc.roc_auc("ovr", "samples")
    with pytest.raises(ValueError, match="average must be one of"):
        acc.average_precision("samples")


def test_unsorted_classes_permute_columns():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 60)
    s = rng.dirichlet(np.ones(4), 60)
    classes = ["d", "b", "a", "c"]
    acc = sm.MulticlassScores(classes, exact=True).update_many([classes[i] for i in y], s)
    order = np.argsort(classes)
    sorted_s = s[:, order]
    labels = [classes[i] for i in y]
    for mc in ("ovr", "ovo"):
        assert math.isclose(acc.roc_auc(mc), skm.roc_auc_score(labels, sorted_s, multi_class=mc,
                                                               labels=sorted(classes)), abs_tol=TOL)
    assert math.isclose(acc.log_loss(), skm.log_loss(labels, sorted_s, labels=sorted(classes)), rel_tol=1e-13)
    assert acc.roc_auc("ovr", None) == pytest.approx(
        skm.roc_auc_score(labels, sorted_s, multi_class="ovr", average=None, labels=sorted(classes))[np.argsort(order)],
        abs=TOL)


def test_empty_and_zero_weight_accumulators_give_nan_with_a_warning():
    acc = sm.MulticlassScores([0, 1, 2])
    for fn in (acc.roc_auc, acc.log_loss, acc.top_k_accuracy, acc.average_precision):
        with pytest.warns(UndefinedMetricWarning):
            assert math.isnan(fn())
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(acc.roc_auc(average=None)).all()
    acc.update(0, [1.0, 0.0, 0.0], 0.0).update(1, [0.0, 1.0, 0.0], 0.0)
    assert acc.count == 2 and acc.total_weight == 0.0
    # scikit-learn returns 0 for a weighted average whose weights sum to ~0
    assert acc.roc_auc(average="weighted") == skm.roc_auc_score(
        onehot(np.array([0, 1]), 3), np.eye(3)[:2], average="weighted", sample_weight=[0, 0]) == 0
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(acc.log_loss())


# ----------------------------------------------------------------------------- bounds
@settings(max_examples=40)
@given(data=st.data(), bins=st.sampled_from([1, 4, 64]))
def test_bounds_contain_the_exact_value(data, bins):
    k = data.draw(st.integers(2, 4))
    n = data.draw(st.integers(1, 40))
    y = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    cont = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 1e-9, 1 - 1e-9]), st.floats(-50, 50))
    s = np.array(data.draw(st.lists(st.lists(cont, min_size=k, max_size=k), min_size=n, max_size=n)))
    w = np.array(data.draw(st.lists(st.sampled_from(DYADIC + [0.3, 7.1]), min_size=n, max_size=n)))
    binned = sm.MulticlassScores(list(range(k)), bins=bins).update_many(y, s, w)
    exact = sm.MulticlassScores(list(range(k)), exact=True).update_many(y, s, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mc, average in [("ovr", "macro"), ("ovr", "weighted"), ("ovr", "micro"), ("ovr", None),
                            ("ovo", "macro"), ("ovo", "weighted")]:
            value = exact.roc_auc(mc, average)
            low, high = binned.roc_auc_bounds(mc, average)
            estimate = binned.roc_auc(mc, average)
            value, low, high, estimate = map(np.atleast_1d, (value, low, high, estimate))
            defined = ~np.isnan(value)
            assert np.array_equal(defined, ~np.isnan(low)) and np.array_equal(defined, ~np.isnan(high))
            assert np.all(low[defined] <= value[defined]), (mc, average)
            assert np.all(value[defined] <= high[defined]), (mc, average)
            assert np.all((low[defined] <= estimate[defined] + 1e-12) & (estimate[defined] <= high[defined] + 1e-12))


def test_default_bins_are_close_on_probabilities():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 5, 5000)
    logits = rng.normal(size=(5000, 5)) + 1.5 * np.eye(5)[y]
    s = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    acc = sm.MulticlassScores(list(range(5))).update_many(y, s)
    for mc in ("ovr", "ovo"):
        exact = skm.roc_auc_score(y, s, multi_class=mc)
        low, high = acc.roc_auc_bounds(mc)
        assert low <= exact <= high and high - low < 1e-2
        assert abs(acc.roc_auc(mc) - exact) < 1e-4


# ----------------------------------------------------------------------------- protocol
@settings(max_examples=40)
@given(data=st.data())
def test_per_event_equals_batch_and_merge_order_does_not_matter(data):
    classes, y, s, w = data.draw(streams(max_n=25))
    exact = data.draw(st.booleans())
    batch = sm.MulticlassScores(classes, exact=exact).update_many([classes[i] for i in y], s, w)
    events = sm.MulticlassScores(classes, exact=exact)
    for i in range(len(y)):
        events.update(classes[y[i]], s[i].tolist(), 1.0 if w is None else float(w[i]))
    mixed = accumulate(data.draw, classes, y, s, w, exact=exact)
    state_close(batch.to_dict(), events.to_dict())
    state_close(batch.to_dict(), mixed.to_dict())
    assert batch.count == len(y) and batch.total_weight == (len(y) if w is None else w.sum())
    if w is None or np.all(w == np.round(w)):  # integral weights: exactly the same histograms
        assert batch.to_dict()["state"]["histograms"] == mixed.to_dict()["state"]["histograms"]


@settings(max_examples=30)
@given(data=st.data())
def test_json_round_trip(data):
    classes, y, s, w = data.draw(streams(max_n=20))
    exact = data.draw(st.booleans())
    acc = accumulate(data.draw, classes, y, s, w, exact=exact)
    d = json.loads(json.dumps(acc.to_dict(), allow_nan=False))
    back = sm.from_dict(d)
    assert isinstance(back, sm.MulticlassScores) and back == acc
    assert back.to_dict() == acc.to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert same(back.roc_auc("ovr", None), acc.roc_auc("ovr", None), 0)
        assert same(back.roc_auc_bounds("ovo"), acc.roc_auc_bounds("ovo"), 0)
    back.update(classes[0], s[0])  # the rebuilt accumulator keeps working
    assert back.count == acc.count + 1


def test_mapping_and_sequence_rows_give_the_same_state():
    classes = ["x", "y", "z"]
    a = sm.MulticlassScores(classes).update("y", {"z": 0.5, "x": 0.2, "y": 0.3}, 2.0)
    b = sm.MulticlassScores(classes).update("y", [0.2, 0.3, 0.5], 2.0)
    c = sm.MulticlassScores(classes).update_many(["y"], [{"y": 0.3, "z": 0.5, "x": 0.2}], [2.0])
    assert a == b == c
    assert a._cells == {(1, 2): 2.0}


def test_pandas_rows_and_numpy_scalar_scores():
    a = sm.MulticlassScores(["x", "y"]).update("x", pd.Series([0.75, 0.25]))
    b = sm.MulticlassScores(["x", "y"]).update("x", [np.float32(0.75), np.float64(0.25)])
    assert a == b and a.count == 1


def test_label_kinds_and_numpy_scalars():
    acc = sm.MulticlassScores([False, True])
    acc.update(np.bool_(True), np.array([0.3, 0.7])).update_many(np.array([False, True]), [[1, 0], [0, 1]])
    assert acc.count == 3
    with pytest.raises(ValueError, match="is not one of classes"):
        acc.update(1, [0.5, 0.5])  # an int is not the bool class True
    ints = sm.MulticlassScores([0, 1, 2]).update(np.int64(2), [0.1, 0.1, 0.8]).update(2.0, [0.1, 0.1, 0.8])
    assert ints.count == 2 and ints.confusion().matrix()[2, 2] == 2
    with pytest.raises(ValueError, match="is not one of classes"):
        ints.update(True, [0.1, 0.1, 0.8])
    with pytest.raises(ValueError, match="merge"):
        sm.MulticlassScores([0, 1]).merge(sm.MulticlassScores([False, True]))
    with pytest.raises(ValueError, match="configurations"):
        sm.MulticlassScores([0, 1]).merge(sm.MulticlassScores([0, 1], exact=True))


@pytest.mark.parametrize("args, error, match", [
    (("z", [0.2, 0.3, 0.5]), ValueError, r"y_true='z' is not one of classes \['a', 'b', 'c'\]"),
    (([1], [0.2, 0.3, 0.5]), TypeError, "y_true must be hashable"),
    (("a", [0.2, 0.3]), ValueError, r"scores has 2 values, expected 3"),
    (("a", [0.2, float("nan"), 0.5]), ValueError, r"scores\[1\] must be finite, got nan"),
    (("a", [0.2, float("inf"), 0.5]), ValueError, r"scores\[1\] must be finite, got inf"),
    (("a", [0.2, True, 0.5]), TypeError, r"scores\[1\] must be a real number, got True"),
    (("a", [0.2, "0.3", 0.5]), TypeError, r"scores\[1\] must be a real number"),
    (("a", {"a": 0.2, "b": 0.8}), ValueError, r"scores is missing classes \['c'\]"),
    (("a", {"a": 0.2, "b": 0.3, "c": 0.5, "d": 0.0}), ValueError, "scores has unknown class 'd'"),
    (("a", {"a": 0.2, "b": 0.3, "c": float("nan")}), ValueError, r"scores\['c'\] must be finite"),
    (("a", "abc"), TypeError, "scores must be a sequence"),
    (("a", np.zeros((1, 3))), ValueError, "one row"),
    (("a", [0.2, 0.3, 0.5], -1.0), ValueError, "weight must be finite and non-negative, got -1.0"),
    (("a", [0.2, 0.3, 0.5], float("nan")), ValueError, "weight must be finite and non-negative, got nan"),
    (("a", [0.2, 0.3, 0.5], float("inf")), ValueError, "weight must be finite"),
    (("a", [0.2, 0.3, 0.5], "1"), TypeError, "weight must be a real number"),
    (("a", [0.2, 0.3, 0.5], 1e301), ValueError, "exceed"),
])
def test_bad_events_raise_and_leave_the_state_unchanged(args, error, match):
    acc = sm.MulticlassScores(["a", "b", "c"]).update("b", [0.1, 0.6, 0.3])
    before = acc.to_dict()
    with pytest.raises(error, match=match):
        acc.update(*args)
    assert acc.to_dict() == before


@pytest.mark.parametrize("args, error, match", [
    ((["a", "q"], [[0.2, 0.3, 0.5]] * 2), ValueError, r"y_true\[1\]='q' is not one of classes"),
    (([0, 1], [[0.2, 0.3, 0.5]] * 2), ValueError, "is not one of classes"),
    ((["a", "b"], [[0.2, 0.3, 0.5]]), ValueError, "inconsistent batch lengths"),
    ((["a", "b"], [[0.2, 0.3], [0.1, 0.2]]), ValueError, r"score_matrix must have shape \(n, 3\)"),
    ((["a", "b"], [[0.2, 0.3, 0.5], [0.1, 0.2]]), ValueError, "could not be read"),
    ((["a", "b"], [[0.2, 0.3, 0.5], [0.1, np.nan, 0.2]]), ValueError,
     r"score_matrix\[1\]\[1\] must be finite, got nan"),
    ((["a", "b"], [[0.2, 0.3, 0.5], [0.1, -np.inf, 0.2]]), ValueError, r"score_matrix\[1\]\[1\] must be finite"),
    ((["a", "b"], np.ones((2, 3), dtype=bool)), TypeError, "booleans"),
    ((["a", "b"], [[0.2, 0.3, 0.5], [0.1, "x", 0.2]]), TypeError, r"score_matrix\[1\]\[1\] must be a real number"),
    ((["a", "b"], [{"a": 1.0, "b": 0, "c": 0}, {"a": 1.0}]), ValueError, r"score_matrix\[1\] is missing classes"),
    ((["a", "b"], [[0.2, 0.3, 0.5]] * 2, [1.0, -2.0]), ValueError,
     r"sample_weight\[1\] must be non-negative, got -2.0"),
    ((["a", "b"], [[0.2, 0.3, 0.5]] * 2, [1.0, np.nan]), ValueError, r"sample_weight\[1\] must be finite, got nan"),
    ((["a", "b"], [[0.2, 0.3, 0.5]] * 2, [1.0]), ValueError, "inconsistent batch lengths"),
    ((["a", "a"], [[0.2, 0.3, 0.5]] * 2, [1e300, 1e300]), ValueError, "exceed"),
])
def test_bad_batches_raise_and_leave_the_state_unchanged(args, error, match):
    acc = sm.MulticlassScores(["a", "b", "c"]).update("b", [0.1, 0.6, 0.3])
    before = acc.to_dict()
    with pytest.raises(error, match=match):
        acc.update_many(*args)
    assert acc.to_dict() == before


def test_empty_batch_is_a_no_op():
    acc = sm.MulticlassScores([0, 1, 2]).update(1, [0.1, 0.6, 0.3])
    before = acc.to_dict()
    acc.update_many([], [])
    acc.update_many(np.array([], dtype=int), np.zeros((0, 3)), [])
    assert acc.to_dict() == before


@pytest.mark.parametrize("classes, error", [
    ([0], ValueError), ([], ValueError), ([0, 0], ValueError), ([0, "a"], ValueError),
    ("abc", TypeError), (3, TypeError), ([[0], [1]], TypeError), ([0.0, float("nan")], ValueError),
])
def test_bad_classes(classes, error):
    with pytest.raises(error, match="classes"):
        sm.MulticlassScores(classes)


def _hostile(d):
    """Malformed variants of a valid MulticlassScores dict."""
    def edit(fn):
        c = json.loads(json.dumps(d))
        fn(c)
        return c
    s = "state"
    yield edit(lambda c: c[s].pop("ranks"))
    yield edit(lambda c: c[s].__setitem__("events", [1, 1]))
    yield edit(lambda c: c[s].__setitem__("events", [-1, 2, 1]))
    yield edit(lambda c: c[s]["weights"].__setitem__(0, -1.0))
    yield edit(lambda c: c[s]["weights"].__setitem__(0, 1e308))
    yield edit(lambda c: c[s]["ranks"].__setitem__(0, 50.0))
    yield edit(lambda c: c[s].__setitem__("binary_top1", [0.0, 0.0, False]))
    yield edit(lambda c: c[s].__setitem__("log_loss_sum", "x"))
    yield edit(lambda c: c[s].__setitem__("log_loss_sum", float("nan")))
    yield edit(lambda c: c[s].__setitem__("outside_unit", [0.5, 2.0]))
    yield edit(lambda c: c[s].__setitem__("unnormalised_rows", [99, 0]))
    yield edit(lambda c: c[s]["cells"].__setitem__("entries", c[s]["cells"]["entries"] + 1))
    yield edit(lambda c: c[s]["cells"].__setitem__("data", "Dg=="))
    yield edit(lambda c: c[s]["cells"].__setitem__("lengths", 5))
    yield edit(lambda c: c[s].__setitem__("cells", [[0, 0, 1.0]]))  # the version-1 form
    yield edit(lambda c: c[s]["histograms"].pop("data"))
    yield edit(lambda c: c[s]["histograms"].__setitem__("packed", 2))
    yield edit(lambda c: c[s]["histograms"].__setitem__("entries", 10**9))
    yield edit(lambda c: c[s]["histograms"].__setitem__("data", c[s]["histograms"]["data"][:-4]))
    yield edit(lambda c: c[s]["histograms"].__setitem__("data", "!" + c[s]["histograms"]["data"][1:]))
    yield edit(lambda c: c[s]["histograms"].__setitem__("zlib", not c[s]["histograms"]["zlib"]))
    yield edit(lambda c: c[s].__setitem__("bins_per_octave", 128))
    yield edit(lambda c: c[s].__setitem__("bins_per_octave", 0.3))
    yield edit(lambda c: c[s].__setitem__("histograms", [{}] * 3))
    yield edit(lambda c: c["config"].__setitem__("classes", ["a", "b"]))
    yield edit(lambda c: c["config"].__setitem__("classes", ["a", "b", "b"]))
    yield edit(lambda c: c["config"].__setitem__("classes", "abc"))
    yield edit(lambda c: c["config"].__setitem__("bins", 3))
    yield edit(lambda c: c["config"].__setitem__("exact", "no"))
    yield edit(lambda c: c["config"].__setitem__("extra", 1))
    yield edit(lambda c: c.__setitem__("version", 99))


def test_hostile_dicts_raise_value_error():
    acc = sm.MulticlassScores(["a", "b", "c"])
    acc.update_many(["a", "b", "b", "c"], [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.0, 0.4, 0.6]])
    d = acc.to_dict()
    assert sm.from_dict(json.loads(json.dumps(d))) == acc
    for i, bad in enumerate(_hostile(d)):
        with pytest.raises(ValueError):
            sm.from_dict(bad)
            pytest.fail(f"variant {i} was accepted")


def test_copy_reset_add_and_repr():
    a = sm.MulticlassScores([0, 1, 2]).update(0, [0.6, 0.3, 0.1])
    b = a.copy().update(2, [0.1, 0.1, 0.8], 3.0)
    assert a.count == 1 and b.count == 2 and b.total_weight == 4.0
    c = a + b
    assert c.count == 3 and a.count == 1
    assert c.confusion().matrix().tolist() == [[2, 0, 0], [0, 0, 0], [0, 0, 3]]
    assert "MulticlassScores" in repr(c)
    c.reset()
    assert c.count == 0 and c == sm.MulticlassScores([0, 1, 2])


def test_list_labels_are_looked_up_as_the_array_path_reads_them():
    """A list of labels of the classes' own type is looked up directly; any other list goes
    through the array path: the same state, the same errors."""
    S = [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [0.1, 0.8, 0.1]]
    a = sm.MulticlassScores(["a", "b", "c"]).update_many(["c", "a", "b"], S)
    b = sm.MulticlassScores(["a", "b", "c"]).update_many(np.array(["c", "a", "b"], dtype=object), S)
    assert a.to_dict() == b.to_dict()
    ints = sm.MulticlassScores([0, 1, 2])
    assert ints.copy().update_many([2, True, 1], S).to_dict() == ints.copy().update_many(
        np.array([2, True, 1]), S).to_dict()  # (a bool among ints: the array path reads it)
    assert ints.update_many([2, 0, 1], S).to_dict() == sm.MulticlassScores([0, 1, 2]).update_many(
        np.array([2, 0, 1]), S).to_dict()
    with pytest.raises(ValueError, match=r"y_true\[2\]='z' is not one of classes"):
        sm.MulticlassScores(["a", "b", "c"]).update_many(["a", "b", "z"], S)


def test_top_k_intervals_of_many_equal_each_ones_own():
    """top_k_intervals (one Wilson pass over many accumulators) keeps the pairs interval() gives
    alone: small and large, weighted (none), empty, two confidences."""
    rng = np.random.default_rng(3)
    accs, alone = [], []
    for i in range(12):
        n = [0, 3, 12, 40][i % 4]
        S = rng.dirichlet(np.ones(4), size=n)
        y = rng.integers(0, 4, size=n)
        w = rng.uniform(0.5, 2.0, size=n) if i % 5 == 4 else None
        for out in (accs, alone):
            acc = sm.MulticlassScores([0, 1, 2, 3])
            out.append(acc.update_many(y, S, w) if n else acc)
    confidences = [0.9 if i % 2 else 0.95 for i in range(12)]
    sm.MulticlassScores.top_k_intervals(accs, confidences, k=2)
    for a, b, c in zip(accs, alone, confidences):
        assert a.interval("top_k_accuracy", c, k=2) == b.interval("top_k_accuracy", c, k=2)
    assert any(a.interval("top_k_accuracy", c, k=2) is not None for a, c in zip(accs, confidences))
