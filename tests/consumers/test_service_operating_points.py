"""``consume --target-recall ... --cost-fn``: the service's snapshots carry the operating points
of each window (equal to ``BinaryScores`` on the window's state), as replay's do (contract
section 11; broker-free, with the in-memory Kafka fakes); the slicing flags' configuration."""
from __future__ import annotations

import json

import pytest
from kafka_fakes import FakeCluster
from test_service_unit import drain, events_with_closers, fill, final_snapshots, make_service

from consumers.command import config_from_args
from streammetrics.cli import build_parser
from streammetrics.core.accumulator import from_dict
from streammetrics.monitors.operating_points import OperatingPoints

POINTS = OperatingPoints(target_recall=0.6, target_fpr=0.1, cost_fp=1.0, cost_fn=3.0)


def test_service_snapshots_carry_operating_points(tmp_path):
    cluster = FakeCluster()
    fill(cluster, events_with_closers())
    drain(make_service(cluster, tmp_path / "state", operating_points=POINTS))
    snaps = [json.loads(v) for v in final_snapshots(cluster).values()]
    assert snaps
    for snap in snaps:
        monitor = from_dict(snap["state"])
        assert snap["metrics"] == {**monitor.snapshot(), **POINTS.metrics(monitor)}
        assert "precision_at_recall" in snap["metrics"] and "recall_at_precision" not in snap["metrics"]


def _args(*extra: str):
    return build_parser().parse_args(["consume", "--bootstrap-servers", "x:1", "--topic", "in", "--output-topic",
                                      "out", *extra])


def test_consume_arguments():
    config = config_from_args(_args("--target-fpr", "0.05", "--cost-fp", "2", "--cost-fn", "1"))
    assert config.pipeline_config().operating_points == OperatingPoints(target_fpr=0.05, cost_fp=2.0, cost_fn=1.0)
    assert config_from_args(_args()).operating_points is None
    sliced = config_from_args(_args("--slice-by", "country", "--max-slice-values", "7", "--rollup", "model"))
    assert sliced.merged and not sliced.partitioned and sliced.partials_topic
    assert (sliced.slicing.fields, sliced.slicing.max_values, sliced.slicing.rollups) == (("country",), 7, ((),))
    pipeline = sliced.pipeline_config()
    assert pipeline.slicing == sliced.slicing and pipeline.slice_output is False  # (budget, roll-ups: the merge)
    assert sliced.window_settings()["slice_by"] == ["country"]  # (a checkpoint of other keys is refused)
    with pytest.raises(ValueError, match="--labels-topic"):
        config_from_args(_args("--slice-by", "country", "--labels-topic", "labels"))
    with pytest.raises(ValueError, match="--cumulative"):
        config_from_args(_args("--fairness-by", "device", "--cumulative"))
    with pytest.raises(ValueError, match="--cost-fn"):
        config_from_args(_args("--cost-fp", "2"))
