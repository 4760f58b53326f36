"""Snapshot ``intervals`` / ``insufficient`` (contract section 9) on every path of the window
engine: small windows built together (dicts and lines) and windows built one by one give the
same lines, with intervals given (not only nulls), at ``--confidence``; every task carries them."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_windows_fleet import run

from streammetrics.cli import main
from streammetrics.kernels.intervals import BINARY_INTERVALS
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.snapshots import snapshot_line


def _stream(seed: int, sizes: list[int], prevalence: float) -> list[dict]:
    """One key per size, that many events in each 60 s window (two windows), in time order."""
    rng = random.Random(seed)
    out = []
    for k, size in enumerate(sizes):
        for w in range(2):
            for i in range(size):
                y = int(rng.random() < prevalence)
                s = min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.001), 0.999)
                out.append({"ts": w * 60 + 60 * i / size, "model": f"m{k}", "y_true": y,
                            "score": round(s, 3) if k % 2 else s})
    out.sort(key=lambda e: e["ts"])
    return out


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(20, 400), min_size=1, max_size=4),
       st.sampled_from([0.1, 0.3, 0.5]), st.sampled_from([0.95, 0.8]))
def test_every_path_writes_the_same_intervals(seed: int, sizes: list[int], prevalence: float,
                                              confidence: float) -> None:
    stream = _stream(seed, sizes, prevalence)
    config = PipelineConfig(window=60.0, max_future=None, confidence=confidence)
    fleet = run([dict(e) for e in stream], True, config)
    assert fleet == run([dict(e) for e in stream], False, config)
    assert fleet == run([dict(e) for e in stream], "lines", config)
    snaps = [json.loads(line) for line in fleet]
    assert snaps and all(s["intervals"]["confidence"] == confidence for s in snaps)
    for s in snaps:
        assert set(s["intervals"]) == {"confidence", *BINARY_INTERVALS}
        assert s["insufficient"] == [k for k in BINARY_INTERVALS if s["intervals"][k] is None]
        for k in BINARY_INTERVALS:
            pair = s["intervals"][k]
            if pair is not None and s["metrics"][k] is not None:
                assert pair[0] <= s["metrics"][k] + 1e-12 and s["metrics"][k] - 1e-12 <= pair[1]
    if max(sizes) >= 200 and prevalence >= 0.3:
        assert any(s["intervals"]["roc_auc"] is not None for s in snaps)


def test_windows_of_one_key_restored_from_a_checkpoint_keep_the_confidence() -> None:
    stream = _stream(1, [300], 0.4)
    config = PipelineConfig(window=60.0, max_future=None, confidence=0.9)
    p = Pipeline(config)
    for e in stream[:400]:
        p.process(json.dumps(e))
    restored = Pipeline(config).load_dict(json.loads(json.dumps(p.to_dict())))
    for e in stream[400:]:
        restored.process(json.dumps(e))
    snaps = restored.poll() + restored.flush()
    assert snaps and all(s["intervals"]["confidence"] == 0.9 for s in snaps)


@pytest.mark.parametrize("task, events, names", [
    ("regression", [{"y_true": float(i % 7), "y_pred": float(i % 7) + (i % 3 - 1) * 0.5} for i in range(60)],
     ["mse", "mae", "r2", "rmse"]),
    ("labels", [{"y_true": "ab"[i % 2], "y_pred": "ab"[(i // 3) % 2]} for i in range(60)],
     ["accuracy", "balanced_accuracy", "macro_precision", "macro_recall", "macro_f1", "weighted_f1",
      "matthews_corrcoef", "cohen_kappa"]),
    ("multiclass", [{"y_true": "ab"[i % 2], "scores": [0.3, 0.7] if i % 3 else [0.8, 0.2]} for i in range(60)],
     ["accuracy", "balanced_accuracy", "macro_precision", "macro_recall", "macro_f1", "weighted_f1",
      "matthews_corrcoef", "cohen_kappa", "top_k_accuracy", "roc_auc",
      "roc_auc_weighted"]),
])
def test_every_task_carries_intervals(tmp_path, capsys, task: str, events: list, names: list) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"ts": 1767225600 + i / 2, "model": "m", **e}) + "\n"
                            for i, e in enumerate(events)))
    args = ["replay", str(path), "--task", task, "--confidence", "0.9"] + (
        ["--classes", "a,b"] if task == "multiclass" else [])
    assert main(args) == 0
    [snap] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert list(snap["intervals"]) == ["confidence", *names] and snap["intervals"]["confidence"] == 0.9
    assert snap["intervals"]["accuracy" if task != "regression" else "mae"] is not None
    assert list(snap)[list(snap).index("metrics") + 1: list(snap).index("metrics") + 3] == ["intervals",
                                                                                           "insufficient"]


def test_confidence_flag_is_checked(tmp_path, capsys) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("")
    with pytest.raises(SystemExit):
        main(["replay", str(path), "--confidence", "1"])
    assert "--confidence must be a number strictly between 0 and 1" in capsys.readouterr().err


def test_unlabelled_windows_carry_no_intervals() -> None:
    p = Pipeline(PipelineConfig(window=60.0, max_future=None))
    p.process(json.dumps({"ts": 1.0, "model": "m", "score": 0.4, "id": "x"}))
    snaps = p.flush()
    assert snaps and all("intervals" not in s for s in snaps)
    assert all('"intervals"' not in snapshot_line(s) for s in snaps)
