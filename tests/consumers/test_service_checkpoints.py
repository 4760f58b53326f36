"""Checkpoints that cannot be used, and checkpoint offsets past the partition's end (issue 10,
point 8), with in-memory Kafka fakes."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from kafka_fakes import FakeCluster
from test_service_unit import events_with_closers, expected_counts, fill, final_snapshots, make_service

from consumers.checkpoint import CheckpointStore


def first_run(tmp_path: Path) -> tuple[FakeCluster, list[dict], Path]:
    events = events_with_closers(400, seed=3)
    cluster = FakeCluster()
    fill(cluster, events)
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    [path] = [p for p in tmp_path.rglob("0.json")]
    return cluster, events, path


def corrupt(path: Path, how: str) -> None:
    raw = path.read_bytes()
    data = json.loads(raw)
    if how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"\x00\xff garbage \x13")
    elif how == "other topic":
        data["topic"] = "other"
        path.write_text(json.dumps(data))
    elif how == "not an object":
        path.write_text("[1, 2, 3]")
    elif how == "bad windows":
        windows = data["windows"]["windows"] if data["windows"].get("type") == "Pipeline" else data["windows"]
        windows["keys"] = [["m", "s", {"panes": "nope"}]]
        data.pop("settings")
        path.write_text(json.dumps(data))


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "other topic", "not an object", "bad windows"])
def test_an_unusable_checkpoint_is_one_clear_error_and_exit_2(how, tmp_path, caplog):
    cluster, _, path = first_run(tmp_path)
    corrupt(path, how)
    before = path.read_bytes()
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    with caplog.at_level(logging.ERROR, logger="streammetrics.consume"):
        assert service.run() == 2
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None, errors
    message = errors[0].getMessage()
    assert str(path) in message and "Move it away" in message and "--state-dir" in message
    assert path.read_bytes() == before  # left for the operator to look at


@pytest.mark.parametrize("option,value", [("window", 120.0), ("task", "regression"), ("grace", 5.0)])
def test_a_checkpoint_of_other_settings_names_the_setting(option, value, tmp_path, caplog):
    cluster, _, path = first_run(tmp_path)
    service = make_service(cluster, tmp_path, **{option: value})
    service.consumer.on_idle = service.stop
    with caplog.at_level(logging.ERROR, logger="streammetrics.consume"):
        assert service.run() == 2
    assert f"{option}=" in service.failure and str(path) in service.failure


def test_a_checkpoint_without_settings_from_before_is_still_read(tmp_path):
    cluster, _, path = first_run(tmp_path)
    data = json.loads(path.read_text())
    data.pop("settings")
    path.write_text(json.dumps(data))
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 0


def test_a_checkpoint_offset_beyond_the_partition_end_reads_the_new_partition_from_its_start(tmp_path, caplog):
    cluster, events, _ = first_run(tmp_path)
    # the topic is deleted and recreated with fewer, later events
    later = [dict(e, ts=e["ts"] + 100_000) for e in events_with_closers(120, seed=8)]
    recreated = FakeCluster()
    fill(recreated, later)
    recreated.topics["out"] = cluster.topics["out"]
    service = make_service(recreated, tmp_path)
    service.consumer.on_idle = service.stop
    with caplog.at_level(logging.WARNING, logger="streammetrics.consume"):
        assert service.run() == 0
    assert service.counts["offset_resets"] == 2
    assert sum("beyond the partition's end" in r.getMessage() for r in caplog.records) == 2
    got = {k: json.loads(v)["count"] for k, v in final_snapshots(recreated).items()}
    for key, count in expected_counts(later).items():  # every new event counted once
        assert got[key] == count
    saved = CheckpointStore(str(tmp_path), "streammetrics", "in").load(0)
    assert saved is not None and saved["offset"] == len(recreated.topics["in"][0])


def test_a_checkpoint_written_before_the_pipeline_is_still_read(tmp_path):
    events = events_with_closers(400, seed=3)
    cluster = FakeCluster()
    fill(cluster, events)
    service = make_service(cluster, tmp_path, max_poll_records=100)
    service.start()
    for _ in range(3):
        service.poll_once(timeout_ms=0)
    service.close()
    for path in tmp_path.rglob("*.json"):  # the format of the service before the pipeline
        data = json.loads(path.read_text())
        data["windows"] = data["windows"]["windows"]
        data.pop("settings")
        path.write_text(json.dumps(data))
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    got = {k: json.loads(v)["count"] for k, v in final_snapshots(cluster).items()}
    assert got == dict(expected_counts(events))


@pytest.mark.parametrize("share", [0.25, 1.0])
def test_periodic_checkpoints_take_at_most_their_share_of_the_time(tmp_path, monkeypatch, share):
    """``--checkpoint-max-share``: after a checkpoint that took 2 s the next periodic one waits
    2 * (1 / share - 1) s (6 s at 0.25) even with a 1 s interval; with 1, every interval."""
    from kafka_fakes import ManualClock

    cluster = FakeCluster()
    fill(cluster, events_with_closers(400, seed=3))
    clock = ManualClock()
    service = make_service(cluster, tmp_path, clock=clock, checkpoint_interval=1.0, checkpoint_share=share)
    done = []
    real = service._checkpoint_now

    def slow(*args, **kwargs):  # each checkpoint takes 2 s of the service's clock
        done.append(clock.now)
        clock.now += 2.0
        real(*args, **kwargs)

    monkeypatch.setattr(service, "_checkpoint_now", slow)
    service.start()
    for _ in range(12):
        clock.now += 1.5
        service.poll_once(timeout_ms=0)
    gaps = [b - a for a, b in zip(done, done[1:])]
    if share == 1.0:
        assert len(done) == 12 and gaps == [3.5] * 11  # (1.5 s per poll + the 2 s checkpoint)
    else:
        assert len(done) == 3 and all(gap >= 2.0 + 6.0 for gap in gaps), gaps
