"""The binary interval columns compute several intervals in one stacked call (the confusion
matrix's Wilson intervals with the predicted-positive rate's, log loss's and Brier score's means
together; one window's levels without per-level window indexes): each equals, bit for bit, the
interval computed alone by its own function."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.kernels.intervals import (
    MIN_CLASS_EVENTS,
    MIN_MEAN_EVENTS,
    auc_intervals,
    binary_interval_columns,
    confusion_intervals,
    level_second_moments,
    mean_intervals,
    wilson_many,
    z_value,
)


def _same(a, b):
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(a, b))


@pytest.mark.parametrize("seed", range(30))
def test_stacked_intervals_equal_each_alone(seed):
    rng = np.random.default_rng(seed)
    windows = int(rng.integers(1, 4))
    sizes = rng.integers(1, 50, windows)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    n = int(sizes.sum())
    lo = np.sort(rng.random(n))
    neg, pos = rng.integers(0, 4, n).astype(float), rng.integers(0, 3, n).astype(float)
    cells = rng.integers(0, 60, (windows, 4)).astype(float)
    predictions = cells.sum(axis=1) + rng.integers(0, 9, windows)
    above = np.minimum(rng.integers(0, 60, windows), predictions)
    log_loss, brier = rng.random(windows), rng.random(windows) * 0.3
    if seed % 4 == 0:
        log_loss[0] = np.nan
    auc_low, auc_high = rng.random(windows) * 0.2 + 0.5, rng.random(windows) * 0.2 + 0.7
    z = z_value([0.9, 0.95, 0.99][seed % 3])
    got = binary_interval_columns(cells, starts, lo, lo, neg, pos, auc_low, auc_high, log_loss, brier, predictions,
                                  above, z)
    tn, fp, fn, tp = cells.T
    alone = confusion_intervals(tn, fp, fn, tp, z)
    for name, pair in alone.items():
        assert _same(got[name], pair), name
    assert _same(got["predicted_positive_rate"], wilson_many(above, predictions, z))
    assert _same(got["roc_auc"], auc_intervals(starts, neg, pos, auc_low, auc_high, z))
    total_n, total_p = np.add.reduceat(neg, starts), np.add.reduceat(pos, starts)
    minority = np.minimum(total_n, total_p)
    df = np.where(minority >= MIN_CLASS_EVENTS, minority - 1.0, np.nan)
    need = (minority >= MIN_CLASS_EVENTS) & (total_n + total_p >= MIN_MEAN_EVENTS)
    second_log, second_brier = level_second_moments(lo, lo, neg, pos, starts, need)
    assert _same(got["log_loss"], mean_intervals(log_loss, second_log, total_n + total_p, z, df=df))
    assert _same(got["brier_score"], mean_intervals(brier, second_brier, total_n + total_p, z, 0.0, 1.0, df=df))
