"""The real Kafka clients of the ``consume`` service (kafka-python), built from a
:class:`~consumers.service.ServiceConfig`.

:class:`~consumers.service.MetricsService` only calls the methods listed in its docstring, so
tests hand it in-memory fakes instead (``tests/consumers/fakes.py``); this module is the one
place that builds ``KafkaConsumer`` / ``KafkaProducer`` and adapts the rebalance callbacks.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from .lean_records import install as install_lean_records
from .settings import consumer_settings

if TYPE_CHECKING:
    from .service import ServiceConfig

__all__ = ["kafka_clients", "kafka_consumer", "split_client_options", "rebalance_listener", "producer_settings",
           "install_fetch_guard", "fetch_error_position", "mark_fetch_error", "FetchPosition", "group_stable",
           "one_partition_partitioner"]

log = logging.getLogger("streammetrics.consume")


def producer_settings(config: "ServiceConfig", **overrides: Any) -> dict[str, Any]:
    """Producer settings of the service: acknowledged by all replicas, one request in flight
    (each key's snapshots stay in order), idempotent (kafka-python's default), and every
    blocking call bounded: ``send()`` waits at most ``delivery_timeout`` for metadata or buffer
    space (``max_block_ms``) and a record is failed after ``request_timeout_ms`` +
    ``linger_ms`` (``delivery_timeout_ms``), so a broker that is gone shows up as a failed
    send future instead of a hang.

    Batches of up to ``batch_size`` 256 KiB (kafka-python's default 16 KiB) gathered for up to
    ``linger_ms`` 20 ms: with one request in flight, kafka-python wakes its sender thread at every
    ``send`` once a second batch waits behind the one in flight (``RecordAccumulator.append``:
    ``batch_is_full = len(dq) > 1``), a socket write and a GIL hand-over per snapshot; at 100,000
    keys a window close sends ~90,000 snapshots at once (benchmarks/bench_state.py: the sender's
    CPU fell from 1.0 to 0.2 CPU-s per 21,615 snapshots). kafka-python 3.0.12 grows a batch's
    buffer as records come (nothing is reserved per batch); 256 KiB stays under a broker's
    ``message.max.bytes`` (1 MB). Each checkpoint flushes, so no snapshot waits longer than that."""
    block_ms = int(config.delivery_timeout * 1000)
    settings: dict[str, Any] = {
        "acks": "all", "linger_ms": 20, "batch_size": 256 * 1024,
        "max_in_flight_requests_per_connection": 1,
        "max_block_ms": block_ms,
        "request_timeout_ms": block_ms,
    }
    settings.update(overrides)
    # kafka-python refuses delivery_timeout_ms < linger_ms + request_timeout_ms
    settings.setdefault("delivery_timeout_ms", settings["linger_ms"] + settings["request_timeout_ms"] + 1)
    return settings


def one_partition_partitioner() -> Any:
    """kafka-python's ``DefaultPartitioner`` that answers at once for a topic of one partition (the
    output, changelog and dead-letter topics, most often): the partition murmur2 of the key, or a
    random choice, would give anyway (``idx % 1 == 0``), without hashing the key in pure Python
    (~5 us per snapshot, of ~19 us per ``send``); other topics get the default's answer."""
    from kafka.partitioner import DefaultPartitioner

    class OnePartitionFirst(DefaultPartitioner):
        def partition(self, topic: str, key: Any, serialized_key: Any, value: Any, serialized_value: Any,
                      cluster: Any) -> Any:
            partitions = cluster.partitions_for_topic(topic)
            if partitions is not None and len(partitions) == 1:
                return next(iter(partitions))
            return super().partition(topic, key, serialized_key, value, serialized_value, cluster)

    return OnePartitionFirst()


def kafka_clients(config: "ServiceConfig") -> tuple[Any, Any]:
    """``(KafkaConsumer, KafkaProducer)`` for ``config`` (the ``kafka`` extra); kafka-python's
    errors (no broker, bad TLS settings) propagate."""
    from kafka import KafkaProducer  # the optional `kafka` extra

    consumer = kafka_consumer(config)
    _, producer_options = split_client_options(config.kafka_options)
    producer_options.setdefault("partitioner", one_partition_partitioner())
    try:
        producer = KafkaProducer(bootstrap_servers=config.bootstrap_servers,
                                 **producer_settings(config, **producer_options))
    except BaseException:
        consumer.close(autocommit=False, timeout_ms=1000)
        raise
    return consumer, producer


def kafka_consumer(config: "ServiceConfig") -> Any:
    """The service's ``KafkaConsumer`` (group ``config.group_id``, not yet subscribed); also what a
    forced rejoin (``--rejoin-after``) replaces a stuck consumer with."""
    from kafka import KafkaConsumer  # the optional `kafka` extra

    consumer_options, _ = split_client_options(config.kafka_options)
    if config.labels_topic and "partition_assignment_strategy" not in consumer_options:
        # --labels-topic: partition p of both topics must go to the same member. kafka-python's
        # RangePartitionAssignor sorts the members of each topic the same way and cuts each topic's
        # sorted partitions into the same ranges, so co-partitioned topics (same partition count,
        # every member subscribed to both) get the same partition numbers on each member. The
        # round-robin and cooperative-sticky assignors do not promise that.
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        consumer_options["partition_assignment_strategy"] = (RangePartitionAssignor,)
    consumer = KafkaConsumer(
        bootstrap_servers=config.bootstrap_servers,
        group_id=config.group_id,
        **consumer_settings(max_poll_records=config.max_poll_records, **consumer_options),
    )
    if config.lean_records and not install_lean_records(consumer):  # the same records, ~3.5 us cheaper each
        log.info("record batches unpacked by kafka-python's own loop: consumers.lean_records does not apply "
                 "to this kafka-python version")
    if not install_fetch_guard(consumer):
        log.warning("fetch errors cannot be attributed to a partition with this kafka-python version: an "
                    "unreadable batch is retried with back-off instead of skipped")
    return consumer


def group_stable(consumer: Any) -> bool | None:
    """Whether ``consumer`` (a ``KafkaConsumer``) is a member of a stable group generation (joined and
    synced): False while it (re-)joins, None when this cannot be told (not kafka-python 3's
    coordinator, e.g. the tests' fakes). kafka-python has no public call for it; its coordinator's
    ``stable()`` is what its heartbeat thread checks."""
    stable = getattr(getattr(consumer, "_coordinator", None), "stable", None)
    if not callable(stable):
        return None
    try:
        return bool(stable())
    except Exception:  # noqa: BLE001 - a client in an unexpected state: nothing to tell
        return None


def split_client_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--kafka`` options for the consumer and for the producer (TLS/SASL settings go to both);
    ValueError naming any option neither kafka-python client knows."""
    from kafka import KafkaConsumer, KafkaProducer

    consumer = {k: v for k, v in options.items() if k in KafkaConsumer.DEFAULT_CONFIG}
    producer = {k: v for k, v in options.items() if k in KafkaProducer.DEFAULT_CONFIG}
    unknown = sorted(set(options) - set(consumer) - set(producer))
    if unknown:
        raise ValueError(f"unknown --kafka option(s) {unknown}: see kafka-python's KafkaConsumer and "
                         "KafkaProducer settings (e.g. security_protocol, ssl_cafile, sasl_mechanism)")
    return consumer, producer


def rebalance_listener(on_assigned: Any, on_revoked: Any) -> Any:
    """A ``kafka.ConsumerRebalanceListener`` calling ``on_assigned(tps)`` / ``on_revoked(tps)``
    (kafka-python's ``subscribe`` accepts only subclasses of it)."""
    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            on_revoked(revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            on_assigned(assigned)

    return Listener()


class FetchPosition(NamedTuple):
    """Where the consumer failed to read: ``tp``, the first offset it could not hand out, and the
    offset after the record batch holding it (``offset + 1`` when the batch is unknown)."""

    tp: Any
    offset: int
    skip_to: int


_POSITION_ATTR = "streammetrics_fetch_position"


def mark_fetch_error(exc: BaseException, tp: Any, offset: int, skip_to: int) -> BaseException:
    """Attach a :class:`FetchPosition` to ``exc`` (raised by the consumer's ``poll``)."""
    setattr(exc, _POSITION_ATTR, FetchPosition(tp, offset, max(skip_to, offset + 1)))
    return exc


def fetch_error_position(exc: BaseException) -> FetchPosition | None:
    """The :class:`FetchPosition` of an exception out of ``poll``; None if it is not a record
    batch's (no broker, a rebalance, an authorisation error...)."""
    position = getattr(exc, _POSITION_ATTR, None)
    return position if isinstance(position, FetchPosition) else None


class _Batches:
    """``MemoryRecords`` remembering the last batch handed out (its ``next_offset`` is read from
    the batch header, so it is known even when the batch cannot be decompressed)."""

    __slots__ = ("records", "batch")

    def __init__(self, records: Any) -> None:
        self.records = records
        self.batch: Any = None

    def next_batch(self, *args: Any, **kwargs: Any) -> Any:
        self.batch = None
        self.batch = self.records.next_batch(*args, **kwargs)
        return self.batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.records, name)


_GUARDED: dict[type, type] = {}


def guarded_partition_records(base: type) -> type:
    """``base`` (kafka-python 3.0's ``Fetcher.PartitionRecords`` or :mod:`consumers.lean_records`'
    subclass) whose ``take`` marks any exception (unsupported codec, CRC, corrupt batch) with
    its :class:`FetchPosition` and drops the partition's fetched data, so that the fetcher
    fetches again from the consumer's position (kafka-python 3.0.12 otherwise keeps the
    exhausted iterator and returns nothing for that partition any more)."""
    if base in _GUARDED:
        return _GUARDED[base]

    class GuardedPartitionRecords(base):  # kafka-python's class (a type from a variable)
        def __init__(self, fetch_offset: Any, tp: Any, records: Any, *args: Any, **kwargs: Any) -> None:
            self._batches = _Batches(records)
            super().__init__(fetch_offset, tp, self._batches, *args, **kwargs)

        def take(self, n: Any = None) -> Any:
            try:
                return super().take(n)
            except Exception as exc:
                offset = self.next_fetch_offset
                end = getattr(self._batches.batch, "next_offset", None)
                mark_fetch_error(exc, self.topic_partition, offset, end if isinstance(end, int) else offset + 1)
                self.drain()
                raise

    GuardedPartitionRecords.__name__ = GuardedPartitionRecords.__qualname__ = f"Guarded{base.__name__}"
    _GUARDED[base] = GuardedPartitionRecords
    return GuardedPartitionRecords


def install_fetch_guard(consumer: Any) -> bool:
    """Make ``consumer`` (a ``KafkaConsumer``) mark the exceptions its record batches raise with
    a :class:`FetchPosition` (:func:`fetch_error_position`), for the service to retry or skip
    that batch; False (unchanged) where its internals are not kafka-python 3.0's."""
    fetcher = getattr(consumer, "_fetcher", None)
    base = getattr(fetcher, "PartitionRecords", None)
    if not isinstance(base, type):
        return False
    fetcher.PartitionRecords = guarded_partition_records(base)  # type: ignore[union-attr]
    return True
