"""Per-event cost of a BinaryMonitor against river's metrics for the same events, in one run.

streammetrics: ``BinaryMonitor.update(event_dict)`` (parsing and validation included) and
``update_event(Event)`` (pre-parsed, as the window engine calls it). river: ``Accuracy``,
``F1``, ``ROCAUC`` and ``LogLoss`` updated for each event (``ROCAUC`` at its defaults).

    python benchmarks/bench_monitor.py [--events N] [--quick]
"""
from __future__ import annotations

import argparse
import time

from streammetrics.events.parser import EventParser
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.synthetic import generate_events


def best_of(repeats: int, fn) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 20_000 if args.quick else args.events
    from river import metrics as rm

    events = list(generate_events(n, seed=1))
    parser = EventParser("binary")
    parsed = [parser.parse(e) for e in events]
    pairs = [(bool(e["y_true"]), e["score"]) for e in events]

    def ours_dict() -> None:
        m = BinaryMonitor()
        update = m.update
        for e in events:
            update(e)

    def ours_parsed() -> None:
        m = BinaryMonitor()
        update = m.update_event
        for e in parsed:
            update(e)

    def river() -> None:
        acc, f1, auc, ll = rm.Accuracy(), rm.F1(), rm.ROCAUC(), rm.LogLoss()
        for y, p in pairs:
            pred = p >= 0.5
            acc.update(y, pred)
            f1.update(y, pred)
            auc.update(y, {True: p, False: 1.0 - p})
            ll.update(y, p)

    runs = {
        "streammetrics BinaryMonitor.update(dict)": ours_dict,
        "streammetrics BinaryMonitor.update_event(Event)": ours_parsed,
        "river Accuracy+F1+ROCAUC+LogLoss .update": river,
    }
    times = {name: float("inf") for name in runs}
    for _ in range(args.repeats):  # interleaved, so that load from elsewhere hits all alike
        for name, fn in runs.items():
            times[name] = min(times[name], best_of(1, fn))
    rows = list(times.items())
    river_t = rows[-1][1]
    print(f"{n:,} binary events, best of {args.repeats} interleaved rounds")
    print(f"{'':<50} {'us/event':>9} {'speed-up vs river':>18}")
    for name, t in rows:
        print(f"{name:<50} {t / n * 1e6:>9.2f} {river_t / t:>17.1f}x")


if __name__ == "__main__":
    main()
