"""Alert rules in the service (contract section 10): events on --alerts-topic keyed
rule|model|segment, the same after any fault and restart as in an uninterrupted run (each
transition once; a re-publication carries the same key and bytes), and the firing gauge."""
from __future__ import annotations

import json

import pytest
from kafka_fakes import FakeCluster, Faults
from test_service_faults import run_until_done
from test_service_unit import events_with_closers, fill

from consumers.command import config_from_args
from consumers.observability import ServiceMetrics
from streammetrics.cli import build_parser
from streammetrics.stream.alerting import AlertSpec, parse_rules

RULES = ("roc_auc<0.9", "log_loss.rise>0.02")


def alerts(cluster: FakeCluster) -> list[tuple[str, dict]]:
    """(key, event) of every alert message, re-publications dropped after checking their bytes."""
    seen: dict[tuple[str, str, str], bytes] = {}
    out = []
    for rec in cluster.records("alerts"):
        event = json.loads(rec.value)
        ident = (rec.key.decode(), event["id"], event["state"])
        if ident in seen:
            assert seen[ident] == rec.value  # a re-publication is byte-identical
            continue
        seen[ident] = rec.value
        out.append((rec.key.decode(), event))
    return out


@pytest.fixture(scope="module")
def events():
    return events_with_closers(1500, seed=11)


def run(events, tmp_path, faults=None, **options):
    cluster = FakeCluster()
    fill(cluster, events, per_message=3)
    cluster.create("alerts", 1)
    statuses = run_until_done(cluster, tmp_path, faults, alerts=AlertSpec(parse_rules(RULES)),
                              alerts_topic="alerts", **options)
    return cluster, statuses


@pytest.fixture(scope="module")
def uninterrupted(events, tmp_path_factory):
    cluster, statuses = run(events, tmp_path_factory.mktemp("ref"))
    assert statuses == [0]
    got = alerts(cluster)
    assert {e["state"] for _, e in got} == {"firing", "resolved"}
    for key, event in got:
        assert key == f"{event['rule']}|{event['key']['model']}|{event['key']['segment']}"
        assert event["schema"] == "streammetrics.alert/1" and event["rule"] in RULES
    return got


@pytest.mark.parametrize("step, nth", [("send", 3), ("send", 15), ("deliver", 7), ("flush", 2), ("commit", 3)])
def test_each_transition_once_across_faults_and_restarts(events, uninterrupted, step, nth, tmp_path):
    faults = Faults()
    faults.arm(step, nth)
    cluster, statuses = run(events, tmp_path, faults)
    assert faults.fired
    got = alerts(cluster)
    assert sorted(json.dumps(e, sort_keys=True) for _, e in got) == sorted(
        json.dumps(e, sort_keys=True) for _, e in uninterrupted)


def test_the_firing_gauge_follows_the_events():
    metrics = ServiceMetrics()
    event = {"state": "firing", "rule": "f1<0.5", "key": {"model": "m", "segment": "s"}}
    metrics.observe_alert(event)
    assert metrics.registry.get_sample_value("streammetrics_alert_firing",
                                             {"model": "m", "segment": "s", "rule": "f1<0.5"}) == 1
    metrics.observe_alert(dict(event, state="resolved"))
    assert metrics.registry.get_sample_value("streammetrics_alert_firing",
                                             {"model": "m", "segment": "s", "rule": "f1<0.5"}) == 0
    assert metrics.registry.get_sample_value("streammetrics_alert_events_total", {"state": "resolved"}) == 1


def test_the_firing_gauge_is_bounded(monkeypatch):
    monkeypatch.setattr("consumers.observability.MAX_ALERT_SERIES", 2)
    metrics = ServiceMetrics()
    for model, state in (("a", "firing"), ("b", "resolved"), ("c", "firing"), ("d", "firing")):
        metrics.observe_alert({"state": state, "rule": "f1<0.5", "key": {"model": model, "segment": ""}})
    value = metrics.registry.get_sample_value
    assert value("streammetrics_alert_firing", {"model": "b", "segment": "", "rule": "f1<0.5"}) is None  # forgotten
    assert value("streammetrics_alert_firing", {"model": "c", "segment": "", "rule": "f1<0.5"}) == 1
    assert value("streammetrics_alert_firing", {"model": "d", "segment": "", "rule": "f1<0.5"}) is None  # not exported
    assert value("streammetrics_alert_series_dropped_total", {}) == 2


def test_consume_flags_build_the_rules(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - roc_auc.high<0.8\ncooldown: 5m\n")
    base = ["consume", "--bootstrap-servers", "127.0.0.1:9", "--topic", "in", "--output-topic", "out"]
    args = build_parser().parse_args(base + ["--alert", "f1<0.5", "--alerts", str(rules), "--alerts-topic", "al"])
    config = config_from_args(args)
    assert [r.text for r in config.alerts.rules] == ["f1<0.5", "roc_auc.high<0.8"]
    assert config.alerts.cooldown == 300 and config.alerts_topic == "al"
    assert config.pipeline_config().alerts is config.alerts
    with pytest.raises(ValueError, match="unknown metric"):
        config_from_args(build_parser().parse_args(base + ["--alert", "nope<1"]))
    with pytest.raises(ValueError, match="needs rules"):
        config_from_args(build_parser().parse_args(base + ["--alerts-topic", "al"]))
