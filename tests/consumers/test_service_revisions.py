"""A (key, revision) is published with one content only, also across crashes (hostile-operations
finding 13: after SIGKILLs with delayed labels, 12 of 123 pairs were re-published with different
content: the service emitted a revision at every poll that found new labels, so a revision's
labels depended on where the polls cut the input, and a restart cuts it elsewhere).

Revisions now come at the window engine's revision ticks (event time entering a new pane; a
function of the input, as in ``replay``), plus, with ``--idle-close``, when a partition read to
its end has been quiet that long: that revision is checkpointed at once, so a restart numbers
the next one after it."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from kafka_fakes import FakeCluster
from test_service_disk_faults import read_to_end, single_topic
from test_service_labels import delayed_data, make_service, replay_finals, same, without_revision

from consumers.service import MetricsService


def contents(cluster: FakeCluster) -> dict[tuple[str, int], set[bytes]]:
    """(Kafka key, revision) -> the distinct values published under it."""
    out: dict[tuple[str, int], set[bytes]] = defaultdict(set)
    for rec in cluster.records("out"):
        out[(rec.key.decode(), json.loads(rec.value)["revision"])].add(rec.value)
    return out


def crash_and_restart(cluster: FakeCluster, state: Path, polls: list[int], sizes: list[int],
                      **options) -> MetricsService:
    """Runs of the service on ``state``, the i-th stopped after ``polls[i]`` polls without a last
    checkpoint (a SIGKILL), each polling ``sizes[i]`` records at a time; the last one to the end."""
    for n, size in zip(polls, sizes):
        service = make_service(cluster, state, labels_topic=None, max_poll_records=size, checkpoint_interval=5.0,
                               **options)
        service.start()
        clock = service._clock
        for _ in range(n):
            service.poll_once(timeout_ms=0)
            clock.now += 1.0  # type: ignore[attr-defined]
        service.producer.deliver()  # what was sent reaches the broker, then the process dies
    service = make_service(cluster, state, labels_topic=None, max_poll_records=sizes[-1], **options)
    service.start()
    read_to_end(service)
    service.checkpoint()
    service.close()
    return service


@pytest.mark.parametrize("seed", [5, 8])
def test_a_revision_has_one_content_across_crashes_with_other_poll_sizes(seed, tmp_path):
    preds, labels = delayed_data(seed=seed)
    cluster = FakeCluster()
    single_topic(cluster, preds, labels)
    service = crash_and_restart(cluster, tmp_path, polls=[9, 14, 6], sizes=[40, 7, 23, 31])
    published = contents(cluster)
    differing = {k: v for k, v in published.items() if len(v) > 1}
    assert not differing, f"{len(differing)} of {len(published)} (key, revision) pairs with several contents"
    assert sum(1 for k in published if k[1] > 0) >= 20  # revisions were published (and re-published)
    # and the finals are replay's, revision numbers included
    merged = [sorted(p + lab, key=lambda e: e["ts"]) for p, lab in zip(preds, labels)]
    expected = replay_finals(service.config.pipeline_config(), merged, [[] for _ in merged])
    last = {}
    for rec in cluster.records("out"):
        last[rec.key.decode()] = json.loads(rec.value)
    finals = {k: v for k, v in last.items() if v["final"]}
    assert len(finals) >= 10
    for key, snap in finals.items():
        assert snap["revision"] == expected[key]["revision"], key
        assert same(without_revision(snap), without_revision(expected[key]), False), key


def test_a_quiet_partition_publishes_its_labels_and_a_restart_numbers_after_them(tmp_path):
    preds, labels = delayed_data(seed=5)
    cluster = FakeCluster()
    single_topic(cluster, preds, labels)
    cut = {p: len(log) * 2 // 3 for p, log in enumerate(cluster.topics["in"])}
    tail = {p: log[cut[p]:] for p, log in enumerate(cluster.topics["in"])}
    for p, log in enumerate(cluster.topics["in"]):
        del log[cut[p]:]  # the input so far: then the producers pause
    service = make_service(cluster, tmp_path, labels_topic=None, idle_close=5.0, checkpoint_interval=1000.0)
    service.start()
    read_to_end(service)
    before = len(cluster.records("out"))
    clock = service._clock
    for _ in range(8):  # quiet for 8 s (> --idle-close): the labels in so far are published
        clock.now += 1.0  # type: ignore[attr-defined]
        service.poll_once(timeout_ms=0)
    prompt = cluster.records("out")[before:]
    assert any(json.loads(r.value)["revision"] > 0 for r in prompt)
    assert service.counts.get("quiet_revisions", 0) >= 1
    # SIGKILL now (no checkpoint but the one after the quiet revisions), more input, a restart
    service.producer.deliver()
    for p, recs in tail.items():
        for rec in recs:
            cluster.append("in", rec.value, rec.key, partition=p)
    restarted = make_service(cluster, tmp_path, labels_topic=None, idle_close=5.0)
    restarted.start()
    read_to_end(restarted)
    restarted.checkpoint()
    restarted.close()
    differing = {k: v for k, v in contents(cluster).items() if len(v) > 1}
    assert not differing


def test_every_published_snapshot_carries_the_sha256_of_its_value(tmp_path):
    """Where a (key, revision) could repeat with other content (docs/revisions.md), readers tell
    the contents apart by the header streammetrics.content (the SHA-256 of the value)."""
    import hashlib

    from kafka_fakes import FakeCluster
    from test_service_unit import drain, events_with_closers, fill, make_service

    cluster = FakeCluster()
    fill(cluster, events_with_closers(400))
    drain(make_service(cluster, tmp_path))
    records = cluster.records("out")
    assert records
    for rec in records:
        assert dict(rec.headers)["streammetrics.content"] == hashlib.sha256(rec.value).hexdigest().encode()
