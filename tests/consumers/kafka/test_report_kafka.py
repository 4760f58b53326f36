"""``streammetrics report kafka://HOST:PORT/TOPIC``: a snapshot topic read to its end.

The topic is filled the way the service fills it (key ``model|segment|window_start``), with
re-published windows (identical duplicates), a malformed message and records in several
producer batches: tansu's ``end_offsets`` is the last batch's base offset + 1
(consumers/NOTES.md), so a reader trusting it would stop early and miss windows.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streammetrics import cli
from streammetrics.stream.snapshots import snapshot_key

if not os.environ.get("CI"):  # in CI the test extra must provide matplotlib: fail, do not skip
    pytest.importorskip("matplotlib", reason="the report needs matplotlib: pip install 'streammetrics[report]'")

from streammetrics.report.sources import read_kafka  # noqa: E402


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("kafka-report") / "sample.jsonl"
    assert cli.main(["replay", "--sample", "-q", "-o", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def publish(producer, topic: str, snapshots: list[dict]) -> None:
    for snap in snapshots:
        producer.send(topic, key=snapshot_key(snap), value=json.dumps(snap).encode())


def test_report_from_a_topic_read_to_its_end(bootstrap_servers: str, new_topic, make_producer,
                                             snapshots: list[dict], tmp_path: Path, capsys) -> None:
    topic = new_topic(partitions=2)
    producer = make_producer()
    half = len(snapshots) // 2
    publish(producer, topic, snapshots[:half])
    producer.flush()  # separate batches: end_offsets() would stop after the first record of the last one
    publish(producer, topic, snapshots[half - 6:])  # six windows re-published
    producer.send(topic, key=b"broken", value=b"{not json")
    producer.flush()

    loaded = read_kafka(bootstrap_servers, topic, timeout=30)
    assert len(loaded.snapshots) == len(snapshots) == 45
    assert loaded.skipped == 1 and "not JSON" in loaded.problems[0]
    assert loaded.duplicates == 6
    assert {(s.model, s.segment, s.start) for s in loaded.snapshots} == \
        {(s["key"]["model"], s["key"]["segment"], s["window"]["start"]) for s in snapshots}

    out = tmp_path / "kafka.html"
    code = cli.main(["report", f"kafka://{bootstrap_servers}/{topic}", "-o", str(out), "--alert", "roc_auc<0.85"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "skipped 1 malformed snapshot" in captured.err
    assert "3 keys, 45 windows" in captured.out
    page = out.read_text(encoding="utf-8")
    assert page.count('<section class="card key"') == 3
    assert page.count("<svg ") == 18
    assert f"source kafka://{bootstrap_servers}/{topic}" in page


def test_unknown_and_empty_topics(bootstrap_servers: str, new_topic, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.html"
    assert cli.main(["report", f"kafka://{bootstrap_servers}/no-such-topic-for-report", "-o", str(out)]) == 1
    assert "does not exist" in capsys.readouterr().err
    empty = new_topic(partitions=3)
    assert cli.main(["report", f"kafka://{bootstrap_servers}/{empty}", "-o", str(out)]) == 1
    assert "no snapshots in kafka://" in capsys.readouterr().err
    assert not out.exists()


def test_unreachable_broker_is_a_source_error() -> None:
    from consumers.broker import free_port
    from streammetrics.report.sources import SourceError

    with pytest.raises(SourceError, match="cannot connect to Kafka"):
        read_kafka(f"127.0.0.1:{free_port()}", "snapshots", timeout=1.0)
