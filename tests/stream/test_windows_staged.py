"""``WindowManager.add_columns`` holds a batch staged when no per-event decision depends on it (every
key held, no catch-up close, nothing late, no earlier first window: those keys' events, the others
taking the per-key path) and applies the staged batches
to their keys' queues together before anything reads them: the checkpoint taken between any two
batches, the queues drained at ``max_pending``, the keys changed for an incremental checkpoint,
the snapshots and the late counts are those of ``add`` one event at a time, and the staging is
really used (a spy counts it)."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from streammetrics.events.records import Event
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream import windows as windows_module
from streammetrics.stream.windows import WindowManager

T0 = 1_700_000_000.0


def _events(seed: int, n: int, keys: int) -> list[Event]:
    rng = random.Random(seed)
    out, t = [], T0
    for _ in range(n):
        t += rng.expovariate(1.0) * 0.05
        ts = t - (rng.random() * 20.0 if rng.random() < 0.02 else 0.0)  # a few out of order or late
        k = min(int(rng.paretovariate(1.2)) - 1, keys - 1)
        out.append(Event(round(ts, 3), f"m{k % 3}", f"s{k}", y_true=int(rng.random() < 0.4),
                         score=round(rng.uniform(0.01, 0.99), 4)))
    return out


def _queues(wm: WindowManager) -> dict:
    """Each key's events per open pane, in order: its monitor's small form then its queued items
    (the binary monitor's state would sort them)."""
    def signed(e):
        return e if e.__class__ is float else (e.score if e.y_true else -e.score)

    return {key: {pane: [signed(e) for e in (state.panes[pane]._queue if pane in state.panes else [])]
                  + [signed(e) for e in state.pending.get(pane, [])]
                  for pane in sorted(state.panes.keys() | state.pending.keys())}
            for key, state in wm._keys.items()}


def _manager(**config) -> WindowManager:
    return WindowManager(BinaryMonitor().empty, 10.0, batch=True, max_future=None, **config)


def _columns(batch: list[Event], shared: dict | None = None):
    """The batch as add_columns' columns; with ``shared``, each key the same tuple object batch after
    batch (as the column decoder gives them: _stage then finds a key staged since the last close by
    its identity), else new tuples in each batch."""
    keys: dict[tuple[str, str], int] = {}
    index = np.array([keys.setdefault((e.model, e.segment), len(keys)) for e in batch], dtype=np.int64)
    ts = np.array([e.ts for e in batch])
    items = np.array([e.score if e.y_true else -e.score for e in batch])
    return ts, index, list(keys) if shared is None else [shared.setdefault(k, k) for k in keys], items


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("config", [{}, {"max_pending": 3}, {"grace": 4.0}, {"max_keys": 30}])
def test_staged_batches_equal_events_one_by_one(config, shared, monkeypatch):
    staged = []
    stage, bounds = WindowManager._stage, WindowManager._key_bounds
    visits = {"staged keys": 0, "looked up": 0}

    def spy(self, lo, hi, *args, **kwargs):
        visits["staged keys"] += len(np.unique(args[3][lo:hi]))  # (key_index)
        rest = stage(self, lo, hi, *args, **kwargs)  # positions left to the per-key path, None: none
        staged.append("all" if rest is None else "none" if len(rest) == hi - lo else "part")
        return rest

    def spy_bounds(self, lo, stream_us, px, pos, ukeys, *args, **kwargs):
        visits["looked up"] += len(ukeys)
        return bounds(self, lo, stream_us, px, pos, ukeys, *args, **kwargs)

    monkeypatch.setattr(WindowManager, "_stage", spy)
    monkeypatch.setattr(WindowManager, "_key_bounds", spy_bounds)
    keys_met: dict | None = {} if shared else None
    events = _events(len(config), 6000, keys=60)
    one, many = _manager(**config), _manager(**config)
    one.track_changes()
    many.track_changes()
    rng = random.Random(3)
    pos, lines_one, lines_many, late_one, late_many = 0, [], [], 0, 0
    while pos < len(events):
        size = rng.choice([1, 5, 40, 200])
        batch = events[pos:pos + size]
        pos += size
        for e in batch:
            try:
                late_one += not one.add(Event(e.ts, e.model, e.segment, y_true=e.y_true, score=e.score))
            except windows_module.EventRejected:
                late_one += 0
        late = many.add_columns(*_columns(batch, keys_met)) if len(batch) > 1 and many.stream_time() is not None \
            else None
        if late is None:
            for e in batch:
                try:
                    late_many += not many.add(Event(e.ts, e.model, e.segment, y_true=e.y_true, score=e.score))
                except windows_module.EventRejected:
                    late_many += 0
        else:
            late_many += int(late.sum())
        if rng.random() < 0.3:  # every queue holds its events in their order (open_panes applies the staged)
            assert many.open_panes() == one.open_panes()
            assert _queues(many) == _queues(one)
        if rng.random() < 0.2:  # a checkpoint between two batches: the staged events in it
            assert json.dumps(many.to_dict(), sort_keys=True) == json.dumps(one.to_dict(), sort_keys=True)
        if rng.random() < 0.2:  # an incremental checkpoint: the same keys changed
            changed = many.take_changed_keys()
            assert changed == one.take_changed_keys()
            assert json.dumps(many.delta_dict(*changed), sort_keys=True) == json.dumps(
                one.delta_dict(*changed), sort_keys=True)
        if rng.random() < 0.3:
            lines_one += one.poll_lines(revisions=False)
            lines_many += many.poll_lines(revisions=False)
    lines_one += one.poll_lines(revisions=False) + one.flush_lines()
    lines_many += many.poll_lines(revisions=False) + many.flush_lines()
    assert late_many == late_one and many.rejected == one.rejected
    assert lines_many == lines_one and len(lines_one) > 100
    assert json.dumps(many.to_dict(), sort_keys=True) == json.dumps(one.to_dict(), sort_keys=True)
    assert staged.count("all") > 10 and staged.count("part") > 10  # staged whole and in part
    # the same key objects: a key staged since the last close is not looked up again
    assert (visits["looked up"] < visits["staged keys"]) if shared else \
        (visits["looked up"] == visits["staged keys"])


def test_an_evicting_poll_leaves_staged_events_staged():
    """A poll that evicts emptied keys does not apply the staged events of the others (a key with
    staged events holds them: it is not evicted); the output is that of add one event at a time."""
    one, many = _manager(), _manager()
    shared: dict = {}

    def feed(events):
        for e in events:
            one.add(Event(e.ts, e.model, e.segment, y_true=e.y_true, score=e.score))
        assert many.add_columns(*_columns(events, shared)) is not None

    first = [Event(T0 + i * 0.1, "m", f"s{i % 5}", y_true=i % 2, score=0.1 + 0.01 * i) for i in range(40)]
    one.add(first[0])
    many.add(Event(first[0].ts, "m", "s0", y_true=0, score=first[0].score))
    feed(first[1:])
    lines_one, lines_many = one.poll_lines(revisions=False), many.poll_lines(revisions=False)
    # the first window closes: s1..s4 are emptied and stay quiet, s0 goes on (staged); two panes
    # later a poll evicts s1..s4
    for start in (10.0, 20.0):
        feed([Event(T0 + start + i, "m", "s0", y_true=1, score=0.5) for i in range(10)])
        lines_one += one.poll_lines(revisions=False)
        staged = many.staged_count
        lines_many += many.poll_lines(revisions=False)
    assert many.evicted == one.evicted == 4  # the quiet keys went, at the last poll
    assert staged > 0 and many.staged_count == staged  # s0's events still staged
    assert lines_many == lines_one
    assert many.flush_lines() == one.flush_lines()
    assert json.dumps(many.to_dict(), sort_keys=True) == json.dumps(one.to_dict(), sort_keys=True)


def test_staged_events_are_bounded(monkeypatch):
    """More than STAGE_MAX_EVENTS staged events are applied before more are staged."""
    monkeypatch.setattr(windows_module, "STAGE_MAX_EVENTS", 50)
    events = _events(9, 3000, keys=20)
    one, many = _manager(), _manager()
    for e in events[:1]:
        one.add(e)
        many.add(Event(e.ts, e.model, e.segment, y_true=e.y_true, score=e.score))
    most = 0
    for lo in range(1, len(events), 30):
        batch = events[lo:lo + 30]
        for e in batch:
            one.add(Event(e.ts, e.model, e.segment, y_true=e.y_true, score=e.score))
        assert many.add_columns(*_columns(batch)) is not None
        most = max(most, many.staged_count)
    assert 0 < most <= 50
    assert many.flush_lines() == one.flush_lines()
