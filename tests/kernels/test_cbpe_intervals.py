"""Intervals of the CBPE estimates (issue 26 point 3): the label variance is the exact
Poisson-binomial variance of the realised metric (enumerated), ROC AUC's delta method matches a
Monte Carlo of the labels, weights count by their effective size, and snapshots with
``--reference`` carry them (windows without labels too)."""
from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pytest

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import cbpe
from streammetrics.kernels.intervals import t_values, z_value
from streammetrics.metrics.score_distribution import ScoreDistribution
from streammetrics.monitors.reference import Reference
from streammetrics.stream.pipeline import Pipeline, PipelineConfig

Z = z_value(0.95)


def _sd(pair: tuple[float, float], events: float) -> float:
    return (pair[1] - pair[0]) / 2.0 / float(t_values(Z, [events - 1.0])[0])


def test_label_variance_is_the_exact_poisson_binomial_one() -> None:
    """12 events: every labelling enumerated with its probability; accuracy and precision are
    linear in the labels, so their variances are exact (no calibration error: block variance 0,
    an infinite reference)."""
    rng = np.random.default_rng(4)
    c = np.sort(np.concatenate([rng.uniform(0.55, 0.9, 10), rng.uniform(0.1, 0.45, 2)]))  # 10 predicted positive
    w = np.ones(12)
    predicted = c >= 0.5
    got = cbpe.estimated_intervals(c, w, predicted, Z)
    mean = {"accuracy": 0.0, "precision": 0.0}
    second = dict(mean)
    for labels in itertools.product((0, 1), repeat=12):
        y = np.array(labels)
        prob = float(np.prod(np.where(y == 1, c, 1.0 - c)))
        acc = float(np.mean(y == predicted))
        prec = float(y[predicted].mean())
        for name, v in (("accuracy", acc), ("precision", prec)):
            mean[name] += prob * v
            second[name] += prob * v * v
    for name, events in (("accuracy", 12), ("precision", int(predicted.sum()))):
        pair = got[f"estimated_{name}"]
        assert pair is not None
        var = second[name] - mean[name] ** 2
        t = float(t_values(Z, [events - 1.0])[0])
        assert pair[0] > 0.0  # (the low end unclipped: the estimate minus t sd)
        assert (mean[name] - pair[0]) / t == pytest.approx(math.sqrt(var), rel=1e-9)


def test_auc_delta_method_matches_a_monte_carlo_of_the_labels() -> None:
    rng = np.random.default_rng(5)
    n = 300
    c = np.sort(rng.beta(2, 4, n))
    w = np.ones(n)
    pair = cbpe.estimated_intervals(c, w, c >= 0.5, Z)["estimated_roc_auc"]
    assert pair is not None
    sd = _sd(pair, min(float(c.sum()), float((1 - c).sum())))
    ranks = np.arange(1, n + 1)
    aucs = []
    for _ in range(4000):
        y = rng.random(n) < c
        pos = y.sum()
        aucs.append(((ranks * y).sum() - pos * (pos + 1) / 2) / (pos * (n - pos)))
    assert sd == pytest.approx(float(np.std(aucs)), rel=0.08)


def test_weights_count_by_their_effective_size() -> None:
    """Doubling every weight changes nothing; weights that vary widen the intervals."""
    rng = np.random.default_rng(6)
    s = rng.random(3000)
    ref = Reference.from_arrays(rng.random(3000) < s, s)
    scores = rng.random(400)
    unit = ref.estimate_intervals(ScoreDistribution().update_many(scores))
    doubled = ref.estimate_intervals(ScoreDistribution().update_many(scores, np.full(400, 2.0)))
    varied = ref.estimate_intervals(ScoreDistribution().update_many(scores, rng.choice([0.2, 5.0], 400)))
    for name in cbpe.ESTIMATED:
        assert doubled[name] == pytest.approx(unit[name], abs=1e-9), name
        assert varied[name][1] - varied[name][0] > unit[name][1] - unit[name][0], name
    # a weighted window loaded without its squared weights: no interval
    d = ScoreDistribution().update_many(scores, rng.choice([0.2, 5.0], 400)).to_dict()
    d["state"].pop("weight_squares")
    d["state"].pop("weight_squares_residue", None)
    assert ref.estimate_intervals(d) == dict.fromkeys(cbpe.ESTIMATED)


def test_snapshots_with_a_reference_carry_the_estimate_intervals() -> None:
    """Label-free windows get ``intervals`` of their CBPE estimates; labelled ones get them after
    their own; the same on the per-event and batch paths."""
    rng = np.random.default_rng(7)
    s = rng.random(4000)
    ref = Reference.from_arrays(rng.random(4000) < s, s)
    lines = [json.dumps({"ts": 1767225600 + i * 0.05, "model": "m", "score": float(x),
                         **({"y_true": int(rng.random() < x)} if i >= 1200 else {"id": f"e{i}"})})
             for i, x in enumerate(rng.random(2400))]
    snaps = []
    for batch in (False, True):
        pipe = Pipeline(PipelineConfig(window=60.0, max_future=None, references={("m", ""): ref}))
        if batch:
            pipe.process("[" + ",".join(lines) + "]")
        else:
            for line in lines:
                pipe.process(line)
        snaps.append(pipe.flush())
    assert snaps[0] == snaps[1]
    label_free, labelled = snaps[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        want = ref.estimate_intervals(ScoreDistribution().update_many(
            [json.loads(x)["score"] for x in lines[:1200]]))
    assert list(label_free["intervals"]) == ["confidence", *cbpe.ESTIMATED]
    for name in cbpe.ESTIMATED:
        assert label_free["intervals"][name] == pytest.approx(list(want[name]))
        assert labelled["intervals"][name] is not None
    assert "accuracy" in labelled["intervals"] and "accuracy" not in label_free["intervals"]
