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


def _events(model: str, start_s: int, signal: float, seed: int, n: int = 400) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = int(rng.random() < 0.4)
        out.append({"ts": start_s + 50.0 * i / n, "model": model, "y_true": y,
                    "score": min(max(rng.gauss(0.35 + signal * y, 0.2), 0.001), 0.999)})
    return out


def _partials(events: list[dict], start_s: int) -> list[bytes]:
    """Each key's window split over two sources (alternate events), as two partials."""
    out = []
    for source in (0, 1):
        by_model: dict[str, sm.BinaryMonitor] = {}
        for e in events[source::2]:
            by_model.setdefault(e["model"], sm.BinaryMonitor()).update({"y_true": e["y_true"], "score": e["score"]})
        for model, m in sorted(by_model.items()):
            snap = build_snapshot((model, ""), m, start_s * 1000, (start_s + 60) * 1000, final=True)
            out.append(partial_record(source, snap))
    return out


def test_benjamini_hochberg_over_the_keys_of_one_window_as_replay() -> None:
    """The merged windows one watermark advance publishes (every key's window of that span) are one
    false-discovery family, as in replay: the merge's ``changes`` equal replay's, and a key with a
    mild change that Benjamini-Hochberg over its own window's tests alone would mark is not marked
    among the healthy keys' tests (fails when each merged window is its own family)."""
    from streammetrics.kernels.intervals import benjamini_hochberg
    from streammetrics.stream.pipeline import Pipeline, PipelineConfig

    signals = {"m0": 0.0, "m1": 0.24, **{f"m{k}": 0.3 for k in range(2, 8)}}  # window 2: m0 broken, m1 mild
    first = [e for k in range(8) for e in _events(f"m{k}", 0, 0.3, k)]
    second = [e for k in range(8) for e in _events(f"m{k}", 60, signals[f"m{k}"], 100 + k)]
    records = _partials(first, 0) + [watermark_record(0, 60_000_000), watermark_record(1, 60_000_000)]
    records += _partials(second, 60) + [watermark_record(0, 120_000_000), watermark_record(1, 120_000_000)]
    merged = _run(Merger(sources=2, changes=Changes("previous")), records)
    p = Pipeline(PipelineConfig(window=60.0, max_future=None, compare="previous"))
    for e in sorted(first + second, key=lambda e: e["ts"]):
        p.process(json.dumps(e))
    replayed = p.poll() + p.flush()
    later = {s["key"]["model"]: s["changes"] for s in merged if s["window"]["start"] == 60}
    assert len(later) == 8
    assert later == {s["key"]["model"]: s["changes"] for s in replayed if s["window"]["start"] == 60}
    tests = [(model, name, c["p_value"], c["significant"]) for model, ch in sorted(later.items())
             for name, c in ch.items()]
    assert [t[3] for t in tests] == benjamini_hochberg([t[2] for t in tests], 0.05).tolist()
    assert later["m0"]["roc_auc"]["significant"]
    alone = {name: bool(sig) for name, sig in zip(later["m1"], benjamini_hochberg(
        [c["p_value"] for c in later["m1"].values()], 0.05).tolist())}
    assert any(alone[name] and not c["significant"] for name, c in later["m1"].items())
