"""Benchmark: sm.Regression vs river.metrics (MAE, RMSE, R2) and scikit-learn, one process.

Per event: ``sm.Regression.update`` (all seven metrics: MSE, RMSE, MAE, R², RMSLE, MAPE,
max error) against river's ``MAE``, ``RMSE`` and ``R2`` updated together, and river's
``R2`` alone. Batch: ``sm.Regression.update_many`` (whole array and 1,000-event chunks)
against river (which has no batch update, so its per-event loop) and scikit-learn's
non-incremental functions on the whole array. Also prints the values each computes and
the relative error of R²'s denominator on 1e9-offset data against exact rational arithmetic.

    python benchmarks/bench_regression.py            # 200,000 events, best of 3
    python benchmarks/bench_regression.py --quick    # 20,000 events, best of 1
"""
from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction

import numpy as np
from river import metrics as rm
from sklearn import metrics as skm

import streammetrics as sm


def best_of(repeat: int, fn) -> float:
    """Best wall time of ``repeat`` runs, after one untimed warm-up run."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def per_event_sm(yt, yp):
    acc = sm.Regression()
    update = acc.update
    for a, b in zip(yt, yp):
        update(a, b)
    return acc


def per_event_river_trio(yt, yp):
    mae, rmse, r2 = rm.MAE(), rm.RMSE(), rm.R2()
    for a, b in zip(yt, yp):
        mae.update(a, b)
        rmse.update(a, b)
        r2.update(a, b)
    return mae, rmse, r2


def per_event_river_r2(yt, yp):
    r2 = rm.R2()
    for a, b in zip(yt, yp):
        r2.update(a, b)
    return r2


def chunked_sm(yt, yp, chunk=1000):
    acc = sm.Regression()
    for i in range(0, len(yt), chunk):
        acc.update_many(yt[i:i + chunk], yp[i:i + chunk])
    return acc


def sklearn_three(yt, yp):
    return (skm.mean_absolute_error(yt, yp), skm.root_mean_squared_error(yt, yp), skm.r2_score(yt, yp))


def accuracy_report(n: int) -> None:
    """Relative error of the R² denominator Σ(y - ȳ)² on 1e9 + N(0, 1) data."""
    rng = np.random.default_rng(1)
    y = 1e9 + rng.normal(0.0, 1.0, n)
    ylist = y.tolist()
    ys = [Fraction(v) for v in ylist]
    mean = sum(ys) / n
    exact = float(sum((v - mean) ** 2 for v in ys))
    ours_event = per_event_sm(ylist, ylist)._m2
    ours_batch = sm.Regression().update_many(y, y)._m2
    s = s2 = 0.0
    for v in ylist:
        s += v
        s2 += v * v
    naive = s2 - s * s / n
    # river's R2 keeps a Welford variance: recover its denominator from R² = 1 - sse/sst
    r2 = per_event_river_r2(ylist, (y + 1.0).tolist())
    river_sst = n / (1.0 - r2.get())
    sk_sst = float(np.sum((y - np.mean(y)) ** 2))
    print(f"\nR² denominator Σ(y - ȳ)² on 1e9 + N(0, 1), n = {n}: relative error vs exact")
    for name, v in [("streammetrics update", ours_event), ("streammetrics update_many", ours_batch),
                    ("scikit-learn (two-pass)", sk_sst), ("river R2", river_sst),
                    ("naive Σy² - (Σy)²/n", naive)]:
        print(f"  {name:28s} {abs(v - exact) / exact:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 events, one repetition")
    parser.add_argument("-n", type=int, default=None, help="number of events")
    args = parser.parse_args()
    n = args.n or (20_000 if args.quick else 200_000)
    repeat = 1 if args.quick else 3

    rng = np.random.default_rng(0)
    yt_arr = 100.0 + 10.0 * rng.standard_normal(n)
    yp_arr = yt_arr + rng.standard_normal(n)
    yt, yp = yt_arr.tolist(), yp_arr.tolist()

    cases = [  # (section, name, run)
        ("per event", "streammetrics Regression.update (7 metrics)", lambda: per_event_sm(yt, yp)),
        ("per event", "river MAE + RMSE + R2 .update", lambda: per_event_river_trio(yt, yp)),
        ("per event", "river R2 .update", lambda: per_event_river_r2(yt, yp)),
        ("batch", "streammetrics update_many (one array)", lambda: sm.Regression().update_many(yt_arr, yp_arr)),
        ("batch", "streammetrics update_many (chunks of 1000)", lambda: chunked_sm(yt_arr, yp_arr)),
        ("batch", "scikit-learn MAE + RMSE + R2 (not incremental)", lambda: sklearn_three(yt_arr, yp_arr)),
    ]
    rows = [(section, name, best_of(repeat, run)) for section, name, run in cases]  # (section, name, seconds)

    print(f"sm.Regression vs river.metrics / scikit-learn: {n:,} events, best of {repeat} "
          "(2 shared cores: expect noise)\n")
    print(f"{'section':10s} {'implementation':48s} {'total s':>9s} {'ns/event':>10s}")
    for section, name, t in rows:
        print(f"{section:10s} {name:48s} {t:9.4f} {t / n * 1e9:10.1f}")
    t = {name: s for _, name, s in rows}
    sm_ev = t["streammetrics Regression.update (7 metrics)"]
    sm_b = t["streammetrics update_many (one array)"]
    print("\nratios (> 1: streammetrics faster)")
    print(f"  river MAE+RMSE+R2 per event / sm update          {t['river MAE + RMSE + R2 .update'] / sm_ev:6.2f}x")
    print(f"  river R2 per event / sm update                   {t['river R2 .update'] / sm_ev:6.2f}x")
    print(f"  river MAE+RMSE+R2 per event / sm update_many     {t['river MAE + RMSE + R2 .update'] / sm_b:6.1f}x")
    sklearn_three_s = t["scikit-learn MAE + RMSE + R2 (not incremental)"]
    print(f"  sklearn MAE+RMSE+R2 / sm update_many             {sklearn_three_s / sm_b:6.2f}x")
    print(f"  sm update / sm update_many                       {sm_ev / sm_b:6.1f}x")

    ours = per_event_sm(yt, yp)
    batch = sm.Regression().update_many(yt_arr, yp_arr)
    mae, rmse, r2 = per_event_river_trio(yt, yp)
    sk = sklearn_three(yt_arr, yp_arr)
    print("\nvalues             streammetrics (event)  streammetrics (batch)  river                  scikit-learn")
    for name, a, b, c, d in [("MAE", ours.mae(), batch.mae(), mae.get(), sk[0]),
                             ("RMSE", ours.rmse(), batch.rmse(), rmse.get(), sk[1]),
                             ("R2", ours.r2(), batch.r2(), r2.get(), sk[2])]:
        print(f"{name:18s} {a:<22.17g} {b:<22.17g} {c:<22.17g} {d:<22.17g}")
    worst = max(abs(x - y) / max(1.0, abs(y)) for x, y in
                [(ours.mae(), sk[0]), (ours.rmse(), sk[1]), (ours.r2(), sk[2]),
                 (batch.mae(), sk[0]), (batch.rmse(), sk[1]), (batch.r2(), sk[2])])
    print(f"max relative difference streammetrics vs scikit-learn: {worst:.1e}")
    assert worst <= 1e-12 and math.isfinite(worst)

    accuracy_report(5_000 if args.quick else 20_000)


if __name__ == "__main__":
    main()
