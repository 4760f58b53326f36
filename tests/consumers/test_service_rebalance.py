"""A partition kept by an instance through an (eager) rebalance: kafka-python 3.0.12 keeps its fetch
position and paused flag, while the service rebuilds the partition from its checkpoint (issue 25
point 3, docs/scaleout.md "Liveness"). Before the fix a side paused by ``--max-merge-buffer`` was
never fetched again (its watermark, and with ``--partitioning any`` every merged window, held
forever), and labels buffered but not yet applied were skipped (their windows never final).
In-memory fakes: ``FakeConsumer.rebalance(keep, retain=True)`` keeps positions and pauses as
kafka-python does."""
from __future__ import annotations

import json
from pathlib import Path

from kafka_fakes import FakeCluster
from test_service_labels import WINDOW, check_equals_replay, delayed_data, drain, fill, make_service


def test_a_side_paused_by_the_merge_buffer_is_fetched_again_after_a_rebalance_that_keeps_it(tmp_path: Path) -> None:
    preds, labels = delayed_data(seed=9)
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    service = make_service(cluster, tmp_path, max_merge_buffer=8, max_poll_records=200)
    service.start()
    consumer = service.consumer
    for _ in range(100):
        service.poll_once(timeout_ms=0)
        if consumer.paused:
            break
    assert consumer.paused, "the scenario needs a side paused by the merge buffer"
    consumer.rebalance(list(consumer.assigned), retain=True)  # every partition kept, pauses too
    drain(service, max_polls=3000)
    assert all(consumer.positions[tp] == consumer.highwater(tp) for tp in consumer.assigned)
    check_equals_replay(cluster, service, preds, labels)


def test_labels_buffered_but_not_applied_are_read_again_after_a_rebalance_that_keeps_them(tmp_path: Path) -> None:
    preds, labels = delayed_data(seed=4)
    for side in labels:  # every label at least half a window after its prediction: they wait in the buffer
        for ev in side:
            ev["ts"] += WINDOW / 2
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    service = make_service(cluster, tmp_path)
    service.start()
    consumer = service.consumer
    waiting = []
    for _ in range(50):
        service.poll_once(timeout_ms=0)
        waiting = [part for part in service.partitions.values()
                   if part.labels is not None and part.labels.buffer and part.labels.next_offset is None]
        if waiting:
            break
    assert waiting, "the scenario needs labels read but none applied yet"
    service.checkpoint()  # saved without a labels offset: no label applied
    assert service.codec.load(waiting[0].tp.partition).get("label_offset") is None
    consumer.rebalance(list(consumer.assigned), retain=True)
    drain(service, max_polls=3000)
    check_equals_replay(cluster, service, preds, labels)


def test_with_any_partitioning_every_merged_window_is_published_after_a_rebalance_that_keeps_a_paused_side(
        tmp_path: Path) -> None:
    """The stall itself: with ``--partitioning any`` the merge waits for the smallest watermark of
    all source partitions, so one partition whose paused side is never fetched again holds every
    window (none published, the merge logging which source it waits for)."""
    from kafka_fakes import FakeConsumer, FakeListener, FakeProducer, ManualClock

    from consumers.checkpoint import CheckpointStore
    from consumers.partials import Merger, MergeStage
    from consumers.service import MetricsService, ServiceConfig

    preds, labels = delayed_data(seed=9)
    cluster = FakeCluster()
    fill(cluster, preds, labels)
    cluster.create("parts", 1)
    config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", dlq_topic="dlq", window=WINDOW,
                           partitioning="any", partials_topic="parts", labels_topic="labels", label_ttl=2 * WINDOW,
                           checkpoint_interval=0.0, idle_close=None, max_future=None, max_merge_buffer=8,
                           max_poll_records=200, state_dir=str(tmp_path / "src"))
    codec = CheckpointStore(None, "m", "parts")
    stage = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=FakeProducer(cluster),
                       partials_topic="parts", output_topic="out", sources=2, make_merger=lambda: Merger(2),
                       codec=codec, checkpoint_interval=0.0)
    stage.consumer.subscribe(["parts"], listener=FakeListener(stage._assign, stage._revoke))
    src = MetricsService(config, FakeConsumer(cluster, "src"), FakeProducer(cluster), clock=ManualClock(),
                         listener=FakeListener).start()
    for _ in range(100):
        src.poll_once(timeout_ms=0)
        stage.poll_once(timeout_ms=0)
        if src.consumer.paused:
            break
    assert src.consumer.paused, "the scenario needs a side paused by the merge buffer"
    src.consumer.rebalance(list(src.consumer.assigned), retain=True)
    for _ in range(400):
        src.poll_once(timeout_ms=0)
        stage.poll_once(timeout_ms=0)
    assert src.failure is None and stage.failure is None
    merged = {json.loads(r.value)["window"]["start"] for r in cluster.records("out")
              if json.loads(r.value)["final"] and json.loads(r.value)["key"]["model"] != "tick"}
    starts = {int(e["ts"] // WINDOW * WINDOW) for side in preds for e in side}
    assert merged == starts - {max(starts)}  # every window but the closers' (still open)
    assert stage.log_waiting() == []


# ---------------------------------------------------------------- a generation that never completes
# Measured on tansu with bare kafka-python members (docs/scaleout.md, "Liveness"): a member that leaves
# while its JoinGroup is pending can be made the leader of the next generation after it left; the
# others then re-join every ~8 s with nothing assigned for 50 s to more than 120 s. The fakes below
# play such a member: never stable, nothing assigned, polls return nothing.
class _StuckMember:
    """A consumer whose group never completes a generation (as kafka-python's is while the leader
    it was given never syncs): poll returns nothing, nothing is ever assigned."""

    stable = False

    def __init__(self) -> None:
        self.closed = False
        self.polls = 0

    def subscribe(self, topics, listener=None) -> None:
        self.listener = listener

    def poll(self, timeout_ms=0, max_records=None):
        self.polls += 1
        return {}

    def highwater(self, tp):
        return None

    def commit(self, offsets, timeout_ms=None) -> None:
        raise AssertionError("nothing is assigned: nothing to commit")

    def close(self, autocommit=True, timeout_ms=None) -> None:
        self.closed = True


def _stable(consumer) -> bool | None:
    return getattr(consumer, "stable", True)


def _stuck_service(tmp_path: Path, rejoin_after: float | None):
    from kafka_fakes import FakeConsumer, FakeListener, FakeProducer, ManualClock
    from test_service_unit import events_with_closers
    from test_service_unit import fill as fill_events

    from consumers.service import MetricsService, ServiceConfig

    cluster = FakeCluster()
    fill_events(cluster, events_with_closers(300))
    config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", dlq_topic="dlq", window=WINDOW,
                           idle_close=None, checkpoint_interval=0.0, max_future=None, state_dir=str(tmp_path),
                           rejoin_after=rejoin_after)
    clock = ManualClock()
    made: list = []

    def factory():
        made.append(FakeConsumer(cluster, config.group_id))
        return made[-1]

    stuck = _StuckMember()
    service = MetricsService(config, stuck, FakeProducer(cluster), clock=clock, listener=FakeListener,
                             consumer_factory=factory, group_stable=_stable).start()
    return cluster, service, clock, stuck, made


def test_a_member_rebalancing_for_rejoin_after_seconds_joins_again_with_a_new_consumer(tmp_path: Path) -> None:
    cluster, service, clock, stuck, made = _stuck_service(tmp_path, rejoin_after=30.0)
    for _ in range(299):  # 29.9 s of polls: not yet
        clock.now += 0.1
        service.poll_once(timeout_ms=0)
    assert made == [] and service.consumer is stuck and not service.partitions
    clock.now += 0.1  # 30 s rebalancing: a new member
    service.poll_once(timeout_ms=0)
    assert stuck.closed and len(made) == 1 and service.consumer is made[0]
    assert service.counts["forced_rejoins"] == 1
    assert service.metrics.registry.get_sample_value("streammetrics_forced_rejoins_total", {"group": "input"}) == 1
    for _ in range(200):  # the new member is assigned (stable) and reads everything: never replaced
        clock.now += 0.5
        service.poll_once(timeout_ms=0)
    assert len(made) == 1 and service.partitions
    assert any(json.loads(r.value).get("final") for r in cluster.records("out"))


def test_without_rejoin_after_a_member_in_a_generation_that_never_completes_waits_forever(tmp_path: Path) -> None:
    """The stall itself (``--rejoin-after 0``): the member keeps its stuck consumer, nothing is read."""
    cluster, service, clock, stuck, made = _stuck_service(tmp_path, rejoin_after=None)
    for _ in range(1200):  # 10 minutes
        clock.now += 0.5
        service.poll_once(timeout_ms=0)
    assert made == [] and service.consumer is stuck and not cluster.records("out")


def test_a_member_stopping_mid_rebalance_waits_for_it_to_finish_before_leaving(tmp_path: Path) -> None:
    """Leaving while a JoinGroup is pending is what stalls a tansu group: on stop the member keeps
    polling until its group is stable (here after 3 s), at most ``leave_wait``, then leaves."""
    from kafka_fakes import FakeCluster as Cluster
    from kafka_fakes import FakeConsumer, FakeListener, FakeProducer, ManualClock

    from consumers.service import MetricsService, ServiceConfig

    def run(stable_after: float | None) -> tuple[float, bool]:
        cluster = Cluster()
        cluster.create("in", 2)
        clock = ManualClock()
        consumer = FakeConsumer(cluster, "g")
        left_at: list[float] = []
        consumer.stable = False  # type: ignore[attr-defined]
        real_poll, real_close = consumer.poll, consumer.close

        def poll(timeout_ms=0, max_records=None):
            clock.now += 0.1
            if stable_after is not None and clock.now >= 1000.0 + stable_after:
                consumer.stable = True  # type: ignore[attr-defined]
            return real_poll(timeout_ms=timeout_ms, max_records=max_records)

        def close(autocommit=True, timeout_ms=None):
            left_at.append(clock.now)
            real_close(autocommit=autocommit, timeout_ms=timeout_ms)

        consumer.poll, consumer.close = poll, close  # type: ignore[method-assign]
        config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", idle_close=None,
                               state_dir=str(tmp_path / str(stable_after)), leave_wait=10.0, rejoin_after=None)
        service = MetricsService(config, consumer, FakeProducer(cluster), clock=clock, listener=FakeListener,
                                 group_stable=_stable)
        service.stop()  # stopped before the first poll: the loop ends at once, the rebalance is under way
        assert service.run() == 0
        return left_at[0] - 1000.0, consumer.stable  # type: ignore[attr-defined]

    left, stable = run(stable_after=3.0)
    assert stable and 3.0 <= left < 3.5
    left, stable = run(stable_after=None)  # never stable: leaves after leave_wait
    assert not stable and 10.0 <= left < 10.5


def test_a_merge_member_rebalancing_for_rejoin_after_seconds_joins_again_with_a_new_consumer() -> None:
    from kafka_fakes import FakeConsumer, FakeListener, FakeProducer, ManualClock

    from consumers.checkpoint import CheckpointStore
    from consumers.partials import Merger, MergeStage, watermark_record

    cluster = FakeCluster()
    cluster.create("parts", 1)
    cluster.create("out", 1)
    cluster.append("parts", watermark_record(0, 10**15), partition=0)
    clock = ManualClock()
    made: list = []

    def factory():
        made.append(FakeConsumer(cluster, "merge"))
        return made[-1]

    stuck = _StuckMember()
    stage = MergeStage(consumer=stuck, producer=FakeProducer(cluster), partials_topic="parts", output_topic="out",
                       sources=1, make_merger=lambda: Merger(1), codec=CheckpointStore(None, "m", "parts"),
                       checkpoint_interval=0.0, listener=FakeListener, rejoin_after=30.0, consumer_factory=factory,
                       group_stable=_stable, clock=clock)
    stage.consumer.subscribe(["parts"], listener=FakeListener(stage._assign, stage._revoke))
    for _ in range(299):
        clock.now += 0.1
        stage.poll_once(timeout_ms=0)
    assert made == [] and stage.consumer is stuck
    clock.now += 0.1
    stage.poll_once(timeout_ms=0)
    assert stuck.closed and stage.consumer is made[0] and stage.metrics is None
    for _ in range(20):
        clock.now += 0.5
        stage.poll_once(timeout_ms=0)
    assert len(made) == 1 and stage.parts and stage.counts["records"] == 1
