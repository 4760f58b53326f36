"""The report of sliced replays (contract section 11): slices and roll-ups of one model are
kept apart (not merged into one (model, segment) history), and roll-ups show their worst slices."""
from __future__ import annotations

import json

import numpy as np

from streammetrics.cli import main
from streammetrics.report.sources import parse_snapshot


def _write_events(path, n: int = 3000) -> None:
    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        for i in range(n):
            s = min(max(float(np.round(rng.random(), 3)), 0.001), 0.999)
            fh.write(json.dumps({"ts": i * 180.0 / n, "model": "m", "country": ["us", "fr"][i % 2],
                                 "device": ["ios", "web", "tv"][int(rng.integers(3))],
                                 "y_true": int(rng.random() < s), "score": s}) + "\n")


def test_slices_and_rollups_are_separate_keys_with_a_worst_slices_table(tmp_path) -> None:
    events, snaps, html = tmp_path / "ev.jsonl", tmp_path / "snaps.jsonl", tmp_path / "r.html"
    _write_events(events)
    assert main(["replay", str(events), "-o", str(snaps), "-q", "--slice-by", "country,device",
                 "--rollup", "country", "--rollup", "model"]) == 0
    parsed = [parse_snapshot(json.loads(line)) for line in snaps.read_text().splitlines()]
    labels = {p.segment for p in parsed}
    assert "country=us / device=ios" in labels and "rollup: country=fr" in labels and "rollup: model" in labels
    assert len(labels) == 2 * 3 + 2 + 1
    assert all(p.slices for p in parsed if p.segment.startswith("rollup"))
    assert main(["report", str(snaps), "-o", str(html)]) == 0
    text = html.read_text()
    assert text.count('class="worst-slices"') >= 1 and "country=fr / device=tv" in text


def test_plain_snapshots_keep_their_segment() -> None:
    snap = {"schema": "streammetrics.snapshot/1", "key": {"model": "m", "segment": "web"},
            "window": {"start": 0, "end": 60}, "count": 1, "metrics": {"count": 1}}
    parsed = parse_snapshot(snap)
    assert parsed.segment == "web" and parsed.slices == ()
