"""Delayed labels: the pending store's memory at 1M and 10M pending predictions, and replay
with delayed labels against the same events with inline labels (same run).

    python benchmarks/bench_labels.py [--pending 1000000,10000000] [--events 200000] [--skip-replay]
    python benchmarks/bench_labels.py --paths [--events 200000] [--repeats 3]
    python benchmarks/bench_labels.py --write-example streammetrics/data   # the README's example files

**Pending store.** Each size runs in a fresh process (so the numbers do not mix): it puts N
binary predictions (36-character uuid-like ids, one every 10 ms of event time) into a
``PendingStore`` with the default memory budget, then reports the put rate, the process RSS
(``VmRSS``) and its peak (``ru_maxrss``), the spill file's size, and the cost of a
``take(id)`` on a spilled record. The baseline is the same process before any put.

**Replay.** ``synthetic`` binary events (60 s windows); the *inline* file has ``y_true`` in
each prediction; the *delayed* pair has the predictions without ``y_true`` and a labels file
(every prediction labelled 1-30 minutes later, in label-time order), replayed with
``--labels`` and a 1 h ``--label-ttl``. Both runs go through the CLI entry point in-process
and write to /dev/null; the best of ``--repeats`` runs is kept.

**Paths** (``--paths``): issue 24's delayed-label ratio alone, on ``bench_paths.py``'s files
and arguments (20 keys, 60 s windows, dense 1,000 and sparse 25 events per key and window):
CPU seconds (``time.process_time``) of ``replay PREDICTIONS --labels LABELS`` over those of the
default binary path on the same events, best of ``--repeats`` interleaved rounds (target <= 2.5).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

STORE_PROBE = r"""
import os, resource, sys, time
from streammetrics.events.parser import Event
from streammetrics.stream.pending import PendingStore

def rss_mib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

n = int(sys.argv[1])
base = rss_mib()
store = PendingStore()
t0 = time.perf_counter()
for i in range(n):
    store.put(Event(1.7e9 + i * 0.01, "fraud-v3", "eu", None, (i % 1000) / 1000, None, None, 1.0,
                    f"{i:08x}-0000-4000-8000-{i * 7919 % 16**12:012x}"))
put_s = time.perf_counter() - t0
rss = rss_mib()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
db = os.path.join(store._tmpdir, "pending.sqlite") if store._tmpdir else None
size = os.path.getsize(db) / 2**20 if db else 0.0
t0 = time.perf_counter()
k = 0
for i in range(0, n, max(n // 2000, 1)):
    k += len(store.take(f"{i:08x}-0000-4000-8000-{i * 7919 % 16**12:012x}"))
take_us = (time.perf_counter() - t0) / max(k, 1) * 1e6
print(n, put_s, base, rss, peak, size, store.on_disk, take_us)
store.close()
"""


def store_rss(n: int) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", STORE_PROBE, str(n)], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    n_, put_s, base, rss, peak, size, disk, take_us = out
    print(f"pending {int(n_):>11,}: put {int(n_) / float(put_s):>9,.0f}/s ({float(put_s):.0f} s), "
          f"RSS {float(rss):6.0f} MiB (peak {float(peak):.0f}, baseline {float(base):.0f}), "
          f"spill file {float(size):,.0f} MiB ({int(disk):,} rows), take(id) on disk {float(take_us):.0f} us")


def write_files(directory: str, n: int, seed: int = 7) -> tuple[str, str, str]:
    """inline.jsonl, predictions.jsonl (no y_true) and labels.jsonl (delays 1-30 min)."""
    from streammetrics.stream.synthetic import generate_events

    rng = random.Random(seed)
    inline, preds, labels = (os.path.join(directory, f) for f in ("inline.jsonl", "predictions.jsonl",
                                                                    "labels.jsonl"))
    pending_labels = []
    with open(inline, "w") as fi, open(preds, "w") as fp:
        for i, ev in enumerate(generate_events(n, seed=seed)):
            ev["id"] = f"p{i}"
            fi.write(json.dumps(ev) + "\n")
            y = ev.pop("y_true")
            fp.write(json.dumps(ev) + "\n")
            pending_labels.append((ev["ts"] + rng.uniform(60, 1800), f"p{i}", y))
    pending_labels.sort()
    with open(labels, "w") as fl:
        for ts, ident, y in pending_labels:
            fl.write(json.dumps({"id": ident, "y_true": y, "ts": ts}) + "\n")
    return inline, preds, labels


def write_example(directory: str, n: int = 600, seed: int = 11) -> tuple[str, str]:
    """The README example (shipped in ``streammetrics/data``): ``n`` predictions over 10 minutes
    without ``y_true``, and their labels 1-12 minutes later in label-time order; 8% are never
    labelled, 3% labelled after 20 minutes (past the example's 15 minute TTL), and one label is
    sent twice."""
    from streammetrics.stream.synthetic import generate_events

    rng = random.Random(seed)
    preds = os.path.join(directory, "delayed_predictions.jsonl")
    labels = os.path.join(directory, "delayed_labels.jsonl")
    out = []
    with open(preds, "w") as fp:
        for ev in generate_events(n, seed=seed, duration=600.0):
            y = ev.pop("y_true")
            fp.write(json.dumps(ev, separators=(",", ":")) + "\n")
            u = rng.random()
            if u < 0.08:
                continue
            delay = rng.uniform(1200, 1500) if u < 0.11 else rng.uniform(60, 720)
            out.append((round(ev["ts"] + delay, 3), ev["id"], y))
    out.append((out[len(out) // 2][0] + 1, out[len(out) // 2][1], 1 - out[len(out) // 2][2]))  # a duplicate
    out.sort()
    with open(labels, "w") as fl:
        for ts, ident, y in out:
            fl.write(json.dumps({"id": ident, "y_true": y, "ts": ts}, separators=(",", ":")) + "\n")
    return preds, labels


def timed(argv: list[str], repeats: int) -> float:
    from streammetrics.cli import main

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        code = main(argv)
        best = min(best, time.perf_counter() - t0)
        if code:
            raise SystemExit(f"replay failed: {argv}")
    return best


def replay_compare(n: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        inline, preds, labels = write_files(d, n)
        t_inline = timed(["replay", inline, "--output", os.devnull, "--quiet"], repeats)
        t_delayed = timed(["replay", preds, "--labels", labels, "--label-ttl", "1h", "--output", os.devnull,
                           "--quiet"], repeats)
    print(f"replay {n:,} predictions: inline labels {n / t_inline:,.0f} events/s ({t_inline:.2f} s); "
          f"delayed labels {2 * n / t_delayed:,.0f} events/s counting labels, {n / t_delayed:,.0f} "
          f"predictions/s ({t_delayed:.2f} s, {t_delayed / t_inline:.1f}x)")


def paths_compare(n: int, repeats: int) -> None:
    """bench_paths' delayed-label ratio at both densities (module docstring)."""
    import contextlib
    import gc
    import io
    from pathlib import Path

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_paths import DENSITIES, build_files

    from streammetrics.cli import main as cli_main

    with tempfile.TemporaryDirectory() as d:
        for density, per_window in DENSITIES.items():
            sub = Path(d) / density
            sub.mkdir()
            args = build_files(sub, n, per_window)
            runs = {"default": args["default"], "delayed labels": args["delayed labels"]}
            best = {name: float("inf") for name in runs}
            for _ in range(repeats):
                for name, argv in runs.items():
                    gc.collect()
                    t0 = time.process_time()
                    with contextlib.redirect_stderr(io.StringIO()):
                        if cli_main(["replay", *argv]):
                            raise SystemExit(f"replay failed: {argv}")
                    best[name] = min(best[name], time.process_time() - t0)
            ratio = best["delayed labels"] / best["default"]
            print(f"{density:6s} {n:,} predictions: default {best['default']:.3f} s, delayed labels "
                  f"{best['delayed labels']:.3f} s CPU: {ratio:.2f}x (target <= 2.5)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pending", default="1000000,10000000", help="comma-separated store sizes")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--skip-store", action="store_true")
    ap.add_argument("--paths", action="store_true", help="only bench_paths' delayed-label ratio (dense, sparse)")
    ap.add_argument("--write-example", metavar="DIR", help="only write the README example files into DIR")
    args = ap.parse_args()
    if args.write_example:
        print(*write_example(args.write_example))
        return
    if args.paths:
        paths_compare(args.events, max(args.repeats, 1))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    if not args.skip_store:
        for n in (int(float(x)) for x in args.pending.split(",") if x):
            store_rss(n)
    if not args.skip_replay:
        replay_compare(args.events, args.repeats)


if __name__ == "__main__":
    main()
