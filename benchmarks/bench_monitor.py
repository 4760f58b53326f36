"""Per-event cost of a BinaryMonitor against river's metrics for the same events, in one run.

streammetrics: ``BinaryMonitor.update(event_dict)`` (parsing and validation included; the
common event is queued and applied in batches of ``update_queue_max`` by the parts'
``update_many``, the last ones by the read that ends the run) and ``update_event(Event)``
(pre-parsed, as the window engine calls it: event by event). river: ``Accuracy``,
``F1``, ``ROCAUC`` and ``LogLoss`` updated for each event (``ROCAUC`` at its defaults).

    python benchmarks/bench_monitor.py [--events N] [--repeats R] [--quick]

Target (issue 12 point 4): ``update(dict)`` >= 6x river's per-event cost (CPU time, same run).
The last line prints ``update(dict)``'s CPU speed-up against that target.
"""
from __future__ import annotations

import argparse
import time

from _targets import Target, print_targets  # (benchmarks/ is on sys.path)

from streammetrics.events.parser import EventParser
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.synthetic import generate_events


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def measure(argv: list[str] | None = None) -> list[Target]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
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
        assert m.count == len(events)  # (update queues events; this read applies the last ones)

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
    cpu = {name: float("inf") for name in runs}
    for _ in range(args.repeats):  # interleaved, so that load from elsewhere hits all alike
        for name, fn in runs.items():
            wall, used = timed(fn)
            times[name] = min(times[name], wall)
            cpu[name] = min(cpu[name], used)
    river_name = "river Accuracy+F1+ROCAUC+LogLoss .update"
    print(f"{n:,} binary events, best of {args.repeats} interleaved rounds "
          "(CPU: this process's time.process_time, which waiting for a core does not inflate)")
    print(f"{'':<50} {'us/event':>9} {'speed-up vs river':>18} {'CPU us/event':>13} {'CPU speed-up':>13}")
    for name in runs:
        t, c = times[name], cpu[name]
        print(f"{name:<50} {t / n * 1e6:>9.2f} {times[river_name] / t:>17.1f}x "
              f"{c / n * 1e6:>13.2f} {cpu[river_name] / c:>12.1f}x")
    ratio = cpu[river_name] / cpu["streammetrics BinaryMonitor.update(dict)"]
    print(f"update(dict) CPU speed-up {ratio:.2f}x (target 6x: {'met' if ratio >= 6 else 'not met'})")
    return [Target("bench_monitor", "BinaryMonitor.update(dict) CPU / river Accuracy+F1+ROCAUC+LogLoss", 6.0, ratio,
                   note="smoke size" if args.quick else "")]


def targets(quick: bool) -> list[Target]:
    return measure(["--quick", "--repeats", "2"] if quick else [])


def main() -> None:
    print_targets(measure())


if __name__ == "__main__":
    main()
