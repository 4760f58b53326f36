"""Hostile changelogs (issue: internal topics validated and authenticated; state survives
retention): garbage copied into the changelog, headers and payloads mutated field by field,
forged and unsigned records with --internal-key, and retention removing old checkpoints of a
quiet partition before a crash. Each bad record is skipped, counted and logged; the previous good
checkpoint is used; the service never stops because of one."""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest
from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, FakeRecord, ManualClock
from test_service_unit import events_with_closers, fill, final_snapshots

from consumers.changelog import HEADER, Changelog
from consumers.service import MetricsService, ServiceConfig
from consumers.signing import RecordSigner

CHANGELOG = "cl"


class RetainedReader:
    """A changelog reader over ``cluster`` that hides records below ``log_start[p]`` (deleted by retention)."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.log_start: dict[int, int] = {}

    def __call__(self, partition: int, from_end: int) -> tuple[list[FakeRecord], bool]:
        log = self.cluster.topics[CHANGELOG][partition]
        first = self.log_start.get(partition, 0)
        start = max(first, len(log) - from_end)
        return list(log[start:]), start == first


def service(cluster: FakeCluster, key: bytes | None = None, clock: ManualClock | None = None,
            reader: Any = None, **options: Any) -> MetricsService:
    settings: dict[str, Any] = {"idle_close": None, "checkpoint_interval": 0.0, "max_poll_records": 50,
                                "window": 60.0, "max_future": None, "changelog_topic": CHANGELOG}
    settings.update(options)
    config = ServiceConfig(bootstrap_servers="fake:9092", topic="in", output_topic="out", dlq_topic="dlq", **settings)
    producer = FakeProducer(cluster)
    changelog = Changelog(producer, CHANGELOG, reader or RetainedReader(cluster), 1_048_576,
                          signer=RecordSigner(key)) if config.changelog_topic else None
    return MetricsService(config, FakeConsumer(cluster, config.group_id), producer, clock=clock or ManualClock(),
                          listener=FakeListener, changelog=changelog)


def run(svc: MetricsService, polls: int | None = None) -> MetricsService:
    """``polls`` polls then a crash (no checkpoint, no close), or to the end then a clean stop."""
    svc.start()
    assert svc.failure is None, svc.failure
    for _ in range(polls or 100_000):
        svc.poll_once(timeout_ms=0)
        assert svc.failure is None, svc.failure
        consumer = svc.consumer
        if polls is None and all(consumer.positions[tp] >= consumer.highwater(tp) for tp in consumer.assigned):
            break
    if polls is None:
        svc.checkpoint()
        svc.close()
    return svc


def setup() -> tuple[FakeCluster, dict[str, bytes]]:
    events = events_with_closers()
    reference = FakeCluster()
    fill(reference, events)
    run(service(reference, changelog_topic=None))
    cluster = FakeCluster()
    fill(cluster, events)
    cluster.create(CHANGELOG, 2)
    return cluster, final_snapshots(reference)


def last_checkpoint(cluster: FakeCluster, partition: int, full: bool = True) -> tuple[dict[str, Any], bytes]:
    """The header and value of the partition's last full checkpoint (``full=False``: last record)."""
    for rec in reversed(cluster.topics[CHANGELOG][partition]):
        meta = json.loads(dict(rec.headers)[HEADER])
        if not full or meta.get("n", 0) == 0:
            return meta, rec.value
    raise AssertionError("no full checkpoint")


def append(cluster: FakeCluster, partition: int, meta: Any, payload: bytes, key: bytes | None = None) -> None:
    header = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
    cluster.append(CHANGELOG, RecordSigner(key).seal(payload), key=str(partition).encode(), partition=partition,
                   headers=[(HEADER, header)])


def meta_for(payload: bytes, **fields: Any) -> dict[str, Any]:
    meta = {"seq": 10**6, "chunk": 0, "chunks": 1, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(),
            "offset": 10**6, "label_offset": None, "owner": "forged"}
    meta.update(fields)
    return meta


def test_probe_garbage_offset_x_is_skipped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    """The probe p_svc_changelog.py garbage: a one-chunk record whose header says "offset": "x"
    (was: ValueError at every start, exit 1)."""
    cluster, expected = setup()
    run(service(cluster), polls=6)
    payload = b'{"junk": true}'
    for p in (0, 1):
        append(cluster, p, meta_for(payload, offset="x"), payload)
    with caplog.at_level(logging.WARNING, logger="streammetrics.consume"):
        svc = run(service(cluster))
    assert final_snapshots(cluster) == expected
    assert svc.changelog.rejected == {"malformed": 2}
    assert svc.metrics.internal_rejected.labels(CHANGELOG, "malformed")._value.get() == 2
    lines = [r.getMessage() for r in caplog.records if "skipped (malformed)" in r.getMessage()]
    assert len(lines) == 2 and "'offset'" in lines[0]


HEADER_MUTATIONS = [(name, bad) for name in ("seq", "chunk", "chunks", "size", "offset")
                    for bad in ("x", -1, None, 1.5, True, [], {})] + \
    [("sha256", bad) for bad in ("x", None, 5, "g" * 64)] + [("label_offset", bad) for bad in ("x", -1, 2.5, [])] + \
    [("owner", bad) for bad in (None, 5, [])]


@pytest.mark.parametrize(("field", "bad"), HEADER_MUTATIONS)
def test_a_header_mutated_field_by_field_is_skipped(field: str, bad: Any) -> None:
    """The latest real checkpoint copied with one header field replaced: skipped, the previous
    real one used; every window exact."""
    cluster, expected = setup()
    run(service(cluster), polls=6)
    for p in (0, 1):
        meta, value = last_checkpoint(cluster, p)
        meta[field] = bad
        meta["seq"] = meta["seq"] + 1 if field != "seq" else bad
        append(cluster, p, meta, value)
    svc = run(service(cluster))
    assert final_snapshots(cluster) == expected
    assert svc.changelog.rejected.get("malformed", 0) >= 1


@pytest.mark.parametrize("header", [b"not json", b"[1, 2]", b"null", b'{"chunk": 0}', b"\xff\xfe"])
def test_garbage_headers_are_skipped(header: bytes) -> None:
    cluster, expected = setup()
    run(service(cluster), polls=6)
    append(cluster, 0, header, b"x")
    svc = run(service(cluster))
    assert final_snapshots(cluster) == expected
    assert svc.changelog.rejected == {"malformed": 1}


def _mutate(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        data = data[name]
    data[path[-1]] = value


PAYLOAD_MUTATIONS = [
    (("version",), 99), (("topic",), "other"), (("partition",), 7), (("offset",), "x"), (("offset",), -5),
    (("windows",), "x"), (("windows",), {}), (("windows", "type"), "Other"), (("windows", "task"), "regression"),
    (("windows", "windows", "keys"), "x"), (("windows", "windows", "keys"), [{"model": 5}]),
    (("windows", "windows", "spec"), {"size_ms": 1}), (("settings",), {"task": "binary", "window": 5.0}),
    (("label_offset",), "x"),
]


@pytest.mark.parametrize(("path", "bad"), PAYLOAD_MUTATIONS, ids=lambda v: str(v))
def test_a_payload_mutated_field_by_field_is_skipped(path: tuple[str, ...], bad: Any) -> None:
    """A well-formed, checksummed record whose checkpoint content is wrong (another version,
    topic, partition, settings, malformed windows): refused by the full validation the service
    does before use, skipped and counted as invalid; the previous good checkpoint is used."""
    cluster, expected = setup()
    run(service(cluster), polls=6)
    for p in (0, 1):
        meta, value = last_checkpoint(cluster, p)
        data = json.loads(value)
        data["offset"] = last_checkpoint(cluster, p, full=False)[0]["offset"] + 1  # ranks above the real chain
        _mutate(data, path, bad)
        payload = json.dumps(data).encode()
        append(cluster, p, meta_for(payload, offset=data["offset"] if type(data["offset"]) is int else 10**6,
                                    label_offset=data.get("label_offset")
                                    if type(data.get("label_offset")) is int else None), payload)
    svc = run(service(cluster))
    assert final_snapshots(cluster) == expected
    assert sum(svc.changelog.rejected.values()) == 2, svc.changelog.rejected


def test_header_and_payload_offsets_must_agree() -> None:
    """A real checkpoint re-sent under a header claiming further offsets is refused (a replayed
    old checkpoint cannot outrank the newest one)."""
    cluster, expected = setup()
    run(service(cluster), polls=6)
    first_meta, first_value = json.loads(dict(cluster.topics[CHANGELOG][0][0].headers)[HEADER]), \
        cluster.topics[CHANGELOG][0][0].value
    append(cluster, 0, dict(first_meta, offset=10**6, seq=10**6), first_value)
    svc = run(service(cluster))
    assert final_snapshots(cluster) == expected
    assert svc.changelog.rejected == {"invalid": 1}


def test_internal_key_refuses_forged_and_unsigned_records() -> None:
    key = b"shared-secret"
    cluster, expected = setup()
    run(service(cluster, key=key), polls=6)
    for rec in cluster.records(CHANGELOG):
        assert rec.value.startswith(b"smsig1:")
    for p in (0, 1):
        meta, value = last_checkpoint(cluster, p)
        payload = RecordSigner(key).open(value)
        data = json.loads(payload)
        data["offset"] += 10  # a forged checkpoint that would skip input
        forged = json.dumps(data).encode()
        append(cluster, p, meta_for(forged, offset=data["offset"]), forged)  # unsigned
        append(cluster, p, meta_for(forged, offset=data["offset"]), forged, key=b"wrong key")
    svc = run(service(cluster, key=key))
    assert final_snapshots(cluster) == expected
    assert svc.changelog.rejected == {"forged": 4}
    assert svc.metrics.internal_rejected.labels(CHANGELOG, "forged")._value.get() == 4


def test_signed_checkpoints_chunked_restore_exactly() -> None:
    cluster, expected = setup()
    producer = FakeProducer(cluster, max_request_size=3000)
    log = Changelog(producer, CHANGELOG, RetainedReader(cluster), 3000, signer=RecordSigner(b"k"))
    payload = bytes(range(256)) * 30
    log.write(0, payload, offset=5, label_offset=None)
    producer.flush()
    assert len(cluster.topics[CHANGELOG][0]) > 1
    assert all(len(r.value) <= 3000 for r in cluster.topics[CHANGELOG][0])
    assert log.restore(0) == [payload]
    assert Changelog(producer, CHANGELOG, RetainedReader(cluster), 3000).restore(0) is None  # sealed: no checksum
    other = Changelog(producer, CHANGELOG, RetainedReader(cluster), 3000, signer=RecordSigner(b"other"))
    assert other.restore(0) is None and other.rejected["forged"] == len(cluster.topics[CHANGELOG][0])


def test_quiet_partition_survives_retention_and_a_crash() -> None:
    """The probe p_svc_changelog.py retention: a partition's input stops with windows open; its
    checkpoints age; retention (here: every record older than the refresh interval) removes the
    old ones; then a crash without a state dir. The partition re-wrote its checkpoint within
    --checkpoint-refresh, so nothing is lost (was: the open windows' events lost)."""
    events = events_with_closers()
    closers, body = events[-4:], events[:-4]
    reference = FakeCluster()
    fill(reference, events)
    run(service(reference, changelog_topic=None))
    cluster = FakeCluster()
    fill(cluster, body)
    cluster.create(CHANGELOG, 2)
    clock = ManualClock()
    reader = RetainedReader(cluster)
    svc = run(service(cluster, clock=clock, reader=reader, checkpoint_refresh=600.0), polls=200)  # all read
    written = {p: len(cluster.topics[CHANGELOG][p]) for p in (0, 1)}
    for _ in range(30):  # quiet: 30 polls, 30 s apart (15 minutes)
        clock.now += 30.0
        svc.poll_once(timeout_ms=0)
    assert all(len(cluster.topics[CHANGELOG][p]) > written[p] for p in (0, 1))  # refreshed while quiet
    for p in (0, 1):  # retention: only the records written during the last 10 minutes remain
        reader.log_start[p] = written[p]
    # crash (no checkpoint, no close); a new instance restores and the input resumes
    for ev in closers:
        cluster.append("in", json.dumps(ev).encode(), key=f"{ev['model']}|{ev['segment']}".encode())
    run(service(cluster, reader=reader))
    assert final_snapshots(cluster) == final_snapshots(reference)


def test_without_refresh_retention_loses_the_open_windows() -> None:
    """The control of the test above: with a refresh longer than the quiet time, the same
    retention leaves no checkpoint and the open windows restart empty (what the refresh fixes)."""
    events = events_with_closers()
    closers, body = events[-4:], events[:-4]
    reference = FakeCluster()
    fill(reference, events)
    run(service(reference, changelog_topic=None))
    cluster = FakeCluster()
    fill(cluster, body)
    cluster.create(CHANGELOG, 2)
    clock = ManualClock()
    reader = RetainedReader(cluster)
    svc = run(service(cluster, clock=clock, reader=reader, checkpoint_refresh=10**9), polls=200)
    written = {p: len(cluster.topics[CHANGELOG][p]) for p in (0, 1)}
    for _ in range(30):
        clock.now += 30.0
        svc.poll_once(timeout_ms=0)
    assert all(len(cluster.topics[CHANGELOG][p]) == written[p] for p in (0, 1))
    for p in (0, 1):
        reader.log_start[p] = written[p]
    for ev in closers:
        cluster.append("in", json.dumps(ev).encode(), key=f"{ev['model']}|{ev['segment']}".encode())
    run(service(cluster, reader=reader))
    assert final_snapshots(cluster) != final_snapshots(reference)
