"""``MulticlassScores.update`` per event in its two regimes, and river, in one run.

* exact while small: a new accumulator every ``--window`` events (a fleet's small windows:
  the histograms hold exact scores);
* grid: one accumulator over the whole stream (past ``max_exact`` entries the scores go to
  the log grid, coarsened within ``max_bins``);
* river: ``CrossEntropy`` alone, and ``CrossEntropy`` plus one ``ROCAUC`` per class (OvR),
  the equivalent of what MulticlassScores keeps (issue 12 point 4's yardstick: ours at
  least as fast, i.e. a ratio >= 1).

Times are CPU time of this process (``time.process_time``): on a shared machine wall time
mostly measures waiting for a core.

    python benchmarks/bench_multiclass_fused.py [--events 100000] [--k 5] [--window 50] [--repeats 5]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import streammetrics as sm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--window", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n, k, window = args.events, args.k, args.window
    rng = np.random.default_rng(42)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    yl, pl = y.tolist(), p.tolist()
    pd_rows = [dict(enumerate(r)) for r in pl]
    classes = list(range(k))

    def windows() -> None:
        for lo in range(0, n, window):
            update = sm.MulticlassScores(classes).update
            for t, row in zip(yl[lo : lo + window], pl[lo : lo + window]):
                update(t, row)

    def grid() -> None:
        update = sm.MulticlassScores(classes).update
        for t, row in zip(yl, pl):
            update(t, row)

    def river_ce() -> None:
        from river import metrics

        m = metrics.CrossEntropy()
        for t, row in zip(yl, pd_rows):
            m.update(t, row)

    def river_equivalent() -> None:
        from river import metrics

        m = metrics.CrossEntropy()
        aucs = [metrics.ROCAUC() for _ in range(k)]
        for t, row in zip(yl, pd_rows):
            m.update(t, row)
            for c, auc in enumerate(aucs):
                p_c = row[c]
                auc.update(t == c, {True: p_c, False: 1.0 - p_c})

    grid_state = sm.MulticlassScores(classes)
    for t, row in zip(yl, pl):
        grid_state.update(t, row)
    print(f"{n:,} events, K={k}; one accumulator ends {'exact' if grid_state.exact else 'on the grid'} "
          f"(bins_per_octave {grid_state.bins_per_octave}); windows of {window} stay exact")
    runs = {f"update, windows of {window} (exact)": windows, "update, one stream (grid)": grid,
            "river CrossEntropy": river_ce, "river CrossEntropy + K x ROCAUC": river_equivalent}
    best = {name: math.inf for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t0)
    ref = best["river CrossEntropy + K x ROCAUC"]
    print(f"{'':<40} {'us/event':>9} {'river CE+AUCs / this':>21}")
    for name, t in best.items():
        print(f"{name:<40} {t / n * 1e6:>9.2f} {ref / t:>20.2f}x")


if __name__ == "__main__":
    main()
