"""Incremental checkpoints: a chain of Pipeline.delta_dict applied to the last full to_dict gives
the current to_dict exactly (random streams: new, closed, evicted and forgotten keys, late events,
delayed labels with revisions and expiries), and a pipeline loaded from it continues identically."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.stream.pipeline import Pipeline, PipelineConfig

T0 = 1_767_225_600.0


def canon(d: dict) -> str:
    return json.dumps(d, sort_keys=False, separators=(",", ":"))


def stream(seed: int, n: int, keys: int, labels: bool) -> list[list[dict]]:
    rng = random.Random(seed)
    batches, t, ids = [], T0, []
    for _ in range(n):
        batch = []
        for _ in range(rng.randrange(1, 40)):
            t += rng.expovariate(1.0) * 3
            k = rng.randrange(keys)
            ts = t - rng.random() * 90 if rng.random() < 0.1 else t  # some late events
            ev = {"ts": round(ts, 3), "model": f"m{k % 3}", "segment": f"s{k}", "score": round(rng.random(), 3)}
            if labels and rng.random() < 0.7:
                ev["id"] = f"p{len(ids)}"
                ids.append((ev["id"], ts))
            else:
                ev["y_true"] = rng.randrange(2)
            batch.append(ev)
            if labels and ids and rng.random() < 0.4:
                ident, pts = ids.pop(rng.randrange(len(ids)))
                batch.append({"id": ident, "y_true": rng.randrange(2), "ts": round(max(pts, t - 5), 3)})
        batches.append(batch)
    return batches


@pytest.mark.parametrize(("seed", "keys", "max_keys", "labels", "slide"), [
    (1, 5, None, False, None), (2, 300, None, False, None), (3, 40, 25, False, None),
    (4, 30, None, True, None), (5, 20, 12, True, None), (6, 50, None, False, 20.0),
])
def test_delta_chain_equals_full_checkpoint(seed: int, keys: int, max_keys: int | None, labels: bool,
                                            slide: float | None) -> None:
    config = PipelineConfig(task="binary", window=60.0, slide=slide, max_future=None, max_keys=max_keys,
                            label_ttl=120.0)
    p = Pipeline(config)
    base = p.to_dict()
    p.track_changes()
    merged = json.loads(canon(base))
    rng = random.Random(seed)
    deltas = 0
    for i, batch in enumerate(stream(seed, 120, keys, labels)):
        p.process(json.dumps(batch).encode())
        if rng.random() < 0.5:
            p.poll()
        if rng.random() < 0.3:
            delta = json.loads(canon(p.delta_dict()))
            deltas += 1
            merged = Pipeline.apply_delta(merged, delta)
            assert canon(merged) == canon(p.to_dict()), f"batch {i}"
            if rng.random() < 0.2:  # compaction: a new full checkpoint
                merged = json.loads(canon(p.to_dict()))
                p.track_changes()
    delta = json.loads(canon(p.delta_dict()))
    merged = Pipeline.apply_delta(merged, delta)
    assert canon(merged) == canon(p.to_dict())
    # a pipeline restored from the chain continues as the original
    q = Pipeline(config).load_dict(merged)
    tail = stream(seed + 100, 10, keys, labels)
    for batch in tail:
        p.process(json.dumps(batch).encode())
        q.process(json.dumps(batch).encode())
    assert [json.dumps(s, sort_keys=True) for s in p.flush()] == [json.dumps(s, sort_keys=True) for s in q.flush()]
    assert deltas > 5


def test_delta_costs_follow_the_changes() -> None:
    """A delta after events on 10 of 5,000 keys holds 10 key entries, not 5,000."""
    p = Pipeline(PipelineConfig(task="binary", window=60.0, max_future=None))
    p.process(json.dumps([{"ts": T0 + i * 1e-3, "model": "m", "segment": f"s{i}", "y_true": 1, "score": 0.5}
                          for i in range(5000)]).encode())
    p.to_dict()
    p.track_changes()
    p.process(json.dumps([{"ts": T0 + 6, "model": "m", "segment": f"s{i}", "y_true": 0, "score": 0.1}
                          for i in range(10)]).encode())
    delta = p.delta_dict()
    assert len(delta["windows"]["keys"]) == 10
    assert len(json.dumps(delta)) < len(json.dumps(p.to_dict())) / 100


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(type="Other"), lambda d: d.update(version=9), lambda d: d.update(task="regression"),
    lambda d: d["windows"].update(spec={"size_ms": 1}), lambda d: d["windows"].update(keys="x"),
    lambda d: d["windows"].update(gone=[[1]]), lambda d: d["windows"].update(closed=[["m", "s", 1]]),
    lambda d: d["windows"].update(keys=[{"model": "m"}]), lambda d: d.update(windows=None),
])
def test_malformed_delta_is_a_one_line_value_error(mutate) -> None:
    p = Pipeline(PipelineConfig(task="binary", window=60.0, max_future=None))
    full = p.to_dict()
    p.track_changes()
    p.process(b'{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.3}')
    delta = json.loads(json.dumps(p.delta_dict()))
    mutate(delta)
    with pytest.raises(ValueError) as info:
        merged = Pipeline.apply_delta(full, delta)
        Pipeline(PipelineConfig(task="binary", window=60.0, max_future=None)).load_dict(merged)
    assert "\n" not in str(info.value)


def test_pending_predictions_and_remembered_ids_cost_what_changed() -> None:
    """The probes p_ckpt_pending.py / p_remembered_ids.py: 20,000 predictions awaiting labels and
    5,000 remembered label ids; a delta after 10 more predictions and 10 labels writes those, not
    the 20,000 (was: every checkpoint serialised every pending prediction and remembered id)."""
    p = Pipeline(PipelineConfig(task="binary", window=60.0, max_future=None, label_ttl=7 * 86400))
    preds = [{"ts": T0 + i * 0.01, "model": "m", "score": 0.5, "id": f"p{i}"} for i in range(20_000)]
    p.process(json.dumps(preds).encode())
    p.process(json.dumps([{"ts": T0 + 200, "id": f"p{i}", "y_true": 1} for i in range(5000)]).encode())
    p.poll()
    full = json.loads(json.dumps(p.to_dict()))
    p.track_changes()
    p.process(json.dumps([{"ts": T0 + 201, "model": "m", "score": 0.5, "id": f"q{i}"} for i in range(10)]).encode())
    p.process(json.dumps([{"ts": T0 + 202, "id": f"p{i}", "y_true": 0} for i in range(6000, 6010)]).encode())
    p.poll()
    delta = json.loads(json.dumps(p.delta_dict()))
    join = delta["labels"]["join"]
    assert len(join["store"]["added"]) == 10 and len(join["store"]["removed"]) == 10
    assert len(join["labels"]) == 10 and not join["labels_gone"]
    assert len(json.dumps(delta)) * 50 < len(json.dumps(full))
    merged = Pipeline.apply_delta(full, delta)
    assert canon(merged) == canon(p.to_dict())


def test_spilled_pending_records_merge_to_the_same_records() -> None:
    """With a tiny memory budget the pending store spills to SQLite between deltas: the merged
    checkpoint holds the same records (tiers may differ) and restores to the same results."""
    from streammetrics.stream.pending import PendingStore

    rng = random.Random(3)
    store = PendingStore(memory_budget=50)
    from streammetrics.events.parser import Event

    store.track_changes()
    full = store.to_dict()
    for step in range(30):
        for _ in range(rng.randrange(1, 60)):
            i = rng.randrange(500)
            store.put(Event(T0 + rng.random() * 100, "m", "", None, 0.5, None, None, 1.0, f"id{i}"), tag=step)
        for _ in range(rng.randrange(0, 20)):
            store.take(f"id{rng.randrange(500)}")
        if step % 5 == 4:
            store.expire(round((T0 + step * 3) * 1e6))
        full = PendingStore.apply_delta(full, store.delta_dict())
        now = store.to_dict()
        assert sorted(full["memory"] + full["disk"]) == sorted(now["memory"] + now["disk"])
        assert {k: full[k] for k in ("seq", "spilled", "spills", "evicted")} == \
            {k: now[k] for k in ("seq", "spilled", "spills", "evicted")}
    assert store.on_disk > 0
    store.close()


def test_newest_keys_are_the_last_created_in_order() -> None:
    pipeline = Pipeline(PipelineConfig(window=60.0, max_future=None))
    for i in range(7):
        pipeline.process(json.dumps({"ts": 1.0 + i, "model": f"m{i}", "y_true": 1, "score": 0.5}).encode())
    windows = pipeline.windows
    assert windows.newest_keys(3) == windows.keys[-3:] == [("m4", ""), ("m5", ""), ("m6", "")]
    assert windows.newest_keys(0) == [] and windows.newest_keys(99) == windows.keys
