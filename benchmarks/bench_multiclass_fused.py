"""``MulticlassScores.update`` per event: today, a fused prototype, and river, in one run.

The prototype ``FusedMulticlassScores.update`` handles the common case (scores a list of K
floats, default weight, a label of the classes' kind, log-grid bins) in one pass over the
row: validation (finite floats), the log-grid key of each score inlined (no ``key()`` call
per class), min, max, arg-max, the true class's rank and the row sum, then the commit. It
builds the same state as ``MulticlassScores.update`` (checked with ``to_dict`` below). It
reads the current private fields, so it is a proposal for the state engineer, not a module.

Times are CPU time of this process (``time.process_time``): on a shared machine wall time
mostly measures waiting for a core.

river: ``CrossEntropy`` alone, and ``CrossEntropy`` plus one ``ROCAUC`` per class (OvR), the
equivalent of what MulticlassScores keeps (issue 12 point 4's yardstick).

    python benchmarks/bench_multiclass_fused.py [--events 100000] [--k 5] [--repeats 5]
"""
from __future__ import annotations

import argparse
import math
import struct
import time
from typing import Any

import numpy as np

import streammetrics as sm
from streammetrics.kernels.binning import LogGridBinning
from streammetrics.metrics import multiclass_scores as mcs

_pack = struct.Struct("<d").pack
_unpack = struct.Struct("<q").unpack
_MASK = 0x7FFF_FFFF_FFFF_FFFF
_INF = math.inf
_log = math.log


class FusedMulticlassScores(sm.MulticlassScores):
    """Prototype: the common per-event case in one pass over the row."""

    def update(self, y_true: Any, scores: Any, weight: float = 1.0) -> FusedMulticlassScores:
        cols = self._cols
        binning = self._binning
        if (scores.__class__ is list and weight == 1.0 and weight.__class__ is float
                and y_true.__class__ is cols.fast and binning.__class__ is LogGridBinning):
            t = cols.index.get(y_true)
            k = len(cols.names)
            if t is not None and len(scores) == k:
                shift, rnd, c = binning._shift, binning._round, binning._c
                st = scores[t]
                keys = []
                rank = 0
                lo = hi = scores[0]
                arg = 0
                total_s = 0.0
                ok = True
                for j, s in enumerate(scores):
                    if s.__class__ is not float or not -_INF < s < _INF:
                        ok = False
                        break
                    if 0.0 <= s < 0.5:
                        keys.append(((_unpack(_pack(s))[0] & _MASK) + rnd) >> shift)
                    elif 0.5 <= s <= 1.0:
                        keys.append(c - ((_unpack(_pack(1.0 - s))[0] + rnd) >> shift))
                    elif s > 1.0:
                        keys.append(c + ((_unpack(_pack(s - 1.0))[0] + rnd) >> shift))
                    else:
                        keys.append(-((_unpack(_pack(-s))[0] + rnd) >> shift))
                    if s > st or (s == st and j > t):
                        rank += 1
                    lo = min(lo, s)
                    if s > hi:
                        hi = s
                        arg = j
                    total_s += s
                if ok and self._weights[t] + 1.0 <= mcs.MAX_TOTAL_WEIGHT:
                    for d, key in zip(self._hw[t], keys):
                        d[key] = d.get(key, 0.0) + 1.0
                    self._ranks[rank] += 1.0
                    cell = (t, arg)
                    self._cells[cell] = self._cells.get(cell, 0.0) + 1.0
                    top1 = self._top1
                    if top1 is not None:
                        s1, is1 = scores[1], t == 1
                        if (s1 > 0.5) == is1:
                            top1[0] += 1.0
                        if (s1 > 0.0) == is1:
                            top1[1] += 1.0
                        if not 0.0 <= s1 <= 1.0:
                            top1[2] = True
                    if lo >= 0.0 and hi <= 1.0:
                        p = max(st, mcs._EPS)
                        p = min(p, mcs._ONE_MINUS_EPS)
                        self._log_loss_sum -= _log(p)
                    else:
                        bad = [s for s in scores if not 0.0 <= s <= 1.0]
                        self._see_outside(min(bad), max(bad))
                    d_s = abs(1.0 - total_s)
                    if not d_s <= 1e-8 + 1e-5 * abs(total_s):
                        self._unnormalised[0] += 1
                    if not d_s <= mcs._LOG_LOSS_SUM_TOL:
                        self._unnormalised[1] += 1
                    self._weights[t] += 1.0
                    self._events[t] += 1
                    return self
        return super().update(y_true, scores, weight)  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n, k = args.events, args.k
    rng = np.random.default_rng(42)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    yl, pl = y.tolist(), p.tolist()
    pd_rows = [dict(enumerate(r)) for r in pl]

    a, b = sm.MulticlassScores(list(range(k))), FusedMulticlassScores(list(range(k)))
    for t, row in zip(yl[:20_000], pl[:20_000]):
        a.update(t, row)
        b.update(t, row)
    b.update(0, [2.0] + [0.0] * (k - 1))  # a row outside [0, 1] and not summing to 1
    a.update(0, [2.0] + [0.0] * (k - 1))
    assert a.to_dict() == b.to_dict(), "the fused path must build the same state"

    def today() -> None:
        update = sm.MulticlassScores(list(range(k))).update
        for t, row in zip(yl, pl):
            update(t, row)

    def fused() -> None:
        update = FusedMulticlassScores(list(range(k))).update
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

    runs = {"MulticlassScores.update today": today, "prototype FusedMulticlassScores.update": fused,
            "river CrossEntropy": river_ce, "river CrossEntropy + K x ROCAUC": river_equivalent}
    best = {name: math.inf for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t0)
    print(f"{n:,} events, K={k}, best of {args.repeats} interleaved rounds")
    print(f"{'':<42} {'us/event':>9} {'vs river CE':>12} {'vs river CE+AUCs':>17}")
    for name, t in best.items():
        print(f"{name:<42} {t / n * 1e6:>9.2f} {best['river CrossEntropy'] / t:>11.2f}x "
              f"{best['river CrossEntropy + K x ROCAUC'] / t:>16.2f}x")


if __name__ == "__main__":
    main()
