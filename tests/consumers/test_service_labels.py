"""``consume --labels-topic``: delayed labels from a second, co-partitioned topic, merged with the
predictions by event time per partition; the published windows equal ``replay PRED --labels LAB``
on each partition's data (in-memory Kafka fakes; the broker version is in tests/consumers/kafka)."""
from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, Faults, ManualClock

from consumers.service import MetricsService, ServiceConfig
from streammetrics.stream.label_replay import replay_merged
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import ReplayStats
from streammetrics.stream.synthetic import generate_events

WINDOW = 60.0
TTL = 2 * WINDOW


def delayed_data(n: int = 900, seed: int = 11, partitions: int = 2) -> tuple[list[list[dict]], list[list[dict]]]:
    """Per partition: predictions without ``y_true`` (each model on one partition, as the service
    needs today), and their label events (delay 0-3 windows, 15% never labelled, a few labels for
    unknown ids, one duplicate), each list in ``ts`` order; closers (labelled predictions 10
    windows after the end) expire what is left and close every window."""
    rng = random.Random(seed)
    events = list(generate_events(n, duration=6 * WINDOW, seed=seed))
    models = sorted({e["model"] for e in events})
    preds: list[list[dict]] = [[] for _ in range(partitions)]
    labels: list[list[dict]] = [[] for _ in range(partitions)]
    for i, ev in enumerate(events):
        p = models.index(ev["model"]) % partitions
        pred = {k: v for k, v in ev.items() if k != "y_true"}
        pred["id"] = f"id{i}"
        preds[p].append(pred)
        if rng.random() < 0.85:
            labels[p].append({"id": pred["id"], "y_true": ev["y_true"], "ts": ev["ts"] + rng.uniform(0, 3 * WINDOW)})
        if i % 97 == 0:
            labels[p].append({"id": f"nobody{i}", "y_true": 1, "ts": ev["ts"] + 1.0})
    labels[0].append(dict(labels[0][0], ts=labels[0][0]["ts"] + 2.0))  # duplicate: rejected, changes nothing
    last = max(e["ts"] for e in events)
    for ev in events:
        p = models.index(ev["model"]) % partitions
        closer = {"ts": last + 10 * WINDOW, "model": ev["model"], "segment": ev["segment"], "y_true": 0,
                  "score": 0.5}
        if closer not in preds[p]:
            preds[p].append(closer)
    for side in preds + labels:
        side.sort(key=lambda e: e["ts"])
    return preds, labels


def fill(cluster: FakeCluster, preds: list[list[dict]], labels: list[list[dict]]) -> None:
    cluster.create("in", len(preds))
    cluster.create("labels", len(labels))
    cluster.create("out", 1)
    cluster.create("dlq", 1)
    for p, evs in enumerate(preds):
        for ev in evs:
            cluster.append("in", json.dumps(ev).encode(), key=str(ev.get("id")).encode(), partition=p)
    for p, evs in enumerate(labels):
        for ev in evs:
            cluster.append("labels", json.dumps(ev).encode(), key=ev["id"].encode(), partition=p)


def make_service(cluster: FakeCluster, state_dir: Path | None, faults: Faults | None = None,
                 **options: Any) -> MetricsService:
    # predictions keyed by id yet each model on one partition (a producer's own partitioner): key-unchecked
    settings: dict[str, Any] = {"idle_close": None, "checkpoint_interval": 0.0, "max_poll_records": 40,
                                "window": WINDOW, "max_future": None, "labels_topic": "labels", "label_ttl": TTL,
                                "key_check": False}
    settings.update(options)
    config = ServiceConfig(bootstrap_servers="fake:9092", topic="in", output_topic="out", dlq_topic="dlq",
                           state_dir=None if state_dir is None else str(state_dir), **settings)
    faults = faults or Faults()
    return MetricsService(config, FakeConsumer(cluster, config.group_id, faults=faults),
                          FakeProducer(cluster, faults=faults), clock=ManualClock(), listener=FakeListener)


def drain(service: MetricsService, max_polls: int = 20_000, stop_after: int | None = None) -> None:
    """Poll until every partition is read to its end and nothing is left to merge (or, with
    ``stop_after``, that many polls: a crash, nothing closed or checkpointed after it)."""
    service.start()
    for n in range(max_polls):
        service.poll_once(timeout_ms=0)
        if stop_after is not None and n + 1 >= stop_after:
            return
        consumer = service.consumer
        if all(consumer.positions[tp] >= consumer.highwater(tp) for tp in consumer.assigned) and all(
                not (part.preds and part.preds.buffer) and not (part.labels and part.labels.buffer)
                for part in service.partitions.values()):
            break
    service.checkpoint()
    service.close()


def replay_finals(config: PipelineConfig, preds: list[list[dict]], labels: list[list[dict]]) -> dict[str, dict]:
    """``replay PRED --labels LAB`` of each partition's data with the service's pipeline settings:
    snapshot key -> its last (final) snapshot."""
    out: dict[str, dict] = {}
    for p in range(len(preds)):
        pipeline = Pipeline(config)
        lines: list[str] = []
        sources = [("pred", [json.dumps(e).encode() for e in preds[p]]),
                   ("labels", [json.dumps(e).encode() for e in labels[p]])]
        replay_merged(sources, pipeline, lines.append, ReplayStats(), lambda where, problem: None)
        for line in lines:
            snap = json.loads(line)
            out[f"{snap['key']['model']}|{snap['key']['segment']}|{int(snap['window']['start'])}"] = snap
    return {k: v for k, v in out.items() if v["final"]}


def published(cluster: FakeCluster) -> dict[str, list[dict]]:
    """Kafka key -> every snapshot published under it, in order."""
    out: dict[str, list[dict]] = defaultdict(list)
    for rec in cluster.records("out"):
        out[rec.key.decode()].append(json.loads(rec.value))
    return out


def without_revision(snap: dict) -> dict:
    return {k: v for k, v in snap.items() if k != "revision"}


def same(a: Any, b: Any, exact: bool) -> bool:
    """Equal JSON values; floats within 1e-12 (relative) unless ``exact``. A restart needs the
    tolerance: ``BinaryScores.to_dict`` stores its log-loss sum as one float while the live monitor
    keeps a running product (mantissa, exponent), so a window revised by labels after a checkpoint
    round trip can differ from an uninterrupted one in the last bit of ``log_loss``."""
    if isinstance(a, float) and isinstance(b, float) and not exact:
        return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], exact) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, exact) for x, y in zip(a, b))
    return bool(a == b) and type(a) is type(b)


def check_equals_replay(cluster: FakeCluster, service: MetricsService, preds: list[list[dict]],
                        labels: list[list[dict]], exact: bool = True) -> dict[str, list[dict]]:
    return compare_finals(published(cluster), service.config.pipeline_config(), preds, labels, exact)


def compare_finals(pub: dict[str, list[dict]], config: PipelineConfig, preds: list[list[dict]],
                   labels: list[list[dict]], exact: bool = True) -> dict[str, list[dict]]:
    """Every window whose last published snapshot is final equals replay's final one (revision
    numbers aside: the service publishes more intermediate revisions), and every window replay
    finalises except the closers' (still open in the service) is final in ``pub``."""
    expected = replay_finals(config, preds, labels)
    closer_start = int(max(e["ts"] for side in preds for e in side) // WINDOW * WINDOW)
    expected = {k: v for k, v in expected.items() if not k.endswith(f"|{closer_start}")}  # still open in the service
    finals = {k: snaps[-1] for k, snaps in pub.items() if snaps[-1]["final"]}
    assert sorted(finals) == sorted(expected)
    assert len(expected) >= 10
    for key, snap in finals.items():
        assert same(without_revision(snap), without_revision(expected[key]), exact), key
    return pub


def test_labels_topic_equals_replay_per_partition(tmp_path: Path) -> None:
    preds, labels = delayed_data()
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    service = make_service(cluster, tmp_path)
    drain(service)
    pub = check_equals_replay(cluster, service, preds, labels)
    # revisions: same Kafka key, revision 0 not final, later revisions counted up to the final one
    revised = [snaps for snaps in pub.values() if len(snaps) > 1]
    assert revised
    for snaps in revised:
        assert [s["revision"] for s in snaps] == sorted(s["revision"] for s in snaps)
        assert snaps[0]["revision"] == 0 and not snaps[0]["final"]
        assert all(not s["final"] for s in snaps[:-1])
    assert any(s["labeled"] < s["count"] and s["expired"] > 0 for s in (snaps[-1] for snaps in pub.values()))
    # the duplicate label and the labels of unknown ids were dead-lettered or reported, never applied twice
    codes = [dict(rec.headers)["streammetrics.code"] for rec in cluster.records("dlq")]
    assert b"duplicate" in codes
    # checkpoints hold both offsets, and the group has both committed
    saved = service.codec.load(0)  # the full checkpoint file and its deltas
    assert saved is not None and (tmp_path / "streammetrics" / "in" / "0.json").exists()
    assert saved["offset"] == len(cluster.topics["in"][0]) and saved["label_offset"] == len(cluster.topics["labels"][0])
    assert saved["windows"]["labels"]["join"]
    committed = {tp.topic for (_, tp) in cluster.committed}
    assert committed == {"in", "labels"}


@pytest.mark.parametrize("crash_after", [3, 17, 41])
def test_crash_and_restart_equals_replay(tmp_path: Path, crash_after: int) -> None:
    """A service stopped dead after N polls (no clean stop) and a new one from the checkpoints:
    the last snapshot per key equals replay, every final window's content is re-published identically."""
    preds, labels = delayed_data(seed=3)
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    first = make_service(cluster, tmp_path, checkpoint_interval=1e9)  # never on its own: checkpoint by hand
    first.start()
    for n in range(crash_after):
        first.poll_once(timeout_ms=0)
        if n % 5 == 4:
            first.checkpoint()
    # crash: no checkpoint, no close; the second instance resumes from the checkpoint files
    second = make_service(cluster, tmp_path)
    drain(second)
    check_equals_replay(cluster, second, preds, labels, exact=False)


def test_rollback_after_an_exception_rereads_both_topics(tmp_path: Path) -> None:
    preds, labels = delayed_data(seed=5)
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    service = make_service(cluster, tmp_path)
    original = Pipeline.process
    calls = {"n": 0}

    def flaky(self: Pipeline, value: Any) -> Any:
        calls["n"] += 1
        if calls["n"] in (150, 400):
            raise RuntimeError("injected")
        return original(self, value)

    Pipeline.process = flaky  # type: ignore[method-assign]  # restored below
    try:
        drain(service)
    finally:
        Pipeline.process = original  # type: ignore[method-assign]
    assert service.counts["rollbacks"] == 2
    check_equals_replay(cluster, service, preds, labels, exact=False)


def test_merge_buffer_bound_pauses_and_stays_exact(tmp_path: Path) -> None:
    """A tiny ``max_merge_buffer``: the side that runs ahead is paused (counted), results unchanged."""
    preds, labels = delayed_data(seed=9)
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    service = make_service(cluster, None, max_merge_buffer=8, max_poll_records=200)
    drain(service)
    assert service.counts["merge_pauses"] > 0
    assert not service.consumer.paused
    check_equals_replay(cluster, service, preds, labels)


def test_labels_topic_with_other_partition_count_stops_with_status_2(tmp_path: Path) -> None:
    preds, labels = delayed_data(n=100)
    cluster = FakeCluster()
    fill(cluster, preds, labels + [[]])  # labels topic with 3 partitions, predictions with 2
    service = make_service(cluster, tmp_path)
    service.start()
    service.poll_once(timeout_ms=0)
    assert service.exit_status == 2 and "same number of partitions" in (service.failure or "")


def test_checkpoint_without_labels_topic_is_refused_with_it(tmp_path: Path) -> None:
    preds, labels = delayed_data(n=100)
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    drain(make_service(cluster, tmp_path, labels_topic=None))
    service = make_service(cluster, tmp_path)
    service.start()
    service.poll_once(timeout_ms=0)
    assert service.exit_status == 2 and "labels_topic" in (service.failure or "")
