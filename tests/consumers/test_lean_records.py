"""consumers.lean_records hands out exactly kafka-python's records, positions, metrics and errors."""
from __future__ import annotations

import struct
from collections import namedtuple
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")

from kafka.consumer.fetcher import Fetcher  # noqa: E402
from kafka.errors import CorruptRecordError  # noqa: E402
from kafka.protocol.consumer import IsolationLevel  # noqa: E402
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402
from kafka.record.util import calc_crc32c  # noqa: E402
from kafka.structs import TopicPartition  # noqa: E402

from consumers import lean_records  # noqa: E402
from consumers.lean_records import install, unpack  # noqa: E402

TP = TopicPartition("in", 2)
Aborted = namedtuple("Aborted", ["producer_id", "first_offset"])

#: sizes around the one/two/three-byte varint limits (zigzag: 63/64, 8191/8192)
big = st.integers(8185, 8200).map(lambda n: b"x" * n)
keys = st.one_of(st.none(), st.binary(max_size=70), big)
values = st.one_of(st.none(), st.binary(max_size=70), st.integers(60, 300).map(lambda n: b"v" * n), big)
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=70))), max_size=3)
entries = st.lists(st.tuples(keys, values, headers), min_size=1, max_size=12)


def batch_bytes(items: list, *, base_offset: int, compression: int = 0, timestamps: list[int] | None = None,
                attributes: int = 0, producer_id: int = -1) -> bytes:
    """One v2 record batch; ``attributes`` bits OR-ed into the header (CRC recomputed)."""
    transactional = bool(attributes & 0x10)
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 30, offset=base_offset,
                                   transactional=transactional, producer_id=producer_id,
                                   producer_epoch=0 if producer_id != -1 else -1,
                                   base_sequence=0 if producer_id != -1 else -1)
    for i, (key, value, hdrs) in enumerate(items):
        ts = timestamps[i] if timestamps else 1_767_225_600_000 + i
        builder.append(timestamp=ts, key=key, value=value, headers=hdrs)
    builder.close()
    data = bytearray(builder.buffer())
    if attributes:
        at = struct.calcsize(">qiibI")
        (current,) = struct.unpack_from(">h", data, at)
        struct.pack_into(">h", data, at, current | attributes)
        struct.pack_into(">I", data, struct.calcsize(">qiib"), calc_crc32c(memoryview(data)[at:]))
    return bytes(data)


def handed_out(records: bytes, *, lean: bool, take: int = 1000, fetch_offset: int = 0, **options: Any) -> tuple:
    """Records, positions, metrics and the error (if any) of a PartitionRecords read in ``take`` steps."""
    cls = lean_records._lean() if lean else Fetcher.PartitionRecords
    part = cls(fetch_offset, TP, MemoryRecords(records), **options)
    out: list = []
    error = None
    try:
        while part:
            got = part.take(take)
            if not got:
                break
            out.extend(got)
    except Exception as exc:  # noqa: BLE001 - compared with kafka-python's
        error = (type(exc), str(exc))
    return out, part.next_fetch_offset, part.records_read, part.bytes_read, error


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(entries, min_size=1, max_size=3), compression=st.sampled_from([0, 1]),
       take=st.integers(1, 7), skip=st.integers(0, 5), gaps=st.lists(st.integers(0, 70_000), max_size=12))
def test_records_equal_kafka_pythons(batches: list, compression: int, take: int, skip: int, gaps: list) -> None:
    data, offset = b"", 100
    for items in batches:
        stamps = [1_767_225_600_000 + sum(gaps[:i + 1]) for i in range(len(items))] if gaps else None
        data += batch_bytes(items, base_offset=offset, compression=compression, timestamps=stamps)
        offset += len(items)
    fetch_offset = 100 + min(skip, offset - 101)  # may start inside the first batch
    lean = handed_out(data, lean=True, take=take, fetch_offset=fetch_offset)
    plain = handed_out(data, lean=False, take=take, fetch_offset=fetch_offset)
    assert lean == plain
    assert lean[4] is None and len(lean[0]) == offset - fetch_offset


def test_log_append_time_and_headers() -> None:
    data = batch_bytes([(b"k", b"v", [("h", b"1"), ("\u00e9", None)]), (None, None, [])], base_offset=5,
                       attributes=0x08)
    lean = handed_out(data, lean=True, fetch_offset=5)
    assert lean == handed_out(data, lean=False, fetch_offset=5)
    assert [r.timestamp_type for r in lean[0]] == [1, 1] and lean[0][0].serialized_header_size == 4  # h, 1, é (2 bytes)


def test_control_and_aborted_transactional_batches_are_skipped_like_kafka_python() -> None:
    committed = batch_bytes([(b"k", b"kept", [])], base_offset=0, attributes=0x10, producer_id=7)
    aborted = batch_bytes([(b"k", b"aborted", []), (b"k", b"aborted2", [])], base_offset=1, attributes=0x10,
                          producer_id=9)
    marker = batch_bytes([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])], base_offset=3,
                         attributes=0x30, producer_id=9)  # control (abort) batch
    after = batch_bytes([(b"k", b"after", [])], base_offset=4)
    data = committed + aborted + marker + after
    for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        options = {"isolation_level": level, "aborted_transactions": [Aborted(9, 1)]}
        lean = handed_out(data, lean=True, **options)
        assert lean == handed_out(data, lean=False, **options)
        got = [r.value for r in lean[0]]
        assert got == ([b"kept", b"after"] if level == IsolationLevel.READ_COMMITTED
                       else [b"kept", b"aborted", b"aborted2", b"after"])
        assert lean[1] == 5


@pytest.mark.parametrize("check_crcs", [True, False])
@pytest.mark.parametrize("where", range(61, 130, 3))
def test_a_corrupt_batch_raises_kafka_pythons_error_after_the_same_records(where: int, check_crcs: bool) -> None:
    good = batch_bytes([(b"k", b"v" * 20, []), (b"k2", b"w" * 20, [("h", b"x")])], base_offset=0)
    bad = bytearray(batch_bytes([(b"k", b"v" * 20, []), (b"k2", b"w" * 20, [("h", b"x")])], base_offset=2))
    where = min(where, len(bad) - 1)
    bad[where] ^= 0x41  # somewhere in the records (the header is 61 bytes)
    data = good + bytes(bad)
    lean = handed_out(data, lean=True, take=1, check_crcs=check_crcs)
    assert lean == handed_out(data, lean=False, take=1, check_crcs=check_crcs)
    if check_crcs:
        assert lean[4] is not None and lean[4][0] is CorruptRecordError and len(lean[0]) == 2


def test_deserializers_keep_kafka_pythons_loop() -> None:
    class Upper:
        def deserialize(self, topic: str, headers: Any, data: bytes | None) -> Any:
            return None if data is None else data.upper()

    data = batch_bytes([(b"k", b"v", [])], base_offset=0)
    options = {"key_deserializer": Upper(), "value_deserializer": Upper()}
    lean = handed_out(data, lean=True, **options)
    assert lean == handed_out(data, lean=False, **options) and lean[0][0].value == b"V"


def test_install_sets_only_that_consumers_fetcher() -> None:
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    other = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    assert install(consumer)
    assert consumer._fetcher.PartitionRecords is lean_records._lean()
    assert other._fetcher.PartitionRecords is Fetcher.PartitionRecords
    assert Fetcher.PartitionRecords is not lean_records._lean()
    assert not install(SimpleNamespace())  # not a kafka-python 3.0 consumer: left alone


def test_a_failing_self_test_leaves_the_consumer_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean_records, "_SELF_TEST", None)
    monkeypatch.setattr(lean_records, "unpack_batch", lambda *args: ([], []))  # drops records
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    assert not install(consumer)
    assert consumer._fetcher.PartitionRecords is Fetcher.PartitionRecords


def test_the_helper_unpacks_like_the_fetcher() -> None:
    records = lean_records.built_records([(b"a", b"1", []), (b"b", b"2", [])], base_offset=3)
    assert [r.offset for r in unpack(TP, records, fetch_offset=3)] == [3, 4]


@pytest.mark.parametrize("taken", [0, 1, 3, 5, 6])
def test_fetch_metrics_of_a_partition_drained_mid_batch(taken: int) -> None:
    # a seek or revocation drains the records: the metrics count what was handed out
    data = batch_bytes([(b"k", b"v" * i, []) for i in range(6)], base_offset=0)
    reported = []
    for lean in (True, False):
        cls = lean_records._lean() if lean else Fetcher.PartitionRecords
        aggregator = SimpleNamespace(record=lambda tp, nbytes, nrecords: reported.append((nbytes, nrecords)))
        part = cls(0, TP, MemoryRecords(data), metric_aggregator=aggregator)
        got = part.take(taken) if taken else []
        part.drain()
        assert len(got) == taken
    assert reported[0] == reported[1] and reported[0][1] == taken


@pytest.mark.parametrize("lean", [True, False])
def test_the_service_clients_use_it_unless_turned_off(lean: bool) -> None:
    from consumers.clients import kafka_clients
    from consumers.service import ServiceConfig

    # no broker needed: api_version given, nothing connects before the first poll
    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", output_topic="o", lean_records=lean,
                           kafka_options={"api_version": (2, 5)})
    consumer, producer = kafka_clients(config)
    try:
        # (wrapped by the fetch guard, consumers.clients.install_fetch_guard)
        assert issubclass(consumer._fetcher.PartitionRecords, lean_records._lean()) is lean
    finally:
        consumer.close(autocommit=False, timeout_ms=100)
        producer.close(timeout=0.1)
