"""Per-snapshot cost of a BinaryMonitor window, part by part, in one run (issue 12).

For windows of 10, 100 and 1,000 events (scores rounded to 6 decimals, as the benchmarks'
streams): the metrics as ``BinaryMonitor.snapshot()`` computed them before this branch
(every metric through its accumulator method: numpy and scikit-learn's machinery), as
``snapshot()`` computes them now (:func:`streammetrics.monitors.fast_snapshot.binary_snapshot`,
plain floats), ``to_dict()`` (state encoding) with today's ``histograms_to_json`` and with
:mod:`streammetrics.kernels.histogram_json`, and the canonical JSON line (``snapshot_line``)
of the metrics and of the state; ``snapshot_state()`` (metrics and state in one pass, what the
window engine calls), on a folded monitor and on a fresh one (its exact sums' buffers still to
fold, as a closing window's). Each figure is the best of ``--repeats`` rounds of
``--number`` calls, in CPU time of this process (``time.process_time``).

    python benchmarks/bench_snapshot.py [--sizes 10,100,1000] [--repeats 5] [--number 200]
"""
from __future__ import annotations

import argparse
import math
import random
import time
import timeit

from streammetrics.kernels.histogram import histograms_to_json
from streammetrics.kernels.histogram_json import SMALL_KEYS, small_histograms_to_json
from streammetrics.metrics import binary_scores, score_distribution
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.base import json_number, quiet, quiet_pair
from streammetrics.stream.snapshots import snapshot_line

_NAN = math.nan


def numpy_snapshot(monitor: BinaryMonitor) -> dict:
    """BinaryMonitor.snapshot() before this branch (tests/monitors/test_fast_snapshot.py's reference)."""
    cm, sc, pr = monitor.confusion, monitor.scores, monitor.predictions
    total = cm.total_weight
    m = cm.matrix([0, 1])
    low, high = quiet_pair(sc.roc_auc_bounds)
    return {
        "count": monitor.count, "total_weight": json_number(pr.total_weight),
        "accuracy": quiet(cm.accuracy), "balanced_accuracy": quiet(cm.balanced_accuracy),
        "precision": quiet(cm.precision, zero_division=_NAN), "recall": quiet(cm.recall, zero_division=_NAN),
        "f1": quiet(cm.f1, zero_division=_NAN), "specificity": quiet(cm.specificity, zero_division=_NAN),
        "matthews_corrcoef": quiet(cm.matthews_corrcoef) if total > 0 else None,
        "roc_auc": quiet(sc.roc_auc), "roc_auc_low": low, "roc_auc_high": high,
        "average_precision": quiet(sc.average_precision), "log_loss": quiet(sc.log_loss),
        "brier_score": quiet(sc.brier_score),
        "positive_rate": json_number(m[1].sum() / total) if total > 0 else None,
        "predicted_positive_rate": quiet(pr.predicted_positive_rate), "mean_score": quiet(pr.mean_score),
    }


def small_to_dict(monitor: BinaryMonitor) -> dict:
    """to_dict() with histograms of at most SMALL_KEYS keys encoded by kernels.histogram_json
    (patched in for the call)."""
    def encode(hists, names):
        if sum(len(h.weights) for h in hists) > SMALL_KEYS:
            return histograms_to_json(hists, names)
        return small_histograms_to_json([h.weights for h in hists], names, hists[0].binning.exact)

    modules = (binary_scores, score_distribution)
    for module in modules:
        module.histograms_to_json = encode
    try:
        return monitor.to_dict()
    finally:
        for module in modules:
            module.histograms_to_json = histograms_to_json


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
        return min(timeit.repeat(fn, number=args.number, repeat=args.repeats, timer=time.process_time)) \
            / args.number * 1e6

    sizes = [int(s) for s in args.sizes.split(",")]
    monitors = {n: window(n) for n in sizes}
    # monitors whose exact sums are not folded yet (what a closing window holds), one per call
    fresh = {n: [window(n) for _ in range(args.number * args.repeats + 1)] for n in sizes}
    rows: dict[str, dict[int, float]] = {}
    for n, m in monitors.items():
        metrics, state = m.snapshot(), m.to_dict()
        sc = m.scores
        assert small_to_dict(m) == state
        parts = {
            "metrics before (numpy path)": lambda m=m: numpy_snapshot(m),
            "metrics now: snapshot() = binary_snapshot()": m.snapshot,
            "to_dict() (state encoding)": m.to_dict,
            "to_dict() with kernels.histogram_json": lambda m=m: small_to_dict(m),
            "snapshot_state() (metrics + state, one pass)": m.snapshot_state,
            "fresh window: fold + snapshot_state()": lambda n=n: fresh[n].pop().snapshot_state(),
            "snapshot_line(metrics)": lambda metrics=metrics: snapshot_line(metrics),
            "snapshot_line(state)": lambda state=state: snapshot_line(state),
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
        r = {name: vals[n] for name, vals in rows.items()}
        json_us = r["snapshot_line(metrics)"] + r["snapshot_line(state)"]
        before = r["metrics before (numpy path)"] + r["to_dict() (state encoding)"] + json_us
        now = r["metrics now: snapshot() = binary_snapshot()"] + r["to_dict() (state encoding)"] + json_us
        proposed = (r["metrics now: snapshot() = binary_snapshot()"] + r["to_dict() with kernels.histogram_json"]
                    + json_us)
        fused = r["snapshot_state() (metrics + state, one pass)"] + json_us
        print(f"{n:>5} events: metrics + state + JSON {before:,.0f} us before -> {now:,.0f} us now "
              f"({before / now:.1f}x) -> {proposed:,.0f} us with the small state encoding ({before / proposed:.1f}x)"
              f" -> {fused:,.0f} us with snapshot_state() ({before / fused:.1f}x)")

if __name__ == "__main__":
    main()
