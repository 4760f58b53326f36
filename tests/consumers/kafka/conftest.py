"""Fixtures for tests against a real Kafka-protocol broker (tansu, memory storage).

One broker serves the whole session: tansu keeps everything in memory, so a restart would
lose every topic and committed offset. Tests isolate themselves with unique topic and group
names instead. Every test in this directory gets the ``kafka`` marker (``-m "not kafka"``
skips them). Client settings that matter with tansu are explained in consumers/NOTES.md.

Deliberately no ``__init__.py`` here: it would make this directory a package named
``kafka`` and shadow kafka-python.
"""
from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from consumers.broker import EmbeddedBroker, create_topics
from consumers.settings import GROUP_SETTINGS

_HERE = Path(__file__).parent
_counter = itertools.count()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected from this directory with ``kafka``."""
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """The session's embedded broker on a free 127.0.0.1 port, stopped by pid at the end."""
    broker = EmbeddedBroker(host="127.0.0.1").start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: EmbeddedBroker) -> str:
    """``127.0.0.1:PORT`` of the session broker."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_name(prefix)``: a legal, session-unique topic or group name for this test."""
    test = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]

    def make(prefix: str = "t") -> str:
        return f"{prefix}.{test}.{next(_counter)}.{uuid.uuid4().hex[:6]}"

    return make


@pytest.fixture
def new_topic(bootstrap_servers: str, unique_name: Callable[[str], str]) -> Callable[..., str]:
    """``new_topic(partitions=1, configs=None, prefix="t")``: create a unique topic, return its name.

    Create topics before any client uses them: tansu auto-creates unknown topics with 4
    partitions on the first metadata request.
    """

    def make(partitions: int = 1, configs: dict[str, str] | None = None, prefix: str = "t") -> str:
        name = unique_name(prefix)
        created = create_topics(bootstrap_servers, {name: partitions}, configs, exist_ok=False)
        assert created == {name: partitions}, created
        return name

    return make


@pytest.fixture
def kafka_consumer_config(bootstrap_servers: str) -> dict[str, Any]:
    """Consumer settings for tests: fast group joins, manual commits, read from the start."""
    return {
        "bootstrap_servers": bootstrap_servers,
        "auto_offset_reset": "earliest",  # "latest" is unreliable on tansu, see NOTES.md
        "enable_auto_commit": False,
        **GROUP_SETTINGS,
    }


@pytest.fixture
def make_consumer(kafka_consumer_config: dict[str, Any]) -> Iterator[Callable[..., Any]]:
    """``make_consumer(*topics, **overrides)``: a KafkaConsumer closed after the test."""
    from kafka import KafkaConsumer

    consumers: list[KafkaConsumer] = []

    def make(*topics: str, **overrides: Any) -> KafkaConsumer:
        consumer = KafkaConsumer(*topics, **{**kafka_consumer_config, **overrides})
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.close(autocommit=False, timeout_ms=2000)


@pytest.fixture
def make_producer(bootstrap_servers: str) -> Iterator[Callable[..., Any]]:
    """``make_producer(**overrides)``: a KafkaProducer (idempotent, acks=all) closed after the test."""
    from kafka import KafkaProducer

    producers: list[KafkaProducer] = []

    def make(**overrides: Any) -> KafkaProducer:
        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, **overrides)
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.close(timeout=5)
