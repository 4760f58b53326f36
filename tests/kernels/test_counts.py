"""kernels.counts == scikit-learn (|diff| <= 1e-12, None where scikit-learn gives NaN or raises
on all-zero weights) on hypothesis streams: unit, dyadic (exact sums, including zeros) and
arbitrary positive weights, one-class and empty-class streams; and == the values the
monitors report today through ConfusionMatrix (so wiring it in changes no snapshot)."""
from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from streammetrics.kernels.counts import (
    BINARY_METRICS,
    binary_confusion_metrics,
    label_metrics,
    one_class,
)
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.labels import label_metrics as monitor_label_metrics

DYADIC = [0.0, 0.5, 1.0, 2.0, 3.25]
TOL = 1e-12

weights_kind = st.sampled_from(["unit", "dyadic", "float"])


@st.composite
def streams(draw, k: int | None = None):
    """(y_true, y_pred, weights or None, k): labels 0..k-1, possibly missing classes.

    Arbitrary float weights come compressed to one event per occupied cell (weight: the
    cell's sum), so that scikit-learn sums the same cell weights: otherwise the two
    summation orders differ in the last bits, which the ill-conditioned covariances of the
    Matthews correlation amplify beyond 1e-12 (for the monitors as much as for this kernel)."""
    k = draw(st.integers(2, 6)) if k is None else k
    n = draw(st.integers(0, 40))
    labels = st.integers(0, k - 1)
    # sometimes restrict the classes that occur, for absent-class / one-class streams
    pool_t = draw(st.lists(labels, min_size=1, max_size=k, unique=True))
    pool_p = draw(st.lists(labels, min_size=1, max_size=k, unique=True))
    y_true = draw(st.lists(st.sampled_from(pool_t), min_size=n, max_size=n))
    y_pred = draw(st.lists(st.sampled_from(pool_p), min_size=n, max_size=n))
    kind = draw(weights_kind)
    if kind == "unit":
        w = None
    elif kind == "dyadic":
        w = draw(st.lists(st.sampled_from(DYADIC), min_size=n, max_size=n))
    else:
        w = draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 1e3)), min_size=n, max_size=n))
        sums: dict[tuple[int, int], list[float]] = {}
        for t, p, wi in zip(y_true, y_pred, w):
            sums.setdefault((t, p), []).append(wi)
        y_true = [t for t, _ in sums]
        y_pred = [p for _, p in sums]
        w = [math.fsum(v) for v in sums.values()]
    return y_true, y_pred, w, k


def cells(y_true, y_pred, w, k) -> list[list[float]]:
    m = [[[] for _ in range(k)] for _ in range(k)]
    for i, (t, p) in enumerate(zip(y_true, y_pred)):
        m[t][p].append(1.0 if w is None else w[i])
    return [[math.fsum(c) for c in row] for row in m]


def sk(fn, *args, **kwargs):
    """scikit-learn's value, None for NaN or when it refuses the input (no weight)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            v = float(fn(*args, **kwargs))
        except (ValueError, ZeroDivisionError):
            return None
    return None if math.isnan(v) else v


def same(ours, ref, name, tol=TOL):
    """Equal to ``tol``, relative for values above 1 (supports are sums of weights, whose last
    bit depends on the summation order)."""
    if ref is None or ours is None:
        assert ours is None and ref is None, (name, ours, ref)
    else:
        assert abs(ours - ref) <= tol * max(1.0, abs(ref)), (name, ours, ref)


def mcc_tolerance(matrix, w) -> float:
    """1e-12, plus for arbitrary float weights the rounding of scikit-learn's covariance
    formula (n^2 - sum of squares cancels): a few eps * n^2 over the covariances. With unit
    or dyadic weights every step is exact and the values must agree to 1e-12."""
    if w is None or all(v in DYADIC for v in w):
        return TOL
    t = [math.fsum(row) for row in matrix]
    p = [math.fsum(col) for col in zip(*matrix)]
    n = math.fsum(t)
    ypyp = n * n - math.fsum(x * x for x in p)
    ytyt = n * n - math.fsum(x * x for x in t)
    if ypyp <= 0 or ytyt <= 0:
        return TOL
    return TOL + 16 * 2.0**-52 * n * n * (1 / math.sqrt(ypyp * ytyt) + 1 / ypyp + 1 / ytyt)


def mcc_expected(matrix, sklearn_value):
    """scikit-learn's MCC, except that a one-class matrix is 0.0 as it defines it (its float
    formula can leave rounding noise or NaN there with arbitrary float weights)."""
    t = [math.fsum(row) for row in matrix]
    p = [math.fsum(col) for col in zip(*matrix)]
    return 0.0 if one_class(t, p) else sklearn_value


def has_weight(w, n) -> bool:
    return n > 0 and (w is None or sum(w) > 0)


@given(streams(k=2))
def test_binary_matches_sklearn(stream):
    y, p, w, _ = stream
    matrix = cells(y, p, w, 2)
    (tn, fp), (fn, tp) = matrix
    ours = binary_confusion_metrics(tn, fp, fn, tp)
    assert tuple(ours) == BINARY_METRICS
    if not has_weight(w, len(y)):
        assert all(v is None for v in ours.values())
        return
    kw = {"sample_weight": w, "zero_division": np.nan}
    same(ours["accuracy"], sk(skm.accuracy_score, y, p, sample_weight=w), "accuracy")
    same(ours["balanced_accuracy"], sk(skm.balanced_accuracy_score, y, p, sample_weight=w), "balanced")
    same(ours["precision"], sk(skm.precision_score, y, p, **kw), "precision")
    same(ours["recall"], sk(skm.recall_score, y, p, **kw), "recall")
    same(ours["f1"], sk(skm.f1_score, y, p, **kw), "f1")
    same(ours["specificity"], sk(skm.recall_score, y, p, pos_label=0, **kw), "specificity")
    same(ours["matthews_corrcoef"], mcc_expected(matrix, sk(skm.matthews_corrcoef, y, p, sample_weight=w)), "mcc",
         mcc_tolerance(matrix, w))
    ww = np.ones(len(y)) if w is None else np.asarray(w)
    same(ours["positive_rate"], float(np.dot(ww, y) / ww.sum()), "positive_rate")
    same(ours["predicted_positive_rate"], float(np.dot(ww, p) / ww.sum()), "predicted_positive_rate")


@given(streams(k=2), st.floats(0.0, 1.0))
def test_binary_matches_the_monitor(stream, threshold):
    """Same values as BinaryMonitor.snapshot() computes through ConfusionMatrix today."""
    y, p, w, _ = stream
    monitor = BinaryMonitor(threshold=threshold)
    for i, (t, q) in enumerate(zip(y, p)):
        # a score on the right side of the threshold reproduces the predicted label
        score = 1.0 if q else (threshold / 2 if threshold > 0 else -1.0)
        if q == 0 and threshold == 0:
            continue  # nothing scores below a 0 threshold in [0, 1]
        monitor.update({"y_true": t, "score": score, **({} if w is None else {"weight": w[i]})})
    snap = monitor.snapshot()
    m = monitor.confusion.matrix([0, 1])
    ours = binary_confusion_metrics(float(m[0, 0]), float(m[0, 1]), float(m[1, 0]), float(m[1, 1]))
    for name in BINARY_METRICS:
        tol = mcc_tolerance(m.tolist(), w) if name == "matthews_corrcoef" else TOL
        same(ours[name], snap[name], name, tol)


@given(streams())
def test_label_metrics_match_sklearn(stream):
    y, p, w, k = stream
    labels = list(range(k))
    matrix = cells(y, p, w, k)
    ours = label_metrics(matrix)
    if not has_weight(w, len(y)):
        assert all(v is None for name, v in ours.items() if name != "per_class")
        return
    kw = {"sample_weight": w, "zero_division": np.nan, "labels": labels}
    same(ours["accuracy"], sk(skm.accuracy_score, y, p, sample_weight=w), "accuracy")
    same(ours["balanced_accuracy"], sk(skm.balanced_accuracy_score, y, p, sample_weight=w), "balanced")
    same(ours["macro_precision"], sk(skm.precision_score, y, p, average="macro", **kw), "macro_precision")
    same(ours["macro_recall"], sk(skm.recall_score, y, p, average="macro", **kw), "macro_recall")
    same(ours["macro_f1"], sk(skm.f1_score, y, p, average="macro", **kw), "macro_f1")
    same(ours["weighted_f1"], sk(skm.f1_score, y, p, average="weighted", **kw), "weighted_f1")
    same(ours["matthews_corrcoef"], mcc_expected(matrix, sk(skm.matthews_corrcoef, y, p, sample_weight=w)), "mcc",
         mcc_tolerance(matrix, w))
    same(ours["cohen_kappa"], sk(skm.cohen_kappa_score, y, p, sample_weight=w, labels=labels), "kappa")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prec, rec, f1, support = skm.precision_recall_fscore_support(y, p, average=None, **kw)
    per = ours["per_class"]
    for i in range(k):
        same(per["precision"][i], None if np.isnan(prec[i]) else float(prec[i]), f"precision[{i}]")
        same(per["recall"][i], None if np.isnan(rec[i]) else float(rec[i]), f"recall[{i}]")
        same(per["f1"][i], None if np.isnan(f1[i]) else float(f1[i]), f"f1[{i}]")
        same(per["support"][i], float(support[i]), f"support[{i}]")


@given(streams())
def test_label_metrics_match_the_monitors(stream):
    """Same values as the multiclass/label monitors' label_metrics (through ConfusionMatrix)."""
    y, p, w, k = stream
    labels = list(range(k))
    cm = ConfusionMatrix(labels=labels)
    if y:
        cm.update_many(y, p, w)
    ref = monitor_label_metrics(cm, labels)
    matrix = cells(y, p, w, k)
    ours = label_metrics(matrix)
    for name, value in ours.items():
        if name != "per_class":
            same(value, ref[name], name, mcc_tolerance(matrix, w) if name == "matthews_corrcoef" else TOL)


def test_undefined_cases():
    none = binary_confusion_metrics(0.0, 0.0, 0.0, 0.0)
    assert none == dict.fromkeys(BINARY_METRICS)
    only_negatives = binary_confusion_metrics(4.0, 0.0, 0.0, 0.0)
    assert only_negatives["accuracy"] == 1.0 and only_negatives["specificity"] == 1.0
    assert only_negatives["precision"] is None and only_negatives["recall"] is None
    assert only_negatives["f1"] is None and only_negatives["matthews_corrcoef"] == 0.0
    all_wrong = binary_confusion_metrics(0.0, 3.0, 2.0, 0.0)
    assert all_wrong["precision"] == 0.0 and all_wrong["f1"] == 0.0 and all_wrong["matthews_corrcoef"] == -1.0
    one = label_metrics([[0.0, 0.0], [0.0, 5.0]])
    assert one["cohen_kappa"] is None and one["macro_precision"] == 1.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 40)] * 4).filter(lambda c: sum(c) > 0), min_size=1, max_size=30))
def test_binary_confusion_columns_are_the_scalar_twins_values(rows):
    """The vectorised twin gives, row by row, the scalar twin's values (the same floats) and
    None in the same places."""
    import numpy as np

    from streammetrics.kernels.counts import binary_confusion_columns, binary_confusion_metrics

    cols = binary_confusion_columns(*(np.array([r[i] for r in rows]) for i in range(4)))
    for j, (tn, fp, fn, tp) in enumerate(rows):
        got = {k: None if undefined is not None and undefined[j] else float(values[j])
               for k, (values, undefined) in cols.items()}
        assert got == binary_confusion_metrics(float(tn), float(fp), float(fn), float(tp))
