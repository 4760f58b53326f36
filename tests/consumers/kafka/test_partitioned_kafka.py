"""``consume --partitioning any`` against the embedded broker: predictions keyed by id over 6
partitions (every key on every partition), delayed labels on a co-partitioned labels topic, three
``consume`` processes on separate state dirs, SIGKILLs (one with its state dir wiped), an instance
added and one removed (SIGTERM) while traffic flows: every final window equals scikit-learn on its
labelled events, and a window's final snapshot is the same bytes whoever published it."""
from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import threading
import time
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score
from test_service import consume_cmd, stop, wait_for

PARTITIONS = 6
WINDOW, GRACE = 60, 5


def data(n: int, seed: int) -> tuple[list[list[dict]], list[list[dict]], dict[tuple[str, int], list]]:
    """Predictions (half labelled inline, half by a later label event) per partition of their id,
    in event-time order with jitter under the grace; a far-ahead closer on every partition; and the
    labelled (y, score) rows of each (segment, window start)."""
    rng = random.Random(seed)
    base = (int(time.time()) - 86_400) // WINDOW * WINDOW
    preds: list[list[dict]] = [[] for _ in range(PARTITIONS)]
    labels: list[list[dict]] = [[] for _ in range(PARTITIONS)]
    truth: dict[tuple[str, int], list] = defaultdict(list)
    span = 8 * WINDOW
    for i in range(n):
        ident = f"id-{i}"
        p = zlib.crc32(ident.encode()) % PARTITIONS
        ts = base + i * span / n + rng.uniform(0, 2)
        y = int(rng.random() < 0.4)
        score = round(min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.0), 1.0), 3)
        seg = rng.choice("ab")
        pred = {"ts": round(ts, 3), "model": "m", "segment": seg, "score": score, "id": ident}
        if rng.random() < 0.5:
            preds[p].append({**pred, "y_true": y})
        else:
            preds[p].append(pred)
            labels[p].append({"id": ident, "y_true": y, "ts": round(ts + rng.uniform(1, 40), 3)})
        truth[(seg, int(ts // WINDOW * WINDOW))].append((y, score))
    for p in range(PARTITIONS):
        preds[p].append({"ts": base + span + 10 * WINDOW, "model": "closer", "y_true": 1, "score": 0.5,
                         "id": f"closer-{p}"})
        labels[p].sort(key=lambda e: e["ts"])
    return preds, labels, truth


def produce_slowly(producer: Any, topic: str, labels_topic: str, preds: list[list[dict]], labels: list[list[dict]],
                   seconds: float) -> None:
    """Each partition's records in order, spread over ``seconds`` of wall time."""
    steps = 40
    for step in range(steps):
        for p in range(PARTITIONS):
            for side, name in ((preds[p], topic), (labels[p], labels_topic)):
                lo, hi = len(side) * step // steps, len(side) * (step + 1) // steps
                for ev in side[lo:hi]:
                    producer.send(name, key=str(ev["id"]).encode(), value=json.dumps(ev).encode(), partition=p)
        producer.flush()
        time.sleep(seconds / steps)


def read_all(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` up to the high watermarks (tansu's end_offsets can be short)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=300)
            for records in got.values():
                out.extend(records)
            if not got and all(consumer.highwater(tp) is not None and consumer.position(tp) >= consumer.highwater(tp)
                               for tp in tps):
                break
        return out
    finally:
        consumer.close()


def settled(logs: Path, started: dict[str, float]) -> bool:
    """Both groups are stable: every live instance holds input and partials partitions assigned
    since its start, and nobody's source partitions moved in the last 2 s. (tansu stalls a group
    for 45 s or more when a member leaves it mid-rebalance, see consumers/NOTES.md; real Kafka
    does not, but the test must not wait for that.)"""
    last_change = 0.0
    for name, since in started.items():
        holds = merges = False
        for line in (logs / f"{name}.log").read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec["ts"] < since:
                continue
            msg = rec["msg"]
            if msg.startswith(("assigned ", "revoked ")):
                holds = msg.startswith("assigned ")
                last_change = max(last_change, rec["ts"])
            elif msg.startswith("merge: assigned"):
                merges = True
        if not (holds and merges):
            return False
    return time.time() - last_change > 2.0


def finals(bootstrap: str, out: str) -> dict[str, dict]:
    last: dict[str, dict] = {}
    for rec in read_all(bootstrap, out):
        last[rec.key.decode()] = json.loads(rec.value)
    return {k: v for k, v in last.items() if v["final"] and v["key"]["model"] == "m"}


@pytest.mark.slow
def test_any_partitioning_three_instances_kills_join_and_leave_equal_sklearn(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path):
    preds, labels, truth = data(6000, seed=31)
    topic, labels_topic, out, dlq = new_topic(PARTITIONS), new_topic(PARTITIONS), new_topic(1), new_topic(1)
    group = unique_name("any")
    logs = tmp_path / "logs"
    logs.mkdir()

    def cmd(name: str) -> list[str]:
        return consume_cmd(bootstrap_servers, topic, out, group, str(tmp_path / name), "--partitioning", "any",
                           "--labels-topic", labels_topic, "--grace", f"{GRACE}s", "--dlq-topic", dlq,
                           "--checkpoint-interval", "0.3s", "--max-poll-records", "200")

    procs: dict[str, subprocess.Popen] = {}
    started: dict[str, float] = {}

    def start(name: str) -> None:
        log = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        started[name] = time.time()
        procs[name] = subprocess.Popen(cmd(name), stdout=log, stderr=subprocess.STDOUT)

    for name in ("a", "b", "c"):
        start(name)
    feeder = threading.Thread(target=produce_slowly, args=(make_producer(linger_ms=20), topic, labels_topic, preds,
                                                         labels, 30.0))
    feeder.start()
    events: list[str] = []
    try:
        time.sleep(8)
        procs["a"].send_signal(signal.SIGKILL)  # crash, disk lost
        procs["a"].wait(10)
        shutil.rmtree(tmp_path / "a", ignore_errors=True)
        events.append("kill a, wipe")
        start("a")
        time.sleep(5)
        start("d")  # an instance added
        events.append("add d")
        time.sleep(4)
        procs["b"].send_signal(signal.SIGKILL)  # crash, disk kept
        procs["b"].wait(10)
        events.append("kill b")
        start("b")
        # generous waits: tansu can stall a group for 47 s or more around a rebalance (consumers/NOTES.md)
        wait_for(lambda: settled(logs, started), 150, "a stable group before an instance leaves")
        stop(procs.pop("c"))  # an instance removed
        del started["c"]
        events.append("stop c")
        feeder.join()
        time.sleep(2)
        procs["a"].send_signal(signal.SIGKILL)  # one more crash after the traffic, disk lost
        procs["a"].wait(10)
        shutil.rmtree(tmp_path / "a", ignore_errors=True)
        start("a")
        events.append("kill a, wipe")
        wait_for(lambda: len(finals(bootstrap_servers, out)) >= len(truth)
                 or any(p.poll() is not None for p in procs.values()), 180, "every final window")
        assert all(p.poll() is None for p in procs.values()), {n: p.returncode for n, p in procs.items()}
        wait_for(lambda: settled(logs, started), 150, "the last instance in both groups before the stop")
    finally:
        feeder.join()
        for proc in procs.values():
            stop(proc)
        for proc in procs.values():
            proc.wait(10)
    assert "Traceback" not in (logs / "c.log").read_text(), (logs / "c.log").read_text()[-3000:]
    assert all(p.returncode == 0 for p in procs.values()), ({n: p.returncode for n, p in procs.items()},
                                                            (logs / "a.log").read_text()[-3000:])
    records = read_all(bootstrap_servers, out)
    by_key: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        by_key[rec.key.decode()].append(json.loads(rec.value))
    got = finals(bootstrap_servers, out)
    assert len(got) == len(truth), (events, sorted(got), sorted(truth))
    for key, snap in got.items():
        rows = truth[(snap["key"]["segment"], snap["window"]["start"])]
        y, s = [r[0] for r in rows], [r[1] for r in rows]
        pred = [int(v >= 0.5) for v in s]
        assert snap["count"] == len(rows) == snap["labeled"] and snap["late"] == 0, (key, snap["count"], len(rows))
        m = snap["metrics"]
        assert m["accuracy"] == pytest.approx(accuracy_score(y, pred), abs=1e-12)
        assert m["precision"] == pytest.approx(precision_score(y, pred, zero_division=0), abs=1e-12)
        assert m["recall"] == pytest.approx(recall_score(y, pred, zero_division=0), abs=1e-12)
        assert m["f1"] == pytest.approx(f1_score(y, pred, zero_division=0), abs=1e-12)
        assert m["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        # re-publication is idempotent: every final snapshot of a window is the same
        assert len({json.dumps(x, sort_keys=True) for x in by_key[key] if x["final"]}) == 1, key
    partials = [json.loads(r.value) for r in read_all(bootstrap_servers, f"{group}-{topic}-partials")]
    assert any(r.get("snapshot", {}).get("revision", 0) > 0 for r in partials)  # labels after a partial closed
    assert not read_all(bootstrap_servers, dlq)  # nothing late, nothing refused
    assert Path(tmp_path / "d").exists()
