"""Intervals of the confusion-matrix metrics of ``K`` classes (issue 26 point 1: balanced
accuracy, macro precision and recall, weighted F1, Matthews, Cohen's kappa): the delta method's
value and gradient against scikit-learn and central differences, the minimum rule, and equality
on every path (per event, batch, merge in any order, round trip, folded labels); RMSE, top-k
accuracy and the one-vs-rest ROC AUC means (point 2)."""
from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.kernels import intervals as iv
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.metrics.regression import Regression
from streammetrics.monitors.labels import LABEL_INTERVALS, LabelMonitor
from streammetrics.monitors.multiclass import MULTICLASS_INTERVALS, MulticlassMonitor


def _labels(n: int, seed: int, k: int = 3, right: float = 0.7) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    y = [rng.randrange(k) for _ in range(n)]
    return y, [t if rng.random() < right else rng.randrange(k) for t in y]


def _sklearn(y: list[int], p: list[int]) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"balanced_accuracy": skm.balanced_accuracy_score(y, p),
                "macro_precision": skm.precision_score(y, p, average="macro", zero_division=np.nan),
                "macro_recall": skm.recall_score(y, p, average="macro", zero_division=np.nan),
                "weighted_f1": skm.f1_score(y, p, average="weighted", zero_division=np.nan),
                "matthews_corrcoef": skm.matthews_corrcoef(y, p),
                "cohen_kappa": skm.cohen_kappa_score(y, p)}


@pytest.mark.parametrize("seed", range(4))
def test_value_matches_sklearn_and_gradient_matches_central_differences(seed: int) -> None:
    y, p = _labels(400, seed, k=4, right=0.5)
    c = skm.confusion_matrix(y, p).astype(float)
    shares = c / c.sum()
    want = _sklearn(y, p)
    for metric in iv.MATRIX_INTERVALS:
        value, grad, _ = iv.matrix_value_gradient(shares, metric)
        assert value == pytest.approx(want[metric], abs=1e-12), metric
        h = 1e-7
        numeric = np.zeros_like(shares)
        for i in range(4):
            for j in range(4):
                up, down = shares.copy(), shares.copy()
                up[i, j] += h
                down[i, j] -= h
                numeric[i, j] = (iv.matrix_value_gradient(up, metric)[0]
                                 - iv.matrix_value_gradient(down, metric)[0]) / (2 * h)
        assert np.allclose(grad, numeric, atol=1e-6), metric
        lo, hi = iv.matrix_interval(c, metric)
        assert lo <= value <= hi


def test_minimum_rule() -> None:
    c = np.array([[40.0, 5, 5], [4, 30, 6], [3, 7, 20]])
    assert all(iv.matrix_interval(c, m) is not None for m in iv.MATRIX_INTERVALS)
    few_true = c.copy()
    few_true[2] = [1, 2, 6]  # 9 events of class 2: every metric averaging over true classes has none
    got = {m: iv.matrix_interval(few_true, m) for m in iv.MATRIX_INTERVALS}
    assert [m for m, v in got.items() if v is None] == ["balanced_accuracy", "macro_recall", "weighted_f1",
                                                        "matthews_corrcoef", "cohen_kappa"]
    few_pred = np.array([[50.0, 0, 5], [5, 5, 50], [5, 3, 60]])  # predicted class 1: 8 events
    assert iv.matrix_interval(few_pred, "macro_precision") is None
    assert iv.matrix_interval(few_pred, "macro_recall") is not None
    assert iv.matrix_interval(np.eye(3) * 9, "macro_recall") is None  # fewer than 30 events
    with pytest.raises(ValueError, match="metric"):
        iv.matrix_interval(c, "kappa")


def test_label_monitor_lists_every_metric() -> None:
    y, p = _labels(600, 3, k=3)
    rec = LabelMonitor().update_many([{"y_true": a, "y_pred": b} for a, b in zip(y, p)]).intervals()
    assert rec is not None and rec["insufficient"] == []
    assert list(rec["intervals"])[1:] == list(LABEL_INTERVALS)
    for m in iv.MATRIX_INTERVALS:
        lo, hi = rec["intervals"][m]
        assert lo < _sklearn(y, p)[m] < hi


def test_weighted_kish_and_weighted_without_squares() -> None:
    y, p = _labels(300, 5)
    unit = ConfusionMatrix().update_many(y, p)
    doubled = ConfusionMatrix().update_many(y, p, [2.0] * len(y))
    for m in iv.MATRIX_INTERVALS:
        assert doubled.interval(m) == pytest.approx(unit.interval(m), abs=1e-12), m


def test_folded_labels_do_not_crash() -> None:
    rng = random.Random(7)
    names = [f"l{i}" for i in range(12)]
    evs = []
    for _ in range(800):
        t = names[min(int(rng.expovariate(0.4)), 11)]
        evs.append({"y_true": t, "y_pred": t if rng.random() < 0.7 else rng.choice(names)})
    m = LabelMonitor(max_labels=4).update_many(evs)
    rec = m.intervals()
    snap = m.snapshot()
    assert rec is not None
    for name in LABEL_INTERVALS:
        pair = rec["intervals"][name]
        assert (pair is None) == (name in rec["insufficient"])
        if pair is not None and snap[name] is not None:
            assert pair[0] <= snap[name] <= pair[1], name


@settings(max_examples=20, deadline=None)
@given(st.integers(40, 400), st.integers(0, 10_000), st.sampled_from([3, 4]), st.booleans())
def test_equal_on_every_path(n: int, seed: int, k: int, weighted: bool) -> None:
    y, p = _labels(n, seed, k)
    rng = random.Random(seed)
    w = [rng.choice([0.5, 1.0, 2.0, 3.25]) for _ in y] if weighted else None
    whole = ConfusionMatrix().update_many(y, p, w)
    per_event = ConfusionMatrix()
    for i in range(n):
        per_event.update(y[i], p[i], 1.0 if w is None else w[i])
    order = list(range(n))
    rng.shuffle(order)
    parts = [ConfusionMatrix() for _ in range(rng.randint(2, 4))]
    for j, part in enumerate(parts):
        idx = order[j::len(parts)]
        part.update_many([y[i] for i in idx], [p[i] for i in idx], None if w is None else [w[i] for i in idx])
    rng.shuffle(parts)
    merged = parts[0]
    for part in parts[1:]:
        merged = merged + part
    trip = sm.from_dict(json.loads(json.dumps(whole.to_dict())))
    for m in iv.MATRIX_INTERVALS:
        want = whole.interval(m)
        assert per_event.interval(m) == want, m
        assert merged.interval(m) == want, m
        assert trip.interval(m) == want, m


# ---------------------------------------------------------------------------- point 2
def _scored(n: int, seed: int, k: int = 3) -> tuple[list[int], np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    logits = rng.normal(0.0, 1.0, (n, k)) + 1.2 * np.eye(k)[y]
    s = np.round(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True), 3)  # (ties across levels)
    return y.tolist(), s


def test_rmse_interval_is_the_mse_interval_square_rooted() -> None:
    rng = random.Random(4)
    yt = [rng.gauss(0, 1) for _ in range(200)]
    r = Regression().update_many(yt, [v + rng.gauss(0, 0.5) for v in yt])
    lo, hi = r.interval("mse")
    assert r.interval("rmse") == (lo ** 0.5, hi ** 0.5)
    assert Regression().update_many(yt[:10], yt[:10]).interval("rmse") is None


def test_top_k_and_ovr_auc_intervals() -> None:
    y, s = _scored(900, 1)
    sc = MulticlassScores([0, 1, 2]).update_many(y, s)
    hits = skm.top_k_accuracy_score(y, s, k=2, labels=[0, 1, 2]) * 900
    assert sc.interval("top_k_accuracy", k=2) == iv.wilson(round(hits), 900)
    per_class = [BinaryScores().update_many([int(t == c) for t in y], s[:, c]).interval("roc_auc") for c in range(3)]
    lo, hi = sc.interval("roc_auc")
    assert lo == pytest.approx(np.mean([p[0] for p in per_class]), abs=1e-12)
    assert hi == pytest.approx(np.mean([p[1] for p in per_class]), abs=1e-12)
    assert lo < np.mean([skm.roc_auc_score([int(t == c) for t in y], s[:, c]) for c in range(3)]) < hi
    prev = np.bincount(y) / len(y)
    wlo, whi = sc.interval("roc_auc", average="weighted")
    assert wlo == pytest.approx(float(np.dot(prev, [p[0] for p in per_class])), abs=1e-12)
    assert whi == pytest.approx(float(np.dot(prev, [p[1] for p in per_class])), abs=1e-12)
    few = MulticlassScores([0, 1, 2]).update_many(y[:40], s[:40])  # fewer than 20 of some class
    assert few.interval("roc_auc") is None
    assert MulticlassScores([0, 1, 2]).update_many(y, s, [2.0] * 900).interval("roc_auc") is None  # no w^2 kept
    with pytest.raises(ValueError, match="metric"):
        sc.interval("log_loss")


@settings(max_examples=10, deadline=None)
@given(st.integers(60, 500), st.integers(0, 10_000))
def test_multiclass_monitor_intervals_equal_on_every_path(n: int, seed: int) -> None:
    y, s = _scored(n, seed)
    evs = [{"y_true": t, "scores": row.tolist()} for t, row in zip(y, s)]
    want = MulticlassMonitor([0, 1, 2]).update_many(evs).intervals()
    assert want is not None and list(want["intervals"])[1:] == list(MULTICLASS_INTERVALS)
    per_event = MulticlassMonitor([0, 1, 2])
    for e in evs:
        per_event.update(e)
    assert per_event.intervals() == want
    rng = random.Random(seed)
    order = list(range(n))
    rng.shuffle(order)
    parts = [MulticlassMonitor([0, 1, 2]).update_many([evs[i] for i in order[j::3]]) for j in range(3)]
    rng.shuffle(parts)
    assert (parts[0] + parts[1] + parts[2]).intervals() == want
    assert sm.from_dict(json.loads(json.dumps(per_event.to_dict()))).intervals() == want
