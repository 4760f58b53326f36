"""Where ``BinaryMonitor.update(event_dict)`` spends its ~3.5 us, and what a fused path gains.

Breaks the per-event cost into its parts (same events, interleaved rounds, best of N):
``BinaryScores.update(y, s)`` alone, ``ConfusionMatrix.update(y, pred)`` alone, the monitor's
own dict checks and dispatch (the rest), and a prototype ``FusedBinaryMonitor.update`` that
does the common case (a dict without weight, y 0/1, a float score strictly inside (0, 1) and
not 0.5-or-above-with-.. any interior score) in one Python frame: the score's log-grid key,
histogram count, log-loss product and Brier sum of ``BinaryScores.update`` and the cell count
of ``ConfusionMatrix.update`` inlined, with no re-validation of ``y`` and a constant cell
tuple. The prototype produces the same state (checked below with ``to_dict``) and is the
concrete proposal for the state engineer (it reads the current private fields: it belongs in
``BinaryMonitor`` itself, after the declared-state rewrite). river's Accuracy+F1+ROCAUC+LogLoss
is timed in the same rounds for the ratio the issue targets (>= 6x). Times are CPU time of
this process (``time.process_time``): on a shared machine wall time mostly measures waiting.

    python benchmarks/bench_monitor_fused.py [--events 200000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import math
import struct
import time
from typing import Any

from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.monitors import BinaryMonitor
from streammetrics.stream.synthetic import generate_events

_EPS = 2.0**-52
_ONE_MINUS_EPS = 1.0 - _EPS
_RENORMALISE = 2.0**-800
_pack = struct.Struct("<d").pack
_unpack = struct.Struct("<q").unpack
_frexp = math.frexp
_CELLS = (((0, 0), (0, 1)), ((1, 0), (1, 1)))


class FusedBinaryMonitor(BinaryMonitor):
    """Prototype: the common per-event case of BinaryMonitor.update in one frame."""

    def update(self, event: Any) -> FusedBinaryMonitor:
        if event.__class__ is dict and "weight" not in event:
            y = event.get("y_true")
            s = event.get("score")
            fast = self.scores._fast
            if (s.__class__ is float and 0.0 < s < 1.0 and fast is not None
                    and ((y.__class__ is int and (y == 0 or y == 1)) or y is True or y is False)):
                y = 1 if y else 0
                hists, events, sums, _, shift, rnd, c = fast
                q = 1.0 - s
                if s < 0.5:
                    k = (_unpack(_pack(s))[0] + rnd) >> shift
                else:
                    k = c - ((_unpack(_pack(q))[0] + rnd) >> shift)
                h = hists[y]
                try:
                    h[k] += 1.0
                except KeyError:
                    h[k] = 1.0
                    if len(hists[0]) + len(hists[1]) > self.scores._max_bins:
                        self.scores._collapse()
                events[y] += 1
                if y:
                    p, d = s, q
                else:
                    p, d = q, s
                if p < _EPS:
                    p = _EPS
                elif p > _ONE_MINUS_EPS:
                    p = _ONE_MINUS_EPS
                m = sums[2] * p
                if m < _RENORMALISE:
                    m, e = _frexp(m)
                    sums[3] += e
                sums[2] = m
                sums[1] += d * d
                cell = _CELLS[y][1 if s >= self.threshold else 0]
                n = self.confusion._n
                n[cell] = n.get(cell, 0) + 1
                self.score_sum += s
                return self
        return super().update(event)  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n = args.events
    events = [{"y_true": e["y_true"], "score": e["score"]} for e in generate_events(n, seed=1)]
    pairs = [(e["y_true"], e["score"]) for e in events]
    preds = [(y, 1 if s >= 0.5 else 0) for y, s in pairs]

    # same state from the prototype as from the monitor
    a, b = BinaryMonitor(), FusedBinaryMonitor()
    for e in events[:50_000]:
        a.update(e)
        b.update(e)
    assert a.to_dict() == b.to_dict(), "the fused path must build the same state"

    def monitor() -> None:
        m = BinaryMonitor()
        update = m.update
        for e in events:
            update(e)

    def fused() -> None:
        m = FusedBinaryMonitor()
        update = m.update
        for e in events:
            update(e)

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

    runs = {"BinaryMonitor.update(dict) today": monitor, "prototype FusedBinaryMonitor.update(dict)": fused,
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
    rest = best["BinaryMonitor.update(dict) today"] - best["  part: BinaryScores.update(y, s)"] - \
        best["  part: ConfusionMatrix.update(y, pred)"]
    print(f"monitor's own dict checks, dispatch and score_sum (today - the two parts): {rest / n * 1e6:.3f} us/event")


if __name__ == "__main__":
    main()
