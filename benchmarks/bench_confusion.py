"""Benchmark: ConfusionMatrix per-event and batch updates against river and scikit-learn.

    python benchmarks/bench_confusion.py [--quick] [--repeat N]

* per event: ``streammetrics.ConfusionMatrix.update`` vs ``river.metrics.ConfusionMatrix.update``
  on the same 5-class stream (Python ints), one event per call;
* batch: ``ConfusionMatrix.update_many`` on int arrays (unit and float weights) and on
  string labels, and ``sklearn.metrics.confusion_matrix`` on the same arrays, for reference.

Each timing is the best of ``--repeat`` runs (the machine is shared). Targets: per event at
least as fast as river; ``update_many`` >= 20 million events/s on int labels.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _targets import Target, print_targets  # (benchmarks/ is on sys.path)

import streammetrics as sm


def best_of(repeat: int, fn) -> float:
    return interleaved(repeat, fn)[0]


def interleaved(repeat: int, *fns) -> list[float]:
    """Best time of each function over ``repeat`` rounds, running them in turn within a
    round so that load from other processes hits all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def measure(argv=None) -> list[Target]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per timing (best is kept)")
    args = parser.parse_args(argv)
    n_events = 50_000 if args.quick else 1_000_000
    n_batch = 200_000 if args.quick else 2_000_000
    repeat = args.repeat or (2 if args.quick else 5)

    rng = np.random.default_rng(42)
    truth = rng.integers(0, 5, n_events)
    noise = rng.random(n_events) < 0.3
    pred = np.where(noise, rng.integers(0, 5, n_events), truth)
    yt, yp = truth.tolist(), pred.tolist()

    rows: list[tuple[str, str, int, float]] = []

    # ------------------------------------------------------------------ per event
    def ours_events():
        cm = sm.ConfusionMatrix()
        update = cm.update
        for t, p in zip(yt, yp):
            update(t, p)
        return cm


    try:
        from river.metrics import ConfusionMatrix as RiverCM
    except ImportError:  # pragma: no cover - river is a benchmark extra
        RiverCM = None
        print("river not installed: skipping its per-event timing")

    def river_events():
        cm = RiverCM()
        update = cm.update
        for t, p in zip(yt, yp):
            update(t, p)
        return cm

    if RiverCM is None:
        t_ours, t_river = best_of(repeat, ours_events), None
    else:
        t_ours, t_river = interleaved(repeat, ours_events, river_events)
        ours, theirs = ours_events(), river_events()
        assert all(ours.counts().get((t, p), 0.0) == theirs[t][p] for t in range(5) for p in range(5))
    rows.append(("per event", "streammetrics ConfusionMatrix.update", n_events, t_ours))
    if t_river is not None:
        rows.append(("per event", "river ConfusionMatrix.update", n_events, t_river))

    def ours_events_weighted():
        cm = sm.ConfusionMatrix()
        update = cm.update
        for t, p in zip(yt, yp):
            update(t, p, 1.0)
        return cm

    rows.append(("per event", "streammetrics update, explicit weight=1.0", n_events,
                 best_of(repeat, ours_events_weighted)))

    def ours_events_fixed():
        cm = sm.ConfusionMatrix(labels=[0, 1, 2, 3, 4])
        update = cm.update
        for t, p in zip(yt, yp):
            update(t, p)
        return cm

    rows.append(("per event", "streammetrics update, fixed labels=[0..4]", n_events,
                 best_of(repeat, ours_events_fixed)))

    # ---------------------------------------------------------------------- batch
    bt = rng.integers(0, 5, n_batch)
    bp = np.where(rng.random(n_batch) < 0.3, rng.integers(0, 5, n_batch), bt)
    bw = rng.random(n_batch)
    st, sp = np.array(["cat", "dog", "eel", "fox", "gnu"])[bt], np.array(["cat", "dog", "eel", "fox", "gnu"])[bp]

    t_many = best_of(repeat, lambda: sm.ConfusionMatrix().update_many(bt, bp))
    rows.append(("batch", "streammetrics update_many (int labels)", n_batch, t_many))
    t_many_w = best_of(repeat, lambda: sm.ConfusionMatrix().update_many(bt, bp, bw))
    rows.append(("batch", "streammetrics update_many (int, float weights)", n_batch, t_many_w))
    t_many_s = best_of(max(1, repeat // 2), lambda: sm.ConfusionMatrix().update_many(st, sp))
    rows.append(("batch", "streammetrics update_many (str labels)", n_batch, t_many_s))

    t_sk = None
    try:
        from sklearn.metrics import confusion_matrix
    except ImportError:  # pragma: no cover
        print("scikit-learn not installed: skipping its batch timing")
    else:
        t_sk = best_of(repeat, lambda: confusion_matrix(bt, bp))
        rows.append(("batch", "sklearn confusion_matrix (int labels)", n_batch, t_sk))
        t_sk_w = best_of(repeat, lambda: confusion_matrix(bt, bp, sample_weight=bw))
        rows.append(("batch", "sklearn confusion_matrix (int, float weights)", n_batch, t_sk_w))
        assert np.array_equal(sm.ConfusionMatrix().update_many(bt, bp).matrix(), confusion_matrix(bt, bp))

    # ---------------------------------------------------------------------- report
    print(f"\nConfusionMatrix benchmark (best of {repeat}; 5 classes)\n")
    print(f"{'kind':<10} {'implementation':<48} {'events':>10} {'seconds':>9} {'events/s':>14}")
    for kind, name, n, secs in rows:
        print(f"{kind:<10} {name:<48} {n:>10,} {secs:>9.4f} {n / secs:>14,.0f}")
    print()
    if t_river is not None:
        print(f"per event: streammetrics is {t_river / t_ours:.2f}x river's speed "
              f"(target >= 1.00x) -> {'OK' if t_ours <= t_river else 'MISSED'}")
    rate = n_batch / t_many
    print(f"update_many (int labels): {rate / 1e6:.1f} M events/s "
          f"(target >= 20 M/s) -> {'OK' if rate >= 20e6 else 'MISSED'}")
    if t_sk is not None:
        print(f"update_many vs sklearn confusion_matrix: {t_sk / t_many:.1f}x faster")
    note = "smoke size" if args.quick else ""
    out = [Target("bench_confusion", "update_many M events/s (int labels)", 20.0, rate / 1e6, note=note,
                  absolute=True)]
    if t_river is not None:
        out.insert(0, Target("bench_confusion", "per-event update / river ConfusionMatrix", 1.0, t_river / t_ours,
                             note=note))
    return out


def targets(quick: bool) -> list[Target]:
    return measure(["--quick"] if quick else [])


def main(argv=None) -> None:
    print_targets(measure(argv))


if __name__ == "__main__":
    main()
