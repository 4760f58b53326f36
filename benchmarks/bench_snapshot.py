"""Per-snapshot cost of a BinaryMonitor window, part by part, in one run (issue 12).

For windows of 10, 100 and 1,000 events (scores rounded to 6 decimals, as the benchmarks'
streams): ``snapshot()`` (metrics), the same dict from
:func:`streammetrics.monitors.fast_snapshot.binary_snapshot` (plain floats), ``to_dict()``
(state encoding) and the canonical JSON line (``snapshot_line``) of the metrics and of the
state, plus the single metrics behind ``snapshot()``. Each figure is the best of
``--repeats`` rounds of ``--number`` calls.

    python benchmarks/bench_snapshot.py [--sizes 10,100,1000] [--repeats 5] [--number 200]
"""
from __future__ import annotations

import argparse
import random
import timeit

from streammetrics.monitors import BinaryMonitor, _quiet
from streammetrics.monitors.fast_snapshot import binary_snapshot
from streammetrics.stream.snapshots import snapshot_line


def window(n: int, seed: int = 1) -> BinaryMonitor:
    rng = random.Random(seed)
    m = BinaryMonitor()
    for _ in range(n):
        y = 1 if rng.random() < 0.3 else 0
        m.update({"y_true": y, "score": round(min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.0), 1.0), 6)})
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--number", type=int, default=200)
    args = ap.parse_args()

    def us(fn) -> float:
        return min(timeit.repeat(fn, number=args.number, repeat=args.repeats)) / args.number * 1e6

    sizes = [int(s) for s in args.sizes.split(",")]
    monitors = {n: window(n) for n in sizes}
    rows: dict[str, dict[int, float]] = {}
    for n, m in monitors.items():
        metrics, state = m.snapshot(), m.to_dict()
        cm, sc = m.confusion, m.scores
        parts = {
            "snapshot() today": m.snapshot,
            "binary_snapshot() (kernels.counts + ranking_small)": lambda m=m: binary_snapshot(m),
            "to_dict() (state encoding)": m.to_dict,
            "snapshot_line(metrics)": lambda metrics=metrics: snapshot_line(metrics),
            "snapshot_line(state)": lambda state=state: snapshot_line(state),
            "  of which: 7 ConfusionMatrix metrics": lambda cm=cm: [
                _quiet(getattr(cm, f)) for f in ("accuracy", "balanced_accuracy", "precision", "recall",
                                                 "f1", "specificity", "matthews_corrcoef")],
            "  of which: roc_auc + roc_auc_bounds + AP": lambda sc=sc: (
                _quiet(sc.roc_auc), sc.roc_auc_bounds(), _quiet(sc.average_precision)),
            "  of which: BinaryScores._levels() (arrays from dicts)": sc._levels,
        }
        for name, fn in parts.items():
            rows.setdefault(name, {})[n] = us(fn)
        rows.setdefault("state JSON bytes", {})[n] = len(snapshot_line(state))
        rows.setdefault("histogram levels", {})[n] = len(sc._neg.weights.keys() | sc._pos.weights.keys())
    print(f"BinaryMonitor window, us per call (best of {args.repeats} x {args.number})")
    print(f"{'':<56}" + "".join(f"{f'{n:,} events':>14}" for n in sizes))
    for name, vals in rows.items():
        print(f"{name:<56}" + "".join(f"{vals[n]:>14,.1f}" for n in sizes))
    for n in sizes:
        before = rows["snapshot() today"][n] + rows["to_dict() (state encoding)"][n] + \
            rows["snapshot_line(metrics)"][n] + rows["snapshot_line(state)"][n]
        after = before - rows["snapshot() today"][n] + rows["binary_snapshot() (kernels.counts + ranking_small)"][n]
        print(f"{n:>5} events: metrics+state+JSON {before:,.0f} us -> {after:,.0f} us with binary_snapshot "
              f"({before / after:.1f}x)")


if __name__ == "__main__":
    main()
