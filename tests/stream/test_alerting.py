"""Alert rules, their lifecycle, Page-Hinkley against river, bands, and replay's alert flags."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streammetrics.stream.alerting import (
    AlertEngine,
    PageHinkley,
    load_rules_file,
    parse_rule,
    parse_rules,
    reference_bands,
    rule_value,
    spec_from_options,
)
from streammetrics.stream.replay import sample_path

ROOT = Path(__file__).resolve().parents[2]


def snap(start, metrics, key=("m", "web"), final=True, revision=0, intervals=None, changes=None):
    s = {"key": {"model": key[0], "segment": key[1]}, "window": {"start": start, "end": start + 60},
         "final": final, "revision": revision, "metrics": metrics}
    if intervals is not None:
        s["intervals"] = intervals
    if changes is not None:
        s["changes"] = changes
    return s


@pytest.mark.parametrize("text, expr, op, threshold, k", [
    ("roc_auc<0.8", "roc_auc", "<", 0.8, None),
    (" drift_ks[cat] >= 0.2 ", "drift_ks[cat]", ">=", 0.2, None),
    ("roc_auc.high<0.8", "roc_auc.high", "<", 0.8, None),
    ("roc_auc.change<0", "roc_auc.change", "<", 0.0, None),
    ("log_loss.rise>1e-2", "log_loss.rise", ">", 0.01, None),
    ("roc_auc<band(3)", "roc_auc", "<", None, 3.0),
])
def test_parse(text, expr, op, threshold, k):
    rule = parse_rule(text)
    assert (rule.expr, rule.op, rule.threshold, rule.band_k) == (expr, op, threshold, k)
    assert parse_rule(rule.text) == rule


@pytest.mark.parametrize("text, says", [
    ("roc_auc=0.8", "bad --alert rule"), ("roc_auc<", "bad --alert rule"), ("roc_auc.mean<0.8", "unknown .mean"),
    ("roc_auc.low<band(2)", r"band\(K\) bounds a metric"), ("<0.8", "bad --alert rule"),
])
def test_bad_rules_name_the_rule(text, says):
    with pytest.raises(ValueError, match=says):
        parse_rule(text)


def test_rule_limits():
    with pytest.raises(ValueError, match="given twice"):
        parse_rules(["f1<0.5", "f1<0.5"])
    with pytest.raises(ValueError, match="at most 3"):
        parse_rules([f"f1<0.{i}" for i in range(1, 5)], limit=3)


def test_rule_values_from_a_snapshot():
    s = snap(0, {"roc_auc": 0.7, "per_class": {"cat": {"recall": 0.4}}, "f1": None},
             intervals={"roc_auc": [0.6, 0.8], "f1": None},
             changes={"roc_auc": {"difference": -0.1, "significant": True},
                      "f1": {"difference": -0.3, "significant": False}})
    assert rule_value(parse_rule("roc_auc<0.8"), s) == 0.7
    assert rule_value(parse_rule("recall[cat]<0.5"), s) == 0.4
    assert rule_value(parse_rule("roc_auc.low<0.8"), s) == 0.6
    assert rule_value(parse_rule("roc_auc.high<0.8"), s) == 0.8
    assert rule_value(parse_rule("roc_auc.change<0"), s) == -0.1
    assert rule_value(parse_rule("f1.change<0"), s) is None  # not significant
    assert rule_value(parse_rule("f1.low<0.5"), s) is None and rule_value(parse_rule("f1<0.5"), s) is None
    assert not parse_rule("roc_auc.high<0.8").fires(rule_value(parse_rule("roc_auc.high<0.8"), s))


def test_lifecycle_cooldown_and_stable_ids():
    def run(cooldown):
        engine = AlertEngine(parse_rules(["f1<0.5"]), cooldown=cooldown)
        out = []
        for i, v in enumerate([0.9, 0.4, 0.3, 0.8, 0.2, 0.9, 0.9, 0.9, 0.1, None, 0.7]):
            out += engine.observe(snap(60 * i, {"f1": v}))
        return engine, out
    engine, events = run(0)
    assert [(e["state"], e["window"]["start"]) for e in events] == [
        ("firing", 60), ("resolved", 180), ("firing", 240), ("resolved", 300), ("firing", 480), ("resolved", 540)]
    assert events[0]["id"] == events[1]["id"] != events[2]["id"]
    assert [e["id"] for e in run(0)[1]] == [e["id"] for e in events]  # deterministic
    assert all(e["schema"] == "streammetrics.alert/1" and e["bound"] == 0.5 for e in events)
    # a cooldown of 5 windows: the second firing (window end 300, 180 s after 120) is suppressed
    engine, events = run(300)
    assert [(e["state"], e["window"]["start"]) for e in events] == [
        ("firing", 60), ("resolved", 180), ("firing", 480), ("resolved", 540)]
    assert engine.suppressed == 1


def test_keys_are_followed_separately_and_bounded():
    engine = AlertEngine(parse_rules(["f1<0.5"]), max_keys=2)
    assert engine.observe(snap(0, {"f1": 0.1}, key=("a", "")))[0]["key"] == {"model": "a", "segment": ""}
    assert engine.observe(snap(0, {"f1": 0.1}, key=("b", "")))
    assert engine.observe(snap(0, {"f1": 0.1}, key=("c", "")))  # forgets a
    assert engine.dropped == 1 and len(engine.firing()) == 2


def test_page_hinkley_equals_river():
    drift = pytest.importorskip("river.drift")
    rng = np.random.default_rng(3)
    series = np.concatenate([rng.normal(0.9, 0.01, 40), rng.normal(0.85, 0.01, 40)])
    for mode, direction in (("down", "drop"), ("up", "rise")):
        xs = series if mode == "down" else 1.8 - series
        river_ph = drift.PageHinkley(min_instances=5, delta=0.005, threshold=0.05, alpha=1.0, mode=mode)
        ours = PageHinkley(direction, delta=0.005, warmup=5)
        river_hits, our_hits = [], []
        for i, x in enumerate(xs):
            river_ph.update(float(x))
            if river_ph.drift_detected:
                river_hits.append(i)
            if ours.update(float(x)) > 0.05:
                our_hits.append(i)
                ours.reset()
        assert our_hits == river_hits and our_hits


def test_sequential_rule_fires_on_a_slow_drift_and_counts_each_window_once():
    engine = AlertEngine(parse_rules(["roc_auc.drop>0.05", "roc_auc<0.7"]))
    events = []
    for i in range(60):
        auc = 0.9 - 0.003 * max(0, i - 20)  # a slow decline from window 20
        events += engine.observe(snap(60 * i, {"roc_auc": auc}, final=False))  # revisions: not fed
        events += engine.observe(snap(60 * i, {"roc_auc": auc}))
        events += engine.observe(snap(60 * i, {"roc_auc": auc}))  # re-published: fed once
    drops = [e for e in events if e["rule"] == "roc_auc.drop>0.05" and e["state"] == "firing"]
    static = [e for e in events if e["rule"] == "roc_auc<0.7" and e["state"] == "firing"]
    assert drops and not static  # the static bound never crossed; the drift was seen
    assert 20 < drops[0]["window"]["start"] / 60 < 40


def test_checkpoint_round_trip_continues_identically():
    rules = parse_rules(["f1<0.5", "f1.drop>0.1"])
    values = [0.9, 0.92, 0.88, 0.9, 0.91, 0.4, 0.45, 0.9, 0.3, 0.2, 0.9]
    whole = AlertEngine(rules, cooldown=60)
    expected = [e for i, v in enumerate(values) for e in whole.observe(snap(60 * i, {"f1": v}))]
    first = AlertEngine(rules, cooldown=60)
    got = [e for i, v in enumerate(values[:6]) for e in first.observe(snap(60 * i, {"f1": v}))]
    state = json.loads(json.dumps(first.to_dict()))
    second = AlertEngine(rules, cooldown=60).load(state)
    got += [e for i, v in enumerate(values[6:], 6) for e in second.observe(snap(60 * i, {"f1": v}))]
    assert got == expected and second.to_dict() == whole.to_dict()
    with pytest.raises(ValueError, match="rules differ"):
        AlertEngine(parse_rules(["f1<0.6"])).load(state)
    bad = dict(state, tracks=[[0, "k", "yes", None, None, None, None]])
    engine = AlertEngine(rules)
    with pytest.raises(ValueError, match="malformed track"):
        engine.load(bad)
    assert engine.to_dict()["tracks"] == []  # unchanged


def test_reference_bands_are_nannyml_standard_deviation_thresholds():
    values = [0.91, 0.93, 0.9, 0.92, 0.94]
    snaps = [snap(60 * i, {"roc_auc": v}) for i, v in enumerate(values)]
    snaps.append(snap(0, {"roc_auc": 0.5}, revision=-1))  # an older revision of window 0: ignored
    bands = reference_bands(snaps, parse_rules(["roc_auc<band(3)"]))
    (key, metric), (mean, std, n) = next(iter(bands.items()))
    assert metric == "roc_auc" and n == 5
    assert mean == pytest.approx(np.mean(values)) and std == pytest.approx(np.std(values))
    engine = AlertEngine(parse_rules(["roc_auc<band(3)", "roc_auc>band(3)"]), bands=bands)
    assert engine.bound(engine.rules[0], key) == pytest.approx(np.mean(values) - 3 * np.std(values))
    assert engine.bound(engine.rules[1], key) == pytest.approx(np.mean(values) + 3 * np.std(values))
    assert [e["rule"] for e in engine.observe(snap(0, {"roc_auc": 0.85}))] == ["roc_auc<band(3)"]
    assert not engine.observe(snap(0, {"roc_auc": 0.85}, key=("other", "web")))  # no band: never fires


def test_rules_file_json_and_yaml(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"rules": ["f1<0.5", "roc_auc.high<0.8"], "cooldown": "10m"}))
    assert load_rules_file(str(tmp_path / "a.json")) == (["f1<0.5", "roc_auc.high<0.8"], 600.0)
    (tmp_path / "b.yaml").write_text("# rules\nrules:\n  - f1<0.5\n  - 'drift_ks[cat]>0.2'  # per class\n"
                                     "cooldown: 1h\n")
    assert load_rules_file(str(tmp_path / "b.yaml")) == (["f1<0.5", "drift_ks[cat]>0.2"], 3600.0)
    (tmp_path / "c.yml").write_text("- f1<0.5\n")
    assert load_rules_file(str(tmp_path / "c.yml")) == (["f1<0.5"], None)
    (tmp_path / "d.yml").write_text("rules: 3\n")
    with pytest.raises(ValueError, match="d.yml"):
        load_rules_file(str(tmp_path / "d.yml"))
    with pytest.raises(ValueError, match="missing.json"):
        load_rules_file(str(tmp_path / "missing.json"))


def test_spec_from_options_checks_names_against_the_task():
    from streammetrics.stream.pipeline import PipelineConfig

    with pytest.raises(ValueError, match="unknown metric 'rocauc'"):
        spec_from_options(["rocauc<0.8"], config=PipelineConfig(task="binary"))
    with pytest.raises(ValueError, match="no per-class"):
        spec_from_options(["recall[a]<0.8"], config=PipelineConfig(task="binary"))
    with pytest.raises(ValueError, match="need --reference"):
        spec_from_options(["roc_auc<band(2)"], config=PipelineConfig(task="binary"))
    assert spec_from_options([], config=PipelineConfig(task="binary")) is None


def _replay(*args, cwd):
    return subprocess.run([sys.executable, "-m", "streammetrics.cli", "replay", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_replay_writes_alert_events_that_match_the_snapshots(tmp_path):
    out = _replay("--sample", "--alert", "roc_auc<0.9", "--alerts-output", "alerts.jsonl", "-o", "snaps.jsonl",
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    snaps = [json.loads(line) for line in (tmp_path / "snaps.jsonl").read_text().splitlines()]
    alerts = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert alerts and "alerts: " in out.stderr
    # every transition, recomputed by hand from the snapshots, key by key
    expected = []
    firing: dict = {}
    for s in snaps:
        key = json.dumps(s["key"], sort_keys=True)
        v = s["metrics"]["roc_auc"]
        holds = v is not None and math.isfinite(v) and v < 0.9
        if holds != firing.get(key, False):
            expected.append(("firing" if holds else "resolved", s["key"], s["window"]["start"]))
            firing[key] = holds
    assert [(a["state"], a["key"], a["window"]["start"]) for a in alerts] == expected


def test_replay_band_rules_from_a_reference(tmp_path):
    ref = tmp_path / "ref.jsonl"
    ref.write_text(Path(sample_path()).read_text())
    out = _replay("--sample", "--reference", str(ref), "--alert", "roc_auc<band(1)", "--alerts-output",
                  "alerts.jsonl", "-o", "snaps.jsonl", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    alerts = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    # the stream is its own reference: a one-sd band is crossed by some windows, never by all
    assert alerts and all(a["bound"] is not None for a in alerts)
    bad = _replay("--sample", "--alert", "nope<1", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown metric 'nope'" in bad.stderr


def test_sequential_rule_with_a_reference_is_a_cusum_anchored_at_the_reference_mean():
    rules = parse_rules(["log_loss.rise>0.2"])
    reference = [snap(60 * i, {"log_loss": 0.37 + 0.01 * (-1) ** i}) for i in range(20)]
    bands = reference_bands(reference, rules)
    anchored, running = AlertEngine(rules, bands=bands), AlertEngine(rules)
    first = {}
    for name, engine in (("anchored", anchored), ("running", running)):
        for i in range(200):
            value = 0.37 + (0.002 * (i - 50) if i >= 50 else 0.0)  # a slow rise from window 50
            if engine.observe(snap(60 * i, {"log_loss": value})) and name not in first:
                first[name] = i
    # the running mean follows the drift; the anchor does not: the CUSUM sees it first
    assert 50 < first["anchored"] < first.get("running", 10**9)
    state = json.loads(json.dumps(anchored.to_dict()))
    assert AlertEngine(rules, bands=bands).load(state).to_dict() == anchored.to_dict()


def test_pipeline_checkpoints_carry_the_alert_state():
    """A pipeline restored from a checkpoint mid-stream emits the alert events an uninterrupted
    one emits (the service's exactly-once-per-transition rests on this)."""
    from streammetrics.stream.alerting import spec_from_options
    from streammetrics.stream.pipeline import Pipeline, PipelineConfig

    lines = Path(sample_path()).read_bytes().splitlines()
    config = PipelineConfig(task="binary", max_future=None)
    config.alerts = spec_from_options(["roc_auc<0.9", "log_loss.rise>0.02"], config=config)

    def run(lines, pipeline):
        events = []
        for line in lines:
            pipeline.process(line)
            pipeline.poll()
            events += pipeline.take_alerts()
        return events

    whole = Pipeline(config)
    expected = run(lines, whole) + (whole.flush() and whole.take_alerts())
    assert {e["state"] for e in expected} == {"firing", "resolved"}
    first = Pipeline(config)
    got = run(lines[:1700], first)
    state = json.loads(json.dumps(first.to_dict()))
    assert state["alerts"]["type"] == "AlertEngine"
    second = Pipeline(config).load_dict(state)
    got += run(lines[1700:], second) + (second.flush() and second.take_alerts())
    assert got == expected
    broken = dict(state, alerts=dict(state["alerts"], counts=[-1, 0, 0, 0]))
    with pytest.raises(ValueError, match="counts"):
        Pipeline(config).load_dict(broken)


def test_report_takes_the_same_rules_and_a_rules_file(tmp_path):
    pytest.importorskip("matplotlib")
    from streammetrics.report.alerts import evaluate
    from streammetrics.report.sources import parse_snapshot

    out = _replay("--sample", "-o", "snaps.jsonl", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (tmp_path / "rules.json").write_text(json.dumps(["roc_auc<0.9", "log_loss.rise>0.02"]))
    report = subprocess.run([sys.executable, "-m", "streammetrics.cli", "report", "snaps.jsonl", "-o", "r.html",
                             "--alerts", "rules.json"], capture_output=True, text=True, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    windows = [parse_snapshot(json.loads(line)) for line in (tmp_path / "snaps.jsonl").read_text().splitlines()]
    one_key = [w for w in windows if (w.model, w.segment) == (windows[0].model, windows[0].segment)]
    marked = evaluate(parse_rules(["roc_auc<0.9"]), one_key)
    assert [a.window for a in marked] == [w for w in one_key if w.metrics["roc_auc"] < 0.9]
    # interval rules read the snapshots' intervals (contract section 9)
    assert any(w.intervals.get("roc_auc") for w in one_key)
    marked = evaluate(parse_rules(["roc_auc.high<0.97"]), one_key)
    assert 0 < len(marked) < len(one_key)
    assert [a.window for a in marked] == [w for w in one_key if w.intervals.get("roc_auc")
                                          and w.intervals["roc_auc"][1] < 0.97]
    bad = subprocess.run([sys.executable, "-m", "streammetrics.cli", "report", "snaps.jsonl", "-o", "r.html",
                          "--alert", "roc_auc<band(2)"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "band(K) needs the reference" in bad.stderr


def test_a_reference_of_snapshots_gives_the_bands_of_its_events(tmp_path):
    from streammetrics.stream.alerting import reference_snapshots
    from streammetrics.stream.pipeline import PipelineConfig

    assert _replay("--sample", "-o", "snaps.jsonl", cwd=tmp_path).returncode == 0
    rules = parse_rules(["roc_auc<band(2)", "log_loss.rise>0.1"])
    config = PipelineConfig(task="binary", max_future=None)
    from_events = reference_bands(reference_snapshots(sample_path(), config), rules)
    from_snaps = reference_bands(reference_snapshots(str(tmp_path / "snaps.jsonl"), config), rules)
    assert from_events and from_events == from_snaps
    (tmp_path / "bad.jsonl").write_text((tmp_path / "snaps.jsonl").read_text().splitlines()[0] + "\n{nope\n")
    with pytest.raises(ValueError, match="bad.jsonl:2: not a JSON snapshot"):
        list(reference_snapshots(str(tmp_path / "bad.jsonl"), config))
