"""BinaryScores.intervals: the roc_auc, log_loss and brier_score intervals from one pass, each
as interval(metric) gives it (the --compare reference baseline reads the three)."""
from __future__ import annotations

import numpy as np
import pytest

from streammetrics.metrics.binary_scores import BinaryScores


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [0, 15, 400])
def test_intervals_are_each_interval(weighted, n):
    rng = np.random.default_rng(n)
    y = rng.integers(0, 2, n)
    s = np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1)
    b = BinaryScores().update_many(y, s, rng.random(n) * 2 if weighted else None)
    for confidence in (0.9, 0.95):
        got = b.intervals(confidence)
        assert list(got) == ["roc_auc", "log_loss", "brier_score"]
        assert got == {name: b.interval(name, confidence) for name in got}
    if n == 400:
        assert all(pair is not None for pair in b.intervals().values())
    with pytest.raises(ValueError, match="confidence"):
        b.intervals(1.5)


@pytest.mark.parametrize("n", [400, 2000])
def test_intervals_equal_delong_and_student_t_computed_from_the_events(n):
    # an independent computation from the raw events (per-event placements, per-event terms,
    # scipy's t quantile), not through interval(), which reads intervals()
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(n)
    y = rng.integers(0, 2, n)
    s = np.round(np.clip(0.25 * y + rng.random(n) * 0.75, 0.001, 0.999), 3)  # ties: half placements
    b = BinaryScores().update_many(y, s)
    got = b.intervals(0.9)
    pos, neg = s[y == 1], s[y == 0]
    p, m = len(pos), len(neg)
    t = stats.t.ppf(0.95, min(p, m) - 1)
    v10 = np.array([((neg < x).sum() + 0.5 * (neg == x).sum()) / m for x in pos])
    v01 = np.array([((pos > x).sum() + 0.5 * (pos == x).sum()) / p for x in neg])
    auc = v10.mean()
    se = np.sqrt(v10.var(ddof=1) / p + v01.var(ddof=1) / m)
    centre, width = np.log(auc / (1 - auc)), t * se / (auc * (1 - auc))
    want_auc = (1 / (1 + np.exp(width - centre)), 1 / (1 + np.exp(-(centre + width))))
    assert got["roc_auc"] == pytest.approx(want_auc, rel=1e-9)
    for name, terms, high in (("log_loss", np.where(y == 1, -np.log(s), -np.log(1 - s)), np.inf),
                              ("brier_score", (s - y) ** 2, 1.0)):
        mean, sd = terms.mean(), terms.std(ddof=1)
        want = (max(mean - t * sd / np.sqrt(n), 0.0), min(mean + t * sd / np.sqrt(n), high))
        assert got[name] == pytest.approx(want, rel=1e-9), name
