"""ConfusionMatrix == scikit-learn on hypothesis-generated streams.

Every metric is compared with its scikit-learn function on the same events: the value
(|diff| <= 1e-12, NaN where scikit-learn gives NaN), whether it raises ValueError, and the
set of warnings (category name and message). Streams mix int / str / bool labels, unit or
dyadic weights (including zeros, so sums are exact and paths compare bit for bit),
one-class streams, fixed label lists with labels that never occur, and are accumulated
through random splits into per-event and batch updates merged in random order.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm

POOLS = {"int": [0, 1, 2, 3, 7], "str": ["a", "b", "c", "d"], "bool": [False, True]}
DYADIC = [0.0, 0.5, 1.0, 2.0, 3.25]
AVERAGES = ["binary", "micro", "macro", "weighted", None]
ZERO_DIVISIONS = ["warn", 0, 1, 0.0, 1.0, np.nan]


@dataclass
class Stream:
    y_true: list
    y_pred: list
    weights: list | None
    fixed: list | None  # constructor labels
    pool: list

    @property
    def total(self) -> float:
        return len(self.y_true) if self.weights is None else sum(self.weights)


@st.composite
def streams(draw, min_size=1, max_size=30):
    kind = draw(st.sampled_from(sorted(POOLS)))
    pool = POOLS[kind]
    used = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool), unique=True))
    n = draw(st.integers(min_size, max_size))
    y_true = draw(st.lists(st.sampled_from(used), min_size=n, max_size=n))
    y_pred = draw(st.lists(st.sampled_from(used), min_size=n, max_size=n))
    weights = draw(st.none() | st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n))
    fixed = draw(st.none() | st.permutations(pool))
    return Stream(y_true, y_pred, weights, None if fixed is None else list(fixed), pool)


def accumulate(stream: Stream, data) -> sm.ConfusionMatrix:
    """The stream through a random split: per-event and batch parts, merged in random order."""
    n = len(stream.y_true)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    bounds = [0, *cuts, n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        acc = sm.ConfusionMatrix(stream.fixed)
        yt, yp = stream.y_true[lo:hi], stream.y_pred[lo:hi]
        w = None if stream.weights is None else stream.weights[lo:hi]
        mode = data.draw(st.sampled_from(["events", "list", "numpy"]), label="mode")
        if mode == "events":
            for i in range(hi - lo):
                if w is None:
                    acc.update(yt[i], yp[i])
                else:
                    acc.update(yt[i], yp[i], w[i])
        elif mode == "list":
            acc.update_many(yt, yp, w)
        else:
            acc.update_many(np.array(yt), np.array(yp), None if w is None else np.array(w))
        parts.append(acc)
    order = data.draw(st.permutations(range(len(parts))), label="merge order")
    total = sm.ConfusionMatrix(stream.fixed)
    for i in order:
        total.merge(parts[i])
    return total


def run(f, *args, **kwargs):
    """(outcome, warnings): outcome is ("ok", value) or ("raise", "ValueError")."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome = ("ok", f(*args, **kwargs))
        except ValueError:
            outcome = ("raise", "ValueError")
    return outcome, sorted({(w.category.__name__, str(w.message)) for w in caught})


def assert_same(ours, theirs):
    (o_out, o_warn), (t_out, t_warn) = ours, theirs
    assert o_out[0] == t_out[0], (ours, theirs)
    if o_out[0] == "ok":
        a = np.asarray(o_out[1], dtype=float)
        b = np.asarray(t_out[1], dtype=float)
        assert a.shape == b.shape, (a, b)
        assert np.allclose(a, b, rtol=0, atol=1e-12, equal_nan=True), (a, b)
    assert o_warn == t_warn


def sk_kwargs(stream: Stream) -> dict:
    return {"sample_weight": stream.weights}


def labels_arg(stream: Stream, data):
    """None, or a list of labels drawn from the pool (may hold labels never seen)."""
    return data.draw(
        st.none() | st.lists(st.sampled_from(stream.pool), min_size=1, unique=True), label="labels"
    )


# ------------------------------------------------------------------------------ tests
@given(stream=streams(), data=st.data())
def test_set_wise_metrics_match_sklearn(stream, data):
    assume(stream.total > 0)
    cm = accumulate(stream, data)
    average = data.draw(st.sampled_from(AVERAGES), label="average")
    zero_division = data.draw(st.sampled_from(ZERO_DIVISIONS), label="zero_division")
    labels = labels_arg(stream, data)
    pos_label = data.draw(st.sampled_from([1, *stream.pool]), label="pos_label")
    sk_labels = labels if labels is not None else stream.fixed
    common = dict(labels=labels, pos_label=pos_label, average=average, zero_division=zero_division)
    sk_common = dict(common, labels=sk_labels, **sk_kwargs(stream))
    yt, yp = stream.y_true, stream.y_pred
    assert_same(run(cm.precision, **common), run(skm.precision_score, yt, yp, **sk_common))
    assert_same(run(cm.recall, **common), run(skm.recall_score, yt, yp, **sk_common))
    assert_same(run(cm.f1, **common), run(skm.f1_score, yt, yp, **sk_common))
    beta = data.draw(st.sampled_from([0.0, 0.5, 2.0, math.inf]), label="beta")
    assert_same(run(cm.fbeta, beta, **common), run(skm.fbeta_score, yt, yp, beta=beta, **sk_common))
    if not (isinstance(zero_division, float) and math.isnan(zero_division)):
        assert_same(run(cm.jaccard, **common), run(skm.jaccard_score, yt, yp, **sk_common))


@given(stream=streams(), data=st.data())
def test_scalar_metrics_match_sklearn(stream, data):
    assume(stream.total > 0)
    cm = accumulate(stream, data)
    yt, yp, kw = stream.y_true, stream.y_pred, sk_kwargs(stream)
    normalize = data.draw(st.booleans(), label="normalize")
    assert_same(run(cm.accuracy, normalize), run(skm.accuracy_score, yt, yp, normalize=normalize, **kw))
    adjusted = data.draw(st.booleans(), label="adjusted")
    assert_same(
        run(cm.balanced_accuracy, adjusted),
        run(skm.balanced_accuracy_score, yt, yp, adjusted=adjusted, **kw),
    )
    assert_same(run(cm.matthews_corrcoef), run(skm.matthews_corrcoef, yt, yp, **kw))
    weights = data.draw(st.sampled_from([None, "linear", "quadratic"]), label="weights")
    assert_same(
        run(cm.cohen_kappa, weights),
        run(skm.cohen_kappa_score, yt, yp, weights=weights, labels=stream.fixed, **kw),
    )


@given(stream=streams(), data=st.data())
def test_matrix_matches_sklearn(stream, data):
    assume(stream.total > 0)
    cm = accumulate(stream, data)
    labels = labels_arg(stream, data)
    sk_labels = labels if labels is not None else stream.fixed
    ours = run(cm.matrix, labels)
    if sk_labels is not None and not set(sk_labels) & set(stream.y_true):
        # scikit-learn refuses labels none of which is in y_true; we give the (zero) sub-matrix
        assert ours[0][0] == "ok" and not ours[0][1].any()
        return
    assert_same(ours, run(skm.confusion_matrix, stream.y_true, stream.y_pred,
                          labels=sk_labels, **sk_kwargs(stream)))
    assert cm.labels == (stream.fixed if stream.fixed is not None
                         else sorted(set(stream.y_true) | set(stream.y_pred)))


@settings(max_examples=100)
@given(stream=streams(), data=st.data())
def test_classification_report_matches_sklearn(stream, data):
    assume(stream.total > 0)
    cm = accumulate(stream, data)
    labels = labels_arg(stream, data)
    sk_labels = labels if labels is not None else stream.fixed
    zero_division = data.draw(st.sampled_from(ZERO_DIVISIONS), label="zero_division")
    digits = data.draw(st.integers(0, 5), label="digits")
    names = data.draw(st.none() | st.lists(st.sampled_from(["x", "long class name", "é"]), min_size=1,
                                           max_size=6), label="target_names")
    kwargs = dict(zero_division=zero_division, digits=digits, target_names=names)
    # supports print as ints when every weight was 1 (scikit-learn: when sample_weight is None)
    sk_weights = None if stream.weights is not None and set(stream.weights) == {1.0} else stream.weights
    for output_dict in (False, True):
        ours = run(cm.classification_report, output_dict=output_dict, labels=labels, **kwargs)
        theirs = run(skm.classification_report, stream.y_true, stream.y_pred, labels=sk_labels,
                     output_dict=output_dict, sample_weight=sk_weights, **kwargs)
        assert ours[0][0] == theirs[0][0], (ours, theirs)
        assert ours[1] == theirs[1]
        if ours[0][0] == "ok" and output_dict:
            _assert_close_dicts(ours[0][1], theirs[0][1])
        elif ours[0][0] == "ok":
            assert ours[0][1] == theirs[0][1]


def _assert_close_dicts(a, b) -> None:
    assert list(a) == list(b)
    for k in a:
        if isinstance(a[k], dict):
            assert a[k].keys() == b[k].keys()
            for kk in a[k]:
                assert math.isclose(a[k][kk], b[k][kk], abs_tol=1e-12) or (
                    math.isnan(a[k][kk]) and math.isnan(b[k][kk])
                ), (k, kk, a[k][kk], b[k][kk])
        else:
            assert math.isclose(a[k], b[k], abs_tol=1e-12)


# ------------------------------------------------------------------------ specificity
def _specificity_reference(yt, yp, sw, labels, average, zero_division):
    """From first principles: TN/(TN+FP) per class from scikit-learn's 2x2 matrices."""
    mcm = skm.multilabel_confusion_matrix(yt, yp, sample_weight=sw, labels=labels)
    tn, fp = mcm[:, 0, 0].astype(float), mcm[:, 0, 1].astype(float)
    support = (mcm[:, 1, 0] + mcm[:, 1, 1]).astype(float)
    if average == "micro":
        tn, fp = np.array([tn.sum()]), np.array([fp.sum()])
    den = tn + fp
    zd = 0.0 if zero_division == "warn" else float(zero_division)
    values = np.where(den == 0, zd, tn / np.where(den == 0, 1, den))
    if average is None:
        return values
    keep = ~np.isnan(values)
    if not keep.any():
        return math.nan
    if average == "weighted" and support[keep].sum() > 0:
        return float(np.average(values[keep], weights=support[keep]))
    return float(np.mean(values[keep]))


@given(stream=streams(), data=st.data())
def test_specificity_from_first_principles(stream, data):
    assume(stream.total > 0)
    cm = accumulate(stream, data)
    average = data.draw(st.sampled_from(["micro", "macro", "weighted", None]), label="average")
    zero_division = data.draw(st.sampled_from(ZERO_DIVISIONS), label="zero_division")
    labels = cm.labels if data.draw(st.booleans()) else data.draw(
        st.lists(st.sampled_from(stream.pool), min_size=1, unique=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = cm.specificity(labels=labels, average=average, zero_division=zero_division)
    expected = _specificity_reference(stream.y_true, stream.y_pred, stream.weights, labels,
                                      average, zero_division)
    assert np.allclose(ours, expected, rtol=0, atol=1e-12, equal_nan=True)
    warned = any(issubclass(w.category, sm.UndefinedMetricWarning) for w in caught)
    mcm = skm.multilabel_confusion_matrix(stream.y_true, stream.y_pred,
                                          sample_weight=stream.weights, labels=labels)
    den = mcm[:, 0, 0] + mcm[:, 0, 1]
    ill_defined = (den.sum() == 0) if average == "micro" else (den == 0).any()
    assert warned == bool(zero_division == "warn" and ill_defined)


@given(stream=streams(), data=st.data())
def test_binary_specificity_is_recall_of_the_other_label(stream, data):
    present = sorted(set(stream.y_true) | set(stream.y_pred))
    assume(len(present) == 2 and stream.total > 0)
    cm = accumulate(stream, data)
    a, b = present
    zero_division = data.draw(st.sampled_from(ZERO_DIVISIONS), label="zero_division")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pos, neg in ((a, b), (b, a)):
            spec = cm.specificity(pos_label=pos, zero_division=zero_division)
            rec = skm.recall_score(stream.y_true, stream.y_pred, pos_label=neg,
                                   sample_weight=stream.weights, zero_division=zero_division)
            assert np.allclose(spec, rec, rtol=0, atol=1e-12, equal_nan=True)


# --------------------------------------------------------------------- state identity
@given(stream=streams(min_size=0), data=st.data())
def test_split_merge_and_json_round_trip_give_the_whole_stream_state(stream, data):
    whole = sm.ConfusionMatrix(stream.fixed)
    for i, (t, p) in enumerate(zip(stream.y_true, stream.y_pred)):
        whole.update(t, p, 1.0 if stream.weights is None else stream.weights[i])
    batch = sm.ConfusionMatrix(stream.fixed).update_many(stream.y_true, stream.y_pred, stream.weights)
    split = accumulate(stream, data)
    assert whole.to_dict() == batch.to_dict() == split.to_dict()
    text = json.dumps(split.to_dict(), allow_nan=False)
    back = sm.from_dict(json.loads(text))
    assert back == whole and back.to_dict() == whole.to_dict()
    assert back.count == len(stream.y_true) and back.total_weight == stream.total
    if stream.total > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert back.f1(average="macro") == whole.f1(average="macro")
            assert back.classification_report() == whole.classification_report()


@settings(max_examples=50)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4),
                       st.floats(0, 1e3, allow_nan=False, allow_infinity=False)), min_size=1, max_size=60)
)
def test_arbitrary_float_weights_agree_within_rounding(events):
    yt, yp, w = (list(x) for x in zip(*events))
    assume(sum(w) > 0)
    one = sm.ConfusionMatrix()
    for t, p, x in events:
        one.update(t, p, x)
    batch = sm.ConfusionMatrix().update_many(yt, yp, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.allclose(one.matrix(), batch.matrix(), rtol=1e-12)
        for avg in ("micro", "macro", "weighted"):
            ref = skm.f1_score(yt, yp, average=avg, sample_weight=w)
            assert abs(one.f1(average=avg) - ref) <= 1e-12
            assert abs(batch.f1(average=avg) - ref) <= 1e-12
        ref = skm.matthews_corrcoef(yt, yp, sample_weight=w)
        assert abs(one.matthews_corrcoef() - ref) <= mcc_rounding_bound(yt, yp, w)


def mcc_rounding_bound(yt, yp, w) -> float:
    """How far two float evaluations of the Matthews formula may differ on these events.

    The formula ``(n*c - t.p) / sqrt((n^2 - p.p)(n^2 - t.t))`` subtracts terms of size n^2, so
    each of its three differences carries an absolute rounding error of a few eps * n^2 (n the
    total weight); with |MCC| <= 1 the result then moves by at most about
    eps * n^2 * (1/var_t + 1/var_p + 1/sqrt(var_t*var_p)), var_* the exact variances (exact
    rational arithmetic on the float weights). On a well-conditioned matrix this is below 1e-12;
    on a nearly one-class one (a weight of 1e-313 in a class of its own) both answers are noise
    and only the bound says so."""
    from fractions import Fraction

    true: dict = {}
    pred: dict = {}
    for t, p, x in zip(yt, yp, w):
        true[t] = true.get(t, Fraction(0)) + Fraction(x)
        pred[p] = pred.get(p, Fraction(0)) + Fraction(x)
    n = sum(true.values(), Fraction(0))
    var_t = n * n - sum(v * v for v in true.values())
    var_p = n * n - sum(v * v for v in pred.values())
    if var_t == 0 or var_p == 0:
        return 1e-12  # one class on a side: both must say exactly 0.0 (up to the base tolerance)
    scale = 64 * Fraction(np.finfo(float).eps) * n * n
    sqrt_product = math.sqrt(float(var_t)) * math.sqrt(float(var_p))  # each factor may underflow
    if sqrt_product == 0:
        return math.inf  # a variance below the float range: any float answer is noise
    try:
        return 1e-12 + float(scale / var_t + scale / var_p) + float(scale) / sqrt_product
    except OverflowError:
        return math.inf


def test_mcc_of_a_nearly_one_class_matrix_is_rounding_noise_in_any_float_formula():
    """A class holding only a subnormal weight: the exact MCC is about 1.5e-158, scikit-learn's
    float formula says 0.0 and the correctly rounded sums give 1.3e-9; both are inside the rounding
    bound, and the bound is not vacuous for a well-conditioned matrix of the same size."""
    yt, yp, w = [0, 1, 1, 1], [0, 0, 0, 1], [2.2250738585e-313, 31.0, 1e-09, 1.0]
    cm = sm.ConfusionMatrix().update_many(yt, yp, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, ref = cm.matthews_corrcoef(), skm.matthews_corrcoef(yt, yp, sample_weight=w)
    assert abs(got - ref) <= mcc_rounding_bound(yt, yp, w)
    assert mcc_rounding_bound([0, 0, 1, 1], [0, 1, 1, 0], [1.0, 2.0, 3.0, 4.0]) < 1e-11


# -------------------------------------------------------------------- fixed examples
def test_mcc_uses_the_multiclass_formula_where_river_is_binary_only():
    yt = [0, 0, 1, 1, 2, 2]
    yp = [0, 0, 1, 2, 2, 2]
    cm = sm.ConfusionMatrix().update_many(yt, yp)
    assert cm.matthews_corrcoef() == pytest.approx(skm.matthews_corrcoef(yt, yp), abs=1e-12)


def test_report_prints_micro_avg_when_labels_leave_out_a_present_class():
    cm = sm.ConfusionMatrix().update_many([0, 1, 2], [0, 1, 0])
    text = cm.classification_report(labels=[0, 1])
    assert "micro avg" in text and "accuracy" not in text
    assert text == skm.classification_report([0, 1, 2], [0, 1, 0], labels=[0, 1])


def test_weighted_report_support_is_float_like_sklearn():
    yt, yp, w = [0, 1, 1], [0, 1, 0], [0.5, 1.0, 2.0]
    cm = sm.ConfusionMatrix().update_many(yt, yp, w)
    assert cm.classification_report() == skm.classification_report(yt, yp, sample_weight=w)


# weights spanning magnitudes: tn = total - tp - fp - fn in floats lost a tn (or fp) that is small
# next to the total (1e-7 relative error for tn = 1e-6 beside weights of 1e3; nan for 5e-324)
spread_weights = st.one_of(st.sampled_from([1e-6, 5e-324, 1e-300, 1e3, 1.0, 0.3, 1e15]), st.floats(1e-9, 1e9))


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1), spread_weights), min_size=1, max_size=30))
def test_specificity_is_recall_of_the_other_label_with_spread_weights(events):
    yt, yp, w = (list(x) for x in zip(*events))
    assume(len(set(yt) | set(yp)) == 2)
    cm = sm.ConfusionMatrix().update_many(yt, yp, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pos, neg in ((0, 1), (1, 0)):
            spec = cm.specificity(pos_label=pos, zero_division=math.nan)
            tn = math.fsum(x for t, p, x in events if t == neg and p == neg)
            den = math.fsum(x for t, _, x in events if t == neg)
            want = tn / den if den else math.nan
            assert spec == pytest.approx(want, rel=1e-14, abs=0, nan_ok=True)
            assert spec == pytest.approx(skm.recall_score(yt, yp, pos_label=neg, sample_weight=w,
                                                          zero_division=math.nan), rel=1e-12, abs=1e-300, nan_ok=True)


def test_specificity_keeps_a_small_true_negative_weight():
    y, p, w = [0, 1, 1, 0], [0, 1, 0, 1], [1e-6, 1000.1, 999.7, 0.3]
    cm = sm.ConfusionMatrix().update_many(y, p, w)
    assert cm.specificity() == 1e-6 / (1e-6 + 0.3) == skm.recall_score(y, p, pos_label=0, sample_weight=w)
    cm = sm.ConfusionMatrix().update_many([0, 1, 1], [0, 1, 0], [5e-324, 0.1, 0.1])
    assert cm.specificity(zero_division=math.nan) == 1.0  # (was: nan, tn + fp computed as 0)
