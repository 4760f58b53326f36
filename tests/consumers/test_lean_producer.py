"""consumers.lean_producer writes kafka-python's batch bytes and follows delivery as its futures do."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")

from kafka.errors import KafkaError, MessageSizeTooLargeError  # noqa: E402
from kafka.producer.producer_batch import ProducerBatch  # noqa: E402
from kafka.producer.record_accumulator import RecordAccumulator  # noqa: E402
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402
from kafka.structs import TopicPartition  # noqa: E402

from consumers.lean_producer import Delivery, LeanRecords, RecordSender, self_test  # noqa: E402

TP = TopicPartition("out", 0)
TS = 1_767_225_600_000

#: sizes around the one/two/three-byte varint limits (zigzag: 63/64, 8191/8192)
big = st.integers(8185, 8200).map(lambda n: b"x" * n)
keys = st.one_of(st.none(), st.binary(max_size=70), big)
values = st.one_of(st.none(), st.binary(max_size=70), st.integers(60, 300).map(lambda n: b"v" * n), big)
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=70))), max_size=3)
entries = st.lists(st.tuples(keys, values, headers), min_size=1, max_size=40)


def kafka_batches(records: list, batch_size: int, timestamps: list[int], state: tuple) -> list[bytes]:
    """The batches kafka-python's own builder cuts ``records`` into (a new one when full)."""
    out, builder = [], MemoryRecordsBuilder(2, 0, batch_size)
    for (key, value, hdrs), ts in zip(records, timestamps):
        if builder.append(ts, key, value, hdrs) is None:
            builder.set_producer_state(*state)
            builder.close()
            out.append(bytes(builder.buffer()))
            builder = MemoryRecordsBuilder(2, 0, batch_size)
            assert builder.append(ts, key, value, hdrs) is not None
    builder.set_producer_state(*state)
    builder.close()
    return [*out, bytes(builder.buffer())]


def lean_batches(records: list, batch_size: int, cuts: list[int], timestamps: list[int], state: tuple) -> list[bytes]:
    """The same records appended in calls of ``cuts`` (each call one timestamp)."""
    out, batch = [], LeanRecords(batch_size)
    lo = 0
    for hi, ts in zip([*cuts, len(records)], timestamps):
        while lo < hi:
            end, _ = batch.append_many(ts, records[:hi], lo)
            if end == lo:
                batch.set_producer_state(*state)
                batch.close()
                out.append(bytes(batch.buffer()))
                batch = LeanRecords(batch_size)
            lo = end
    batch.set_producer_state(*state)
    batch.close()
    return [*out, bytes(batch.buffer())]


@settings(max_examples=150, deadline=None)
@given(entries, st.sampled_from([1 << 20, 9000, 400]), st.data(), st.sampled_from([(-1, -1, -1, False),
                                                                                   (7, 2, 2_147_483_000, False),
                                                                                   (7, 2, 11, True)]))
def test_batches_equal_kafka_pythons_byte_for_byte(records, batch_size, data, state):
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(records)), max_size=3))) - {len(records)})
    stamps = [TS + 9_000 * i for i in range(len(cuts) + 1)]  # (the delta grows past one varint byte)
    per_record = [stamps[sum(1 for c in cuts if c <= i)] for i in range(len(records))]
    assert lean_batches(records, batch_size, cuts, stamps, state) == kafka_batches(records, batch_size, per_record,
                                                                                    state)


def test_the_batches_read_back_as_the_records_sent():
    records = [(f"m|s{i}|60.0".encode(), b'{"n":%d}' % i, [("streammetrics.content", b"%064d" % i)])
               for i in range(500)]
    batches = lean_batches(records, 4096, [], [TS], (-1, -1, -1, False))
    assert len(batches) > 1
    read = [(r.key, r.value, r.headers) for b in batches for rb in MemoryRecords(b) for r in rb]
    assert read == [(k, v, [(h, x) for h, x in hs]) for k, v, hs in records]


def test_the_self_test_passes_and_fails_on_a_difference(monkeypatch):
    assert self_test()
    monkeypatch.setattr("consumers.lean_producer._VARINTS", tuple(b"\x00" for _ in range(1 << 13)))
    assert not self_test()  # (a wrong varint table: the lean path would not be used)


def test_a_closed_batch_takes_nothing_and_refuses_single_records():
    batch = LeanRecords(1 << 20)
    record = [(b"k", b"v", [])]
    assert batch.append_many(TS, record, 0) == (1, len(kafka_batches([(b"k", b"v", [])], 1 << 20, [TS],
                                                                      (-1, -1, -1, False))[0]) - 61)
    assert batch.append(TS, b"k", b"v", []) is None
    batch.close()
    assert batch.append_many(TS, record, 0) == (0, 0) and batch.next_offset() == 1 and batch.is_full()
    with pytest.raises(KafkaError):
        batch.set_producer_state(1, 0, 0, False)  # (as kafka-python's: a retried batch keeps its sequence)


class _Metadata:
    def partitions_for_topic(self, topic):
        return {0}


class _Sender:
    wakeups = 0

    def wakeup(self):
        self.wakeups += 1


class _Producer:
    """A KafkaProducer's parts RecordSender uses: a real RecordAccumulator, a counting sender."""

    def __init__(self, batch_size=1 << 14, **config):
        self.config = {"max_request_size": 1 << 20, "batch_size": batch_size, **config}
        self._accumulator = RecordAccumulator(batch_size=batch_size, message_version=2)
        self._sender = _Sender()
        self.sent: list = []

    def partitions_for(self, topic):
        return {0}

    def send(self, topic, key=None, value=None, headers=None):
        self.sent.append((topic, key, value, headers))
        return ("future", key)


def lean_sender(producer: Any) -> RecordSender:
    sender = RecordSender(producer, lean=False)
    sender.lean = True  # (the fake is no KafkaProducer: its accumulator is kafka-python's own)
    return sender


def test_records_go_into_the_accumulators_batches_in_order_with_one_wakeup():
    producer = _Producer(batch_size=2048)
    sender = lean_sender(producer)
    first = [(b"a%d" % i, b"v" * 100, []) for i in range(30)]
    handles = sender.send_many("out", first)
    assert producer._sender.wakeups == 1
    queue = producer._accumulator._batches[TP]
    assert len(handles) == len(queue) > 1 and all(isinstance(h, Delivery) for h in handles)
    second = [(b"b%d" % i, b"w" * 100, []) for i in range(5)]
    handles += sender.send_many("out", second)  # (into the last batch while it has room)
    batches = []
    for batch in queue:
        batch.records.close()
        batches.append(bytes(batch.records.buffer()))
    assert [(r.key, r.value) for b in batches for rb in MemoryRecords(b) for r in rb] == \
        [(k, v) for k, v, _ in first + second]
    assert set(producer._accumulator._incomplete.all()) == set(queue)
    assert not any(h.is_done for h in handles)


def test_a_delivery_follows_its_batch_success_failure_and_record_errors():
    producer = _Producer()
    sender = lean_sender(producer)
    for outcome in ("ok", "failed", "record"):
        (handle,) = sender.send_many("out", [(b"k", b"v", []), (b"k2", b"v2", [])])
        batch = producer._accumulator._batches[TP].pop()
        batch.records.close()
        assert not handle.is_done
        if outcome == "ok":
            batch.complete(5, -1)
            assert handle.is_done and not handle.failed() and handle.exception is None
        elif outcome == "failed":
            batch.complete_exceptionally(KafkaError("broker gone"), lambda i: KafkaError("broker gone"))
            assert handle.is_done and handle.failed() and "broker gone" in str(handle.exception)
        else:
            batch.done(base_offset=5, timestamp_ms=-1, record_exceptions_fn=lambda i: KafkaError(f"record {i}"))
            assert handle.is_done and handle.failed() and "record 0" in str(handle.exception)


def test_a_split_batch_is_followed_through_its_records_futures():
    producer = _Producer()
    sender = lean_sender(producer)
    acc = producer._accumulator
    (handle,) = sender.send_many("out", [(b"k%d" % i, b"v" * 50, []) for i in range(6)])
    batch = acc._batches[TP].popleft()
    batch.records.close()
    assert acc.split_and_reenqueue(batch) == 2  # (kafka-python's answer to MESSAGE_TOO_LARGE)
    acc.deallocate(batch)
    halves = list(acc._batches[TP])
    assert [h.record_count for h in halves] == [3, 3] and all(not isinstance(h.records, LeanRecords) for h in halves)
    assert not handle.is_done
    halves[0].records.close()
    halves[0].complete(0, -1)
    assert not handle.is_done  # (half of its records delivered)
    halves[1].records.close()
    halves[1].complete_exceptionally(KafkaError("too large"), lambda i: KafkaError("too large"))
    assert handle.is_done and handle.failed() and "too large" in str(handle.exception)


def test_without_the_lean_path_records_are_sent_one_by_one():
    producer = _Producer()
    records = [(b"k", b"v", [("h", b"1")]), (b"k2", b"v2", [])]
    assert RecordSender(producer).send_many("out", records) == [("future", b"k"), ("future", b"k2")]
    assert producer.sent == [("out", k, v, h) for k, v, h in records] and not producer._accumulator._batches


def test_a_record_over_the_request_limit_raises_before_anything_is_appended():
    producer = _Producer(max_request_size=1000)
    sender = lean_sender(producer)
    with pytest.raises(MessageSizeTooLargeError):
        sender.send_many("out", [(b"k", b"v", []), (b"k", b"v" * 2000, [])])
    assert not producer._accumulator._batches[TP] and producer._sender.wakeups == 0
    with pytest.raises(ValueError, match="key or value"):
        sender.send_many("out", [(None, None, [])])


def test_a_closed_accumulator_refuses():
    producer = _Producer()
    producer._accumulator.close()
    with pytest.raises(KafkaError, match="closed"):
        lean_sender(producer).send_many("out", [(b"k", b"v", [])])


def test_a_producer_batch_holding_lean_records_is_kafka_pythons_batch():
    producer = _Producer()
    lean_sender(producer).send_many("out", [(b"k", b"v", [])])
    assert isinstance(producer._accumulator._batches[TP][0], ProducerBatch)
