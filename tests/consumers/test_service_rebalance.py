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
