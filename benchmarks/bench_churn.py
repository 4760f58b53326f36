"""Memory over churning keys: every event has a new (model, segment) key, as when model
versions or segments come and go. Keys whose windows have all closed (as the stream's
watermark passes them; evicted at the poll every 1,000 events) are evicted, and the memory
of evicted keys is bounded by ``max_keys``, so RSS stays flat however many keys pass.

    python benchmarks/bench_churn.py [--keys 1000000] [--max-keys 100000]

Keys arrive over event time (ten a second, one event each, 60 s windows), so the keys forgotten
past ``max_keys`` closed their windows long before new keys' events: every event is applied
(the ``applied`` column). Prints RSS after 10k, 100k and 1M keys (binary task, a real
``BinaryMonitor`` per key; its per-window snapshot dominates the run time: ~1-5 ms a key here).
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import time

from streammetrics.events.parser import Event
from streammetrics.monitors import BinaryMonitor
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
    wm = WindowManager(BinaryMonitor, 60, batch=True, max_keys=args.max_keys, max_future=None)
    start = 1_767_225_600.0
    marks = sorted({k for k in (10_000, 100_000, 1_000_000, args.keys) if k <= args.keys})
    print(f"{'keys':>10} {'RSS MiB':>9} {'held':>8} {'evicted':>10} {'applied':>10} {'s':>7}")
    t0 = time.perf_counter()
    applied = 0
    for i in range(args.keys):
        applied += wm.add(Event(start + i * 0.1, f"model-{i}", "", i & 1, (i % 97) / 97))
        if i % 1000 == 999:  # keys close as the stream's watermark passes their window
            wm.poll()
        if i + 1 in marks:
            gc.collect()
            print(f"{i + 1:>10,} {rss_mib():>9.1f} {wm.key_count:>8,} {wm.evicted:>10,} {applied:>10,} "
                  f"{time.perf_counter() - t0:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
