"""Operating points of BinaryScores against scikit-learn's curves (issue 28, point 5)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_curve

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.metrics.binary_scores import BinaryScores

RATES = [0.0, 0.05, 0.3, 0.5, 0.8, 0.95, 1.0]


def _streams(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 80))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            continue
        s = np.round(rng.random(n), int(rng.integers(1, 4)))  # ties at 1-3 decimals
        w = None if rng.random() < 0.5 else rng.integers(1, 4, n).astype(float)
        yield y, s, w


def _sk_lexmax(rows):
    """torchmetrics' rule on scikit-learn's curve points: lexicographic max, (0, inf) when none
    or when the best value is 0."""
    best = max(rows, default=None)
    if best is None or best[0] == 0:
        return 0.0, math.inf
    return best[0], best[-1]


def test_exact_states_equal_sklearn_curves() -> None:
    checked = 0
    for y, s, w in _streams(0, 200):
        b = BinaryScores(exact=True).update_many(y, s, w)
        p, r, t = precision_recall_curve(y, s, sample_weight=w)
        fpr, tpr, rt = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
        for x in RATES:
            assert b.precision_at_recall(x) == _sk_lexmax((pp, rr, tt) for pp, rr, tt in zip(p, r, t) if rr >= x)
            assert b.recall_at_precision(x) == _sk_lexmax((rr, pp, tt) for pp, rr, tt in zip(p, r, t) if pp >= x)
            assert b.tpr_at_fpr(x) == _sk_lexmax((tp, tt) for fp, tp, tt in zip(fpr, tpr, rt) if fp <= x)
            assert b.precision_at_recall_bounds(x)[0] == b.precision_at_recall_bounds(x)[1]
            assert b.tpr_at_fpr_bounds(x)[0] == b.tpr_at_fpr_bounds(x)[1]
            checked += 1
    assert checked > 1000


def test_default_state_while_small_is_exact() -> None:
    y, s = np.array([0, 1, 1, 0, 1]), np.array([0.2, 0.9, 0.4, 0.6, 0.6])
    b = BinaryScores().update_many(y, s)
    assert b.exact
    assert b.precision_at_recall(0.6) == BinaryScores(exact=True).update_many(y, s).precision_at_recall(0.6)


def _exact_at(y, s, threshold):
    pred = s >= threshold
    tp, fp = float(np.sum(pred & (y == 1))), float(np.sum(pred & (y == 0)))
    return tp, fp, float(np.sum(y == 1)), float(np.sum(y == 0))


@pytest.mark.parametrize("seed", range(6))
def test_binned_bounds_hold_exact_value_and_threshold_attains_low(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 3000
    s = rng.random(n) ** (1 + seed % 3)
    y = (rng.random(n) < s).astype(int)
    binned = BinaryScores(bins=64, max_bins=40).update_many(y, s)
    exact = BinaryScores(exact=True).update_many(y, s)
    assert not binned.exact
    for x in RATES:
        for name in ("precision_at_recall", "recall_at_precision", "tpr_at_fpr"):
            low, high = getattr(binned, name + "_bounds")(x)
            true, _ = getattr(exact, name)(x)
            assert low <= true + 1e-12 and true <= high + 1e-12, (name, x, low, true, high)
            value, t = getattr(binned, name)(x)
            assert value == low
            if value > 0:  # the binned threshold really gives that value on the events
                tp, fp, pos, neg = _exact_at(y, s, t)
                if name == "precision_at_recall":
                    assert tp / pos >= x and tp / (tp + fp) == pytest.approx(value, rel=1e-12)
                elif name == "recall_at_precision":
                    assert tp / (tp + fp) >= x and tp / pos == pytest.approx(value, rel=1e-12)
                else:
                    assert fp / neg <= x and tp / pos == pytest.approx(value, rel=1e-12)


def test_expected_cost_exact_and_bounds() -> None:
    rng = np.random.default_rng(3)
    s = rng.random(2000)
    y = (rng.random(2000) < s).astype(int)
    w = rng.integers(1, 3, 2000).astype(float)
    for t in (0.0, 0.3, 0.5, 0.77, 1.0):
        pred = s >= t
        fp, fn = float(w[pred & (y == 0)].sum()), float(w[~pred & (y == 1)].sum())
        want = (2.0 * fp + 5.0 * fn) / w.sum()
        exact = BinaryScores(exact=True).update_many(y, s, w)
        assert exact.expected_cost(2.0, 5.0, t) == pytest.approx(want, rel=1e-12)
        cost, low, high = BinaryScores(bins=16, max_bins=30).update_many(y, s, w).expected_cost_bounds(2.0, 5.0, t)
        assert low <= want + 1e-12 <= high + 2e-12 and low <= cost <= high


def test_undefined_and_bad_targets() -> None:
    b = BinaryScores().update_many([1, 1], [0.2, 0.4])
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(b.tpr_at_fpr(0.1)[0])
    assert b.precision_at_recall(0.5) == (1.0, 0.2)  # ties: the higher recall
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        assert math.isnan(BinaryScores().expected_cost(1.0, 1.0, 0.5))
    for bad in (-0.1, 1.5, math.nan, "0.5", True):
        with pytest.raises(ValueError, match="min_recall"):
            b.precision_at_recall(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cost_fn"):
        b.expected_cost(1.0, -2.0, 0.5)
