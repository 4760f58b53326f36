"""``consume --labels-topic`` against the embedded broker: predictions and delayed labels on two
co-partitioned topics; every final window equals ``replay PRED --labels LAB`` on the same data,
also across SIGKILLs."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/consumers: the fake-broker tests' data

from test_service import consume_cmd, read_topic, run_until_then_stop, wait_for  # noqa: E402
from test_service_labels import TTL, WINDOW, compare_finals, delayed_data  # noqa: E402

from consumers.service import ServiceConfig  # noqa: E402


def produce_pairs(producer: Any, topic: str, labels_topic: str, preds: list[list[dict]],
                  labels: list[list[dict]]) -> None:
    """Each partition's predictions and labels, keyed by id, on the same partition number."""
    for p, evs in enumerate(preds):
        for ev in evs:
            producer.send(topic, key=str(ev.get("id")).encode(), value=json.dumps(ev).encode(), partition=p)
    for p, evs in enumerate(labels):
        for ev in evs:
            producer.send(labels_topic, key=ev["id"].encode(), value=json.dumps(ev).encode(), partition=p)
    producer.flush()


def published(bootstrap: str, topic: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for rec in read_topic(bootstrap, topic):
        out[rec.key.decode()].append(json.loads(rec.value))
    return out


def pipeline_config() -> Any:
    return ServiceConfig(bootstrap_servers="-", topic="-", output_topic="-", window=WINDOW, idle_close=None,
                         labels_topic="-", label_ttl=TTL).pipeline_config()


def n_final(pub: dict[str, list[dict]]) -> int:
    return sum(1 for snaps in pub.values() if snaps[-1]["final"])


def labels_cmd(bootstrap: str, topic: str, labels_topic: str, out: str, group: str, state: str,
               *extra: str) -> list[str]:
    # predictions keyed by id, each model on one partition (the test's own partitioning): key-unchecked
    return consume_cmd(bootstrap, topic, out, group, state, "--labels-topic", labels_topic,
                       "--label-ttl", f"{TTL:g}s", "--partitioning", "key-unchecked", *extra)


def run_until_final(cmd: list[str], bootstrap: str, out: str, n_expected: int, timeout: float = 90.0) -> str:
    """:func:`run_until_then_stop` once ``out`` holds ``n_expected`` final windows."""
    return run_until_then_stop(cmd, lambda: n_final(published(bootstrap, out)) >= n_expected, "final snapshots",
                               timeout)


def expected_finals(preds: list[list[dict]], labels: list[list[dict]]) -> int:
    from test_service_labels import replay_finals

    closer_start = int(max(e["ts"] for side in preds for e in side) // WINDOW * WINDOW)
    return sum(1 for k in replay_finals(pipeline_config(), preds, labels) if not k.endswith(f"|{closer_start}"))


def test_labels_topic_final_windows_equal_replay(bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    preds, labels = delayed_data(n=3000, seed=21, partitions=2)
    topic, labels_topic, out = new_topic(2), new_topic(2), new_topic(1)
    produce_pairs(make_producer(linger_ms=20), topic, labels_topic, preds, labels)
    n_expected = expected_finals(preds, labels)
    run_until_final(labels_cmd(bootstrap_servers, topic, labels_topic, out, unique_name("g"), str(tmp_path / "s"),
                               "--max-poll-records", "200"), bootstrap_servers, out, n_expected)
    pub = published(bootstrap_servers, out)
    compare_finals(pub, pipeline_config(), preds, labels)
    assert any(len(snaps) > 1 for snaps in pub.values())  # revisions under the window's own key


@pytest.mark.slow
def test_labels_topic_sigkill_and_restart_equals_replay(bootstrap_servers, new_topic, unique_name, make_producer,
                                                       tmp_path):
    preds, labels = delayed_data(n=12_000, seed=22, partitions=2)
    topic, labels_topic, out = new_topic(2), new_topic(2), new_topic(1)
    produce_pairs(make_producer(linger_ms=20), topic, labels_topic, preds, labels)
    n_expected = expected_finals(preds, labels)
    state = tmp_path / "s"
    cmd = labels_cmd(bootstrap_servers, topic, labels_topic, out, unique_name("g"), str(state),
                     "--max-poll-records", "100", "--checkpoint-interval", "0.1s")
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    kills = []
    for attempt in range(3):
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # a restart may find nothing left to do (then it writes no checkpoint): give it time to join;
            # the first run has every event to apply, so it is killed only once it checkpoints
            wait_for(lambda started=started, attempt=attempt: any(p.stat().st_mtime > started
                                                                  for p in state.rglob("*.json"))
                     or (attempt > 0 and time.time() - started > 8), 60, "a checkpoint of the (re)started process")
            # the first kill soon after the first checkpoint (an idle machine applies all the
            # events within ~1 s of it), the others anywhere in the following 1.5 s
            delay = rng.uniform(0.0, 0.2) if attempt == 0 else rng.uniform(0.0, 1.5)
            time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        kills.append((round(delay, 2), n_final(published(bootstrap_servers, out))))
    assert any(published_ < n_expected for _, published_ in kills), kills  # killed mid-stream
    run_until_final(cmd, bootstrap_servers, out, n_expected)
    compare_finals(published(bootstrap_servers, out), pipeline_config(), preds, labels, exact=False)
