"""The interval kernels (issue 26): published values, brute-force references, the minimum rule,
and the library's ``interval()`` equal on every path (per event, batch, any split and merge order)."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics import BinaryMonitor
from streammetrics.kernels import intervals as iv
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.regression import Regression

Z = iv.z_value(0.95)


@pytest.mark.parametrize("k, n, want", [
    # Newcombe (1998), Table II, method 4 (score interval with continuity correction)
    (81, 263, (0.2535, 0.3682)), (15, 148, (0.0598, 0.1644)), (0, 20, (0.0, 0.2005)), (1, 29, (0.0018, 0.1963)),
])
def test_wilson_matches_newcombe(k: int, n: int, want: tuple[float, float]) -> None:
    got = iv.wilson(k, n)
    assert got is not None
    assert [round(x, 4) for x in got] == list(want)


def test_minimum_rule_for_proportions() -> None:
    assert iv.wilson(3, iv.MIN_EVENTS - 1) is None
    assert iv.wilson(3, iv.MIN_EVENTS) is not None


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, "0.9", True, math.nan])
def test_confidence_is_checked(confidence: object) -> None:
    with pytest.raises(ValueError, match="confidence"):
        iv.z_value(confidence)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        BinaryMonitor().interval("accuracy", confidence)  # type: ignore[arg-type]


def test_t_values_match_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for confidence in (0.9, 0.95, 0.99):
        z = iv.z_value(confidence)
        for df in (9, 15, 19, 40, 200, 5000):
            assert iv.t_values(z, [df])[0] == pytest.approx(stats.t.ppf((1 + confidence) / 2, df), abs=2e-4)


def _delong_brute(neg_scores: list[float], pos_scores: list[float]) -> tuple[float, float]:
    """DeLong's AUC and variance from the events, pair by pair (ties count half)."""
    def psi(x: float, y: float) -> float:
        return 1.0 if x > y else 0.5 if x == y else 0.0
    m, n = len(pos_scores), len(neg_scores)
    v10 = [sum(psi(x, y) for y in neg_scores) / n for x in pos_scores]
    v01 = [sum(psi(x, y) for x in pos_scores) / m for y in neg_scores]
    auc = sum(v10) / m
    s10 = sum((v - auc) ** 2 for v in v10) / (m - 1)
    s01 = sum((v - auc) ** 2 for v in v01) / (n - 1)
    return auc, s10 / m + s01 / n


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12)), min_size=40, max_size=120))
def test_delong_matches_brute_force_with_ties(events: list[tuple[int, int]]) -> None:
    """The level formula equals DeLong's pairwise definition (scores on a coarse grid: many ties)."""
    neg = [s / 12 for y, s in events if y == 0]
    pos = [s / 12 for y, s in events if y == 1]
    if min(len(neg), len(pos)) < iv.MIN_AUC_EVENTS:
        return
    auc, var = _delong_brute(neg, pos)
    levels = sorted(set(neg) | set(pos))
    n_l = [float(neg.count(v)) for v in levels]
    p_l = [float(pos.count(v)) for v in levels]
    got = iv.auc_interval(n_l, p_l, auc, auc)
    assert got is not None
    a = min(max(auc, 0.5 / (len(neg) * len(pos))), 1 - 0.5 / (len(neg) * len(pos)))
    t = iv.t_values(Z, [min(len(neg), len(pos)) - 1.0])[0]
    width = t * math.sqrt(var) / (a * (1 - a))
    logit = math.log(a / (1 - a))
    want = (1 / (1 + math.exp(width - logit)), 1 / (1 + math.exp(-(logit + width))))
    assert got == pytest.approx((min(want[0], auc), max(want[1], auc)), abs=1e-12)
    b = BinaryScores().update_many([y for y, _ in events], [s / 12 for _, s in events])
    assert b.roc_auc() == pytest.approx(auc, abs=1e-12)
    assert b.interval("roc_auc") == pytest.approx(got, abs=1e-12)


def test_mann_whitney_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.random(500) * 0.6 + 0.3 * y, 2)  # ties
    b = BinaryScores().update_many(y, s)
    u = stats.mannwhitneyu(s[y == 1], s[y == 0]).statistic
    assert b.roc_auc() * (y == 1).sum() * (y == 0).sum() == pytest.approx(u, rel=1e-12)


def _numeric_gradient(f, p: np.ndarray, h: float = 1e-7) -> np.ndarray:
    g = np.zeros_like(p)
    for i in np.ndindex(p.shape):
        up, down = p.copy(), p.copy()
        up[i] += h
        down[i] -= h
        g[i] = (f(up) - f(down)) / (2 * h)
    return g


def test_mcc_delta_method_matches_numeric_gradient() -> None:
    tn, fp, fn, tp = 400.0, 60.0, 45.0, 95.0
    n = tn + fp + fn + tp
    p = np.array([tp, fp, fn, tn]) / n

    def mcc(q: np.ndarray) -> float:
        a, b, c, d = q
        return (a * d - b * c) / math.sqrt((a + b) * (a + c) * (d + b) * (d + c))
    g = _numeric_gradient(mcc, p)
    var = (g * g * p).sum() - (g * p).sum() ** 2
    m = mcc(p)
    t = iv.t_values(Z, [min(tp + fn, tn + fp, tp + fp, tn + fn) - 1])[0]
    width = t * math.sqrt(var / n) / (1 - m * m)
    want = (math.tanh(math.atanh(m) - width), math.tanh(math.atanh(m) + width))
    assert iv.mcc_interval(tn, fp, fn, tp) == pytest.approx(want, abs=1e-7)


def test_macro_f1_delta_method_matches_numeric_gradient() -> None:
    c = np.array([[50.0, 8, 3], [6, 40, 5], [2, 7, 30]])
    n = c.sum()
    p = c / n

    def macro(q: np.ndarray) -> float:
        return float(np.mean(2 * np.diag(q) / (q.sum(axis=1) + q.sum(axis=0))))
    g = _numeric_gradient(macro, p)
    var = (g * g * p).sum() - (g * p).sum() ** 2
    t = iv.t_values(Z, [c.sum(axis=1).min() - 1])[0]
    half = t * math.sqrt(var / n)
    assert iv.macro_f1_interval(c) == pytest.approx((macro(p) - half, macro(p) + half), abs=1e-7)


def test_benjamini_hochberg_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(4)
    p = np.concatenate([rng.random(200), rng.random(20) * 1e-3])
    want = stats.false_discovery_control(p) <= 0.05
    assert iv.benjamini_hochberg(p, 0.05).tolist() == want.tolist()


def test_compare_is_consistent_with_its_interval() -> None:
    """p < 1 - confidence exactly when the difference's interval excludes 0."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        v, b = rng.random(2)
        lo, hi = v - rng.random() * 0.2, v + rng.random() * 0.2
        blo, bhi = b - rng.random() * 0.1, b + rng.random() * 0.1
        r = iv.compare(v, (lo, hi), b, (blo, bhi))
        excluded = r["interval"][0] > 0 or r["interval"][1] < 0
        if abs(min(abs(r["interval"][0]), abs(r["interval"][1]))) > 1e-9:
            assert (r["p_value"] < 0.05) == excluded


def _events(n: int, seed: int, prevalence: float = 0.3) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = int(rng.random() < prevalence)
        out.append({"y_true": y, "score": min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.001), 0.999)})
    return out


def test_minimum_rule_lists_insufficient() -> None:
    few = [{"y_true": 1, "score": 0.7}] * 9 + [{"y_true": 0, "score": 0.2 + i / 500} for i in range(100)]
    record = BinaryMonitor().update_many(few).intervals()
    assert record is not None
    assert record["insufficient"] == ["balanced_accuracy", "precision", "recall", "f1", "matthews_corrcoef", "roc_auc",
                                      "log_loss", "brier_score"]
    assert all(record["intervals"][k] is None for k in record["insufficient"])
    assert record["intervals"]["accuracy"] is not None
    assert BinaryMonitor().intervals() is None  # no labelled events: no intervals at all


def test_weighted_events_get_kish_intervals() -> None:
    """Every event of weight 2: Kish's effective sample size is the count, so the intervals are
    those of the unit-weight window (they were all null before the sums of squared weights)."""
    evs = _events(300, 1)
    m = BinaryMonitor().update_many([dict(e, weight=2.0) for e in evs])
    record = m.intervals()
    want = BinaryMonitor().update_many(evs).intervals()
    assert record is not None and want is not None and record["insufficient"] == []
    for name in iv.BINARY_INTERVALS:
        assert record["intervals"][name] == pytest.approx(want["intervals"][name], abs=1e-12), name


def test_interval_names_are_checked() -> None:
    m = BinaryMonitor().update_many(_events(100, 2))
    with pytest.raises(ValueError, match="metric"):
        m.interval("mean_score")
    with pytest.raises(ValueError, match="metric"):
        ConfusionMatrix().interval("kappa")
    with pytest.raises(ValueError, match="metric"):
        Regression().interval("mape")
    with pytest.raises(ValueError, match="metric"):
        ConfusionMatrix().update_many([0, 1, 2], [0, 1, 2]).interval("macro_kappa")


@settings(max_examples=25, deadline=None)
@given(st.integers(60, 400), st.integers(0, 10_000), st.sampled_from([0.1, 0.3, 0.5]))
def test_binary_intervals_equal_on_every_path(n: int, seed: int, prevalence: float) -> None:
    """Per event, one batch, random splits merged in random order, a dict round trip: the same
    intervals, to the bit."""
    evs = _events(n, seed, prevalence)
    want = BinaryMonitor().update_many(evs).intervals()
    per_event = BinaryMonitor()
    for e in evs:
        per_event.update(e)
    assert per_event.intervals() == want
    rng = random.Random(seed)
    shuffled = list(evs)
    rng.shuffle(shuffled)
    parts = [BinaryMonitor() for _ in range(rng.randint(2, 5))]
    for i, part in enumerate(parts):
        chunk = shuffled[i::len(parts)]
        if rng.random() < 0.5:
            part.update_many(chunk)
        else:
            for e in chunk:
                part.update(e)
    rng.shuffle(parts)
    merged = parts[0]
    for part in parts[1:]:
        merged = merged + part
    assert merged.intervals() == want
    assert sm.from_dict(per_event.to_dict()).intervals() == want


@settings(max_examples=15, deadline=None)
@given(st.integers(40, 300), st.integers(0, 10_000))
def test_label_and_regression_intervals_equal_on_every_path(n: int, seed: int) -> None:
    rng = random.Random(seed)
    y = [rng.randrange(3) for _ in range(n)]
    p = [t if rng.random() < 0.7 else rng.randrange(3) for t in y]
    whole = ConfusionMatrix().update_many(y, p)
    h = n // 2
    halves = ConfusionMatrix().update_many(y[:h], p[:h]) + ConfusionMatrix().update_many(y[h:], p[h:])
    for metric in ("accuracy", "macro_f1", "recall"):
        assert whole.interval(metric) == halves.interval(metric)
    yt = [rng.gauss(0, 1) for _ in range(n)]
    yp = [v + rng.gauss(0, 0.3) for v in yt]
    r = Regression().update_many(yt, yp)
    r2 = Regression()
    for a, b in zip(reversed(yt), reversed(yp)):
        r2.update(a, b)
    for metric in ("mae", "mse", "r2"):
        assert r.interval(metric) == r2.interval(metric)
    assert (r.interval("r2") is not None) == (n >= iv.MIN_R2_EVENTS)


def test_binned_auc_interval_contains_the_bounds() -> None:
    """A binned state: the interval is widened by the guaranteed discretisation bounds."""
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, 3000)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.15), 0.0, 1.0)
    coarse = BinaryScores(max_bins=8).update_many(y, s)
    assert not coarse.exact
    low, high = coarse.roc_auc_bounds()
    got = coarse.interval("roc_auc")
    assert got is not None and got[0] < low and high < got[1]
    exact = BinaryScores(exact=True).update_many(y, s)
    e = exact.interval("roc_auc")
    assert e is not None and got[0] <= e[0] and e[1] <= got[1]
    # log loss / Brier on bins: the second moment is an upper bound, the interval no narrower
    lo_b, hi_b = coarse.interval("log_loss")  # type: ignore[misc]
    lo_e, hi_e = exact.interval("log_loss")  # type: ignore[misc]
    assert hi_b - lo_b >= hi_e - lo_e - 1e-12


def test_confusion_intervals_stack_proportions_bit_for_bit() -> None:
    """confusion_intervals computes its Wilson proportions in one stacked call: each interval is
    bit for bit the one of its own call (single rows and many rows, counts around the minimum
    rule, empty classes, fractional counts)."""
    rng = np.random.default_rng(7)
    cells = rng.integers(0, 14, size=(400, 4)).astype(np.float64)
    cells[::7] *= rng.random((len(cells[::7]), 4)) * 3.0  # fractional (weighted) counts
    cells[::11, 3] = 0.0
    z = iv.z_value(0.95)

    def alone(tn: np.ndarray, fp: np.ndarray, fn: np.ndarray, tp: np.ndarray) -> dict[str, tuple]:
        n = tn + fp + fn + tp
        return {"accuracy": iv.wilson_many(tn + tp, n, z), "precision": iv.wilson_many(tp, tp + fp, z),
                "recall": iv.wilson_many(tp, tp + fn, z), "specificity": iv.wilson_many(tn, tn + fp, z),
                "positive_rate": iv.wilson_many(tp + fn, n, z), "f1": iv.f1_intervals(tp, fp, fn, z),
                "balanced_accuracy": iv.balanced_accuracy_intervals(tn, fp, fn, tp, z)}

    for rows in (cells, cells[:1], cells[5:6]):
        got = iv.confusion_intervals(*rows.T, z)
        for name, (lo, hi) in alone(*rows.T).items():
            np.testing.assert_array_equal(got[name][0], lo, err_msg=name)
            np.testing.assert_array_equal(got[name][1], hi, err_msg=name)
    # balanced accuracy's own stacked call, against Wilson's intervals one by one
    tn, fp, fn, tp = cells.T
    rl, rh = iv.wilson_many(tp, tp + fn, z, iv.MIN_CLASS_EVENTS)
    sl, sh = iv.wilson_many(tn, tn + fp, z, iv.MIN_CLASS_EVENTS)
    ok = (tp + fn >= iv.MIN_CLASS_EVENTS) & (tn + fp >= iv.MIN_CLASS_EVENTS)
    r, s = tp / np.where(ok, tp + fn, 1.0), tn / np.where(ok, tn + fp, 1.0)
    lo = np.where(ok, np.clip((r + s - np.sqrt((r - rl) ** 2 + (s - sl) ** 2)) / 2.0, 0.0, 1.0), np.nan)
    np.testing.assert_array_equal(iv.balanced_accuracy_intervals(tn, fp, fn, tp, z)[0], lo)
    empty = iv.confusion_intervals(*np.zeros((0, 4)).T, z)
    assert all(len(lo) == len(hi) == 0 for lo, hi in empty.values())
