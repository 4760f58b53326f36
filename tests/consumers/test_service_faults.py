"""Fault injection into every step of the service's batch, with in-memory Kafka fakes: after any
exception (parse, window add, publish, delivery, flush, checkpoint write, commit, an internal
bug), the snapshots are those of an uninterrupted run, byte for byte: no event lost or counted
twice (issue 10, point 6 and 7)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka_fakes import FakeCluster, Faults, InjectedFault
from test_service_unit import counts, events_with_closers, expected_counts, fill, final_snapshots, make_service

from consumers.fastpath import BinaryFastPath
from consumers.service import MetricsService
from streammetrics.events.parser import EventParser
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.windows import WindowManager


def run_until_done(cluster: FakeCluster, state: Path, faults: Faults | None = None, max_restarts: int = 5,
                   setup: Any = None, **options: Any) -> list[int]:
    """Run the service until it has read everything, restarting it (same state dir, fresh
    process state) whenever it stops on its own. Returns the exit statuses."""
    statuses = []
    for attempt in range(max_restarts):
        service = make_service(cluster, state, faults=faults if attempt == 0 else None, **options)
        service.consumer.on_idle = service.stop
        if setup is not None and attempt == 0:
            setup(service)
        statuses.append(service.run())
        if statuses[-1] == 0:
            return statuses
    raise AssertionError(f"no clean run in {max_restarts} attempts: {statuses}")


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return events_with_closers(1500, seed=11)


@pytest.fixture(scope="module")
def reference(events, tmp_path_factory) -> dict[str, bytes]:
    cluster = FakeCluster()
    fill(cluster, events, per_message=3)
    assert run_until_done(cluster, tmp_path_factory.mktemp("ref")) == [0]
    snaps = final_snapshots(cluster)
    assert counts(snaps) == expected_counts(events)
    return snaps


def count_calls(target: Any, name: str, nth: int, exc: type[BaseException] = InjectedFault) -> Any:
    """Wrap ``target.name`` so that its ``nth`` call raises ``exc``."""
    original = getattr(target, name)
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == nth:
            FIRED.append(name)
            raise exc(f"injected fault in {name}")
        return original(*args, **kwargs)

    return wrapped


FIRED: list[str] = []


@pytest.mark.parametrize("nth", [1, 13, 170])
@pytest.mark.parametrize("step", ["parse", "window_add", "publish", "delivery", "flush", "checkpoint_write",
                                  "commit", "internal"])
def test_an_exception_at_any_step_loses_and_double_counts_nothing(step, nth, events, reference, tmp_path,
                                                                   monkeypatch):
    cluster = FakeCluster()
    fill(cluster, events, per_message=3)
    faults = Faults()

    def setup(service: MetricsService) -> None:
        if step == "parse":  # the field parser of every pipeline (decoding included: they share the call)
            calls = [0]
            make_parser = PipelineConfig.parser

            def parser(config: PipelineConfig) -> EventParser:
                instance = make_parser(config)
                parse = instance.parse

                def failing_parse(obj: Any) -> Any:
                    calls[0] += 1
                    if calls[0] == nth * 3:
                        FIRED.append("parse")
                        raise InjectedFault("injected fault in parse")
                    return parse(obj)
                instance.parse = failing_parse  # type: ignore[method-assign]  # per instance, as EventParser does
                return instance
            monkeypatch.setattr(PipelineConfig, "parser", parser)
        elif step == "window_add":
            monkeypatch.setattr(WindowManager, "add", count_calls(WindowManager, "add", nth * 3))
        elif step == "publish":
            faults.arm("send", nth % 20 + 1)
        elif step == "delivery":
            faults.arm("deliver", nth % 20 + 1)
        elif step == "flush":
            faults.arm("flush", nth % 3 + 1)
        elif step == "checkpoint_write":
            service.store.write = count_calls(service.store, "write", nth % 5 + 1, OSError)
            # incremental checkpoints: a failed delta append must make the next checkpoint a full one
            service.store.append_delta = count_calls(service.store, "append_delta", nth % 5 + 1, OSError)
        elif step == "commit":
            faults.arm("commit", nth % 5 + 1)
        elif step == "internal":  # a bug after the records were applied, before their snapshots went out
            service._check_new_keys = count_calls(service, "_check_new_keys", nth % 7 + 1)

    FIRED.clear()
    statuses = run_until_done(cluster, tmp_path, faults, setup=setup)
    monkeypatch.undo()
    assert FIRED or faults.fired, "the fault was never injected"
    if step in ("publish", "delivery", "flush", "internal"):
        assert statuses[0] == 1  # stopped without a checkpoint, and the restart finished the work
    got = final_snapshots(cluster)  # (asserts that re-published snapshots are byte-identical)
    assert counts(got) == expected_counts(events)
    assert got == reference
    assert cluster.records("dlq") == []


@pytest.mark.parametrize("entry", ["process", "process_event"])
def test_a_record_that_always_fails_is_dead_lettered_and_the_rest_is_exact(entry, events, tmp_path, monkeypatch):
    # process: the general path (fast path off); process_event: the fast path of plain single events
    cluster = FakeCluster()
    fill(cluster, events, per_message=1)
    bad = cluster.topics["in"][1][40]
    if entry == "process":
        monkeypatch.setattr(BinaryFastPath, "for_pipeline", classmethod(lambda cls, pipeline: None))
        original = Pipeline.process

        def failing(self: Pipeline, value: Any) -> Any:
            if value == bad.value:
                raise RuntimeError("a bug that this record triggers")
            return original(self, value)
    else:
        original = Pipeline.process_event
        bad_event = EventParser("binary").parse(json.loads(bad.value))
        raised = [0]

        def failing(self: Pipeline, event: Any) -> Any:
            if event == bad_event:
                raised[0] += 1
                raise RuntimeError("a bug that this record triggers")
            return original(self, event)

    def setup(service: MetricsService) -> None:
        monkeypatch.setattr(Pipeline, entry, failing)

    assert run_until_done(cluster, tmp_path, setup=setup) == [0]
    [letter] = cluster.records("dlq")
    headers = dict(letter.headers)
    assert headers["streammetrics.code"] == b"internal" and letter.value == bad.value
    assert headers["streammetrics.source"] == f"in/1/{bad.offset}".encode()
    expected = expected_counts([e for e in events if json.dumps(e).encode() != bad.value])
    assert counts(final_snapshots(cluster)) == expected
    if entry == "process_event":
        assert raised == [2]  # through the fast path twice, then dead-lettered without being applied


def test_a_partly_applied_batch_is_never_checkpointed_on_close(events, tmp_path):
    # the case: an exception mid-batch, then close() -> revocation used to save the
    # partly applied batch with the old offset, and the restart counted those events twice
    cluster = FakeCluster()
    fill(cluster, events, per_message=1)
    service = make_service(cluster, tmp_path, max_poll_records=40)
    service.start()
    service.poll_once(timeout_ms=0)
    before = {path: path.read_bytes() for path in tmp_path.rglob("*.json")}
    assert before
    service._publish_ready = count_calls(service, "_publish_ready", 1)
    with pytest.raises(InjectedFault):
        service.poll_once(timeout_ms=0)
    service._fail("test: the loop died")
    service.close()  # revocation: must not save anything
    assert {path: path.read_bytes() for path in tmp_path.rglob("*.json")} == before
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    assert counts(final_snapshots(cluster)) == expected_counts(events)


def test_a_stuck_broker_stops_the_service_without_a_checkpoint(events, tmp_path):
    cluster = FakeCluster()
    fill(cluster, events, per_message=1)
    service = make_service(cluster, tmp_path, max_poll_records=2000)
    service.producer.stuck = True  # flush() times out (the fake raises at once: no waiting here)
    service.consumer.on_idle = service.stop
    assert service.run() == 1
    assert "did not deliver" in service.failure
    assert not list(tmp_path.rglob("*.json"))  # nothing checkpointed past undelivered snapshots
    assert service.producer.closed and service.consumer.closed
