"""The shared histogram budget of MulticlassScores and MultilabelScores (issue 12, points 2-3).

* exact while small: exact scores while the histograms hold at most ``max_exact`` entries,
  then one log grid for all of them, coarsened together (beyond 1 bin per octave) while
  they hold more than ``max_bins``; the state is a function of the multiset of events, so
  per-event, batch, any split merged in any order and a restored dict give the same state;
* a small window's one-vs-rest AUC equals scikit-learn's exactly (default configuration);
* the bounds contain the exact AUC on every grid, however coarse;
* the entries never exceed ``max(max_bins, 8 * histograms)`` nor columns x events, and a
  monitor's JSON state stays within the documented size for K up to 200.
"""
from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

import streammetrics as sm
from streammetrics.kernels.binning import MAX_OCTAVES
from streammetrics.kernels.ranking import rounding_slack
from streammetrics.monitors.multiclass import CLASS_SCORE_BUDGET

# few distinct scores, so that small budgets are crossed in some parts and not in others;
# margins and exact 0 / 1 reach every region of the grid
POOL = [0.0, 1.0, 0.5, 0.05, 0.1, 0.2, 0.2000001, 0.3, 0.7, 0.9, 0.99, 1.5, -0.5, 40.0, -3e5, 1e-9]
BUDGETS = st.sampled_from([(1, 1), (3, 2), (8, 6), (4, 40), (30, 20), (8192, 32768)])


def structure(acc) -> dict:
    """The state without the float sums that depend on the order of additions (unit
    weights: histogram weights and cells are integral, so they compare exactly)."""
    state = dict(acc.to_dict()["state"])
    for key in ("log_loss_sum",):
        state.pop(key, None)
    return state


def check_any_split(make, evs, feed_one, feed_many, seed, structure=structure):
    """The state of ``evs`` fed one by one equals (``structure``) the batch's, a random split's
    parts (each fed one way or the other) merged in random order, and the dict round trip's."""
    rng = random.Random(seed)
    whole = make()
    for e in evs:
        feed_one(whole, e)
    batch = feed_many(make(), evs)
    assert structure(batch) == structure(whole)
    cuts = sorted(rng.sample(range(len(evs) + 1), min(len(evs) + 1, rng.randint(0, 5))))
    parts = []
    for a, b in zip([0, *cuts], [*cuts, len(evs)]):
        part = make()
        if rng.random() < 0.5:
            for e in evs[a:b]:
                feed_one(part, e)
        else:
            feed_many(part, evs[a:b])
        parts.append(part)
    rng.shuffle(parts)
    while len(parts) > 1:
        j = rng.randrange(len(parts) - 1)
        parts[j : j + 2] = [parts[j] + parts[j + 1]]
    assert structure(parts[0]) == structure(whole)
    restored = sm.from_dict(json.loads(json.dumps(whole.to_dict())))
    assert structure(restored) == structure(whole)
    return whole


def entries(acc) -> int:
    return sum(len(h) for h in acc._hist_list())


def ovr_entries(acc) -> int:
    """Entries of the one-vs-rest set (derived from the pairs while they are exact)."""
    return sum(len(h) for side in acc._ovr_view()[1] for h in side)


@settings(max_examples=120, deadline=None)
@given(st.integers(2, 4), st.lists(st.tuples(st.integers(0, 3), st.lists(st.sampled_from(POOL), min_size=4,
                                                                          max_size=4)), max_size=40),
       BUDGETS, st.integers(0, 2**32 - 1))
def test_multiclass_state_is_a_function_of_the_multiset(k, raw, budget, seed):
    max_exact, max_bins = budget
    evs = [(t % k, row[:k]) for t, row in raw]
    whole = check_any_split(
        lambda: sm.MulticlassScores(list(range(k)), max_exact=max_exact, max_bins=max_bins), evs,
        lambda acc, e: acc.update(*e),
        lambda acc, chunk: acc.update_many([e[0] for e in chunk], np.array([e[1] for e in chunk]).reshape(-1, k)),
        seed)
    distinct = len({(t, c, s + 0.0) for t, row in evs for c, s in enumerate(row)})
    assert whole.exact == (distinct <= max_exact)
    assert entries(whole) <= max(max_bins, 8 * k * k) if not whole.exact else entries(whole) == distinct
    if not whole.exact and whole.bins_per_octave != 1 / MAX_OCTAVES:
        assert entries(whole) <= max_bins
    ovr = ovr_entries(whole)  # the one-vs-rest set: its own budget, exact whenever the pairs are
    binning = whole._ovr_view()[0]
    assert ovr <= max(max_bins, 8 * 2 * k) and (binning.exact or not whole.exact)
    if whole.exact:
        assert not any(h.weights for side in whole._ovr for h in side)  # not kept: their sums
    if binning.exact:
        assert ovr == len({(c, t == c, s + 0.0) for t, row in evs for c, s in enumerate(row)}) <= max_exact


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.lists(st.tuples(st.lists(st.booleans(), min_size=4, max_size=4),
                                             st.lists(st.sampled_from(POOL), min_size=4, max_size=4)), max_size=40),
       BUDGETS, st.integers(0, 2**32 - 1))
def test_multilabel_state_is_a_function_of_the_multiset(n, raw, budget, seed):
    max_exact, max_bins = budget
    evs = [(truth[:n], row[:n]) for truth, row in raw]
    whole = check_any_split(
        lambda: sm.MultilabelScores(n, max_exact=max_exact, max_bins=max_bins), evs,
        lambda acc, e: acc.update(*e),
        lambda acc, chunk: acc.update_many(np.array([e[0] for e in chunk], dtype=int).reshape(-1, n),
                                           np.array([e[1] for e in chunk]).reshape(-1, n)),
        seed)
    distinct = len({(j, y, s + 0.0) for truth, row in evs for j, (y, s) in enumerate(zip(truth, row))})
    assert whole.exact == (distinct <= max_exact)
    # exact: one entry per distinct (label, class side, score), up to max_exact (which may exceed max_bins)
    assert entries(whole) <= max(max_bins, 16 * n) if not whole.exact else entries(whole) == distinct


@settings(max_examples=60, deadline=None)
@given(st.integers(20, 80), st.integers(3, 10), st.integers(0, 2**32 - 1), st.sampled_from([4, 10, None]))
def test_small_window_ovr_auc_equals_sklearn_exactly(n, k, seed, levels):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    y[:k] = np.arange(k)  # every class present
    raw = rng.random((n, k)) if levels is None else rng.integers(1, levels + 1, (n, k)) / levels
    s = raw / raw.sum(axis=1, keepdims=True)
    per_event = sm.MulticlassScores(list(range(k)))
    for t, row in zip(y.tolist(), s.tolist()):
        per_event.update(t, row)
    for acc in (per_event, sm.MulticlassScores(list(range(k))).update_many(y, s)):
        assert acc.exact and acc.bins_per_octave is None
        for average in ("macro", "weighted"):
            want = roc_auc_score(y, s, multi_class="ovr", average=average, labels=list(range(k)))
            assert acc.roc_auc("ovr", average) == want
            low, high = acc.roc_auc_bounds("ovr", average)  # collapsed to the value up to float rounding
            assert low <= want <= high and high - low <= 2 * rounding_slack(2 * n * k) + 4e-16
        per_class = roc_auc_score(np.eye(k)[y], s, average=None)
        assert np.array_equal(acc.roc_auc("ovr", None), per_class)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([(1, 1), (2, 5), (4, 30), (16, 200)]))
def test_bounds_contain_the_exact_auc_on_coarse_grids(data, budget):
    max_exact, max_bins = budget
    k = data.draw(st.integers(2, 4))
    n = data.draw(st.integers(2, 50))
    y = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    cont = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 1e-9, 1 - 1e-9]), st.floats(-50, 50))
    s = np.array(data.draw(st.lists(st.lists(cont, min_size=k, max_size=k), min_size=n, max_size=n)))
    w = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.1]), min_size=n, max_size=n)))
    binned = sm.MulticlassScores(list(range(k)), max_exact=max_exact, max_bins=max_bins).update_many(y, s, w)
    exact = sm.MulticlassScores(list(range(k)), exact=True).update_many(y, s, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mc, average in [("ovr", "macro"), ("ovr", "weighted"), ("ovr", "micro"), ("ovr", None),
                            ("ovo", "macro"), ("ovo", "weighted")]:
            value, low, high = map(np.atleast_1d, (exact.roc_auc(mc, average), *binned.roc_auc_bounds(mc, average)))
            defined = ~np.isnan(value)
            assert np.all(low[defined] <= value[defined]) and np.all(value[defined] <= high[defined]), (mc, average)
    labels = np.eye(k, dtype=int)[y]
    ml = sm.MultilabelScores(k, max_exact=max_exact, max_bins=max_bins).update_many(labels, s, w)
    ml_exact = sm.MultilabelScores(k, exact=True).update_many(labels, s, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in ("macro", "micro", "weighted", None):
            value, low, high = map(np.atleast_1d, (ml_exact.roc_auc(average), *ml.roc_auc_bounds(average)))
            defined = ~np.isnan(value)
            assert np.all(low[defined] <= value[defined]) and np.all(value[defined] <= high[defined]), average


def test_grid_coarsens_beyond_one_bin_per_octave_down_to_the_coarsest():
    acc = sm.MulticlassScores([0, 1, 2], max_exact=4, max_bins=4)
    rng = np.random.default_rng(3)
    acc.update_many(rng.integers(0, 3, 500), rng.normal(scale=1e3, size=(500, 3)))
    assert acc.bins_per_octave == 1 / MAX_OCTAVES  # 9 histograms cannot fit 4 entries
    assert entries(acc) <= 8 * 9
    d = json.loads(json.dumps(acc.to_dict()))
    assert d["state"]["bins_per_octave"] == 1 / MAX_OCTAVES and sm.from_dict(d) == acc
    low, high = acc.roc_auc_bounds()
    assert 0.0 <= low <= acc.roc_auc() <= high <= 1.0


def softmax_events(rng, n, k, signal=1.5):
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + signal * np.eye(k)[y]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return y, p / p.sum(axis=1, keepdims=True)


#: documented budgets after 10,000 events at the default configuration (max_bins 65,536,
#: max_exact 8,192): the MulticlassScores state (pair and one-vs-rest sets, cells, sums) for
#: K up to 200, and a MulticlassMonitor snapshot (metrics and state): 256 KiB (issue 12; the
#: monitor's label-free per-class score histograms share CLASS_SCORE_BUDGET entries)
SCORES_BUDGET = 160 * 1024
SNAPSHOT_BUDGET = {2: 256 * 1024, 10: 256 * 1024, 50: 256 * 1024, 100: 256 * 1024, 200: 256 * 1024}


@pytest.mark.parametrize("k", [2, 10, 50, 100, 200])
def test_state_and_snapshot_sizes_stay_within_their_budgets(k):
    rng = np.random.default_rng(k)
    y, p = softmax_events(rng, 10_000, k)
    mon = sm.MulticlassMonitor(list(range(k)))
    mon.update_many([{"y_true": int(t), "scores": row} for t, row in zip(y, p.tolist())])
    scores = mon.scores
    assert len(json.dumps(scores.to_dict())) <= SCORES_BUDGET
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        snapshot = json.dumps({"metrics": mon.snapshot(), "state": mon.to_dict()})
    assert len(snapshot) <= SNAPSHOT_BUDGET[k], len(snapshot)
    assert entries(scores) <= max(scores.max_bins, 8 * k * k)
    assert ovr_entries(scores) <= max(scores.max_bins, 16 * k)
    class_entries = sum(len(d.to_dict()["state"]["histogram"]["weights"]) for d in mon._class_scores)
    assert class_entries <= max(CLASS_SCORE_BUDGET, 16 * k), class_entries
    back = sm.from_dict(json.loads(json.dumps(mon.to_dict())))
    assert back.to_dict() == mon.to_dict()


def test_entries_are_bounded_whatever_the_scores():
    # margins spread over every region of the grid: the coarsest grid's 8 keys per histogram
    k = 6
    rng = np.random.default_rng(1)
    S = rng.choice([-1e300, -3.0, -1e-300, 0.0, 0.2, 0.7, 1.0, 2.5, 1e300], size=(3000, k)) * rng.random((3000, k))
    acc = sm.MulticlassScores(list(range(k)), max_bins=16, max_exact=8)
    acc.update_many(rng.integers(0, k, 3000), S)
    assert entries(acc) <= max(16, 8 * k * k)
    for t in range(k):
        for c in range(k):
            assert len(acc._h[t][c]) <= 8


def test_budget_configuration_round_trips_and_old_configs_get_the_defaults():
    acc = sm.MulticlassScores(["a", "b"], bins=16, max_bins=100, max_exact=10)
    assert acc.to_dict()["config"] == {"classes": ["a", "b"], "bins": 16, "exact": False, "max_bins": 100,
                                       "max_exact": 10}
    assert sm.MulticlassScores(["a", "b"], exact=True).to_dict()["config"]["max_bins"] is None
    with pytest.raises(ValueError, match="configurations"):
        acc.merge(sm.MulticlassScores(["a", "b"], bins=16))
    for bad, error in (({"max_bins": 0}, ValueError), ({"max_exact": 1.5}, TypeError), ({"bins": 3}, ValueError)):
        with pytest.raises(error):
            sm.MulticlassScores(["a", "b"], **bad)
    d = sm.MultilabelScores(2).to_dict()
    del d["config"]["max_bins"], d["config"]["max_exact"]
    assert sm.from_dict(d) == sm.MultilabelScores(2)


def test_exact_state_over_the_budget_is_refused():
    acc = sm.MulticlassScores([0, 1]).update_many([0, 1, 1], [[0.1, 0.9], [0.3, 0.7], [0.4, 0.6]])
    d = acc.to_dict()
    assert d["state"]["bins_per_octave"] is None and d["state"]["histograms"]["entries"] == 6
    d["config"]["max_exact"] = 5
    with pytest.raises(ValueError, match="entries"):
        sm.from_dict(d)


@settings(max_examples=40, deadline=None)
@given(st.integers(20, 80), st.integers(2, 8), st.integers(0, 2**32 - 1))
def test_small_multilabel_window_equals_sklearn_exactly(n, n_labels, seed):
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, n_labels)) < 0.4).astype(int)
    Y[0], Y[1] = 0, 1  # every label has both classes
    S = rng.integers(0, 20, (n, n_labels)) / 20  # ties within and across rows
    per_event = sm.MultilabelScores(n_labels)
    for truth, row in zip(Y.tolist(), S.tolist()):
        per_event.update(truth, row)
    for acc in (per_event, sm.MultilabelScores(n_labels).update_many(Y, S)):
        assert acc.exact
        for average in ("macro", "micro", "weighted"):
            want = roc_auc_score(Y, S, average=average)
            assert acc.roc_auc(average) == want
            low, high = acc.roc_auc_bounds(average)  # collapsed to the value up to float rounding
            assert low <= want <= high and high - low <= 2 * rounding_slack(4 * n * n_labels) + 4e-16


def test_one_vs_rest_keeps_its_resolution_when_the_pair_histograms_collapse():
    # 60 classes: 3,600 pair histograms cannot fit 2,000 entries (the coarsest grid), the 120
    # one-vs-rest histograms can, on a fine grid: OvR bounds stay tight, OvO ones do not
    rng = np.random.default_rng(11)
    k, n = 60, 3000
    y, p = softmax_events(rng, n, k)
    acc = sm.MulticlassScores(list(range(k)), max_bins=2000, max_exact=100).update_many(y, p)
    assert acc.bins_per_octave == 1 / MAX_OCTAVES and acc._obinning.per_octave >= 1
    assert ovr_entries(acc) <= 2000
    exact = sm.MulticlassScores(list(range(k)), exact=True).update_many(y, p)
    low, high = acc.roc_auc_bounds()
    assert low <= exact.roc_auc() <= high and high - low < 0.1
    low_ovo, high_ovo = acc.roc_auc_bounds("ovo")
    assert low_ovo <= exact.roc_auc("ovo") <= high_ovo and high_ovo - low_ovo > 0.5
    ap = acc.average_precision()
    assert abs(ap - exact.average_precision()) < 0.05
