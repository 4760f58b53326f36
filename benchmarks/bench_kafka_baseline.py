"""Benchmark: a bare kafka-python loop reading prediction events from the embedded broker.

    python benchmarks/bench_kafka_baseline.py [--quick] [--messages N] [--batched-events M] [--repeat R]

Starts an embedded tansu broker (127.0.0.1, free port), fills one topic with N single-event
JSON messages and one with M events in JSON arrays of 100 (realistic binary-task prediction
events: ts, model, segment, y_true, score, id; message key ``model|segment``), then times a
consumer that only polls and ``json.loads`` each topic from the beginning: the ceiling any
consumer written in Python on kafka-python can reach here.

``benchmarks/bench_consumer.py`` imports :func:`fill_single_events`,
:func:`fill_batched_events` and :func:`bare_consume` to run this loop next to the service on
the same topics in the same run. Timings are the best of ``--repeat`` reads (the machine is
shared); a read is timed from its first record to its last, excluding connection setup.
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from consumers.broker import EmbeddedBroker, create_topics
from streammetrics.stream.synthetic import generate_events

#: Consumer settings compared by ``main``. kafka-python verifies each record batch's CRC32C,
#: in pure Python unless the optional ``crc32c`` C extension is installed.
CONSUMER_VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "check_crcs=False": {"check_crcs": False},
}

#: Producer settings for filling topics quickly (throughput over latency).
FILL_PRODUCER_CONFIG: dict[str, Any] = {"acks": 1, "linger_ms": 20, "batch_size": 512 * 1024}


@dataclass(frozen=True)
class Filled:
    """A topic filled with prediction events."""

    topic: str
    messages: int
    events: int
    seconds: float  # producing time


@dataclass(frozen=True)
class ReadRate:
    """One timed read of a topic."""

    events: int
    messages: int
    seconds: float
    cpu_seconds: float = 0.0  # CPU time of this process (all threads) over the same interval

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")

    @property
    def events_per_cpu_s(self) -> float:
        return self.events / self.cpu_seconds if self.cpu_seconds > 0 else float("inf")


def prediction_events(n: int, seed: int = 11) -> Iterator[dict]:
    """``n`` binary-task prediction events from drifting models (deterministic for a seed)."""
    return generate_events(n, seed=seed)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _stream_key(event: dict) -> bytes:
    return f"{event['model']}|{event['segment']}".encode()


def single_messages(events: Iterable[dict]) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) per event: one JSON object per message."""
    for event in events:
        yield _stream_key(event), _dumps(event)


def batched_messages(events: Iterable[dict], batch_size: int = 100) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) per ``batch_size`` events of one stream key: a JSON array per message.

    Batches are per key, so every (model, segment) stream stays on one partition.
    """
    pending: dict[bytes, list[dict]] = {}
    for event in events:
        key = _stream_key(event)
        batch = pending.setdefault(key, [])
        batch.append(event)
        if len(batch) == batch_size:
            yield key, _dumps(batch)
            del pending[key]
    for key, batch in pending.items():
        yield key, _dumps(batch)


def produce(bootstrap: str, topic: str, messages: Iterable[tuple[bytes, bytes]],
            **producer_config: Any) -> tuple[int, float]:
    """Send (key, value) messages and wait for every acknowledgement; returns (count, seconds)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **{**FILL_PRODUCER_CONFIG, **producer_config})
    errors: list[BaseException] = []
    count = 0
    start = time.perf_counter()
    try:
        for key, value in messages:
            producer.send(topic, key=key, value=value).add_errback(errors.append)
            count += 1
        producer.flush(timeout=300)
    finally:
        producer.close(timeout=10)
    if errors:
        raise RuntimeError(f"{len(errors)} of {count} messages to {topic!r} failed, first: {errors[0]!r}")
    return count, time.perf_counter() - start


def fill_single_events(bootstrap: str, topic: str, n_messages: int, *, partitions: int = 3,
                       seed: int = 11) -> Filled:
    """Create ``topic`` and fill it with ``n_messages`` single-event messages."""
    create_topics(bootstrap, {topic: partitions}, exist_ok=False)
    count, seconds = produce(bootstrap, topic, single_messages(prediction_events(n_messages, seed)))
    return Filled(topic, count, n_messages, seconds)


def fill_batched_events(bootstrap: str, topic: str, n_events: int, *, batch_size: int = 100,
                        partitions: int = 3, seed: int = 11) -> Filled:
    """Create ``topic`` and fill it with ``n_events`` events in JSON arrays of ``batch_size``."""
    create_topics(bootstrap, {topic: partitions}, exist_ok=False)
    messages = batched_messages(prediction_events(n_events, seed), batch_size)
    count, seconds = produce(bootstrap, topic, messages)
    return Filled(topic, count, n_events, seconds)


def bare_consume(bootstrap: str, topic: str, expected_events: int, *, timeout: float = 300.0,
                 decode: Callable[[bytes], Any] = json.loads, lean_records: bool = False,
                 **consumer_config: Any) -> ReadRate:
    """Read ``topic`` from the beginning, only polling and decoding every value (``decode``:
    ``json.loads`` by default; pass the service's decoder for a like-for-like ceiling).
    ``lean_records``: unpack record batches with :mod:`consumers.lean_records`, as the service's
    consumer does (the same records; off by default: kafka-python's own loop).

    Stops after ``expected_events`` events (an array message counts its elements); raises
    ``TimeoutError`` if they do not arrive within ``timeout`` seconds.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **consumer_config)
    if lean_records:
        from consumers.lean_records import install

        if not install(consumer):
            raise RuntimeError("consumers.lean_records does not apply to this kafka-python")
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            raise RuntimeError(f"topic {topic!r} does not exist")
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        loads = decode
        events = messages = 0
        start = cpu_start = None
        deadline = time.monotonic() + timeout
        while events < expected_events:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {events} of {expected_events} events of {topic!r} in {timeout} s")
            for records in consumer.poll(timeout_ms=500).values():
                if start is None:
                    start, cpu_start = time.perf_counter(), time.process_time()
                for record in records:
                    value = loads(record.value)
                    events += len(value) if type(value) is list else 1
                messages += len(records)
        return ReadRate(events, messages, time.perf_counter() - start, time.process_time() - cpu_start)
    finally:
        consumer.close(autocommit=False)


def crc32c_implementation() -> str:
    """Which CRC32C kafka-python uses: the ``crc32c`` C extension or its pure-Python fallback."""
    from kafka.record import util

    return "C (crc32c package)" if util.crc32c_c is not None else "pure Python (no crc32c package)"


def best_read(bootstrap: str, topic: str, expected_events: int, repeat: int, **consumer_config: Any) -> ReadRate:
    """The fastest of ``repeat`` bare reads."""
    reads = [bare_consume(bootstrap, topic, expected_events, **consumer_config) for _ in range(repeat)]
    return min(reads, key=lambda r: r.seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small topics (smoke test)")
    parser.add_argument("--messages", type=int, default=None,
                        help="single-event messages (default 200000; 20000 with --quick)")
    parser.add_argument("--batched-events", type=int, default=None,
                        help="events in arrays of 100 (default 1000000; 100000 with --quick)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="reads per topic, best kept (default 3; 1 with --quick)")
    args = parser.parse_args(argv)
    n_single = args.messages or (20_000 if args.quick else 200_000)
    n_batched = args.batched_events or (100_000 if args.quick else 1_000_000)
    repeat = args.repeat or (1 if args.quick else 3)

    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        print(f"embedded tansu broker on {bootstrap}")
        single = fill_single_events(bootstrap, "bench-single", n_single)
        batched = fill_batched_events(bootstrap, "bench-batched", n_batched)
        for filled in (single, batched):
            print(f"filled {filled.topic}: {filled.messages:,} messages, {filled.events:,} events "
                  f"in {filled.seconds:.1f} s ({filled.messages / filled.seconds:,.0f} messages/s produced)")
        rows = [(filled, name, best_read(bootstrap, filled.topic, filled.events, repeat, **config))
                for filled in (single, batched) for name, config in CONSUMER_VARIANTS.items()]
    print(f"\nbare poll + json.loads loop, best of {repeat}; record CRC32C in {crc32c_implementation()}:")
    print(f"{'topic':<16}{'consumer':<20}{'events':>11}{'messages':>10}{'seconds':>9}{'events/s':>12}")
    for filled, name, rate in rows:
        print(f"{filled.topic:<16}{name:<20}{rate.events:>11,}{rate.messages:>10,}{rate.seconds:>9.2f}"
              f"{rate.events_per_s:>12,.0f}")


if __name__ == "__main__":
    main()
