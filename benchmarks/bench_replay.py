"""``streammetrics replay`` throughput against a bare ``json.loads`` loop over the same
JSONL file, in one run; and the replay's peak memory for two stream lengths.

    python benchmarks/bench_replay.py [--events 1000000] [--quick]

The bare loop reads the file in binary line by line and ``json.loads`` each line; replay
does that plus parsing, windowing (60 s tumbling windows, three keys, a million events an
hour of event time) and every binary metric, and writes the snapshots (to /dev/null here).
With msgspec installed (the ``fast`` extra) replay also runs with it turned off (json only).
"inline" is the per-message path the service and replay used before the pipeline
(``EventParser.parse_value`` + ``WindowManager.add``, single events inline), timed in the same
run as ``Pipeline.process`` so that the ratio shows what the pipeline layer costs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from streammetrics.events.parser import Event, EventParser
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.snapshots import snapshot_line
from streammetrics.stream.synthetic import generate_events, write_jsonl
from streammetrics.stream.windows import WindowManager

PEAK_PROBE = r"""
import resource, sys
from streammetrics.cli import main
main(["replay", sys.argv[1], "--output", "/dev/null", "--quiet"])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bare_loop(path: str) -> int:
    n = 0
    loads = json.loads
    with open(path, "rb") as fh:
        for line in fh:
            loads(line)
            n += 1
    return n


def replay(path: str, json_only: bool = False) -> int:
    pipe = Pipeline(PipelineConfig(window=60.0))
    if json_only:
        pipe._fast = None  # the pipeline's decoder: json only
    with open(path, "rb") as fh, open(os.devnull, "w") as sink:
        stats = replay_lines(fh, pipe, sink.write)
    return stats.events


def pipeline_loop(path: str) -> int:
    """The same loop as :func:`inline` with ``Pipeline.process`` per message (what the service runs)."""
    pipe = Pipeline(PipelineConfig(window=60.0))
    process = pipe.process
    with open(path, "rb") as fh, open(os.devnull, "w") as sink:
        for n, line in enumerate(fh, 1):
            process(line)
            if n & 0x3FF == 0:
                for snap in pipe.poll():
                    sink.write(snapshot_line(snap) + "\n")
        for snap in pipe.poll() + pipe.flush():
            sink.write(snapshot_line(snap) + "\n")
    return pipe.counters["events"]


def inline(path: str) -> int:
    """The pre-pipeline per-message path: parse_value, then add() the single event inline."""
    parser = EventParser("binary")
    windows = WindowManager(BinaryMonitor, 60, batch=True)
    parse_value, add = parser.parse_value, windows.add
    events = 0
    with open(path, "rb") as fh, open(os.devnull, "w") as sink:
        for n, line in enumerate(fh, 1):
            items = parse_value(line)
            if len(items) == 1 and items[0].__class__ is Event:
                if add(items[0]):
                    events += 1
            else:
                for item in items:
                    if item.__class__ is Event and add(item):
                        events += 1
            if n & 0x3FF == 0:
                sink.writelines(snapshot_line(snap) + "\n" for snap in windows.poll())
        sink.writelines(snapshot_line(snap) + "\n" for snap in windows.poll() + windows.flush())
    return events


def replay_json_only(path: str) -> int:
    return replay(path, json_only=True)


def timed(fn, path: str, repeats: int) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn(path)
        best = min(best, time.perf_counter() - t0)
    return best, n


def peak_kib(path: str) -> int:
    out = subprocess.run([sys.executable, "-c", PEAK_PROBE, path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 50_000 if args.quick else args.events
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events.jsonl")
        small = os.path.join(tmp, "small.jsonl")
        # a million events an hour (~280/s over three keys: ~1,500 events per key and window)
        rate = 1_000_000 / 3600
        write_jsonl(path, generate_events(n, duration=n / rate, seed=1))
        write_jsonl(small, generate_events(n // 10, duration=n / 10 / rate, seed=1))
        size = os.path.getsize(path)
        t_bare, n_bare = timed(bare_loop, path, args.repeats)
        t_inline, n_inline = timed(inline, path, args.repeats)
        t_loop, n_loop = timed(pipeline_loop, path, args.repeats)
        t_replay, n_replay = timed(replay, path, args.repeats)
        fast = EventParser("binary").fast_decode is not None
        t_json, n_json = timed(replay_json_only, path, args.repeats) if fast else (t_replay, n_replay)
        assert n_bare == n_replay == n_json == n_inline == n_loop == n
        peak_small, peak_large = peak_kib(small), peak_kib(path)
    print(f"{n:,} events, {size / 2**20:.0f} MiB of JSONL, best of {args.repeats}")
    print(f"{'':<42} {'events/s':>12} {'ratio':>7}")
    print(f"{'bare loop: json.loads per line':<42} {n / t_bare:>12,.0f} {1.0:>7.2f}")
    print(f"{'inline: parse_value + WindowManager.add':<42} {n / t_inline:>12,.0f} {t_bare / t_inline:>7.2f}")
    label = "streammetrics replay (binary, 60s)" + ("" if fast else ", json only")
    print(f"{label:<42} {n / t_replay:>12,.0f} {t_bare / t_replay:>7.2f}")
    print(f"{'same loop, Pipeline.process per message':<42} {n / t_loop:>12,.0f} {t_bare / t_loop:>7.2f}")
    print(f"Pipeline.process / inline time: {t_loop / t_inline:.3f}")
    if fast:
        print(f"{'same, msgspec turned off (json only)':<42} {n / t_json:>12,.0f} {t_bare / t_json:>7.2f}")
    print(f"peak RSS of `streammetrics replay`: {peak_small / 1024:.0f} MiB for {n // 10:,} events, "
          f"{peak_large / 1024:.0f} MiB for {n:,} events")


if __name__ == "__main__":
    main()
