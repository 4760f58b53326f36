"""Keys not held, and held keys back after a quiet window, take the column path too:
``add_columns`` creates a batch's new keys together (in the order of their first events, each
caught up to stream time: an evicted key from its remembered frontier, any key from the forgotten
keys' frontier) and stages their events, instead of the per-key path one key at a time; what it
gives is what ``add`` one event at a time gives (snapshots, late counts, refusals, checkpoints with
the evicted keys in their order). Replay takes the column path from its first applied event (the
rest of its first chunk included)."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from streammetrics.events.records import Event
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.windows import EventRejected, WindowManager

T0 = 1_700_000_000.0


def _churning(seed: int, n: int, late_share: float = 0.01) -> list[Event]:
    """Zipf-like keys over many 10 s windows: rare keys skip windows (evicted, then back), a few late."""
    rng = random.Random(seed)
    out, t = [], T0
    for _ in range(n):
        t += rng.expovariate(1.0) * 0.1
        ts = t - (rng.random() * 25.0 if rng.random() < late_share else 0.0)
        k = min(int(rng.paretovariate(0.8)) - 1, 400)
        out.append(Event(round(ts, 3), "m", f"s{k}", y_true=int(rng.random() < 0.5),
                         score=round(rng.uniform(0.01, 0.99), 4)))
    return out


def _columns(batch: list[Event]):
    keys: dict[tuple[str, str], int] = {}
    index = np.array([keys.setdefault((e.model, e.segment), len(keys)) for e in batch], dtype=np.int64)
    items = np.array([e.score if e.y_true else -e.score for e in batch])
    return np.array([e.ts for e in batch]), index, list(keys), items


def _copy(e: Event) -> Event:
    return Event(e.ts, e.model, e.segment, y_true=e.y_true, score=e.score)


@pytest.mark.parametrize("config", [{}, {"max_keys": 25}, {"grace": 3.0, "slide": 5.0}])
def test_new_keys_created_together_equal_one_by_one(config, monkeypatch):
    per_key = []
    new_key = WindowManager._new_key

    def spy(self, key):
        per_key.append(key)
        return new_key(self, key)

    monkeypatch.setattr(WindowManager, "_new_key", spy)
    one = WindowManager(BinaryMonitor().empty, 10.0, batch=True, max_future=None, **config)
    many = WindowManager(BinaryMonitor().empty, 10.0, batch=True, max_future=None, **config)
    one.track_changes()
    many.track_changes()
    events = _churning(len(config), 8000)
    rng = random.Random(5)
    out_one, out_many, late_one, late_many, pos = [], [], 0, 0, 0
    for e in events[:1]:
        one.add(_copy(e))
        many.add(_copy(e))
    pos = 1
    while pos < len(events):
        batch = events[pos:pos + rng.choice([7, 60, 300])]
        pos += len(batch)
        for e in batch:
            try:
                late_one += not one.add(_copy(e))
            except EventRejected:
                pass
        before = len(per_key)
        late = many.add_columns(*_columns(batch))
        if late is None:  # (declined: more new keys than max_keys leaves room for)
            for e in batch:
                try:
                    late_many += not many.add(_copy(e))
                except EventRejected:
                    pass
        else:
            late_many += int(late.sum())
            del per_key[before:]  # (only the one-by-one manager's keys count below)
        if rng.random() < 0.2:
            changed = many.take_changed_keys()
            assert changed == one.take_changed_keys()
            assert json.dumps(many.delta_dict(*changed)) == json.dumps(one.delta_dict(*changed))
        if rng.random() < 0.3:
            out_one += one.poll_lines(revisions=False)
            out_many += many.poll_lines(revisions=False)
    out_one += one.poll_lines(revisions=False) + one.flush_lines()
    out_many += many.poll_lines(revisions=False) + many.flush_lines()
    assert out_many == out_one and len(out_one) > 200
    assert late_many == late_one and many.rejected == one.rejected and many.evicted == one.evicted > 100
    assert json.dumps(many.to_dict()) == json.dumps(one.to_dict())


def test_column_batches_create_their_new_keys_without_the_per_key_path(monkeypatch):
    """Fails where a batch's new keys (here: all of them, evicted ones back among them) were made
    one at a time by ``_new_key`` on the per-key path, or a held key back after a quiet window
    caught up there."""
    wm = WindowManager(BinaryMonitor().empty, 10.0, batch=True, max_future=None)
    events = _churning(1, 6000, late_share=0.0)  # (a key's late event takes the per-key path)
    wm.add(_copy(events[0]))

    def refuse(self, key, *args):
        raise AssertionError(f"key {key} made or caught up on the per-key path")

    monkeypatch.setattr(WindowManager, "_new_key", refuse)
    monkeypatch.setattr(WindowManager, "_close_by_watermark", refuse)  # (a key back after a quiet window)
    for lo in range(1, len(events), 500):
        assert not wm.add_columns(*_columns(events[lo:lo + 500])).any()
        wm.poll_lines(revisions=False)
    assert wm.evicted > 100 and wm.key_count > 20


def test_replay_goes_columnar_after_its_first_event():
    """Only the lines up to the first applied event go one by one (was: all of the first 1024)."""
    lines = [json.dumps({"ts": T0 + i * 0.1, "model": "m", "y_true": i % 2, "score": 0.3}).encode()
             for i in range(900)]
    lines.insert(0, b'{"ts": "never"}')
    pipe = Pipeline(PipelineConfig(window=10.0))
    stats = replay_lines(lines, pipe, lambda line: None)
    assert stats.events == 900 and stats.rejected == 1
    assert pipe.column_counts["columns"] == 899
