"""A configuration the pipeline accepts, it can restore (issue 30, finding 4; probes
p_selfstate.py, p_svc_selfstate.py): the state limits follow ``--classes``, ``--label-set`` and
``--max-labels`` when a pipeline reads back its own checkpoint, in replay's and consume's
configurations alike."""
from __future__ import annotations

import json

import pytest

import streammetrics as sm
from streammetrics.cli import build_parser, main
from streammetrics.core.state import limits_covering, state_limits
from streammetrics.stream.pipeline import Pipeline, PipelineConfig

T0 = 1767225600.0


def _round_trip(cfg: PipelineConfig, events: list[dict]) -> tuple[Pipeline, Pipeline]:
    p = Pipeline(cfg)
    r = p.process(json.dumps(events).encode())
    assert r.applied == len(events)
    state = json.loads(json.dumps(p.to_dict()))
    back = Pipeline(cfg).load_dict(state)
    return p, back


def test_multiclass_300_classes_reloads():
    k = 300
    names = [f"c{i}" for i in range(k)]
    cfg = PipelineConfig(task="multiclass", window=60, max_future=None, classes=names, max_pending=8)
    events = [{"ts": T0 + i * 0.01, "model": "m", "y_true": names[i % k], "scores": [1.0 / k] * k} for i in range(40)]
    with pytest.raises(ValueError, match="max_histograms"):  # what a plain from_dict says of such a state
        sm.from_dict(sm.MulticlassMonitor(names).to_dict())
    p, back = _round_trip(cfg, events)
    assert back.to_dict() == p.to_dict()
    assert state_limits().max_histograms == 65_536  # the caps were raised only while loading


def test_label_set_of_10001_reloads():
    names = [f"c{i}" for i in range(10_001)]
    cfg = PipelineConfig(task="labels", window=60, max_future=None, labels=names, max_pending=8)
    events = [{"ts": T0 + i * 0.01, "model": "m", "y_true": "c1", "y_pred": f"c{i}"} for i in range(20)]
    p, back = _round_trip(cfg, events)
    assert back.to_dict() == p.to_dict()


def test_max_labels_above_the_default_cap_reloads():
    """--max-labels 6000 lets a state hold 12,002 labels (> max_labels=10,000): still reloads."""
    cfg = PipelineConfig(task="labels", window=60, max_future=None, max_labels=6000, max_pending=64)
    events = [{"ts": T0 + i * 0.001, "model": "m", "y_true": f"t{i}", "y_pred": f"p{i}"} for i in range(5500)]
    p, back = _round_trip(cfg, events)
    assert back.to_dict() == p.to_dict()


def test_consume_configuration_reloads_its_own_state():
    """consume's path: arguments -> ServiceConfig -> its PipelineConfig (no broker needed)."""
    from consumers.command import config_from_args

    names = ",".join(f"c{i}" for i in range(256))  # the first count refused before
    args = build_parser().parse_args(["consume", "--bootstrap-servers", "127.0.0.1:1", "--topic", "in",
                                      "--output-topic", "out", "--task", "multiclass", "--classes", names])
    config = config_from_args(args)
    cfg = config.pipeline_config()
    cfg.max_pending = 8
    events = [{"ts": T0 + i * 0.01, "model": "m", "y_true": "c3", "scores": [1.0 / 256] * 256} for i in range(20)]
    p, back = _round_trip(cfg, events)
    assert back.to_dict() == p.to_dict()


def test_limits_covering_never_lowers_and_restores():
    before = state_limits()
    with limits_covering(max_labels=5, max_entries=2_000_000) as lim:
        assert lim.max_labels == before.max_labels and lim.max_entries == 2_000_000
    assert state_limits() == before


@pytest.mark.parametrize("command", [["replay", "-"], ["consume", "--bootstrap-servers", "127.0.0.1:1",
                                                        "--topic", "in", "--output-topic", "out"]])
def test_max_labels_flag_is_checked_at_start(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*command, "--task", "labels", "--max-labels", "1"])
    assert exc.value.code == 2
    assert "--max-labels must be 2 or more" in capsys.readouterr().err


def test_replay_folds_labels_beyond_max_labels(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"ts": T0 + i * 0.001, "model": "m", "y_true": f"t{i % 300}", "y_pred": f"t{i % 300}"})
             for i in range(3000)]
    lines.append(json.dumps({"ts": T0 + 120, "model": "m", "y_true": "a", "y_pred": "a"}))
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(src), "-o", str(out), "--task", "labels", "--max-labels", "50",
                 "--max-future", "0"]) == 0
    snap = json.loads(out.read_text().splitlines()[0])
    assert snap["metrics"]["labels_folded"] >= 250 and snap["metrics"]["accuracy"] == 1.0
    assert len(snap["metrics"]["per_class"]) <= 52
    assert sm.from_dict(snap["state"]).max_labels == 50


def test_checkpoint_settings_record_max_labels():
    """A restart with another --max-labels refuses the checkpoint (its monitors would not merge)."""
    from consumers.service import ServiceConfig

    def settings(**kw):
        return ServiceConfig(bootstrap_servers="x", topic="i", output_topic="o", task="labels", **kw).window_settings()

    assert settings(max_labels=10) != settings(max_labels=20)
    assert settings(max_labels=10, labels=["a", "b"]) == settings(max_labels=20, labels=["a", "b"])
    assert "max_labels" not in ServiceConfig(bootstrap_servers="x", topic="in", output_topic="out").window_settings()
