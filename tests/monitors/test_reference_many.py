"""``Reference.metrics_and_intervals_many`` (the ``--reference`` hook's ``prepare``: the windows built
together, issue 24 point 3) gives each window's metrics and intervals bit for bit as
``metrics_and_intervals`` does window by window: small windows' drift in one vectorised pass
(count weights), any other window as before."""
from __future__ import annotations

import json

import numpy as np
import pytest

from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.reference import Reference, ReferenceLevels, snapshot_metrics, window_histogram


def _monitor(rng: np.random.Generator, n: int, spread: float = 1.5, lo: float = 0.0, hi: float = 1.0) -> BinaryMonitor:
    y = rng.random(n) < 0.3
    s = np.round(1 / (1 + np.exp(-(2 * y - 1) - rng.normal(0, spread, n))), 6)
    s = np.clip(lo + (hi - lo) * s, 1e-6, 1 - 1e-6)
    m = BinaryMonitor()
    for a, b in zip(y.tolist(), s.tolist()):
        m.update({"y_true": int(a), "score": b})  # (the small form while few)
    return m


def _reference(rng: np.random.Generator, n: int, **kw) -> Reference:
    s = np.round(rng.beta(2, 3, n), 6)
    return Reference.from_arrays(rng.random(n) < s, s, **kw)


def _text(pair) -> str:
    return json.dumps(pair, allow_nan=True)


def _windows(rng: np.random.Generator) -> list[BinaryMonitor]:
    out = [_monitor(rng, n) for n in (1, 2, 3, 7, 8, 9, 25, 25, 40, 130, 200)]
    out += [_monitor(rng, 30, lo=0.9, hi=1.0), _monitor(rng, 30, lo=0.0, hi=0.05)]  # past the reference's ends
    parts = BinaryMonitor()  # not in its small form: window by window
    parts.update_many([{"y_true": int(rng.random() < 0.3), "score": float(x)} for x in rng.random(300)])
    weighted = BinaryMonitor().update({"y_true": 1, "score": 0.4, "weight": 2.5})
    assert parts.small_columns() is None and weighted.small_columns() is None
    out += [parts, weighted, _monitor(rng, 600)]
    return out


@pytest.mark.parametrize("kw", [{}, {"exact": True}, {"bins": 64}, {"psi_groups": 3, "ece_norm": "max"},
                                {"ece_norm": "l2", "ece_bins": 4}])
@pytest.mark.parametrize("size", [1, 5, 40, 3000])
def test_many_equals_one_by_one(kw, size):
    rng = np.random.default_rng(size)
    ref = _reference(rng, size, **kw)
    windows = _windows(rng)
    many = ref.metrics_and_intervals_many(windows, 0.9)
    assert [_text(p) for p in many] == [_text(ref.metrics_and_intervals(w, 0.9)) for w in windows]


def test_a_window_equal_to_the_reference_and_a_weighted_reference():
    rng = np.random.default_rng(7)
    window = _monitor(rng, 50)
    cols = window.small_columns()
    assert cols is not None
    y = np.repeat([0, 1], [int(cols[1].sum()), int(cols[2].sum())])
    s = np.concatenate([np.repeat(cols[0], cols[1].astype(int)), np.repeat(cols[0], cols[2].astype(int))])
    windows = [window, _monitor(rng, 20)]
    for ref in (Reference.from_arrays(y, s), Reference.from_arrays(y, s, exact=True),
                Reference(BinaryScores().update_many(y, s, rng.random(len(s)) + 0.5))):  # weights: one by one
        many = ref.metrics_and_intervals_many(windows)
        assert [_text(p) for p in many] == [_text(ref.metrics_and_intervals(w)) for w in windows]


def test_small_windows_drift_computed_together(monkeypatch):
    """The small windows' drift is not computed window by window (fails if prepare reads them one by one)."""
    rng = np.random.default_rng(3)
    ref = _reference(rng, 500)
    windows = [_monitor(rng, 20) for _ in range(30)]
    expected = [ref.metrics_and_intervals(w) for w in windows]
    hook = snapshot_metrics({("m", ""): ref})

    def one_by_one(self, hist, psi_groups):
        raise AssertionError("a small window's drift computed on its own")

    monkeypatch.setattr(ReferenceLevels, "drift", one_by_one)
    hook.prepare([(("m", ""), w) for w in windows] + [(("x", ""), windows[0])])
    for w, (found, pairs) in zip(windows, expected):
        metrics: dict = {}
        hook(("m", ""), w, metrics)
        assert _text(metrics) == _text(found)
        assert _text(hook.intervals(("m", ""), w, 0.95)) == _text(pairs)


@pytest.mark.parametrize("size", [1, 5, 40, 3000])
def test_cached_quantile_cuts_equal_the_groups_of_each_union(size):
    """A reference of counts reads its PSI / JS groups from cuts cached on its own levels; the same
    drift as the groups computed on each window's union of levels (drift.quantile_groups)."""
    rng = np.random.default_rng(size + 1)
    ref = _reference(rng, size, psi_groups=7)
    levels = ref._levels
    assert levels._counted
    windows = _windows(rng)
    cached = [_text(levels.drift(window_histogram(w), 7)) for w in windows]
    levels._counted = False
    assert cached == [_text(levels.drift(window_histogram(w), 7)) for w in windows]


def test_the_window_engine_prepares_the_small_windows_together(tmp_path, monkeypatch):
    """Replay's small windows of keys with a reference get their metrics from one
    ``metrics_and_intervals_many`` per key and poll (the hook's ``prepare``, called by the window
    engine), none window by window; the lines equal those built window by window."""
    import random

    from streammetrics.stream.pipeline import Pipeline, PipelineConfig
    from streammetrics.stream.references import load_references
    from streammetrics.stream.snapshots import snapshot_line

    rnd = random.Random(9)
    events = [{"ts": 1_700_000_000 + i * 0.05, "model": f"m{i % 4}", "y_true": int(rnd.random() < 0.3),
               "score": round(rnd.random(), 6)} for i in range(4000)]
    ref_file = tmp_path / "ref.jsonl"
    ref_file.write_text("".join(json.dumps(e) + "\n" for e in events[:800]))
    config = PipelineConfig(window=10.0, max_future=None, references=load_references(str(ref_file)))

    def lines(pipe: Pipeline) -> list[str]:
        out = []
        for i, e in enumerate(events[800:]):
            pipe.process(json.dumps(e))
            if i % 500 == 499:
                out += [snapshot_line(s) for s in pipe.poll()]
        return out + [snapshot_line(s) for s in pipe.flush()]

    one_by_one = Pipeline(config)
    one_by_one.windows.extra_metrics.prepare = lambda windows: None  # type: ignore[union-attr]
    expected = lines(one_by_one)
    calls = {"many": 0}
    many = Reference.metrics_and_intervals_many

    def counting(self, windows, confidence=0.95):
        calls["many"] += 1
        return many(self, windows, confidence)

    def alone(self, window, confidence=0.95):
        raise AssertionError("a small window's metrics computed on its own")

    monkeypatch.setattr(Reference, "metrics_and_intervals_many", counting)
    monkeypatch.setattr(Reference, "metrics_and_intervals", alone)
    assert lines(Pipeline(config)) == expected
    assert calls["many"] > 0


def test_passes_bounded_by_rows_max_levels(monkeypatch):
    """Many windows are laid out in passes of at most ROWS_MAX_LEVELS levels (memory bounded): the
    same values with a bound of one window per pass, and a pass of several."""
    import streammetrics.monitors.reference as reference_module

    rng = np.random.default_rng(11)
    ref = _reference(rng, 300)
    windows = [_monitor(rng, n) for n in (5, 30, 12, 60, 1, 25, 25)]
    expected = [_text(p) for p in ref.metrics_and_intervals_many(windows)]
    passes = []
    real = Reference._small_many

    def counting(self, columns, hists, z):
        passes.append(len(columns))
        return real(self, columns, hists, z)

    monkeypatch.setattr(Reference, "_small_many", counting)
    for bound, most in ((1, 1), (3 * (len(ref.scores.class_table()[0]) + 60), 3)):
        passes.clear()
        monkeypatch.setattr(reference_module, "ROWS_MAX_LEVELS", bound)
        assert [_text(p) for p in ref.metrics_and_intervals_many(windows)] == expected
        assert max(passes) == most and sum(passes) == len(windows)
