"""``streammetrics replay PREDICTIONS --labels LABELS``: two files or one mixed file, every task,
rejections and expiries on stderr with FILE:LINE, and the shipped example."""
from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from streammetrics.cli import main

CLASSES = ["cat", "dog", "bird"]


def write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def events(task: str, n: int = 120, seed: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        e: dict[str, Any] = {"ts": 1000 + i, "model": "m", "id": f"p{i}", "weight": rng.choice([1, 2])}
        if task == "binary":
            e["y_true"] = rng.randrange(2)
            e["score"] = round(rng.random(), 3)
        elif task == "multiclass":
            e["y_true"] = rng.choice(CLASSES)
            e["scores"] = {c: round(rng.random(), 3) for c in CLASSES}
        elif task == "labels":
            e["y_true"] = rng.choice(CLASSES)
            e["y_pred"] = rng.choice(CLASSES)
        else:
            e["y_true"] = round(rng.gauss(5, 2), 3)
            e["y_pred"] = round(rng.gauss(5, 2), 3)
        out.append(e)
    return out


def split(rows: list[dict[str, Any]], delay: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    preds, labels = [], []
    for r in rows:
        p = dict(r)
        y = p.pop("y_true")
        preds.append(p)
        labels.append({"id": r["id"], "y_true": y, "ts": r["ts"] + delay})
    labels.sort(key=lambda x: x["ts"])
    return preds, labels


def replay(argv: list[str], tmp: Path, capsys: Any) -> tuple[list[dict[str, Any]], str]:
    out = tmp / "snaps.jsonl"
    assert main(["replay", *argv, "--output", str(out), "--no-state"]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()], capsys.readouterr().err


def task_args(task: str) -> list[str]:
    return ["--task", task, "--window", "30s"] + (["--classes", ",".join(CLASSES)] if task == "multiclass" else [])


def assert_close(got: Any, want: Any, path: str = "") -> None:
    """Equal JSON values, floats within 1e-12 relative (sums may round differently)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, float) and isinstance(got, float):
        assert abs(got - want) <= 1e-12 * max(1.0, abs(want)), path
    else:
        assert got == want, path


def final(snaps: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {(s["key"]["model"], s["window"]["start"]): s for s in snaps}


@pytest.mark.parametrize("task", ["binary", "multiclass", "labels", "regression"])
def test_labels_with_no_delay_give_the_inline_metrics(tmp_path, capsys, task):
    rows = events(task)
    inline, _ = replay([write(tmp_path / "inline.jsonl", rows), *task_args(task)], tmp_path, capsys)
    preds, labels = split(rows, 0.0)
    delayed, err = replay([write(tmp_path / "p.jsonl", preds), "--labels", write(tmp_path / "l.jsonl", labels),
                           *task_args(task)], tmp_path, capsys)
    assert all(s["revision"] == 0 and s["final"] and s["labeled"] == s["count"] for s in inline)
    a, b = final(inline), final(delayed)
    assert a.keys() == b.keys()
    for k in a:
        assert b[k]["final"] and b[k]["labeled"] == a[k]["count"] == b[k]["count"]
        assert_close(b[k]["metrics"], a[k]["metrics"])
    assert "0 rejected" in err


@pytest.mark.parametrize("task", ["binary", "multiclass", "labels", "regression"])
def test_two_files_and_one_mixed_file_agree(tmp_path, capsys, task):
    preds, labels = split(events(task), 45.0)
    two, _ = replay([write(tmp_path / "p.jsonl", preds), "--labels", write(tmp_path / "l.jsonl", labels),
                     *task_args(task)], tmp_path, capsys)
    mixed_rows = sorted(preds + labels, key=lambda r: (r["ts"], "model" not in r))
    one, _ = replay([write(tmp_path / "mixed.jsonl", mixed_rows), *task_args(task)], tmp_path, capsys)
    assert one == two
    revised = [s for s in two if s["revision"] > 0]
    assert revised and all(s["final"] for s in final(two).values())


def test_rejections_and_expiries_are_reported_with_file_and_line(tmp_path, capsys):
    preds = [{"ts": 0, "model": "m", "score": 0.9, "id": "a"}, {"ts": 1, "model": "m", "score": 0.2, "id": "b"},
             {"ts": 2, "model": "m", "score": 0.2}, {"ts": 200, "model": "m", "score": 0.3, "id": "c"}]
    labels = [{"id": "a", "y_true": 1, "ts": 10}, {"id": "a", "y_true": 0, "ts": 11},
              {"id": "b", "y_true": 1, "ts": 150}, {"ts": 151, "y_true": 1}]
    p, lab = write(tmp_path / "p.jsonl", preds), write(tmp_path / "l.jsonl", labels)
    snaps, err = replay([p, "--labels", lab, "--label-ttl", "100s", "--window", "60s"], tmp_path, capsys)
    lines = err.splitlines()
    assert f"{p}:3: a prediction without field 'y_true' needs field 'id' (to meet its label)" in lines
    assert f"{lab}:2: duplicate label for id 'a': it already has one" in lines
    assert f"{lab}:3: prediction 'b' (ts=1.0) expired without a label" in lines  # time passed 1 + 100 there
    assert f"{lab}:3: label for id 'b' arrived after its prediction expired (label TTL)" in lines
    assert any(x.startswith(f"{lab}:4: ") and "'id'" in x for x in lines)
    assert "1 duplicate and 1 expired labels rejected" in lines[-1]
    first = [s for s in snaps if s["window"]["start"] == 0]
    assert [(s["revision"], s["final"], s["labeled"], s["expired"]) for s in first] == [(0, True, 1, 1)]
    last = [s for s in snaps if s["window"]["start"] == 180]
    assert last[-1]["final"] is False and last[-1]["pending"] == 1  # c: nothing more to come, not expired


def test_label_set_option_and_labels_file_option_are_distinct(tmp_path, capsys):
    rows = [{"ts": 1, "model": "m", "y_true": "x", "y_pred": "x"}]
    f = write(tmp_path / "e.jsonl", rows)
    snaps, _ = replay([f, "--task", "labels", "--label-set", "x,y"], tmp_path, capsys)
    assert snaps[0]["labeled"] == 1
    with pytest.raises(SystemExit) as exc:  # --labels is the contract's file of label events
        main(["replay", f, "--task", "labels", "--labels", "x,y"])
    assert exc.value.code == 2
    assert "--label-set" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", f, "--label-ttl", "soon"])


def test_shipped_example(tmp_path, capsys):
    data = resources.files("streammetrics") / "data"
    snaps, err = replay([str(data / "delayed_predictions.jsonl"), "--labels", str(data / "delayed_labels.jsonl"),
                         "--label-ttl", "15m", "--window", "5m"], tmp_path, capsys)
    assert "duplicate label" in err and "after its prediction expired" in err
    assert all(s["final"] for s in final(snaps).values())
    assert any(s["revision"] > 0 for s in snaps)


def test_a_label_of_another_kind_is_refused_and_its_prediction_expires(tmp_path, capsys):
    preds = [{"ts": 1, "model": "m", "y_pred": "cat", "id": "a"}, {"ts": 2, "model": "m", "y_pred": "dog", "id": "b"}]
    labels = [{"id": "a", "y_true": 1, "ts": 3}, {"id": "b", "y_true": "dog", "ts": 3}]
    snaps, err = replay([write(tmp_path / "p.jsonl", preds), "--labels", write(tmp_path / "l.jsonl", labels),
                         "--task", "labels"], tmp_path, capsys)
    assert "label for id 'a'" in err and "kind" in err
    (snap,) = snaps
    assert (snap["count"], snap["labeled"], snap["expired"], snap["final"]) == (2, 1, 1, True)
    assert snap["metrics"]["accuracy"] == 1.0


def test_pending_bound_expires_the_oldest_early(tmp_path, capsys):
    preds = [{"ts": t, "model": "m", "score": 0.5, "id": f"p{t}"} for t in range(5)]
    labels = [{"id": f"p{t}", "y_true": 1, "ts": 10 + t} for t in range(5)]
    snaps, err = replay([write(tmp_path / "p.jsonl", preds), "--labels", write(tmp_path / "l.jsonl", labels),
                         "--max-pending", "3"], tmp_path, capsys)
    assert "prediction 'p0' (ts=0.0) expired without a label (pending store full)" in err
    assert "prediction 'p1' (ts=1.0) expired without a label (pending store full)" in err
    assert "2 predictions expired (2 early: pending bound)" in err.splitlines()[-1]
    assert "2 expired labels rejected" in err.splitlines()[-1]
    (snap,) = final(snaps).values()
    assert (snap["count"], snap["labeled"], snap["expired"], snap["final"]) == (5, 3, 2, True)
