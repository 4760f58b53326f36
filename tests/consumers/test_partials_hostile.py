"""Hostile partials records (issue 30, findings 7, 8 and 9; probes p_merger_unit.py and
p_svc_partials.py): validated in full and skipped when bad, the previous good partial used; a
window that cannot be merged holds back or drops no other; with --internal-key forged records
are refused; without one, a forged watermark cannot make the merge drop the real partials."""
from __future__ import annotations

import json

import pytest
from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer

import streammetrics as sm
from consumers.checkpoint import CheckpointStore
from consumers.partials import Merger, MergeStage, partial_record, watermark_record
from consumers.signing import RecordSigner
from streammetrics.stream.snapshots import build_snapshot

END = 60_000
WM = [watermark_record(0, 61_000_000), watermark_record(1, 61_000_000)]


def snap(ys, scores, model="m", monitor=None):
    m = monitor or sm.BinaryMonitor()
    for y, s in zip(ys, scores):
        m.update({"y_true": y, "score": s})
    return build_snapshot((model, ""), m, 0, END, final=True)


def run(records, merger=None):
    merger = merger or Merger(sources=2)
    out = []
    for r in records:
        out += merger.apply(r)  # never raises
    return merger, out


GOOD0 = partial_record(0, snap([1, 0], [0.9, 0.2]))
GOOD1 = partial_record(1, snap([1, 1], [0.8, 0.7]))


def mutated(mutate, source=1):
    d = snap([1, 1], [0.8, 0.7])
    mutate(d)
    return partial_record(source, d)


@pytest.mark.parametrize("name,mutate", [
    ("labeled is a string", lambda d: d.__setitem__("labeled", "x")),
    ("late is a string", lambda d: d.__setitem__("late", "x")),
    ("pending is a list", lambda d: d.__setitem__("pending", [1])),
    ("final is a number", lambda d: d.__setitem__("final", 1)),
    ("labeled beyond its state", lambda d: d.__setitem__("labeled", 10**9)),
    ("count beyond its state", lambda d: (d.__setitem__("count", 5), d.__setitem__("labeled", 5))),
    ("state is a number", lambda d: d.__setitem__("state", 5)),
    ("state of another version", lambda d: d.__setitem__("state", {"type": "BinaryMonitor", "version": 99,
                                                                   "config": {}, "state": {}})),
    ("state truncated", lambda d: d["state"]["state"].__setitem__("score", [0.8])),
    ("window ends before it starts", lambda d: d.__setitem__("window", {"start": 0, "end": -1})),
    ("window start 1e300", lambda d: d.__setitem__("window", {"start": 1e300, "end": 1e300})),
])
def test_a_bad_second_partial_is_skipped_and_the_good_one_used(name, mutate):
    """Finding 7: a second partial of (window, source 1) with "labeled": "x" killed the merge
    stage at every start (int("x") while comparing versions)."""
    merger, out = run([GOOD1, mutated(mutate), GOOD0, *WM])
    assert merger.counts["malformed"] == 1, name
    [merged] = out
    assert merged["count"] == 4 and merged["metrics"]["accuracy"] == 1.0 and merged["final"] is True


def test_a_window_with_only_a_refused_partial_of_a_source_is_marked_incomplete():
    merger, out = run([GOOD0, mutated(lambda d: d.__setitem__("labeled", "x")), *WM])
    [merged] = out
    assert merged["count"] == 2 and merged.get("merge_incomplete") is True and merger.counts["malformed"] == 1


def test_the_state_must_be_of_the_services_monitor():
    template = sm.BinaryMonitor()
    merger = Merger(sources=2, template=template)
    other = mutated(lambda d: d.__setitem__("state", sm.BinaryMonitor(threshold=0.7).to_dict()), source=1)
    regression = mutated(lambda d: d.__setitem__("state", sm.RegressionMonitor().to_dict()), source=1)
    _, out = run([GOOD0, other, regression, GOOD1, *WM], merger)
    assert merger.counts["malformed"] == 2 and [s["count"] for s in out] == [4]


def test_an_unloadable_partial_holds_back_or_drops_no_other_window():
    """Finding 8: a partial whose state could not be loaded was kept; at the watermark it raised,
    its window was held forever and the windows due in the same batch before it were lost."""
    records = []
    for model in ("a", "m", "z"):
        for source in (0, 1):
            d = snap([1, 0], [0.9, 0.2], model=model)
            if model == "m" and source == 1:
                d["state"] = {"type": "BinaryMonitor", "version": 99, "config": {}, "state": {}}
            records.append(partial_record(source, d))
    merger, out = run(records + WM)
    assert [s["key"]["model"] for s in out] == ["a", "m", "z"] and merger.windows == {}
    assert [s.get("merge_incomplete", False) for s in out] == [False, True, False]


def test_windows_that_cannot_be_merged_are_dropped_alone():
    """Validated partials that still do not merge (multiclass over other classes): that window is
    counted and dropped, the others due with it are published."""
    def mc(classes, model):
        m = sm.MulticlassMonitor(classes=classes)
        m.update({"y_true": classes[0], "scores": [1.0] + [0.0] * (len(classes) - 1)})
        return build_snapshot((model, ""), m, 0, END, final=True)

    records = [partial_record(0, mc(["a", "b"], "x")), partial_record(1, mc(["a", "c"], "x")),
               partial_record(0, mc(["a", "b"], "y")), partial_record(1, mc(["a", "b"], "y"))]
    merger, out = run(records + WM)
    assert [s["key"]["model"] for s in out] == ["y"] and merger.counts["unmergeable"] == 1
    assert merger.windows == {}


def test_forged_far_watermarks_cannot_drop_the_real_partials():
    """Finding 9 without a key: forged watermarks published the window early and the real
    partial was then dropped as replayed. Now it reopens the window: a new revision with it."""
    far = [watermark_record(0, 10**15), watermark_record(1, 10**15)]
    merger, out = run([GOOD0, *far, GOOD1, *WM, GOOD1])
    assert [(s["revision"], s["count"]) for s in out] == [(0, 2), (1, 4)]
    assert merger.counts["reopened"] == 1 and merger.counts["replayed"] == 1  # the re-sent GOOD1


def stage_with(cluster, signer):
    cluster.create("parts", 1)
    cluster.create("out", 1)
    stage = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=FakeProducer(cluster),
                       partials_topic="parts", output_topic="out", sources=2, make_merger=lambda: Merger(2),
                       codec=CheckpointStore(None, "m", "parts"), checkpoint_interval=0.0, signer=signer)
    stage.consumer.subscribe(["parts"], listener=FakeListener(stage._assign, stage._revoke))
    return stage


def test_with_an_internal_key_forged_partials_and_watermarks_are_refused():
    """Finding 9: a forged partial (large labeled, all-negative labels) produced before the real
    one superseded it: merged count 53 instead of 100. With --internal-key it is refused."""
    signer = RecordSigner(b"k" * 32)
    cluster = FakeCluster()
    stage = stage_with(cluster, signer)
    forged = partial_record(0, snap([0] * 5, [0.9] * 5))
    forged_wm = watermark_record(1, 10**15)
    for value in (forged, forged_wm, signer.seal(GOOD0), signer.seal(GOOD1), b"smsig1:" + b"0" * 64 + b":" + GOOD0,
                  *(signer.seal(w) for w in WM)):
        cluster.append("parts", value)
    for _ in range(3):
        stage.poll_once(timeout_ms=0)
    stage.checkpoint()
    [merged] = [json.loads(r.value) for r in cluster.records("out")]
    assert merged["count"] == 4 and merged["metrics"]["accuracy"] == 1.0
    [part] = stage.parts.values()
    assert part.merger.counts["forged"] == 3 and part.merger.counts["malformed"] == 0


def test_the_service_seals_its_partials_and_watermarks_and_the_stage_opens_them(tmp_path):
    from kafka_fakes import ManualClock

    from consumers.service import MetricsService, ServiceConfig

    key = tmp_path / "key"
    key.write_bytes(b"s3cret-key-of-the-group\n")
    cluster = FakeCluster()
    for topic, n in (("in", 2), ("out", 1), ("dlq", 1), ("parts", 1)):
        cluster.create(topic, n)
    base = 1_767_225_600
    for i in range(200):
        ev = {"ts": base + i * 0.5, "model": "m", "segment": "", "y_true": i % 2, "score": (i % 10) / 10}
        cluster.append("in", json.dumps(ev).encode(), partition=i % 2)
    for p in (0, 1):
        cluster.append("in", json.dumps({"ts": base + 1000, "model": "m", "y_true": 1, "score": 0.5}).encode(),
                       partition=p)
    config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", dlq_topic="dlq", window=60,
                           partitioning="any", partials_topic="parts", checkpoint_interval=0.0, max_future=None,
                           state_dir=str(tmp_path / "src"), internal_key=str(key))
    clock = ManualClock()
    src = MetricsService(config, FakeConsumer(cluster, "src"), FakeProducer(cluster), clock=clock,
                         listener=FakeListener)
    stage = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=FakeProducer(cluster),
                       partials_topic="parts", output_topic="out", sources=2, make_merger=lambda: Merger(2),
                       codec=CheckpointStore(None, "m", "parts"), checkpoint_interval=0.0, signer=src.signer)
    stage.consumer.subscribe(["parts"], listener=FakeListener(stage._assign, stage._revoke))
    src.start()
    for _ in range(10):
        src.poll_once(timeout_ms=0)
        stage.poll_once(timeout_ms=0)
        clock.now += 1
    assert src.signer.enabled and all(r.value.startswith(b"smsig1:") for r in cluster.records("parts"))
    published = [json.loads(r.value) for r in cluster.records("out")]
    assert sum(s["count"] for s in published) == 200 and len(published) == 2
    [part] = stage.parts.values()
    assert part.merger.counts["forged"] == 0 and part.merger.counts["malformed"] == 0


def test_a_merge_holding_windows_back_says_why_at_info(caplog):
    """Issue 25 point 3: a run published nothing with nothing logged at the default level."""
    import logging

    merger = Merger(sources=3)
    for r in (GOOD0, watermark_record(0, 61_000_000), watermark_record(2, 30_000_000)):
        merger.apply(r)
    why = merger.waiting()
    assert why is not None and "first watermark of source partitions [1]" in why
    merger.apply(watermark_record(1, 61_000_000))
    assert "wait for source partitions [2]" in (merger.waiting() or "")
    merger.apply(watermark_record(2, 61_000_000))
    assert merger.waiting() is None  # published: nothing waits
    cluster = FakeCluster()
    stage = stage_with(cluster, None)
    cluster.append("parts", GOOD0)
    with caplog.at_level(logging.INFO, logger="streammetrics.merge"):
        stage.poll_once(timeout_ms=0)
        lines = stage.log_waiting()
    assert lines and "wait for a first watermark of source partitions [0, 1]" in lines[0]
    assert any("wait for a first watermark" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


def test_the_merge_stage_restores_from_its_changelog():
    """The merge stage's state in the merge changelog (no state dir, e.g. a wiped disk): a new
    stage resumes from it (found by the liveness test: the changelog's restore now returns a
    chain, which the merge stage read as one payload: 'assignment failed' at every start)."""
    from kafka_fakes import fake_changelog_reader

    from consumers.changelog import Changelog

    cluster = FakeCluster()
    cluster.create("mcl", 1)

    def stage():
        producer = FakeProducer(cluster)
        s = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=producer, partials_topic="parts",
                       output_topic="out", sources=2, make_merger=lambda: Merger(2),
                       codec=CheckpointStore(None, "m", "parts"), checkpoint_interval=0.0,
                       changelog=Changelog(producer, "mcl", fake_changelog_reader(cluster, "mcl"), 1_048_576))
        s.consumer.subscribe(["parts"], listener=FakeListener(s._assign, s._revoke))
        return s

    cluster.create("parts", 1)
    cluster.create("out", 1)
    first = stage()
    cluster.append("parts", GOOD0)
    first.poll_once(timeout_ms=0)
    first.checkpoint()
    assert first.failure is None and len(cluster.records("mcl")) >= 1
    second = stage()  # a new instance without a state dir: restored from the changelog
    for value in (GOOD1, *WM):
        cluster.append("parts", value)
    for _ in range(3):
        second.poll_once(timeout_ms=0)
    assert second.failure is None
    [merged] = [json.loads(r.value) for r in cluster.records("out")]
    assert merged["count"] == 4
