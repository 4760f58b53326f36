"""Weighted events' intervals (issue 26 point 1) and R²'s (point 2): exact, mergeable sums of
squared weights (Kish's effective sample size) written only when some weight is not 1, equal on
every path; states written before them load (None for weighted ones); the R² delta method
against its formula evaluated on the events."""
from __future__ import annotations

import json
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
from streammetrics.metrics.score_distribution import ScoreDistribution

WEIGHTS = [0.5, 1.0, 2.0, 3.3, 0.1, 7.0]


def _events(n: int, seed: int, prevalence: float = 0.3, weights: list[float] = WEIGHTS) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = int(rng.random() < prevalence)
        out.append({"y_true": y, "score": min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.001), 0.999),
                    "weight": rng.choice(weights)})
    return out


def _round_trip(acc: sm.Accumulator) -> sm.Accumulator:
    return sm.from_dict(json.loads(json.dumps(acc.to_dict())))


@settings(max_examples=20, deadline=None)
@given(st.integers(60, 400), st.integers(0, 10_000), st.sampled_from([0.1, 0.3, 0.5]),
       st.sampled_from([WEIGHTS, [1.0, 2.0, 3.0], [0.0, 1.0, 2.5]]))
def test_weighted_binary_intervals_equal_on_every_path(n: int, seed: int, prevalence: float,
                                                       weights: list[float]) -> None:
    evs = _events(n, seed, prevalence, weights)
    whole = BinaryMonitor().update_many(evs)
    want = whole.intervals()
    assert want is not None
    per_event = BinaryMonitor()
    for e in evs:
        per_event.update(e)
    assert per_event.intervals() == want
    assert per_event.to_dict() == whole.to_dict()
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
    assert _round_trip(per_event).intervals() == want
    assert _round_trip(merged).to_dict() == whole.to_dict()


def test_weighted_intervals_use_the_effective_sample_size() -> None:
    """Kish: n_eff = (sum w)^2 / sum w^2. Doubling every weight changes nothing; weights that
    vary widen the intervals (n_eff below the count); a proportion's interval is the Wilson
    interval of its pseudo-counts."""
    evs = _events(500, 3, 0.3, [1.0])
    unit = BinaryMonitor().update_many(evs)
    doubled = BinaryMonitor().update_many([dict(e, weight=2.0) for e in evs])
    assert doubled.interval("roc_auc") == pytest.approx(unit.interval("roc_auc"), abs=1e-12)
    assert doubled.interval("recall") == pytest.approx(unit.interval("recall"), abs=1e-12)
    varied = BinaryMonitor().update_many([dict(e, weight=random.Random(i).choice([0.2, 5.0]))
                                          for i, e in enumerate(evs)])
    for name in ("accuracy", "roc_auc", "log_loss", "recall"):
        lo_u, hi_u = unit.interval(name)  # type: ignore[misc]
        lo_v, hi_v = varied.interval(name)  # type: ignore[misc]
        assert hi_v - lo_v > hi_u - lo_u, name
    y = np.array([e["y_true"] for e in evs])
    w = np.array([random.Random(i).choice([0.2, 5.0]) for i in range(len(evs))])
    pred = np.array([e["score"] >= 0.5 for e in evs]).astype(int)
    pos = y == 1
    k, n, q = float(w[pos & (pred == 1)].sum()), float(w[pos].sum()), float((w[pos] ** 2).sum())
    want = iv.wilson(k * n / q, n * n / q)
    assert varied.interval("recall") == pytest.approx(want, abs=1e-12)


def test_unit_weight_states_keep_their_bytes() -> None:
    """Explicit weights of 1 write no squared weights: the same state as no weights at all."""
    evs = _events(200, 4, 0.3, [1.0])
    plain = BinaryMonitor().update_many([{k: v for k, v in e.items() if k != "weight"} for e in evs])
    ones = BinaryMonitor().update_many(evs)
    assert json.dumps(ones.to_dict()) == json.dumps(plain.to_dict())
    text = json.dumps(plain.to_dict())
    assert "squares" not in text
    assert "weight_squares" not in json.dumps(ScoreDistribution().update_many([0.2, 0.7], [1.0, 1.0]).to_dict())
    assert "ww" not in Regression().update_many([1.0, 2.0], [1.5, 2.0], [1.0, 1.0]).to_dict()["state"]["exact_sums"]


def test_states_without_squares_load() -> None:
    """A weighted state written before the squared weights were kept loads; its intervals are None
    (it cannot tell its effective sample size); merged into a complete state, still None."""
    evs = _events(300, 5)
    m = BinaryMonitor().update_many(evs)
    old = m.to_dict()
    sc = old["state"]["scores"]["state"]
    cm = old["state"]["confusion"]["state"]
    pr = old["state"]["predictions"]["state"]
    for state, keys in ((sc, ("weighted_squares", "weighted_squares_residues")),
                        (cm, ("cells_squares", "cells_squares_residues")),
                        (pr, ("weight_squares", "weight_squares_residue"))):
        assert keys[0] in state
        for k in keys:
            state.pop(k, None)
    loaded = sm.from_dict(old)
    assert loaded.interval("roc_auc") is None and loaded.interval("accuracy") is None
    assert (loaded + m).interval("accuracy") is None
    assert loaded.snapshot() == m.snapshot()
    c = ConfusionMatrix().update_many([0, 1] * 40, [0, 1, 1, 1] * 20, [2.0, 0.5] * 40)
    d = c.to_dict()
    del d["state"]["cells_squares"]
    assert ConfusionMatrix.from_dict(d).interval("accuracy") is None
    r = Regression().update_many(list(range(60)), [x + 1.0 for x in range(60)], [0.5, 2.0] * 30)
    d = r.to_dict()
    del d["state"]["exact_sums"]["ww"]
    assert Regression.from_dict(d).interval("mae") is None
    for k in ("wd4", "wy3", "wy4", "wd2y", "wd2y2"):
        del d["state"]["exact_sums"][k]
    assert Regression.from_dict(d).interval("r2") is None
    u = Regression().update_many(list(range(60)), [x + (-1.0) ** x for x in range(60)])
    d = u.to_dict()
    for k in ("wd4", "wy3", "wy4", "wd2y", "wd2y2"):
        del d["state"]["exact_sums"][k]
    assert Regression.from_dict(d).interval("mae") == u.interval("mae")  # unit weights: derived
    assert Regression.from_dict(d).interval("r2") is None


@pytest.mark.parametrize("make, key, bad, match", [
    (lambda: ConfusionMatrix().update_many([0, 1, 1], [0, 1, 0], [2.0, 0.5, 3.0]), "cells_squares", [1.0, -1.0, 2.0],
     "cells_squares"),
    (lambda: ConfusionMatrix().update_many([0, 1, 1], [0, 1, 0], [2.0, 0.5, 3.0]), "cells_squares", [100.0, 0.25, 9.0],
     "exceeds the square"),
    (lambda: BinaryScores().update_many([0, 1, 1], [0.2, 0.6, 0.9], [2.0, 0.5, 3.0]), "weighted_squares", [4.0],
     "weighted_squares"),
    (lambda: BinaryScores().update_many([0, 1, 1], [0.2, 0.6, 0.9], [2.0, 0.5, 3.0]), "weighted_squares",
     [4.0, 1e6], "cannot be the sum"),
    (lambda: ScoreDistribution().update_many([0.2, 0.6], [2.0, 0.5]), "weight_squares", 1e9, "weight_squares"),
])
def test_hostile_squares_are_refused(make, key, bad, match) -> None:
    d = make().to_dict()
    assert key in d["state"]
    d["state"][key] = bad
    with pytest.raises(ValueError, match=match):
        sm.from_dict(d)


@settings(max_examples=15, deadline=None)
@given(st.integers(250, 500), st.integers(0, 10_000))
def test_weighted_label_and_regression_intervals_equal_on_every_path(n: int, seed: int) -> None:
    rng = random.Random(seed)
    y = [rng.randrange(3) for _ in range(n)]
    p = [t if rng.random() < 0.7 else rng.randrange(3) for t in y]
    w = [rng.choice(WEIGHTS) for _ in range(n)]
    whole = ConfusionMatrix().update_many(y, p, w)
    per_event = ConfusionMatrix()
    for a, b, c in zip(reversed(y), reversed(p), reversed(w)):
        per_event.update(a, b, c)
    h = n // 3
    parts = (ConfusionMatrix().update_many(y[h:], p[h:], w[h:]) + ConfusionMatrix().update_many(y[:h], p[:h], w[:h]))
    for metric in ("accuracy", "macro_f1", "recall"):
        want = whole.interval(metric)
        assert want is not None
        assert per_event.interval(metric) == want == parts.interval(metric) == _round_trip(parts).interval(metric)
    yt = [rng.gauss(0, 1) for _ in range(n)]
    yp = [v + rng.gauss(0, 0.3) for v in yt]
    r = Regression().update_many(yt, yp, w)
    r2 = Regression()
    for a, b, c in zip(reversed(yt), reversed(yp), reversed(w)):
        r2.update(a, b, c)
    r3 = Regression().update_many(yt[h:], yp[h:], w[h:]) + Regression().update_many(yt[:h], yp[:h], w[:h])
    for metric in ("mae", "mse", "r2"):
        want = r.interval(metric)
        assert want is not None
        assert r2.interval(metric) == want == r3.interval(metric) == _round_trip(r3).interval(metric)
    # removal: the exact sums (squared weights and moments included) of the events left
    for a, b, c in zip(yt[:h], yp[:h], w[:h]):
        r2.remove(a, b, c)
    left = Regression().update_many(yt[h:], yp[h:], w[h:])
    assert r2.to_dict()["state"]["exact_sums"] == left.to_dict()["state"]["exact_sums"]
    assert r2.interval("r2") == left.interval("r2")


def _r2_want(yt: np.ndarray, yp: np.ndarray, bound: bool) -> tuple[float, float]:
    d2 = (yt - yp) ** 2
    c2 = (yt - yt.mean()) ** 2
    a, b = d2.mean(), c2.mean()
    if bound:  # E d^4 replaced by max d^2 E d^2
        phi2 = float(d2.max() * a / a**2 + np.mean(c2 ** 2) / b**2 - 2 * np.mean(d2 * c2) / (a * b))
    else:  # the sample variance of each event's influence on log(1 - R²)
        phi2 = float(np.mean(((d2 - a) / a - (c2 - b) / b) ** 2))
    se = math.sqrt(phi2 / (len(yt) - 1))
    t = float(iv.t_values(iv.z_value(0.95), [len(yt) - 1.0])[0])
    return (1.0 - math.exp(math.log(a / b) + t * se), 1.0 - math.exp(math.log(a / b) - t * se))


def test_r2_delta_method_matches_the_events() -> None:
    """R²'s variance: the sample variance of each event's influence on log(1 - R²), evaluated on
    the events with numpy, is the one the interval uses (normal errors); heavy-tailed errors
    (kurtosis about 0 above 3 + 2.576 sqrt(24 / n)) bound E d^4 by max d^2 E d^2 instead."""
    rng = np.random.default_rng(11)
    yt = rng.normal(3.0, 2.0, 400)
    light = yt + rng.normal(0.0, 1.0, 400)
    d2 = (yt - light) ** 2
    assert np.mean(d2 ** 2) / np.mean(d2) ** 2 < 3.0 + iv.HEAVY_TAIL_Z * math.sqrt(24 / 400)
    assert Regression().update_many(yt, light).interval("r2") == pytest.approx(_r2_want(yt, light, False), rel=1e-9)
    yp = yt + rng.standard_t(5, 400)
    d2 = (yt - yp) ** 2
    assert np.mean(d2 ** 2) / np.mean(d2) ** 2 > 3.0 + iv.HEAVY_TAIL_Z * math.sqrt(24 / 400)
    want = _r2_want(yt, yp, True)
    r = Regression().update_many(yt, yp)
    assert r.interval("r2") == pytest.approx(want, rel=1e-9)
    lo, hi = _r2_want(yt, yp, False)
    assert want[0] < lo and want[1] > hi  # (wider than the plain delta method)
    # far from 0 relative to the spread, the raw fourth powers cannot resolve it: None
    assert Regression().update_many(yt + 1e9, yp + 1e9).interval("r2") is None
    assert Regression().update_many(yt + 1e3, yp + 1e3).interval("r2") == pytest.approx(want, rel=1e-6)


def test_mae_interval_is_on_the_log_scale() -> None:
    """MAE: ``mae exp(+- t s / (mae sqrt(n)))`` with ``s`` the sample deviation of ``|d|``
    (asymmetric: the upper end further from the estimate, as a right-skewed mean needs)."""
    rng = np.random.default_rng(12)
    yt = rng.normal(0.0, 1.0, 60)
    yp = yt + 0.5 * rng.standard_t(5, 60)
    lo, hi = Regression().update_many(yt, yp).interval("mae")
    ad = np.abs(yt - yp)
    m, s = float(ad.mean()), float(ad.std(ddof=1))
    t = float(iv.t_values(iv.z_value(0.95), [len(ad) - 1.0])[0])
    rel = t * s / (m * math.sqrt(len(ad)))
    assert (lo, hi) == pytest.approx((m * math.exp(-rel), m * math.exp(rel)), rel=1e-9)
    assert hi - m > m - lo


def test_weighted_matthews_needs_each_margin_effective() -> None:
    """Three heavy predicted positives (weight 10 each): the margin's own effective size is 3,
    though the whole matrix's Kish factor makes it 20 pseudo-events: no Matthews interval."""
    y = [1] * 3 + [1] * 50 + [0] * 500
    p = [1] * 3 + [0] * 50 + [0] * 500
    w = [10.0] * 3 + [1.0] * 550
    cm = ConfusionMatrix().update_many(y, p, w)
    assert cm.interval("matthews_corrcoef") is None
    assert cm.interval("accuracy") is not None
    spread = ConfusionMatrix().update_many(y + [1] * 40, p + [1] * 40, w + [1.0] * 40)
    assert spread.interval("matthews_corrcoef") is not None


def test_regression_intervals_of_huge_errors_are_none_not_a_crash() -> None:
    """An error of 1e300 (its square beyond the float range): ``replay --task regression`` raised
    OverflowError computing the MSE interval's bound; now the interval is None."""
    y = [float(i) for i in range(40)]
    p = [v + 1.0 for v in y]
    r = Regression().update_many(y + [0.0], p + [-1e300])
    assert r.interval("mse") is None and r.interval("r2") is None
    assert r.interval("mae") is None or math.isfinite(r.interval("mae")[1])
