"""False-alarm rate and power of the worst slices' ``significant`` flag (issue 28, point 3).

    python benchmarks/sim_slice_gaps.py [--reps 300] [--quick]

A roll-up window of K = 8 slices of sizes drawn from 30 to 3,000 events (binormal scores, base rate
0.3). Null: every slice from one population (ROC AUC 0.80); a slice is flagged ``significant``
when the roll-up's ROC AUC lies outside the slice's 95% interval
(:func:`streammetrics.stream.slicing.gap_row` on :func:`~streammetrics.stream.slicing.slice_interval`,
the code the snapshots run). The flag treats the roll-up as known though it holds the slice, so
its false-alarm rate should be at most the nominal 5% (a slice that is a large share of the
roll-up pulls the roll-up toward itself: conservative). Power: one slice drawn from a worse
population (AUC ~0.65), the rate at which it is flagged, by its size.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from streammetrics.monitors import BinaryMonitor  # noqa: E402
from streammetrics.stream.slicing import gap_row, slice_interval  # noqa: E402

NOMINAL = 0.05


def _slice(rng: np.random.Generator, n: int, separation: float) -> BinaryMonitor:
    y = (rng.random(n) < 0.3).astype(int)
    margin = rng.normal(0.0, 1.0, n) + separation * y
    s = 1.0 / (1.0 + np.exp(-margin))
    return BinaryMonitor().update_many([{"y_true": int(a), "score": float(b)} for a, b in zip(y, s)])


def trial(rng: np.random.Generator, bad: bool) -> list[tuple[int, bool | None, bool]]:
    """Per slice: (size, significant, is the degraded slice)."""
    sizes = np.exp(rng.uniform(np.log(30), np.log(3000), 8)).astype(int)
    slices = [_slice(rng, int(n), 0.9 if bad and i == 0 else 1.19) for i, n in enumerate(sizes)]
    whole = slices[0].copy()
    for m in slices[1:]:
        whole.merge(m)
    auc = whole.snapshot()["roc_auc"]
    out = []
    for i, m in enumerate(slices):
        row = gap_row({}, "roc_auc", m.snapshot()["roc_auc"], auc, slice_interval(m, "roc_auc"), int(sizes[i]))
        out.append((int(sizes[i]), row["significant"], bad and i == 0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="60 repetitions")
    args = ap.parse_args()
    reps = 60 if args.quick else args.reps
    rng = np.random.default_rng(28)
    null = [r for _ in range(reps) for r in trial(rng, False)]
    tested = [r for r in null if r[1] is not None]
    rate = sum(1 for r in tested if r[1]) / max(len(tested), 1)
    print(f"null: {len(tested):,} slices with an interval of {len(null):,}; flagged {rate:.3%} "
          f"(nominal <= {NOMINAL:.0%}): {'met' if rate <= NOMINAL else 'MISSED'}")
    bad = [r for _ in range(reps) for r in trial(rng, True) if r[2] and r[1] is not None]
    for lo, hi in ((30, 300), (300, 1000), (1000, 3001)):
        group = [r for r in bad if lo <= r[0] < hi]
        if group:
            print(f"power, degraded slice of {lo}-{hi - 1} events: flagged {sum(r[1] for r in group) / len(group):.1%} "
                  f"of {len(group)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
