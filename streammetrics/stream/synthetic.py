"""Synthetic prediction events from models whose quality drifts: the demo's producer and
the source of the shipped sample file and of the benchmarks' streams.

Each model scores events of a binary task. The positive rate is ``base_rate``; a positive's
latent logit is ``+separation / 2``, a negative's ``-separation / 2``, plus standard logistic
noise, and the score is the sigmoid of the latent logit (optionally shifted, which hurts
calibration and so log loss and Brier score, but not ROC AUC). ``separation`` and ``shift``
move linearly from their start to their end value over ``duration`` seconds of event time:
that is the drift the windowed metrics should show.

Everything is seeded and pure Python (``random.Random``), so the same arguments always give
the same events, byte for byte.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["DEFAULT_MODELS", "DEFAULT_START", "DriftingModel", "generate_events", "write_jsonl"]


@dataclass(frozen=True)
class DriftingModel:
    """One model on one traffic segment, drifting linearly over the stream's duration."""

    model: str
    segment: str = ""
    base_rate: float = 0.3
    separation: tuple[float, float] = (4.0, 4.0)  # start, end
    shift: tuple[float, float] = (0.0, 0.0)  # logit offset: miscalibration
    share: float = 1.0  # relative traffic share

    def at(self, progress: float) -> tuple[float, float]:
        """(separation, shift) at ``progress`` in [0, 1] of the stream."""
        sep = self.separation[0] + (self.separation[1] - self.separation[0]) * progress
        shift = self.shift[0] + (self.shift[1] - self.shift[0]) * progress
        return sep, shift


DEFAULT_MODELS: tuple[DriftingModel, ...] = (
    # a stable model
    DriftingModel("fraud-v1", "web", base_rate=0.2, separation=(3.5, 3.5), share=2.0),
    # a model whose ranking quality decays and whose calibration drifts
    DriftingModel("fraud-v2", "web", base_rate=0.2, separation=(4.5, 1.0), shift=(0.0, 1.5), share=2.0),
    DriftingModel("fraud-v2", "mobile", base_rate=0.35, separation=(4.0, 2.5), shift=(0.0, -1.0)),
)


#: where synthetic streams start by default: 2026-01-01T00:00:00Z
DEFAULT_START = 1_767_225_600.0


def generate_events(
    n: int,
    *,
    start: float = DEFAULT_START,
    duration: float = 600.0,
    models: tuple[DriftingModel, ...] = DEFAULT_MODELS,
    seed: int = 7,
    jitter: float = 0.0,
    ids: bool = True,
) -> Iterator[dict]:
    """Yield ``n`` binary-task events spread evenly over ``duration`` seconds of event time.

    ``jitter`` > 0 makes arrival order differ from event-time order: each event's ``ts`` is
    moved back by up to ``jitter`` seconds (uniformly), as delayed delivery would.
    """
    rng = random.Random(seed)
    total_share = sum(m.share for m in models)
    cumulative = []
    acc = 0.0
    for m in models:
        acc += m.share / total_share
        cumulative.append(acc)
    step = duration / max(n, 1)
    for i in range(n):
        u = rng.random()
        m = models[next(k for k, c in enumerate(cumulative) if u <= c or k == len(models) - 1)]
        sep, shift = m.at(i / max(n - 1, 1))
        y = 1 if rng.random() < m.base_rate else 0
        v = rng.random()
        noise = math.log(v / (1.0 - v)) if 0.0 < v < 1.0 else 0.0
        z = (sep / 2 if y else -sep / 2) + noise + shift
        score = 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
        ts = start + i * step - (rng.random() * jitter if jitter else 0.0)
        event = {
            "ts": round(ts, 3),
            "model": m.model,
            "segment": m.segment,
            "y_true": y,
            "score": round(score, 6),
        }
        if ids:
            event["id"] = f"p{i:08d}"
        yield event


def write_jsonl(path: str, events: Iterator[dict]) -> int:
    """Write events one JSON object per line; return how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(json.dumps(ev, separators=(",", ":")))
            fh.write("\n")
            n += 1
    return n
