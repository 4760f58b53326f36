"""Slices, roll-ups, the budget and fairness in the service (contract section 11; issue 28
point 1): with ``--partitioning key`` and ``any`` the partitions publish slice windows as
partials, the merge stage applies ``--max-slice-values`` and rolls up; every published slice and
roll-up equals replay's on the same events (a source and the merge stage killed and restored
mid-way in one of the runs)."""
from __future__ import annotations

import json
import random
import zlib

import pytest

from consumers.command import merger_factory
from consumers.partials import Merger, partial_record
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.slicing import OTHER, SliceSpec, sliced_snapshot_key

BASE = 1_767_225_600  # 2026-01-01T00:00:00Z
WINDOW = 60
PARTITIONS = 3
SPEC = SliceSpec(fields=("country", "device"), max_values=3, rollups=(("country",), ()), fairness_by="device",
                 worst_slices=4)


def make_events(seed: int, n: int = 1500) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s = round(rng.random(), 3)
        out.append({"ts": BASE + i * 420 / n, "model": "m", "segment": rng.choice("ab"),
                    "country": rng.choice(["us", "us", "us", "fr", "fr", "de", "jp", "br"]),
                    "device": rng.choice(["ios", "web", "android"]), "y_true": int(rng.random() < s),
                    "score": s, "id": f"p{i}"})
    return out


def replayed(events: list[dict], compare: str | None = None) -> dict[bytes, dict]:
    pipe = Pipeline(PipelineConfig(window=WINDOW, slicing=SPEC, max_future=None, compare=compare))
    out: list[str] = []
    replay_lines([json.dumps(e).encode() for e in events], pipe, out.append)
    return {sliced_snapshot_key(s): s for s in map(json.loads, out)}


def run_service(tmp_path, events: list[dict], partitioning: str, crash: bool,
                compare: str | None = None) -> dict[bytes, dict]:
    from kafka_fakes import FakeCluster, FakeConsumer, FakeListener, FakeProducer, ManualClock

    from consumers.checkpoint import CheckpointStore
    from consumers.partials import MergeStage
    from consumers.service import MetricsService, ServiceConfig

    cluster = FakeCluster()
    cluster.create("in", PARTITIONS)
    cluster.create("out", 1)
    for e in events:
        key = f"{e['model']}|{e['segment']}".encode()
        p = (zlib.crc32(key) if partitioning == "key" else int(e["id"][1:])) % PARTITIONS
        cluster.append("in", json.dumps(e).encode(), key=key, partition=p)
    for p in range(PARTITIONS):  # a far-ahead tick closes every window of every partition
        cluster.append("in", json.dumps({"ts": BASE + 3000, "model": "tick", "y_true": 1, "score": 0.5}).encode(),
                       key=b"tick|", partition=p)
    config = ServiceConfig(bootstrap_servers="fake", topic="in", output_topic="out", window=WINDOW,
                           partitioning=partitioning, key_check=False, checkpoint_interval=0.0,
                           max_poll_records=50, max_future=None, state_dir=str(tmp_path / partitioning),
                           slicing=SPEC, compare=compare)
    assert config.merged and config.partials_topic
    cluster.create(config.partials_topic, 2)
    make_merger = merger_factory(config, PARTITIONS)

    def source() -> MetricsService:
        return MetricsService(config, FakeConsumer(cluster, "src"), FakeProducer(cluster), clock=ManualClock(),
                              listener=FakeListener).start()

    def merge() -> MergeStage:
        codec = CheckpointStore(str(tmp_path / f"merge-{partitioning}"), "g-merge", config.partials_topic,
                                {"sources": PARTITIONS})
        stage = MergeStage(consumer=FakeConsumer(cluster, "merge"), producer=FakeProducer(cluster),
                           partials_topic=config.partials_topic, output_topic="out", sources=PARTITIONS,
                           make_merger=make_merger, codec=codec, store=codec, checkpoint_interval=0.0,
                           key_of=sliced_snapshot_key)
        stage.consumer.subscribe([config.partials_topic], listener=FakeListener(stage._assign, stage._revoke))
        return stage

    src, stage = source(), merge()
    for i in range(300):
        src.poll_once(timeout_ms=0)
        stage.poll_once(timeout_ms=0)
        if crash and i in (9, 21):  # SIGKILL of the source: unflushed sends lost, a new one restores
            src.producer.buffer.clear()
            src = source()
        if crash and i in (13, 27):  # SIGKILL of the merge stage
            stage.producer.buffer.clear()
            stage = merge()
    assert src.failure is None and stage.failure is None
    out: dict[bytes, dict] = {}
    for rec in cluster.records("out"):
        snap = json.loads(rec.value)
        assert rec.key == sliced_snapshot_key(snap)
        if rec.key in out:  # a re-publication after a crash: the same bytes
            assert snap == out[rec.key]
        out[rec.key] = snap
    return out


@pytest.mark.parametrize(("partitioning", "crash", "compare"),
                         [("key", False, None), ("any", False, None), ("any", True, None), ("any", False, "previous"),
                          ("key", True, "previous")])
def test_service_slices_and_rollups_equal_replay(tmp_path, partitioning: str, crash: bool,
                                                 compare: str | None) -> None:
    """(With ``--compare previous`` the roll-ups carry their ``changes`` as replay's do: the merge
    stage annotates after rolling up.)"""
    events = make_events(3)
    want = {k: s for k, s in replayed(events, compare).items() if s["key"]["model"] == "m"}
    got = {k: s for k, s in run_service(tmp_path, events, partitioning, crash, compare).items()
           if s["key"]["model"] == "m"}
    if compare:  # every slice and roll-up is compared with its own previous window, none with another's
        assert any("changes" in s for s in want.values() if "rollup" in s)
        series: dict[str, list[dict]] = {}
        for snap in want.values():
            series.setdefault(json.dumps([snap.get("rollup"), snap["key"]], sort_keys=True), []).append(snap)
        checked = 0
        for snaps in series.values():
            snaps.sort(key=lambda s: s["window"]["start"])
            for before, after in zip(snaps, snaps[1:]):
                for name, change in after.get("changes", {}).items():
                    assert change["baseline"] == before["metrics"][name]
                    checked += 1
        assert checked > 50
    assert sorted(got) == sorted(want)
    rollups = [s for s in want.values() if "rollup" in s]
    assert {tuple(s["rollup"]) for s in rollups} == {("country",), ("model",)}
    assert any(s["key"].get("country") == OTHER for s in want.values())  # the budget folded some
    assert all("fairness" in s for s in rollups)
    for key, snap in want.items():
        mine = dict(got[key])
        mine.pop("sources", None)
        assert mine == snap, key


def test_merger_refuses_a_partial_whose_segment_is_not_a_slice_key() -> None:
    from streammetrics.monitors import BinaryMonitor
    from streammetrics.stream.slicing import Slicer
    from streammetrics.stream.snapshots import build_snapshot

    merger = Merger(1, slicer=Slicer(SPEC))
    m = BinaryMonitor().update({"y_true": 1, "score": 0.7})
    bad = build_snapshot(("m", "a"), m, 0, 60_000, final=True)
    assert merger.apply(partial_record(0, bad)) == [] and merger.counts["malformed"] == 1
    good = build_snapshot(("m", '["a","fr","ios"]'), m, 0, 60_000, final=True)
    assert merger.apply(partial_record(0, good)) == [] and merger.counts["partials"] == 1


def test_a_slice_window_evicted_by_the_merge_bound_marks_its_rollups_incomplete() -> None:
    """--max-merge-windows counts slice windows: a slice published early (evicted, not final)
    makes the roll-ups it enters ``merge_incomplete`` and not final, never silently whole."""
    from consumers.partials import watermark_record
    from streammetrics.monitors import BinaryMonitor
    from streammetrics.stream.slicing import Slicer
    from streammetrics.stream.snapshots import build_snapshot

    spec = SliceSpec(fields=("country", "device"), rollups=((),))
    merger = Merger(1, slicer=Slicer(spec), max_windows=2)
    out = []
    for i, country in enumerate(["de", "fr", "us"]):
        m = BinaryMonitor().update({"y_true": i % 2, "score": 0.3 + 0.2 * i})
        out += merger.apply(partial_record(0, build_snapshot(("m", json.dumps(["", country, "ios"])), m, 0, 60_000,
                                                             final=True)))
    assert merger.counts["evicted"] == 1
    [early, early_rollup] = out
    assert early["key"]["country"] == "de" and early["final"] is False and early["merge_incomplete"] is True
    assert early_rollup["rollup"] == ["model"] and early_rollup["merge_incomplete"] is True
    assert early_rollup["final"] is False
    rest = merger.apply(watermark_record(0, 60_000_000))
    assert [s["key"].get("country") for s in rest] == ["fr", "us", None]
    assert rest[-1]["count"] == 2  # the rest of the window: marked too, not a whole roll-up
    assert rest[-1]["merge_incomplete"] is True and rest[-1]["final"] is False
