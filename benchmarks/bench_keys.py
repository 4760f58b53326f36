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
    python benchmarks/bench_keys.py --prototypes      # also the 10,000 keys with the prototypes

Target (issue 12): 10,000 keys at >= 0.4x the one-key rate (goal 0.5).

``BinaryMonitor.snapshot`` is :func:`streammetrics.monitors.fast_snapshot.binary_snapshot`
(plain floats) since this branch. ``--prototypes`` adds rows on the largest key count, same
run, same file: the monitor with ``update_events`` applying batches of at most 32 events one by
one instead of through numpy ("small batches per event"; windows drain ~10 events per pane at
10,000 keys), and that plus ``BinaryScores``/``ScoreDistribution`` encoding histograms of at
most 256 keys without numpy (:mod:`streammetrics.kernels.histogram_json`, "+ small state
encoding"; patched in for the run).
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
from typing import Any

from streammetrics.kernels.histogram import histograms_to_json
from streammetrics.kernels.histogram_json import SMALL_KEYS, small_histograms_to_json
from streammetrics.metrics import binary_scores, score_distribution
from streammetrics.monitors import BinaryMonitor
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


class SmallBatchMonitor(BinaryMonitor):
    """Prototype: small batches go through the per-event path (no numpy set-up)."""

    def update_events(self, events: Any) -> SmallBatchMonitor:
        if len(events) <= SMALL_BATCH:
            update = self.update_event
            for event in events:
                update(event)
            return self
        super().update_events(events)
        return self


def small_histograms_json(hists: Any, names: Any) -> dict[str, Any]:
    """Prototype: histograms of few keys encoded without numpy (identical dict)."""
    if sum(len(h.weights) for h in hists) <= SMALL_KEYS:
        return small_histograms_to_json([h.weights for h in hists], names, hists[0].binning.exact)
    return histograms_to_json(hists, names)


SMALL_BATCH = 32
VARIANTS: dict[str, Any] = {"": None, "small batches per event": SmallBatchMonitor,
                            "+ small state encoding": SmallBatchMonitor}


class VariantConfig(PipelineConfig):
    """The default configuration, with the monitor of a prototype variant."""

    variant = ""

    def monitor_factory(self) -> Any:
        return VARIANTS[self.variant] if self.variant else super().monitor_factory()


def replay(path: str, variant: str = "") -> tuple[int, int]:
    """One replay as ``streammetrics replay FILE --task binary`` runs it; (events, snapshots)."""
    config = VariantConfig(window=60.0)
    config.variant = variant
    pipeline = Pipeline(config)
    patched = (binary_scores, score_distribution) if variant == "+ small state encoding" else ()
    for module in patched:
        module.histograms_to_json = small_histograms_json  # type: ignore[attr-defined]  # prototype
    try:
        with open(path, "rb") as fh, open(os.devnull, "w") as sink, replay_gc():
            def write(line: str) -> None:
                sink.write(line)
                sink.write("\n")

            stats = replay_lines(fh, pipeline, write)
    finally:
        for module in patched:
            module.histograms_to_json = histograms_to_json  # type: ignore[attr-defined]
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
    ap.add_argument("--prototypes", action="store_true",
                    help="also time the prototypes (fast snapshot, small batches) on the largest key count")
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
        if args.prototypes:
            configs += [(counts[-1], v) for v in VARIANTS if v]
        times: dict[tuple[int, str], list[float]] = {c: [] for c in configs}
        cpu: dict[tuple[int, str], list[float]] = {c: [] for c in configs}
        snaps: dict[tuple[int, str], int] = {}
        for _ in range(args.repeats):  # interleaved rounds
            for k, variant in configs:
                t0, c0 = time.perf_counter(), time.process_time()
                events, snaps[k, variant] = replay(paths[k], variant)
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
        print(f"{k:>7,} {variant or 'today':<26} {n / k / (DURATION / 60):>13,.0f} {snaps[k, variant]:>10,} "
              f"{n / best:>11,.0f} {t_base / best:>6.3f} {per_snap:>13.0f} {spread:>6.0%} "
              f"{n / c_best:>11,.0f} {c_base / c_best:>6.3f} {c_snap:>13.0f}")
    print("ratio: to the first row's best; * extra time over the first row per extra snapshot; "
          "spread = slowest/best round - 1; CPU: this process's CPU time (time.process_time), which "
          "waiting for a core on a shared machine does not inflate")
    medians = {c: statistics.median(v) for c, v in times.items()}
    print("median-based ratios: " + ", ".join(
        f"{k:,} {v or 'today'}: {medians[base_cfg] / medians[k, v]:.3f}" for k, v in configs))

if __name__ == "__main__":
    main()
