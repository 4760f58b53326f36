"""Label-free monitoring: streammetrics' Reference against NannyML on the same chunks.

NannyML's synthetic car-loan dataset (shipped with NannyML): a labelled reference period
of 50,000 predictions and an analysis period of 50,000 whose targets come separately; and
``shifted_margins``, generated here: 50,000 + 50,000 continuous miscalibrated scores (all
distinct, so the default grid state is binned) under a growing covariate shift.
Both libraries see the reference with labels and the analysis chunks (5,000 rows by
default) without. Per chunk it prints the realised metric (scikit-learn on the chunk's
targets), NannyML's CBPE estimate and ours, then each estimator's mean absolute error
against the realised values, and the CPU time and peak traced memory (tracemalloc, on a
second run) of fitting on the reference plus estimating every chunk. Predictions are ``y_pred_proba >= 0.5`` for
both (the dataset's ``y_pred`` column is replaced by that, so both estimate one classifier).
A second table compares score drift: our ``drift_ks`` with scipy's ``ks_2samp`` on the raw
chunk and NannyML's univariate Kolmogorov-Smirnov statistic.

``--dataset multiclass`` (also in ``all``): NannyML's synthetic multiclass credit-card
dataset (60,000 reference and 60,000 analysis rows, three classes, scores with two
decimals). Per chunk: the realised accuracy and macro F1 of the arg-max predictions
(scikit-learn), NannyML's multiclass CBPE (its default: a class is calibrated only when its
``needs_calibration`` check says so), ours through ``MulticlassMonitor`` bound to a
``MulticlassReference`` (per-event ``update_prediction`` and batch ``update_predictions``:
the estimate sums and the per-class score histograms of every row), then mean absolute
errors, times and peak traced memory. ``--multiclass-force-calibration`` makes NannyML
calibrate every class, as we do (the estimates then agree to float rounding).

NannyML is a benchmark-only dependency, kept out of the project's environment:

    python3 -m venv /work/venvs/labelfree
    /work/venvs/labelfree/bin/pip install nannyml statsmodels
    NML_DISABLE_USAGE_LOGGING=1 PYTHONPATH=. /work/venvs/labelfree/bin/python benchmarks/bench_label_free.py
"""
from __future__ import annotations

import argparse
import os
import time
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")

import numpy as np

from streammetrics.kernels.binning import make_binning
from streammetrics.kernels.histogram import ScoreHistogram, add_grouped
from streammetrics.monitors.reference import Reference

METRICS = ("roc_auc", "accuracy", "precision", "recall", "f1")


def measured(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    """``(result, CPU seconds, peak traced bytes above the start)`` of ``fn()``: CPU time
    (``time.process_time``, all threads: wall clock is noisy on a shared machine) on a plain
    run (tracemalloc slows Python-heavy code several-fold), memory on a second run under
    tracemalloc."""
    t0 = time.process_time()
    out = fn()
    seconds = time.process_time() - t0
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return out, seconds, peak


def chunks(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def realised(y: np.ndarray, s: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import (
        accuracy_score,
        f1_score,
        precision_score,
        recall_score,
        roc_auc_score,
    )

    return {
        "roc_auc": roc_auc_score(y, s),
        "accuracy": accuracy_score(y, pred),
        "precision": precision_score(y, pred, zero_division=0),
        "recall": recall_score(y, pred, zero_division=0),
        "f1": f1_score(y, pred, zero_division=0),
    }


def run_nannyml(ref: Any, ana: Any, size: int, target: str) -> list[dict[str, float]]:
    import nannyml as nml

    est = nml.CBPE(
        y_pred_proba="y_pred_proba", y_pred="y_pred", y_true=target,
        timestamp_column_name="timestamp", metrics=list(METRICS), chunk_size=size,
        problem_type="classification_binary",
    )
    est.fit(ref)
    df = est.estimate(ana).filter(period="analysis").to_df()
    return [{m: float(df[(m, "value")].iloc[i]) for m in METRICS} for i in range(len(df))]


def run_nannyml_drift(ref: Any, ana: Any, size: int) -> list[float]:
    import nannyml as nml

    calc = nml.UnivariateDriftCalculator(
        column_names=["y_pred_proba"], timestamp_column_name="timestamp",
        continuous_methods=["kolmogorov_smirnov"], chunk_size=size,
    )
    calc.fit(ref)
    df = calc.calculate(ana).filter(period="analysis").to_df()
    return [float(v) for v in df[("y_pred_proba", "kolmogorov_smirnov", "value")]]


def run_streammetrics(ry: np.ndarray, rs: np.ndarray, s: np.ndarray, size: int, exact: bool) -> list[dict[str, float]]:
    reference = Reference.from_arrays(ry, rs, exact=exact, threshold=0.5)
    binning = make_binning(1024, exact)
    out = []
    for sl in chunks(len(s), size):
        window = ScoreHistogram(binning)  # label-free window: the scores only
        add_grouped([window], binning.keys(s[sl]), None, None)
        out.append(reference.metrics(window))
    return out


DATASETS = {  # name: (loader, target column)
    "car_loan": ("load_synthetic_car_loan_dataset", "repaid"),  # shipped with NannyML
    "shifted_margins": ("shifted_margins", "y"),  # generated below
}


def shifted_margins(n: int = 50_000, seed: int = 7) -> tuple[Any, Any, Any]:
    """Continuous, miscalibrated scores (every score distinct) and covariate shift: a
    latent ``x ~ N(mu, 1)``, ``y ~ Bernoulli(sigmoid(2 x))``, the model's score
    ``sigmoid(1.2 x + noise)``; the reference has ``mu = 0``, the analysis period drifts
    ``mu`` from 0 to 1 over its chunks. Returns NannyML's (reference, analysis, targets)."""
    import pandas as pd

    rng = np.random.default_rng(seed)

    def frame(mu: np.ndarray, start: int) -> Any:
        x = rng.normal(mu, 1.0)
        y = (rng.random(len(x)) < 1 / (1 + np.exp(-2 * x))).astype(int)
        s = 1 / (1 + np.exp(-(1.2 * x + rng.normal(0, 0.5, len(x)))))
        ts = pd.date_range("2024-01-01", periods=len(x), freq="min") + pd.Timedelta(minutes=start)
        return pd.DataFrame({"id": np.arange(start, start + len(x)), "timestamp": ts, "y_pred_proba": s, "y": y})

    ref = frame(np.zeros(n), 0)
    ana = frame(np.linspace(0.0, 1.0, n), n)
    return ref, ana.drop(columns=["y"]), ana[["id", "y"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunk-size", type=int, default=5000)
    parser.add_argument("--dataset", choices=[*DATASETS, "multiclass", "all"], default="all")
    parser.add_argument("--multiclass-force-calibration", action="store_true",
                        help="NannyML calibrates every class (as streammetrics does)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    for name in DATASETS if args.dataset == "all" else [args.dataset] if args.dataset != "multiclass" else []:
        bench(name, args.chunk_size)
    if args.dataset in ("multiclass", "all"):
        bench_multiclass(args.chunk_size, args.multiclass_force_calibration)


def bench_multiclass(size: int, force_calibration: bool) -> None:
    """Multiclass CBPE: realised, NannyML's estimate and ours per chunk (see the module docstring)."""
    import nannyml as nml
    from sklearn.metrics import accuracy_score, f1_score

    from streammetrics.events.records import Event
    from streammetrics.monitors.multiclass import MulticlassMonitor
    from streammetrics.monitors.reference_multiclass import MulticlassReference

    ref, ana, tgt = nml.load_synthetic_multiclass_classification_dataset()
    ana = ana.merge(tgt, on="id")
    classes = sorted(c.removeprefix("y_pred_proba_") for c in ref.columns if c.startswith("y_pred_proba_"))
    cols = {c: f"y_pred_proba_{c}" for c in classes}
    for df in (ref, ana):  # both estimate the arg-max classifier
        df["y_pred"] = np.array(classes)[df[list(cols.values())].to_numpy().argmax(axis=1)]
    ana_unlabelled = ana.drop(columns=["y_true"])
    rs = ref[list(cols.values())].to_numpy(dtype=np.float64)
    ry = ref["y_true"].to_numpy()
    s = ana[list(cols.values())].to_numpy(dtype=np.float64)
    y = ana["y_true"].to_numpy()
    pred = np.array(classes)[s.argmax(axis=1)]
    slices = chunks(len(s), size)
    real = [{"accuracy": accuracy_score(y[sl], pred[sl]), "macro_f1": f1_score(y[sl], pred[sl], average="macro")}
            for sl in slices]

    def nannyml_run() -> list[dict[str, float]]:
        if force_calibration:
            from nannyml.performance_estimation.confidence_based import cbpe

            cbpe.needs_calibration = lambda *a, **k: True
        est = nml.CBPE(y_pred_proba=cols, y_pred="y_pred", y_true="y_true", metrics=["accuracy", "f1"],
                       chunk_size=size, problem_type="classification_multiclass")
        est.fit(ref)
        df = est.estimate(ana_unlabelled).filter(period="analysis").to_df()
        return [{"accuracy": float(df[("accuracy", "value")].iloc[i]), "macro_f1": float(df[("f1", "value")].iloc[i])}
                for i in range(len(df))]

    events = [Event(0.0, "m", scores=tuple(row)) for row in s.tolist()]  # parsed once, as the pipeline does

    def ours(per_event: bool) -> list[dict[str, Any]]:
        reference = MulticlassReference.from_arrays(ry, rs, classes=classes)
        out = []
        for sl in slices:
            monitor = MulticlassMonitor(classes, reference=reference)
            if per_event:
                for e in events[sl]:
                    monitor.update_prediction(e)
            else:
                monitor.update_predictions(events[sl])
            m = reference.metrics(monitor)
            out.append({"accuracy": m["estimated_accuracy"], "macro_f1": m["estimated_macro_f1"],
                        "drift_ks": m["drift_ks"]})
        return out

    runs = {"nannyml": measured(nannyml_run)}
    runs["sm event"] = measured(lambda: ours(True))
    runs["sm batch"] = measured(lambda: ours(False))
    names = list(runs)
    print(f"\n=== multiclass: NannyML {nml.__version__} synthetic credit cards, reference {len(ref)}, "
          f"analysis {len(ana)}, {len(real)} chunks of {size}; classes {classes}; NannyML calibration "
          f"{'forced on every class' if force_calibration else 'by its needs_calibration check'}\n")
    for metric in ("accuracy", "macro_f1"):
        print(f"{metric:<10} {'chunk':>5} {'realised':>9} " + " ".join(f"{n:>9}" for n in names))
        for i, r in enumerate(real):
            print(f"{'':<10} {i:>5} {r[metric]:>9.5f} " + " ".join(f"{runs[n][0][i][metric]:>9.5f}" for n in names))
        mae = [np.mean([abs(runs[n][0][i][metric] - r[metric]) for i, r in enumerate(real)]) for n in names]
        print(f"{'':<10} {'MAE':>5} {'':>9} " + " ".join(f"{v:>9.5f}" for v in mae) + "\n")
    nml_t, nml_m = runs["nannyml"][1], runs["nannyml"][2]
    print(f"{'':<18}" + " ".join(f"{n:>9}" for n in names))
    print(f"{'CPU time (s)':<18}" + " ".join(f"{runs[n][1]:>9.3f}" for n in names))
    print(f"{'peak memory (MB)':<18}" + " ".join(f"{runs[n][2] / 1e6:>9.2f}" for n in names))
    print(f"{'time ratio':<18}" + " ".join(f"{runs[n][1] / nml_t:>9.4f}" for n in names))
    print(f"{'memory ratio':<18}" + " ".join(f"{runs[n][2] / nml_m:>9.4f}" for n in names))
    print("max per-class drift_ks per chunk: " + " ".join(f"{r['drift_ks']:.4f}" for r in runs["sm batch"][0]))


def bench(dataset: str, size: int) -> None:
    import nannyml as nml

    loader, target = DATASETS[dataset]
    ref, ana, tgt = getattr(nml, loader)() if loader.startswith("load_") else shifted_margins()
    ana = ana.merge(tgt, on="id")
    for df in (ref, ana):
        df["y_pred"] = (df["y_pred_proba"] >= 0.5).astype(int)
    ana_unlabelled = ana.drop(columns=[target])
    ry = ref[target].to_numpy()
    rs = ref["y_pred_proba"].to_numpy(dtype=np.float64)
    s = ana["y_pred_proba"].to_numpy(dtype=np.float64)
    y = ana[target].to_numpy()
    real = [realised(y[sl], s[sl], (s[sl] >= 0.5).astype(int)) for sl in chunks(len(s), size)]

    nml_est, nml_t, nml_m = measured(lambda: run_nannyml(ref, ana_unlabelled, size, target))
    runs = {"nannyml": (nml_est, nml_t, nml_m)}
    for name, exact in (("sm exact", True), ("sm grid", False)):
        est, t, m = measured(lambda exact=exact: run_streammetrics(ry, rs, s, size, exact))
        runs[name] = ([{k: e[f"estimated_{k}"] for k in METRICS} for e in est], t, m)
        if exact:
            sm_drift = [e["drift_ks"] for e in est]
            sm_drift_bounds = [(e["drift_ks_low"], e["drift_ks_high"]) for e in est]
        else:
            grid_drift_bounds = [(e["drift_ks_low"], e["drift_ks_high"]) for e in est]

    print(f"=== NannyML {nml.__version__}, {dataset}: reference {len(ref)}, analysis {len(ana)}, "
          f"{len(real)} chunks of {size}; predictions y_pred_proba >= 0.5\n")
    names = list(runs)
    for metric in METRICS:
        print(f"{metric:<10} {'chunk':>5} {'realised':>9} " + " ".join(f"{n:>9}" for n in names))
        for i, r in enumerate(real):
            print(f"{'':<10} {i:>5} {r[metric]:>9.5f} " + " ".join(f"{runs[n][0][i][metric]:>9.5f}" for n in names))
        mae = [np.mean([abs(runs[n][0][i][metric] - r[metric]) for i, r in enumerate(real)]) for n in names]
        print(f"{'':<10} {'MAE':>5} {'':>9} " + " ".join(f"{v:>9.5f}" for v in mae) + "\n")
    print(f"{'':<18}" + " ".join(f"{n:>9}" for n in names))
    print(f"{'MAE (all metrics)':<18}" + " ".join(
        f"{np.mean([abs(runs[n][0][i][m] - r[m]) for i, r in enumerate(real) for m in METRICS]):>9.5f}" for n in names))
    print(f"{'CPU time (s)':<18}" + " ".join(f"{runs[n][1]:>9.3f}" for n in names))
    print(f"{'peak memory (MB)':<18}" + " ".join(f"{runs[n][2] / 1e6:>9.2f}" for n in names))
    print(f"{'time ratio':<18}" + " ".join(f"{runs[n][1] / nml_t:>9.4f}" for n in names))
    print(f"{'memory ratio':<18}" + " ".join(f"{runs[n][2] / nml_m:>9.4f}" for n in names))

    from scipy.stats import ks_2samp

    nml_ks, nml_ks_t, nml_ks_m = measured(lambda: run_nannyml_drift(ref, ana_unlabelled, size))
    print(f"\nscore drift (KS) per chunk; NannyML univariate drift {nml_ks_t:.3f} s, {nml_ks_m / 1e6:.2f} MB")
    print(f"{'chunk':>5} {'scipy raw':>10} {'sm exact':>10} {'NannyML':>10} {'grid low':>10} {'grid high':>10}")
    for i, sl in enumerate(chunks(len(s), size)):
        raw = ks_2samp(s[sl], rs).statistic
        lo, hi = grid_drift_bounds[i]
        print(f"{i:>5} {raw:>10.6f} {sm_drift[i]:>10.6f} {nml_ks[i]:>10.6f} {lo:>10.6f} {hi:>10.6f}")
        assert sm_drift_bounds[i][0] <= raw <= sm_drift_bounds[i][1] and lo <= raw <= hi


if __name__ == "__main__":
    main()
