"""load_references decodes chunks of valid events as columns (no per-line parse), and gives the
references the line-by-line path gives: same states, same errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from streammetrics.stream import references as references_module
from streammetrics.stream.references import load_references


def _events(n: int, seed: int = 5, weighted: bool = False) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        row = {"ts": 1_700_000_000 + i, "model": f"m{i % 3}", "segment": "s" if i % 2 else "",
               "y_true": int(rng.random() < 0.4), "score": round(float(rng.random()), 6)}
        if weighted and i % 4 == 0:
            row["weight"] = round(float(rng.random()) * 3, 3)
        rows.append(row)
    return rows


def _write(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def _states(refs: dict) -> dict:
    return {key: ref.scores.to_dict() for key, ref in refs.items()}


@pytest.mark.parametrize("weighted", [False, True])
def test_columns_give_the_line_by_line_references(tmp_path, monkeypatch, weighted):
    path = _write(tmp_path / "ref.jsonl", _events(700, weighted=weighted))
    parsed = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda line: parsed.append(1) or real(line))
    columns = load_references(path)
    assert not parsed  # every line decoded as columns
    monkeypatch.setattr(references_module, "column_decoder", lambda parser: None)
    by_line = load_references(path)
    assert len(parsed) == 700
    assert _states(columns) == _states(by_line)


def test_odd_chunks_go_line_by_line(tmp_path, monkeypatch):
    monkeypatch.setattr(references_module, "_BATCH", 50)
    rows: list = _events(400, seed=6)
    rows.insert(120, "")  # a blank line: its chunk line by line
    path = _write(tmp_path / "ref.jsonl", rows)
    got = load_references(path)
    monkeypatch.setattr(references_module, "column_decoder", lambda parser: None)
    assert _states(got) == _states(load_references(path))
    rows.insert(260, {"ts": 1, "model": "m0", "score": 0.5})  # no y_true: the same error, line 261
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(ValueError) as line_by_line:
        load_references(path)
    monkeypatch.undo()
    monkeypatch.setattr(references_module, "_BATCH", 50)
    with pytest.raises(ValueError) as columns:
        load_references(path)
    assert str(columns.value) == str(line_by_line.value) and ":261:" in str(columns.value)
