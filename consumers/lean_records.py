"""Faster unpacking of fetched record batches for the service's kafka-python consumer.

kafka-python turns every fetched record into a ``ConsumerRecord`` through a ``DefaultRecord``
object, seven ``decode_varint`` calls, two deserializer calls, a per-record CRC method and a
header-size sum: ~4.5 us per small record in CPython, most of what ``KafkaConsumer.poll``
costs per message (``benchmarks/bench_consumer.py``). :class:`LeanPartitionRecords` is
kafka-python 3.0's ``Fetcher.PartitionRecords`` with one change: a plain record batch (message
format v2, not a control batch, no key or value deserializer configured) is decoded by
:func:`unpack_batch`, one loop with the one-byte varints inlined, into the *same*
``ConsumerRecord`` tuples (equal field by field: ``tests/consumers/test_lean_records.py``
compares them with kafka-python's own on generated batches: compressed, with headers, null keys
and values, control and aborted transactional batches). Everything else is kafka-python's own
code path, unchanged: fetching, positions, the batch CRC check (``check_crcs``), decompression,
transaction markers and aborted transactions (``isolation_level``), legacy message formats, and
every error: a batch the fast loop finds anything unusual in (a size that does not add up,
unconsumed bytes, a negative header count) is handed back whole to kafka-python's iteration,
which raises its own ``CorruptRecordError`` at the record at fault.

:func:`install` puts it into one consumer (``consumer._fetcher.PartitionRecords``, an instance
attribute: other consumers in the process keep kafka-python's). It is used only where a
self-test on a small built batch gives records equal to kafka-python's (kafka-python 3.0's
internals: ``MemoryRecords``, ``DefaultRecordBatch._buffer``); otherwise the consumer is left
as it is and :func:`install` returns False.

>>> from kafka.structs import TopicPartition
>>> records = built_records([(b"k", b'{"ts": 1}', []), (None, b"v", [("h", b"1")])])
>>> [(r.offset, r.key, r.value, r.headers) for r in unpack(TopicPartition("t", 0), records)]
[(0, b'k', b'{"ts": 1}', []), (1, None, b'v', [('h', b'1')])]
"""
from __future__ import annotations

import logging
from typing import Any

__all__ = ["LeanPartitionRecords", "built_records", "install", "unpack", "unpack_batch"]

log = logging.getLogger("streammetrics.consume")


def _partition_records_class() -> type:
    from kafka.consumer.fetcher import Fetcher

    return Fetcher.PartitionRecords


def unpack_batch(batch: Any, topic: str, partition: int, leader_epoch: int) -> tuple[list, list[int]] | None:
    """The ``ConsumerRecord`` tuples of a v2 ``DefaultRecordBatch`` (CRC already checked,
    decompressed here), without deserializers, and each record's length field (kafka-python's
    ``size_in_bytes``); None when anything in it is unusual (kafka-python's own iteration then
    decodes it, and raises its own error)."""
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka.record.util import decode_varint

    new, record_type = tuple.__new__, ConsumerRecord
    batch._maybe_uncompress()
    buf = bytes(batch._buffer)  # slices of bytes are bytes: one copy per batch, not two per record
    pos = batch._pos
    header = batch._header_data
    base_offset, first_ts, max_ts, count = header[0], header[7], header[8], header[12]
    log_append = 1 if header[5] & 0x08 else 0  # TIMESTAMP_TYPE_MASK: LOG_APPEND_TIME
    out: list = []
    sizes: list[int] = []
    append, append_size = out.append, sizes.append
    try:
        for _ in range(count):
            # Record => Length Attributes TimestampDelta OffsetDelta Key Value [Headers], zigzag
            # varints (kafka-python reads the int8 attributes as a varint too), inlined up to two
            # bytes (byte 1 < 0x80: one byte; else byte 2 < 0x80: two), decode_varint beyond
            b = buf[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = decode_varint(buf, pos)
            start = pos
            if buf[pos] < 0x80:
                pos += 1
            else:
                pos = decode_varint(buf, pos)[1]
            b = buf[pos]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, pos = decode_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                offset_delta, pos = decode_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                key_len, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                key_len, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                key_len, pos = decode_varint(buf, pos)
            if key_len >= 0:
                key = buf[pos:pos + key_len]
                pos += key_len
            else:
                key = None
            b = buf[pos]
            if b < 0x80:
                value_len, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                value_len, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                value_len, pos = decode_varint(buf, pos)
            if value_len >= 0:
                value = buf[pos:pos + value_len]
                pos += value_len
            else:
                value = None
            if buf[pos] == 0:  # no headers (a varint 0)
                pos += 1
                headers: list = []
                header_size = -1
            else:
                headers, header_size, pos = _headers(buf, pos)
            if pos - start != length:  # (so the key and value slices were whole: their sizes are the lengths)
                return None
            append_size(length)
            append(new(record_type, (topic, partition, leader_epoch, base_offset + offset_delta,
                                     max_ts if log_append else first_ts + ts_delta, log_append, key, value,
                                     headers, None, key_len if key is not None else -1,
                                     value_len if value is not None else -1, header_size)))
    except (IndexError, ValueError):
        return None
    if pos != len(buf):
        return None  # unconsumed bytes: kafka-python raises CorruptRecordError after the records
    return out, sizes


def _headers(buf: bytes, pos: int) -> tuple[list, int, int]:
    """A record's headers ``[(str key, bytes or None value)]``, kafka-python's header size and the
    position after them; ValueError for what kafka-python refuses."""
    from kafka.record.util import decode_varint

    count, pos = decode_varint(buf, pos)
    if count < 0:
        raise ValueError("negative header count")
    headers = []
    size = 0
    for _ in range(count):
        key_len, pos = decode_varint(buf, pos)
        if key_len < 0 or pos + key_len > len(buf):
            raise ValueError("bad header key size")
        key = buf[pos:pos + key_len].decode("utf-8")  # UnicodeDecodeError is a ValueError
        pos += key_len
        value_len, pos = decode_varint(buf, pos)
        if value_len >= 0:
            if pos + value_len > len(buf):
                raise ValueError("bad header value size")
            value: bytes | None = buf[pos:pos + value_len]
            pos += value_len
        else:
            value = None
        headers.append((key, value))
        size += len(key.encode("utf-8")) + (len(value) if value is not None else 0)
    return headers, (size if headers else -1), pos


def _lean_class() -> type:
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka.errors import CorruptRecordError
    from kafka.protocol.consumer import IsolationLevel

    base = _partition_records_class()

    class LeanPartitionRecords(base):  # type: ignore[misc, valid-type]  # kafka-python's class
        """``Fetcher.PartitionRecords`` whose plain v2 batches go through :func:`unpack_batch`."""

        def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
            if key_deserializer is not None or value_deserializer is not None:
                yield from super()._unpack_records(tp, records, key_deserializer, value_deserializer)
                return
            # kafka-python 3.0.12's Fetcher.PartitionRecords._unpack_records (Apache-2.0), with the
            # per-record loop of a plain v2 batch replaced by unpack_batch
            try:
                batch = records.next_batch()
                last_batch = None
                while batch is not None:
                    last_batch = batch
                    if self.check_crcs and not batch.validate_crc():
                        raise CorruptRecordError("Record batch for partition %s at offset %s failed crc check" % (
                            self.topic_partition, batch.base_offset))
                    unpacked = None
                    if batch.magic == 2:
                        self.leader_epoch = batch.leader_epoch
                        if self.isolation_level == IsolationLevel.READ_COMMITTED and batch.has_producer_id():
                            self._consume_aborted_transactions_up_to(batch.last_offset)
                            producer_id = batch.producer_id
                            if self._contains_abort_marker(batch):
                                self.aborted_producer_ids.discard(producer_id)
                            elif self._is_batch_aborted(batch):
                                self.next_fetch_offset = batch.next_offset
                                batch = records.next_batch()
                                continue
                        if batch.is_control_batch:  # transaction markers are not returned
                            self.next_fetch_offset = batch.next_offset
                            batch = records.next_batch()
                            continue
                        unpacked = unpack_batch(batch, tp.topic, tp.partition, self.leader_epoch)
                    if unpacked is not None:
                        # fetch metrics (records and bytes read) count the records handed out, as
                        # kafka-python's loop does, added once per batch or when the iteration is
                        # dropped mid-batch (a drain closes this generator before it reports them)
                        recs, sizes = unpacked
                        handed = 0
                        try:
                            for handed, rec in enumerate(recs, 1):  # noqa: B007 - counted in finally
                                self.next_fetch_offset = rec[3] + 1
                                yield rec
                        finally:
                            self.records_read += handed
                            self.bytes_read += sum(sizes[:handed]) if handed < len(sizes) else sum(sizes)
                    else:  # legacy formats and anything unusual: kafka-python's own loop and errors
                        for record in batch:
                            if self.check_crcs and not record.validate_crc():
                                raise CorruptRecordError("Record for partition %s at offset %s failed crc check" % (
                                    self.topic_partition, record.offset))
                            key, value, headers = record.key, record.value, record.headers
                            header_size = sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0)
                                              for k, v in headers) if headers else -1
                            self.records_read += 1
                            self.bytes_read += record.size_in_bytes
                            self.next_fetch_offset = record.offset + 1
                            yield ConsumerRecord(
                                tp.topic, tp.partition, self.leader_epoch, record.offset, record.timestamp,
                                record.timestamp_type, key, value, headers, record.checksum,
                                len(key) if key is not None else -1, len(value) if value is not None else -1,
                                header_size)
                    batch = records.next_batch()
                else:
                    if last_batch and last_batch.magic == 2:
                        self.next_fetch_offset = last_batch.next_offset
                    self.drain()
            except StopIteration:
                raise RuntimeError("StopIteration raised unpacking messageset") from None

    return LeanPartitionRecords


LeanPartitionRecords: Any = None  # built on first use (kafka-python is an optional extra)
_SELF_TEST: bool | None = None


def built_records(entries: list[tuple[bytes | None, bytes | None, list]], *, compression: int = 0,
                  base_offset: int = 0, timestamp: int = 1_767_225_600_000) -> Any:
    """kafka-python ``MemoryRecords`` of one v2 batch of ``(key, value, headers)`` entries (tests)."""
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 30, offset=base_offset)
    for i, (key, value, headers) in enumerate(entries):
        builder.append(timestamp=timestamp + i, key=key, value=value, headers=headers)
    builder.close()
    return MemoryRecords(bytes(builder.buffer()))


def unpack(tp: Any, records: Any, *, lean: bool = True, fetch_offset: int = 0, **options: Any) -> list:
    """Every record of ``records`` (``MemoryRecords``) as the fetcher hands them out, with
    :class:`LeanPartitionRecords` (``lean``) or kafka-python's own class."""
    cls = _lean() if lean else _partition_records_class()
    part = cls(fetch_offset, tp, records, **options)
    out: list = []
    while part:
        got = part.take(1000)
        if not got:
            break
        out.extend(got)
    return out


def _lean() -> type:
    global LeanPartitionRecords
    if LeanPartitionRecords is None:
        LeanPartitionRecords = _lean_class()
    return LeanPartitionRecords


def _self_test() -> bool:
    """Records equal to kafka-python's on a small batch with every field kind (built once)."""
    global _SELF_TEST
    if _SELF_TEST is None:
        try:
            from kafka.structs import TopicPartition

            tp = TopicPartition("self-test", 3)
            entries = [(b"k", b'{"ts": 1}', []), (None, b"x" * 300, [("h", b"1"), ("e", None)]), (b"k" * 200, None, [])]
            ok = True
            for compression in (0, 1):  # none, gzip (MemoryRecords are read once: built per use)
                lean = unpack(tp, built_records(entries, base_offset=7, compression=compression), fetch_offset=7)
                ok = ok and len(lean) == 3 and lean == unpack(
                    tp, built_records(entries, base_offset=7, compression=compression), lean=False, fetch_offset=7)
            _SELF_TEST = ok
        except Exception:  # noqa: BLE001 - other kafka-python internals: keep kafka-python's path
            log.debug("lean record unpacking unavailable", exc_info=True)
            _SELF_TEST = False
    return _SELF_TEST


def install(consumer: Any) -> bool:
    """Make ``consumer`` (a ``KafkaConsumer``) unpack plain batches with :func:`unpack_batch`; False
    (consumer unchanged) where its internals are not kafka-python 3.0's or the self-test fails."""
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not hasattr(fetcher, "PartitionRecords") or not _self_test():
        return False
    fetcher.PartitionRecords = _lean()
    return True
