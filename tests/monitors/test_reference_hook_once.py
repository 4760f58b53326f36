"""The --reference hook reads each window once for its metrics and its CBPE intervals (the
snapshot asks for the intervals right after the metrics), with the values of the two reads."""
from __future__ import annotations

import numpy as np

import streammetrics.monitors.reference as reference_module
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.reference import Reference, snapshot_metrics


def _window(seed: int, n: int) -> BinaryMonitor:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.round(1 / (1 + np.exp(-(2 * y - 1) - rng.normal(0, 1.5, n))), 6)
    m = BinaryMonitor()
    m.update_many([{"y_true": int(a), "score": float(b)} for a, b in zip(y, s)])
    return m


def _reference() -> Reference:
    rng = np.random.default_rng(0)
    s = rng.random(800)
    return Reference.from_arrays(rng.random(800) < s, s)


def test_one_read_per_window(monkeypatch):
    ref = _reference()
    hook = snapshot_metrics({("m", ""): ref})
    reads = []
    real = reference_module.window_histogram

    def counting(window):
        reads.append(window)
        return real(window)

    monkeypatch.setattr(reference_module, "window_histogram", counting)
    for n in (40, 1000):  # the small form and the histograms
        window = _window(n, n)
        metrics: dict = {}
        reads.clear()
        hook(("m", ""), window, metrics)
        pairs = hook.intervals(("m", ""), window, 0.95)
        assert len(reads) == 1
        assert metrics == ref.metrics(window)
        assert pairs == ref.estimate_intervals(window, 0.95)


def test_another_window_or_a_change_is_read_again():
    ref = _reference()
    hook = snapshot_metrics({("m", ""): ref})
    a, b = _window(1, 500), _window(2, 300)
    hook(("m", ""), a, {})
    assert hook.intervals(("m", ""), b, 0.95) == ref.estimate_intervals(b, 0.95)
    hook(("m", ""), a, {})
    assert hook.intervals(("m", ""), a, 0.9) == ref.estimate_intervals(a, 0.9)
    hook(("m", ""), a, {})
    a.update({"y_true": 1, "score": 0.99})
    assert hook.intervals(("m", ""), a, 0.95) == ref.estimate_intervals(a, 0.95)
    hook(("x", ""), a, {})  # a key without a reference
    assert hook.intervals(("x", ""), a, 0.95) == {}
