"""Small windows closed together (WindowManager defers their snapshots to ``poll``, where
``BinaryMonitor.snapshot_many`` builds them in one vectorised pass) give the same
snapshot lines, in the same order, as windows built one by one, on hypothesis streams over a
few keys: common events and odd ones (weights, scores 0 / 1 / outside [0, 1], labels to come
later and their labels), late and out-of-order events, panes drained early by ``max_pending``,
one watermark shared by every key, polls at any point, and checkpoints taken and restored mid-stream."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.stream import label_replay
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.snapshots import snapshot_line

common_score = st.one_of(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True),
                         st.sampled_from([0.5, 0.25, 1e-05, 5e-324, 1e-4, 1.0 - 2.0**-53]))
times = st.integers(0, 90_000).map(lambda ms: ms / 1000)
common = st.fixed_dictionaries(
    {"ts": times, "model": st.sampled_from(["a", "b", "c", "d"]), "y_true": st.sampled_from([0, 1, 1]),
     "score": common_score},
    optional={"segment": st.sampled_from(["", "x"])},
)
odd = st.one_of(  # events a small window cannot take in the vectorised pass
    st.fixed_dictionaries({"ts": times, "model": st.sampled_from(["a", "b"]), "y_true": st.sampled_from([0, 1]),
                           "score": st.sampled_from([0.0, 1.0, 1.5])}),
    st.fixed_dictionaries({"ts": times, "model": st.sampled_from(["a", "b"]), "y_true": st.sampled_from([0, 1]),
                           "score": common_score, "weight": st.sampled_from([2.0, 0.5])}),
)
label_free = st.fixed_dictionaries(  # a prediction whose label comes later, then its label
    {"ts": times, "model": st.sampled_from(["a", "e"]), "score": common_score, "id": st.sampled_from(["p1", "p2"])})
# per item: a common event 12 times in 16, else an odd one, a delayed label, a poll or a checkpoint
item = st.tuples(st.integers(0, 15), common, odd, label_free).map(
    lambda t: t[1] if t[0] < 12 else (t[2], t[3], "poll", "checkpoint")[t[0] - 12])
items = st.lists(item, min_size=30, max_size=150)


def run(stream: list, fleet: bool | str, config: PipelineConfig) -> list[str]:
    """The lines of ``stream``: ``fleet`` True: small windows built together (dicts, then
    ``snapshot_line``); "lines": the same written directly (``poll_lines``); False: one by one."""
    pipeline = Pipeline(config)
    if not fleet:
        pipeline.windows._kind = None  # (each window built when it closes)

    def polled() -> list[str]:
        if fleet == "lines":
            return pipeline.poll_lines(revisions=False)
        return [snapshot_line(s) for s in pipeline.poll(revisions=False)]

    lines: list[str] = []
    for item in stream:
        if item == "poll":
            lines += polled()
        elif item == "checkpoint":  # the service's order: poll, then checkpoint; a new process restores it
            lines += polled()
            saved = json.loads(json.dumps(pipeline.to_dict()))
            pipeline = Pipeline(config).load_dict(saved)
            if not fleet:
                pipeline.windows._kind = None  # (each window built when it closes)
        elif "id" in item:  # a prediction without its label, then the label one second later
            pipeline.process(json.dumps(item))
            pipeline.process(json.dumps({"id": item["id"], "y_true": 1, "ts": item["ts"] + 1}))
        else:
            pipeline.process(json.dumps(item))
    if fleet == "lines":
        return lines + pipeline.poll_lines(revisions=False) + pipeline.flush_lines()
    return lines + [snapshot_line(s) for s in pipeline.poll(revisions=False) + pipeline.flush()]


@settings(max_examples=150, deadline=None)
@given(items, st.sampled_from([10.0, 30.0]), st.sampled_from([0.0, 5.0]), st.sampled_from([4096, 3]),
       st.booleans())
def test_deferred_windows_equal_windows_built_one_by_one(stream: list, window: float, grace: float,
                                                         max_pending: int, in_order: bool) -> None:
    if in_order:  # mostly in time order (many windows close), the commands where they were drawn
        events = iter(sorted((i for i in stream if isinstance(i, dict)), key=lambda e: e["ts"]))
        stream = [next(events) if isinstance(i, dict) else i for i in stream]
    config = PipelineConfig(window=window, grace=grace, max_pending=max_pending, max_future=None)
    fleet = run([dict(i) if isinstance(i, dict) else i for i in stream], True, config)
    assert fleet == run([dict(i) if isinstance(i, dict) else i for i in stream], False, config)
    assert fleet == run([dict(i) if isinstance(i, dict) else i for i in stream], "lines", config)


def polled_every_100(pipeline: Pipeline, stream: list, lines_only: bool = False) -> list[str]:
    """The lines of ``stream`` through ``pipeline``, polled every 100 events, then flushed
    (``lines_only``: by ``poll_lines`` / ``flush_lines``)."""
    lines = []
    for i, item in enumerate(stream):
        pipeline.process(json.dumps(item))
        if i % 100 == 99:
            lines += pipeline.poll_lines() if lines_only else [snapshot_line(s) for s in pipeline.poll()]
    return lines + (pipeline.flush_lines() if lines_only else [snapshot_line(s) for s in pipeline.flush()])


def test_many_keys_take_the_vectorised_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet of sparse keys: the windows are built by the vectorised pass (counted), and equal."""
    from streammetrics.monitors import binary

    stream = [{"ts": t * 0.5, "model": f"m{t % 37}", "y_true": t % 3 == 0, "score": ((t * 7919) % 997 + 1) / 999}
              for t in range(2000)]
    config = PipelineConfig(window=10.0, max_future=None)
    calls: list[int] = []
    fleet = binary.binary_snapshot_states

    def counted(template: object, panes: list) -> list:
        calls.append(len(panes))
        return fleet(template, panes)

    monkeypatch.setattr(binary, "binary_snapshot_states", counted)
    lines = polled_every_100(Pipeline(config), stream)
    assert len(lines) == sum(calls) == 2000 and max(calls) > 30  # every event alone in its window
    assert lines == run(stream, False, config)


def test_replay_output_does_not_depend_on_when_it_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    """replay holds small windows back until COLLECT_READY wait (polls keep their places):
    the same lines in the same order whatever the number."""
    events = [{"ts": t * 0.01, "model": f"m{(t * 7) % 300}", "y_true": t % 3 == 0,
               "score": ((t * 7919) % 997 + 1) / 999, **({"weight": 2.0} if t % 101 == 0 else {})}
              for t in range(6000)]
    data = [json.dumps(e).encode() for e in events]
    outputs = []
    for collect in (1, 50, 10**9):
        monkeypatch.setattr(label_replay, "COLLECT_READY", collect)
        config = PipelineConfig(window=5.0, max_future=None)
        lines: list[str] = []
        stats = replay_lines(data, Pipeline(config), lines.append)
        assert stats.snapshots == len(lines) > 1000
        outputs.append(lines)
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.parametrize("limit", [None, 10**6, 700])
def test_poll_lines_are_the_lines_of_poll(limit: int | None) -> None:
    """``Pipeline.poll_lines`` / ``flush_lines`` (what replay writes: small windows written
    straight from their JSON texts) give the lines of ``poll`` / ``flush`` through
    ``snapshot_line``, counted alike; with ``max_snapshot_bytes`` (700: most states dropped)
    the degraded snapshots' lines."""
    stream = [{"ts": t * 0.5, "model": f"m\u00e9{t % 37}" if t % 5 else f'q"{t % 11}', "y_true": t % 3 == 0,
               "score": ((t * 7919) % 997 + 1) / 999 if t % 13 else 1e-05, **({"weight": 2.0} if t % 97 == 0 else {})}
              for t in range(3000)]
    config = PipelineConfig(window=10.0, max_future=None, max_snapshot_bytes=limit)
    by_dicts, by_lines = Pipeline(config), Pipeline(config)
    expected: list[str] = []
    got: list[str] = []
    for i, event in enumerate(stream):
        by_dicts.process(json.dumps(event))
        by_lines.process(json.dumps(event))
        if i % 100 == 99:
            expected += [snapshot_line(s) for s in by_dicts.poll()]
            got += by_lines.poll_lines()
    expected += [snapshot_line(s) for s in by_dicts.flush()]
    got += by_lines.flush_lines()
    assert got == expected and len(got) > 1000
    assert by_lines.counters == by_dicts.counters
    if limit == 700:  # (the windows of a few events fit)
        assert by_lines.counters["snapshots_degraded"] == sum('"state_dropped":true' in line for line in got) > 100


def test_without_msgspec_the_texts_come_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """The texts' encoder is msgspec (the ``fast`` extra); without it json writes them."""
    from streammetrics.monitors import fleet_snapshot

    stream = [{"ts": t * 0.5, "model": f"m{t % 37}", "y_true": t % 3 == 0, "score": ((t * 7919) % 997 + 1) / 999}
              for t in range(1500)]
    config = PipelineConfig(window=10.0, max_future=None)
    expected = run(stream, True, config)
    monkeypatch.setattr(fleet_snapshot, "_encode", None)
    assert run(stream, "lines", config) == expected
