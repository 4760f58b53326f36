"""--partitioning any without a broker: per-partition pipelines with one shared watermark publish
partials; the Merger's final windows equal scikit-learn on each window's labelled events, whatever
the interleaving of the sources, with replays (a source re-sending after a crash) and merge
checkpoints in the middle."""
from __future__ import annotations

import json
import random

import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score

from consumers.partials import Merger, partial_record, watermark_record
from streammetrics.stream.pipeline import Pipeline, PipelineConfig

BASE = 1_767_225_600  # 2026-01-01T00:00:00Z
WINDOW, GRACE = 60, 5


def make_events(seed: int, n: int = 600) -> list[dict]:
    """Predictions over 10 minutes for two keys, half labelled inline, half by a later label event."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = BASE + i * 600 / n + rng.uniform(0, 1.5)
        y = int(rng.random() < 0.4)
        score = round(min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.0), 1.0), 3)
        pred = {"ts": ts, "model": "m", "segment": rng.choice("ab"), "score": score, "id": f"p{i}"}
        if rng.random() < 0.5:
            out.append({**pred, "y_true": y})
        else:
            out.append(pred)
            out.append({"id": f"p{i}", "y_true": y, "ts": ts + rng.uniform(0, 40), "_label": True})
    return out


def truth(events: list[dict]) -> dict[tuple[str, int], list[tuple[int, float]]]:
    labels = {e["id"]: e["y_true"] for e in events if e.get("_label")}
    windows: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for e in events:
        if e.get("_label"):
            continue
        start = int((e["ts"] - 0) // WINDOW * WINDOW)
        y = e.get("y_true", labels.get(e["id"]))
        windows.setdefault((e["segment"], start), []).append((y, e["score"]))
    return windows


def source_records(events: list[dict], partition: int, partitions: int, every: int) -> list[bytes]:
    """What source ``partition`` sends to the partials topic: partials as windows close, and its
    watermark every ``every`` messages and at the end (after a far-future tick closes everything)."""
    mine = [e for e in events if int(e["id"][1:]) % partitions == partition]
    mine.sort(key=lambda e: (e["ts"], 0 if not e.get("_label") else 1))
    mine.append({"ts": BASE + 2000, "model": "tick", "y_true": 1, "score": 0.5})
    pipe = Pipeline(PipelineConfig(window=WINDOW, grace=GRACE, include_state=True,
                                   max_future=None))
    out: list[bytes] = []
    for i, e in enumerate(mine):
        res = pipe.process(json.dumps({k: v for k, v in e.items() if k != "_label"}))
        assert not [p for p in res.problems if p.code not in ("prediction_expired",)], res.problems
        if i % every == every - 1 or i == len(mine) - 1:
            out.extend(partial_record(partition, s) for s in pipe.poll())
            out.append(watermark_record(partition, int(pipe.windows.watermark_us())))
    return out


def interleave(streams: list[list[bytes]], rng: random.Random) -> list[bytes]:
    """A random merge keeping each source's order; some sources replay a stretch (crash, resend)."""
    pos = [0] * len(streams)
    out: list[bytes] = []
    while any(p < len(s) for p, s in zip(pos, streams)):
        i = rng.choice([i for i, s in enumerate(streams) if pos[i] < len(s)])
        take = rng.randint(1, 5)
        out.extend(streams[i][pos[i]:pos[i] + take])
        pos[i] += take
        if rng.random() < 0.1:  # the source crashed and re-sends from an earlier checkpoint
            back = max(0, pos[i] - rng.randint(1, 12))
            out.extend(streams[i][back:pos[i]])
    return out


def check_final(published: list[dict], events: list[dict]) -> None:
    last: dict[tuple[str, str, float], dict] = {}
    for snap in published:
        key = (snap["key"]["model"], snap["key"]["segment"], snap["window"]["start"])
        if key in last:  # a new revision, or the same one again (a re-publication: identical)
            assert snap["revision"] > last[key]["revision"] or snap == last[key]
        last[key] = snap
    expected = truth(events)
    got = {(k[1], k[2]): s for k, s in last.items() if k[0] == "m"}
    assert sorted(got) == sorted(expected)
    for key, rows in expected.items():
        snap = got[key]
        y = [r[0] for r in rows]
        s = [r[1] for r in rows]
        p = [int(v >= 0.5) for v in s]
        assert snap["final"] and snap["count"] == len(rows) == snap["labeled"] and snap["pending"] == 0, snap
        m = snap["metrics"]
        assert m["accuracy"] == pytest.approx(accuracy_score(y, p), abs=1e-12)
        assert m["precision"] == pytest.approx(precision_score(y, p, zero_division=0), abs=1e-12)
        assert m["recall"] == pytest.approx(recall_score(y, p, zero_division=0), abs=1e-12)
        assert m["f1"] == pytest.approx(f1_score(y, p, zero_division=0), abs=1e-12)
        if len(set(y)) == 2:
            assert m["roc_auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_merged_windows_equal_sklearn(seed: int) -> None:
    rng = random.Random(seed)
    partitions = rng.choice([2, 3, 6])
    events = make_events(seed)
    streams = [source_records(events, p, partitions, every=rng.randint(3, 40)) for p in range(partitions)]
    records = interleave(streams, rng)
    merger = Merger(partitions)
    published = []
    for i, value in enumerate(records):
        published.extend(merger.apply(value))
        if i % 97 == 0:  # a merge checkpoint and restore in between changes nothing
            merger = Merger(partitions).load_dict(json.loads(json.dumps(merger.to_dict())))
    check_final(published, events)
    assert merger.open_windows == 0
    assert merger.counts["malformed"] == 0
    # the same records again (every source replayed everything): nothing new is published
    assert [s for v in records for s in merger.apply(v)] == []


def test_republication_is_identical() -> None:
    """A merge restored from its checkpoint re-reads the partials after it and publishes the same
    bytes under the same keys; another order of the partials changes only revision numbers."""
    events = make_events(7)
    streams = [source_records(events, p, 3, every=10) for p in range(3)]
    records = interleave(streams, random.Random(1))
    merger = Merger(3)
    first = []
    saved, at = None, None
    for i, value in enumerate(records):
        if i == len(records) // 3:
            saved, at = json.dumps(merger.to_dict()), len(first)
        first.extend(json.dumps(s) for s in merger.apply(value))
    restored = Merger(3).load_dict(json.loads(saved))
    again = [json.dumps(s) for v in records[len(records) // 3:] for s in restored.apply(v)]
    assert again == first[at:] and len(again) > 10
    other = Merger(3)
    shuffled = [s for v in interleave(streams, random.Random(2)) for s in other.apply(v)]
    finals = [sorted(json.dumps({**json.loads(s), "revision": 0}) for s in first if json.loads(s)["final"]),
              sorted(json.dumps({**s, "revision": 0}) for s in shuffled if s["final"])]
    assert finals[0] == finals[1]


def test_late_at_the_source_is_never_merged() -> None:
    """Shared watermark: a key's event behind another key's watermark is late at its partition."""
    pipe = Pipeline(PipelineConfig(window=WINDOW, grace=GRACE, max_future=None))
    assert pipe.process(json.dumps({"ts": BASE + 130, "model": "m", "segment": "a", "y_true": 1, "score": 0.9})).applied
    late = pipe.process(json.dumps({"ts": BASE + 10, "model": "m", "segment": "b", "y_true": 1, "score": 0.9}))
    assert [p.code for p in late.problems] == ["late"]
    assert pipe.windows.watermark_us() == (BASE + 125) * 1_000_000


def test_merge_window_bound_publishes_oldest_incomplete() -> None:
    merger = Merger(2, max_windows=2)
    events = [{"ts": BASE + 60 * k + 1, "model": "m", "y_true": 1, "score": 0.9} for k in range(3)]
    events.append({"ts": BASE + 1000, "model": "tick", "y_true": 1, "score": 0.9})
    pipe = Pipeline(PipelineConfig(window=WINDOW, include_state=True, max_future=None))
    for e in events:
        pipe.process(json.dumps(e))
    partials = [partial_record(0, s) for s in pipe.poll() if s["key"]["model"] == "m"]
    assert len(partials) == 3
    out = merger.apply(partials[0]) + merger.apply(partials[1])
    assert out == [] and merger.open_windows == 2
    out = merger.apply(partials[2])  # one over the bound: the oldest goes out incomplete
    assert [(s["window"]["start"], s["final"], s.get("merge_incomplete")) for s in out] == [(BASE, False, True)]
    assert merger.counts["evicted"] == 1 and merger.open_windows == 2
    assert merger.apply(partials[0]) == [] and merger.counts["dropped"] == 1


def test_malformed_records_are_counted_not_fatal() -> None:
    merger = Merger(2)
    for value in (b"not json", b"{}", None, watermark_record(5, 1), json.dumps(
            {"schema": "streammetrics.partial/1", "source": 0, "snapshot": {"key": 1}}).encode()):
        assert merger.apply(value) == []
    assert merger.counts["malformed"] == 5


# ----------------------------------------------------------------------------- the service, with fakes
def test_service_sources_and_merge_stage_crash_and_restore_equal_sklearn(tmp_path) -> None:
    """MetricsService in --partitioning any mode publishes partials and watermarks; a MergeStage
    merges them; both are killed mid-way (no clean stop) and replaced by new instances that
    restore from their checkpoints: the final windows equal scikit-learn's."""
    from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, ManualClock

    from consumers.checkpoint import CheckpointStore
    from consumers.partials import MergeStage
    from consumers.service import MetricsService, ServiceConfig

    cluster = FakeCluster()
    cluster.create("in", 3)
    cluster.create("out", 1)
    events = make_events(11, n=900)
    for e in sorted(events, key=lambda e: (e["ts"], bool(e.get("_label")))):
        p = int(e["id"][1:]) % 3
        cluster.append("in", json.dumps({k: v for k, v in e.items() if k != "_label"}).encode(), partition=p)
    for p in range(3):
        cluster.append("in", json.dumps({"ts": BASE + 2000, "model": "tick", "y_true": 1, "score": 0.5}).encode(),
                       partition=p)
    config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", window=WINDOW, grace=GRACE,
                           partitioning="any", checkpoint_interval=0.0, max_poll_records=40, max_future=None,
                           state_dir=str(tmp_path / "src"))
    assert config.partials_topic == "streammetrics-in-partials"
    cluster.create(config.partials_topic, 2)

    def source() -> MetricsService:
        return MetricsService(config, FakeConsumer(cluster, "src"), FakeProducer(cluster), clock=ManualClock(),
                              listener=FakeListener).start()

    def merge() -> MergeStage:
        codec = CheckpointStore(str(tmp_path / "merge"), "g-merge", config.partials_topic, {"sources": 3})
        stage = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=FakeProducer(cluster),
                           partials_topic=config.partials_topic, output_topic="out", sources=3,
                           make_merger=lambda: Merger(3), codec=codec, store=codec, checkpoint_interval=0.0,
                           metrics=metrics)
        stage.consumer.subscribe([config.partials_topic], listener=FakeListener(stage._assign, stage._revoke))
        return stage

    from consumers.observability import ServiceMetrics

    metrics = ServiceMetrics()
    src, stage = source(), merge()
    for i in range(400):
        src.poll_once(timeout_ms=0)
        stage.poll_once(timeout_ms=0)
        if i in (7, 19):  # SIGKILL of the source: unflushed sends are lost, a new one restores
            src.producer.buffer.clear()
            src = source()
        if i in (11, 23):  # SIGKILL of the merge stage
            stage.producer.buffer.clear()
            stage = merge()
    assert src.failure is None and stage.failure is None
    published = [json.loads(r.value) for r in cluster.records("out")]
    check_final(published, events)
    assert stage.counts["published"] > 0 and any(s["revision"] > 0 for s in published)
    value = metrics.registry.get_sample_value
    assert value("streammetrics_snapshots_total") == len(published)  # merged snapshots, not partials
    assert value("streammetrics_merge_records_total", {"outcome": "partial"}) > 0
    assert value("streammetrics_merge_records_total", {"outcome": "watermark"}) > 0
    assert value("streammetrics_merge_windows") == 0


def test_a_partition_without_events_does_not_hold_the_merge_back(tmp_path) -> None:
    """Partition 2 never gets an event: after --idle-close without a move of its watermark it
    adopts the other partitions' (as the local merge stage knows them), the merge publishes every
    window, and a later event of partition 2 for a merged window is late (dead-lettered)."""
    from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, ManualClock

    from consumers.checkpoint import CheckpointStore
    from consumers.partials import MergeStage
    from consumers.service import MetricsService, ServiceConfig

    cluster = FakeCluster()
    for topic, n in (("in", 3), ("out", 1), ("dlq", 1), ("parts", 1)):
        cluster.create(topic, n)
    events = [e for e in make_events(3, n=300) if "y_true" in e and not e.get("_label")]
    for e in events:
        cluster.append("in", json.dumps(e).encode(), partition=int(e["id"][1:]) % 2)
    for p in range(2):
        cluster.append("in", json.dumps({"ts": BASE + 2000, "model": "tick", "y_true": 1, "score": 0.5}).encode(),
                       partition=p)
    config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", dlq_topic="dlq", window=WINDOW,
                           grace=GRACE, partitioning="any", partials_topic="parts", checkpoint_interval=0.0,
                           idle_close=30.0, max_future=None, state_dir=str(tmp_path / "src"))
    codec = CheckpointStore(None, "m", "parts")
    stage = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=FakeProducer(cluster),
                       partials_topic="parts", output_topic="out", sources=3, make_merger=lambda: Merger(3),
                       codec=codec, checkpoint_interval=0.0)
    stage.consumer.subscribe(["parts"], listener=FakeListener(stage._assign, stage._revoke))
    stage.start = lambda: stage  # type: ignore[method-assign]  # no thread here: polled by hand below
    clock = ManualClock()

    def source() -> MetricsService:
        return MetricsService(config, FakeConsumer(cluster, "src"), FakeProducer(cluster), clock=clock,
                              listener=FakeListener, merge=stage).start()

    src = source()

    def run(polls: int) -> None:
        for _ in range(polls):
            src.poll_once(timeout_ms=0)
            stage.poll_once(timeout_ms=0)
            clock.now += 5.0

    run(30)
    assert src.counts.get("idle_advances", 0) >= 1
    published = [json.loads(r.value) for r in cluster.records("out")]
    finals = {(s["key"]["segment"], s["window"]["start"]) for s in published if s["final"]}
    assert finals == set(truth(events))
    # partition 2 wakes up with an event of an early window: late at its source, never merged
    src = source()  # a new instance: partition 2's advanced watermark came back from its checkpoint
    cluster.append("in", json.dumps({**events[0], "id": "late"}).encode(), partition=2)
    run(5)
    assert src.counts["late"] == 1 and len(cluster.records("dlq")) == 1
    assert [json.loads(r.value) for r in cluster.records("out")] == published


def test_merged_windows_raise_the_alerts_one_pipeline_raises():
    """--partitioning any: the merge stage's alert events equal those of one pipeline over every
    event (the merged windows are its windows), with a merge checkpoint in the middle."""
    from streammetrics.stream.alerting import AlertSpec, parse_rules

    spec = AlertSpec(parse_rules(["roc_auc<0.8", "accuracy.drop>0.05", "f1>0.6"]))
    events = [e for e in make_events(9, 1200) if "y_true" in e and not e.get("_label")]
    for e in events:
        e["id"] = f"p{events.index(e)}"
    whole = Pipeline(PipelineConfig(window=WINDOW, grace=GRACE, max_future=None, alerts=spec))
    expected = []
    for e in sorted(events, key=lambda e: e["ts"]) + [{"ts": BASE + 2000, "model": "tick", "y_true": 1,
                                                        "score": 0.5}]:
        whole.process(json.dumps(e))
        whole.poll()
        expected += [a for a in whole.take_alerts() if a["key"]["model"] == "m"]
    assert {a["state"] for a in expected} == {"firing", "resolved"}
    streams = [source_records(events, p, 3, every=7) for p in range(3)]
    records = interleave(streams, random.Random(4))
    merger = Merger(3, alerts=spec)
    got = []
    for i, value in enumerate(records):
        merger.apply(value)
        got += merger.take_alerts()
        if i == len(records) // 2:  # a merge checkpoint, restored into a new merger
            state = json.loads(json.dumps(merger.to_dict()))
            merger = Merger(3, alerts=spec).load_dict(state)
    key = lambda a: (a["window"]["start"], a["key"]["segment"], a["rule"], a["state"])  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
    broken = dict(state, alerts={"type": "AlertEngine", "version": 1, "rules": ["f1<0.1"]})
    with pytest.raises(ValueError, match="rules differ"):
        Merger(3, alerts=spec).load_dict(broken)
