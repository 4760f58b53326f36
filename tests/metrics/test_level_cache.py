"""The levels BinaryScores and ScoreDistribution build once while their histograms are unchanged
(and take from the batch table that filled empty histograms) are the levels of their state: after
any sequence of updates, removals, merges, copies and reloads, every reading equals that of a fresh
accumulator loaded from the same state (which builds its levels from the histograms)."""
from __future__ import annotations

import numpy as np
import pytest

import streammetrics as sm
from streammetrics.kernels.binning import ExactBinning
from streammetrics.kernels.histogram import ScoreHistogram, aggregate, aligned, insert_table, levels_of_table


def _readings(s: sm.BinaryScores) -> tuple:
    with np.errstate(all="ignore"):
        return (s.roc_auc(), s.roc_auc_bounds(), s.average_precision(), s.roc_curve()[0].tolist(),
                s.intervals(), s.to_dict())


def _scores_step(s: sm.BinaryScores, rng: np.random.Generator, step: int) -> sm.BinaryScores:
    kind = step % 6
    n = int(rng.integers(1, 400))
    y, p = rng.integers(0, 2, n), np.round(rng.random(n), int(rng.integers(2, 7)))
    if kind == 0:
        s.update_many(y, p)
    elif kind == 1:
        s.update(int(y[0]), float(p[0]))
    elif kind == 2:
        s.update_many(y, p, rng.choice([1.0, 2.0, 0.5], n))
    elif kind == 3 and s.count:
        s.update(1, 0.25)
        s.remove(1, 0.25)
        s.update(0, 0.75)
    elif kind == 4:
        s.merge(sm.BinaryScores(max_bins=s.max_bins).update_many(y, p))
    else:
        s = s.copy()
        s.update_many(y[:5], p[:5])
    return s


@pytest.mark.parametrize("seed", range(6))
def test_binary_scores_levels_follow_every_change(seed):
    rng = np.random.default_rng(seed)
    s = sm.BinaryScores(max_bins=int(rng.choice([64, 600, 4096])))
    for step in range(int(rng.integers(1, 5)), 14):
        s = _scores_step(s, rng, step + seed)
        got = _readings(s)  # (builds and keeps the levels)
        assert got == _readings(sm.BinaryScores.from_dict(s.to_dict())), step
        assert _readings(s) == got
    s.reset()
    s.update_many([0, 1, 1], [0.2, 0.7, 0.4])
    assert s.roc_auc() == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_score_distribution_levels_follow_every_change(seed):
    rng = np.random.default_rng(seed)
    max_bins = int(rng.choice([64, 600, 4096]))
    d = sm.ScoreDistribution(max_bins=max_bins)
    for step in range(12):
        n = int(rng.integers(1, 400))
        p = np.round(rng.random(n), int(rng.integers(2, 7)))
        if step % 4 == 0:
            d.update_many(p)
        elif step % 4 == 1:
            d.update(float(p[0]))
        elif step % 4 == 2:
            d.merge(sm.ScoreDistribution(max_bins=max_bins).update_many(p))
        else:
            d.update_many(p, rng.choice([1.0, 3.0], n))
        got = (d.histogram()[0].tolist(), d.histogram()[1].tolist(), d.to_dict())
        fresh = sm.ScoreDistribution.from_dict(d.to_dict())
        assert got == (fresh.histogram()[0].tolist(), fresh.histogram()[1].tolist(), fresh.to_dict()), step


def test_levels_of_table_are_aligned_of_the_filled_histograms():
    rng = np.random.default_rng(3)
    b = ExactBinning()
    for _ in range(50):
        n = int(rng.integers(1, 300))
        s, y = np.round(rng.random(n), 3), rng.integers(0, 2, n)
        w = None if rng.random() < 0.5 else rng.choice([0.0, 1.0, 2.0], n)
        keys, table = aggregate(b.keys(s), y, 2, w)
        hists = [ScoreHistogram(b), ScoreHistogram(b)]
        insert_table(hists, keys, table)
        got = levels_of_table(keys, table, [len(h) for h in hists])
        want = aligned(*hists)
        assert got is not None
        assert got[0].dtype == want[0].dtype and got[0].tobytes() == want[0].tobytes()
        assert got[1].tobytes() == want[1].tobytes()
        hists[0].weights[0.12345] = 1.0  # (a histogram that does not hold exactly the table)
        assert levels_of_table(keys, table, [len(h) for h in hists]) is None
