"""``replay`` throughput against the number of stream keys, in one run (issue 12).

The same number of binary events (default 1,000,000) spread over 10 minutes of event time
(60 s tumbling windows, so 10 windows per key) on 1, 100 and 10,000 keys (``model`` =
``m00000``..., segment ""). At 10,000 keys and 1M events each window of each key holds ~10
events, so the run closes ~100,000 windows: the cost per snapshot (metrics, state encoding,
JSON) dominates. Each configuration replays its JSONL file exactly as ``streammetrics replay``
does (``replay_lines`` through a ``Pipeline`` of the default ``PipelineConfig``, inside
``replay_gc`` (the collector's thresholds of ``streammetrics replay``): binary task,
batch windows, state included, ``max_keys`` 100,000, snapshots
written to /dev/null). Rounds interleave the configurations so that load from other processes
hits all alike; each rate is the best of ``--repeats`` rounds, and the ratio is to the
one-key rate of the same run.

    python benchmarks/bench_keys.py [--events 1000000] [--repeats 3] [--keys 1,100,10000]
    python benchmarks/bench_keys.py --profile 10000   # cProfile one replay on 10,000 keys

Target (issue 12): 10,000 keys at >= 0.4x the one-key rate (goal 0.5), CPU-time ratio.

What a window of ~10 events costs on the fleet path: a ``BinaryMonitor`` in its small form
(its events as floats, the signed scores), closed without building its parts, and its snapshot
line written at the next ``poll_lines`` together with every other window closed since
(``BinaryMonitor.snapshot_texts``, :mod:`streammetrics.monitors.fleet_snapshot`: events and
levels by one sort, confusion cells by one bincount, every metric a numpy column, each sum by
``math.fsum``; the state is the window's events, :mod:`streammetrics.monitors.binary_events`;
every window's metrics, scores and labels encoded by three msgspec calls, split per window,
the same bytes as ``snapshot_line``).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pstats
import random
import statistics
import tempfile
import time

from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_gc, replay_lines

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DURATION = 600.0  # ten 60 s windows


def write_events(path: str, n: int, keys: int, seed: int = 1) -> None:
    """``n`` binary events evenly over DURATION seconds, each on a uniformly random key."""
    rng = random.Random(seed)
    step = DURATION / n
    dumps = json.dumps
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            y = 1 if rng.random() < 0.3 else 0
            v = rng.random()
            z = (1.5 if y else -1.5) + (math.log(v / (1.0 - v)) if 0.0 < v < 1.0 else 0.0)
            event = {
                "ts": round(START + i * step, 3),
                "model": f"m{rng.randrange(keys):05d}",
                "segment": "",
                "y_true": y,
                "score": round(1.0 / (1.0 + math.exp(-z)), 6),
            }
            fh.write(dumps(event, separators=(",", ":")))
            fh.write("\n")


def replay(path: str) -> tuple[int, int]:
    """One replay as ``streammetrics replay FILE --task binary`` runs it; (events, snapshots)."""
    pipeline = Pipeline(PipelineConfig(window=60.0))
    with open(path, "rb") as fh, open(os.devnull, "w") as sink, replay_gc():
        def write(line: str) -> None:
            sink.write(line)
            sink.write("\n")

        stats = replay_lines(fh, pipeline, write)
    return stats.events, stats.snapshots


def profile(path: str, top: int) -> None:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    events, snaps = replay(path)
    prof.disable()
    print(f"profiled replay: {events:,} events, {snaps:,} snapshots, {time.perf_counter() - t0:.1f} s "
          "(with cProfile overhead)")
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keys", default="1,100,10000", help="comma-separated key counts (first: the baseline)")
    ap.add_argument("--profile", type=int, default=None, metavar="KEYS",
                    help="instead of timing, cProfile one replay over KEYS keys")
    ap.add_argument("--top", type=int, default=30, help="rows of the profile to print")
    args = ap.parse_args()
    n = args.events
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile is not None:
            path = os.path.join(tmp, "events.jsonl")
            write_events(path, n, args.profile)
            profile(path, args.top)
            return
        counts = [int(k) for k in args.keys.split(",")]
        paths = {}
        for k in counts:
            paths[k] = os.path.join(tmp, f"keys{k}.jsonl")
            write_events(paths[k], n, k)
        configs = [(k, "") for k in counts]
        times: dict[tuple[int, str], list[float]] = {c: [] for c in configs}
        cpu: dict[tuple[int, str], list[float]] = {c: [] for c in configs}
        snaps: dict[tuple[int, str], int] = {}
        for _ in range(args.repeats):  # interleaved rounds
            for k, variant in configs:
                t0, c0 = time.perf_counter(), time.process_time()
                events, snaps[k, variant] = replay(paths[k])
                times[k, variant].append(time.perf_counter() - t0)
                cpu[k, variant].append(time.process_time() - c0)
                assert events == n, (events, n)
    base_cfg = configs[0]
    t_base = min(times[base_cfg])
    print(f"{n:,} binary events over {DURATION:.0f} s of event time (60 s windows), "
          f"best of {args.repeats} interleaved rounds")
    c_base = min(cpu[base_cfg])
    print(f"{'keys':>7} {'variant':<26} {'ev/key/window':>13} {'snapshots':>10} {'events/s':>11} {'ratio':>6} "
          f"{'us/snapshot*':>13} {'spread':>7} {'ev/CPU-s':>11} {'ratio':>6} {'CPU us/snap*':>13}")
    for k, variant in configs:
        best = min(times[k, variant])
        extra = snaps[k, variant] - snaps[base_cfg]
        per_snap = (best - t_base) / extra * 1e6 if extra > 0 else 0.0
        spread = max(times[k, variant]) / best - 1.0
        c_best = min(cpu[k, variant])
        c_snap = (c_best - c_base) / extra * 1e6 if extra > 0 else 0.0
        print(f"{k:>7,} {variant or 'replay':<26} {n / k / (DURATION / 60):>13,.0f} {snaps[k, variant]:>10,} "
              f"{n / best:>11,.0f} {t_base / best:>6.3f} {per_snap:>13.0f} {spread:>6.0%} "
              f"{n / c_best:>11,.0f} {c_base / c_best:>6.3f} {c_snap:>13.0f}")
    print("ratio: to the first row's best; * extra time over the first row per extra snapshot; "
          "spread = slowest/best round - 1; CPU: this process's CPU time (time.process_time), which "
          "waiting for a core on a shared machine does not inflate")
    medians = {c: statistics.median(v) for c, v in times.items()}
    print("median-based ratios: " + ", ".join(
        f"{k:,} {v or 'replay'}: {medians[base_cfg] / medians[k, v]:.3f}" for k, v in configs))

if __name__ == "__main__":
    main()
