"""A histogram filled by one batch keeps the batch's arrays until its dict is read: every reading
(length, levels, JSON, copy, equality, the dict itself) is that of the histogram filled through its
dict, and the accumulators that fill theirs so (BinaryScores, ScoreDistribution) continue event by
event, merge and copy to the same state as if every event had gone through the dicts."""
from __future__ import annotations

import numpy as np
import pytest

import streammetrics as sm
from streammetrics.kernels.binning import ExactBinning, LogGridBinning
from streammetrics.kernels.histogram import ScoreHistogram, aggregate, aligned, histograms_to_json, insert_table


@pytest.mark.parametrize("binning", [ExactBinning(), LogGridBinning(64)])
def test_a_histogram_holding_arrays_reads_as_its_dict(binning):
    rng = np.random.default_rng(7)
    s, y = np.round(rng.random(600), 4), rng.integers(0, 2, 600)
    keys, table = aggregate(binning.keys(s), y, 2, None)
    lazy = [ScoreHistogram(binning), ScoreHistogram(binning)]
    eager = [ScoreHistogram(binning), ScoreHistogram(binning)]
    insert_table(lazy, keys, table, arrays=True)
    insert_table(eager, keys, table)
    assert all(h.pending for h in lazy) and not any(h.pending for h in eager)
    assert [len(h) for h in lazy] == [len(h) for h in eager]
    copies = [h.copy() for h in lazy]
    for got, want in zip(aligned(*lazy), aligned(*eager)):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert histograms_to_json(lazy, ["neg", "pos"]) == histograms_to_json(eager, ["neg", "pos"])
    assert all(h.pending for h in lazy)  # (none of those readings built the dict)
    assert lazy[0].weights == eager[0].weights and not lazy[0].pending
    assert list(lazy[0].weights.items()) == list(eager[0].weights.items())  # (same insertion order)
    lazy[0].weights[next(iter(lazy[0].weights))] += 1.0  # a copy made before does not change with it
    assert copies[0] == eager[0] and copies[1] == eager[1] and lazy[0] != eager[0]
    insert_table(lazy, keys, table, arrays=True)  # (not empty any more: added through the dicts)
    insert_table(eager, keys, table)
    assert lazy[1] == eager[1]


@pytest.mark.parametrize("seed", range(4))
def test_accumulators_continue_from_a_batch_as_from_events(seed):
    rng = np.random.default_rng(seed)
    n = 500
    y, s = rng.integers(0, 2, n), np.round(rng.random(n), 5)
    s[:3] = [0.0, 1.0, 0.5]
    k = int(rng.integers(300, n))
    batch = sm.BinaryScores(max_bins=int(rng.choice([64, 4096]))).update_many(y[:k], s[:k])
    events = sm.BinaryScores(max_bins=batch.max_bins)
    for a, b in zip(y[:k].tolist(), s[:k].tolist()):
        events.update(a, b)
    other = batch.copy()
    for a, b in zip(y[k:].tolist(), s[k:].tolist()):  # the per-event paths after a batch
        batch.update(a, b)
        events.update(a, b)
    assert batch.to_dict() == events.to_dict() and batch.roc_auc() == events.roc_auc()
    other.remove(int(y[0]), float(s[0]))
    other.update(int(y[0]), float(s[0]))
    assert other.to_dict() == sm.BinaryScores.from_dict(other.to_dict()).to_dict()
    merged = sm.BinaryScores(max_bins=batch.max_bins).update_many(y[:k], s[:k]).merge(
        sm.BinaryScores(max_bins=batch.max_bins).update_many(y[k:], s[k:]))
    assert merged.to_dict() == events.to_dict()

    d = sm.ScoreDistribution().update_many(s[:k])
    e = sm.ScoreDistribution()
    for b in s.tolist():
        e.update(b)
    for b in s[k:].tolist():
        d.update(b)
    assert d.to_dict() == e.to_dict()


def test_add_flat_adds_each_run_to_its_histogram():
    """add_flat: the entries of histogram i (ids ascending) to hists[i], into empty and held
    histograms, histograms without entries skipped; returns the new keys."""
    from streammetrics.kernels.histogram import add_flat

    hists = [ScoreHistogram(ExactBinning()) for _ in range(4)]
    hists[2].weights[0.5] = 1.0
    flat = (np.array([0, 0, 2, 2, 3]), np.array([0.1, 0.2, 0.5, 0.7, 0.1]), np.array([1.0, 2.0, 3.0, 1.0, 4.0]))
    assert add_flat(hists, flat) == 4
    assert [h.weights for h in hists] == [{0.1: 1.0, 0.2: 2.0}, {}, {0.5: 4.0, 0.7: 1.0}, {0.1: 4.0}]
    assert add_flat(hists, (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))) == 0
