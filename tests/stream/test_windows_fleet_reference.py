"""``--reference`` with many small windows (issue 24, point 3): windows of keys without a
reference take the vectorised close (their reference metrics are nulls, their monitor unread),
windows of keys with one are built from their monitor; the snapshots equal those built window by
window, and keys without a reference cost as without --reference."""
from __future__ import annotations

import json
import random

from streammetrics.monitors.reference import METRICS
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.references import load_references
from streammetrics.stream.snapshots import snapshot_line


def _events(rng: random.Random, n: int, keys: int) -> list[dict]:
    return [{"ts": 1_700_000_000 + i * 0.05, "model": f"m{i % keys}", "y_true": int(rng.random() < 0.3),
             "score": round(rng.random(), 6)} for i in range(n)]


def _lines(config: PipelineConfig, events: list[dict], fleet: bool) -> tuple[list[str], int]:
    pipe = Pipeline(config)
    if not fleet:
        pipe.windows._kind = None  # (each window built when it closes)
    lines, deferred = [], 0
    for i, e in enumerate(events):
        pipe.process(json.dumps(e))
        if i % 250 == 249:
            deferred += pipe.windows.deferred_count
            lines += [snapshot_line(s) for s in pipe.poll()]
    return lines + [snapshot_line(s) for s in pipe.flush()], deferred


def test_reference_keys_from_their_monitor_the_others_together(tmp_path):
    rng = random.Random(3)
    ref_file = tmp_path / "ref.jsonl"
    ref_file.write_text("".join(json.dumps(e) + "\n" for e in _events(rng, 600, 40) if e["model"] in ("m1", "m7")))
    refs = load_references(str(ref_file))
    assert set(refs) == {("m1", ""), ("m7", "")}
    config = PipelineConfig(window=10.0, max_future=None, references=refs)
    events = _events(rng, 6000, 40)
    fleet, deferred = _lines(config, events, True)
    one_by_one, _ = _lines(config, events, False)
    assert deferred > 0  # (with a reference hook, no window used to take the vectorised close)
    assert fleet == one_by_one
    snaps = [json.loads(line) for line in fleet]
    with_ref = [s for s in snaps if s["key"]["model"] in ("m1", "m7")]
    assert with_ref and all(s["metrics"]["drift_ks"] is not None for s in with_ref)
    assert all(s["metrics"][k] is None for s in snaps if s not in with_ref for k in METRICS)


def test_keys_without_a_reference_written_from_their_texts(tmp_path):
    """``poll_lines`` with references: the small windows of keys without one are written from their
    JSON texts (the hook's ``metrics_text``: nulls appended), the others built and annotated with
    their ``changes``; the lines equal :meth:`Pipeline.poll`'s, encoded one by one."""
    rng = random.Random(5)
    ref_file = tmp_path / "ref.jsonl"
    ref_file.write_text("".join(json.dumps(e) + "\n" for e in _events(rng, 600, 40) if e["model"] in ("m1", "m7")))
    config = PipelineConfig(window=10.0, max_future=None, references=load_references(str(ref_file)))
    events = _events(rng, 6000, 40)
    by_dicts, _ = _lines(config, events, True)
    split = Pipeline(config)
    texts: list[str] = []
    snaps: list[dict] = []
    lines = Pipeline(config)
    by_lines: list[str] = []
    for i, e in enumerate(events):
        split.process(json.dumps(e))
        lines.process(json.dumps(e))
        if i % 250 == 249:
            for r in split.windows.poll_written():
                (texts if isinstance(r, str) else snaps).append(r)  # type: ignore[arg-type]
            by_lines += lines.poll_lines()
    by_lines += lines.flush_lines()
    assert texts and snaps
    assert all(json.loads(t)["key"]["model"] not in ("m1", "m7") for t in texts)
    assert all(s["key"]["model"] in ("m1", "m7") for s in snaps)
    assert by_lines == by_dicts
    assert any('"changes"' in line for line in by_lines)
