"""Multiclass CBPE parity with NannyML on the same windows (NannyML's synthetic multiclass
credit-card dataset). Our estimates come from the pipeline's per-event path (predictions
without labels, ``--reference``), NannyML's from ``CBPE(problem_type="classification_multiclass")``.

NannyML calibrates a class only when its cross-validated ``needs_calibration`` check on the
reference rows says so; we always calibrate (a histogram keeps no rows to split). With that
check forced to True both compute the same formula and agree to float rounding; with
NannyML's default the difference is the calibration decision, bounded here by what the
dataset shows (documented in ``benchmarks/bench_label_free.py``).

NannyML is a test/benchmark dependency only: without it these tests skip.
"""
from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")
nml = pytest.importorskip("nannyml", reason="NannyML is not installed (benchmark/test-only dependency)")

from streammetrics.monitors.reference_multiclass import MulticlassReference  # noqa: E402
from streammetrics.stream.pipeline import Pipeline, PipelineConfig  # noqa: E402

T0 = 1767225600
N, SIZE = 3000, 1000


@pytest.fixture(scope="module")
def data():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, ana, tgt = nml.load_synthetic_multiclass_classification_dataset()
    ref, ana = ref.iloc[:N].copy(), ana.iloc[:N].merge(tgt, on="id")
    classes = sorted(c.removeprefix("y_pred_proba_") for c in ref.columns if c.startswith("y_pred_proba_"))
    cols = {c: f"y_pred_proba_{c}" for c in classes}
    for df in (ref, ana):  # both estimate the arg-max classifier (numpy's first maximum)
        df["y_pred"] = np.array(classes)[df[list(cols.values())].to_numpy().argmax(axis=1)]
    return ref, ana, classes, cols


def _nannyml(ref, ana, cols, monkeypatch, force: bool) -> list[dict[str, float]]:
    from nannyml.performance_estimation.confidence_based import cbpe

    if force:
        monkeypatch.setattr(cbpe, "needs_calibration", lambda *a, **k: True)
    est = nml.CBPE(y_pred_proba=cols, y_pred="y_pred", y_true="y_true", problem_type="classification_multiclass",
                   metrics=["accuracy", "f1"], chunk_size=SIZE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(ref)
        df = est.estimate(ana.drop(columns=["y_true"])).filter(period="analysis").to_df()
    return [{"accuracy": float(df[("accuracy", "value")].iloc[i]), "f1": float(df[("f1", "value")].iloc[i])}
            for i in range(len(df))]


def _ours(ref, ana, classes, cols) -> list[dict]:
    reference = MulticlassReference.from_arrays(ref["y_true"].to_numpy(), ref[list(cols.values())].to_numpy(),
                                                classes=classes, exact=True)
    pipe = Pipeline(PipelineConfig(task="multiclass", classes=classes, window=float(SIZE),
                                   references={("m", ""): reference}))
    S = ana[list(cols.values())].to_numpy()
    for i, row in enumerate(S):  # no labels: predictions with an id await theirs
        pipe.process(json.dumps({"ts": T0 - T0 % SIZE + i, "model": "m", "scores": row.tolist(), "id": str(i)}))
    snaps = sorted((s for s in pipe.flush() if s["revision"] == 0), key=lambda s: s["window"]["start"])
    assert [s["count"] for s in snaps] == [SIZE] * (N // SIZE)
    return [s["metrics"] for s in snaps]


def test_multiclass_cbpe_equals_nannyml_with_calibration(data, monkeypatch):
    ref, ana, classes, cols = data
    theirs = _nannyml(ref, ana, cols, monkeypatch, force=True)
    ours = _ours(ref, ana, classes, cols)
    assert len(ours) == len(theirs) == N // SIZE
    for o, t in zip(ours, theirs):
        assert o["accuracy"] is None  # no label yet
        assert o["estimated_accuracy"] == pytest.approx(t["accuracy"], abs=1e-12)
        assert o["estimated_macro_f1"] == pytest.approx(t["f1"], abs=1e-12)


def test_multiclass_cbpe_close_to_nannyml_default(data, monkeypatch):
    """NannyML's default skips calibration where its check says it does not help; on this
    dataset that moves its estimates by less than 0.01 from ours."""
    ref, ana, classes, cols = data
    theirs = _nannyml(ref, ana, cols, monkeypatch, force=False)
    ours = _ours(ref, ana, classes, cols)
    for o, t in zip(ours, theirs):
        assert abs(o["estimated_accuracy"] - t["accuracy"]) < 0.01
        assert abs(o["estimated_macro_f1"] - t["f1"]) < 0.01
