"""snapshot_line: with msgspec installed the line is byte-identical to json's canonical
encoding (``json.dumps(..., separators=(",", ":"), allow_nan=False)``) for every value json
accepts, and json's refusals (NaN, infinities) stay refusals (issue 12, snapshot encoding)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.monitors import BinaryMonitor
from streammetrics.stream import snapshots
from streammetrics.stream.snapshots import build_snapshot, snapshot_line


def canonical(value):
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), finite,
                    st.sampled_from([1e-5, 1e-4, 0.0001234, 1e15, 1e16, 1.5e300, 5e-324, -0.0, 12.00001]),
                    st.text(max_size=12), st.sampled_from(["m\x7f", 'q"', "e\\", "\u00e9", "1e5", "0.00001"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.one_of(st.text(max_size=6), st.integers(), finite),
                                                 inner, max_size=5)), max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=8), values, max_size=6), values)
def test_byte_identical_to_json(top, metrics):
    snap = {**top, "metrics": metrics}
    assert snapshot_line(snap) == canonical(snap)


@settings(max_examples=200, deadline=None)
@given(finite)
def test_every_float_prints_as_repr(x):
    snap = {"metrics": {"v": x}, "state": [x, -x]}
    assert snapshot_line(snap) == canonical(snap)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan")])
@pytest.mark.parametrize("where", ["top", "nested", "deep", "flat", "flat_text", "opposite"])
def test_non_finite_metrics_are_refused_as_json_refuses_them(bad, where):
    metrics = {"top": {"a": bad}, "nested": {"per_class": {"x": bad}},
               "deep": {"a": [[[[{"b": bad}]]]]}, "flat": {"a": None, "b": 3, "c": 0.5, "d": bad, "e": True},
               "flat_text": {"a": "x", "b": bad}, "opposite": {"a": bad, "b": -bad, "c": 1.0}}[where]
    with pytest.raises(ValueError):
        canonical({"metrics": metrics})
    with pytest.raises(ValueError):
        snapshot_line({"metrics": metrics})


@pytest.mark.parametrize("metrics", [
    {"a": 1e308, "b": 1e308, "c": None},  # finite values whose sum overflows
    {"a": 10**400, "b": 0.5}, {"a": np.float64(0.25), "b": 2}, {}, {"a": None},
])
def test_flat_metrics_that_one_sum_cannot_judge_are_judged_value_by_value(metrics):
    assert snapshot_line({"metrics": metrics}) == canonical({"metrics": metrics})


@pytest.mark.parametrize("snap", [
    {"m": "x:0.00001,y", "v": 1e-5},  # the float's msgspec text also inside a string
    {"m": "[1e16]", "v": [1e16, -1e-7]},
    {"k": {1e-5: 1.0, 0.5: 2.0}},  # a float key: msgspec writes "0.00001", json "1e-05"
    {"a": 10.00001, "b": 1e-7},  # 0.0000 inside an ordinary float
    {"m": "v2e", "b": 1e16, "c": 2.5e-10},
    {"a": [5e-324, -1e-5, 1.5e300, 0.0001, 12.00001]},
])
def test_floats_msgspec_writes_otherwise_match_json(snap):
    assert snapshot_line(snap) == canonical(snap)


def test_small_scores_keep_the_fast_path(monkeypatch):
    # a fraud model's scores go below 1e-4: msgspec writes 0.00001 and 1e-7 where json writes
    # 1e-05 and 1e-07; those values are rewritten in msgspec's line rather than json called
    m = BinaryMonitor()
    for i, s in enumerate([0.00001, 2.5e-7, 0.000093, 0.3, 0.9, 1e-12]):
        m.update({"y_true": i % 2, "score": s})
    snap = build_snapshot(("m", "s"), m, 0, 60_000, final=True)
    line = canonical(snap)
    assert "1e-05" in line and "2.5e-07" in line
    if snapshots._fast_encode is not None:
        class NoJson:
            def encode(self, value):
                raise AssertionError("json path taken")

        monkeypatch.setattr(snapshots, "_JSON", NoJson())
    assert snapshot_line(snap) == line


def test_real_snapshots_take_the_fast_path_and_match(monkeypatch):
    m = BinaryMonitor()
    for i in range(40):
        m.update({"y_true": i % 2, "score": (i * 37 % 101) / 101 + 1e-3})
    snap = build_snapshot(("m\u00e9", ""), m, 0, 60_000, final=True)
    assert snapshot_line(snap) == canonical(snap)  # non-ASCII key: json's escapes
    snap = build_snapshot(("m", "s"), m, 1_767_225_600_000, 1_767_225_660_000, final=True)
    assert snapshot_line(snap) == canonical(snap)
    if snapshots._fast_encode is not None:  # the msgspec line is the one kept
        class NoJson:
            def encode(self, value):
                raise AssertionError("json path taken")

        line = canonical(snap)
        monkeypatch.setattr(snapshots, "_JSON", NoJson())
        assert snapshot_line(snap) == line


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12), st.sampled_from(["", "x", "\u00e9\x00", 'q"\\']), st.integers(-(2**40), 2**40),
       st.integers(1, 10**6), st.integers(0, 10**6), st.integers(0, 10**9), values, values)
def test_window_line_is_the_snapshot_line(model, segment, start_ms, length_ms, count, late, metrics, state):
    """``window_line`` writes the line of a final window straight from its metrics and state
    texts: the line of ``build_snapshot`` of the same record (any key, window, counts)."""
    record = ({"m": metrics}, {"s": state})
    snap = build_snapshot((model, segment), None, start_ms, start_ms + length_ms, final=True, late=late, count=count,
                          record=record)
    line = snapshots.window_line((model, segment), start_ms, start_ms + length_ms, count, late,
                                 canonical(record[0]), canonical(record[1]))
    assert line == canonical(snap)


def test_window_lines_are_each_windows_line():
    """``window_lines`` (keys' and times' texts made once) writes each window as ``window_line``:
    keys shared and not, odd strings, whole and fractional seconds."""
    from streammetrics.stream.snapshots import window_line, window_lines

    windows = [(("m", "s"), 0, 60_000, 3, 0, '{"n":1}', '{"s":0.5}', ""),
               (("m", "s"), 60_000, 120_000, 1, 2, '{"n":2}', '{"s":0.25}', ',"intervals":{}'),
               (('m"q\\', "ünï"), 1500, 61_500, 4, 1, '{"n":3}', '{"s":1}', ""),
               (("m", "ünï"), 0, 60_000, 2, 0, "{}", "{}", ""),
               ((None, 7), 0, 60_000, 1, 0, "{}", "{}", "")]  # (key parts the library API allows)
    columns = list(zip(*windows))
    texts = list(zip(*columns[5:]))
    assert window_lines(*columns[:5], texts) == [window_line(*w) for w in windows]
    assert window_lines([], [], [], [], [], []) == []


def test_marks_inside_strings_keep_the_fast_path(monkeypatch):
    """A state's base64 text holds ``e`` after digits (``"x0e5Ae-"``): left as it is, the line
    still msgspec's, its floats rewritten; a string of number bytes only (a float dict key may
    be one) sends the line to json."""
    snap = {"metrics": {"a": 1e-5}, "state": {"packed": "AB0e5e-9x0.00001Q", "more": ["1e7z", 2.5e-10]}}
    line = canonical(snap)
    if snapshots._fast_encode is None:
        pytest.skip("msgspec not installed")
    assert snapshots._json_floats(snapshots._fast_encode(snap), snapshots._fast_encode(snap).translate(
        snapshots._MARK)) == line.encode()
    for key_like in ({"k": {1e-5: 1.0}}, {"k": "0.00001"}, {"k": ["1e16", 1e16]}):
        raw = snapshots._fast_encode(key_like)
        assert snapshots._json_floats(raw, raw.translate(snapshots._MARK)) is None
        assert snapshot_line(key_like) == canonical(key_like)

    class NoJson:
        def encode(self, value):
            raise AssertionError("json path taken")

    monkeypatch.setattr(snapshots, "_JSON", NoJson())
    assert snapshot_line(snap) == line
