"""Small tumbling windows closed together (WindowManager defers their snapshots to ``poll``,
where ``BinaryMonitor.snapshot_states`` builds them in one vectorised pass) give the same
snapshot lines, in the same order, as windows built one by one, on hypothesis streams over a
few keys: common events and odd ones (weights, scores 0 / 1 / outside [0, 1], labels to come
later and their labels), late and out-of-order events, panes drained early by ``max_pending``,
idle-closed keys, polls at any point, and a checkpoint taken and restored mid-stream."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.snapshots import snapshot_line

score = st.one_of(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True), st.sampled_from([0.5, 0.25, 0.0, 1.0, 1.5]))
event = st.fixed_dictionaries(
    {"ts": st.integers(0, 120_000).map(lambda ms: ms / 1000), "model": st.sampled_from(["a", "b", "c", "d"]),
     "y_true": st.sampled_from([0, 1, 1]), "score": score},
    optional={"weight": st.sampled_from([1.0, 2.0, 0.5]), "segment": st.sampled_from(["", "x"])},
)
label_free = st.fixed_dictionaries(  # a prediction whose label comes later, then its label
    {"ts": st.integers(0, 120_000).map(lambda ms: ms / 1000), "model": st.sampled_from(["a", "e"]),
     "score": score, "id": st.sampled_from(["p1", "p2", "p3"])})
items = st.lists(st.one_of(event, event, event, event, label_free, st.just("poll"), st.just("checkpoint")),
                 max_size=80)


def run(stream: list, fleet: bool, config: PipelineConfig) -> list[str]:
    pipeline = Pipeline(config)
    if not fleet:
        pipeline.windows._fleet = None
    lines: list[str] = []
    for item in stream:
        if item == "poll":
            lines += [snapshot_line(s) for s in pipeline.poll(revisions=False)]
        elif item == "checkpoint":  # the service's order: poll, then checkpoint; a new process restores it
            lines += [snapshot_line(s) for s in pipeline.poll(revisions=False)]
            saved = json.loads(json.dumps(pipeline.to_dict()))
            pipeline = Pipeline(config).load_dict(saved)
            if not fleet:
                pipeline.windows._fleet = None
        elif "id" in item:  # a prediction without its label, then the label one second later
            pipeline.process(json.dumps(item))
            pipeline.process(json.dumps({"id": item["id"], "y_true": 1, "ts": item["ts"] + 1}))
        else:
            pipeline.process(json.dumps(item))
    return lines + [snapshot_line(s) for s in pipeline.poll(revisions=False) + pipeline.flush()]


@settings(max_examples=120, deadline=None)
@given(items, st.sampled_from([10.0, 30.0]), st.sampled_from([0.0, 5.0]), st.sampled_from([4096, 3]))
def test_deferred_windows_equal_windows_built_one_by_one(stream: list, window: float, grace: float,
                                                         max_pending: int) -> None:
    config = PipelineConfig(window=window, grace=grace, max_pending=max_pending, max_future=None)
    fleet = run([dict(i) if isinstance(i, dict) else i for i in stream], True, config)
    assert fleet == run([dict(i) if isinstance(i, dict) else i for i in stream], False, config)


def test_many_keys_take_the_vectorised_pass() -> None:
    """A fleet of sparse keys: the windows are built by snapshot_states (counted), and equal."""
    stream = [{"ts": t * 0.5, "model": f"m{t % 37}", "y_true": t % 3 == 0, "score": ((t * 7919) % 997 + 1) / 999}
              for t in range(2000)]
    config = PipelineConfig(window=10.0, max_future=None)
    pipeline = Pipeline(config)
    calls: list[int] = []
    fleet = pipeline.windows._fleet
    assert fleet is not None

    def counted(panes: list) -> list:
        calls.append(len(panes))
        return fleet(panes)

    pipeline.windows._fleet = counted
    lines = []
    for i, item in enumerate(stream):
        pipeline.process(json.dumps(item))
        if i % 100 == 99:
            lines += [snapshot_line(s) for s in pipeline.poll()]
    lines += [snapshot_line(s) for s in pipeline.flush()]
    # every key's event is alone in its window; flush() builds each key's last one by itself
    assert len(lines) == 2000 and sum(calls) == 2000 - 37 and max(calls) > 30
    assert lines == run(stream, False, config)
