"""``consume --slice-by ... --rollup ... --fairness-by ... --max-slice-values`` against the
embedded broker, with ``--partitioning key`` (records keyed model|segment) and ``any`` (keyed by
id): the partitions publish slice windows as partials, the merge stage applies the budget and
rolls up, and every published slice and roll-up equals replay's on the same events (contract
section 11; issue 28 point 1)."""
from __future__ import annotations

import json
import random
import time

import pytest
from test_service import WINDOW, consume_cmd, read_topic, run_until_then_stop

from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.slicing import OTHER, SliceSpec, sliced_snapshot_key

PARTITIONS = 3
FLAGS = ["--slice-by", "country,device", "--max-slice-values", "3", "--rollup", "country", "--rollup", "model",
         "--fairness-by", "device", "--worst-slices", "4"]
SPEC = SliceSpec(fields=("country", "device"), max_values=3, rollups=(("country",), ()), fairness_by="device",
                 worst_slices=4)


def make_events(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    base = (int(time.time()) - 86_400) // WINDOW * WINDOW
    out = []
    for i in range(n):
        s = round(rng.random(), 3)
        out.append({"ts": round(base + i * 5 * WINDOW / n, 3), "model": "m", "segment": rng.choice("abcd"),
                    "country": rng.choice(["us", "us", "us", "fr", "fr", "de", "jp", "br"]),
                    "device": rng.choice(["ios", "web", "android"]), "y_true": int(rng.random() < s),
                    "score": s, "id": f"p{i}"})
    return out


def replayed(events: list[dict]) -> dict[bytes, dict]:
    pipe = Pipeline(PipelineConfig(window=WINDOW, slicing=SPEC))
    out: list[str] = []
    replay_lines([json.dumps(e).encode() for e in events], pipe, out.append)
    return {sliced_snapshot_key(s): s for s in map(json.loads, out) if s["key"]["model"] == "m"}


@pytest.mark.parametrize("partitioning", ["key", "any"])
def test_consume_slices_and_rollups_equal_replay(bootstrap_servers, new_topic, unique_name, make_producer, tmp_path,
                                                 partitioning: str) -> None:
    topic, output = new_topic(PARTITIONS), new_topic(1)
    events = make_events(2400, seed=5 if partitioning == "key" else 6)
    want = replayed(events)
    assert any(s["key"].get("country") == OTHER for s in want.values())  # the budget folds some values
    producer = make_producer()
    for e in events:
        key = f"m|{e['segment']}" if partitioning == "key" else e["id"]
        producer.send(topic, key=key.encode(), value=json.dumps(e).encode())
    for p in range(PARTITIONS):  # a far-ahead event on every partition closes every window
        tick = {"ts": events[-1]["ts"] + 10 * WINDOW, "model": f"tick{p}", "y_true": 1, "score": 0.5}
        producer.send(topic, key=f"tick{p}|".encode(), value=json.dumps(tick).encode(), partition=p)
    producer.flush()

    def published() -> dict[bytes, dict]:
        out = {}
        for rec in read_topic(bootstrap_servers, output, 5):
            if rec.key.startswith(b"m|"):
                out[rec.key] = json.loads(rec.value)
        return out

    cmd = consume_cmd(bootstrap_servers, topic, output, unique_name("g"), str(tmp_path / "state"),
                      "--partitioning", partitioning, *FLAGS)
    run_until_then_stop(cmd, lambda: len(published()) >= len(want), "every slice and roll-up", timeout=150)
    got = published()
    assert sorted(got) == sorted(want)
    for key, snap in want.items():
        mine = dict(got[key])
        mine.pop("sources", None)
        assert mine == snap, key
