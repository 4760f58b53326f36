"""Benchmark: MulticlassScores and MultilabelScores speed, accuracy of the default bins, state size.

    python benchmarks/bench_multiclass.py [--quick] [--repeat N]

* per event: ``MulticlassScores.update`` (K = 5 and 50, probability rows as lists) next to
  river's ``CrossEntropy.update`` (dict rows) and river's equivalent of what it keeps,
  CrossEntropy plus one ``ROCAUC`` per class (one-vs-rest; river has no multiclass AUC),
  interleaved, in CPU time, with the ratio (issue 12 point 4: at least 1);
* state size: a MulticlassMonitor's JSON state after 10,000 events, K = 2 ... 200;
* batch: ``MulticlassScores.update_many`` and ``MultilabelScores.update_many`` throughput,
  and ``sklearn.metrics.roc_auc_score`` (OvR and OvO) on the same arrays for reference;
* accuracy: default-bins ROC AUC (OvR macro/weighted, OvO, micro; multilabel macro/micro)
  against scikit-learn's exact value, the guaranteed bounds, and the JSON state size.

Each timing is the best of ``--repeat`` runs (the machine is shared; per-event timings are
CPU time of this process, ``time.process_time``).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _targets import Target  # (benchmarks/ is on sys.path)
from sklearn import metrics as skm

import streammetrics as sm


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def softmax_stream(rng, n: int, k: int, signal: float = 1.5):
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + signal * np.eye(k)[y]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return y, p / p.sum(axis=1, keepdims=True)


def per_event(rng, k: int, n_events: int, repeat: int) -> float | None:
    """CPU time per event of MulticlassScores.update and river's equivalent, interleaved,
    and their ratio (river's time / ours: above 1 means ours is faster)."""
    y, p = softmax_stream(rng, n_events, k)
    yl, pl = y.tolist(), p.tolist()
    pd_rows = [dict(enumerate(r)) for r in pl]

    def ours_events():
        acc = sm.MulticlassScores(list(range(k)))
        update = acc.update
        for t, row in zip(yl, pl):
            update(t, row)

    def river_events():
        from river import metrics

        m = metrics.CrossEntropy()
        for t, row in zip(yl, pd_rows):
            m.update(t, row)

    def river_equivalent():
        """CrossEntropy plus one-vs-rest ROCAUC per class: river's closest equivalent of
        what MulticlassScores keeps (log loss and OvR AUC)."""
        from river import metrics

        m = metrics.CrossEntropy()
        aucs = [metrics.ROCAUC() for _ in range(k)]
        for t, row in zip(yl, pd_rows):
            m.update(t, row)
            for c, auc in enumerate(aucs):
                p_c = row[c]
                auc.update(t == c, {True: p_c, False: 1.0 - p_c})

    print(f"per event, K={k}, {n_events} events, CPU time, best of {repeat} interleaved rounds")
    try:
        import river  # noqa: F401

        runs = {"MulticlassScores.update": ours_events, "river CrossEntropy.update": river_events,
                "river CrossEntropy + K x ROCAUC": river_equivalent}
    except ImportError:
        runs = {"MulticlassScores.update": ours_events}
        print("  river not installed")
    times = {name: float("inf") for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.process_time()
            fn()
            times[name] = min(times[name], time.process_time() - start)
    t_ours = times["MulticlassScores.update"]
    for name, t in times.items():
        print(f"  {name:<32} {1e6 * t / n_events:8.2f} us/event  {t / t_ours:6.2f}x ours' time")
    if "river CrossEntropy + K x ROCAUC" not in times:
        return None
    ratio = times["river CrossEntropy + K x ROCAUC"] / t_ours
    print(f"  ratio river CE + K x ROCAUC / MulticlassScores.update (CPU): {ratio:.2f} "
          f"({'ours faster' if ratio >= 1 else 'river faster'})")
    return ratio


def targets(quick: bool) -> list[Target]:
    """Issue 12 point 4: ``MulticlassScores.update`` per event at least as fast as river's
    CrossEntropy + K x ROCAUC (K=5 and K=50, CPU time)."""
    n_events = 20_000 if quick else 200_000
    repeat = 2 if quick else 3
    rng = np.random.default_rng(42)
    out = []
    for k, n in ((5, n_events), (50, n_events // 10)):
        ratio = per_event(rng, k, n, repeat)
        if ratio is None:
            raise ImportError("river is not installed")
        out.append(Target("bench_multiclass", f"MulticlassScores.update / river CE + K x ROCAUC, K={k} (CPU)", 1.0,
                          ratio, note="smoke size" if quick else ""))
    return out


def state_sizes(rng, n: int = 10_000) -> None:
    """JSON size of a MulticlassMonitor after n events of K classes (default budget)."""
    print(f"state size of a MulticlassMonitor after {n} events (default max_bins / max_exact)")
    for k in (2, 10, 50, 100, 200):
        y, p = softmax_stream(rng, n, k)
        mon = sm.MulticlassMonitor(list(range(k)))
        mon.update_many([{"y_true": int(t), "scores": row} for t, row in zip(y, p.tolist())])
        scores = mon.scores
        entries = sum(len(h) for h in scores._hist_list())
        obinning, sides = scores._ovr_view()
        ovr = sum(len(h) for side in sides for h in side)
        print(f"  K={k:3d}  monitor {len(json.dumps(mon.to_dict())) / 1024:6.1f} KiB, MulticlassScores "
              f"{len(json.dumps(scores.to_dict())) / 1024:6.1f} KiB: pair entries {entries:6d} "
              f"(bins_per_octave {scores.bins_per_octave}), one-vs-rest entries {ovr:6d} "
              f"(bins_per_octave {None if obinning.exact else obinning.per_octave})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per timing (best is kept)")
    args = parser.parse_args(argv)
    n_events = 20_000 if args.quick else 200_000
    n_batch = 100_000 if args.quick else 1_000_000
    repeat = args.repeat or (2 if args.quick else 3)
    rng = np.random.default_rng(42)
    k = 5

    # ------------------------------------------------------------------ per event
    for k_event, n_k in ((5, n_events), (50, n_events // 10)):
        per_event(rng, k_event, n_k, repeat)

    # ------------------------------------------------------------------ batches
    yb, pb = softmax_stream(rng, n_batch, k)
    t_many = best_of(repeat, lambda: sm.MulticlassScores(list(range(k))).update_many(yb, pb))
    t_ovr = best_of(1, lambda: skm.roc_auc_score(yb, pb, multi_class="ovr"))
    t_ovo = best_of(1, lambda: skm.roc_auc_score(yb, pb, multi_class="ovo"))
    print(f"batch, K={k}, {n_batch} events")
    print(f"  MulticlassScores.update_many   {n_batch / t_many / 1e6:7.2f} M events/s")
    print(f"  sklearn roc_auc_score ovr      {n_batch / t_ovr / 1e6:7.2f} M events/s")
    print(f"  sklearn roc_auc_score ovo      {n_batch / t_ovo / 1e6:7.2f} M events/s")
    n_labels = 10
    Y = (rng.random((n_batch // 4, n_labels)) < 0.3).astype(np.int8)
    S = np.clip(0.35 * Y + rng.random(Y.shape) * 0.65, 0.0, 1.0)
    t_ml = best_of(repeat, lambda: sm.MultilabelScores(n_labels).update_many(Y, S))
    print(f"  MultilabelScores.update_many   {len(Y) / t_ml / 1e6:7.2f} M events/s (L={n_labels})")

    state_sizes(rng, 2_000 if args.quick else 10_000)

    # ------------------------------------------------------------------ accuracy
    print("accuracy of the default bins (exact value from scikit-learn)")
    for kk in (3, 5, 10):
        yy, pp = softmax_stream(rng, n_batch, kk)
        acc = sm.MulticlassScores(list(range(kk))).update_many(yy, pp)
        size = len(json.dumps(acc.to_dict()))
        for mc, average in (("ovr", "macro"), ("ovr", "weighted"), ("ovr", "micro"), ("ovo", "macro")):
            exact = skm.roc_auc_score(yy, pp, multi_class=mc, average=average)
            low, high = acc.roc_auc_bounds(mc, average)
            value = acc.roc_auc(mc, average)
            print(f"  K={kk:2d} {mc}/{average:8s} exact {exact:.9f} ours {value:.9f} "
                  f"|err| {abs(value - exact):.1e} bounds [{low:.6f}, {high:.6f}] "
                  f"contains {low <= exact <= high}  state {size / 1024:7.1f} KiB")
    ml = sm.MultilabelScores(n_labels).update_many(Y, S)
    size = len(json.dumps(ml.to_dict()))
    for average in ("macro", "micro", "weighted"):
        exact = skm.roc_auc_score(Y, S, average=average)
        low, high = ml.roc_auc_bounds(average)
        value = ml.roc_auc(average)
        print(f"  multilabel L={n_labels} {average:8s} exact {exact:.9f} ours {value:.9f} "
              f"|err| {abs(value - exact):.1e} contains {low <= exact <= high}  state {size / 1024:7.1f} KiB")


if __name__ == "__main__":
    main()
