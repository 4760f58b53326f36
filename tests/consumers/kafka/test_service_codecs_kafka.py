"""Compressed topics on the broker (hostile-operations finding 2): lz4, zstd and snappy topics give
the snapshots of a plain one (the codecs come with the ``kafka`` extra), and a batch the client
cannot decompress is dead-lettered and skipped while the service goes on."""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/consumers

from test_service import ServiceThread, read_topic, wait_for  # noqa: E402

from consumers.service import ServiceConfig  # noqa: E402

T0 = 1_767_225_600.0


def events(n: int, start: float = T0) -> list[dict]:
    return [{"ts": start + i * 0.5, "model": "m", "segment": "", "y_true": i % 2, "score": (i % 10) / 10}
            for i in range(n)]


def send(producer, topic: str, evs: list[dict]) -> None:
    for ev in evs:
        producer.send(topic, key=b"m|", value=json.dumps(ev).encode())
    producer.flush()


def window_counts(records) -> Counter:
    return Counter({rec.key.decode(): json.loads(rec.value)["count"] for rec in records})


@pytest.mark.parametrize("codec", ["lz4", "zstd", "snappy"])
def test_a_compressed_topic_gives_every_window(codec, bootstrap_servers, new_topic, unique_name, make_producer,
                                               tmp_path):
    topic, output = new_topic(1), new_topic(1)
    evs = events(600) + [{"ts": T0 + 3000, "model": "m", "segment": "", "y_true": 0, "score": 0.5}]
    send(make_producer(compression_type=codec, linger_ms=20), topic, evs)
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output,
                           group_id=unique_name("g"), state_dir=str(tmp_path), idle_close=None, max_future=None)
    with ServiceThread(config) as service:
        wait_for(lambda: service.counts["snapshots"] >= 5, 60, "the five closed windows")
    assert service.failure is None
    assert window_counts(read_topic(bootstrap_servers, output)) == Counter(
        {f"m||{int(T0) + 60 * w}": 120 for w in range(5)})


def test_a_batch_without_its_codec_is_dead_lettered_and_skipped_and_the_service_goes_on(
        bootstrap_servers, new_topic, unique_name, make_producer, tmp_path, monkeypatch):
    import kafka.codec

    topic, output, dlq = new_topic(1), new_topic(1), new_topic(1)
    send(make_producer(compression_type="lz4", linger_ms=50), topic, events(40))  # window 0: one lz4 batch
    plain = make_producer()
    send(plain, topic, events(120, start=T0 + 60))  # window 1, uncompressed
    send(plain, topic, [{"ts": T0 + 3000, "model": "m", "segment": "", "y_true": 0, "score": 0.5}])
    monkeypatch.setattr(kafka.codec, "has_lz4", lambda: False)  # the service's client cannot read lz4
    config = ServiceConfig(bootstrap_servers=bootstrap_servers, topic=topic, output_topic=output, dlq_topic=dlq,
                           group_id=unique_name("g"), state_dir=str(tmp_path), idle_close=None, max_future=None)
    with ServiceThread(config) as service:
        wait_for(lambda: service.counts["snapshots"] >= 1, 60, "window 1's snapshot")
    assert service.failure is None
    assert window_counts(read_topic(bootstrap_servers, output)) == Counter({f"m||{int(T0) + 60}": 120})
    [dead] = read_topic(bootstrap_servers, dlq)
    headers = {k: v.decode() for k, v in dead.headers}
    assert headers["streammetrics.code"] == "unreadable" and "lz4" in headers["streammetrics.reason"]
    assert service.counts["skipped_offsets"] == 40
