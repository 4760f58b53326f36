"""Nothing the service produces exceeds the producer's max_request_size, and one bad message
makes one dead letter (issue 10, points 3 and 4), with in-memory Kafka fakes whose producer
refuses records over the limit as kafka-python does."""
from __future__ import annotations

import json

import pytest
from kafka_fakes import FakeCluster
from test_service_unit import events_with_closers, expected_counts, fill, make_service

LIMIT = 6000


def test_an_oversized_bad_message_makes_a_truncated_dead_letter_with_its_coordinates(tmp_path):
    cluster = FakeCluster()
    fill(cluster, [], partitions=1)
    big = b'{"ts": 5, "model": "m", "y_true": 1, "score": "' + b"x" * 20_000 + b'"}'
    cluster.append("in", big, key=b"m|")
    cluster.append("in", b'{"ts": 6, "model": "m", "segment": "", "y_true": 1, "score": 0.25}', key=b"m|")
    service = make_service(cluster, tmp_path, max_request_size=LIMIT)
    service.producer.config["max_request_size"] = LIMIT
    service.consumer.on_idle = service.stop
    assert service.run() == 0  # kafka-python raised MessageSizeTooLargeError here, at every restart
    [letter] = cluster.records("dlq")
    headers = dict(letter.headers)
    assert headers["streammetrics.truncated"] == str(len(big)).encode()
    assert big.startswith(letter.value) and 0 < len(letter.value) < LIMIT
    assert headers["streammetrics.source"] == b"in/0/0" and headers["streammetrics.offset"] == b"0"
    assert headers["streammetrics.field"] == b"score"
    assert service.counts["events"] == 1


# these snapshots are 988-1,423 bytes with their state (the events form), 672-792 without: a bound of
# 900 bytes keeps their metrics and drops their state, set by the producer's max_request_size (900 for
# key and value, after the room kept for framing) or by --max-snapshot-bytes (900 for the value, the
# producer taking 1 MB)
@pytest.mark.parametrize("bound", ["max_request_size", "max_snapshot_bytes"])
def test_a_snapshot_over_the_limit_is_published_without_its_state_and_counted(tmp_path, bound):
    events = events_with_closers(600, seed=2)
    cluster = FakeCluster()
    fill(cluster, events)
    if bound == "max_request_size":
        service = make_service(cluster, tmp_path)
        service.producer.config["max_request_size"] = 900 + 512  # metrics fit, the state does not
    else:
        service = make_service(cluster, tmp_path, max_snapshot_bytes=900)  # was accepted and ignored
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    records = cluster.records("out")
    snaps = [json.loads(r.value) for r in records]
    assert snaps and all(s["state_dropped"] is True and "state" not in s for s in snaps)
    sizes = [len(r.value) + (len(r.key) if bound == "max_request_size" else 0) for r in records]
    assert max(sizes) <= 900
    assert {f"{s['key']['model']}|{s['key']['segment']}|{s['window']['start']}": s["count"] for s in snaps} \
        == dict(expected_counts(events))
    text = service.metrics.render().decode()
    assert f'streammetrics_oversized_snapshots_total{{outcome="state_dropped"}} {len(snaps)}.0' in text


def test_max_snapshot_bytes_leaves_partials_whole_and_bounds_the_merged_snapshot(tmp_path):
    events = events_with_closers(600, seed=2)
    cluster = FakeCluster()
    fill(cluster, events)
    service = make_service(cluster, tmp_path, max_snapshot_bytes=900, partitioning="any",
                           partials_topic="partials")
    assert service.config.pipeline_config(max_snapshot_bytes=None).include_state  # partials carry state
    pipeline = service._new_pipeline()
    assert pipeline.config.max_snapshot_bytes > 900  # the merge needs the partials' states
    snap = {"key": {"model": "m", "segment": ""}, "window": {"start": 0.0, "end": 60.0}, "count": 1,
            "state": {"events": list(range(400))}}
    assert len(service.snapshot_value(snap, b"k", lambda s: json.dumps(s).encode())) > 900  # a partial
    merged = service.snapshot_value(snap, b"m||0")  # what the merge stage publishes
    assert merged is not None and len(merged) <= 900 and json.loads(merged)["state_dropped"] is True


def test_a_snapshot_too_big_even_without_state_is_dropped_counted_and_the_service_goes_on(tmp_path):
    events = events_with_closers(300, seed=2)
    cluster = FakeCluster()
    fill(cluster, events)
    service = make_service(cluster, tmp_path)
    service.producer.config["max_request_size"] = 700
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    assert cluster.records("out") == []
    assert service.counts["snapshots_dropped"] == len(expected_counts(events))


def test_one_array_message_with_many_bad_elements_makes_one_dead_letter_listing_them(tmp_path):
    cluster = FakeCluster()
    fill(cluster, [], partitions=1)
    elements = []
    for i in range(300):
        if i % 3 == 0:
            elements.append({"ts": 5, "model": "m", "y_true": 1, "score": 0.5})
        elif i % 3 == 1:
            elements.append({"ts": 5, "model": "m", "y_true": 1})  # missing score
        else:
            elements.append({"ts": 5, "model": "m", "y_true": 7, "score": 0.5})  # bad label
    message = json.dumps(elements).encode()
    cluster.append("in", message, key=b"m|")
    service = make_service(cluster, tmp_path)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    [letter] = cluster.records("dlq")  # was 200 dead letters of the whole message each
    headers = dict(letter.headers)
    assert letter.value == message
    assert headers["streammetrics.problem_count"] == b"200"
    problems = json.loads(headers["streammetrics.problems"])
    assert len(problems) == 100  # MAX_LISTED_PROBLEMS
    assert [p["index"] for p in problems[:4]] == [1, 2, 4, 5]
    assert problems[0]["field"] == "score" and problems[0]["code"] and "score" in problems[0]["reason"]
    assert problems[1]["field"] == "y_true"
    assert headers["streammetrics.index"] == b"1"
    assert b"199 more problems" in headers["streammetrics.reason"]
    assert service.counts["events"] == 100 and service.counts["rejected"] == 200


def test_snapshots_published_from_the_size_checks_line_keep_their_own_key_when_some_degrade(tmp_path):
    # the service publishes each snapshot's line as the pipeline's size check encoded it
    # (Pipeline.lines) and re-encodes only degraded ones: in a run where some snapshots of a poll
    # keep their state and others lose it, every record's value is its own snapshot's canonical line
    from streammetrics.stream.snapshots import snapshot_key, snapshot_line

    events = events_with_closers(600, seed=2)
    cluster = FakeCluster()
    fill(cluster, events)
    service = make_service(cluster, tmp_path, max_poll_records=500)
    service.producer.config["max_request_size"] = 2000 + 512  # between the sizes with their state (~1.5-2 kB)
    service.consumer.on_idle = service.stop
    assert service.run() == 0
    records = cluster.records("out")
    snaps = [json.loads(r.value) for r in records]
    assert any("state" in s for s in snaps) and any(s.get("state_dropped") or s.get("state_coarsened") for s in snaps)
    for rec, snap in zip(records, snaps):
        assert rec.key == snapshot_key(snap) and rec.value == snapshot_line(snap).encode()
    assert {f"{s['key']['model']}|{s['key']['segment']}|{s['window']['start']}": s["count"] for s in snaps} \
        == dict(expected_counts(events))
