"""The chunked, columnar reading of ``replay PREDICTIONS --labels LABELS``
(streammetrics.stream.label_columns) gives the items, in the order, of the line-by-line merge."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.stream.label_events import DelayedEventParser
from streammetrics.stream.label_replay import _merged

pytest.importorskip("msgspec")


def _files(rng: random.Random, n: int) -> tuple[list[bytes], list[bytes]]:
    preds, labels = [], []
    for i in range(n):
        ts = 1_700_000_000 + rng.uniform(0, 600) if rng.random() < 0.2 else 1_700_000_000 + i * 0.5
        ev: dict = {"ts": round(ts, 3), "model": rng.choice("ab"), "id": f"p{i}", "score": rng.random()}
        u = rng.random()
        if u < 0.03:
            ev["y_true"] = 1  # a labelled prediction
        elif u < 0.05:
            del ev["id"]  # refused: no id
        elif u < 0.07:
            ev["score"] = "x"
        elif u < 0.08:
            ev = {"id": f"q{i}", "y_true": 0, "ts": ev["ts"]}  # a label in the predictions file
        line = json.dumps(ev).encode() + b"\n"
        preds.append(b"\n" if rng.random() < 0.02 else line)
        lab: dict = {"id": f"p{i}", "y_true": rng.randrange(2), "ts": round(ts + rng.uniform(0, 60), 3)}
        v = rng.random()
        if v < 0.03:
            lab["y_true"] = 2
        elif v < 0.05:
            lab["id"] = 12345678901234567890123
        elif v < 0.06:
            lab["model"] = "m"
        elif v < 0.07:
            lab["ts"] = True
        elif v < 0.08:
            lab["id"] = i  # an integer id
        labels.append(json.dumps(lab).encode() + b"\n" if rng.random() > 0.02 else b"{bad\n")
    labels.sort(key=lambda line: rng.random() if rng.random() < 0.1 else 0)
    return preds, labels


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [7, 4096])
def test_chunked_merge_is_the_line_by_line_merge(seed: int, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from streammetrics.stream import label_columns

    monkeypatch.setattr(label_columns, "CHUNK_LINES", chunk)
    rng = random.Random(seed)
    preds, labels = _files(rng, 300)
    parser = DelayedEventParser("binary")
    sources = [("p", preds), ("l", labels)]
    c1, c2 = [0, 0], [0, 0]
    _, old = _merged(sources, parser.parse_value, c1)
    _, new = _merged(sources, parser.parse_value, c2, label_columns.decoders(parser.base))
    want = [(rank, line, repr(item)) for rank, line, item in old]
    got = [(rank, line, repr(item)) for rank, line, item in new]
    assert got == want
    assert c1 == c2
    assert any("Label" in g[2] for g in got) and any("Rejection" in g[2] for g in got)
