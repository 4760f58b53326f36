"""Bounds in time: advancing windows costs O(open panes), not O(elapsed time / slide); events
far ahead of the wall clock are refused. Costs are counted in executed lines of
``windows.py`` (a budget, never a timing)."""
from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager

import pytest
from stream_doubles import Ev, IdsMonitor

from streammetrics.stream import windows as windows_module
from streammetrics.stream.windows import EventRejected, WindowManager


class OverBudget(Exception):
    pass


@contextmanager
def line_budget(limit: int):
    """Raise OverBudget once more than ``limit`` lines of windows.py have run (no timing: the
    old code, stepping through every empty window, would run for minutes)."""
    target = windows_module.__file__
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] > limit:
                raise OverBudget(f"more than {limit} lines of windows.py")
        return local

    def global_(frame, event, arg):
        return local if frame.f_code.co_filename == target else None

    old = sys.gettrace()
    sys.settrace(global_)
    try:
        yield count
    finally:
        sys.settrace(old)


YEAR_9999 = 253402300000.0
NOW = 1_767_225_600.0


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("size,slide", [(60, None), (60, 10), (1, None)])
@pytest.mark.parametrize("first,second", [(NOW, YEAR_9999), (NOW, 4102444800.0), (0.0, NOW)])
def test_a_far_jump_in_event_time_costs_a_bounded_number_of_steps(batch, size, slide, first, second):
    wm = WindowManager(IdsMonitor, size, slide, batch=batch, max_future=None)
    with line_budget(20_000):
        wm.add(Ev(first, "m", "", 0))
        wm.add(Ev(first + 1, "m", "", 1))
        wm.add(Ev(second, "m", "", 2))  # closes every window of the first events, jumps the gap
        snaps = wm.poll()
        snaps += wm.flush()
    ids = sorted(i for s in snaps for i in s["metrics"]["ids"])
    per_event = (size // (slide or size))
    assert len(snaps) <= 3 * per_event
    assert set(ids) == {0, 1, 2}


def test_watermark_and_flush_jump_empty_ranges():
    wm = WindowManager(IdsMonitor, 10, 5, max_future=None)
    with line_budget(20_000):
        for i, t in enumerate([0.0, 1e9, 5e9, YEAR_9999]):
            wm.add(Ev(t, "m", str(i % 2), i))
        snaps = wm.poll()
        snaps += wm.flush()
    assert sorted(i for s in snaps for i in s["metrics"]["ids"]) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_event_beyond_max_future_is_refused_and_does_not_advance_stream_time():
    wall = [NOW]
    wm = WindowManager(IdsMonitor, 60, max_future=3600, wall_clock=lambda: wall[0])
    assert wm.add(Ev(NOW - 100, "m", "", 0))
    before = wm.to_dict()
    with pytest.raises(EventRejected) as info:
        wm.add(Ev(NOW + 3601, "m", "", 1))
    assert info.value.code == "future" and info.value.field == "ts"
    assert "max_future" in info.value.reason
    assert wm.to_dict() == before and wm.rejected == {"future": 1}
    assert wm.add(Ev(NOW - 90, "m", "", 3))  # not late: the refused event moved nothing
    assert wm.add(Ev(NOW + 3600, "m", "", 2))  # exactly at the bound: accepted
    wall[0] += 7200  # the wall clock moves on: the bound follows
    assert wm.add(Ev(NOW + 3601, "m", "", 4))


@pytest.mark.parametrize("refresh", ["poll", "events"])
def test_max_future_follows_the_wall_clock_down_after_a_step(refresh):
    """Issue 30 finding 12 (probe p_clock.py): the host clock steps forward a day, then back. The
    cached bound came down only when an event passed it, so for as long as the clock had been
    wrong (here 30 minutes later) a +20 h event was accepted and turned its key late."""
    from streammetrics.stream.windows import FUTURE_REFRESH_EVENTS

    wall = [NOW]
    wm = WindowManager(IdsMonitor, 60, max_future=3600, wall_clock=lambda: wall[0])
    assert wm.add(Ev(NOW, "m", "", 0))
    wall[0] = NOW + 86400  # stepped forward: an event 2 h ahead of the true time is within the bound
    assert wm.add(Ev(NOW + 7200, "other", "", 1))
    wall[0] = NOW + 1800  # corrected
    if refresh == "poll":
        wm.poll()
    else:
        for i in range(FUTURE_REFRESH_EVENTS):
            wm.add(Ev(NOW + 1, "m", "", 2 + i))  # (late: counted all the same)
    with pytest.raises(EventRejected) as info:
        wm.add(Ev(NOW + 20 * 3600, "m", "", -1))
    assert info.value.code == "future"


def test_max_future_none_or_zero_disables_and_bad_values_are_refused():
    for off in (None, 0):
        wm = WindowManager(IdsMonitor, 60, max_future=off, wall_clock=lambda: 0.0)
        assert wm.add(Ev(YEAR_9999, "m", "", 0))
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_future"):
            WindowManager(IdsMonitor, 60, max_future=bad)


def test_replay_keeps_every_event_but_the_far_future_one(tmp_path, capsys):
    import json

    from streammetrics.cli import main

    lines = []
    for i in range(2001):
        ts = NOW + i * 0.5
        if i == 1000:
            ts = 253402300000  # year 9999
        lines.append(json.dumps({"ts": ts, "model": "m", "y_true": i % 2, "score": (i % 7) / 7}))
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code = main(["replay", str(path), "--window", "60s"])
    out, err = capsys.readouterr()
    snaps = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert sum(s["count"] for s in snaps) == 2000
    assert all(s["late"] == 0 for s in snaps)
    assert "line 1001:" in err and "max_future" in err
    assert "2000 events applied, 1 rejected, 0 late" in err
    # disabled: the far-future event is applied and the rest of the key turns late (the hazard)
    assert main(["replay", str(path), "--window", "60s", "--max-future", "0", "-q"]) == 0
    out, err = capsys.readouterr()
    assert "1000 late" in err


# ----------------------------------------------------------------------------- keys
def test_a_key_whose_windows_all_closed_is_evicted_and_its_late_events_stay_late():
    wm = WindowManager(IdsMonitor, 10, max_future=None)
    wm.add(Ev(3, "m", "", 0))
    wm.add(Ev(4, "m", "", 1))
    wm.add(Ev(10, "other", "", 9))  # the watermark passes 10: m's window closes, nothing of m left
    [snap] = wm.poll()
    assert snap["metrics"]["ids"] == [0, 1]
    for t in (20, 30):  # an emptied key goes once the watermark has entered two later panes
        wm.add(Ev(t, "other", "", t))
        wm.poll()
    assert wm.keys == [("other", "")] and wm.evicted == 1 and wm.open_panes() == 1
    # an event for the closed window: late, counted, no second snapshot for [0, 10)
    assert not wm.add(Ev(5, "m", "", 2))
    assert wm.late_count("m") == 1
    assert all(s["key"]["model"] == "other" for s in wm.poll())
    # newer events open new windows; the snapshot carries the key's late total
    assert wm.add(Ev(32, "m", "", 3))
    snaps = wm.flush()
    assert [(s["key"]["model"], s["window"]["start"], s["late"]) for s in snaps] == [("m", 30, 1), ("other", 30, 0)]


def test_forgotten_keys_bound_the_rest_by_their_frontier():
    wm = WindowManager(IdsMonitor, 10, max_future=None, max_keys=2)
    for i, model in enumerate(["a", "b", "c", "d", "e", "f"]):
        wm.add(Ev(100 + 10 * i, model, "", i))  # each closes the previous key's window
        wm.poll()
    assert wm.evicted >= 3 and ("a", "") not in wm.keys
    state = wm.to_dict()
    assert len(state["closed"]) == 2 and "a" not in [c[0] for c in state["closed"]]
    assert state["forgotten_next"] >= 11  # the largest next window of the forgotten keys (a's: 11)
    assert not wm.add(Ev(105, "a", "", 10))  # late (by the watermark, and by the frontier)
    assert not wm.add(Ev(149, "new", "", 11))
    assert wm.add(Ev(150, "new", "", 12))
    restored = WindowManager(IdsMonitor, 10, max_future=None, max_keys=2)
    restored.load_dict(json.loads(json.dumps(wm.to_dict())))
    assert restored.to_dict() == wm.to_dict()


def test_max_keys_refuses_a_new_key_and_changes_nothing():
    wm = WindowManager(IdsMonitor, 10, max_keys=2, max_future=None)
    assert wm.add(Ev(1, "a", "", 0)) and wm.add(Ev(1, "b", "", 1))
    before = wm.to_dict()
    with pytest.raises(EventRejected) as info:
        wm.add(Ev(1, "c", "", 2))
    assert info.value.code == "key_limit" and "max_keys=2" in info.value.reason
    assert wm.to_dict() == before and wm.rejected == {"key_limit": 1}
    assert wm.add(Ev(2, "a", "", 3))  # held keys go on
    with pytest.raises(ValueError, match="max_keys"):
        WindowManager(IdsMonitor, 10, max_keys=1).load_dict(before)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_keys"):
            WindowManager(IdsMonitor, 10, max_keys=bad)


def test_churning_keys_never_emit_a_window_twice():
    wm = WindowManager(IdsMonitor, 10, max_future=None, max_keys=5)
    seen = set()
    for i in range(400):
        model = f"k{i % 13}"
        ts = 10 + i * 0.7 - (i % 5) * 9  # out of order, some late
        try:
            wm.add(Ev(ts, model, "", i))
        except EventRejected:
            pass
        for s in wm.poll():
            key = (s["key"]["model"], s["window"]["start"])
            assert key not in seen, f"window {key} emitted twice"
            seen.add(key)
    assert wm.key_count <= 5 and len(wm.to_dict()["closed"]) <= 5


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_memory_is_flat_over_half_a_million_churning_keys():
    """RSS after 100k and after 500k keys, each key seen once and closed by the watermark: without eviction
    (or with an unbounded memory of evicted keys, ~90 bytes a key) 400k more keys cost 36 MB to
    hundreds of MB. Keys
    arrive over event time (10 per second), so the keys forgotten past max_keys closed windows
    long before the new keys' events: every event is applied, none is late."""
    import gc

    wm = WindowManager(IdsMonitor, 10, max_future=None, max_keys=10_000, batch=True)
    marks = {}
    applied = 0
    for i in range(500_000):
        applied += wm.add(Ev(NOW + i * 0.1, f"model-{i}", "", i))
        if i % 1000 == 999:
            wm.poll()
        if i + 1 in (100_000, 500_000):
            gc.collect()
            marks[i + 1] = rss_bytes()
    assert applied == 500_000 and wm.late_count("model-0") == 0
    # (the keys of the last windows stay: emptied keys go once the watermark entered two later panes)
    assert wm.key_count <= 2_000 and wm.evicted == 500_000 - wm.key_count
    growth = marks[500_000] - marks[100_000]
    assert growth < 16 * 2**20, f"RSS grew by {growth / 2**20:.0f} MiB from 100k to 500k keys"


def test_poll_visits_only_the_keys_due():
    wm = WindowManager(IdsMonitor, 10, max_future=None)
    for i in range(5000):
        wm.add(Ev(NOW + i * 0.001, f"k{i}", "", i))
    with line_budget(2_000):  # 100 polls over 5,000 open keys: none due, none visited
        for _ in range(100):
            assert wm.poll() == []
    wm.add(Ev(NOW + 10, "k0", "", -1))  # the watermark passes the window: every key closes
    assert len(wm.poll()) == 5000
    for t in (20, 30):  # and the emptied keys go once the watermark entered two later panes
        wm.add(Ev(NOW + t, "k0", "", -1))
        wm.poll()
    assert wm.key_count == 1


def test_replay_bounds_keys_by_the_watermark_deterministically(tmp_path, capsys):
    """Short-lived keys close (and go) as the stream's watermark passes them: 1,500 keys through
    --max-keys 100, nothing refused (was: 2,800 refused without the event-time --idle-close,
    which now changes nothing)."""
    from streammetrics.cli import main

    path = tmp_path / "churn.jsonl"
    path.write_text("".join(
        json.dumps({"ts": NOW + i, "model": f"m{i // 2}", "y_true": i % 2, "score": 0.5}) + "\n"
        for i in range(3000)))
    runs = []
    for extra in ([], ["--idle-close", "2m"]):
        assert main(["replay", str(path), "--max-keys", "100", "--window", "10s", *extra]) == 0
        out, err = capsys.readouterr()
        assert "3000 events applied, 0 rejected, 0 late" in err
        runs.append(out)
    assert runs[0] == runs[1]
    assert len(runs[0].splitlines()) == 1500  # one window per key


def test_a_window_awaiting_labels_closes_by_the_watermark():
    from streammetrics.stream.pipeline import Pipeline, PipelineConfig

    pipe = Pipeline(PipelineConfig(window=10.0), wall_clock=lambda: NOW)
    res = pipe.process(json.dumps({"ts": NOW + 1, "model": "m", "score": 0.5, "id": "a"}).encode())
    assert res.applied == 1, res
    assert pipe.poll() == []
    pipe.process(json.dumps({"ts": NOW + 10, "model": "other", "score": 0.5, "y_true": 1}).encode())
    [snap] = pipe.poll()
    assert snap["key"]["model"] == "m" and snap["window"]["start"] == NOW and snap["count"] == 1
    assert snap["final"] is False and snap["pending"] == 1
