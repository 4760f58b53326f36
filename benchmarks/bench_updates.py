"""Update speed of BinaryScores vs river's ROCAUC (per event) and scikit-learn (batch).

* per event: ``BinaryScores.update(y, score)`` vs ``river.metrics.ROCAUC().update(y, score)``
  (default settings) on the same Python lists of a probability stream, rounds interleaved
  so that load from other processes on the machine hits both alike;
* batch: ``BinaryScores.update_many`` on 2M events (numpy arrays) in events/s, and
  ``update_many + roc_auc()`` vs ``sklearn.metrics.roc_auc_score`` on the same arrays,
  for a probability stream, a float32-saturated stream (many exact 0.0 / 1.0 scores)
  and a margin stream.

Each figure is the best of several rounds (the median is printed too); batch times are CPU
seconds of this process (``time.process_time``: other processes on a shared machine do not
count against either side).
Targets: per event >= 5x river's speed; update_many >= 50M events/s on 2M distinct probability
scores and ``update_many + roc_auc()`` >= 15x ``roc_auc_score`` in the same run (issue 24); on
the other streams, >= 50M events/s and faster than ``roc_auc_score``.

    python benchmarks/bench_updates.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _targets import Target, print_targets  # (benchmarks/ is on sys.path)
from river import metrics
from sklearn.metrics import roc_auc_score

import streammetrics as sm


def probability_stream(n: int, rng: np.random.Generator):
    y = rng.random(n) < 0.3
    z = np.where(y, 1.0, -1.0) + rng.normal(0.0, 3.0, n)
    return y, 1.0 / (1.0 + np.exp(-z))


def saturated_stream(n: int, rng: np.random.Generator):
    y = rng.random(n) < 0.5
    z = (np.where(y, 6.0, -6.0) + rng.normal(0.0, 10.0, n)).astype(np.float32)
    return y, (np.float32(1.0) / (np.float32(1.0) + np.exp(-z))).astype(np.float64)


def margin_stream(n: int, rng: np.random.Generator):
    y = rng.random(n) < 0.3
    return y, np.where(y, 1.5, -1.5) + rng.normal(0.0, 2.0, n)


def per_event(n: int, rounds: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(0)
    y, s = probability_stream(n, rng)
    ys, ss = y.tolist(), s.tolist()
    ours, theirs = [], []
    for _ in range(rounds):
        acc = sm.BinaryScores()
        update = acc.update
        t0 = time.perf_counter()
        for yi, si in zip(ys, ss):
            update(yi, si)
        ours.append((time.perf_counter() - t0) / n)
        river_auc = metrics.ROCAUC()
        update = river_auc.update
        t0 = time.perf_counter()
        for yi, si in zip(ys, ss):
            update(yi, si)
        theirs.append((time.perf_counter() - t0) / n)
    return ours, theirs


def batch(make, n: int, rounds: int) -> dict:
    rng = np.random.default_rng(1)
    y, s = make(n, rng)
    sm.BinaryScores().update_many(y[:1000], s[:1000])  # warm up imports and caches
    update, with_auc, sklearn = [], [], []
    for _ in range(rounds):
        acc = sm.BinaryScores()
        t0 = time.process_time()
        acc.update_many(y, s)
        t1 = time.process_time()
        auc = acc.roc_auc()
        t2 = time.process_time()
        exact = roc_auc_score(y, s)
        t3 = time.process_time()
        update.append(t1 - t0)
        with_auc.append(t2 - t0)
        sklearn.append(t3 - t2)
    return {"update": update, "with_auc": with_auc, "sklearn": sklearn,
            "error": abs(auc - exact), "bpo": acc.bins_per_octave}


def measure(quick: bool, verbose: bool = True) -> list[Target]:
    """Run the benchmark (``quick``: smoke sizes) and return its targets."""
    n_event = 20_000 if quick else 200_000
    n_batch = 200_000 if quick else 2_000_000
    rounds = 3 if quick else 7
    say = print if verbose else (lambda *a, **k: None)

    ours, theirs = per_event(n_event, rounds)
    say(f"per-event update, {n_event} events, {rounds} interleaved rounds (us/event)")
    say(f"{'':28s} {'best':>8s} {'median':>8s}")
    say(f"{'BinaryScores.update':28s} {min(ours) * 1e6:8.3f} {statistics.median(ours) * 1e6:8.3f}")
    say(f"{'river ROCAUC.update':28s} {min(theirs) * 1e6:8.3f} {statistics.median(theirs) * 1e6:8.3f}")
    per_event_ratio = min(theirs) / min(ours)
    say(f"speed-up vs river: {per_event_ratio:.1f}x (best), "
        f"{statistics.median(theirs) / statistics.median(ours):.1f}x (median)")
    say()

    say(f"batch, {n_batch} events, {rounds} rounds (best / median)")
    header = (f"{'stream':12s} {'update_many':>16s} {'M events/s':>11s} {'+ roc_auc()':>16s} "
              f"{'sklearn':>16s} {'speed-up':>8s} {'|error|':>9s} {'bins/oct':>8s}")
    say(header)
    say("-" * len(header))
    rates, ratios = {}, {}
    for name, make in (("probability", probability_stream), ("saturated32", saturated_stream),
                       ("margins", margin_stream)):
        r = batch(make, n_batch, rounds)
        rates[name] = rate = n_batch / min(r["update"]) / 1e6
        ratios[name] = ratio = min(r["sklearn"]) / min(r["with_auc"])
        say(
            f"{name:12s} {min(r['update']) * 1e3:7.1f} /{statistics.median(r['update']) * 1e3:6.1f} ms "
            f"{rate:11.1f} {min(r['with_auc']) * 1e3:7.1f} /{statistics.median(r['with_auc']) * 1e3:6.1f} ms "
            f"{min(r['sklearn']) * 1e3:7.1f} /{statistics.median(r['sklearn']) * 1e3:6.1f} ms "
            f"{ratio:7.1f}x {r['error']:9.1e} {r['bpo']:8d}"
        )
    say()
    size = f"{n_batch // 1000}k" if n_batch < 1_000_000 else f"{n_batch // 1_000_000}M"
    note = "smoke size: fixed costs weigh more" if quick else ""
    return [
        Target("bench_updates", "per-event update / river ROCAUC", 5.0, per_event_ratio, note=note),
        Target("bench_updates", f"update_many M events/s, {size} distinct probability scores", 50.0,
               rates["probability"], note=note, absolute=True),
        Target("bench_updates", f"update_many + roc_auc() / roc_auc_score, {size} probabilities", 15.0,
               ratios["probability"], note=note),
        Target("bench_updates", "update_many M events/s, slowest stream (float32-saturated, margins)", 50.0,
               min(rates.values()), note=note, absolute=True),
        Target("bench_updates", "update_many + roc_auc() / roc_auc_score, slowest stream", 1.0,
               min(ratios.values()), note=note),
    ]


def targets(quick: bool) -> list[Target]:
    return measure(quick, verbose=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    args = parser.parse_args()
    print_targets(measure(args.quick))


if __name__ == "__main__":
    main()
