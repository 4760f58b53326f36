"""streammetrics.spark.window_snapshots on local[2] vs a pandas groupby-apply of scikit-learn per window.

One run, the same events for both: ``--events`` binary predictions (default 10M) of 4 models
over one day of event time, written as Parquet files in time order (as logged predictions
usually are); 60 s tumbling windows (5,760 (model, window) groups).

* **spark**: ``window_snapshots(spark.read.parquet(dir), window="60s")`` on ``local[2]``, every
  snapshot with its state computed, only their lengths collected. Rate = events / wall time of that job.
* **pandas**: ``pd.read_parquet`` then ``groupby([model, window]).apply`` computing ROC AUC,
  average precision, log loss, Brier score, accuracy, precision, recall, F1, balanced accuracy
  and MCC with scikit-learn per group (the metrics BinaryMonitor reports). Rate = events /
  wall time (read + compute).
* **shuffle**: bytes written by every Exchange of the executed plan (Spark's SQL metrics
  ``shuffle bytes written`` / ``data size``), against the in-memory size of the event rows a
  row shuffle (e.g. ``groupBy(window).applyInPandas`` on the events) would move.

    python benchmarks/bench_spark.py [--events 10000000] [--skip-pandas]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400.0


def write_events(path: str, n: int, files: int, seed: int = 7) -> None:
    """``n`` events of 4 drifting models, in time order, over ``files`` Parquet files."""
    rng = np.random.default_rng(seed)
    per = -(-n // files)
    for f in range(files):
        lo, hi = f * per, min(n, (f + 1) * per)
        m = hi - lo
        ts = T0 + (np.arange(lo, hi) + rng.random(m)) * (DAY / n)
        model = rng.integers(0, 4, m)
        y = (rng.random(m) < 0.3).astype(np.int64)
        sep = 3.0 - 2.0 * (ts - T0) / DAY * (model + 1) / 4  # separation drifts down over the day
        logit = np.where(y == 1, sep / 2, -sep / 2) + rng.logistic(size=m)
        score = 1.0 / (1.0 + np.exp(-logit))
        table = pa.table({"ts": ts, "model": pa.array([f"model-{k}" for k in range(4)])
                          .take(pa.array(model)), "y_true": y, "score": score})
        pq.write_table(table, os.path.join(path, f"part-{f:03d}.parquet"))


def pandas_baseline(path: str) -> tuple[float, int]:
    from sklearn.metrics import (
        accuracy_score,
        average_precision_score,
        balanced_accuracy_score,
        brier_score_loss,
        f1_score,
        log_loss,
        matthews_corrcoef,
        precision_score,
        recall_score,
        roc_auc_score,
    )

    def metrics(g: pd.DataFrame) -> pd.Series:
        y, s = g["y_true"].to_numpy(), g["score"].to_numpy()
        p = (s >= 0.5).astype(np.int64)
        two = len(np.unique(y)) == 2
        return pd.Series({
            "count": len(g),
            "roc_auc": roc_auc_score(y, s) if two else np.nan,
            "average_precision": average_precision_score(y, s),
            "log_loss": log_loss(y, s, labels=[0, 1]),
            "brier_score": brier_score_loss(y, s, labels=[0, 1]),
            "accuracy": accuracy_score(y, p),
            "precision": precision_score(y, p, zero_division=np.nan),
            "recall": recall_score(y, p, zero_division=np.nan),
            "f1": f1_score(y, p, zero_division=np.nan),
            "balanced_accuracy": balanced_accuracy_score(y, p),
            "matthews_corrcoef": matthews_corrcoef(y, p),
        })

    start = time.perf_counter()
    df = pd.read_parquet(path)
    df["window"] = (np.floor(df["ts"] * 1e6 + 0.5) // 60_000_000).astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = df.groupby(["model", "window"], sort=True).apply(metrics, include_groups=False)
    return time.perf_counter() - start, len(out)


def exchange_bytes(dataset) -> tuple[int, int]:
    """(shuffle bytes written, data size) summed over the Exchanges of ``dataset``'s executed plan."""
    written = size = 0
    stack = [dataset._jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            stack.append(node.executedPlan())
            continue
        if name.endswith("QueryStageExec"):
            stack.append(node.plan())
            continue
        if name.endswith("ReusedExchangeExec"):
            stack.append(node.child())
            continue
        metrics = node.metrics()
        if "Exchange" in name:
            for key, target in (("shuffleBytesWritten", "w"), ("dataSize", "s")):
                opt = metrics.get(key)
                if opt.isDefined():
                    value = int(opt.get().value())
                    if target == "w":
                        written += value
                    else:
                        size += value
        children = node.children()
        for i in range(children.size()):
            stack.append(children.apply(i))
    return written, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--skip-pandas", action="store_true")
    ap.add_argument("--keep", default=None, metavar="DIR", help="write (or reuse) the Parquet files here")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streammetrics.spark import window_snapshots

    tmp = args.keep or tempfile.mkdtemp(prefix="bench_spark_")
    os.makedirs(tmp, exist_ok=True)
    try:
        t = time.perf_counter()
        if not os.listdir(tmp):
            write_events(tmp, args.events, args.files)
        print(f"events: {args.events:,} binary predictions, 4 models, 1 day, 60 s windows "
              f"({time.perf_counter() - t:.1f} s to write {args.files} Parquet files)")
        raw = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))

        spark = (SparkSession.builder.master("local[2]").appName("bench_spark")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .config("spark.driver.memory", "3g").config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.files.maxPartitionBytes", str(max(1 << 20, raw // (2 * args.files) + 1)))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        df = spark.read.parquet(tmp)
        snaps = window_snapshots(df, window="60s")
        # one action on one Dataset, so that its executed plan holds the exchanges' metrics; the
        # snapshots themselves (with states) stay on the executors, only their lengths come back
        sized = snaps.select(F.length("snapshot").alias("n"))
        t = time.perf_counter()
        lengths = [r.n for r in sized.collect()]
        spark_s = time.perf_counter() - t
        n_snap = len(lengths)
        written, size = exchange_bytes(sized)
        row_bytes = args.events * (8 + 8 + 8 + 8 + 7)  # ts, y_true, score + string offset and body
        print(f"spark  window_snapshots: {spark_s:7.1f} s  {args.events / spark_s:>12,.0f} events/s  "
              f"({n_snap:,} snapshots, {sum(lengths):,} bytes of JSON)")
        print(f"shuffle: {written:,} bytes written by the exchanges (SQL data size {size:,}) "
              f"vs ~{row_bytes:,} bytes of event rows ({row_bytes / max(written, 1):.0f}x)")
        spark.stop()
        if not args.skip_pandas:
            pandas_s, groups = pandas_baseline(tmp)
            print(f"pandas groupby-apply sklearn: {pandas_s:7.1f} s  {args.events / pandas_s:>12,.0f} events/s "
                  f"({groups:,} groups)")
            print(f"speed-up spark/pandas: {pandas_s / spark_s:.2f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
