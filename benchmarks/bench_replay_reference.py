"""Replay throughput with and without ``--reference`` (label-free metrics in every
snapshot), in one run, and the cost per snapshot of the label-free metrics.

    python benchmarks/bench_replay_reference.py [--events 200000] [--window 60] [--repeats 3]

Events: the synthetic binary stream of ``bench_replay`` (three keys, a million events an
hour of event time, so ~1,500 events per key and 60 s window). The reference of each key is
the first 20,000 events of another seed, loaded with ``load_references`` (binned, the
default: 1024 bins per octave, at most 4096 bins per histogram).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.references import load_references
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.synthetic import generate_events, write_jsonl

RATE = 1_000_000 / 3600


def replay(path: str, window: float, references: dict | None) -> tuple[int, int]:
    pipe = Pipeline(PipelineConfig(window=window, references=references, include_state=False))
    with open(path, "rb") as fh, open(os.devnull, "w") as sink:
        stats = replay_lines(fh, pipe, sink.write)
    return stats.events, stats.snapshots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = args.events
    with tempfile.TemporaryDirectory() as tmp:
        path, ref_path = os.path.join(tmp, "events.jsonl"), os.path.join(tmp, "ref.jsonl")
        write_jsonl(path, generate_events(n, duration=n / RATE, seed=1))
        write_jsonl(ref_path, generate_events(20_000, duration=20_000 / RATE, seed=2))
        t0 = time.perf_counter()
        refs = load_references(ref_path)
        t_load = time.perf_counter() - t0
        best = {"without": float("inf"), "with": float("inf")}
        snaps = 0
        for _ in range(args.repeats):  # interleaved, so that machine load hits both alike
            for name, r in (("without", None), ("with", refs)):
                t0 = time.perf_counter()
                events, snaps = replay(path, args.window, r)
                best[name] = min(best[name], time.perf_counter() - t0)
                assert events == n
    per_snap = (best["with"] - best["without"]) / max(snaps, 1)
    print(f"{n:,} events, {len(refs)} keys, {snaps} snapshots ({args.window:g}s windows), best of {args.repeats}")
    print(f"load_references: 20,000 events in {t_load * 1e3:.0f} ms")
    print(f"{'replay without --reference':<30} {n / best['without']:>10,.0f} events/s")
    print(f"{'replay with --reference':<30} {n / best['with']:>10,.0f} events/s "
          f"({best['with'] / best['without']:.2f}x the time)")
    print(f"label-free metrics: {per_snap * 1e3:.2f} ms per snapshot")


if __name__ == "__main__":
    main()
