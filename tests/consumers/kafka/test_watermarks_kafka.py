"""The service's windows close by each partition's event-time watermark (issue 25), on tansu:
sparse keys lose nothing with the default flags, and the snapshots are the ones ``replay``
writes for the same events."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time

from test_service import ServiceThread, snapshots_by_key, wait_for

from consumers.service import ServiceConfig


def read_all(bootstrap: str, topic: str, timeout: float = 20.0) -> list:
    """Every record of ``topic`` up to its high watermark (``end_offsets`` is wrong on tansu)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list = []
        deadline = time.monotonic() + timeout
        idle = 0
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=300)
            n = sum(len(r) for r in got.values())
            for records in got.values():
                out.extend(records)
            if n:
                idle = 0
                continue
            idle += 1
            if idle > 3 and all(consumer.highwater(tp) is not None and consumer.position(tp) >= consumer.highwater(tp)
                                for tp in tps):
                break
        return out
    finally:
        consumer.close()


def replay_lines(events: list[dict], tmp_path, *args: str) -> dict[str, bytes]:
    """``replay``'s snapshot lines for ``events`` by snapshot key."""
    src = tmp_path / "events.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "replay.jsonl"
    subprocess.run([sys.executable, "-m", "streammetrics.cli", "replay", str(src), "-o", str(out), "-q", *args],
                   check=True)
    lines = {}
    for line in out.read_text().splitlines():
        s = json.loads(line)
        lines[f"{s['key']['model']}|{s['key']['segment']}|{int(s['window']['start'])}"] = line.encode()
    return lines


def test_sparse_keys_lose_nothing_with_default_flags_and_equal_replay(bootstrap_servers, new_topic, unique_name,
                                                                      make_producer, tmp_path):
    """One event per 40 s per key, 5-minute windows, default flags (issue 25: with the per-key
    wall-clock idle close 2 of 4 events were dead-lettered as late and each window had 1 event)."""
    topic, output, dlq = new_topic(2), new_topic(1), new_topic(1)
    t0 = math.floor((time.time() - 3 * 3600) / 300) * 300
    events = [{"ts": t0 + 40 * i + k, "model": f"m{k}", "segment": "", "y_true": (i + k) % 2,
               "score": round(((i * 7 + k) % 10) / 10, 1)} for i in range(30) for k in range(4)]
    last = events[-1]["ts"]
    closers = [{"ts": last + 900, "model": f"m{k}", "segment": "", "y_true": 0, "score": 0.5} for k in range(4)]
    producer = make_producer()
    for ev in events + closers:
        producer.send(topic, key=f"{ev['model']}|".encode(), value=json.dumps(ev).encode())
    producer.flush()
    expected = {k: v for k, v in replay_lines(events + closers, tmp_path, "--window", "5m").items()
                if int(k.rsplit("|", 1)[1]) <= last}
    assert sum(json.loads(v)["count"] for v in expected.values()) == len(events)
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output, dlq_topic=dlq,
                           group_id=unique_name("g"), window=300.0)  # every other flag at its default
    assert config.idle_close == 30.0
    with ServiceThread(config):
        wait_for(lambda: set(snapshots_by_key(read_all(bootstrap_servers, output, 5))) >= set(expected), 60,
                 "every window")
    got = snapshots_by_key(read_all(bootstrap_servers, output))
    assert read_all(bootstrap_servers, dlq, 5) == []  # nothing late
    for key, line in expected.items():
        assert set(got[key]) == {line}, key  # byte for byte what replay writes


def test_predictions_keyed_by_id_with_default_flags_are_refused_before_anything_is_published(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    """Issue 25: keyed by id over several partitions, the default mode published one partial window
    per partition under one key (1,455 pairs of different snapshots). Now: status 2, one line, an
    empty output topic."""
    topic, output, dlq = new_topic(3), new_topic(1), new_topic(1)
    t0 = math.floor((time.time() - 3 * 3600) / 60) * 60
    producer = make_producer()
    for i in range(600):
        ev = {"ts": t0 + i * 0.5, "model": "m", "segment": "", "id": f"p{i}", "y_true": i % 2, "score": 0.5}
        producer.send(topic, key=ev["id"].encode(), value=json.dumps(ev).encode())
    producer.flush()
    proc = subprocess.run([sys.executable, "-m", "streammetrics.cli", "consume", "--bootstrap-servers",
                           bootstrap_servers, "--topic", topic, "--output-topic", output, "--dlq-topic", dlq,
                           "--group-id", unique_name("g"), "--changelog-topic", ""],
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--partitioning any" in proc.stderr and "message key b'p" in proc.stderr
    assert read_all(bootstrap_servers, output, 5) == [] and read_all(bootstrap_servers, dlq, 5) == []
