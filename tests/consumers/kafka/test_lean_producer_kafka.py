"""consumers.lean_producer against the broker: the records sent are the records read, in order."""
from __future__ import annotations

from typing import Any

from consumers.clients import kafka_clients
from consumers.lean_producer import Delivery, RecordSender
from consumers.service import MetricsService, ServiceConfig


def read_all(make_consumer: Any, topic: str, n: int) -> list[tuple[bytes | None, bytes | None, list]]:
    from kafka import TopicPartition

    consumer = make_consumer(group_id=None)
    partitions = sorted(consumer.partitions_for_topic(topic) or [])
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    out: list = []
    for _ in range(200):
        for records in consumer.poll(timeout_ms=200).values():
            out += [(r.key, r.value, r.headers) for r in records]
        if len(out) >= n:
            break
    return out


def test_many_records_and_single_sends_arrive_in_order_once(make_producer, make_consumer, new_topic):
    topic = new_topic(1)
    producer = make_producer(acks="all", linger_ms=20, batch_size=16384, max_in_flight_requests_per_connection=1)
    sender = RecordSender(producer)
    assert sender.lean
    first = [(f"m|s{i}|60.0".encode(), b'{"n":%d}' % i + b" " * (i % 300), [("streammetrics.content", b"%064x" % i)])
             for i in range(3000)]
    handles = sender.send_many(topic, first)
    single = producer.send(topic, key=b"single", value=b"1", headers=[])
    second = [(b"k%d" % i, None if i % 7 == 0 else b"v%d" % i, []) for i in range(50)]
    handles += sender.send_many(topic, second)
    producer.flush(timeout=30)
    assert len(handles) > 2 and all(isinstance(h, Delivery) and h.is_done and not h.failed() for h in handles)
    assert single.succeeded()
    expected = [(k, v, list(h)) for k, v, h in first] + [(b"single", b"1", [])] + [(k, v, []) for k, v, _ in second]
    assert read_all(make_consumer, topic, len(expected)) == expected


def test_a_topic_of_several_partitions_is_sent_record_by_record(make_producer, make_consumer, new_topic):
    topic = new_topic(3)
    producer = make_producer()
    records = [(b"key%d" % i, b"v%d" % i, []) for i in range(30)]
    handles = RecordSender(producer).send_many(topic, records)
    producer.flush(timeout=30)
    assert all(h.succeeded() for h in handles)  # (kafka-python's own futures: its partitioner decided)
    assert sorted(read_all(make_consumer, topic, 30)) == sorted((k, v, []) for k, v, _ in records)


def test_the_service_publishes_a_window_close_through_lean_batches(bootstrap_servers, new_topic, unique_name,
                                                                   make_producer, make_consumer):
    import json

    from streammetrics.stream.snapshots import content_header

    topic, output = new_topic(1), new_topic(1)
    source = make_producer()
    events = [{"ts": 1_767_225_600 + i % 60, "model": "m", "segment": f"s{i % 400}", "y_true": i % 2,
               "score": (i % 10) / 10} for i in range(1200)]
    events.append({"ts": 1_767_225_600 + 600, "model": "m", "segment": "s0", "y_true": 1, "score": 0.5})
    for ev in events:
        source.send(topic, key=f"m|{ev['segment']}".encode(), value=json.dumps(ev).encode())
    source.flush()
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output,
                           group_id=unique_name("g"), idle_close=None, max_future=None)
    consumer, producer = kafka_clients(config)
    sends: list[str] = []
    send = producer.send
    producer.send = lambda topic, *a, **k: (sends.append(topic), send(topic, *a, **k))[1]  # type: ignore[method-assign]
    service = MetricsService(config, consumer=consumer, producer=producer)
    service.start()
    try:
        for _ in range(300):
            service.poll_once()
            if service.counts["snapshots"] >= 400:
                break
        service.checkpoint()
        assert service.counts["snapshots"] == 400
    finally:
        service.close()
    assert output not in sends  # (the 400 snapshots of the window close: one bulk append, not 400 sends)
    read = read_all(make_consumer, output, 400)
    assert len(read) == 400 and len({k for k, _, _ in read}) == 400
    for key, value, headers in read:
        snap = json.loads(value)
        assert key == f"m|{snap['key']['segment']}|{snap['window']['start']}".encode()
        assert headers == [content_header(value)] and snap["count"] == 3
