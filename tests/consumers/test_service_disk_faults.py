"""Environment failures are not poison (hostile-operations finding 3: with the temp directory full,
the pending store's SQLite spill failed, valid predictions were dead-lettered ``internal`` and
their windows published final without them).

A failing spill (SQLite "database or disk is full", or no room for its temporary directory)
pauses the partition: nothing is dead-lettered or published from the half-applied state,
``/healthz`` answers 503, and once the fault clears the partition is read again from its
checkpoint: the final snapshots equal an undisturbed run's, nothing lost or counted twice."""
from __future__ import annotations

import errno
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from kafka_fakes import FakeCluster
from test_service_labels import delayed_data, fill, make_service, same, without_revision

from consumers.service import MAX_PAUSE_BACKOFF, MetricsService
from streammetrics.stream import pending
from streammetrics.stream.pending import DEFAULT_MAX_PENDING, PendingStore

MEMORY_BUDGET = 25  # the pending store spills after 25 predictions


class FullDisk:
    """Connections of the pending store whose inserts fail while ``full`` (one row gets in first)."""

    def __init__(self, conn: Any, disk: "Disk") -> None:
        self.conn, self.disk = conn, disk

    def executemany(self, sql: str, rows: Any) -> Any:
        rows = list(rows)
        if self.disk.full and sql.startswith("INSERT"):
            self.disk.failures += 1
            self.conn.execute(sql, rows[0])
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


class Disk:
    def __init__(self) -> None:
        self.full = False
        self.failures = 0


@pytest.fixture
def disk(monkeypatch) -> Disk:
    monkeypatch.setattr(PendingStore.__init__, "__defaults__", (MEMORY_BUDGET, DEFAULT_MAX_PENDING))
    return Disk()


def arm(kind: str, disk: Disk, monkeypatch) -> None:
    if kind == "sqlite_full":  # the spill's INSERT fails (the real failure path: undo, SpillError)
        db = PendingStore._db

        def failing_db(self: PendingStore) -> Any:
            conn = db(self)
            return conn if isinstance(conn, FullDisk) else FullDisk(conn, disk)

        monkeypatch.setattr(PendingStore, "_db", failing_db)
    else:  # no room for the spill's temporary directory (an unwritable or full TMPDIR)
        real = tempfile.mkdtemp

        def mkdtemp(*args: Any, **kwargs: Any) -> str:
            if disk.full:
                disk.failures += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)

        monkeypatch.setattr(pending.tempfile, "mkdtemp", mkdtemp)


def single_topic(cluster: FakeCluster, preds: list[list[dict]], labels: list[list[dict]]) -> None:
    """Predictions and their labels in one topic, merged by time (as the probe produces them)."""
    cluster.create("in", len(preds))
    cluster.create("out", 1)
    cluster.create("dlq", 1)
    for p, (ps, ls) in enumerate(zip(preds, labels)):
        for ev in sorted(ps + ls, key=lambda e: e["ts"]):
            cluster.append("in", json.dumps(ev).encode(), key=str(ev.get("id")).encode(), partition=p)


def build(layout: str, state: Path) -> tuple[FakeCluster, MetricsService]:
    preds, labels = delayed_data(seed=5)
    cluster = FakeCluster()
    if layout == "labels_topic":
        fill(cluster, preds, labels)
        return cluster, make_service(cluster, state)
    single_topic(cluster, preds, labels)
    return cluster, make_service(cluster, state, labels_topic=None)


def read_to_end(service: MetricsService, max_polls: int = 20_000) -> None:
    consumer = service.consumer
    for _ in range(max_polls):
        service.poll_once(timeout_ms=0)
        if not service._paused and all(consumer.positions[tp] >= consumer.highwater(tp) for tp in consumer.assigned) \
                and all(not (part.preds and part.preds.buffer) and not (part.labels and part.labels.buffer)
                        for part in service.partitions.values()):
            return
    raise AssertionError("never read to the end")


def finals(cluster: FakeCluster) -> dict[str, dict]:
    last: dict[str, dict] = {}
    for rec in cluster.records("out"):
        last[rec.key.decode()] = json.loads(rec.value)
    return last


def letters(cluster: FakeCluster) -> set[tuple[str, str]]:
    return {(dict(r.headers)["streammetrics.source"].decode(), dict(r.headers)["streammetrics.code"].decode())
            for r in cluster.records("dlq")}


@pytest.mark.parametrize("layout", ["single_topic", "labels_topic"])
@pytest.mark.parametrize("kind", ["sqlite_full", "no_temp_dir"])
def test_a_failing_spill_pauses_the_partition_and_loses_or_double_counts_nothing(kind, layout, disk, monkeypatch,
                                                                                  tmp_path):
    ref_cluster, ref = build(layout, tmp_path / "ref")
    ref.start()
    read_to_end(ref)
    ref.checkpoint()
    ref.close()
    expected = finals(ref_cluster)
    assert sum(1 for s in expected.values() if s["final"]) >= 10

    arm(kind, disk, monkeypatch)
    cluster, service = build(layout, tmp_path / "state")
    clock = service._clock
    service.start()
    disk.full = True
    for _ in range(300):  # the disk stays full: the partitions pause, again and again
        service.poll_once(timeout_ms=0)
        clock.now += 1.0  # type: ignore[attr-defined]
    assert disk.failures >= 3 and service.counts.get("pauses", 0) >= 3
    assert service.metrics.paused >= 1 and service.metrics.failed is False
    assert service.failure is None
    paused_at = {tp: part.saved_offset for tp, part in service.partitions.items() if tp in service._paused}
    assert paused_at and all(offset is not None for offset in paused_at.values())
    assert all(code != "internal" for _, code in letters(cluster))  # nothing dead-lettered as poison
    assert letters(cluster) <= letters(ref_cluster)
    for key, snap in finals(cluster).items():  # nothing published from a half-applied state
        assert not snap["final"] or same(without_revision(snap), without_revision(expected[key]), False), key
    waits = [pause.until - clock.now for pause in service._paused.values()]  # type: ignore[attr-defined]
    assert max(waits) <= MAX_PAUSE_BACKOFF

    disk.full = False  # the fault clears: resumed after the back-off, read again from the checkpoint
    clock.now += MAX_PAUSE_BACKOFF + 1  # type: ignore[attr-defined]
    read_to_end(service)
    service.checkpoint()
    service.close()
    assert service.metrics.paused == 0 and service.counts["rollbacks"] == 0
    got = finals(cluster)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert same(without_revision(got[key]), without_revision(expected[key]), False), key
    assert letters(cluster) == letters(ref_cluster)


def test_healthz_answers_503_while_a_partition_is_paused():
    from test_observability import get

    from consumers.observability import MetricsServer, ServiceMetrics

    metrics = ServiceMetrics()
    server = MetricsServer(metrics, 0, "127.0.0.1").start()
    try:
        assert get(server.port, "/healthz") == (200, b"ok\n")
        metrics.paused = 1
        assert get(server.port, "/healthz") == (503, b"paused\n")
    finally:
        server.stop()


def test_a_checkpoint_that_needs_the_full_disk_to_load_pauses_at_start_instead_of_an_exit(disk, monkeypatch,
                                                                                         tmp_path):
    ref_cluster, ref = build("single_topic", tmp_path / "ref")
    ref.start()
    read_to_end(ref)
    ref.checkpoint()
    ref.close()
    expected = finals(ref_cluster)

    arm("no_temp_dir", disk, monkeypatch)
    cluster, first = build("single_topic", tmp_path / "state")
    first.start()
    for _ in range(12):  # predictions await labels: more than the memory budget, spilled to SQLite
        first.poll_once(timeout_ms=0)
    first.checkpoint()  # a checkpoint holding spilled predictions; then SIGKILL
    assert disk.failures == 0

    disk.full = True  # the restart finds no room to spill them again while loading the checkpoint
    cluster_service = make_service(cluster, tmp_path / "state", labels_topic=None)
    cluster_service.start()
    clock = cluster_service._clock
    for _ in range(20):
        cluster_service.poll_once(timeout_ms=0)
        clock.now += 1.0  # type: ignore[attr-defined]
    assert cluster_service.failure is None and cluster_service.exit_status == 0
    assert disk.failures >= 2 and cluster_service.metrics.paused >= 1  # (loading needs the disk)
    disk.full = False
    clock.now += MAX_PAUSE_BACKOFF + 1  # type: ignore[attr-defined]
    read_to_end(cluster_service)
    cluster_service.checkpoint()
    cluster_service.close()
    got = finals(cluster)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert same(without_revision(got[key]), without_revision(expected[key]), False), key
