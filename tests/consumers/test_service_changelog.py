"""Checkpoints in a changelog topic (:mod:`consumers.changelog`): chunking, torn and corrupt
checkpoints, and services that lose their state dir restoring from Kafka (in-memory fakes; the
broker version with SIGKILLs is in tests/consumers/kafka)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, ManualClock, fake_changelog_reader
from test_service_labels import compare_finals, delayed_data, published
from test_service_labels import fill as fill_labels
from test_service_unit import events_with_closers, fill, final_snapshots

from consumers.changelog import Changelog, latest_checkpoint
from consumers.checkpoint import CheckpointStore
from consumers.service import MetricsService, ServiceConfig

CHANGELOG = "cl"


def changelog_service(cluster: FakeCluster, state_dir: Path | None, max_request_size: int = 1_048_576,
                      **options: Any) -> MetricsService:
    settings: dict[str, Any] = {"idle_close": None, "checkpoint_interval": 0.0, "max_poll_records": 50,
                                "window": 60.0, "max_future": None, "changelog_topic": CHANGELOG}
    settings.update(options)
    config = ServiceConfig(bootstrap_servers="fake:9092", topic="in", output_topic="out", dlq_topic="dlq",
                           state_dir=None if state_dir is None else str(state_dir), **settings)
    producer = FakeProducer(cluster, max_request_size=max_request_size)
    changelog = Changelog(producer, CHANGELOG, fake_changelog_reader(cluster, CHANGELOG), max_request_size) \
        if config.changelog_topic else None
    return MetricsService(config, FakeConsumer(cluster, config.group_id), producer, clock=ManualClock(),
                          listener=FakeListener, changelog=changelog)


def run(service: MetricsService, polls: int | None = None) -> None:
    """``polls`` polls then a crash (no stop, no close), or to the end then a clean stop."""
    service.start()
    for _ in range(polls or 100_000):
        service.poll_once(timeout_ms=0)
        consumer = service.consumer
        if polls is None and all(consumer.positions[tp] >= consumer.highwater(tp) for tp in consumer.assigned) \
                and all(not (p.preds and p.preds.buffer) and not (p.labels and p.labels.buffer)
                        for p in service.partitions.values()):
            break
    if polls is None:
        service.checkpoint()
        service.close()


class Rec:
    def __init__(self, offset: int, value: bytes, headers: list) -> None:
        self.offset, self.value, self.headers = offset, value, headers


def test_chunked_checkpoints_torn_and_corrupt_ones_are_skipped() -> None:
    cluster = FakeCluster()
    cluster.create(CHANGELOG, 2)
    producer = FakeProducer(cluster, max_request_size=4096)
    log = Changelog(producer, CHANGELOG, fake_changelog_reader(cluster, CHANGELOG), 4096)
    first, second = bytes(range(256)) * 40, b"x" * 9000
    assert len(log.write(1, first, offset=10, label_offset=None)) == 5  # 10,240 bytes in chunks of 2,048
    log.write(1, second, offset=20, label_offset=3)
    producer.flush()
    assert log.restore(1) == [second] and log.restore(0) is None
    records = cluster.topics[CHANGELOG][1]
    assert latest_checkpoint(records[:-1]) == (json.loads(dict(records[0].headers)["streammetrics.changelog"]), first)
    corrupt = [Rec(r.offset, r.value, r.headers) for r in records]
    corrupt[-2].value = b"y" * len(corrupt[-2].value)  # a chunk of the second checkpoint changed
    assert latest_checkpoint(corrupt)[1] == first  # type: ignore[index]  # found
    # the scan reads backwards in widening windows: found even behind many unrelated records
    for _ in range(300):
        cluster.append(CHANGELOG, b"noise", partition=1)
    assert log.restore(1) == [second]


def test_crash_without_state_dir_restores_from_the_changelog(tmp_path: Path) -> None:
    events = events_with_closers()
    reference = FakeCluster()
    fill(reference, events)
    run(changelog_service(reference, None, changelog_topic=None))
    cluster = FakeCluster()
    fill(cluster, events)
    cluster.create(CHANGELOG, 2)
    for polls in (4, 9, 13):  # three instances crash, none has a disk
        run(changelog_service(cluster, None), polls=polls)
    run(changelog_service(cluster, None))
    assert final_snapshots(cluster) == final_snapshots(reference)  # byte-identical, every window once or re-sent
    assert cluster.topics[CHANGELOG][0] and cluster.topics[CHANGELOG][1]


def test_a_stale_state_dir_loses_to_a_newer_changelog_checkpoint(tmp_path: Path) -> None:
    """An instance comes back with an old disk after another one moved on: the changelog's
    checkpoint (further input offsets) wins, so nothing is counted twice."""
    events = events_with_closers()
    reference = FakeCluster()
    fill(reference, events)
    run(changelog_service(reference, None, changelog_topic=None))
    cluster = FakeCluster()
    fill(cluster, events)
    cluster.create(CHANGELOG, 2)
    run(changelog_service(cluster, tmp_path / "a"), polls=3)  # instance A: disk a, then gone
    run(changelog_service(cluster, tmp_path / "b"), polls=12)  # instance B moves on
    service = changelog_service(cluster, tmp_path / "a")  # A comes back with its old disk
    run(service)
    assert final_snapshots(cluster) == final_snapshots(reference)


def test_labels_topic_crash_without_state_dir_equals_replay() -> None:
    preds, labels = delayed_data(seed=4)
    cluster = FakeCluster()
    fill_labels(cluster, preds, labels)
    cluster.create(CHANGELOG, 2)
    options = {"labels_topic": "labels", "label_ttl": 120.0, "max_poll_records": 40, "key_check": False}
    for polls in (5, 11, 23):
        run(changelog_service(cluster, None, **options), polls=polls)
    service = changelog_service(cluster, None, **options)
    run(service)
    compare_finals(published(cluster), service.config.pipeline_config(), preds, labels, exact=False)


def test_checkpoints_larger_than_a_record_are_chunked_and_restored() -> None:
    events = events_with_closers()
    reference = FakeCluster()
    fill(reference, events)
    # the same record size limit (snapshots over it are published without their state) and no changelog
    run(changelog_service(reference, None, changelog_topic=None, max_request_size=3_000))
    cluster = FakeCluster()
    fill(cluster, events)
    cluster.create(CHANGELOG, 2)
    run(changelog_service(cluster, None, max_request_size=3_000), polls=8)
    chunks = [json.loads(dict(r.headers)["streammetrics.changelog"])["chunks"] for r in cluster.records(CHANGELOG)]
    assert max(chunks) > 1, chunks  # (queued binary events are packed: ~10 bytes each in a checkpoint)
    run(changelog_service(cluster, None, max_request_size=3_000))
    assert final_snapshots(cluster) == final_snapshots(reference)


@pytest.mark.parametrize("disk", [False, True])
def test_a_restore_loads_each_partitions_state_once(monkeypatch, tmp_path: Path, disk: bool) -> None:
    """Without a state dir, the pipeline the changelog's check loads is the one the partition
    keeps; with one as far as the changelog, the changelog's chain is decoded but not loaded
    (was: loaded twice, ~2 s each at 100,000 keys). The run stays exact."""
    from streammetrics.stream.pipeline import Pipeline

    events = events_with_closers()
    reference = FakeCluster()
    fill(reference, events)
    run(changelog_service(reference, None, changelog_topic=None))
    cluster = FakeCluster()
    fill(cluster, events)
    cluster.create(CHANGELOG, 2)
    state_dir = tmp_path / "state" if disk else None
    run(changelog_service(cluster, state_dir), polls=9)  # crashes after checkpoints of both partitions
    loads: list[int] = []
    real = Pipeline.load_dict

    def counted(self: Pipeline, state: Any) -> None:
        loads.append(1)
        real(self, state)

    decoded: list[str] = []
    real_decode = CheckpointStore.decode

    def decode(self: CheckpointStore, partition: int, raw: bytes, path: str | None = None) -> dict[str, Any]:
        decoded.append(path or "state dir")
        return real_decode(self, partition, raw, path)

    monkeypatch.setattr(Pipeline, "load_dict", counted)
    monkeypatch.setattr(CheckpointStore, "decode", decode)
    service = changelog_service(cluster, state_dir)
    service.start()
    service.poll_once(timeout_ms=0)  # assignment: both partitions restored (state dir or changelog)
    assert sorted(p.saved_offset is not None for p in service.partitions.values()) == [True, True]
    assert len(loads) == 2
    from_changelog = [d for d in decoded if "changelog" in d]
    assert (not from_changelog) if disk else len(from_changelog) >= 2  # (the chains the state dir beats: not read)
    monkeypatch.setattr(Pipeline, "load_dict", real)
    monkeypatch.setattr(CheckpointStore, "decode", real_decode)
    run(service)
    assert final_snapshots(cluster) == final_snapshots(reference)
