"""Delayed labels through the Pipeline: message bytes in (one mixed stream), problems with codes,
checkpoint-restore at any point, counters."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.stream.pipeline import Pipeline, PipelineConfig

NOW = 1_767_225_600


def stream(seed: int, n: int = 150) -> list[bytes]:
    rng = random.Random(seed)
    items = []
    for i in range(n):
        t = NOW + i
        # weight 2: BinaryScores' unit-weight path keeps a running product that to_dict folds into
        # its log-loss sum, so a restored accumulator rounds later unit-weight events differently
        p = {"ts": t, "model": rng.choice(["a", "b"]), "score": round(rng.random(), 3), "id": f"p{i}", "weight": 2}
        if rng.random() < 0.2:
            p["y_true"] = rng.randrange(2)
        items.append((t, 0, p))
        if "y_true" not in p and rng.random() < 0.85:
            d = rng.uniform(-3, 90)
            items.append((t + d, 1, {"id": f"p{i}", "y_true": rng.randrange(2), "ts": t + d}))
            if rng.random() < 0.05:
                items.append((t + d + 1, 1, {"id": f"p{i}", "y_true": 1, "ts": t + d + 1}))
    items.sort(key=lambda x: (x[0], x[1]))
    lines = [json.dumps(x[2]).encode() for x in items]
    lines.insert(len(lines) // 2, b'[{"id": "zz", "ts": 1}, {"ts": 2}]')  # a label without y_true, junk
    return lines


def config() -> PipelineConfig:
    return PipelineConfig(window=10.0, slide=5.0, label_ttl=60.0, max_future=None, include_state=False)


def run(lines: list[bytes], cut: int | None = None, restore: bool = True, revisions: bool = True,
        every: int = 5) -> tuple[list, list]:
    pipe = Pipeline(config())
    snaps, problems = [], []
    for n, line in enumerate(lines):
        if n == cut:
            snaps += pipe.poll(revisions=revisions)  # a checkpoint holds state, not snapshots ready to publish
            if restore:
                state = json.loads(json.dumps(pipe.to_dict()))
                pipe.close()
                pipe = Pipeline(config()).load_dict(state)
        res = pipe.process(line)
        problems += [(n, p.index, p.code) for p in res.problems]
        if n % every == 0:
            snaps += pipe.poll(revisions=revisions)
    snaps += pipe.poll(revisions=revisions) + pipe.flush()
    counters = pipe.counters
    pipe.close()
    return snaps, problems + [counters["labels"]]


@pytest.mark.parametrize("seed", range(3))
def test_checkpoint_anywhere_changes_nothing(seed):
    lines = stream(seed)
    rng = random.Random(seed)
    for cut in [rng.randrange(len(lines)) for _ in range(3)]:
        assert run(lines, cut) == run(lines, cut, restore=False)


@pytest.mark.parametrize("seed", range(3))
def test_tick_revisions_survive_checkpoints_and_ignore_the_poll_cadence(seed):
    """Polling with revisions=False (as replay does): revisions come at revision ticks only, so
    the snapshots are the same whether the caller polls after every message, every 7th or only
    at the end, and a checkpoint anywhere (which keeps the last tick's pane) changes nothing."""
    lines = stream(seed)
    want = run(lines, revisions=False, every=1)
    assert run(lines, revisions=False, every=7) == want == run(lines, revisions=False, every=len(lines) + 1)
    assert max(s["revision"] for s in want[0]) >= 2
    rng = random.Random(seed)
    for cut in [rng.randrange(len(lines)) for _ in range(3)]:
        assert run(lines, cut, revisions=False, every=7) == want


def test_codes_and_counters():
    snaps, problems = run(stream(1))
    counts = problems.pop()
    codes = {p[2] for p in problems}
    assert {"missing_field", "duplicate"} <= codes
    assert counts["joined"] > 0 and counts["labels"] > 0
    assert sorted(p[1] for p in problems if p[1] is not None) == [0, 1]  # both array elements, by index
    revised = [s for s in snaps if s["revision"] > 0]
    assert revised and all(s["labeled"] + s["expired"] + s["pending"] == s["count"] for s in snaps)
