"""Incremental checkpoints in the service (issue: state cost follows the changes): a crash between
a delta and the next compaction restores exactly, from the state dir's chain, from the changelog's
chain, or from either after the other is lost; a torn delta append and deltas left from an older
chain are ignored; a failed delta write makes the next checkpoint a full one."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, ManualClock
from test_changelog_hostile import RetainedReader
from test_service_unit import events_with_closers, fill, final_snapshots

from consumers.changelog import HEADER, Changelog
from consumers.checkpoint import MAX_DELTAS
from consumers.service import MetricsService, ServiceConfig

CHANGELOG = "cl"


def service(cluster: FakeCluster, state_dir: Path | None, changelog: bool = True, **options: Any) -> MetricsService:
    settings: dict[str, Any] = {"idle_close": None, "checkpoint_interval": 0.0, "max_poll_records": 20,
                                "window": 60.0, "max_future": None, "changelog_topic": CHANGELOG if changelog else None}
    settings.update(options)
    config = ServiceConfig(bootstrap_servers="fake:9092", topic="in", output_topic="out", dlq_topic="dlq",
                           state_dir=None if state_dir is None else str(state_dir), **settings)
    producer = FakeProducer(cluster)
    log = Changelog(producer, CHANGELOG, RetainedReader(cluster), 1_048_576) if changelog else None
    return MetricsService(config, FakeConsumer(cluster, config.group_id), producer, clock=ManualClock(),
                          listener=FakeListener, changelog=log)


def run(svc: MetricsService, polls: int | None = None) -> MetricsService:
    svc.start()
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


@pytest.fixture(scope="module")
def reference() -> dict[str, bytes]:
    cluster = FakeCluster()
    fill(cluster, events_with_closers())
    run(service(cluster, None, changelog=False))
    return final_snapshots(cluster)


def links(cluster: FakeCluster, partition: int) -> list[int]:
    return [json.loads(dict(r.headers)[HEADER]).get("n", 0) for r in cluster.topics[CHANGELOG][partition]]


def fresh_cluster() -> FakeCluster:
    cluster = FakeCluster()
    fill(cluster, events_with_closers())
    cluster.create(CHANGELOG, 2)
    return cluster


@pytest.mark.parametrize("lose", ["nothing", "state_dir", "changelog"])
def test_crash_between_a_delta_and_a_compaction_loses_nothing(tmp_path: Path, reference: dict, lose: str) -> None:
    cluster = fresh_cluster()
    state = tmp_path / "state"
    run(service(cluster, state), polls=7)  # then killed: no checkpoint, no close
    for p in (0, 1):  # the last checkpoint of each partition is a delta of a chain
        assert links(cluster, p)[-1] > 0 and links(cluster, p)[0] == 0, links(cluster, p)
        assert (state / "streammetrics" / "in" / f"{p}.deltas").stat().st_size > 0
    if lose == "state_dir":
        shutil.rmtree(state)
    reader_cluster = cluster
    if lose == "changelog":
        cluster.topics[CHANGELOG] = [[], []]
    run(service(reader_cluster, state))
    assert final_snapshots(cluster) == reference


def test_a_torn_delta_and_an_older_chains_deltas_are_ignored(tmp_path: Path, reference: dict) -> None:
    """A crash mid-append leaves a torn frame; a crash between writing a full checkpoint and
    removing the old chain's deltas leaves deltas of another chain: both are skipped (the
    partition restarts from the last complete link and re-reads the rest)."""
    cluster = fresh_cluster()
    state = tmp_path / "state"
    run(service(cluster, state, changelog=False), polls=5)
    directory = state / "streammetrics" / "in"
    old = (directory / "0.deltas").read_bytes()
    run(service(cluster, state, changelog=False), polls=4)  # a new process: a full checkpoint, then deltas
    with open(directory / "0.deltas", "ab") as fh:
        fh.write(old[: len(old) // 2])  # torn
    (directory / "1.deltas").write_bytes(old)  # partition 1's file replaced by deltas of another chain
    run(service(cluster, state, changelog=False))
    assert final_snapshots(cluster) == reference


def test_a_failed_delta_append_makes_the_next_checkpoint_full(tmp_path: Path, reference: dict) -> None:
    cluster = fresh_cluster()
    state = tmp_path / "state"
    svc = service(cluster, state, changelog=False)
    calls = [0]
    append = svc.store.append_delta

    def failing(partition: int, payload: bytes) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(28, "No space left on device")
        append(partition, payload)

    svc.store.append_delta = failing
    writes = []
    write = svc.store.write
    svc.store.write = lambda partition, payload: (writes.append(partition), write(partition, payload))[1]
    run(svc, polls=8)
    assert calls[0] > 3 and svc.counts["checkpoint_failures"] == 1
    assert len(writes) >= 3  # the two first ones, and a full one after the failure
    run(service(cluster, state, changelog=False))
    assert final_snapshots(cluster) == reference


def test_compaction_bounds_the_chain(tmp_path: Path) -> None:
    cluster = fresh_cluster()
    run(service(cluster, tmp_path, max_poll_records=1), polls=3 * MAX_DELTAS)
    for p in (0, 1):
        n = links(cluster, p)
        assert max(n) <= MAX_DELTAS and n.count(0) >= 2, n
