"""The real Kafka clients of the ``consume`` service (kafka-python), built from a
:class:`~consumers.service.ServiceConfig`.

:class:`~consumers.service.MetricsService` only calls the methods listed in its docstring, so
tests hand it in-memory fakes instead (``tests/consumers/fakes.py``); this module is the one
place that builds ``KafkaConsumer`` / ``KafkaProducer`` and adapts the rebalance callbacks.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .lean_records import install as install_lean_records
from .settings import consumer_settings

if TYPE_CHECKING:
    from .service import ServiceConfig

__all__ = ["kafka_clients", "split_client_options", "rebalance_listener", "producer_settings"]

log = logging.getLogger("streammetrics.consume")


def producer_settings(config: "ServiceConfig", **overrides: Any) -> dict[str, Any]:
    """Producer settings of the service: acknowledged by all replicas, one request in flight
    (each key's snapshots stay in order), idempotent (kafka-python's default), and every
    blocking call bounded: ``send()`` waits at most ``delivery_timeout`` for metadata or buffer
    space (``max_block_ms``) and a record is failed after ``request_timeout_ms`` +
    ``linger_ms`` (``delivery_timeout_ms``), so a broker that is gone shows up as a failed
    send future instead of a hang."""
    block_ms = int(config.delivery_timeout * 1000)
    settings: dict[str, Any] = {
        "acks": "all", "linger_ms": 5,
        "max_in_flight_requests_per_connection": 1,
        "max_block_ms": block_ms,
        "request_timeout_ms": block_ms,
    }
    settings.update(overrides)
    # kafka-python refuses delivery_timeout_ms < linger_ms + request_timeout_ms
    settings.setdefault("delivery_timeout_ms", settings["linger_ms"] + settings["request_timeout_ms"] + 1)
    return settings


def kafka_clients(config: "ServiceConfig") -> tuple[Any, Any]:
    """``(KafkaConsumer, KafkaProducer)`` for ``config`` (the ``kafka`` extra); kafka-python's
    errors (no broker, bad TLS settings) propagate."""
    from kafka import KafkaConsumer, KafkaProducer  # the optional `kafka` extra

    consumer_options, producer_options = split_client_options(config.kafka_options)
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
    try:
        producer = KafkaProducer(bootstrap_servers=config.bootstrap_servers,
                                 **producer_settings(config, **producer_options))
    except BaseException:
        consumer.close(autocommit=False, timeout_ms=1000)
        raise
    return consumer, producer


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
