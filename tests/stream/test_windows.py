"""Window assignment, closing, lateness and checkpoints, checked against a brute-force
reference that knows nothing about panes. One watermark for the whole stream (all keys), as
one input partition of an engine keeps it."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stream_doubles import Ev, IdsMonitor

from streammetrics.stream.windows import WindowManager, WindowSpec, parse_duration


def reference(events, size, slide, grace):
    """Expected {(model, segment, start): sorted ids} and late ids, by brute force in exact
    integer milliseconds (events carry their decimal time as ``Ev.ts_ms``). The watermark is the
    largest event time applied over every key, minus ``grace``."""
    size, slide, grace = round(size * 1000), round(slide * 1000), round(grace * 1000)
    windows: dict[tuple, list[int]] = {}
    ev_ms = {ev.id: round(ev.ts * 1000) for ev in events}
    max_ts = -math.inf
    late = []
    for ev in events:
        wm = max_ts - grace
        t = ev_ms[ev.id]
        ks = [k for k in range(math.floor((t - size) / slide) - 1, math.floor(t / slide) + 2)
              if k * slide <= t < k * slide + size]
        open_ks = [k for k in ks if k * slide + size > wm]
        if not open_ks:
            late.append(ev.id)
            continue
        for k in open_ks:
            start = k * slide
            start_s = start // 1000 if start % 1000 == 0 else start / 1000
            windows.setdefault((ev.model, ev.segment, start_s), []).append(ev.id)
        max_ts = max(max_ts, t)
    return {k: sorted(v) for k, v in windows.items()}, sorted(late)


geometries = st.sampled_from([(10, 10), (10, 5), (12, 4), (9, 6), (1, 1), (60, 15), (0.25, 0.05), (0.07, 0.07)])
# event times in whole seconds (many boundary hits) or in milliseconds (decimal fractions)
# or a millisecond either side of a multiple of 50 ms, where off-by-one closing would show
times = st.one_of(
    st.integers(0, 200).map(float),
    st.integers(0, 200_000).map(lambda ms: ms / 1000),
    st.tuples(st.integers(0, 400), st.sampled_from([-1, 0, 1])).map(lambda p: max(0, p[0] * 50 + p[1]) / 1000),
)
event_lists = st.lists(
    st.tuples(times, st.sampled_from(["a", "b"]), st.sampled_from(["", "eu"])),
    max_size=60,
)


@settings(max_examples=400)
@given(geometries, st.sampled_from([0, 0, 1, 2, 15]), event_lists, st.integers(0, 3), st.sampled_from([None, 1, 3]))
def test_windows_match_bruteforce_reference(geometry, grace, raw, checkpoint_every, batch):
    """batch=None: per-event updates; otherwise queued per pane, drained at max_pending=batch."""
    size, slide = geometry
    events = [Ev(t, m, s, i) for i, (t, m, s) in enumerate(raw)]
    grace = grace * min(size, 1)
    codec = (lambda ev: [ev.ts, ev.model, ev.segment, ev.id], lambda v: Ev(*v))
    options = {} if batch is None else {"batch": True, "max_pending": batch, "event_codec": codec}
    wm = WindowManager(IdsMonitor, size, slide, grace, **options)
    late = []
    snaps = []
    for i, ev in enumerate(events):
        if not wm.add(ev):
            late.append(ev.id)
        snaps += wm.poll()
        if checkpoint_every and i % (checkpoint_every + 1) == 0:
            # a checkpoint round trip at any point changes nothing
            restored = WindowManager(IdsMonitor, size, slide, grace, **options)
            restored.load_dict(json.loads(json.dumps(wm.to_dict())))
            wm = restored
    snaps += wm.flush()
    got = {(s["key"]["model"], s["key"]["segment"], s["window"]["start"]): s["metrics"]["ids"] for s in snaps}
    expected, expected_late = reference(events, size, slide, grace)
    assert got == expected
    assert sorted(late) == expected_late
    assert len(got) == len(snaps), "a window was emitted twice"
    for s in snaps:
        assert s["window"]["end"] - s["window"]["start"] == pytest.approx(size)
        assert s["count"] == len(s["metrics"]["ids"])
        assert s["final"] is True
    assert wm.open_panes() == 0


def test_window_closes_when_watermark_passes_end_and_releases_panes():
    wm = WindowManager(IdsMonitor, 10, grace=2)
    for i, t in enumerate([1, 5, 9, 11]):
        assert wm.add(Ev(t, "m", "", i))
    assert wm.poll() == []  # watermark 9 < 10
    wm.add(Ev(12, "m", "", 4))  # watermark 10 -> [0, 10) closes
    [snap] = wm.poll()
    assert snap["window"] == {"start": 0, "end": 10}
    assert snap["metrics"]["ids"] == [0, 1, 2]
    assert snap["schema"] == "streammetrics.snapshot/1"
    assert snap["key"] == {"model": "m", "segment": ""}
    assert wm.open_panes() == 1
    assert not wm.add(Ev(3, "m", "", 5))  # late
    assert wm.late_count("m") == 1
    [snap] = wm.flush()
    assert snap["late"] == 1 and snap["metrics"]["ids"] == [3, 4]


def test_hopping_window_is_merge_of_panes_without_copies():
    wm = WindowManager(IdsMonitor, 60, 20)
    wm.add(Ev(5, "m", "", 0))
    assert wm.open_panes() == 1  # one pane, although three windows contain it
    snaps = wm.flush()
    assert [(s["window"]["start"], s["metrics"]["ids"]) for s in snaps] == [(-40, [0]), (-20, [0]), (0, [0])]


def test_a_quiet_key_closes_with_the_others_by_the_one_watermark():
    """Issue 25: a key without new events closes when the stream's watermark passes its window
    (it was held open, or closed by wall time, by a per-key watermark)."""
    wm = WindowManager(IdsMonitor, 10)
    wm.add(Ev(3, "quiet", "", 0))
    wm.add(Ev(9, "busy", "", 1))
    assert wm.poll() == []
    wm.add(Ev(10, "busy", "", 2))  # the watermark reaches 10: both keys' [0, 10) close
    snaps = wm.poll()
    assert [(s["key"]["model"], s["metrics"]["ids"]) for s in snaps] == [("busy", [1]), ("quiet", [0])]
    assert not wm.add(Ev(4, "quiet", "", 3))  # its window is closed: late
    assert not wm.add(Ev(5, "new", "", 4))  # a new key's too: the watermark is the stream's
    assert wm.add(Ev(15, "quiet", "", 5))
    assert wm.poll() == []
    for t in (30, 40):  # keys emptied are evicted once the watermark has entered two later panes
        wm.add(Ev(t, "busy", "", t))
        wm.poll()
    assert ("new", "") not in wm.keys and wm.evicted >= 1


def test_sparse_keys_lose_nothing():
    """One event per 40 s per key, 5-minute windows: every event is in its window (issue 25:
    2 of 4 were dead-lettered as late with the wall-clock idle close)."""
    wm = WindowManager(IdsMonitor, 300)
    applied = [wm.add(Ev(i * 40.0 + k, f"k{k}", "", i * 10 + k)) for i in range(40) for k in range(3)]
    snaps = wm.poll() + wm.flush()
    assert all(applied)
    assert sum(s["count"] for s in snaps) == 120 and all(s["late"] == 0 for s in snaps)
    assert len(snaps) == 3 * 6  # 1600 s: windows 0..5 per key


def test_close_order_does_not_depend_on_polls():
    """Windows close when an event moves the watermark past them, in (end, key) order: the
    same output whether the caller polls after every event or once."""
    import random

    rng = random.Random(5)
    events = [Ev(max(0.0, i * 0.3 + rng.uniform(-4, 4)), rng.choice("abcde"), "", i) for i in range(300)]
    outs = []
    for every in (1, 7, 10**9):
        wm = WindowManager(IdsMonitor, 10, 5, grace=2)
        out = []
        for i, ev in enumerate(events):
            wm.add(ev)
            if i % every == 0:
                out += wm.poll()
        out += wm.poll()
        closed = len(out)
        outs.append(out + wm.flush())
    assert outs[0] == outs[1] == outs[2]
    ends = [(s["window"]["end"], s["key"]["model"]) for s in outs[0][:closed]]
    assert closed > 50 and ends == sorted(ends)


def test_cumulative_snapshot_follows_each_close():
    wm = WindowManager(IdsMonitor, 10, cumulative=True)
    for i, t in enumerate([1, 12, 25]):
        wm.add(Ev(t, "m", "", i))
    snaps = wm.poll()
    finals = [s for s in snaps if s["final"]]
    cumul = [s for s in snaps if s.get("cumulative")]
    assert [s["metrics"]["ids"] for s in finals] == [[0], [1]]
    # all-time up to the labelled end: event 2 (ts 25) is past 20, event 1 (ts 12) past 10
    assert [s["metrics"]["ids"] for s in cumul] == [[0], [0, 1]]
    assert cumul[-1]["window"] == {"start": 0, "end": 20}


@pytest.mark.parametrize("text,seconds", [("60s", 60), ("500ms", 0.5), ("5m", 300), ("1h", 3600), ("2", 2),
                                          (1.5, 1.5), ("1d", 86400)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "-1s", "1w", "nan", True])
def test_parse_duration_rejects(text):
    with pytest.raises((ValueError, TypeError), match="duration"):
        parse_duration(text, "duration")


@pytest.mark.parametrize("kwargs,match", [
    ({"window": 0}, "window"), ({"window": 10, "slide": 20}, "slide"), ({"window": 10, "slide": 0}, "slide"),
    ({"window": 0.0005}, "milliseconds"),
])
def test_window_spec_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WindowSpec(kwargs.pop("window"), **kwargs)


def test_checkpoint_rejects_other_geometry_and_garbage():
    wm = WindowManager(IdsMonitor, 10)
    wm.add(Ev(1, "m", "", 0))
    with pytest.raises(ValueError, match="geometry"):
        WindowManager(IdsMonitor, 20).load_dict(wm.to_dict())
    bad = wm.to_dict()
    bad["keys"][0]["panes"] = [["x", {"type": "nope"}]]
    with pytest.raises(ValueError):
        WindowManager(IdsMonitor, 10).load_dict(bad)
    with pytest.raises(ValueError):
        WindowManager(IdsMonitor, 10).load_dict({"type": "WindowManager"})


@pytest.mark.parametrize("ts", [16.15, 32.05, 64.1, 1700000000.15])
def test_decimal_timestamps_on_a_boundary_fall_in_the_window_they_name(ts):
    # ts * 1000 is just below the boundary in binary floating point for these values
    wm = WindowManager(IdsMonitor, 0.05)
    wm.add(Ev(ts, "m", "", 0))
    [snap] = wm.flush()
    assert snap["window"]["start"] == pytest.approx(ts, abs=1e-9)


class SumMonitor(IdsMonitor):
    """Records the batches it was updated with: drain points must not depend on checkpoints."""

    type_name = "tests.SumMonitor"

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []

    def update_events(self, evs):
        self.batches.append([e.id for e in evs])
        return super().update_events(evs)

    def snapshot(self):
        return {"ids": sorted(self.ids), "batches": self.batches}

    def _state(self):
        return {**super()._state(), "batches": self.batches}

    def _load_state(self, state):
        super()._load_state(state)
        self.batches = [list(b) for b in state["batches"]]

    def _merge_state(self, other):
        super()._merge_state(other)
        self.batches = self.batches + other.batches


@given(st.lists(st.integers(0, 100), max_size=80), st.integers(0, 80))
def test_batch_checkpoints_with_codec_reproduce_the_uninterrupted_run_exactly(times, cut):
    codec = (lambda ev: [ev.ts, ev.model, ev.segment, ev.id], lambda v: Ev(*v))
    events = [Ev(float(t), "m", "", i) for i, t in enumerate(times)]

    def run(cut_at):
        wm = WindowManager(SumMonitor, 10, 5, 3, batch=True, max_pending=4, event_codec=codec)
        out = []
        for i, ev in enumerate(events):
            if i == cut_at:  # crash and restore from a checkpoint taken here
                data = json.loads(json.dumps(wm.to_dict()))
                wm = WindowManager(SumMonitor, 10, 5, 3, batch=True, max_pending=4, event_codec=codec)
                wm.load_dict(data)
            wm.add(ev)
            out += wm.poll()
        return out + wm.flush()

    assert run(cut) == run(None)


class TaggedMonitor(IdsMonitor):
    type_name = "tests.TaggedMonitor"

    @staticmethod
    def event_tag(ev):
        return ev.id % 2


def test_event_tag_mismatch_raises_before_changing_anything():
    wm = WindowManager(TaggedMonitor, 10)
    assert wm.add(Ev(1, "m", "", 0))
    before = wm.to_dict()
    with pytest.raises(ValueError, match="kind"):
        wm.add(Ev(2, "m", "", 1))
    assert wm.to_dict() == before
    assert wm.add(Ev(2, "other", "", 1))  # another key has its own tag
    restored = WindowManager(TaggedMonitor, 10).load_dict(json.loads(json.dumps(wm.to_dict())))
    with pytest.raises(ValueError):
        restored.add(Ev(3, "other", "", 2))


@settings(max_examples=200)
@given(geometries, st.sampled_from([0, 2]), event_lists, st.sampled_from([None, 2]), st.booleans())
def test_cumulative_snapshots_hold_exactly_the_applied_events_before_their_end(geometry, grace, raw, batch, cut):
    size, slide = geometry
    events = [Ev(t, m, s, i) for i, (t, m, s) in enumerate(raw)]
    codec = (lambda ev: [ev.ts, ev.model, ev.segment, ev.id], lambda v: Ev(*v))
    options = {} if batch is None else {"batch": True, "max_pending": batch, "event_codec": codec}
    wm = WindowManager(IdsMonitor, size, slide, grace * min(size, 1), cumulative=True, **options)
    applied: dict[tuple, list] = {}
    snaps = []
    for i, ev in enumerate(events):
        if wm.add(ev):
            applied.setdefault((ev.model, ev.segment), []).append(ev)
        for snap in wm.poll():
            snaps.append((snap, {k: list(v) for k, v in applied.items()}))
        if cut and i == len(events) // 2:
            wm = WindowManager(IdsMonitor, size, slide, grace * min(size, 1), cumulative=True,
                               **options).load_dict(json.loads(json.dumps(wm.to_dict())))
    snaps += [(snap, applied) for snap in wm.flush()]
    for snap, seen in snaps:
        if not snap.get("cumulative"):
            continue
        key = (snap["key"]["model"], snap["key"]["segment"])
        end_ms = round(snap["window"]["end"] * 1000)
        expected = sorted(ev.id for ev in seen[key] if round(ev.ts * 1000) < end_ms)
        assert snap["metrics"]["ids"] == expected


def test_queued_events_share_their_keys_model_string():
    """A queued Event holds its key's own model string (an equal one: its decoded copy is freed
    at once instead of living in the queue for a window), also for a key restored from a
    checkpoint; other event types are left as they are; the snapshots are those of the events."""
    from streammetrics.events.parser import EventParser
    from streammetrics.events.records import EVENT_CODEC
    from streammetrics.monitors import RegressionMonitor

    parse = EventParser("regression").parse
    model = "".join(["m", "1"])  # (built at run time: not the interned literal)

    def event(ts, y, p):  # (a regression event: queued as an Event in batch mode)
        return parse({"ts": ts, "model": "".join(["m", "1"]), "y_true": y, "y_pred": p})

    wm = WindowManager(RegressionMonitor, 60, batch=True, event_codec=EVENT_CODEC)
    first, second = event(0, 1.0, 0.8), event(1, 0.0, 0.3)
    assert first.model is not second.model
    wm.add(first)
    wm.add(second)
    assert first.model is second.model and first.model == model
    restored = WindowManager(RegressionMonitor, 60, batch=True, event_codec=EVENT_CODEC)
    restored.load_dict(json.loads(json.dumps(wm.to_dict())))
    third = event(2, 1.0, 0.6)
    restored.add(third)
    assert third.model == model and third.model is restored._keys[(model, "")].model
    snap = restored.flush()[0]
    expected = RegressionMonitor().update_events([event(0, 1.0, 0.8), event(1, 0.0, 0.3), event(2, 1.0, 0.6)])
    assert snap["count"] == 3 and snap["metrics"] == expected.snapshot()
    other = WindowManager(IdsMonitor, 10, batch=True)
    ev = Ev(1.0, "".join(["m", "1"]), "", 7)
    other.add(ev)
    other.add(Ev(2.0, "".join(["m", "1"]), "", 8))
    assert [s["metrics"]["ids"] for s in other.flush()] == [[7, 8]]  # (a frozen dataclass: not assigned to)


def test_a_version_2_checkpoint_with_packed_binary_events_is_read():
    """Version 2 (written before monitors kept their small form) queued the common binary event
    as its signed score, a JSON number: read back as that event (checked), the restored run gives
    the snapshots of the uninterrupted one, and a checkpoint written now is version 1. A number
    is refused by a monitor that is not binary, and a number that is no signed score too."""
    from streammetrics.events.parser import EventParser
    from streammetrics.events.records import EVENT_CODEC
    from streammetrics.monitors import BinaryMonitor

    parse = EventParser("binary").parse
    raw = [{"ts": 1, "model": "m", "y_true": 1, "score": 0.8}, {"ts": 2, "model": "m", "y_true": 0, "score": 0.3},
           {"ts": 3, "model": "m", "y_true": 1, "score": 0.4, "weight": 2.0},
           {"ts": 4, "model": "m", "y_true": 0, "score": 1.0}, {"ts": 61, "model": "m", "y_true": 1, "score": 0.5}]
    whole = WindowManager(BinaryMonitor, 60, batch=True, event_codec=EVENT_CODEC)
    for e in raw[:4]:
        whole.add(parse(e))
    entry = {"model": "m", "segment": "", "max_us": 4_000_000, "next_window": 0, "first_window": 0, "late": 0,
             "tag": None, "panes": [], "cumulative": None, "cumulative_released": True, "awaiting": [],
             "revising": [],
             "pending": [[0, [0.8, -0.3, EVENT_CODEC[0](parse(raw[2])), EVENT_CODEC[0](parse(raw[3]))]]]}
    saved = {"type": "WindowManager", "version": 2, "spec": whole.spec.to_dict(), "keys": [entry], "closed": [],
             "forgotten_next": None, "evicted": 0, "max_us": 4_000_000, "revision_pane": None}
    restored = WindowManager(BinaryMonitor, 60, batch=True, event_codec=EVENT_CODEC).load_dict(saved)
    assert restored.to_dict()["version"] == 1 and whole.to_dict()["version"] == 1
    for wm in (whole, restored):
        wm.add(parse(raw[4]))
    assert json.dumps(restored.poll() + restored.flush()) == json.dumps(whole.poll() + whole.flush())
    with pytest.raises(ValueError, match="packed event"):
        WindowManager(IdsMonitor, 60, batch=True, event_codec=EVENT_CODEC).load_dict(
            {**saved, "spec": WindowManager(IdsMonitor, 60).spec.to_dict()})
    entry["pending"][0][1][0] = 1.5
    with pytest.raises(ValueError, match="packed binary event"):
        WindowManager(BinaryMonitor, 60, batch=True, event_codec=EVENT_CODEC).load_dict(saved)


def test_a_subclass_of_binary_monitor_sees_every_event():
    """A subclass may read more of an event than its label and score: its ``update_event`` is
    given every event (a BinaryMonitor buffers its own events: the engine queues none for it)."""
    from streammetrics.events.parser import EventParser
    from streammetrics.monitors import BinaryMonitor

    seen: list = []

    class Logged(BinaryMonitor):
        def update_event(self, event):
            seen.append(event.ts)
            return super().update_event(event)

    parse = EventParser("binary").parse
    wm = WindowManager(Logged, 60, batch=True)
    for ts in (1, 2, 3):
        wm.add(parse({"ts": ts, "model": "m", "y_true": 1, "score": 0.5}))
    assert not wm._keys[("m", "")].pending and seen == [1.0, 2.0, 3.0]
    assert wm.flush()[0]["count"] == 3


def _binary_lines(events: list, **options) -> list[str]:
    """The snapshot lines of already-parsed ``events`` through a binary pipeline (process_event)."""
    from streammetrics.stream.pipeline import Pipeline, PipelineConfig
    from streammetrics.stream.snapshots import snapshot_line

    pipeline = Pipeline(PipelineConfig(window=60.0, max_future=None, **options))
    for e in events:
        pipeline.process_event(e)
    return [snapshot_line(s) for s in pipeline.flush()]


@pytest.mark.parametrize("max_pending", [4096, 40, 3])
@pytest.mark.parametrize("one", [1.0, np.float64(1.0), np.bool_(True), Fraction(1), True])
def test_labels_equal_to_0_or_1_of_any_type_give_the_int_labels_snapshots(one, max_pending):
    """Events built without the parser (Spark rows, other sources) may carry a label 1.0, a numpy
    scalar or a Fraction: not packed, their monitor takes them as the int label (was: a
    TypeError when the window was built, its queued events lost)."""
    from streammetrics.events.records import Event

    zero = one - one if not isinstance(one, (bool, np.bool_)) else not one
    events = [Event(t * 0.5, "m", y_true=one if t % 3 else zero, score=((t * 7919) % 997 + 1) / 999,
                    weight=2.0 if t % 7 == 0 else 1.0) for t in range(100)]
    ints = [Event(e.ts, "m", y_true=1 if e.y_true == 1 else 0, score=e.score, weight=e.weight) for e in events]
    assert _binary_lines(events, max_pending=max_pending) == _binary_lines(ints, max_pending=max_pending)


@pytest.mark.parametrize(("field", "value"), [("y_true", 0.5), ("y_true", "1"), ("score", math.nan),
                                              ("score", "0.5"), ("weight", -1.0), ("weight", math.inf)])
@pytest.mark.parametrize("batch", [True, False])
def test_an_event_a_binary_monitor_cannot_take_is_refused_before_anything_changes(field, value, batch):
    """An already-parsed event with a bad field is refused (code bad_value, naming the field)
    before it is queued or applied: the state and the snapshots are those without it."""
    from streammetrics.events.records import Event
    from streammetrics.stream.pipeline import Pipeline, PipelineConfig

    good = [Event(t * 1.0, "m", y_true=t % 2, score=0.1 + t / 100) for t in range(30)]
    bad = Event(5.5, "m", y_true=1, score=0.4)
    setattr(bad, field, value)
    pipeline = Pipeline(PipelineConfig(window=60.0, max_future=None, batch=batch))
    for e in good[:15]:
        pipeline.process_event(e)
    before = json.dumps(pipeline.to_dict())
    result = pipeline.process_event(bad)
    assert result.applied == 0 and [(p.code, p.field) for p in result.problems] == [("bad_value", field)]
    assert field in result.problems[0].reason and json.dumps(pipeline.to_dict()) == before
    for e in good[15:]:
        pipeline.process_event(e)
    assert pipeline.counters["rejected"] == {"bad_value": 1}
    assert pipeline.flush()[0]["count"] == 30


def test_a_key_that_is_not_a_string_writes_the_same_lines_either_way():
    """Direct API: an event whose segment is None (not a string): poll_lines writes the line
    snapshot_line writes for poll's dict (json's encoding of the key's values)."""
    from streammetrics.events.records import Event
    from streammetrics.stream.pipeline import Pipeline, PipelineConfig
    from streammetrics.stream.snapshots import snapshot_line

    events = [Event(t * 0.5, "m", None, y_true=t % 2, score=0.3 + t / 1000) for t in range(300)]
    by_dicts, by_lines = (Pipeline(PipelineConfig(window=10.0, max_future=None)) for _ in range(2))
    for e in events:
        by_dicts.process_event(e)
        by_lines.process_event(e)
    expected = [snapshot_line(s) for s in by_dicts.poll() + by_dicts.flush()]
    assert by_lines.poll_lines() + by_lines.flush_lines() == expected and '"segment":null' in expected[0]


def test_keys_that_are_not_strings_close_in_a_stable_order():
    """Windows of keys closed by one watermark come out in (end, key) order; keys whose parts are
    not strings (the library API allows them) sort after the string ones instead of raising."""
    wm = WindowManager(IdsMonitor, 10)
    for i, model in enumerate(["b", 7, "a", None, 3.5]):
        wm.add(Ev(1, model, "", i))
    wm.add(Ev(10, "z", "", 9))
    assert [s["key"]["model"] for s in wm.poll()] == ["a", "b", 3.5, 7, None]
    for i, model in enumerate([2, "c"]):
        wm.add(Ev(11, model, "", 10 + i))
    assert [s["key"]["model"] for s in wm.flush()] == ["c", "z", 2]
