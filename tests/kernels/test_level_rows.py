"""The vectorised twins over rows of levels (many windows at once) equal the scalar kernels bit
for bit, row by row: ``ranking.roc_auc_rows``, ``calibration.calibration_error_rows``,
``cbpe.estimated_rows`` and ``levels.row_sums`` (numpy's pairwise sums depend on the length)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from streammetrics.kernels import calibration, cbpe, ranking
from streammetrics.kernels.levels import row_sums


def _rows(rng: np.random.Generator, lengths: list[int], counts: bool = True):
    width = max(lengths)
    x = np.zeros((len(lengths), width))
    neg, pos = np.zeros_like(x), np.zeros_like(x)
    for i, m in enumerate(lengths):
        x[i, :m] = np.sort(rng.choice(np.round(rng.random(4 * m + 4), 4), m, replace=False))
        if counts:
            neg[i, :m], pos[i, :m] = rng.integers(0, 4, m), rng.integers(0, 3, m)
        else:
            neg[i, :m], pos[i, :m] = rng.random(m), rng.random(m)
        neg[i, 0] += 1  # (some weight)
    return x, neg, pos, np.array(lengths)


LENGTHS = [1, 2, 3, 5, 7, 8, 9, 16, 17, 64, 129, 300]


def test_row_sums_are_numpys_sums():
    rng = np.random.default_rng(0)
    x = rng.random((40, 300)) * 10.0 ** rng.integers(-8, 8, (40, 300))
    n = rng.integers(0, 301, 40)
    assert row_sums(x, n).tolist() == [float(np.sum(x[i, :m])) for i, m in enumerate(n.tolist())]


@pytest.mark.parametrize("counts", [True, False])
def test_roc_auc_rows(counts):
    rng = np.random.default_rng(1)
    _, neg, pos, n = _rows(rng, LENGTHS, counts)
    pos[:, 0] += 1
    neg[3, 1] = pos[3, 1] = 0.0  # an empty level
    got = ranking.roc_auc_rows(neg, pos, n).tolist()
    assert got == [ranking.roc_auc(neg[i, :m], pos[i, :m]) for i, m in enumerate(n.tolist())]


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("counts", [True, False])
def test_calibration_error_rows(norm, counts):
    rng = np.random.default_rng(2)
    x, neg, pos, n = _rows(rng, LENGTHS, counts)
    x[4, 2] = 1.0  # a score of exactly 1: its own bucket
    x[5, 0] = -0.5  # outside [0, 1]: nan
    got = calibration.calibration_error_rows(x, neg, pos, n, 7, norm)
    for i, m in enumerate(n.tolist()):
        if i == 5:
            assert np.isnan(got[i])
            continue
        assert got[i] == calibration.calibration_error(x[i, :m], neg[i, :m], pos[i, :m], 7, norm)


@pytest.mark.parametrize("blocks", [1, 6])
def test_estimated_rows(blocks):
    rng = np.random.default_rng(3)
    x, neg, pos, n = _rows(rng, LENGTHS + [40, 60, 200])
    w = neg + pos
    c = np.clip(x * 1.2 - 0.1, 0.0, 1.0)
    c[2] = 1.0  # every calibrated probability 1: no ROC AUC
    predicted = x >= 0.5
    block = np.minimum((x * blocks).astype(np.int64), blocks - 1)
    block_var = rng.random(blocks) / 100
    got = cbpe.estimated_rows(c, w, predicted, n, 1.96, block, block_var, 5000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, m in enumerate(n.tolist()):
            ci, wi, pi = c[i, :m], w[i, :m], predicted[i, :m]
            est = {"estimated_roc_auc": cbpe.estimated_roc_auc(ci, wi),
                   **{f"estimated_{k}": v for k, v in cbpe.estimated_metrics(ci, wi, pi).items()}}
            intervals = cbpe.estimated_intervals(ci, wi, pi, 1.96, 1.0, block[i, :m], block_var, 5000.0)
            assert json.dumps(got[i][0], allow_nan=True) == json.dumps(est, allow_nan=True)
            assert got[i][1] == intervals
