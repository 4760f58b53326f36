"""``LabelStream.add_many`` looks for runs at a cost bounded per item, also on a stream whose
runs keep breaking (labels whose prediction never comes, every few items): the items its looks
(``LabelJoin.joinable``, ``WindowManager.predictions_taken``) read stay within a small multiple
of the items, where each look once read up to 4,096 items for 8 taken one by one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streammetrics.cli import main
from streammetrics.stream.labels import LabelJoin
from streammetrics.stream.windows import WindowManager

pytest.importorskip("msgspec")


def _files(tmp_path: Path, n: int) -> tuple[Path, Path]:
    preds, labels = [], []
    for i in range(n):
        ts = 1_700_000_000 + i * 0.01
        preds.append({"model": "m", "segment": f"s{i % 5}", "ts": round(ts, 2), "score": (i * 37 % 101) / 101,
                      "id": f"p{i}"})
        if i % 3 == 0:  # a label whose prediction never comes: the join refuses a run there
            labels.append({"id": f"orphan{i}", "y_true": 1, "ts": round(ts + 0.2, 2)})
        if i % 2 == 0:
            labels.append({"id": f"p{i}", "y_true": i % 4 // 2, "ts": round(ts + 0.5, 2)})
    labels.sort(key=lambda lab: lab["ts"])
    p, q = tmp_path / "p.jsonl", tmp_path / "l.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in preds))
    q.write_text("".join(json.dumps(x) + "\n" for x in labels))
    return p, q


def test_looking_for_runs_reads_a_bounded_number_of_items_per_item(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    n = 6000
    p, q = _files(tmp_path, n)
    read = {"joinable": 0, "predictions_taken": 0}
    joinable, taken = LabelJoin.joinable, WindowManager.predictions_taken

    def counted_joinable(self, items, times):  # type: ignore[no-untyped-def]
        read["joinable"] += len(items)
        return joinable(self, items, times)

    def counted_taken(self, events, times):  # type: ignore[no-untyped-def]
        read["predictions_taken"] += len(events)
        return taken(self, events, times)

    monkeypatch.setattr(LabelJoin, "joinable", counted_joinable)
    monkeypatch.setattr(WindowManager, "predictions_taken", counted_taken)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(p), "--labels", str(q), "--window", "60s", "--label-ttl", "1h", "-q",
                 "-o", str(out)]) == 0
    items = n + n // 3 + n // 2
    assert read["joinable"] > 0  # runs were looked for
    assert read["joinable"] + read["predictions_taken"] <= 2 * items, read
