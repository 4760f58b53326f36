"""Slices and roll-ups against the same events keyed by model alone (issue 28, point 6).

    python benchmarks/bench_slices.py [--events 200000] [--per-hour 1000000] [--quick]

One model, three slice dimensions of 10, 20 and 50 values (Zipf-skewed, s=1.1: a few values
hold most events, as countries or customer tiers do), 60 s tumbling windows, two roll-ups
(``--rollup a`` and ``--rollup model``). The same events are replayed through
``Pipeline`` + ``replay_lines``: keyed by model alone; with the three values joined as the
``segment`` (the same windows without the slicing layer); ``--slice-by a,b,c``; and ``--slice-by
a,b,c --rollup a --rollup model`` (every event applied once, to its slice; roll-ups merged from
the slices' window monitors). Reported: CPU seconds per event of each (best of the rounds,
interleaved), the ratio of the last to the first against the target (<= 1.5x: met / MISSED),
and the output of each: snapshots and bytes. Also the per-event part alone (``ingest``:
``Pipeline.process`` of every event, nothing polled, so no window is built: decode, parse, slice
key, window add) of the first and the last, and its ratio. Sizes: a slice window's state is
that of any window of its events (the events form up to 64 events, else at most ~40 KB of
histogram JSON per BinaryScores), so output grows with the slices present in each window, at
most the product of the (budgets + 1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from streammetrics.stream.pipeline import Pipeline, PipelineConfig  # noqa: E402
from streammetrics.stream.replay import replay_lines  # noqa: E402
from streammetrics.stream.slicing import SliceSpec  # noqa: E402

TARGET = 1.5
SIZES = {"a": 10, "b": 20, "c": 50}


def _zipf(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    p = 1.0 / np.arange(1, k + 1) ** 1.1
    return rng.choice(k, size=n, p=p / p.sum())


def make_lines(n: int, per_hour: float, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    dims = {d: _zipf(rng, k, n) for d, k in SIZES.items()}
    s = np.clip(np.round(rng.random(n), 6), 1e-6, 1 - 1e-6)
    y = (rng.random(n) < s).astype(int)
    ts = 1.7e9 + np.arange(n) * 3600.0 / per_hour
    return [json.dumps({"ts": float(ts[i]), "model": "m", "a": f"a{dims['a'][i]}", "b": f"b{dims['b'][i]}",
                        "c": f"c{dims['c'][i]}", "y_true": int(y[i]), "score": float(s[i])}).encode()
            for i in range(n)]


#: the runs: keyed by model (the baseline); the slice values as the segment (the same windows,
#: no slicing layer); sliced without roll-ups; sliced with the two roll-ups (the measured one)
RUNS = {
    "keyed by model": None,
    "a/b/c as segment": None,
    "sliced, no roll-up": SliceSpec(fields=("a", "b", "c"), max_values=100),
    "sliced + 2 roll-ups": SliceSpec(fields=("a", "b", "c"), max_values=100, rollups=(("a",), ())),
}


def as_segment(lines: list[bytes]) -> list[bytes]:
    out = []
    for line in lines:
        event = json.loads(line)
        event["segment"] = f"{event.pop('a')}/{event.pop('b')}/{event.pop('c')}"
        out.append(json.dumps(event).encode())
    return out


def run(lines: list[bytes], spec: SliceSpec | None, include_state: bool) -> tuple[float, int, int, int]:
    config = PipelineConfig(window=60.0, include_state=include_state, slicing=spec)
    pipe = Pipeline(config)
    out: list[int] = []
    snaps = 0

    def write(line: str) -> None:
        nonlocal snaps
        snaps += 1
        out.append(len(line) + 1)

    start = time.process_time()
    stats = replay_lines(lines, pipe, write)
    spent = time.process_time() - start
    assert stats.events == len(lines), stats.summary()
    return spent, snaps, sum(out), pipe.counters["keys"]


def ingest(lines: list[bytes], spec: SliceSpec | None) -> float:
    """CPU seconds of ``Pipeline.process`` over ``lines`` without a poll (no window built)."""
    pipe = Pipeline(PipelineConfig(window=60.0, slicing=spec))
    process = pipe.process
    start = time.process_time()
    for line in lines:
        process(line)
    return time.process_time() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--per-hour", type=float, default=1_000_000.0, help="events per hour of event time")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-state", action="store_true", help="snapshots without state")
    ap.add_argument("--quick", action="store_true", help="20,000 events, 2 rounds (a smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.events, args.rounds = 20_000, 2
    lines = make_lines(args.events, args.per_hour)
    inputs = {name: as_segment(lines) if name == "a/b/c as segment" else lines for name in RUNS}
    best: dict[str, tuple[float, int, int, int]] = {}
    for _ in range(args.rounds):
        for name, spec in RUNS.items():
            got = run(inputs[name], spec, not args.no_state)
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    n = args.events
    print(f"events {n:,}, {args.per_hour * 60 / 3600:,.0f} per 60 s window; dims a/b/c of "
          f"{SIZES['a']}/{SIZES['b']}/{SIZES['c']} values (Zipf 1.1); roll-ups: a, model; state "
          f"{'off' if args.no_state else 'on'}; CPU time, best of {args.rounds}")
    base = best["keyed by model"][0]
    for name, (spent, snaps, size, _) in best.items():
        print(f"{name:<20} {spent / n * 1e6:8.2f} us/event  {spent / base:6.2f}x  {snaps:>7,} snapshots  "
              f"{size:>13,} bytes")
    ratio = best["sliced + 2 roll-ups"][0] / base
    print(f"ratio {ratio:.2f}x (target <= {TARGET}x): {'met' if ratio <= TARGET else 'MISSED'}")
    per_event = {name: min(ingest(lines, RUNS[name]) for _ in range(args.rounds))
                 for name in ("keyed by model", "sliced + 2 roll-ups")}
    first, last = per_event["keyed by model"], per_event["sliced + 2 roll-ups"]
    print(f"ingest (no window built): keyed by model {first / n * 1e6:.2f} us/event, sliced + 2 roll-ups "
          f"{last / n * 1e6:.2f} us/event: {last / first:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
