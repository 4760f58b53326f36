"""Exceptions out of the Kafka client never stop the service (hostile-operations finding 2: an lz4
topic made ``poll`` raise ``UnsupportedCodecError`` and the service exit 1 at every start).

A batch the client cannot read is fetched again (``FETCH_ATTEMPTS`` in all), then skipped with
one dead letter (code ``unreadable``); any other exception out of ``poll`` is retried with
back-off. The same scenario on the broker: tests/consumers/kafka/test_service_codecs.py."""
from __future__ import annotations

import json
import unittest.mock
from pathlib import Path
from typing import Any

import pytest
from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, Faults, ManualClock, TopicPartition
from test_service_unit import counts, drain, events_with_closers, expected_counts, fill, final_snapshots

from consumers import lean_records
from consumers.clients import FetchPosition, fetch_error_position, guarded_partition_records, mark_fetch_error
from consumers.service import FETCH_ATTEMPTS, MetricsService, ServiceConfig

TP0 = TopicPartition("in", 0)


class UnreadableConsumer(FakeConsumer):
    """A fake consumer whose ``tp`` cannot be read at offsets ``[start, end)`` (one record batch):
    ``poll`` raises a marked ``UnsupportedCodecError`` while the position is in it, as kafka-python
    with :func:`consumers.clients.install_fetch_guard` does; ``fails``: how many times (None: always)."""

    def __init__(self, cluster: FakeCluster, group: str, bad: tuple[TopicPartition, int, int],
                 fails: int | None = None, faults: Faults | None = None) -> None:
        super().__init__(cluster, group, faults=faults)
        self.bad, self.fails, self.raised = bad, fails, 0

    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
        from kafka.errors import UnsupportedCodecError

        tp, start, end = self.bad
        broken = self.fails is None or self.raised < self.fails
        if broken and tp in self.positions and start <= self.positions[tp] < end:
            self.raised += 1
            raise mark_fetch_error(UnsupportedCodecError("Libraries for lz4 compression codec not found"),
                                   tp, self.positions[tp], end)
        out = super().poll(timeout_ms, max_records, update_offsets)
        records = out.get(tp)
        if broken and records and any(start <= rec.offset < end for rec in records):  # never handed out
            kept = [rec for rec in records if rec.offset < start]
            self.positions[tp] = start
            if kept:
                out[tp] = kept
            else:
                del out[tp]
        return out


def make(cluster: FakeCluster, state: Path | None, consumer: FakeConsumer, **options: Any) -> MetricsService:
    config = ServiceConfig(bootstrap_servers="fake:9092", topic="in", output_topic="out", dlq_topic="dlq",
                           state_dir=None if state is None else str(state), idle_close=None, checkpoint_interval=0.0,
                           max_poll_records=50, window=60, max_future=None, **options)
    return MetricsService(config, consumer, FakeProducer(cluster), clock=ManualClock(), listener=FakeListener)


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return events_with_closers(900, seed=23)


def without(cluster: FakeCluster, tp: TopicPartition, start: int, end: int) -> FakeCluster:
    """A copy of ``cluster`` whose ``tp`` lacks offsets ``[start, end)`` (the others renumbered)."""
    copy = FakeCluster()
    for topic, parts in cluster.topics.items():
        copy.create(topic, len(parts))
        for p, log in enumerate(parts):
            for rec in log:
                if not (topic == tp.topic and p == tp.partition and start <= rec.offset < end):
                    copy.append(topic, rec.value, rec.key, partition=p, headers=rec.headers)
    return copy


def test_an_unreadable_batch_is_skipped_with_one_dead_letter_and_the_rest_is_exact(events, tmp_path):
    cluster = FakeCluster()
    fill(cluster, events)
    start, end = 10, 17
    expected = without(cluster, TP0, start, end)
    drain(make(expected, tmp_path / "ref", FakeConsumer(expected, "streammetrics")))
    consumer = UnreadableConsumer(cluster, "streammetrics", (TP0, start, end))
    service = make(cluster, tmp_path / "state", consumer)
    with unittest.mock.patch("consumers.service.POLL_BACKOFF", 0.001):
        drain(service)
    assert service.failure is None and service.exit_status == 0
    assert consumer.raised == FETCH_ATTEMPTS  # fetched again twice, then skipped
    [dead] = cluster.records("dlq")
    headers = {k: v.decode() for k, v in dead.headers}
    assert headers["streammetrics.code"] == "unreadable"
    assert headers["streammetrics.source"] == f"in/0/{start}"
    assert f"offsets {start}-{end - 1}" in headers["streammetrics.reason"]
    assert "UnsupportedCodecError" in headers["streammetrics.reason"]
    assert service.counts["skipped_offsets"] == end - start
    text = service.metrics.render().decode()
    assert 'streammetrics_fetch_errors_total{error="UnsupportedCodecError",outcome="skipped"} 1.0' in text
    assert 'streammetrics_fetch_errors_total{error="UnsupportedCodecError",outcome="retried"} 2.0' in text
    assert f"streammetrics_skipped_offsets_total {float(end - start)}" in text
    assert sum(counts(final_snapshots(cluster)).values()) == sum(expected_counts(events).values()) - (end - start)
    assert final_snapshots(cluster) == final_snapshots(expected)
    # the skip was checkpointed: a restart on the same state neither re-reads nor re-dead-letters the batch
    again = UnreadableConsumer(cluster, "streammetrics", (TP0, start, end))
    drain(make(cluster, tmp_path / "state", again))
    assert again.raised == 0 and len(cluster.records("dlq")) == 1


def test_a_batch_that_reads_on_a_later_attempt_loses_nothing(events, tmp_path):
    cluster = FakeCluster()
    fill(cluster, events)
    consumer = UnreadableConsumer(cluster, "streammetrics", (TP0, 30, 35), fails=FETCH_ATTEMPTS - 1)
    service = make(cluster, tmp_path, consumer)
    with unittest.mock.patch("consumers.service.POLL_BACKOFF", 0.001):
        drain(service)
    assert consumer.raised == FETCH_ATTEMPTS - 1 and service.failure is None
    assert cluster.records("dlq") == []
    assert counts(final_snapshots(cluster)) == expected_counts(events)


def test_an_unattributed_poll_exception_is_retried_with_back_off_not_an_exit(events, tmp_path):
    cluster = FakeCluster()
    fill(cluster, events)
    faults = Faults()
    faults.arm("poll", 4)
    consumer = FakeConsumer(cluster, "streammetrics", faults=faults)
    service = make(cluster, tmp_path, consumer)
    consumer.on_idle = service.stop
    with unittest.mock.patch("consumers.service.POLL_BACKOFF", 0.001):
        assert service.run() == 0
    assert faults.fired == ["poll"]
    assert 'error="InjectedFault",outcome="retried"} 1.0' in service.metrics.render().decode()
    assert counts(final_snapshots(cluster)) == expected_counts(events)
    assert cluster.records("dlq") == []


def test_poll_back_off_doubles_up_to_its_bound(tmp_path):
    cluster = FakeCluster()
    fill(cluster, events_with_closers(10))
    service = make(cluster, tmp_path, FakeConsumer(cluster, "streammetrics"))
    waits: list[float] = []
    service._stop.wait = waits.append  # type: ignore[method-assign, assignment]
    for _ in range(9):
        service._client_error(RuntimeError("no broker"))
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


def built(batches: list[tuple[int, int, int]]) -> Any:
    """MemoryRecords of v2 batches ``(base_offset, records, compression)`` (3 = lz4)."""
    from kafka.record.memory_records import MemoryRecords

    return MemoryRecords(built_bytes(batches))


def built_bytes(batches: list[tuple[int, int, int]]) -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder

    buf = b""
    for base, n, compression in batches:
        builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 30, offset=base)
        for i in range(n):
            builder.append(timestamp=1_767_225_600_000 + i, key=None, value=b'{"ts": %d, "x": "%s"}' % (i, b"y" * 80),
                           headers=[])
        builder.close()
        buf += bytes(builder.buffer())
    return buf


@pytest.mark.parametrize("lean", [True, False])
def test_the_fetch_guard_marks_a_codec_error_with_partition_offset_and_batch_end(lean, monkeypatch):
    import kafka.codec

    base = lean_records._lean() if lean else lean_records._partition_records_class()
    records = built([(0, 5, 0), (5, 4, 3), (9, 3, 0)])  # the middle batch lz4-compressed
    monkeypatch.setattr(kafka.codec, "has_lz4", lambda: False)  # a consumer without the lz4 package
    part = guarded_partition_records(base)(0, TP0, records)
    assert [rec.offset for rec in part.take(100)] == [0, 1, 2, 3, 4]
    with pytest.raises(Exception, match="lz4") as info:
        part.take(100)
    assert type(info.value).__name__ == "UnsupportedCodecError"
    assert fetch_error_position(info.value) == FetchPosition(TP0, 5, 9)
    assert not part  # drained: kafka-python fetches again from the consumer's position


def test_the_fetch_guard_is_installed_on_the_real_consumer():
    from kafka import KafkaConsumer

    from consumers.clients import install_fetch_guard

    consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:1", api_version=(3, 9))
    try:
        assert lean_records.install(consumer)
        assert install_fetch_guard(consumer)
        cls = consumer._fetcher.PartitionRecords
        assert cls.__name__ == "GuardedLeanPartitionRecords" and issubclass(cls, lean_records._lean())
    finally:
        consumer.close(autocommit=False, timeout_ms=100)


@pytest.mark.parametrize("lean", [True, False])
def test_the_fetch_guard_marks_a_corrupt_batch_with_its_crc_error_and_end(lean):
    from kafka.record.memory_records import MemoryRecords

    base = lean_records._lean() if lean else lean_records._partition_records_class()
    raw = bytearray(built_bytes([(0, 3, 0), (3, 4, 0), (7, 2, 0)]))
    second = built_bytes([(3, 4, 0)])
    start = bytes(raw).index(second[61:])  # the second batch's records (after its 61-byte header)
    raw[start + 10] ^= 0xFF  # a flipped bit in a record: the batch's CRC no longer matches
    part = guarded_partition_records(base)(0, TP0, MemoryRecords(bytes(raw)), check_crcs=True)
    assert [rec.offset for rec in part.take(100)] == [0, 1, 2]
    with pytest.raises(Exception, match="crc") as info:
        part.take(100)
    assert type(info.value).__name__ == "CorruptRecordError"
    assert fetch_error_position(info.value) == FetchPosition(TP0, 3, 7)


def test_an_unreadable_batch_at_the_end_of_the_labels_topic_does_not_stall_the_merge(tmp_path):
    from test_service_labels import delayed_data
    from test_service_labels import drain as drain_merged
    from test_service_labels import fill as fill_pairs

    preds, labels = delayed_data(seed=5)
    cluster = FakeCluster()
    fill_pairs(cluster, preds, labels)
    tp = TopicPartition("labels", 0)
    end = len(cluster.topics["labels"][0])
    start = end - 3  # the last batch of the labels topic cannot be read
    expected = without(cluster, tp, start, end)
    reference = make(expected, tmp_path / "ref", FakeConsumer(expected, "streammetrics"), labels_topic="labels",
                     key_check=False, label_ttl=120.0)
    drain_merged(reference)
    consumer = UnreadableConsumer(cluster, "streammetrics", (tp, start, end))
    service = make(cluster, tmp_path / "state", consumer, labels_topic="labels", label_ttl=120.0, key_check=False)
    with unittest.mock.patch("consumers.service.POLL_BACKOFF", 0.001):
        drain_merged(service, max_polls=3000)
    assert service.counts["skipped_offsets"] == 3 and consumer.raised == FETCH_ATTEMPTS
    assert all(not (part.preds.buffer or part.labels.buffer) for part in service.partitions.values())
    got, want = last_per_key(cluster), last_per_key(expected)
    assert sorted(got) == sorted(want) and sum(1 for s in want.values() if s["final"]) >= 10
    for key in want:
        assert {k: got[key][k] for k in ("count", "labeled", "revision", "final")} == \
            {k: want[key][k] for k in ("count", "labeled", "revision", "final")}, key


def last_per_key(cluster: FakeCluster) -> dict[str, dict]:
    return {rec.key.decode(): json.loads(rec.value) for rec in cluster.records("out")}
