"""Memory over churning keys: every event has a new (model, segment) key, as when model
versions or segments come and go. Keys whose windows have all closed (here: idle close
after 1 s of an injected processing clock, every 1,000 events) are evicted, and the memory
of evicted keys is bounded by ``max_keys``, so RSS stays flat however many keys pass.

    python benchmarks/bench_churn.py [--keys 1000000] [--max-keys 100000]

Prints RSS after 100k keys and at the end (binary task, real ``BinaryMonitor`` per key).
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import time

from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.events import Event
from streammetrics.stream.windows import WindowManager


def rss_mib() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux: peak RSS instead
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--max-keys", type=int, default=100_000)
    args = ap.parse_args()
    now = [0.0]
    wm = WindowManager(BinaryMonitor, 60, idle_close=1, clock=lambda: now[0], batch=True,
                       max_keys=args.max_keys, max_future=None)
    start = 1_767_225_600.0
    marks = sorted({k for k in (10_000, 100_000, 1_000_000, args.keys) if k <= args.keys})
    print(f"{'keys':>10} {'RSS MiB':>9} {'held':>8} {'evicted':>10} {'s':>7}")
    t0 = time.perf_counter()
    for i in range(args.keys):
        wm.add(Event(start + i * 0.001, f"model-{i}", "", i & 1, (i % 97) / 97))
        if i % 1000 == 999:
            now[0] += 1
            wm.poll()
        if i + 1 in marks:
            gc.collect()
            print(f"{i + 1:>10,} {rss_mib():>9.1f} {wm.key_count:>8,} {wm.evicted:>10,} "
                  f"{time.perf_counter() - t0:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
