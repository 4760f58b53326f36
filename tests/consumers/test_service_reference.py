"""``consume --reference``: the service's snapshots carry the label-free metrics of keys with
a reference (equal to ``Reference.metrics`` of the window's state) and nulls for the others
(broker-free, with the in-memory Kafka fakes)."""
from __future__ import annotations

import json

from kafka_fakes import FakeCluster
from test_service_unit import drain, events_with_closers, fill, final_snapshots, make_service

from consumers.command import config_from_args
from streammetrics.cli import build_parser
from streammetrics.core.accumulator import from_dict
from streammetrics.monitors.reference import METRICS
from streammetrics.stream.references import load_references
from streammetrics.stream.synthetic import generate_events, write_jsonl


def test_service_snapshots_carry_reference_metrics(tmp_path):
    ref_file = tmp_path / "ref.jsonl"
    write_jsonl(str(ref_file), generate_events(3000, duration=600, seed=9))
    refs = load_references(str(ref_file))
    known = sorted(refs)[0]
    events = events_with_closers()
    cluster = FakeCluster()
    fill(cluster, events)
    drain(make_service(cluster, tmp_path / "state", references={known: refs[known]}))
    snaps = [json.loads(v) for v in final_snapshots(cluster).values()]
    assert snaps
    seen = set()
    for snap in snaps:
        key = (snap["key"]["model"], snap["key"]["segment"])
        seen.add(key)
        if key == known:
            assert {k: snap["metrics"][k] for k in METRICS} == refs[key].metrics(from_dict(snap["state"]))
        else:
            assert all(snap["metrics"][k] is None for k in METRICS)
    assert known in seen and len(seen) > 1


def test_consume_arguments_load_the_reference(tmp_path):
    ref_file = tmp_path / "ref.jsonl"
    write_jsonl(str(ref_file), generate_events(500, duration=120, seed=3))
    args = build_parser().parse_args(["consume", "--bootstrap-servers", "x:1", "--topic", "in", "--output-topic",
                                      "out", "--reference", str(ref_file), "--max-references", "50"])
    config = config_from_args(args)
    assert config.references is not None and set(config.references) == set(load_references(str(ref_file)))
    assert config.pipeline_config().references is config.references
    assert config.max_references == 50


def test_label_free_metrics_are_prometheus_gauges_within_the_key_bound(tmp_path):
    from consumers.observability import ServiceMetrics

    ref_file = tmp_path / "ref.jsonl"
    write_jsonl(str(ref_file), generate_events(3000, duration=600, seed=9))
    refs = load_references(str(ref_file))
    events = events_with_closers()
    cluster = FakeCluster()
    fill(cluster, events)
    drain(make_service(cluster, tmp_path / "state", references=refs))
    metrics = ServiceMetrics(max_keys=1)
    for value in final_snapshots(cluster).values():
        metrics.observe_snapshot(json.loads(value))
    page = metrics.render().decode()
    lines = [line for line in page.splitlines() if line.startswith("streammetrics_window_metric{")]
    for name in ("drift_ks", "drift_psi", "estimated_roc_auc", "estimated_f1", "ece"):
        assert sum(f'metric="{name}"' in line for line in lines) == 1, name  # one key exported (max_keys=1)
