"""The I/O-free pipeline: messages in, applied events / problems (with codes) / snapshots out,
checkpoints, counters and the snapshot size bound."""
from __future__ import annotations

import json

import pytest

from streammetrics.events.parser import EventParser
from streammetrics.events.records import REJECTION_CODES, Event
from streammetrics.stream.pipeline import Pipeline, PipelineConfig, Problem
from streammetrics.stream.snapshots import snapshot_line
from streammetrics.stream.synthetic import generate_events
from streammetrics.stream.windows import WindowManager

NOW = 1_767_225_600.0


def ev(ts=NOW + 1, model="m", **kw):
    return {"ts": ts, "model": model, "y_true": 1, "score": 0.7, **kw}


def msg(*objs):
    return json.dumps(objs[0] if len(objs) == 1 else list(objs)).encode()


def pipe(**kw):
    return Pipeline(PipelineConfig(**kw), wall_clock=lambda: NOW)


def test_a_valid_event_is_applied():
    p = pipe()
    res = p.process(msg(ev()))
    assert res.applied == 1 and res.problems == [] and res.late == 0
    [snap] = p.flush()
    assert snap["count"] == 1 and snap["key"] == {"model": "m", "segment": ""}


@pytest.mark.parametrize("value,code,field", [
    (b'{"ts": ', "invalid_json", None),
    (b"\xff", "invalid_json", None),
    (b"[" * 600 + b"]" * 600, "invalid_json", None),
    (b'"text"', "bad_type", None),
    (msg({"ts": NOW, "y_true": 1, "score": 0.5}), "missing_field", "model"),
    (msg(ev(score="high")), "bad_type", "score"),
    (msg(ev(y_true=2)), "bad_value", "y_true"),
    (msg(ev(ts=1e13)), "out_of_range", "ts"),
    (msg(ev(model="a|b")), "bad_value", "model"),
    (msg(ev(ts=NOW + 7200)), "future", "ts"),
    (None, "tombstone", None),
])
def test_each_refusal_has_a_code_and_changes_nothing(value, code, field):
    p = pipe()
    p.process(msg(ev()))
    before = p.to_dict()
    res = p.process(value)
    assert res.applied == 0
    [problem] = res.problems
    assert (problem.index, problem.code, problem.field) == (None, code, field)
    assert problem.code in REJECTION_CODES and problem.reason
    assert p.to_dict() == before
    assert p.counters["rejected"] == {code: 1}


def test_unknown_label_code_for_multiclass():
    p = pipe(task="multiclass", classes=["a", "b"])
    res = p.process(msg({"ts": NOW, "model": "m", "y_true": "c", "scores": [0.5, 0.5]}))
    assert [pr.code for pr in res.problems] == ["unknown_label"]


def test_array_message_reports_each_bad_element_by_index():
    p = pipe()
    res = p.process(msg(ev(), {"ts": NOW}, ev(score=None), ev(ts=NOW + 5)))
    assert res.applied == 2
    assert [(pr.index, pr.code, pr.field) for pr in res.problems] == [
        (1, "missing_field", "model"), (2, "bad_type", "score")]
    assert p.counters["events"] == 2 and p.counters["messages"] == 1


def test_late_events_are_problems_with_code_late():
    p = pipe(window=10.0)
    assert p.process(msg(ev(ts=NOW + 1))).applied == 1
    assert p.process(msg(ev(ts=NOW + 25))).applied == 1
    res = p.process(msg(ev(ts=NOW + 2)))
    assert res.problems == [Problem(None, "late", "late event: every window holding its time has closed", "ts")]
    res = p.process(msg(ev(ts=NOW + 3), ev(ts=NOW + 26)))
    assert res.applied == 1 and [(pr.index, pr.code) for pr in res.problems] == [(0, "late")]
    assert p.counters["late"] == 2 and p.counters["rejected"] == {}


def test_key_limit_and_eviction_are_counted():
    p = Pipeline(PipelineConfig(window=10.0, max_keys=2), wall_clock=lambda: NOW)
    assert p.process(msg(ev(model="a"))).applied == 1
    assert p.process(msg(ev(model="b"))).applied == 1
    [problem] = p.process(msg(ev(model="c"))).problems
    assert problem.code == "key_limit" and "max_keys=2" in problem.reason
    assert p.process(msg(ev(model="a", ts=NOW + 20))).applied == 1  # the watermark closes a's and b's windows
    assert len(p.poll()) == 2
    assert p.process(msg(ev(model="c", ts=NOW + 21))).applied == 1  # b, all closed, was evicted: room
    c = p.counters
    assert c["keys_overflow"] == 1 and c["keys_evicted"] == 1 and c["keys"] == 2 and c["snapshots"] == 2


def test_process_event_equals_process():
    a, b = pipe(), pipe()
    parser = EventParser("binary")
    for e in generate_events(500, duration=300.0, seed=3, jitter=5.0):
        line = json.dumps(e).encode()
        a.process(line)
        [parsed] = parser.parse_value(line)
        assert isinstance(parsed, Event)
        b.process_event(parsed)
    assert a.flush() == b.flush()
    assert a.counters == b.counters


def test_pipeline_gives_the_snapshots_of_the_parser_plus_windows_path():
    """The service's former inline path (parse_value + WindowManager.add), event for event."""
    from streammetrics.monitors import BinaryMonitor

    lines = [json.dumps(e).encode() for e in generate_events(3000, duration=900.0, seed=4, jitter=20.0)]
    parser = EventParser("binary")
    wm = WindowManager(BinaryMonitor, 60, batch=True, max_future=None)
    expected = []
    for line in lines:
        for item in parser.parse_value(line):
            wm.add(item)
        expected += wm.poll()
    expected += wm.flush()
    p = Pipeline(PipelineConfig(window=60.0, max_future=None))
    got = []
    for line in lines:
        p.process(line)
        got += p.poll()
    got += p.flush()
    assert [snapshot_line(s) for s in got] == [snapshot_line(s) for s in expected]


@pytest.mark.parametrize("cut", [1, 700, 1999])
def test_checkpoint_anywhere_reproduces_the_uninterrupted_run(cut):
    lines = [json.dumps(e).encode() for e in generate_events(2000, duration=600.0, seed=5, jitter=10.0)]
    config = PipelineConfig(window=60.0, slide=20.0, grace=5.0, max_pending=7)

    def run(cut_at):
        p = Pipeline(config)
        out = []
        for i, line in enumerate(lines):
            if i == cut_at:
                saved = json.loads(json.dumps(p.to_dict()))
                p = Pipeline(config).load_dict(saved)
            p.process(line)
            out += p.poll()
        return [snapshot_line(s) for s in out + p.flush()]

    assert run(cut) == run(None)


@pytest.mark.parametrize("mutate,match", [
    (lambda d: {"type": "nope"}, "not a streammetrics Pipeline checkpoint"),
    (lambda d: {**d, "version": 9}, "version 9"),
    (lambda d: {**d, "task": "regression"}, "task 'regression'"),
    (lambda d: {**d, "windows": {**d["windows"], "spec": {"size_ms": 1}}}, "geometry"),
    (lambda d: {**d, "windows": {**d["windows"], "keys": [{"model": 1}]}}, "malformed"),
    (lambda d: {**d, "windows": None}, "WindowManager"),
])
def test_bad_checkpoints_fail_with_one_clear_line_and_change_nothing(mutate, match):
    p = pipe()
    p.process(msg(ev()))
    before = p.to_dict()
    with pytest.raises(ValueError, match=match):
        p.load_dict(mutate(json.loads(json.dumps(before))))
    assert p.to_dict() == before


def test_oversized_snapshots_degrade_and_are_counted():
    classes = [f"class-{i}" for i in range(60)]
    p = Pipeline(PipelineConfig(task="multiclass", classes=classes, max_snapshot_bytes=4000),
                 wall_clock=lambda: NOW)
    p.process(msg({"ts": NOW, "model": "m", "y_true": "class-1", "scores": [1 / 60] * 60}))
    [snap] = p.flush()
    line = snapshot_line(snap)
    assert len(line) <= 4000
    assert snap["state_dropped"] is True and "state" not in snap
    assert snap["metrics_truncated"] is True and "per_class" not in snap["metrics"]
    assert p.counters["snapshots_degraded"] == 1
    roomy = Pipeline(PipelineConfig(task="multiclass", classes=classes, max_snapshot_bytes=10**7),
                     wall_clock=lambda: NOW)
    roomy.process(msg({"ts": NOW, "model": "m", "y_true": "class-1", "scores": [1 / 60] * 60}))
    [snap] = roomy.flush()
    assert "state" in snap and "state_dropped" not in snap and roomy.counters["snapshots_degraded"] == 0


def test_state_only_dropped_when_metrics_fit():
    p = pipe(max_snapshot_bytes=1100)  # (the line: 1137 bytes with the state, 1035 without)
    p.process(msg(ev()))
    [snap] = p.flush()
    assert snap["state_dropped"] is True and "metrics_truncated" not in snap and "roc_auc" in snap["metrics"]
    assert "intervals" in snap


def test_intervals_go_with_the_truncated_metrics():
    p = pipe(max_snapshot_bytes=650)  # (without the state: 1035 bytes, 569 of them the rest)
    p.process(msg(ev()))
    [snap] = p.flush()
    assert snap["state_dropped"] is True and snap["metrics_truncated"] is True and "roc_auc" in snap["metrics"]
    assert "intervals" not in snap and "insufficient" not in snap


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_snapshot_bytes_must_be_positive(bad):
    with pytest.raises(ValueError, match="max_snapshot_bytes"):
        pipe(max_snapshot_bytes=bad)
