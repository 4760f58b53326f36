"""``streammetrics replay`` throughput against a bare ``json.loads`` loop over the same
JSONL file, in one run; and the replay's peak memory for two stream lengths.

    python benchmarks/bench_replay.py [--events 1000000] [--quick]

The bare loop reads the file in binary line by line and decodes each line, with the decoder
replay uses (msgspec's ``msgspec.json.Decoder().decode`` when the ``fast`` extra is
installed) and with ``json.loads``; replay does that plus parsing, windowing (60 s tumbling
windows, three keys, a million events an hour of event time) and every binary metric, and
writes the snapshots (to /dev/null here). With msgspec installed replay also runs with it
turned off (json only). Each ratio is to the bare loop with the same decoder; the rounds
interleave the readers; rates on the wall clock and per CPU-second of this process (on a
shared machine the wall clock mostly measures waiting for a core).
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


def bare_loop(path: str, loads=json.loads) -> int:
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            loads(line)
            n += 1
    return n


def replay(path: str, json_only: bool = False) -> int:
    pipe = Pipeline(PipelineConfig(window=60.0, fast_json=not json_only))
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


def timed(fns: dict, path: str, repeats: int) -> dict[str, tuple[float, int, float]]:
    """Best wall time, event count and best CPU time of each reader, rounds interleaved."""
    best = {name: (float("inf"), 0, float("inf")) for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            n = fn(path)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            best[name] = (min(best[name][0], wall), n, min(best[name][2], cpu))
    return best


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
        fast_decode = EventParser("binary").fast_decode
        msgspec_bare = "bare loop: msgspec decode per line"
        json_bare = "bare loop: json.loads per line"
        inline_name = "inline: parse_value + WindowManager.add"
        loop_name = "same loop, Pipeline.process per message"
        replay_name = "streammetrics replay (binary, 60s)" + ("" if fast_decode else ", json only")
        fns = {json_bare: bare_loop}
        if fast_decode is not None:
            fns = {msgspec_bare: lambda p: bare_loop(p, fast_decode), **fns}
        fns[inline_name] = inline
        fns[loop_name] = pipeline_loop
        fns[replay_name] = replay
        if fast_decode is not None:
            fns["same, msgspec turned off (json only)"] = replay_json_only
        best = timed(fns, path, args.repeats)
        assert all(n_read == n for _, n_read, _ in best.values()), best
        peak_small, peak_large = peak_kib(small), peak_kib(path)
    base = msgspec_bare if fast_decode is not None else json_bare
    print(f"{n:,} events, {size / 2**20:.0f} MiB of JSONL, best of {args.repeats} interleaved rounds")
    print(f"{'':<42} {'events/s':>12} {'ratio':>7} {'ev/CPU-s':>12} {'ratio':>7}  "
          "(ratio: to the bare loop with the same decoder)")
    for name, (t, _, c) in best.items():
        same = json_bare if "json" in name else base
        print(f"{name:<42} {n / t:>12,.0f} {best[same][0] / t:>7.2f} {n / c:>12,.0f} {best[same][2] / c:>7.2f}")
    print(f"Pipeline.process / inline time: {best[loop_name][0] / best[inline_name][0]:.3f}")
    print(f"peak RSS of `streammetrics replay`: {peak_small / 1024:.0f} MiB for {n // 10:,} events, "
          f"{peak_large / 1024:.0f} MiB for {n:,} events")


if __name__ == "__main__":
    main()
