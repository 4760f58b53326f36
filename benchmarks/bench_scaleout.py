"""Scale-out of ``streammetrics consume``: throughput with 1, 2 and 3 ``--partitioning any``
instances against one ``--partitioning key`` instance in the same run, and restore time against
state size.

    python benchmarks/bench_scaleout.py [--events 300000] [--batch 100] [--quick]

Starts an embedded tansu broker and fills two 6-partition topics with the same events (12 keys,
ten 60 s windows, JSON arrays of ``--batch`` events): ``key`` holds each (model, segment) in one
partition (message key ``model|segment``), ``any`` spreads every key over every partition (as
keying by prediction id does). Then, for each configuration, it starts the ``consume`` processes
(separate state dirs, changelog topics on, ``--idle-close 0``) and waits until every window's
final snapshot is on the output topic. Reported per configuration:

* **events/s**: events over the time from the first partition assignment (JSON log line of any
  process) to the broker timestamp of the last final snapshot; it includes the rest of the
  group's join rounds (tansu needs 3-6 s per round, see consumers/NOTES.md), the merge stage's
  delay (one checkpoint interval for the watermarks) and, on a shared 2-core machine, every
  other process's load;
* **events per CPU-second**: events over the user + system CPU of all the instances (wait4
  rusage), start-up included: what the configuration costs, whatever the machine's load.

Restore: a pipeline checkpoint of about 10 kB, 100 kB, 1 MB and 10 MB (open windows of more and
more keys) is written to a changelog topic (chunked under ``max_request_size``) and restored the
way an assignment does: a fresh changelog reader reads it back from the end (``read``), then the
checkpoint is decoded and loaded into a new pipeline (``load``). Best of 3.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consumers.broker import EmbeddedBroker, create_topics  # noqa: E402
from consumers.changelog import Changelog, KafkaChangelogReader  # noqa: E402
from consumers.checkpoint import CheckpointStore  # noqa: E402
from consumers.service import ServiceConfig  # noqa: E402
from streammetrics.stream.pipeline import Pipeline  # noqa: E402

PARTITIONS = 6
WINDOW = 60
KEYS = [(f"m{i}", seg) for i in range(6) for seg in ("a", "b")]


def make_events(n: int, seed: int = 5) -> tuple[list[dict], int]:
    """``n`` labelled events over ten windows, in time order; and the number of (key, window)s."""
    rng = random.Random(seed)
    base = (int(time.time()) - 86_400) // WINDOW * WINDOW
    out, windows = [], set()
    for i in range(n):
        model, seg = KEYS[rng.randrange(len(KEYS))]
        ts = base + i * 10 * WINDOW / n
        y = int(rng.random() < 0.4)
        out.append({"ts": round(ts, 3), "model": model, "segment": seg, "y_true": y,
                    "score": round(min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.0), 1.0), 4), "id": f"p{i}"})
        windows.add((model, seg, int(ts // WINDOW)))
    return out, len(windows)


def fill(bootstrap: str, key_topic: str, any_topic: str, events: list[dict], batch: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20,
                             max_request_size=8 << 20)
    closer_ts = events[-1]["ts"] + 20 * WINDOW
    # any: consecutive arrays round-robin over the partitions, every key everywhere
    for i in range(0, len(events), batch):
        producer.send(any_topic, value=json.dumps(events[i:i + batch]).encode(), partition=(i // batch) % PARTITIONS)
    for p in range(PARTITIONS):
        closer = {"ts": closer_ts, "model": "closer", "y_true": 1, "score": 0.5}
        producer.send(any_topic, value=json.dumps(closer).encode(), partition=p)
    # key: each key's events in arrays on the partition of its key, then a closer per key
    for model, seg in KEYS:
        mine = [e for e in events if e["model"] == model and e["segment"] == seg]
        mine.append({"ts": closer_ts, "model": model, "segment": seg, "y_true": 1, "score": 0.5})
        key = f"{model}|{seg}".encode()
        part = zlib.crc32(key) % PARTITIONS
        for i in range(0, len(mine), batch):
            producer.send(key_topic, key=key, value=json.dumps(mine[i:i + batch]).encode(), partition=part)
    producer.flush()
    producer.close()


class OutputWatcher:
    """Reads the output topic as it grows: final windows (not the closers') and the latest
    broker timestamp among them."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        tp = TopicPartition(topic, 0)
        self.consumer.assign([tp])
        self.consumer.seek_to_beginning(tp)
        self.finals: set[bytes] = set()
        self.last_ms = 0

    def poll(self) -> int:
        for records in self.consumer.poll(timeout_ms=500).values():
            for rec in records:
                snap = json.loads(rec.value)
                if snap.get("final") and snap["key"]["model"] != "closer":
                    self.finals.add(rec.key)
                    self.last_ms = max(self.last_ms, rec.timestamp)
        return len(self.finals)

    def close(self) -> None:
        self.consumer.close()


def run_instances(bootstrap: str, topic: str, mode: str, instances: int, windows: int, events: int,
                  timeout: float) -> dict[str, Any]:
    tag = f"{mode}{instances}-{os.urandom(3).hex()}"
    out = f"out-{tag}"
    create_topics(bootstrap, {out: 1})
    group = f"bench-{tag}"
    with tempfile.TemporaryDirectory() as tmp:
        procs, logs = [], []
        for i in range(instances):
            log_path = Path(tmp) / f"{i}.log"
            logs.append(log_path)
            cmd = [sys.executable, "-m", "streammetrics.cli", "consume", "--bootstrap-servers", bootstrap,
                   "--topic", topic, "--output-topic", out, "--group-id", group, "--state-dir", f"{tmp}/s{i}",
                   "--idle-close", "0", "--window", f"{WINDOW}s", "--partitioning", mode, "--log-level", "INFO",
                   "--no-state"]
            with open(log_path, "wb") as fh:
                procs.append(subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
                                              env={**os.environ, "PYTHONPATH": str(ROOT)}))
        watcher = OutputWatcher(bootstrap, out)
        deadline = time.monotonic() + timeout
        try:
            while watcher.poll() < windows and time.monotonic() < deadline:
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError(f"an instance exited: {[p.returncode for p in procs]}: "
                                       f"{logs[0].read_text()[-2000:]}")
        finally:
            cpu = 0.0
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                _, status, usage = os.wait4(p.pid, 0)
                p.returncode = os.waitstatus_to_exitcode(status)
                cpu += usage.ru_utime + usage.ru_stime
            watcher.close()
        if len(watcher.finals) < windows:
            raise RuntimeError(f"{mode} x{instances}: {len(watcher.finals)} of {windows} windows in {timeout:g} s")
        first = min(json.loads(line)["ts"] for path in logs for line in path.read_text().splitlines()
                    if line.startswith("{") and '"msg": "assigned ' in line)
    seconds = watcher.last_ms / 1000 - first
    return {"mode": mode, "instances": instances, "seconds": seconds, "events_per_s": events / seconds,
            "cpu_s": cpu, "events_per_cpu_s": events / cpu}


def state_of_size(target: int) -> tuple[Pipeline, bytes]:
    """A pipeline whose checkpoint is about ``target`` bytes (open windows of more and more keys)."""
    config = ServiceConfig(bootstrap_servers="-", topic="t", output_topic="o", idle_close=None)
    codec = CheckpointStore(None, "g", "t", config.window_settings())
    rng = random.Random(1)
    base = (int(time.time()) - 3600) // WINDOW * WINDOW
    pipe = Pipeline(config.pipeline_config())
    keys = size = 0
    per_key = None
    while True:
        add = 1 if per_key is None else max(1, int((target - size) / per_key))
        for k in range(keys, keys + add):
            events = [{"ts": base + rng.uniform(0, 50), "model": f"model-{k}", "segment": "s",
                       "y_true": rng.random() < 0.4, "score": round(rng.random(), 4)} for _ in range(60)]
            pipe.process(json.dumps(events))
        keys += add
        payload = codec.encode(0, 1, pipe.to_dict())
        size = len(payload)
        per_key = size / keys
        if size >= target * 0.95:
            return pipe, payload


def restore_times(bootstrap: str, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    from kafka import KafkaProducer

    config = ServiceConfig(bootstrap_servers="-", topic="t", output_topic="o", idle_close=None)
    codec = CheckpointStore(None, "g", "t", config.window_settings())
    rows = []
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for target in sizes:
        _, payload = state_of_size(target)
        topic = f"changelog-{target}-{os.urandom(3).hex()}"
        create_topics(bootstrap, {topic: 1})
        writer = Changelog(producer, topic, lambda p, n: ([], True), producer.config["max_request_size"])
        for _ in range(3):  # a few checkpoints before the latest, as in a running service
            writer.write(0, payload, 1, None)
        producer.flush()
        best_read = best_load = float("inf")
        for _ in range(repeat):
            reader = KafkaChangelogReader(topic, bootstrap_servers=bootstrap)
            t0 = time.perf_counter()
            raw = Changelog(producer, topic, reader, producer.config["max_request_size"]).restore(0)
            t1 = time.perf_counter()
            assert raw == payload
            saved = codec.decode(0, raw)
            Pipeline(config.pipeline_config()).load_dict(saved["windows"])
            t2 = time.perf_counter()
            reader.close()
            best_read, best_load = min(best_read, t1 - t0), min(best_load, t2 - t1)
        rows.append({"bytes": len(payload), "chunks": -(-len(payload) // writer.chunk_bytes), "read_s": best_read,
                     "load_s": best_load})
    producer.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--quick", action="store_true", help="60k events, restore up to 1 MB")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.events = 60_000
    sizes = [10_000, 100_000, 1_000_000] + ([] if args.quick else [10_000_000])
    with EmbeddedBroker(host="127.0.0.1") as broker:
        bootstrap = broker.bootstrap_servers
        if not args.skip_throughput:
            events, windows = make_events(args.events)
            key_topic, any_topic = "in-key", "in-any"
            create_topics(bootstrap, {key_topic: PARTITIONS, any_topic: PARTITIONS})
            t0 = time.perf_counter()
            fill(bootstrap, key_topic, any_topic, events, args.batch)
            print(f"{args.events} events ({windows} windows, 12 keys) in arrays of {args.batch} on two "
                  f"{PARTITIONS}-partition topics, filled in {time.perf_counter() - t0:.1f} s")
            print(f"{'mode':<6} {'instances':>9} {'seconds':>8} {'events/s':>10} {'CPU s':>7} {'events/CPU-s':>13}")
            for mode, n in (("key", 1), ("any", 1), ("any", 2), ("any", 3)):
                r = run_instances(bootstrap, key_topic if mode == "key" else any_topic, mode, n, windows,
                                  args.events, args.timeout)
                print(f"{r['mode']:<6} {r['instances']:>9} {r['seconds']:>8.2f} {r['events_per_s']:>10,.0f} "
                      f"{r['cpu_s']:>7.2f} {r['events_per_cpu_s']:>13,.0f}", flush=True)
        print(f"\n{'checkpoint bytes':>16} {'chunks':>6} {'read s':>8} {'load s':>8} {'total s':>8}")
        for row in restore_times(bootstrap, sizes, repeat=3):
            print(f"{row['bytes']:>16,} {row['chunks']:>6} {row['read_s']:>8.3f} {row['load_s']:>8.3f} "
                  f"{row['read_s'] + row['load_s']:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
