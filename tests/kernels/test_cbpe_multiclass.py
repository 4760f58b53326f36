"""Multiclass CBPE kernel against NannyML itself (its IsotonicCalibrator per class,
``_calibrate_predicted_probabilities`` normalisation, ``estimate_f1`` and the accuracy of the
predicted class); skipped where NannyML is not installed (it is in /work/venvs/labelfree)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from streammetrics.kernels import cbpe, cbpe_multiclass


def _fits(y, s):
    k = s.shape[1]
    out = []
    for c in range(k):
        order = np.argsort(s[:, c], kind="stable")
        col, pos = s[order, c], (y[order] == c).astype(float)
        keys, inv = np.unique(col, return_inverse=True)
        p = np.bincount(inv, weights=pos, minlength=len(keys))
        n = np.bincount(inv, minlength=len(keys)) - p
        out.append(cbpe.isotonic_fit(keys, n, p))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_multiclass_estimates_equal_nannyml_itself(seed):
    os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")
    pd = pytest.importorskip("pandas")
    nml_metrics = pytest.importorskip("nannyml.performance_estimation.confidence_based.metrics")
    nml_cbpe = pytest.importorskip("nannyml.performance_estimation.confidence_based.cbpe")
    from nannyml.calibration import IsotonicCalibrator

    rng = np.random.default_rng(seed)
    classes = ["a", "b", "c"]
    s_ref = np.round(rng.dirichlet([1, 1, 1], 1000), 3)
    y_ref = np.array([rng.choice(3, p=np.clip(r, 1e-9, None) / np.clip(r, 1e-9, None).sum()) for r in s_ref])
    s = np.round(rng.dirichlet([3, 1, 0.5], 400), 3)
    cols = {c: f"p_{c}" for c in classes}
    calibrators = {}
    for i, c in enumerate(classes):
        calibrators[c] = IsotonicCalibrator()
        calibrators[c].fit(s_ref[:, i], (y_ref == i).astype(int))
    data = pd.DataFrame({cols[c]: s[:, i] for i, c in enumerate(classes)})
    data["y_pred"] = np.array(classes)[s.argmax(axis=1)]
    data["y_true"] = "a"  # not used by the calibration
    cal = nml_cbpe._calibrate_predicted_probabilities(data, "y_true", cols, calibrators)
    p_nml = cal[[cols[c] for c in classes]].to_numpy()
    p = cbpe_multiclass.calibrated_rows(s, _fits(y_ref, s_ref))
    np.testing.assert_allclose(p, p_nml, atol=1e-12)
    y_preds, y_probas, _ = nml_metrics._get_binarized_multiclass_predictions(cal, "y_pred", cols)
    f1 = np.mean([nml_metrics.estimate_f1(yp, pp) for yp, pp in zip(y_preds, y_probas)])
    acc = np.mean(np.max(np.asarray(y_preds).T * np.asarray(y_probas).T, axis=1))
    got = cbpe_multiclass.estimated_metrics(*cbpe_multiclass.expected_sums(s, p, None))
    assert got["macro_f1"] == pytest.approx(f1, abs=1e-12)
    assert got["accuracy"] == pytest.approx(acc, abs=1e-12)
