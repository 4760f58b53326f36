"""Alert rules in ``consume`` against the embedded broker: the alerts topic holds the events
``replay --alerts-output`` writes for the same events, also when the service is SIGKILLed at
random moments and restarted (each transition once: a re-published event is the same bytes
under the same key), and with ``--partitioning any`` (the merge stage evaluates the merged
windows)."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_service import _run_until_caught_up, consume_cmd, produce, read_topic, wait_for, with_closers

from streammetrics.stream.synthetic import generate_events

WINDOW = 60
RULES = ("--alert", "roc_auc<0.93", "--alert", "log_loss.rise>0.05", "--alert", "f1.high<0.8")


def replay_alerts(events: list[dict], tmp_path) -> set[tuple[bytes, bytes]]:
    """The alert events replay writes for ``events`` (ending in closers), but for the closers' own
    windows, which replay flushes at the end of its input and the service never closes."""
    closing = min(e["ts"] for e in events if e.get("id") == "closer") // WINDOW * WINDOW
    src = tmp_path / "events.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = subprocess.run([sys.executable, "-m", "streammetrics.cli", "replay", str(src), "--window", f"{WINDOW}s",
                          "--max-future", "0", *RULES, "--alerts-output", str(tmp_path / "alerts.jsonl"),
                          "-o", str(tmp_path / "snaps.jsonl")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = set()
    for line in (tmp_path / "alerts.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["window"]["start"] >= closing:
            continue
        key = f"{event['rule']}|{event['key']['model']}|{event['key']['segment']}".encode()
        got.add((key, line.encode()))
    return got


def topic_alerts(bootstrap: str, topic: str, expected: set[tuple[bytes, bytes]], events: list[dict],
                 timeout: float = 30.0) -> tuple[set[tuple[bytes, bytes]], int]:
    """The (key, value) pairs on the alerts topic once they hold ``expected`` (or after ``timeout``),
    but for the closers' windows, and how many records the topic holds."""
    closing = min(e["ts"] for e in events if e.get("id") == "closer") // WINDOW * WINDOW
    deadline = time.monotonic() + timeout
    while True:
        records = read_topic(bootstrap, topic)
        got = {(r.key, r.value) for r in records if json.loads(r.value)["window"]["start"] < closing}
        if got >= expected or time.monotonic() > deadline:
            return got, len(records)
        time.sleep(0.5)


def windows_of(events: list[dict]) -> int:
    return len({(e["model"], e["segment"], e["ts"] // WINDOW) for e in events})


@pytest.mark.slow
def test_alerts_topic_across_sigkills_equals_replay(bootstrap_servers, new_topic, make_producer, unique_name,
                                                    tmp_path):
    topic, out, alerts = new_topic(2), new_topic(1), new_topic(1)
    events = with_closers(list(generate_events(20_000, duration=16 * WINDOW, seed=5)))
    expected = replay_alerts(events, tmp_path)
    assert len({json.loads(v)["state"] for _, v in expected}) == 2
    producer = make_producer(linger_ms=20)

    def feed() -> None:  # ~8 s of traffic, so that kills land mid-stream
        for i in range(0, len(events), 500):
            produce(producer, topic, events[i:i + 500])
            time.sleep(0.2)

    feeder = threading.Thread(target=feed)
    feeder.start()
    state = tmp_path / "state"
    cmd = consume_cmd(bootstrap_servers, topic, out, unique_name("alerts"), str(state), "--max-poll-records", "300",
                      "--checkpoint-interval", "0.2s", "--max-future", "0", *RULES, "--alerts-topic", alerts)
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    kills = 0
    while feeder.is_alive() or kills < 3:
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda started=started: any(p.stat().st_mtime > started for p in state.rglob("*.json"))
                     or (not feeder.is_alive() and time.time() - started > 8), 60, "a checkpoint")
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        kills += 1
    feeder.join()
    _run_until_caught_up(cmd, bootstrap_servers, out, windows_of(events[:-3]))
    got, published = topic_alerts(bootstrap_servers, alerts, expected, events)
    assert got == expected, (kills, sorted(got - expected)[:3], sorted(expected - got)[:3])
    # each (key, id, state) once: re-publications are the same bytes, so the set has one value per event
    assert len({(k, json.loads(v)["id"], json.loads(v)["state"]) for k, v in got}) == len(got)
    assert published >= len(got)


@pytest.mark.slow
def test_partitioned_mode_evaluates_the_merged_windows(bootstrap_servers, new_topic, make_producer, unique_name,
                                                       tmp_path):
    topic, out, alerts = new_topic(3), new_topic(1), new_topic(1)
    events = with_closers(list(generate_events(6_000, duration=8 * WINDOW, seed=8)))
    expected = replay_alerts(events, tmp_path)
    producer = make_producer()
    for i, ev in enumerate(events):  # keyed by position: every key on every partition
        producer.send(topic, key=f"id-{i}".encode(), value=json.dumps(ev).encode())
    for p in range(3):  # a far-ahead event on every partition closes every window there
        closer = dict(events[-1], ts=events[-1]["ts"] + 600, model="closer")
        producer.send(topic, partition=p, key=b"closer", value=json.dumps(closer).encode())
    producer.flush()
    cmd = consume_cmd(bootstrap_servers, topic, out, unique_name("any"), str(tmp_path / "any"), "--partitioning",
                      "any", "--max-future", "0", *RULES, "--alerts-topic", alerts)
    _run_until_caught_up(cmd, bootstrap_servers, out, windows_of(events[:-3]), timeout=120)
    got, _ = topic_alerts(bootstrap_servers, alerts, expected, events)
    assert got == expected, (sorted(got - expected)[:3], sorted(expected - got)[:3])
