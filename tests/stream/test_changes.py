"""Snapshot ``changes`` (contract section 9): against the key's reference or previous window,
MOVER differences, Benjamini-Hochberg over the windows of one poll, the bound on remembered keys."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.cli import main
from streammetrics.kernels.intervals import benjamini_hochberg
from streammetrics.stream.changes import Changes
from streammetrics.stream.pipeline import Pipeline, PipelineConfig


def _events(n: int, seed: int, t0: float, model: str, signal: float = 0.3) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = int(rng.random() < 0.4)
        s = min(max(rng.gauss(0.35 + signal * y, 0.2), 0.001), 0.999)
        out.append({"ts": t0 + 50 * i / n, "model": model, "y_true": y, "score": s})
    return out


def _run(config: PipelineConfig, events: list[dict]) -> list[dict]:
    p = Pipeline(config)
    for e in sorted(events, key=lambda e: e["ts"]):
        p.process(json.dumps(e))
    return p.poll() + p.flush()


def test_previous_window_changes_and_benjamini_hochberg() -> None:
    events = []
    for k in range(6):  # six keys: window 1 healthy, window 2 healthy except key 0 (no signal)
        events += _events(600, k, 0.0, f"m{k}") + _events(600, 100 + k, 60.0, f"m{k}", 0.0 if k == 0 else 0.3)
    snaps = _run(PipelineConfig(window=60.0, max_future=None, compare="previous"), events)
    first = [s for s in snaps if s["window"]["start"] == 0]
    second = [s for s in snaps if s["window"]["start"] == 60]
    assert len(first) == len(second) == 6
    assert all("changes" not in s for s in first)
    by_key = {s["key"]["model"]: s for s in first}
    p_values = []
    for s in second:
        before = by_key[s["key"]["model"]]
        ch = s["changes"]
        assert list(s)[list(s).index("insufficient") + 1] == "changes" and list(s)[-1] == "state"
        assert set(ch) == {k for k, v in s["intervals"].items() if k != "confidence" and v is not None
                           and before["intervals"].get(k) is not None}
        for name, c in ch.items():
            assert c["baseline"] == before["metrics"][name]
            assert c["difference"] == pytest.approx(s["metrics"][name] - before["metrics"][name])
            assert c["interval"][0] <= c["difference"] <= c["interval"][1]
            p_values.append((s["key"]["model"], name, c["p_value"], c["significant"]))
    want = benjamini_hochberg([p for _, _, p, _ in p_values], 0.05).tolist()
    assert [sig for *_, sig in p_values] == want
    assert any(sig for model, name, _, sig in p_values if model == "m0" and name == "roc_auc")
    assert not any(sig for model, name, _, sig in p_values if model != "m0" and name == "roc_auc")


def test_reference_changes_from_the_cli(tmp_path, capsys) -> None:
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps({**e, "ts": 1767225600 + e["ts"]}) + "\n" for e in _events(2000, 1, 0.0, "m")))
    cur = tmp_path / "cur.jsonl"
    cur.write_text("".join(json.dumps({**e, "ts": 1767225600 + e["ts"]}) + "\n"
                           for e in _events(800, 2, 0.0, "m", signal=0.0)))
    assert main(["replay", str(cur), "--reference", str(ref), "--fdr", "0.1"]) == 0
    [snap] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    auc = snap["changes"]["roc_auc"]
    assert auc["significant"] is True and auc["difference"] < -0.2 and auc["p_value"] < 1e-6
    assert 0.8 < auc["baseline"] < 0.95


def test_changes_bound_on_remembered_keys() -> None:
    changes = Changes("previous", max_keys=1)

    def snap(model: str, start: int, auc: float) -> dict:
        return {"key": {"model": model, "segment": ""}, "window": {"start": start, "end": start + 60},
                "metrics": {"roc_auc": auc}, "intervals": {"confidence": 0.95, "roc_auc": [auc - 0.05, auc + 0.05]},
                "insufficient": [], "state": {}}
    changes.annotate([snap("a", 0, 0.8), snap("b", 0, 0.8)])
    assert changes.forgotten == 1
    out = changes.annotate([snap("a", 60, 0.6), snap("b", 60, 0.6)])
    assert "changes" in out[0] and "changes" not in out[1]
    assert out[0]["changes"]["roc_auc"]["baseline"] == 0.8
    # a revision of window 60 is compared with window 0 again, not with itself
    [rev] = changes.annotate([snap("a", 60, 0.7)])
    assert rev["changes"]["roc_auc"]["baseline"] == 0.8


@pytest.mark.parametrize("kwargs, match", [({"mode": "nearest"}, "--compare"), ({"mode": "previous", "fdr": 0.0},
                                           "--fdr"), ({"mode": "reference"}, "--reference")])
def test_changes_options_are_checked(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Changes(**kwargs)
