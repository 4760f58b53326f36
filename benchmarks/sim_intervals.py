"""Coverage of the snapshot intervals and false alarms of the change test (issue 26).

Simulates windows of binary, multiclass and regression events from populations whose metrics
are known exactly, computes each window's intervals with the library's kernels
(:mod:`streammetrics.kernels.intervals`, the formulas ``BinaryMonitor.intervals`` and the
fleet pass call; a sample of windows is also run through ``BinaryMonitor`` and checked equal),
and prints per setting and metric the share of windows given an interval and its coverage of
the population value against nominal. Then the change test (``differences`` +
Benjamini-Hochberg) on streams without a change (false alarms, per test and per window after
BH) and with one (detection rate).

Binary population: ``y ~ Bernoulli(prevalence)``, ``x | y ~ N(mu y, 1)``, score the posterior
``P(y = 1 | x)`` under the reference prevalence (calibrated when the window's prevalence is the
reference's; label shift: it is not). Its ROC AUC is ``Phi(mu / sqrt 2)``, the confusion
metrics at threshold 0.5 follow from the normal tails, log loss and Brier by quadrature.

Weighted windows: the same events with weights ``exp(N(0, 0.75^2))`` independent of them (so
the weighted population metrics are the unweighted ones; Kish's effective size is about 57% of
the count), through the kernels' weighted path (sums of squared weights). Regression: R² of
``y ~ N(0, 1)``, ``y_pred = y + N(0, 0.5^2)`` (0.75), also with Student-t(5) errors and with
weights. Labels: hard labels from fixed ``K x K`` cell shares (balanced accuracy, macro precision and
recall, weighted F1, Matthews, Cohen's kappa; with weights too). Multiclass scores: softmax scores
of ``N(1.2 e_y, I)`` rounded to 0.01, top-2 accuracy and the one-vs-rest ROC AUC means against a
Monte Carlo truth (10^6 events). CBPE: windows of scores only, each compared after the fact with its realised metrics
(labels drawn from the calibrated posterior, the windows' score distribution shifted or not),
against a 5,000-event reference redrawn every 20 windows; label shift (CBPE's assumption
violated) is printed but not a target.

    python benchmarks/sim_intervals.py            # 10,000 windows per setting (sizes 50..5,000)
    python benchmarks/sim_intervals.py --quick    # a smoke run (a few seconds)
    python benchmarks/sim_intervals.py --only "regression t(5)"   # the settings whose label holds this
    python -m benchmarks --only sim_intervals     # its two targets in the runner's table

Also checks the Mann-Whitney U statistic of each simulated window against scipy (when
installed). NannyML is not installed here, so its sampling error is not compared.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from typing import Sequence

import numpy as np

from streammetrics.kernels import intervals as iv
from streammetrics.kernels.exact_sum import probability_terms

MU = 1.5
THRESHOLD = 0.5


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def binary_truth(prevalence: float, reference: float, mu: float = MU) -> dict[str, float]:
    """The population metrics of the binary model (see the module docstring)."""
    bias = math.log(reference / (1.0 - reference)) - mu * mu / 2.0
    t = -bias / mu  # score >= 0.5 <=> x >= t
    tpr, fpr = 1.0 - _phi(t - mu), 1.0 - _phi(t)
    tp, fn = prevalence * tpr, prevalence * (1.0 - tpr)
    fp, tn = (1.0 - prevalence) * fpr, (1.0 - prevalence) * (1.0 - fpr)
    x = np.linspace(-14.0, 14.0 + mu, 400_001)
    dx = x[1] - x[0]
    s = 1.0 / (1.0 + np.exp(-(bias + mu * x)))
    f0 = np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)
    f1 = np.exp(-(x - mu) ** 2 / 2.0) / math.sqrt(2.0 * math.pi)
    eps = float(np.finfo(np.float64).eps)
    l1, l0 = -np.log(np.clip(s, eps, 1 - eps)), -np.log(np.clip(1.0 - s, eps, 1 - eps))
    log_loss = prevalence * float((f1 * l1).sum() * dx) + (1.0 - prevalence) * float((f0 * l0).sum() * dx)
    brier = prevalence * float((f1 * (1.0 - s) ** 2).sum() * dx) + (1.0 - prevalence) * float((f0 * s * s).sum() * dx)
    mcc_den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return {
        "accuracy": tp + tn, "balanced_accuracy": (tpr + 1.0 - fpr) / 2.0,
        "precision": tp / (tp + fp) if tp + fp > 0 else math.nan, "recall": tpr,
        "f1": 2 * tp / (2 * tp + fp + fn), "specificity": 1.0 - fpr,
        "matthews_corrcoef": (tp * tn - fp * fn) / mcc_den if mcc_den > 0 else math.nan,
        "roc_auc": _phi(mu / math.sqrt(2.0)), "log_loss": log_loss, "brier_score": brier,
        "positive_rate": prevalence, "predicted_positive_rate": tp + fp,
    }


def binary_windows(n: int, count: int, prevalence: float, reference: float, rng: np.random.Generator,
                   mu: float = MU) -> tuple[np.ndarray, np.ndarray]:
    """``count`` windows of ``n`` events as rows ``(y, score)``, each row sorted by score."""
    y = rng.random((count, n)) < prevalence
    x = rng.standard_normal((count, n)) + mu * y
    bias = math.log(reference / (1.0 - reference)) - mu * mu / 2.0
    s = 1.0 / (1.0 + np.exp(-(bias + mu * x)))
    order = np.argsort(s, axis=1, kind="stable")
    return np.take_along_axis(y, order, axis=1).astype(np.float64), np.take_along_axis(s, order, axis=1)


def binary_columns(y: np.ndarray, s: np.ndarray, z: float) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                                                     dict[str, np.ndarray]]:
    """The kernel's interval columns of windows given as sorted rows, and the windows' metric
    values (for the change test)."""
    count, n = y.shape
    pred = s >= THRESHOLD
    tp = (y * pred).sum(axis=1)
    fn = y.sum(axis=1) - tp
    fp = pred.sum(axis=1) - tp
    tn = n - tp - fn - fp
    positives, negatives = tp + fn, tn + fp
    ranks = np.arange(1, n + 1, dtype=np.float64)
    u = (y * ranks).sum(axis=1) - positives * (positives + 1) / 2.0  # Mann-Whitney U of the positives
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = u / (positives * negatives)
    signed = np.where(y > 0, s, -s)
    log_terms, brier_terms = probability_terms(signed.ravel())
    log_loss = log_terms.reshape(count, n).mean(axis=1)
    brier = brier_terms.reshape(count, n).mean(axis=1)
    flat_s = s.ravel()
    columns = iv.binary_interval_columns(
        np.stack([tn, fp, fn, tp], axis=1), np.arange(count) * n, flat_s, flat_s, 1.0 - y.ravel(), y.ravel(),
        auc, auc, log_loss, brier, np.full(count, float(n)), pred.sum(axis=1).astype(np.float64), z)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = {
            "accuracy": (tp + tn) / n, "balanced_accuracy": (tp / positives + tn / negatives) / 2.0,
            "precision": tp / (tp + fp), "recall": tp / positives, "f1": 2 * tp / (2 * tp + fp + fn),
            "specificity": tn / negatives,
            "matthews_corrcoef": (tp * tn - fp * fn) / np.sqrt((tp + fp) * positives * negatives * (tn + fn)),
            "roc_auc": auc, "log_loss": log_loss, "brier_score": brier, "positive_rate": positives / n,
            "predicted_positive_rate": pred.sum(axis=1) / n, "u": u,
        }
    return columns, values


def weighted_columns(y: np.ndarray, s: np.ndarray, w: np.ndarray,
                     z: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The kernel's interval columns of weighted windows given as sorted rows (distinct scores:
    one level per event), on the weighted path (sums of squared weights)."""
    count, n = y.shape
    pred = s >= THRESHOLD
    neg_w, pos_w = w * (1.0 - y), w * y
    cells = np.stack([(neg_w * ~pred).sum(axis=1), (neg_w * pred).sum(axis=1), (pos_w * ~pred).sum(axis=1),
                      (pos_w * pred).sum(axis=1)], axis=1)
    w2 = w * w
    squares = np.stack([(w2 * (1 - y) * ~pred).sum(axis=1), (w2 * (1 - y) * pred).sum(axis=1),
                        (w2 * y * ~pred).sum(axis=1), (w2 * y * pred).sum(axis=1), (w2 * (1 - y)).sum(axis=1),
                        (w2 * y).sum(axis=1), w2.sum(axis=1)], axis=1)
    below = np.cumsum(neg_w, axis=1) - neg_w
    total_n, total_p, total = neg_w.sum(axis=1), pos_w.sum(axis=1), w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (pos_w * below).sum(axis=1) / (total_n * total_p)
    signed = np.where(y > 0, s, -s)
    log_terms, brier_terms = probability_terms(signed.ravel())
    log_loss = (w * log_terms.reshape(count, n)).sum(axis=1) / total
    brier = (w * brier_terms.reshape(count, n)).sum(axis=1) / total
    flat_s = s.ravel()
    return iv.binary_interval_columns(
        cells, np.arange(count) * n, flat_s, flat_s, neg_w.ravel(), pos_w.ravel(), auc, auc, log_loss, brier,
        total, (w * pred).sum(axis=1), z, squares)


def coverage_weighted(n: int, windows: int, prevalence: float, z: float,
                      rng: np.random.Generator) -> dict[str, tuple[int, int]]:
    """:func:`coverage_binary` of weighted windows (weights ``exp(N(0, 0.75^2))``)."""
    truth = binary_truth(prevalence, prevalence)
    out = {k: [0, 0] for k in iv.BINARY_INTERVALS}
    for size in _chunks(windows, n):
        y, s = binary_windows(n, size, prevalence, prevalence, rng)
        w = np.exp(0.75 * rng.standard_normal((size, n)))
        columns = weighted_columns(y, s, w, z)
        for k in iv.BINARY_INTERVALS:
            lo, hi = columns[k]
            given = ~np.isnan(lo)
            out[k][0] += int(given.sum())
            out[k][1] += int(((lo <= truth[k]) & (truth[k] <= hi) & given).sum())
    return {k: (a, b) for k, (a, b) in out.items()}


def check_weighted_monitor_path(rng: np.random.Generator, z: float, confidence: float) -> int:
    """Windows where a weighted ``BinaryMonitor.intervals`` differs from :func:`weighted_columns`."""
    from streammetrics import BinaryMonitor

    y, s = binary_windows(300, 20, 0.2, 0.2, rng)
    w = np.exp(0.75 * rng.standard_normal(y.shape))
    columns = weighted_columns(y, s, w, z)
    bad = 0
    for i in range(len(y)):
        m = BinaryMonitor().update_many([{"y_true": int(a), "score": float(b), "weight": float(c)}
                                         for a, b, c in zip(y[i], s[i], w[i])])
        got = m.intervals(confidence)
        assert got is not None
        want = iv.interval_record(iv.BINARY_INTERVALS, columns, i, confidence)
        for k in iv.BINARY_INTERVALS:
            a, b = got["intervals"][k], want["intervals"][k]
            if (a is None) != (b is None) or (a is not None and max(abs(a[0] - b[0]), abs(a[1] - b[1])) > 1e-9):
                bad += 1
    return bad


#: CBPE's estimates and the realised metrics they are compared with
ESTIMATES = ("estimated_roc_auc", "estimated_accuracy", "estimated_precision", "estimated_recall", "estimated_f1")


def _posterior_events(n: int, prevalence: float, shift: float, rng: np.random.Generator,
                      reference: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Events whose scores are the posterior under ``reference`` prevalence and whose labels are
    drawn from it (calibrated: CBPE's assumption) when ``prevalence`` is ``reference``; the
    scores' distribution moved by ``shift`` (covariate shift: still calibrated). Another
    prevalence: labels from the class mixture (label shift: the scores are not calibrated)."""
    y0 = rng.random(n) < prevalence
    x = rng.standard_normal(n) + MU * y0 + shift
    bias = math.log(reference / (1.0 - reference)) - MU * MU / 2.0
    s = 1.0 / (1.0 + np.exp(-(bias + MU * x)))
    y = (rng.random(n) < s) if prevalence == reference else y0
    return y.astype(np.float64), s


def _realised(y: np.ndarray, s: np.ndarray) -> dict[str, float]:
    order = np.argsort(s, kind="stable")
    ys = y[order]
    pos = ys.sum()
    neg = len(ys) - pos
    ranks = np.arange(1, len(ys) + 1, dtype=np.float64)
    auc = ((ys * ranks).sum() - pos * (pos + 1) / 2.0) / (pos * neg) if pos and neg else math.nan
    pred = s >= THRESHOLD
    tp = float((y * pred).sum())
    fp, fn = float(pred.sum()) - tp, float(y.sum()) - tp
    tn = len(y) - tp - fp - fn
    return {"estimated_roc_auc": auc, "estimated_accuracy": (tp + tn) / len(y),
            "estimated_precision": tp / (tp + fp) if tp + fp else 0.0,
            "estimated_recall": tp / (tp + fn) if tp + fn else 0.0,
            "estimated_f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0}


def coverage_cbpe(n: int, windows: int, prevalence: float, shift: float, confidence: float,
                  rng: np.random.Generator) -> dict[str, tuple[int, int]]:
    """Per CBPE estimate ``(windows given an interval, of which covering the realised value)``:
    ``Reference.estimate_intervals`` of a ``ScoreDistribution`` of the window's scores, against
    a 5,000-event reference (prevalence 0.2, calibrated) redrawn every 20 windows."""
    import warnings

    from streammetrics.core.exceptions import UndefinedMetricWarning
    from streammetrics.metrics.score_distribution import ScoreDistribution
    from streammetrics.monitors.reference import Reference

    out = {k: [0, 0] for k in ESTIMATES}
    ref = None
    for i in range(windows):
        if i % 20 == 0:
            ry, rs = _posterior_events(5000, 0.2, 0.0, rng)
            ref = Reference.from_arrays(ry.astype(int), rs)
        y, s = _posterior_events(n, prevalence, shift, rng)
        assert ref is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            got = ref.estimate_intervals(ScoreDistribution().update_many(s), confidence)
        real = _realised(y, s)
        for k in ESTIMATES:
            pair = got[k]
            if pair is not None and not math.isnan(real[k]):
                out[k][0] += 1
                out[k][1] += pair[0] <= real[k] <= pair[1]
    return {k[len("estimated_"):]: (a, b) for k, (a, b) in out.items()}


#: the three-class population of the multiclass CBPE windows: priors and the class means in 2-D
MC_PRIORS = np.array([0.5, 0.3, 0.2])
MC_MEANS = np.array([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])


def _mc_events(n: int, shift: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, score rows)``: ``y ~ MC_PRIORS``, ``x | y ~ N(MC_MEANS[y] + shift, I)``, the
    score row the posterior ``P(y | x)`` under the priors (calibrated; the shift moves the
    scores' distribution, covariate shift, the posterior being the unshifted population's)."""
    y = rng.choice(3, size=n, p=MC_PRIORS)
    x = MC_MEANS[y] + shift + rng.standard_normal((n, 2))
    logits = np.log(MC_PRIORS) + x @ MC_MEANS.T - 0.5 * (MC_MEANS * MC_MEANS).sum(axis=1)
    s = np.exp(logits - logits.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(3, p=row) for row in s]) if shift else y  # (labels from the posterior)
    return y, s


def _mc_realised(y: np.ndarray, s: np.ndarray) -> dict[str, float]:
    pred = s.argmax(axis=1)
    f1 = []
    for c in range(3):
        tp = float(np.sum((pred == c) & (y == c)))
        den = tp + 0.5 * (float(np.sum(pred == c)) - tp + float(np.sum(y == c)) - tp)
        f1.append(tp / den if den else 0.0)
    return {"estimated_accuracy": float(np.mean(pred == y)), "estimated_macro_f1": float(np.mean(f1))}


def coverage_cbpe_multiclass(n: int, windows: int, shift: float, confidence: float,
                             rng: np.random.Generator) -> dict[str, tuple[int, int]]:
    """Per multiclass CBPE estimate ``(windows given an interval, of which covering the realised
    value)``: ``MulticlassEstimate.intervals`` of the window's score rows against a 5,000-event
    reference (binned, as the service keeps it) redrawn every 20 windows."""
    from streammetrics.monitors.reference_multiclass import MulticlassReference

    names = ("estimated_accuracy", "estimated_macro_f1")
    out = {k: [0, 0] for k in names}
    ref = None
    for i in range(windows):
        if i % 20 == 0:
            ry, rs = _mc_events(5000, 0.0, rng)
            ref = MulticlassReference.from_arrays(ry, rs, classes=[0, 1, 2])
        y, s = _mc_events(n, shift, rng)
        assert ref is not None
        got = ref.estimator().update_many(s).intervals(confidence)
        real = _mc_realised(y, s)
        for k in names:
            pair = got[k]
            if pair is not None:
                out[k][0] += 1
                out[k][1] += pair[0] <= real[k] <= pair[1]
    return {k[len("estimated_"):]: (a, b) for k, (a, b) in out.items()}


def _chunks(total: int, n: int) -> list[int]:
    per = max(1, 1_000_000 // n)
    return [min(per, total - i) for i in range(0, total, per)]


def coverage_binary(n: int, windows: int, prevalence: float, reference: float, z: float,
                    rng: np.random.Generator, scipy_checks: list[int]) -> dict[str, tuple[int, int]]:
    """Per metric ``(windows given an interval, of which covering the population value)``."""
    truth = binary_truth(prevalence, reference)
    out = {k: [0, 0] for k in iv.BINARY_INTERVALS}
    for size in _chunks(windows, n):
        y, s = binary_windows(n, size, prevalence, reference, rng)
        columns, values = binary_columns(y, s, z)
        for k in iv.BINARY_INTERVALS:
            lo, hi = columns[k]
            given = ~np.isnan(lo)
            out[k][0] += int(given.sum())
            out[k][1] += int(((lo <= truth[k]) & (truth[k] <= hi) & given).sum())
        if scipy_checks[0] < 20:
            scipy_checks[1] += _check_scipy(y, s, values["u"])
            scipy_checks[0] += 1
    return {k: (a, b) for k, (a, b) in out.items()}


def _check_scipy(y: np.ndarray, s: np.ndarray, u: np.ndarray) -> int:
    """Windows (of the first 5) whose U statistic differs from ``scipy.stats.mannwhitneyu``'s."""
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:  # pragma: no cover - scipy absent
        return 0
    bad = 0
    for i in range(min(5, len(y))):
        pos, neg = s[i][y[i] > 0], s[i][y[i] == 0]
        if len(pos) and len(neg) and mannwhitneyu(pos, neg).statistic != u[i]:
            bad += 1
    return bad


def check_monitor_path(rng: np.random.Generator, z: float, confidence: float) -> int:
    """Windows where ``BinaryMonitor.intervals`` differs from the kernel columns used above."""
    from streammetrics import BinaryMonitor

    y, s = binary_windows(300, 20, 0.2, 0.2, rng)
    columns, _ = binary_columns(y, s, z)
    bad = 0
    for i in range(len(y)):
        m = BinaryMonitor().update_many([{"y_true": int(a), "score": float(b)} for a, b in zip(y[i], s[i])])
        got = m.intervals(confidence)
        assert got is not None
        want = iv.interval_record(iv.BINARY_INTERVALS, columns, i, confidence)
        for k in iv.BINARY_INTERVALS:
            a, b = got["intervals"][k], want["intervals"][k]
            if (a is None) != (b is None) or (a is not None and max(abs(a[0] - b[0]), abs(a[1] - b[1])) > 1e-9):
                bad += 1
    return bad


def change_test(n: int, windows: int, prevalence: float, z: float, fdr: float, rng: np.random.Generator,
                mu_window: float = MU) -> tuple[float, float, float]:
    """``(per-test rejection rate at 1 - confidence, share of windows with a BH discovery, share
    of windows whose roc_auc change is significant after BH)``: each window compared with a
    reference window of 5,000 events from the base population, the reference redrawn every 20
    windows (a false-alarm rate is over the reference's sampling too: against one reference the
    rate is that draw's, 1.1-6.0% per setting in one run)."""
    tests = rejected = any_bh = auc_bh = 0
    alpha = 2.0 * (1.0 - _phi(z))
    for size in _chunks(windows, n):
        ref_y, ref_s = binary_windows(5000, -(-size // 20), prevalence, prevalence, rng)
        ref_cols, ref_vals = binary_columns(ref_y, ref_s, z)
        which = np.arange(size) // 20
        y, s = binary_windows(n, size, prevalence, prevalence, rng, mu=mu_window)
        cols, vals = binary_columns(y, s, z)
        p_all = []
        for k in iv.BINARY_INTERVALS:
            lo, hi = cols[k]
            blo, bhi = ref_cols[k][0][which], ref_cols[k][1][which]
            d = iv.differences(vals[k], lo, hi, ref_vals[k][which], blo, bhi, z)
            p = np.where(np.isnan(lo) | np.isnan(blo), np.nan, d["p_value"])
            p_all.append(p)
        p_mat = np.stack(p_all, axis=1)
        given = ~np.isnan(p_mat)
        tests += int(given.sum())
        rejected += int((p_mat[given] < alpha).sum())
        auc_index = iv.BINARY_INTERVALS.index("roc_auc")
        for row in range(size):
            keep = np.flatnonzero(given[row])
            sig = iv.benjamini_hochberg(p_mat[row, keep], fdr)
            any_bh += bool(sig.any())
            auc_bh += bool(sig[np.flatnonzero(keep == auc_index)].any()) if auc_index in keep else 0
    return rejected / max(tests, 1), any_bh / windows, auc_bh / windows


def coverage_regression(n: int, windows: int, z: float, confidence: float, rng: np.random.Generator,
                        sigma: float = 0.5, errors: str = "normal",
                        weighted: bool = False) -> dict[str, tuple[int, int]]:
    """Regression ``y ~ N(0, 1)``, errors ``d ~ sigma N(0, 1)`` (or ``sigma`` times a Student-t(5)
    scaled to unit variance), weights ``exp(N(0, 0.75^2))`` or none, through ``Regression.interval``."""
    from streammetrics.metrics.regression import Regression

    mae = sigma * math.sqrt(2.0 / math.pi) if errors == "normal" else sigma * math.sqrt(3.0 / 5.0) * (
        2.0 * math.sqrt(5.0) * math.gamma(3.0) / (math.sqrt(math.pi) * math.gamma(2.5) * 4.0))
    truth = {"mae": mae, "mse": sigma * sigma, "r2": 1.0 - sigma * sigma, "rmse": sigma}
    out = {k: [0, 0] for k in truth}
    for _ in range(windows):
        y = rng.standard_normal(n)
        noise = rng.standard_normal(n) if errors == "normal" else rng.standard_t(5, n) * math.sqrt(3.0 / 5.0)
        weights = np.exp(0.75 * rng.standard_normal(n)) if weighted else None
        r = Regression().update_many(y, y + sigma * noise, weights)
        for k in truth:
            got = r.interval(k, confidence)
            if got is not None:
                out[k][0] += 1
                out[k][1] += got[0] <= truth[k] <= got[1]
    return {k: (a, b) for k, (a, b) in out.items()}


def coverage_multiclass(n: int, windows: int, confidence: float,
                        rng: np.random.Generator) -> dict[str, tuple[int, int]]:
    """Three classes, fixed cell shares; accuracy and macro F1 through ``ConfusionMatrix.interval``."""
    from streammetrics.metrics.confusion import ConfusionMatrix

    p = np.array([[0.30, 0.05, 0.02], [0.06, 0.25, 0.04], [0.03, 0.05, 0.20]])
    r, c = p.sum(axis=1), p.sum(axis=0)
    truth = {"accuracy": float(np.trace(p)), "macro_f1": float(np.mean(2 * np.diag(p) / (r + c)))}
    out = {k: [0, 0] for k in truth}
    cells = rng.multinomial(n, p.ravel(), size=windows)
    for row in cells:
        counts = {(i // 3, i % 3): float(v) for i, v in enumerate(row.tolist()) if v}
        cm = ConfusionMatrix.from_dict({"type": "ConfusionMatrix", "version": 1, "config": {"labels": None},
                                        "state": {"unit_weights": True, "count": n, "total_weight": float(n),
                                                  "cells": [[t, q, w] for (t, q), w in counts.items()]}})
        for k in truth:
            got = cm.interval(k, confidence)
            if got is not None:
                out[k][0] += 1
                out[k][1] += got[0] <= truth[k] <= got[1]
    return {k: (a, b) for k, (a, b) in out.items()}


#: the label settings' populations: (class prior, probability of predicting the true class; the
#: errors spread evenly over the other classes)
LABEL_POPULATIONS = {"K=3 balanced": ([1 / 3] * 3, 0.7), "K=3 imbalanced": ([0.6, 0.3, 0.1], 0.8),
                     "K=5 imbalanced": ([0.4, 0.2, 0.2, 0.1, 0.1], 0.6), "K=3 accurate": ([0.5, 0.3, 0.2], 0.95)}


def coverage_labels(n: int, windows: int, population: str, confidence: float, rng: np.random.Generator,
                    weighted: bool = False) -> dict[str, tuple[int, int]]:
    """Hard labels from fixed cell shares (:data:`LABEL_POPULATIONS`), the confusion-matrix metrics
    (:data:`~streammetrics.kernels.intervals.MATRIX_INTERVALS`) through ``ConfusionMatrix.interval``;
    their population values are the metrics of the shares (:func:`~streammetrics.kernels.intervals.
    matrix_value_gradient`). Weighted: weights ``exp(N(0, 0.75^2))`` independent of the events."""
    from streammetrics.metrics.confusion import ConfusionMatrix

    prior, right = LABEL_POPULATIONS[population]
    k = len(prior)
    shares = np.full((k, k), (1.0 - right) / (k - 1))
    np.fill_diagonal(shares, right)
    shares *= np.asarray(prior)[:, None]
    truth = {m: iv.matrix_value_gradient(shares, m)[0] for m in iv.MATRIX_INTERVALS}
    out = {m: [0, 0] for m in truth}
    for _ in range(windows):
        cell = rng.choice(k * k, size=n, p=shares.ravel()) if weighted else None
        if weighted:
            assert cell is not None
            cm = ConfusionMatrix().update_many((cell // k).tolist(), (cell % k).tolist(),
                                               np.exp(0.75 * rng.standard_normal(n)))
        else:
            row = rng.multinomial(n, shares.ravel())
            cm = ConfusionMatrix.from_dict({"type": "ConfusionMatrix", "version": 1, "config": {"labels": None},
                                            "state": {"unit_weights": True, "count": n, "total_weight": float(n),
                                                      "cells": [[i // k, i % k, float(v)] for i, v in
                                                                enumerate(row.tolist()) if v]}})
        for m in truth:
            got = cm.interval(m, confidence)
            if got is not None:
                out[m][0] += 1
                out[m][1] += got[0] <= truth[m] <= got[1]
    return {m: (a, b) for m, (a, b) in out.items()}


def _mc_scores(n: int, prior: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Multiclass scores: ``x ~ N(1.2 e_y, I)``, scores ``softmax(x)`` rounded to 0.01 (ties)."""
    y = rng.choice(len(prior), size=n, p=prior)
    x = rng.standard_normal((n, len(prior))) + 1.2 * np.eye(len(prior))[y]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return y, np.round(e / e.sum(axis=1, keepdims=True), 2)


def multiclass_scores_truth(prior: np.ndarray, rng: np.random.Generator, n: int = 1_000_000) -> dict[str, float]:
    """Population ``top_k_accuracy`` (k = 2), ``roc_auc`` macro and weighted of :func:`_mc_scores`
    by Monte Carlo on ``n`` events (ties count half; standard error about 0.0004)."""
    from streammetrics.metrics.multiclass_scores import MulticlassScores

    y, s = _mc_scores(n, prior, rng)
    big = MulticlassScores(list(range(len(prior)))).update_many(y, s)
    warnings.simplefilter("ignore")  # (rounded rows do not sum to 1 exactly: scikit-learn's warning)
    return {"top_k_accuracy": big.top_k_accuracy(k=2), "roc_auc": big.roc_auc(),
            "roc_auc_weighted": big.roc_auc(average="weighted")}


def coverage_multiclass_scores(n: int, windows: int, prior: Sequence[float], truth: dict[str, float],
                               confidence: float, rng: np.random.Generator) -> dict[str, tuple[int, int]]:
    """``top_k_accuracy`` (Wilson) and the one-vs-rest ``roc_auc`` macro and weighted (the classes'
    DeLong intervals averaged) through ``MulticlassScores.interval``."""
    from streammetrics.metrics.multiclass_scores import MulticlassScores

    p = np.asarray(prior)
    out = {m: [0, 0] for m in truth}
    for _ in range(windows):
        y, s = _mc_scores(n, p, rng)
        sc = MulticlassScores(list(range(len(p)))).update_many(y, s)
        got = {"top_k_accuracy": sc.interval("top_k_accuracy", confidence, k=2),
               "roc_auc": sc.interval("roc_auc", confidence),
               "roc_auc_weighted": sc.interval("roc_auc", confidence, average="weighted")}
        for m, pair in got.items():
            if pair is not None:
                out[m][0] += 1
                out[m][1] += pair[0] <= truth[m] <= pair[1]
    return {m: (a, b) for m, (a, b) in out.items()}


def _row(label: str, stats: dict[str, tuple[int, int]], windows: int, nominal: float, worst: list) -> str:
    parts = []
    for k, (given, covered) in stats.items():
        if given:
            cov = covered / given
            if given >= 200:  # (a coverage of fewer windows is noise)
                worst.append((cov - nominal, label, k, given))
            parts.append(f"{k}={100 * cov:.1f}%({100 * given / windows:.0f}%)")
        else:
            parts.append(f"{k}=-")
    return f"{label}: " + " ".join(parts)


#: the last :func:`main` run's lowest coverage, its nominal level and the highest false-alarm rate
LAST: dict[str, float] = {}


def targets(quick: bool) -> list:
    """``python -m benchmarks``' rows: the lowest coverage against nominal minus one point, and
    the highest false-alarm rate per test against nominal (1,000 windows per setting when quick:
    a smoke size, whose coverage is noisier by about a point)."""
    from _targets import Target

    main(["--quick", "--windows", "1000"] if quick else [])
    nominal = LAST["nominal"]
    return [Target("sim_intervals", "lowest coverage / (nominal - 1 point)", 1.0, LAST["lowest"] / (nominal - 0.01),
                   note=f"{100 * LAST['lowest']:.1f}% at nominal {100 * nominal:g}%"),
            Target("sim_intervals", "change test: false alarms per test / nominal", 1.0,
                   LAST["false_alarms"] / (1.0 - nominal), at_most=True,
                   note=f"{100 * LAST['false_alarms']:.2f}%")]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke size: 400 windows, sizes 50 and 1,000")
    ap.add_argument("--windows", type=int, default=None, help="windows per setting (default 10,000)")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--fdr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--only", default=None, metavar="TEXT",
                    help="run only the settings whose label contains TEXT (e.g. 'regression t(5)', 'CBPE'); "
                         "'change' selects the change test, 'checks' the path and scipy checks")
    args = ap.parse_args(argv)

    def want(label: str) -> bool:
        return args.only is None or args.only in label
    windows = args.windows or (400 if args.quick else 10_000)
    sizes = [50, 1000] if args.quick else [50, 200, 1000, 5000]
    z = iv.z_value(args.confidence)
    nominal = args.confidence
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    worst: list = []
    scipy_checks = [0, 0]
    print(f"coverage at nominal {100 * nominal:.1f}% (share of windows given an interval), "
          f"{windows} windows per setting")
    for prevalence, reference in ((0.2, 0.2), (0.05, 0.05), (0.01, 0.01), (0.05, 0.2)):
        for n in sizes:
            label = f"binary n={n} prevalence={prevalence}" + (f" (label shift from {reference})" if
                                                               reference != prevalence else "")
            if not want(label):
                continue
            stats = coverage_binary(n, windows, prevalence, reference, z, rng, scipy_checks)
            print(_row(label, stats, windows, nominal, worst))
    for prevalence in (0.2, 0.05):
        for n in sizes[1:] if not args.quick else sizes:
            label = f"binary weighted n={n} prevalence={prevalence}"
            if want(label):
                print(_row(label, coverage_weighted(n, windows, prevalence, z, rng), windows, nominal, worst))
    for n in sizes:
        if want(label := f"multiclass n={n}"):
            print(_row(label, coverage_multiclass(n, windows, nominal, rng), windows, nominal, worst))
        if want(label := f"regression n={n}"):
            print(_row(label, coverage_regression(n, windows, z, nominal, rng), windows, nominal, worst))
        if want(label := f"regression t(5) errors n={n}"):
            print(_row(label, coverage_regression(n, windows, z, nominal, rng, errors="t"), windows, nominal, worst))
        if want(label := f"regression weighted n={n}"):
            print(_row(label, coverage_regression(n, windows, z, nominal, rng, weighted=True), windows, nominal,
                       worst))
    for population in LABEL_POPULATIONS:
        for n in sizes:
            if want(label := f"labels {population} n={n}"):
                print(_row(label, coverage_labels(n, windows, population, nominal, rng), windows, nominal, worst))
    for n in sizes[1:-1] if not args.quick else sizes[1:]:
        if want(label := f"labels weighted K=3 imbalanced n={n}"):
            print(_row(label, coverage_labels(n, windows, "K=3 imbalanced", nominal, rng, weighted=True), windows,
                       nominal, worst))
    for prior in ([1 / 3] * 3, [0.6, 0.3, 0.1])[: 1 if args.quick else 2]:  # (quick: one setting)
        mc_sizes = sizes[-1:] if args.quick else sizes
        labels = [f"multiclass scores prior={[round(x, 2) for x in prior]} n={n}" for n in mc_sizes]
        if any(want(label) for label in labels):
            truth = multiclass_scores_truth(np.asarray(prior), rng, 100_000 if args.quick else 1_000_000)
            for n, label in zip(mc_sizes, labels):
                if want(label):
                    print(_row(label, coverage_multiclass_scores(n, windows, prior, truth, nominal, rng), windows,
                               nominal, worst))
    for n in ([200, 1000, 5000] if not args.quick else [200, 1000]):
        for shift in (0.0, 0.5):
            label = f"CBPE n={n}" + (" covariate shift 0.5" if shift else "")
            if want(label):
                print(_row(label, coverage_cbpe(n, windows, 0.2, shift, nominal, rng), windows, nominal, worst))
    for n in ([200, 1000, 5000] if not args.quick else [200, 1000]):
        for shift in (0.0, 0.5):
            label = f"CBPE multiclass n={n}" + (" covariate shift 0.5" if shift else "")
            if want(label):
                print(_row(label, coverage_cbpe_multiclass(n, windows, shift, nominal, rng), windows, nominal, worst))
    ignored: list = []
    if want(label := "CBPE n=1000 label shift 0.2 -> 0.05 (assumption violated: not a target)"):
        print(_row(label, coverage_cbpe(1000, max(windows // 10, 100), 0.05, 0.0, nominal, rng),
                   max(windows // 10, 100), nominal, ignored))
    if want("checks"):
        bad = check_monitor_path(rng, z, nominal)
        print(f"BinaryMonitor.intervals vs kernel columns: {bad} differing intervals")
        bad_weighted = check_weighted_monitor_path(rng, z, nominal)
        print(f"weighted BinaryMonitor.intervals vs weighted kernel columns: {bad_weighted} differing intervals")
        print(f"Mann-Whitney U vs scipy.stats.mannwhitneyu: {scipy_checks[1]} differing windows "
              f"(of {5 * scipy_checks[0]} checked)")
    rates = []
    if want("change"):
        print(f"change test vs a 5,000-event reference, BH at fdr={args.fdr}:")
    for n in sizes if want("change") else []:
        for prevalence in (0.2, 0.05):
            rate, any_bh, _ = change_test(n, windows // 4, prevalence, z, args.fdr, rng)
            rates.append(rate)
            _, _, detect = change_test(n, windows // 4, prevalence, z, args.fdr, rng, mu_window=1.0)
            print(f"  n={n} prevalence={prevalence}: false alarms per test {100 * rate:.2f}% "
                  f"(nominal {100 * (1 - nominal):.1f}%), windows with any BH discovery {100 * any_bh:.2f}%; "
                  f"AUC 0.856 -> 0.760 detected in {100 * detect:.1f}%")
    worst.sort()
    LAST.update(nominal=nominal, lowest=nominal + worst[0][0] if worst else math.nan,
                false_alarms=max(rates) if rates else math.nan)
    print("lowest coverage (>= 200 windows given):")
    for gap, label, k, given in worst[:5]:
        verdict = "met" if gap >= -0.01 else "MISSED"
        print(f"  {label} {k}: {100 * (nominal + gap):.2f}% ({given} windows) vs nominal {100 * nominal:g}%: {verdict}")
    if rates:
        worst_alarm = max(rates)
        print(f"highest false alarms per test {100 * worst_alarm:.2f}% vs nominal {100 * (1 - nominal):.1f}%: "
              f"{'met' if worst_alarm <= 1 - nominal else 'MISSED'}")
    print(f"NannyML: not installed, its sampling error not compared. {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
