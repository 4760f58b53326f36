"""Staged column batches (``WindowManager.add_columns``) against the simple path, with everything a
service does between two batches: ``Pipeline.process_lines`` in chunks gives exactly what
``Pipeline.process`` of each line gives - problems, snapshot lines, full checkpoints and
incremental ones (``delta_dict``) - when polls (collecting or not), checkpoints, deltas, idle
closes (``advance_watermark``) and restores (from a checkpoint or a delta chain, taken while
events are staged) come between chunks, for each task, hopping windows, grace, small
``max_pending`` and ``max_keys`` (eviction), and delayed labels."""
from __future__ import annotations

import json
import random
import zlib

import pytest

from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.windows import WindowManager

pytest.importorskip("msgspec")

NOW = 1_767_225_600.0
T0 = NOW - 50_000
CLASSES = ["a", "b", "c"]


def _event(rng: random.Random, task: str, t: float, keys: int, delayed: bool) -> dict:
    k = min(int(rng.paretovariate(1.1)) - 1, keys - 1)  # a few busy keys, many of few events
    e: dict = {"ts": round(t, 3), "model": f"m{k % 4}", "segment": f"s{k}"}
    if task == "binary":
        e["y_true"] = rng.choice([0, 1])
        e["score"] = rng.choice([rng.random(), rng.random(), 0.0, 1.0])
    elif task == "labels":
        e["y_true"], e["y_pred"] = rng.choice("xyz"), rng.choice("xyz")
    elif task == "regression":
        e["y_true"] = rng.gauss(0.0, 3.0)
        e["y_pred"] = rng.choice([rng.gauss(0.0, 3.0), 2, -7])
    else:
        e["y_true"] = rng.choice(CLASSES)
        raw = [rng.random() for _ in CLASSES]
        e["scores"] = [x / sum(raw) for x in raw]
    if rng.random() < 0.1:
        e["weight"] = rng.choice([0.5, 2, 0.0])
    if delayed and rng.random() < 0.1:
        e["id"] = f"p{rng.randrange(10**9)}"
    return e


def _stream(seed: int, task: str, n: int, keys: int, delayed: bool = False) -> list[bytes]:
    rng = random.Random(seed)
    lines, ids = [], []
    t = T0
    for _ in range(n):
        t += rng.expovariate(1.0) * 0.3
        ts = t - (rng.random() * 25.0 if rng.random() < 0.05 else 0.0)  # out of order, some late
        e = _event(rng, task, ts, keys, delayed)
        if delayed and "id" in e:
            ids.append((e["id"], e["y_true"]))
            del e["y_true"]
        if delayed and ids and rng.random() < 0.08:  # a label of an earlier prediction
            pid, y = ids.pop(rng.randrange(len(ids)))
            lines.append(json.dumps({"id": pid, "y_true": y, "ts": round(t, 3)}).encode())
        lines.append(json.dumps(e).encode())
    return lines


def _plan(seed: int, n: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out, total = [], 0
    while total < n:
        size = rng.choice([1, 2, 9, 40, 150, 600])
        out.append((size, rng.choice(["none", "none", "poll", "hold", "checkpoint", "delta", "restore", "idle"])))
        total += size
    return out


def _run(lines: list[bytes], columnar: bool, plan: list[tuple[int, str]], restores: bool, cfg: dict):
    def fresh() -> Pipeline:
        return Pipeline(PipelineConfig(**cfg), wall_clock=lambda: NOW)

    p = fresh()
    out: list[str] = []
    problems: list[tuple] = []
    states: list[str] = []  # checkpoints and deltas, in order
    base = p.to_dict()
    p.track_changes()
    deltas: list[dict] = []
    pos = 0
    for size, action in plan:
        chunk = lines[pos:pos + size]
        if columnar:
            found = p.process_lines(chunk)
        else:
            found = [(i, list(p.process(line).problems)) for i, line in enumerate(chunk)]
            found = [(i, ps) for i, ps in found if ps]
        problems += [(pos + i, q.code, q.reason, q.field) for i, ps in found for q in ps]
        pos += size
        if action == "poll":
            out += p.poll_lines(revisions=False)
        elif action == "hold":
            p.poll_lines(revisions=False, collect=False)
        elif action == "checkpoint":
            states.append(json.dumps(p.to_dict(), sort_keys=True))
        elif action == "delta":
            delta = p.delta_dict()
            deltas.append(delta)
            states.append(json.dumps(delta, sort_keys=True))
        elif action == "idle":
            now = p.windows.stream_time()
            if now is not None:
                p.windows.advance_watermark(int(now * 1e6) + 7_000_000)
                out += p.poll_lines(revisions=False)
        elif action == "restore":  # (the ready snapshots published first: not in a checkpoint)
            out += p.poll_lines(revisions=False)
            if not restores:
                continue
            # the service's restore: the last full checkpoint with the deltas since (the state held
            # now, staged events included), into a new pipeline
            deltas.append(p.delta_dict())
            data = json.loads(json.dumps(Pipeline.apply_delta(base, *deltas)))
            assert json.dumps(data, sort_keys=True) == json.dumps(p.to_dict(), sort_keys=True)
            p = fresh().load_dict(data)
            base, deltas = p.to_dict(), []
            p.track_changes()
    state = json.dumps(p.to_dict(), sort_keys=True)
    out += p.poll_lines(revisions=False) + p.flush_lines()
    return out, problems, states, state


CONFIGS = [
    {"window": 10.0},
    {"window": 10.0, "slide": 5.0, "grace": 3.0},
    {"window": 6.0, "slide": 2.0},
    {"window": 10.0, "grace": 12.0, "max_pending": 3},
    {"window": 4.0, "max_keys": 25},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("task", ["binary", "regression", "multiclass", "labels"])
def test_column_batches_with_service_operations_between(config, task, monkeypatch):
    staged = []
    stage = WindowManager._stage

    def spy(self, lo, hi, *args, **kwargs):
        rest = stage(self, lo, hi, *args, **kwargs)
        staged.append(rest is None or len(rest) < hi - lo)
        return rest

    monkeypatch.setattr(WindowManager, "_stage", spy)
    seed = zlib.crc32(repr((task, config)).encode()) & 0xFFFF  # (the same every run)
    lines = _stream(seed, task, 2500, keys=60)
    cfg = {**config, "task": task, "max_future": None, **({"classes": CLASSES} if task == "multiclass" else {})}
    plan = _plan(seed + 1, len(lines))
    want = _run(lines, False, plan, True, cfg)
    got = _run(lines, True, plan, True, cfg)
    assert got[1] == want[1]  # problems
    assert got[2] == want[2]  # every checkpoint and delta between chunks
    assert got[3] == want[3]  # the last checkpoint
    assert got[0] == want[0] and len(want[0]) > 50  # snapshot lines, in order
    if task != "labels":  # (the labels task stages nothing: its event tag takes the per-key path)
        assert sum(staged) > 5


@pytest.mark.parametrize("config", CONFIGS[:3], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_restored_run_gives_the_uninterrupted_runs_lines(config):
    """Restores (from a delta chain taken while events are staged) change no snapshot line."""
    lines = _stream(11, "binary", 2500, keys=60)
    cfg = {**config, "max_future": None, "max_keys": None}
    plan = _plan(12, len(lines))
    want = _run(lines, False, plan, False, cfg)
    got = _run(lines, True, plan, True, cfg)
    assert got[0] == want[0] and got[1] == want[1]


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_delayed_labels_after_staged_batches(task):
    """Predictions awaiting labels and label events among column batches: the first delayed item
    applies the staged events before it (then the pipeline goes line by line)."""
    lines = _stream(21, task, 3000, keys=40, delayed=True)
    cfg = {"window": 10.0, "slide": 5.0, "task": task, "max_future": None,
           **({"classes": CLASSES} if task == "multiclass" else {})}
    plan = _plan(22, len(lines))
    want = _run(lines, False, plan, True, cfg)
    got = _run(lines, True, plan, True, cfg)
    assert got[1] == want[1] and got[2] == want[2] and got[3] == want[3] and got[0] == want[0]
    assert any('"revision":1' in line for line in want[0])


def test_a_segment_larger_than_the_stage_bound_is_not_staged(monkeypatch):
    """STAGE_MAX_EVENTS bounds the staged events even when one batch's segment alone holds more
    (then it takes the per-key path): the same lines as line by line."""
    from streammetrics.stream import windows as windows_module

    monkeypatch.setattr(windows_module, "STAGE_MAX_EVENTS", 50)
    lines = _stream(31, "binary", 3000, keys=3)
    cfg = {"window": 60.0, "max_future": None}
    want = Pipeline(PipelineConfig(**cfg), wall_clock=lambda: NOW)
    got = Pipeline(PipelineConfig(**cfg), wall_clock=lambda: NOW)
    out_want, out_got, most = [], [], 0
    for lo in range(0, len(lines), 200):
        for line in lines[lo:lo + 200]:
            want.process(line)
        got.process_lines(lines[lo:lo + 200])
        most = max(most, got.windows.staged_count)
        out_want += want.poll_lines(revisions=False)
        out_got += got.poll_lines(revisions=False)
    assert 0 < most <= 50
    assert out_got + got.flush_lines() == out_want + want.flush_lines()
