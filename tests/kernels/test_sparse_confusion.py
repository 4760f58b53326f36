"""Parity table of the sparse-confusion twins, scikit-learn parity beyond the dense twin's
range, and memory: metrics of many labels never allocate K x K (issue 30, finding 1)."""
from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.kernels import sparse_confusion as sc


def _run(f, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = f(*args)
    return value, sorted({(w.category.__name__, str(w.message)) for w in caught})


@pytest.mark.parametrize("kind", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(40))
def test_dense_and_sparse_kappa_agree(kind, seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 12))
    n = int(rng.integers(1, 30))
    support = rng.choice(k, size=int(rng.integers(1, k + 1)), replace=False)  # some labels never occur
    rows = rng.choice(support, size=n)
    cols = rng.choice(support, size=n) if seed % 5 else rows.copy()
    weights = rng.choice([0.0, 0.5, 1.0, 2.0, 3.25], size=n) if seed % 3 else rng.random(n)
    dense = _run(sc.kappa_dense, rows, cols, weights, k, kind)
    sparse = _run(sc.kappa_sparse, rows, cols, weights, k, kind)
    assert dense[1] == sparse[1]
    assert np.allclose(dense[0], sparse[0], rtol=1e-12, atol=1e-12, equal_nan=True), (dense, sparse)


def test_undefined_kappa_agrees():
    one = np.array([2]), np.array([2]), np.array([1.0])
    none = np.array([], dtype=np.intp), np.array([], dtype=np.intp), np.array([])
    for cells in (one, none):
        for kind in (None, "linear", "quadratic"):
            d, s = _run(sc.kappa_dense, *cells, 5, kind), _run(sc.kappa_sparse, *cells, 5, kind)
            assert np.isnan(d[0]) and np.isnan(s[0]) and d[1] == s[1] and d[1]


@pytest.mark.parametrize("seed", range(6))
def test_many_labels_match_sklearn(seed):
    """K above DENSE_MAX: the sparse twin against scikit-learn itself."""
    rng = np.random.default_rng(seed)
    k = sc.DENSE_MAX + 40
    yt = rng.integers(0, k, 400)
    yp = np.where(rng.random(400) < 0.6, yt, rng.integers(0, k, 400))
    w = None if seed % 2 else rng.choice([0.5, 1.0, 2.0], 400)
    cm = sm.ConfusionMatrix().update_many(yt, yp, w)
    assert len(cm.labels) > sc.DENSE_MAX
    for kind in (None, "linear", "quadratic"):
        assert cm.cohen_kappa(kind) == pytest.approx(skm.cohen_kappa_score(yt, yp, weights=kind, sample_weight=w),
                                                     abs=1e-12)
    assert cm.matthews_corrcoef() == pytest.approx(skm.matthews_corrcoef(yt, yp, sample_weight=w), abs=1e-12)
    for adjusted in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = skm.balanced_accuracy_score(yt, yp, sample_weight=w, adjusted=adjusted)
            got = cm.balanced_accuracy(adjusted)
        assert got == pytest.approx(want, abs=1e-12)
    assert np.allclose(cm.support(), skm.confusion_matrix(yt, yp, sample_weight=w).sum(axis=1), atol=1e-12)


def test_snapshot_of_many_labels_stays_small():
    """4,000 events with 8,000 distinct labels: a K x K matrix would be 512 MB; every metric of
    the LabelMonitor snapshot stays far below (was: cohen_kappa's outer product and matrix())."""
    n = 4000
    m = sm.LabelMonitor()
    m.update_many([{"y_true": f"t{i}", "y_pred": f"p{i}"} for i in range(n)])
    tracemalloc.start()
    try:
        snap = m.snapshot()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak  # 2 K^2 * 8 bytes = 512 MB with a dense matrix
    assert snap["accuracy"] == 0.0 and snap["cohen_kappa"] is not None
    assert len(snap["per_class"]) == 2 * n
