"""MetricsService with in-memory Kafka fakes (no broker): windows, batching, checkpoints,
rebalances and restarts. The same scenarios against tansu live in tests/consumers/kafka."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, Faults, ManualClock, TopicPartition

from consumers.service import MetricsService, ServiceConfig
from streammetrics.stream.synthetic import generate_events

WINDOW = 60


def events_with_closers(n: int = 1200, seed: int = 5, duration: float = 6 * WINDOW) -> list[dict]:
    events = list(generate_events(n, duration=duration, seed=seed))
    last = max(e["ts"] for e in events)
    keys = sorted({(e["model"], e["segment"]) for e in events})
    return events + [{"ts": last + 10 * WINDOW, "model": m, "segment": s, "y_true": 0, "score": 0.5}
                     for m, s in keys]


def fill(cluster: FakeCluster, events: list[dict], partitions: int = 2, per_message: int = 1) -> None:
    cluster.create("in", partitions)
    cluster.create("out", 1)
    cluster.create("dlq", 1)
    by_key: dict[str, list[dict]] = defaultdict(list)
    for ev in events:
        by_key[f"{ev['model']}|{ev['segment']}"].append(ev)
    chunks: list[tuple[float, str, list[dict]]] = []
    for ev_key, evs in sorted(by_key.items()):
        chunk: list[dict] = []
        for ev in sorted(evs, key=lambda e: e["ts"]):  # messages of up to per_message events of one window
            if chunk and (len(chunk) == per_message or ev["ts"] // WINDOW != chunk[0]["ts"] // WINDOW):
                chunks.append((chunk[-1]["ts"], ev_key, chunk))
                chunk = []
            chunk.append(ev)
        if chunk:
            chunks.append((chunk[-1]["ts"], ev_key, chunk))
    # in time order, as a producer sends them (each partition has one watermark for all its keys):
    # every message of a window before any message with a later window's event
    for _, ev_key, chunk in sorted(chunks, key=lambda c: c[0]):
        value = json.dumps(chunk[0] if per_message == 1 else chunk).encode()
        cluster.append("in", value, key=ev_key.encode())


def make_service(cluster: FakeCluster, state_dir: Path | None, faults: Faults | None = None,
                 clock: ManualClock | None = None, **options: Any) -> MetricsService:
    settings: dict[str, Any] = {"idle_close": None, "checkpoint_interval": 0.0, "max_poll_records": 50,
                                "window": WINDOW, "max_future": None}
    settings.update(options)
    settings = {k: v for k, v in settings.items() if k in ServiceConfig.__dataclass_fields__}
    config = ServiceConfig(bootstrap_servers="fake:9092", topic="in", output_topic="out", dlq_topic="dlq",
                           state_dir=None if state_dir is None else str(state_dir), **settings)
    faults = faults or Faults()
    consumer = FakeConsumer(cluster, config.group_id, faults=faults)
    return MetricsService(config, consumer, FakeProducer(cluster, faults=faults), clock=clock or ManualClock(),
                          listener=FakeListener)


def drain(service: MetricsService, max_polls: int = 10_000) -> None:
    """Poll until a poll applies nothing and every partition is read to its end; then stop."""
    service.start()
    for _ in range(max_polls):
        applied = service.poll_once(timeout_ms=0)
        if applied == 0 and all(service.consumer.positions[tp] >= service.consumer.highwater(tp)
                                for tp in service.consumer.assigned):
            break
    service.checkpoint()
    service.close()


def final_snapshots(cluster: FakeCluster) -> dict[str, bytes]:
    """Snapshot key -> value, checking that every re-publication of a key is byte-identical."""
    out: dict[str, bytes] = {}
    for rec in cluster.records("out"):
        key = rec.key.decode()
        assert out.setdefault(key, rec.value) == rec.value, key
    return out


def expected_counts(events: list[dict]) -> Counter:
    closers = events[-len({(e['model'], e['segment']) for e in events}):]
    return Counter(f"{e['model']}|{e['segment']}|{int(e['ts'] // WINDOW * WINDOW)}" for e in events
                   if e not in closers)


def counts(snapshots: dict[str, bytes]) -> Counter:
    return Counter({key: json.loads(value)["count"] for key, value in snapshots.items()})


def reference(events: list[dict], tmp_path: Path, **options: Any) -> dict[str, bytes]:
    cluster = FakeCluster()
    fill(cluster, events, **{k: v for k, v in options.items() if k in ("partitions", "per_message")})
    drain(make_service(cluster, tmp_path / "reference"))
    return final_snapshots(cluster)


# ----------------------------------------------------------------------------- tests
def test_each_window_counts_each_event_once(tmp_path):
    events = events_with_closers()
    cluster = FakeCluster()
    fill(cluster, events)
    drain(make_service(cluster, tmp_path))
    snaps = final_snapshots(cluster)
    assert counts(snaps) == expected_counts(events)
    assert cluster.records("dlq") == []


def test_checkpoints_follow_the_interval_and_hold_offset_and_windows(tmp_path):
    events = events_with_closers(300)
    cluster = FakeCluster()
    fill(cluster, events, partitions=1)
    clock = ManualClock()
    service = make_service(cluster, tmp_path, clock=clock, checkpoint_interval=5.0, max_poll_records=100)
    service.start()
    service.poll_once(timeout_ms=0)
    [path] = [service.store.path(0)]
    assert not Path(path).exists()  # interval not reached
    clock.now += 5
    service.poll_once(timeout_ms=0)
    saved = json.loads(Path(path).read_text())
    assert saved["offset"] == 200 and saved["windows"]["type"] == "Pipeline" and saved["windows"]["windows"]["keys"]
    assert cluster.committed[("streammetrics", TopicPartition("in", 0))] == 200
    service.close()


def test_a_restart_from_the_checkpoint_republishes_identical_snapshots(tmp_path):
    events = events_with_closers()
    ref = reference(events, tmp_path)
    cluster = FakeCluster()
    fill(cluster, events)
    first = make_service(cluster, tmp_path / "s")
    first.start()
    for _ in range(7):
        first.poll_once(timeout_ms=0)
    first.close()  # revocation on close checkpoints what was applied
    drain(make_service(cluster, tmp_path / "s"))
    assert final_snapshots(cluster) == ref


def test_a_partition_moved_to_another_member_continues_from_its_checkpoint(tmp_path):
    events = events_with_closers()
    ref = reference(events, tmp_path)
    cluster = FakeCluster()
    fill(cluster, events)
    a = make_service(cluster, tmp_path / "s")
    a.start()
    for _ in range(5):
        a.poll_once(timeout_ms=0)
    p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    a.consumer.rebalance([p0])  # p1 goes to b
    assert set(a.partitions) == {p0}
    b = make_service(cluster, tmp_path / "s")
    b.start()
    b.consumer._pending_assignment = False
    b.consumer.assign([p1])
    assert b.consumer.positions[p1] == b.store.load(1)["offset"]  # the full checkpoint and its deltas
    for _ in range(200):
        a.poll_once(timeout_ms=0)
        b.poll_once(timeout_ms=0)
    for s in (a, b):
        s.checkpoint()
        s.close()
    assert final_snapshots(cluster) == ref


def test_a_checkpoint_is_rewritten_only_when_its_offset_or_state_changed(tmp_path):
    events = [e for e in generate_events(400, duration=2 * WINDOW, seed=4)]  # no closers: windows stay open
    cluster = FakeCluster()
    cluster.create("in", 2)
    cluster.create("out", 1)
    cluster.create("dlq", 1)
    for ev in events:  # partition 1 gets a few events, partition 0 the rest
        cluster.append("in", json.dumps(ev).encode(), partition=int(int(ev["ts"] * 10) % 7 == 0))
    clock = ManualClock()
    service = make_service(cluster, tmp_path, clock=clock, idle_close=30.0, max_poll_records=1000,
                           key_check=False)  # (placed by partition, unkeyed)
    writes: list[int] = []
    write = service.store.write
    service.store.write = lambda partition, payload: (writes.append(partition), write(partition, payload))[1]
    append = service.store.append_delta  # incremental checkpoints: a change after the full one is a delta
    service.store.append_delta = lambda partition, payload: (writes.append(partition), append(partition, payload))[1]
    service.start()
    for _ in range(3):
        service.poll_once(timeout_ms=0)
    assert sorted(writes) == [0, 1]
    published = len(cluster.records("out"))
    for _ in range(5):  # nothing new: the 12 MB checkpoint of the issue was rewritten every second
        clock.now += 1
        service.poll_once(timeout_ms=0)
    assert len(writes) == 2
    clock.now += 31  # everything quiet: no active partition, nothing moves (no wall-clock close)
    service.poll_once(timeout_ms=0)
    assert len(writes) == 2 and len(cluster.records("out")) == published
    last = max(e["ts"] for e in events)
    for k in range(1, 40):  # partition 0 goes on; partition 1 stays quiet
        cluster.append("in", json.dumps({**events[0], "ts": last + k}).encode(), partition=0)
        clock.now += 1
        service.poll_once(timeout_ms=0)
    # partition 1 adopted partition 0's watermark: its state was rewritten without its offset moving,
    # and its windows that watermark passed were published after that checkpoint
    assert service.counts["idle_advances"] >= 1 and 1 in writes[2:]
    assert len(cluster.records("out")) > published
    service.close()


def test_a_far_future_event_is_dead_lettered_with_code_future_and_the_key_goes_on(tmp_path):
    import time

    now = time.time()
    cluster = FakeCluster()
    fill(cluster, [], partitions=1)
    good = [{"ts": now - 300 + i, "model": "m", "segment": "", "y_true": i % 2, "score": 0.5} for i in range(10)]
    future = {"ts": 253402300000, "model": "m", "segment": "", "y_true": 1, "score": 0.5}  # year 9999
    for ev in good[:5] + [future] + good[5:]:
        cluster.append("in", json.dumps(ev).encode(), key=b"m|")
    service = make_service(cluster, tmp_path, max_future=3600.0)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    [letter] = cluster.records("dlq")
    assert dict(letter.headers)["streammetrics.code"] == b"future"
    assert service.counts["events"] == 10 and service.counts["late"] == 0
    assert 'streammetrics_bad_events_total{reason="future"} 1.0' in service.metrics.render().decode()


def test_prometheus_rejection_labels_are_the_pipeline_codes(tmp_path):
    cluster = FakeCluster()
    fill(cluster, [], partitions=1)
    for value in [b"{not json", b'{"ts": 5, "model": "m", "y_true": 1}', b'{"ts": 5, "model": "m", "y_true": 3, '
                  b'"score": 0.5}', None]:
        cluster.append("in", value, key=b"m|")
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    text = service.metrics.render().decode()
    for code in ("invalid_json", "missing_field", "tombstone"):
        assert f'streammetrics_bad_events_total{{reason="{code}"}} 1.0' in text, text
    codes = [dict(r.headers)["streammetrics.code"].decode() for r in cluster.records("dlq")]
    assert codes[0] == "invalid_json" and codes[1] == "missing_field" and codes[3] == "tombstone"
    assert len(codes) == 4


def test_sparse_keys_arriving_in_real_time_lose_nothing_with_the_default_idle_close(tmp_path):
    """Issue 25: one event per 40 s of wall time per key, 5-minute windows, --idle-close 30s (the
    default). A per-key wall-clock idle close shut each key's window after 30 s, so the next event
    of the key, 40 s later, was late (2 of 4 dead-lettered, windows of 1 event). Now only the
    partition's event-time watermark closes windows."""
    cluster = FakeCluster()
    for topic in ("in", "out", "dlq"):
        cluster.create(topic, 1)
    clock = ManualClock()
    service = make_service(cluster, tmp_path, clock=clock, idle_close=30.0, window=300.0)
    service.start()
    t0 = 1_767_225_600
    for i in range(30):
        for k in range(4):
            ev = {"ts": t0 + 40 * i + k, "model": f"m{k}", "segment": "", "y_true": (i + k) % 2, "score": 0.5}
            cluster.append("in", json.dumps(ev).encode(), key=f"m{k}|".encode())
        for _ in range(4):
            clock.now += 10
            service.poll_once(timeout_ms=0)
    for k in range(4):  # closers
        cluster.append("in", json.dumps({"ts": t0 + 3000, "model": f"m{k}", "segment": "", "y_true": 0,
                                         "score": 0.5}).encode(), key=f"m{k}|".encode())
    for _ in range(3):
        clock.now += 1
        service.poll_once(timeout_ms=0)
    service.close()
    snaps = [json.loads(r.value) for r in cluster.records("out")]
    assert cluster.records("dlq") == []
    assert sum(s["count"] for s in snaps) == 120 and all(s["late"] == 0 for s in snaps)
    assert len(snaps) == 4 * 4  # 1200 s: windows 0..3 of each key (t0 is a multiple of 300)


def test_predictions_keyed_by_id_are_refused_before_anything_is_published(tmp_path):
    """Issue 25 / contract section 7: with the default --partitioning key, input keyed by prediction
    id over several partitions published one partial window per partition under the same key
    (1,455 pairs of different snapshots, only a log line). Now the first such record stops the
    service with status 2 and one line, before anything is applied or published."""
    events = events_with_closers(300)
    cluster = FakeCluster()
    for topic, n in (("in", 3), ("out", 1), ("dlq", 1)):
        cluster.create(topic, n)
    for i, ev in enumerate(events):
        cluster.append("in", json.dumps(ev).encode(), key=f"p{i}".encode())
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 2
    assert cluster.records("out") == [] and cluster.records("dlq") == []
    assert "--partitioning any" in (service.failure or "") and "message key b'p" in (service.failure or "")
    # keyed by model|segment, the same events pass; key-unchecked trusts the producer's partitioner
    for option in ({}, {"key_check": False}):
        ok = FakeCluster()
        fill(ok, events, partitions=3)
        drain(make_service(ok, tmp_path / f"ok{len(option)}", **option))
        assert counts(final_snapshots(ok)) == expected_counts(events)


def test_a_key_on_two_partitions_stops_the_service(tmp_path):
    cluster = FakeCluster()
    for topic, n in (("in", 2), ("out", 1), ("dlq", 1)):
        cluster.create(topic, n)
    ev = {"ts": 1_767_225_600, "model": "m", "segment": "", "y_true": 1, "score": 0.5}
    for p in (0, 1):  # the right message key, each on another partition (a custom partitioner gone wrong)
        cluster.append("in", json.dumps(ev).encode(), key=b"m|", partition=p)
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 2 and "seen on partitions" in (service.failure or "")
    assert cluster.records("out") == []


def test_a_failed_batch_handed_back_by_several_bulk_sends_is_counted_once(tmp_path, monkeypatch):
    """The bulk sender hands back its current batch's handle at every send that appends to it: the
    delivery check counts each handle once, and the error says what it counts (sends, not snapshots)."""
    import pytest
    from kafka_fakes import FakeFuture

    from consumers.lean_producer import RecordSender
    from consumers.service import DeliveryError

    batch = FakeFuture()
    batch.is_done, batch.exception = True, RuntimeError("broker said no")
    monkeypatch.setattr(RecordSender, "send_many", lambda self, topic, records: [batch] if records else [])
    cluster = FakeCluster()
    fill(cluster, events_with_closers(), partitions=1)
    service = make_service(cluster, tmp_path / "state", checkpoint_interval=3600.0)
    service.start()
    while service.poll_once(timeout_ms=0):
        pass
    with pytest.raises(DeliveryError, match=r"^1 of 1 sends \(a record, or a batch of snapshots sent together\) "
                                            r"were not delivered \(first error: RuntimeError: broker said no\)"):
        service.checkpoint()
