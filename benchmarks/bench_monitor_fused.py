"""Where ``BinaryMonitor.update(event_dict)`` spends its time: the fused path against its parts.

``BinaryMonitor.update`` applies the common event (a dict without weight, ``y_true`` 0/1 or a
bool, a float score strictly inside (0, 1)) in one frame (``BinaryMonitor._unit_event``: the
score's histogram key computed once for the label-free and the label-based histograms, the
log-loss product, Brier sum and confusion cell inlined). Timed in interleaved rounds, best of
N, CPU time of this process (``time.process_time``): the monitor, what the three accumulators
cost when updated one by one as the monitor did before (``ScoreDistribution.update(s)``,
``BinaryScores.update(y, s)``, ``ConfusionMatrix.update(y, pred)``), a bare loop over the
dicts, and river's Accuracy+F1+ROCAUC+LogLoss (the issue's target: >= 6x river).
The fused path's state is checked equal to the separate accumulators' first.

    python benchmarks/bench_monitor_fused.py [--events 200000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import math
import time

from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.score_distribution import ScoreDistribution
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.synthetic import generate_events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n = args.events
    events = [{"y_true": e["y_true"], "score": e["score"]} for e in generate_events(n, seed=1)]
    pairs = [(e["y_true"], e["score"]) for e in events]
    preds = [(y, 1 if s >= 0.5 else 0) for y, s in pairs]

    # the fused path builds the state of the three accumulators updated one by one
    a, pr, sc, cm = BinaryMonitor(), ScoreDistribution(), BinaryScores(), ConfusionMatrix(labels=[0, 1])
    for e in events[:50_000]:
        a.update(e)
    for (y, s), (_, p) in zip(pairs[:50_000], preds[:50_000]):
        pr.update(s)
        sc.update(y, s)
        cm.update(y, p)
    assert a.to_dict()["state"] == {"predictions": pr.to_dict(), "scores": sc.to_dict(), "confusion": cm.to_dict()}

    def monitor() -> None:
        m = BinaryMonitor()
        update = m.update
        for e in events:
            update(e)

    def separate() -> None:
        upd_p, upd_s, upd_c = ScoreDistribution().update, BinaryScores().update, ConfusionMatrix(labels=[0, 1]).update
        for (y, s), (_, p) in zip(pairs, preds):
            upd_p(s)
            upd_s(y, s)
            upd_c(y, p)

    def scores_only() -> None:
        update = BinaryScores().update
        for y, s in pairs:
            update(y, s)

    def confusion_only() -> None:
        update = ConfusionMatrix(labels=[0, 1]).update
        for y, p in preds:
            update(y, p)

    def loop_only() -> None:
        for e in events:
            e.get("y_true")

    def river() -> None:
        from river import metrics as rm

        acc, f1, auc, ll = rm.Accuracy(), rm.F1(), rm.ROCAUC(), rm.LogLoss()
        for y, p in pairs:
            yb = bool(y)
            pred = p >= 0.5
            acc.update(yb, pred)
            f1.update(yb, pred)
            auc.update(yb, {True: p, False: 1.0 - p})
            ll.update(yb, p)

    runs = {"BinaryMonitor.update(dict), fused": monitor, "the three accumulators one by one": separate,
            "  part: BinaryScores.update(y, s)": scores_only,
            "  part: ConfusionMatrix.update(y, pred)": confusion_only,
            "  part: bare loop over the dicts": loop_only,
            "river Accuracy+F1+ROCAUC+LogLoss": river}
    best = {name: math.inf for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t0)
    river_t = best["river Accuracy+F1+ROCAUC+LogLoss"]
    print(f"{n:,} binary events, best of {args.repeats} interleaved rounds")
    print(f"{'':<44} {'us/event':>9} {'river / this':>13}")
    for name, t in best.items():
        print(f"{name:<44} {t / n * 1e6:>9.3f} {river_t / t:>12.1f}x")


if __name__ == "__main__":
    main()
