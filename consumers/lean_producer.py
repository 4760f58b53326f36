"""Many records into kafka-python's producer at once (the service's snapshots of a window close).

``KafkaProducer.send`` costs ~15 us of the calling thread per small record in CPython (argument
checks, serialisers, the partitioner, a size estimate, two locked counters and the partition's
lock, ``DefaultRecordBatchBuilder.append``, a future per record) and, with one request in
flight, wakes the sender thread at every record once a second batch waits: at 100,000 keys a
window close sends ~86,000 snapshots, 1.3 s of the loop's thread and ~0.4 s of the sender's
(``benchmarks/bench_state.py``). :meth:`RecordSender.send_many` appends a list of records to the
accumulator's batches under the partition's lock once: each record written by one
``bytes.join`` (varints from a table) into a :class:`LeanRecords` batch, the *same* bytes
kafka-python's ``MemoryRecordsBuilder`` writes (record layout, offsets, timestamp deltas, the
header, CRC and producer state, ``batch_size`` cuts: a self-test before first use, and
``tests/consumers/test_lean_producer.py``), one :class:`Delivery` per batch instead of a future
per record, the sender woken once.

Everything after the append is kafka-python's own: draining, idempotent sequence numbers,
retries, expiry, and the split of a batch the broker finds too large (the records' futures are
then made on demand, so delivery is still followed record by record). The lean path is used for
a topic of one partition (the snapshot topic, usually) of a kafka-python 3.0 ``KafkaProducer``
(its accumulator's ``_batches``, ``_tp_lock``, ``_incomplete``, ``_closed`` and ``_sender``:
the reads of its internals, as :mod:`consumers.lean_records` reads the fetcher's) that is not
transactional, writes message format 2 without compression and passes the self-test; otherwise
:meth:`RecordSender.send_many` is ``producer.send`` of each record (also with the tests' fakes).
The service appends from its one loop thread, which also closes the producer, so no append is
in progress when kafka-python aborts the incomplete batches of a forced close.
"""
from __future__ import annotations

import logging
import struct
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["Delivery", "LeanRecords", "RecordSender", "encode_record", "self_test"]

log = logging.getLogger("streammetrics.consume")

#: a record handed to :meth:`RecordSender.send_many`: (key, value, headers)
Record = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


def _zigzag(n: int) -> bytes:
    """Kafka's signed varint of ``n`` (zigzag, then 7 bits a byte, low first)."""
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_SMALL = 1 << 13  # zigzag(n) of 0 <= n < 8192 fits two bytes
_VARINTS = tuple(_zigzag(n) for n in range(_SMALL))
_NULL = b"\x01"  # zigzag(-1): a null key, value or header value


def _varint(n: int) -> bytes:
    return _VARINTS[n] if 0 <= n < _SMALL else _zigzag(n)


def encode_record(key: bytes | None, value: bytes | None,
                  headers: Sequence[tuple[str, bytes | None]]) -> tuple[int, bytes, bytes | None, bytes]:
    """A record after its offset delta as kafka-python's ``DefaultRecordBatchBuilder.append``
    writes it, in parts: ``(size, head, value, tail)``: the key and the value's length, the value
    itself (not copied; None for a null value, which the head says), the headers."""
    varints, small = _VARINTS, _SMALL
    if key is None:
        head = _NULL
    else:
        n = len(key)
        head = (varints[n] if n < small else _zigzag(n)) + key
    if value is None:
        head += _NULL
        size = 0
    else:
        size = len(value)
        head += varints[size] if size < small else _zigzag(size)
    if headers:
        parts = [_varint(len(headers))]
        for h_key, h_value in headers:
            name = h_key.encode("utf-8")
            parts += (_varint(len(name)), name)
            if h_value is None:
                parts.append(_NULL)
            else:
                parts += (_varint(len(h_value)), h_value)
        tail = b"".join(parts)
    else:
        tail = b"\x00"
    return len(head) + size + len(tail), head, value, tail


class LeanRecords:
    """A v2 record batch being written, in place of kafka-python's ``MemoryRecordsBuilder`` in a
    ``ProducerBatch`` (its interface as the accumulator and the sender use it), taking records
    only in bulk (:meth:`append_many`; a single ``append`` is refused, so kafka-python opens a
    batch of its own for a ``send``). Without compression; the header, its CRC-32C and the
    producer state are written at :meth:`close` as ``DefaultRecordBatchBuilder.build`` writes them."""

    __slots__ = ("batch_size", "_buffer", "_count", "_first_ts", "_max_ts", "_closed", "_producer")

    def __init__(self, batch_size: int) -> None:
        from kafka.record.default_records import DefaultRecordBatch

        self.batch_size = batch_size
        self._buffer = bytearray(DefaultRecordBatch.HEADER_STRUCT.size)
        self._count = 0
        self._first_ts: int | None = None
        self._max_ts = 0
        self._closed = False
        self._producer = (-1, -1, -1, False)  # producer id, epoch, base sequence, transactional

    def append_many(self, timestamp: int, records: Sequence[Record], start: int) -> tuple[int, int]:
        """Append ``records[start:]`` while they fit in ``batch_size`` (the first always), each
        written as it is appended (:func:`encode_record`: nothing held per record meanwhile);
        ``(index of the first not appended, the largest record's size)``. Nothing once closed."""
        if self._closed:
            return start, 0
        buf = self._buffer
        limit = self.batch_size
        if self._first_ts is None:
            self._first_ts = self._max_ts = timestamp
        offset = self._count
        first = offset == 0
        delta = b"\x00" + _varint(timestamp - self._first_ts)  # (attributes, timestamp delta)
        varints, small, join, encode = _VARINTS, _SMALL, b"".join, encode_record
        size = len(buf)
        largest = 0
        i, n = start, len(records)
        while i < n:
            body, head, value, tail = encode(*records[i])
            at = delta + (varints[offset] if offset < small else _zigzag(offset))
            length = len(at) + body
            prefix = varints[length] if length < small else _zigzag(length)
            required = length + len(prefix)
            if size + required > limit and not first:
                break
            buf += join((prefix, at, head, value, tail)) if value is not None else join((prefix, at, head, tail))
            size += required
            if required > largest:
                largest = required
            first = False
            offset += 1
            i += 1
        self._count = offset
        if i > start and timestamp > self._max_ts:
            self._max_ts = timestamp
        return i, largest

    def append(self, timestamp: Any, key: Any, value: Any, headers: Any = None) -> None:
        return None

    def next_offset(self) -> int:
        return self._count

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool) -> None:
        if self._closed:  # (as MemoryRecordsBuilder: a retried batch keeps its sequence numbers)
            from kafka.errors import IllegalStateError

            raise IllegalStateError("Trying to set producer state of an already closed batch.")
        self._producer = (producer_id, producer_epoch, base_sequence, is_transactional)

    @property
    def producer_id(self) -> int:
        return self._producer[0]

    @property
    def producer_epoch(self) -> int:
        return self._producer[1]

    @property
    def base_sequence(self) -> int:
        return self._producer[2]

    def close(self) -> None:
        """Write the header (kafka-python's ``DefaultRecordBatchBuilder.write_header``)."""
        if self._closed:
            return
        from kafka.record.default_records import DefaultRecordBatch
        from kafka.record.util import calc_crc32c

        buf = self._buffer
        producer_id, epoch, sequence, transactional = self._producer
        DefaultRecordBatch.HEADER_STRUCT.pack_into(
            buf, 0, 0, len(buf) - DefaultRecordBatch.AFTER_LEN_OFFSET, 0, 2, 0,
            DefaultRecordBatch.TRANSACTIONAL_MASK if transactional else 0, max(self._count - 1, 0),
            self._first_ts or 0, self._max_ts or 0, producer_id, epoch, sequence, self._count)
        crc = calc_crc32c(memoryview(buf)[DefaultRecordBatch.ATTRIBUTES_OFFSET:])
        struct.pack_into(">I", buf, DefaultRecordBatch.CRC_OFFSET, crc)
        self._closed = True

    def buffer(self) -> bytearray:
        assert self._closed
        return self._buffer

    def size_in_bytes(self) -> int:
        return len(self._buffer)

    def compression_rate(self) -> float:
        return 1.0

    def is_full(self) -> bool:
        return self._closed or len(self._buffer) >= self.batch_size


class Delivery:
    """Whether one batch's records were delivered, as kafka-python's futures say it:
    :attr:`is_done`, :meth:`failed`, :attr:`exception`. A batch the sender split (the broker
    found it too large) is followed through its records' futures."""

    __slots__ = ("future", "split")

    def __init__(self, future: Any, split: _LazyFutures) -> None:
        self.future = future  # the batch's FutureProduceResult
        self.split = split

    @property
    def is_done(self) -> bool:
        if self.future.is_done:
            return True
        made = self.split.made
        return bool(made) and all(f.is_done for f in made)

    def failed(self) -> bool:
        future = self.future
        if future.is_done:
            return bool(future.failed() or future.value[2] is not None)
        return any(f.failed() for f in self.split.made)

    @property
    def exception(self) -> BaseException | None:
        future = self.future
        if future.is_done:
            if future.failed():
                return future.exception
            errors = future.value[2]  # (base offset, log append time, record errors or None)
            return errors(0) if errors is not None else None
        return next((f.exception for f in self.split.made if f.failed()), None)


class _LazyFutures:
    """A lean batch's record futures: kafka-python asks for them only to split the batch
    (``RecordAccumulator.split_and_reenqueue`` re-binds each to its new batch); each is made
    when asked for, and kept (:class:`Delivery` then follows them)."""

    __slots__ = ("records", "produce_future", "made", "timestamp")

    def __init__(self, records: LeanRecords, produce_future: Any, timestamp: int) -> None:
        self.records = records
        self.produce_future = produce_future
        self.timestamp = timestamp
        self.made: list[Any] = []

    def __len__(self) -> int:
        return self.records.next_offset()

    def __getitem__(self, index: int) -> Any:
        from kafka.producer.future import FutureRecordMetadata

        future = FutureRecordMetadata(self.produce_future, index, self.timestamp, None, -1, -1, -1)
        self.made.append(future)
        return future

    def append(self, future: Any) -> None:  # (never: a lean batch takes no single records)
        raise TypeError("a lean batch takes no single records")


_BATCH: Any = None


def _batch_class() -> Any:
    """``ProducerBatch`` of :class:`LeanRecords` with :class:`_LazyFutures` (kafka-python
    imported on first use)."""
    global _BATCH
    if _BATCH is None:
        from kafka.producer.producer_batch import ProducerBatch

        class LeanBatch(ProducerBatch):
            def __init__(self, tp: Any, records: LeanRecords, now: float, timestamp: int) -> None:
                super().__init__(tp, records, now=now)
                self._record_futures = _LazyFutures(records, self.produce_future, timestamp)
                self.delivery = Delivery(self.produce_future, self._record_futures)

        _BATCH = LeanBatch
    return _BATCH


def self_test() -> bool:
    """Whether :class:`LeanRecords` writes the bytes kafka-python's ``MemoryRecordsBuilder`` writes
    (small and large keys, values and headers, null ones, ``batch_size`` cuts, a later timestamp,
    a producer state)."""
    try:
        from kafka.record.memory_records import MemoryRecordsBuilder

        records: list[Record] = [
            (b"k", b'{"a":1}', [("h", b"1")]), (None, b"v" * 200, []), (b"x" * 9000, None, [("\u00e9", None)]),
            (b"m|s|1.0", b"w" * 8190, [("streammetrics.content", b"f" * 64), ("b", b"")]), (b"", b"", []),
        ]
        ts = 1_767_225_600_000
        for batch_size, state in ((1 << 20, (-1, -1, -1, False)), (9000, (7, 1, 5, False)), (1 << 20, (7, 1, 5, True))):
            theirs = MemoryRecordsBuilder(2, 0, batch_size)
            ours = LeanRecords(batch_size)
            done, _ = ours.append_many(ts, records[:2], 0)
            end, _ = ours.append_many(ts + 20_000, records, done)
            count = 0
            for i, (key, value, headers) in enumerate(records):
                if theirs.append(ts if i < 2 else ts + 20_000, key, value, headers) is None:
                    break
                count += 1
            if end != count or ours.next_offset() != theirs.next_offset():
                return False
            theirs.set_producer_state(*state)
            ours.set_producer_state(*state)
            theirs.close()
            ours.close()
            if bytes(theirs.buffer()) != bytes(ours.buffer()) or ours.base_sequence != theirs.base_sequence:
                return False
        return True
    except Exception:  # noqa: BLE001 - any difference in kafka-python's internals: not used
        log.debug("lean producer self-test failed", exc_info=True)
        return False


def _lean_capable(producer: Any) -> bool:
    """A kafka-python 3.0 ``KafkaProducer`` (not transactional, message format v2, no compression)
    whose accumulator has the parts :meth:`RecordSender._append` uses, and :func:`self_test`."""
    try:
        from kafka import KafkaProducer
    except ImportError:
        return False
    if not isinstance(producer, KafkaProducer):
        return False
    acc = getattr(producer, "_accumulator", None)
    config = getattr(acc, "config", None) or {}
    if config.get("message_version") != 2 or config.get("compression_attrs") != 0 or \
            config.get("transaction_manager") is not None and config["transaction_manager"].is_transactional():
        return False
    if not all(hasattr(acc, name) for name in ("_batches", "_tp_lock", "_incomplete", "_closed")):
        return False
    return hasattr(getattr(producer, "_sender", None), "wakeup") and self_test()


class RecordSender:
    """``send_many`` of one producer: lean when :func:`_lean_capable`, else ``send`` each."""

    __slots__ = ("producer", "lean")

    def __init__(self, producer: Any, lean: bool = True) -> None:
        self.producer = producer
        #: whether records of one-partition topics go straight into kafka-python's accumulator
        self.lean = lean and _lean_capable(producer)

    def send_many(self, topic: str, records: Sequence[Record]) -> list[Any]:
        """Send ``records`` to ``topic`` in order (partitioned as ``send`` partitions them); the
        handles to check after a flush (``is_done``, ``failed()``, ``exception``): a
        :class:`Delivery` per batch, or ``send``'s futures. Raises as ``send`` would (a closed
        producer, a record over ``max_request_size``, no metadata within ``max_block_ms``),
        before anything is appended."""
        if not records:
            return []
        producer = self.producer
        partitions = producer.partitions_for(topic) if self.lean else None  # (waits for metadata, as send)
        if partitions is None or len(partitions) != 1:
            return [producer.send(topic, key=key, value=value, headers=headers) for key, value, headers in records]
        from kafka.errors import MessageSizeTooLargeError
        from kafka.record.default_records import DefaultRecordBatchBuilder
        from kafka.structs import TopicPartition

        limit = producer.config["max_request_size"]
        for key, value, headers in records:
            if key is None and value is None:
                raise ValueError("Need at least one: key or value")
            bound = 61 + 21 + 10 + (len(key) if key else 0) + (len(value) if value else 0) + 5 + sum(
                10 + 3 * len(h) + (len(v) if v else 0) for h, v in headers)  # above kafka-python's estimate
            if bound > limit:
                size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
                if size > limit:  # (send's words)
                    raise MessageSizeTooLargeError(
                        f"The message is {size} bytes when serialized which is larger than the maximum request "
                        f"size you have configured with the max_request_size configuration")
        handles = self._append(TopicPartition(topic, next(iter(partitions))), records)
        producer._sender.wakeup()  # noqa: SLF001 - kafka-python's producer (see the module docstring)
        return handles

    def _append(self, tp: Any, records: Sequence[Record]) -> list[Delivery]:
        """kafka-python's ``RecordAccumulator.append`` for many records: into the partition's last
        batch while it is a lean one with room, then into new lean batches."""
        from kafka.errors import IllegalStateError

        batch_class = _batch_class()
        acc = self.producer._accumulator  # noqa: SLF001 - see the module docstring
        batch_size = acc.config["batch_size"]
        timestamp = int(time.time() * 1000)
        now = time.monotonic()
        handles: list[Delivery] = []
        i, n = 0, len(records)
        with acc._tp_lock(tp):  # noqa: SLF001
            if acc._closed:  # noqa: SLF001
                raise IllegalStateError("RecordAccumulator is closed")
            queue = acc._batches[tp]  # noqa: SLF001
            while i < n:
                last = queue[-1] if queue else None
                if last is not None and last.__class__ is batch_class:
                    end, largest = last.records.append_many(timestamp, records, i)
                    if end > i:
                        last.last_append = now
                        last.max_record_size = max(last.max_record_size, largest)
                        handles.append(last.delivery)
                        i = end
                        continue
                batch = batch_class(tp, LeanRecords(batch_size), now, timestamp)
                queue.append(batch)
                acc._incomplete.add(batch)  # noqa: SLF001
        return handles
