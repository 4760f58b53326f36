"""ROC AUC accuracy of the default BinaryScores vs river's ROCAUC, against the exact value.

Streams (one process run, same events for every method):

* river's bundled Phishing, Bananas and Shuttle sets (river 0.26 ships Shuttle as a binary
  anomaly task, label 1 vs 0: no conversion needed), scored progressively
  (``predict_proba_one`` then ``learn_one``) by river's LogisticRegression behind a
  StandardScaler and by a HoeffdingTreeClassifier (whose leaf probabilities tie a lot);
* scikit-learn's breast-cancer set: cross-validated LogisticRegression
  ``decision_function`` margins (unbounded scores);
* synthetic streams of 1M events: float64 sigmoids of large logits (probabilities within
  1e-15 of 0 and 1), float32 sigmoids (saturating to exactly 1.0 and 0.0) and a rare-positive
  stream crowded near 0.

For each: the exact AUC (``sklearn.metrics.roc_auc_score``), the default
``BinaryScores()`` AUC and |error|, its guaranteed bounds, river ``ROCAUC()`` (default
settings) and its |error|, and the size of ``json.dumps(BinaryScores.to_dict())``.
Targets for the default configuration: |error| <= 1e-4, bounds containing the exact
value, state <= 128 KiB.

    python benchmarks/bench_auc_accuracy.py [--quick]
"""
from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np
from river import datasets, linear_model, metrics, preprocessing, tree
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import streammetrics as sm

TARGET_ERROR = 1e-4
TARGET_STATE = 128 * 1024


def river_stream(dataset, model_name: str, limit: int | None):
    """Progressive (test-then-train) scores of a river model on a river dataset."""
    if model_name == "logreg":
        model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    else:
        model = tree.HoeffdingTreeClassifier()
    ys, scores = [], []
    for x, y in itertools.islice(dataset, limit):
        proba = model.predict_proba_one(x)
        ys.append(bool(y))
        scores.append(float(proba.get(True, proba.get(1, 0.0))))
        model.learn_one(x, y)
    return np.array(ys), np.array(scores)


def breast_cancer_margins():
    X, y = load_breast_cancer(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    margins = cross_val_predict(model, X, y, cv=5, method="decision_function")
    return y.astype(bool), margins


def synthetic(kind: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "sigmoid64":  # well separated, large logits: crowded within 1e-15 of 0 and 1
        y = rng.random(n) < 0.3
        z = np.where(y, 12.0, -12.0) + rng.normal(0.0, 8.0, n)
        return y, 1.0 / (1.0 + np.exp(-z))
    if kind == "sigmoid32":  # float32 sigmoids: many scores are exactly 1.0 or tiny
        y = rng.random(n) < 0.5
        z = (np.where(y, 6.0, -6.0) + rng.normal(0.0, 10.0, n)).astype(np.float32)
        return y, (np.float32(1.0) / (np.float32(1.0) + np.exp(-z))).astype(np.float64)
    if kind == "rare":  # 1% positives, negatives crowded near 0
        y = rng.random(n) < 0.01
        z = np.where(y, -2.0, -25.0) + rng.normal(0.0, 6.0, n)
        return y, 1.0 / (1.0 + np.exp(-z))
    raise ValueError(kind)


def evaluate(name: str, y: np.ndarray, s: np.ndarray, per_event: bool) -> dict:
    exact = roc_auc_score(y, s)
    t0 = time.perf_counter()
    acc = sm.BinaryScores()
    if per_event:
        update = acc.update
        for yi, si in zip(y.tolist(), s.tolist()):
            update(yi, si)
    else:
        acc.update_many(y, s)
    auc = acc.roc_auc()
    low, high = acc.roc_auc_bounds()
    t_sm = time.perf_counter() - t0
    river_auc = metrics.ROCAUC()
    update = river_auc.update
    t0 = time.perf_counter()
    for yi, si in zip(y.tolist(), s.tolist()):
        update(yi, si)
    river_value = river_auc.get()
    t_river = time.perf_counter() - t0
    return {
        "stream": name,
        "n": len(y),
        "exact": exact,
        "sm": auc,
        "sm_err": abs(auc - exact),
        "low": low,
        "high": high,
        "inside": low <= exact <= high,
        "river": river_value,
        "river_err": abs(river_value - exact),
        "state": len(json.dumps(acc.to_dict())),
        "bins": len(acc._neg.weights) + len(acc._pos.weights),
        "t_sm": t_sm,
        "t_river": t_river,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller streams (smoke test)")
    args = parser.parse_args()
    limit = 3000 if args.quick else None
    n_synthetic = 50_000 if args.quick else 1_000_000

    rows = []
    for dataset in (datasets.Phishing(), datasets.Bananas(), datasets.Shuttle()):
        for model_name in ("logreg", "hoeffding"):
            y, s = river_stream(dataset, model_name, limit)
            rows.append(evaluate(f"{type(dataset).__name__}/{model_name}", y, s, per_event=True))
    y, s = breast_cancer_margins()
    rows.append(evaluate("breast_cancer/margins", y, s, per_event=True))
    for seed, kind in enumerate(("sigmoid64", "sigmoid32", "rare")):
        y, s = synthetic(kind, n_synthetic, seed)
        rows.append(evaluate(f"synthetic/{kind}", y, s, per_event=False))

    header = (
        f"{'stream':24s} {'n':>8s} {'exact AUC':>12s} {'BinaryScores':>12s} {'|error|':>9s} "
        f"{'low':>12s} {'high':>12s} {'in':>3s} {'river':>9s} {'|error|':>9s} "
        f"{'state B':>8s} {'bins':>6s}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['stream']:24s} {r['n']:8d} {r['exact']:12.9f} {r['sm']:12.9f} {r['sm_err']:9.2e} "
            f"{r['low']:12.9f} {r['high']:12.9f} {'yes' if r['inside'] else 'NO':>3s} "
            f"{r['river']:9.6f} {r['river_err']:9.2e} {r['state']:8d} {r['bins']:6d}"
        )
    worst = max(r["sm_err"] for r in rows)
    print()
    print(f"worst |error|: BinaryScores {worst:.2e}, river ROCAUC {max(r['river_err'] for r in rows):.2e}")
    ratios = [r["river_err"] / max(r["sm_err"], 1e-17) for r in rows]
    print(f"river error / BinaryScores error: min {min(ratios):.3g}x, median {np.median(ratios):.3g}x")
    print(f"widest bounds: {max(r['high'] - r['low'] for r in rows):.2e}; largest state: "
          f"{max(r['state'] for r in rows)} bytes")
    checks = {
        f"|error| <= {TARGET_ERROR:g} on every stream": worst <= TARGET_ERROR,
        "bounds contain the exact AUC on every stream": all(r["inside"] for r in rows),
        f"state <= {TARGET_STATE // 1024} KiB as JSON": all(r["state"] <= TARGET_STATE for r in rows),
    }
    for what, ok in checks.items():
        print(f"target {what}: {'met' if ok else 'MISSED'}{' (--quick sizes)' if args.quick else ''}")


if __name__ == "__main__":
    main()
