"""``--compare previous`` / ``--reference`` at the merge stage (``--partitioning any``, issue 26
point 4): merged windows carry ``changes`` against the key's previous merged window, and the
memory survives the merge checkpoint."""
from __future__ import annotations

import json
import random

import streammetrics as sm
from consumers.partials import Merger, partial_record, watermark_record
from streammetrics.stream.changes import Changes
from streammetrics.stream.snapshots import build_snapshot


def _partial(source: int, start_s: int, signal: float, seed: int) -> bytes:
    rng = random.Random(seed)
    m = sm.BinaryMonitor()
    for _ in range(400):
        y = int(rng.random() < 0.4)
        m.update({"y_true": y, "score": min(max(rng.gauss(0.35 + signal * y, 0.2), 0.001), 0.999)})
    return partial_record(source, build_snapshot(("m", ""), m, start_s * 1000, (start_s + 60) * 1000, final=True))


def _run(merger: Merger, records: list[bytes], restore_at: int | None = None) -> list[dict]:
    out: list[dict] = []
    for i, rec in enumerate(records):
        if i == restore_at:
            data = json.loads(json.dumps(merger.to_dict()))
            merger = Merger(sources=2, changes=Changes("previous")).load_dict(data)
        out += merger.apply(rec)
    return out


def test_merged_windows_are_compared_with_the_previous_merged_window() -> None:
    records = [_partial(0, 0, 0.3, 1), _partial(1, 0, 0.3, 2), watermark_record(0, 60_000_000),
               watermark_record(1, 60_000_000),
               _partial(0, 60, 0.0, 3), _partial(1, 60, 0.0, 4), watermark_record(0, 120_000_000),
               watermark_record(1, 120_000_000)]
    plain = _run(Merger(sources=2), records)
    assert len(plain) == 2 and all("changes" not in s for s in plain)
    snaps = _run(Merger(sources=2, changes=Changes("previous")), records)
    first, second = snaps
    assert "changes" not in first
    auc = second["changes"]["roc_auc"]
    assert auc["baseline"] == first["metrics"]["roc_auc"] and auc["significant"] is True
    # a merge restored from its checkpoint between the two windows compares the same way
    assert _run(Merger(sources=2, changes=Changes("previous")), records, restore_at=4) == snaps
    # without the memory in the checkpoint, the second window would carry no changes
    merger = Merger(sources=2, changes=Changes("previous"))
    for rec in records[:4]:
        merger.apply(rec)
    data = merger.to_dict()
    assert data["changes"]["keys"]
    del data["changes"]
    again = Merger(sources=2, changes=Changes("previous")).load_dict(data)
    later = [s for rec in records[4:] for s in again.apply(rec)]
    assert len(later) == 1 and not later[0].get("changes")
