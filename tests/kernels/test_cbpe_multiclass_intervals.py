"""Intervals of the multiclass CBPE estimates (issue 26 point 3): each row's label a categorical
draw of its calibrated row, so the realised accuracy's variance is exactly the sum of the rows'
``w^2 p (1 - p)`` and macro F1's linearisation's exactly its categorical variance (both checked
by enumerating every labelling); a monitor's exact sums equal the formula's on every path, and
snapshots with ``--task multiclass --reference`` carry the intervals."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from streammetrics.cli import main
from streammetrics.events.parser import Event
from streammetrics.kernels import cbpe_multiclass as cm
from streammetrics.kernels.intervals import t_values, z_value
from streammetrics.monitors import MulticlassMonitor
from streammetrics.monitors.reference_multiclass import MulticlassReference

Z = z_value(0.95)


def test_variances_are_the_exact_categorical_ones() -> None:
    rng = np.random.default_rng(1)
    n, k = 7, 3
    p = rng.dirichlet([2, 2, 2], n)
    w = np.ones(n)
    pred = (p + rng.normal(0, 0.05, p.shape)).argmax(axis=1)  # (not always the arg-max of p)
    t = w[:, None] * p
    tp = np.bincount(pred, weights=t[np.arange(n), pred], minlength=k)
    predicted, prob, total = np.bincount(pred, weights=w, minlength=k), t.sum(axis=0), float(w.sum())
    u, r, v = cm.second_order_sums(t, w, pred)
    den = predicted + prob
    a, b = 2 * (den - tp) / den ** 2 / k, -2 * tp / den ** 2 / k  # macro F1's gradient in TP, FN
    mean, second = {"acc": 0.0, "lin": 0.0}, {"acc": 0.0, "lin": 0.0}
    for labels in itertools.product(range(k), repeat=n):
        y = np.array(labels)
        weight = float(np.prod(p[np.arange(n), y]))
        hit = y == pred
        tps = np.bincount(pred[hit], weights=w[hit], minlength=k)
        fns = np.bincount(y[~hit], weights=w[~hit], minlength=k)
        for name, x in (("acc", float(np.sum(w * hit)) / total), ("lin", float(a @ tps + b @ fns))):
            mean[name] += weight * x
            second[name] += weight * x * x
    # with 7 events no interval is given (minimum rule): the variances through a larger copy
    # (every row 10 times: sums x 10, variances / 10 on the means' scale)
    got = cm.estimated_intervals(tp * 10, predicted * 10, prob * 10, total * 10, u * 10, r * 10, v * 10, Z)
    est = cm.estimated_metrics(tp, predicted, prob, total)
    for name, key, events in (("acc", "accuracy", 70.0), ("lin", "macro_f1", float(prob.min()) * 10)):
        var = (second[name] - mean[name] ** 2) / 10
        pair = got[key]
        assert pair is not None and pair[0] > 0.0
        t_q = float(t_values(Z, [events - 1.0])[0])
        assert (est[key] - pair[0]) / t_q == pytest.approx(math.sqrt(var), rel=1e-9)


def _reference() -> MulticlassReference:
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, 3000)
    s = rng.dirichlet([1, 1, 1], 3000)
    s[np.arange(3000), y] += 0.5
    return MulticlassReference.from_arrays(y, s / s.sum(axis=1, keepdims=True), classes=[0, 1, 2])


def test_monitor_sums_are_the_formula_on_every_path() -> None:
    ref = _reference()
    rng = np.random.default_rng(6)
    s = rng.dirichlet([2, 1, 1], 500)
    w = rng.choice([0.5, 1.0, 3.0], 500)
    whole = ref.estimator().update_many(s, w)
    halves = ref.estimator().update_many(s[:200], w[:200]).merge(ref.estimator().update_many(s[200:], w[200:]))
    assert whole.intervals() == halves.intervals()
    terms = w[:, None] * ref.calibrated(s)
    u, r, v = cm.second_order_sums(terms, w, s.argmax(axis=1))
    flat = np.array([x.value for x in whole._sums[5]]).reshape(3, 3, 3)
    for mine, want in zip(flat, (u, r, v)):
        assert mine == pytest.approx(want, rel=1e-12)
    m = MulticlassMonitor([0, 1, 2], reference=ref)
    for i, (row, weight) in enumerate(zip(s.tolist(), w.tolist())):  # per event (labels not given)
        m.update_prediction(Event(float(i), "m", y_true=None, scores=tuple(row), weight=weight))
    got = ref.monitor_intervals(m)
    assert got["estimated_accuracy"] is not None and got["estimated_macro_f1"] is not None
    assert got == whole.intervals()  # (exact sums: the same floats)
    lo, hi = got["estimated_accuracy"]
    assert lo < ref.monitor_estimate(m)["estimated_accuracy"] < hi


def test_snapshots_with_a_multiclass_reference_carry_the_intervals(tmp_path, capsys) -> None:
    rng = np.random.default_rng(7)
    classes = ["a", "b", "c"]

    def rows(n: int, t0: float, labelled: bool) -> list[dict]:
        out = []
        for i, row in enumerate(rng.dirichlet([1, 1, 1], n).tolist()):
            e = {"ts": 1767225600 + t0 + 50 * i / n, "model": "m", "scores": dict(zip(classes, row))}
            if labelled:
                e["y_true"] = classes[int(rng.choice(3, p=row))]
            out.append(e)
        return out
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps(e) + "\n" for e in rows(2000, 0.0, True)))
    cur = tmp_path / "cur.jsonl"
    cur.write_text("".join(json.dumps(e) + "\n" for e in rows(400, 0.0, True) + rows(400, 60.0, True)))
    assert main(["replay", str(cur), "--task", "multiclass", "--classes", "a,b,c", "--window", "60s",
                 "--reference", str(ref)]) == 0
    snaps = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(snaps) == 2
    for snap in snaps:
        for name in ("estimated_accuracy", "estimated_macro_f1"):
            lo, hi = snap["intervals"][name]
            assert lo < snap["metrics"][name] < hi


def test_no_interval_for_a_window_larger_than_half_the_reference() -> None:
    ref = _reference()  # 3,000 events
    s = np.random.default_rng(8).dirichlet([2, 1, 1], 1600)
    assert all(v is not None for v in ref.estimator().update_many(s[:1500]).intervals().values())
    assert all(v is None for v in ref.estimator().update_many(s).intervals().values())
