"""Confidence-based performance estimation (NannyML's CBPE) from score histograms.

1. **Calibrate** on the reference's labelled levels: :func:`isotonic_fit` is
   ``sklearn.isotonic.IsotonicRegression(increasing=True, out_of_bounds="clip")`` fitted on
   the reference's ``(score, label, weight)`` events: per distinct score the weighted mean
   label, pooled by the pool-adjacent-violators algorithm, and :func:`calibrate` predicts by
   linear interpolation between the fitted points (``np.interp``), clipped to the fitted
   range; like scikit-learn, scores less than 1e-15 above the first of a run are pooled
   into one point. On bins (:func:`isotonic_fit_bins`) it is the same monotone fit on the
   bins' weights, constant across each bin and interpolated between bins.
   NannyML calibrates only when a cross-validated check on the reference rows says it
   helps (``needs_calibration``: random splits of the rows, which a histogram does not
   keep); we always calibrate, unless asked not to (``calibrated=None`` uses the scores).
2. **Expected confusion matrix** of the window's predictions ``score >= threshold``, the
   calibrated probability ``c`` of each event standing for its unknown label:
   ``TP = sum(w c)``, ``FP = sum(w (1 - c))`` over predicted positives, ``FN = sum(w c)``,
   ``TN = sum(w (1 - c))`` over predicted negatives; then NannyML's ``estimate_accuracy``
   ``(TP + TN) / W``, ``estimate_precision`` ``TP / (TP + FP)``, ``estimate_recall``
   ``TP / (TP + FN)``, ``estimate_f1`` ``TP / (TP + (FP + FN) / 2)`` (0 when a denominator
   is 0, as NannyML).
3. **Expected ROC AUC** (NannyML's ``estimate_roc_auc``): the ROC curve whose true-positive
   steps are the calibrated probabilities and false-positive steps their complements, in
   decreasing score order. Tied scores share one calibrated value, so their steps are
   collinear and the curve equals :func:`streammetrics.kernels.ranking.roc_auc` on the
   levels' expected positive weight ``w c`` and negative weight ``w (1 - c)``. (NannyML
   rounds the cumulative sums to 5 decimals before dividing; we do not.)

An empty window (no weight) gives nan with an
:class:`~streammetrics.core.exceptions.UndefinedMetricWarning`.

4. **Intervals** (:func:`estimated_intervals`; derivation in ``docs/intervals.md``): the labels
   as independent Bernoulli draws of the calibrated ``c``, so ``Var TP = sum w^2 c (1 - c)`` over
   the predicted positives (``Var FN`` alike over the negatives); accuracy and precision linear in
   them, recall, F1 and ROC AUC (``U / (P N)``, placement values of the expected histograms) by the
   delta method. The finite reference adds (a) each isotonic block's add-one-smoothed binomial
   variance (:func:`calibration_blocks`) by the delta method and (b) the label variance times
   ``n_eff / n_reference``. Interval ``estimate +- t sd`` (Student ``t``, the effective events of
   the denominator minus one d.f.), clipped to [0, 1]; the realised intervals' minimum rule.
"""
from __future__ import annotations

import math

import numpy as np

from streammetrics.core.exceptions import undefined
from streammetrics.kernels import ranking
from streammetrics.kernels.levels import row_sums, to_front

__all__ = [
    "calibrate",
    "calibration_blocks",
    "estimated_intervals",
    "estimated_rows",
    "estimated_metrics",
    "estimated_roc_auc",
    "expected_confusion",
    "isotonic_fit",
    "isotonic_fit_bins",
]


def _pava(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted non-decreasing least-squares fit (pool adjacent violators)."""
    means: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for yi, wi in zip(y.tolist(), w.tolist()):
        m, ww, n = yi, wi, 1
        while means and means[-1] >= m:
            pm, pw, pn = means.pop(), weights.pop(), sizes.pop()
            total = pw + ww
            m = (pm * pw + m * ww) / total
            ww, n = total, n + pn
        means.append(m)
        weights.append(ww)
        sizes.append(n)
    return np.repeat(np.array(means), sizes)


def isotonic_fit(x: np.ndarray, neg: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x_thresholds, y_thresholds)`` of the isotonic fit of the labels on ascending level
    scores ``x`` (levels without weight ignored). ValueError without any weight."""
    x = np.asarray(x, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    w = neg + pos
    keep = w > 0
    if not keep.any():
        raise ValueError("the reference has no labelled event with a non-zero weight")
    x, w, pos = _merge_close(x[keep], w[keep], pos[keep])
    return x, _pava(pos / w, w)


def isotonic_fit_bins(
    lo: np.ndarray, hi: np.ndarray, neg: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The isotonic fit on binned levels (scores in ``[lo, hi]``, ascending, disjoint) as
    interpolation knots for :func:`calibrate`: the pooled value is constant across each
    bin (every reference event of a bin gets it) and interpolated linearly between bins."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    w = np.asarray(neg, dtype=np.float64) + np.asarray(pos, dtype=np.float64)
    keep = w > 0
    if not keep.any():
        raise ValueError("the reference has no labelled event with a non-zero weight")
    y = _pava(np.asarray(pos, dtype=np.float64)[keep] / w[keep], w[keep])
    return np.column_stack((lo[keep], hi[keep])).ravel(), np.repeat(y, 2)


_RESOLUTION = float(np.finfo(np.float64).resolution)  # 1e-15


def _merge_close(x: np.ndarray, w: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's ``_make_unique``: a run of scores less than 1e-15 above its first one
    is one point (at that first score)."""
    if len(x) < 2 or float(np.min(np.diff(x))) >= _RESOLUTION:
        return x, w, pos
    starts = [0]
    first = float(x[0])
    for i, xi in enumerate(x.tolist()):
        if xi - first >= _RESOLUTION:
            starts.append(i)
            first = xi
    idx = np.array(starts)
    return x[idx], np.add.reduceat(w, idx), np.add.reduceat(pos, idx)


def calibrate(scores: np.ndarray, x_thresholds: np.ndarray, y_thresholds: np.ndarray) -> np.ndarray:
    """``IsotonicRegression.predict``: linear interpolation, clipped to the fitted range."""
    s = np.asarray(scores, dtype=np.float64)
    if len(x_thresholds) == 1:
        return np.full(s.shape, float(y_thresholds[0]))
    return np.interp(s, x_thresholds, y_thresholds)


def expected_confusion(c: np.ndarray, w: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Expected ``tp``, ``fp``, ``fn``, ``tn`` weights (see the module docstring)."""
    c = np.asarray(c, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    p = np.asarray(predicted, dtype=bool)
    wc = w * c
    wn = w * (1.0 - c)
    return {
        "tp": float(wc[p].sum()),
        "fp": float(wn[p].sum()),
        "fn": float(wc[~p].sum()),
        "tn": float(wn[~p].sum()),
    }


def _undefined(name: str) -> float:
    return undefined(f"No event with a non-zero weight in the window: {name} cannot be estimated.", 3)


def _ratio(num: float, den: float) -> float:
    return num / den if den != 0 else 0.0


def estimated_metrics(c: np.ndarray, w: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """``{"accuracy", "precision", "recall", "f1"}`` estimated from calibrated probabilities
    ``c`` of levels of weight ``w`` predicted positive where ``predicted``."""
    total = float(np.sum(w))
    if not total > 0:
        nan = _undefined("performance")
        return {"accuracy": nan, "precision": nan, "recall": nan, "f1": nan}
    m = expected_confusion(c, w, predicted)
    tp, fp, fn, tn = m["tp"], m["fp"], m["fn"], m["tn"]
    return {
        "accuracy": (tp + tn) / total,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(tp, tp + 0.5 * (fp + fn)),
    }


def estimated_roc_auc(c: np.ndarray, w: np.ndarray) -> float:
    """Expected ROC AUC of levels (ascending scores) of weight ``w`` and calibrated
    probability ``c``; nan with a warning when the window is empty or every calibrated
    probability is 0 (or every one is 1)."""
    w = np.asarray(w, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if not float(w.sum()) > 0:
        return _undefined("ROC AUC")
    pos = w * c
    neg = w * (1.0 - c)
    if not (pos.sum() > 0 and neg.sum() > 0):
        return undefined("Every calibrated probability of the window is 0 (or every one is 1): the "
                         "expected ROC AUC is not defined.", 2)
    return ranking.roc_auc(neg, pos)


#: the estimates :func:`estimated_intervals` gives, in snapshot order
ESTIMATED = ("estimated_roc_auc", "estimated_accuracy", "estimated_precision", "estimated_recall", "estimated_f1")


def calibration_blocks(c_ref: np.ndarray, w_ref: np.ndarray,
                       square_ratio: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``(block of each reference level, variance of each block's value)``: the isotonic blocks
    are the runs of equal calibrated value ``c_ref`` over the reference's levels (ascending,
    weight ``w_ref``); a block of ``n = sum w / square_ratio`` effective events has variance
    ``p (1 - p) / (n + 2)``, ``p = (n c + 1) / (n + 2)``.

    >>> block, var = calibration_blocks(np.array([0.1, 0.1, 0.5]), np.array([4.0, 4.0, 2.0]))
    >>> block.tolist(), [round(float(v), 4) for v in var]
    ([0, 0, 1], [0.0148, 0.0625])
    """
    c_ref = np.asarray(c_ref, dtype=np.float64)
    w_ref = np.asarray(w_ref, dtype=np.float64)
    if not len(c_ref):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    block = np.concatenate(([0], np.cumsum(c_ref[1:] != c_ref[:-1]))).astype(np.int64)
    n = np.bincount(block, weights=w_ref) / square_ratio
    value = c_ref[np.flatnonzero(np.diff(np.concatenate(([-1], block))))]
    p = (n * value + 1.0) / (n + 2.0)
    return block, p * (1.0 - p) / (n + 2.0)


def estimated_intervals(c: np.ndarray, w: np.ndarray, predicted: np.ndarray, z: float, square_ratio: float = 1.0,
                        block: np.ndarray | None = None, block_var: np.ndarray | None = None,
                        reference_events: float = math.inf, estimated_auc: float | None = None
                        ) -> dict[str, tuple[float, float] | None]:
    """Intervals of the realised ``roc_auc``, ``accuracy``, ``precision``, ``recall``, ``f1`` of a
    window given as levels (ascending scores: calibrated probability ``c``, weight ``w``,
    ``predicted`` positive), keyed ``estimated_*`` (see the module docstring, point 4).
    ``square_ratio``: the window's ``sum w^2 / sum w`` (1 for unit weights); ``block``: each
    level's calibration block and ``block_var`` their variances (:func:`calibration_blocks`;
    None: the calibration taken as exact); ``reference_events``: the reference's effective size.
    None where the minimum rule leaves none. ``estimated_auc``: :func:`estimated_roc_auc` of ``c, w``
    when the caller has it."""
    from streammetrics.kernels.intervals import MIN_AUC_EVENTS, MIN_EVENTS, t_values

    c = np.asarray(c, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    p = np.asarray(predicted, dtype=bool)
    out: dict[str, tuple[float, float] | None] = dict.fromkeys(ESTIMATED)
    total = float(w.sum())
    if not total > 0 or not square_ratio > 0:
        return out
    wc, wn = w * c, w * (1.0 - c)
    if block is None or block_var is None:
        block, block_var = np.zeros(len(w), dtype=np.int64), np.zeros(1)
    blocks = len(block_var)

    def by_block(x: np.ndarray) -> np.ndarray:
        return np.bincount(block, weights=x, minlength=blocks)

    a_b, r_b = by_block(np.where(p, w, 0.0)), by_block(np.where(p, 0.0, w))  # d TP / d c_b, d FN / d c_b
    var_level = square_ratio * w * c * (1.0 - c)  # sum w^2 c (1 - c) of each level's events
    tp, fn = float(wc[p].sum()), float(wc[~p].sum())
    pw = float(w[p].sum())
    v_tp, v_fn = float(var_level[p].sum()), float(var_level[~p].sum())

    share = total / square_ratio / reference_events  # the window's effective size over the reference's

    wanted: list[tuple[str, float, float, np.ndarray, float, int]] = []

    def put(name: str, value: float, var: float, gradient: np.ndarray, events: float, minimum: int) -> None:
        wanted.append((name, value, var, gradient, events, minimum))  # (computed together below)

    put("estimated_accuracy", (tp + total - pw - fn) / total, (v_tp + v_fn) / total ** 2, (a_b - r_b) / total,
        total, MIN_EVENTS)
    if pw > 0:
        put("estimated_precision", tp / pw, v_tp / pw ** 2, a_b / pw, pw, MIN_EVENTS)
    positives = tp + fn
    if positives ** 4 > 0:  # (below ~1e-77 the power underflows; such a window has no interval: events < minimum)
        put("estimated_recall", tp / positives, (fn * fn * v_tp + tp * tp * v_fn) / positives ** 4,
            (fn * a_b - tp * r_b) / positives ** 2, positives, MIN_EVENTS)
    d = tp + pw + fn
    if d ** 4 > 0:
        put("estimated_f1", 2.0 * tp / d, 4.0 * ((pw + fn) ** 2 * v_tp + tp * tp * v_fn) / d ** 4,
            2.0 * ((pw + fn) * a_b - tp * r_b) / d ** 2, d - tp, MIN_EVENTS)
    neg_total, pos_total = float(wn.sum()), positives
    if neg_total > 0 and pos_total > 0 and min(neg_total, pos_total) / square_ratio >= MIN_AUC_EVENTS:
        below = np.cumsum(wn) - wn  # expected negatives strictly below each level
        above = pos_total - np.cumsum(wc)  # expected positives strictly above
        v10 = (below + wn / 2.0) / neg_total
        v01 = (above + wc / 2.0) / pos_total
        auc = float(np.sum(wc * v10)) / pos_total
        g = (v10 - auc) / pos_total - (v01 - auc) / neg_total
        put("estimated_roc_auc", (ranking.roc_auc(wn, wc) if estimated_auc is None else estimated_auc),
            float(np.sum(var_level * g * g)),
            by_block(w * g), min(neg_total, pos_total), MIN_AUC_EVENTS)
    gradients = np.array([x[3] for x in wanted]).reshape(len(wanted), blocks)
    calibration = np.sum(gradients * gradients * block_var, axis=1).tolist()  # (each row: np.sum of its own)
    t_of = t_values(z, [x[4] / square_ratio - 1.0 for x in wanted]).tolist()
    for (name, value, var, _, events, minimum), extra, t_value in zip(wanted, calibration, t_of):
        var += extra + var * share  # the calibration map's own error
        if events / square_ratio >= minimum and math.isfinite(var):
            half = t_value * math.sqrt(max(var, 0.0))
            out[name] = (max(value - half, 0.0), min(value + half, 1.0))
    return out


def _subset_sums(mask: np.ndarray, n: np.ndarray, *xs: np.ndarray) -> list[np.ndarray]:
    """``x[i][mask[i]].sum()`` of each row of each ``x`` (``mask`` within the row's first ``n[i]``
    levels), bit for bit."""
    m, fronts = to_front(mask, n, *xs)
    return [row_sums(front, m) for front in fronts]


def estimated_rows(c: np.ndarray, w: np.ndarray, predicted: np.ndarray, n: np.ndarray, z: float,
                   block: np.ndarray, block_var: np.ndarray, reference_events: float
                   ) -> list[tuple[dict[str, float], dict[str, tuple[float, float] | None]]]:
    """The vectorised twin of :func:`estimated_roc_auc`, :func:`estimated_metrics` and
    :func:`estimated_intervals` (unit weights: ``square_ratio`` 1) for many windows' levels, row
    ``i`` holding its first ``n[i]`` levels (weight 0 past them), each row with some weight: per
    row ``(estimates keyed estimated_*, intervals)``, bit for bit as those give them."""
    from streammetrics.kernels.intervals import MIN_AUC_EVENTS, MIN_EVENTS, t_values

    rows, width = w.shape
    valid = np.arange(width) < n[:, None]
    p = predicted & valid
    q = ~predicted & valid
    wc, wn = w * c, w * (1.0 - c)
    total = w.sum(axis=1)  # (counts: exact in any order)
    var_level = 1.0 * w * c * (1.0 - c)
    tp, fp, v_tp = _subset_sums(p, n, wc, wn, var_level)
    fn, tn, v_fn = _subset_sums(q, n, wc, wn, var_level)
    pw = np.where(p, w, 0.0).sum(axis=1)
    neg_total, pos_sum = row_sums(wn, n), row_sums(wc, n)
    both = (neg_total > 0) & (pos_sum > 0)
    auc = np.full(rows, math.nan)
    if both.any():
        auc[both] = ranking.roc_auc_rows(wn[both], wc[both], n[both])
    blocks = len(block_var)
    at = (np.arange(rows)[:, None] * blocks + np.where(valid, block, 0)).ravel()

    def by_block(x: np.ndarray) -> np.ndarray:
        return np.bincount(at, weights=x.ravel(), minlength=rows * blocks).reshape(rows, blocks)

    a_b, r_b = by_block(np.where(p, w, 0.0)), by_block(np.where(q, w, 0.0))
    # ROC AUC's placement values (rows with both classes at least MIN_AUC_EVENTS strong)
    tp_l, fn_l, pw_l, total_l = tp.tolist(), fn.tolist(), pw.tolist(), total.tolist()
    positives = [a + b for a, b in zip(tp_l, fn_l)]
    neg_l = neg_total.tolist()
    auc_rows = [i for i in range(rows) if neg_l[i] > 0 and positives[i] > 0
                and min(neg_l[i], positives[i]) >= MIN_AUC_EVENTS]
    auc_var: dict[int, float] = {}
    auc_extra: dict[int, float] = {}
    if auc_rows:
        sel = np.array(auc_rows)
        pos_t, neg_t = np.array(positives)[sel][:, None], neg_total[sel][:, None]
        wn_s, wc_s = wn[sel], wc[sel]
        below = np.cumsum(wn_s, axis=1) - wn_s
        above = pos_t - np.cumsum(wc_s, axis=1)
        v10 = (below + wn_s / 2.0) / neg_t
        v01 = (above + wc_s / 2.0) / pos_t
        mean = (row_sums(wc_s * v10, n[sel]) / pos_t[:, 0])[:, None]
        g = (v10 - mean) / pos_t - (v01 - mean) / neg_t
        g = np.where(valid[sel], g, 0.0)
        variances = row_sums(var_level[sel] * g * g, n[sel]).tolist()
        grads = np.bincount(((np.arange(len(sel))[:, None] * blocks) + np.where(valid[sel], block[sel], 0)).ravel(),
                            weights=(w[sel] * g).ravel(), minlength=len(sel) * blocks).reshape(len(sel), blocks)
        extras = np.sum(grads * grads * block_var, axis=1).tolist()
        for j, i in enumerate(auc_rows):
            auc_var[i], auc_extra[i] = variances[j], extras[j]
    # each metric's gradient over the blocks, every row at once (a row's denominator 1 where it has none)
    v_tp_l, v_fn_l = v_tp.tolist(), v_fn.tolist()
    f1_d = [t + p_ + f for t, p_, f in zip(tp_l, pw_l, fn_l)]

    def calibration(gradient: np.ndarray) -> list[float]:
        """``sum(gradient^2 block_var)`` of each row: the calibration map's own variance."""
        out: list[float] = np.sum(gradient * gradient * block_var, axis=1).tolist()
        return out

    def column(values: list[float]) -> np.ndarray:
        return np.array(values)[:, None]

    c_acc = calibration((a_b - r_b) / total[:, None])
    c_prec = calibration(a_b / column([x if x > 0 else 1.0 for x in pw_l]))
    c_rec = calibration((fn[:, None] * a_b - tp[:, None] * r_b)
                        / column([x ** 2 if x ** 4 > 0 else 1.0 for x in positives]))
    c_f1 = calibration(2.0 * (column([p_ + f for p_, f in zip(pw_l, fn_l)]) * a_b - tp[:, None] * r_b)
                       / column([x ** 2 if x ** 4 > 0 else 1.0 for x in f1_d]))
    # every (row, metric) interval: its value, variance, calibration variance, events, minimum
    wanted: list[tuple[int, str, float, float, float, float, int]] = []
    for i in range(rows):
        t, f, pw_i, tot, vt, vf = tp_l[i], fn_l[i], pw_l[i], total_l[i], v_tp_l[i], v_fn_l[i]
        wanted.append((i, "estimated_accuracy", (t + tot - pw_i - f) / tot, (vt + vf) / tot ** 2, c_acc[i], tot,
                       MIN_EVENTS))
        if pw_i > 0:
            wanted.append((i, "estimated_precision", t / pw_i, vt / pw_i ** 2, c_prec[i], pw_i, MIN_EVENTS))
        pos_i = positives[i]
        if pos_i ** 4 > 0:  # (as estimated_intervals: no interval below ~1e-77 expected positives)
            wanted.append((i, "estimated_recall", t / pos_i, (f * f * vt + t * t * vf) / pos_i ** 4, c_rec[i], pos_i,
                           MIN_EVENTS))
        d = f1_d[i]
        if d ** 4 > 0:
            wanted.append((i, "estimated_f1", 2.0 * t / d, 4.0 * ((pw_i + f) ** 2 * vt + t * t * vf) / d ** 4, c_f1[i],
                           d - t, MIN_EVENTS))
        if i in auc_var:
            wanted.append((i, "estimated_roc_auc", float(auc[i]), auc_var[i], auc_extra[i], min(neg_l[i], pos_i),
                           MIN_AUC_EVENTS))
    t_of = t_values(z, [x[5] - 1.0 for x in wanted]).tolist()
    out: list[tuple[dict[str, float], dict[str, tuple[float, float] | None]]] = []
    for i in range(rows):
        t, f, pw_i, tot = tp_l[i], fn_l[i], pw_l[i], total_l[i]
        fp_i, tn_i = float(fp[i]), float(tn[i])
        estimates = {"estimated_roc_auc": float(auc[i]) if both[i] else math.nan,
                     "estimated_accuracy": (t + tn_i) / tot, "estimated_precision": _ratio(t, t + fp_i),
                     "estimated_recall": _ratio(t, t + f), "estimated_f1": _ratio(t, t + 0.5 * (fp_i + f))}
        out.append((estimates, dict.fromkeys(ESTIMATED)))
    share = [tot / 1.0 / reference_events for tot in total_l]
    for (i, name, value, var, extra, events, minimum), t_value in zip(wanted, t_of):
        var += extra + var * share[i]  # the calibration map's own error
        if events / 1.0 >= minimum and math.isfinite(var):
            half = t_value * math.sqrt(max(var, 0.0))
            out[i][1][name] = (max(value - half, 0.0), min(value + half, 1.0))
    return out
