"""Confusion-matrix metrics from sparse cells: memory O(cells + K), never K x K.

A weighted confusion matrix over ``K`` labels is given as its occupied cells: arrays
``rows`` (true label index), ``cols`` (predicted label index) and ``weights``, plus the
per-label sums ``true`` (row sums), ``pred`` (column sums) and ``tp`` (diagonal). Formulas
(scikit-learn 1.9's, reorganised so nothing is quadratic in ``K``):

* balanced accuracy = mean over labels with ``true > 0`` of ``tp / true``; adjusted:
  ``(score - 1/n) / (1 - 1/n)`` (``balanced_accuracy_score``);
* Matthews correlation = ``(c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t))`` with ``c`` the
  trace and ``s`` the total (``matthews_corrcoef``; 0.0 when a marginal is one class);
* Cohen's kappa = ``1 - sum_ij w_ij C_ij / sum_ij w_ij pred_i true_j / s`` with ``w_ij``
  1 off the diagonal, ``|i - j|`` (linear) or ``(i - j)^2`` (quadratic)
  (``cohen_kappa_score``). The denominator is ``sum_i pred_i S_i / s`` with
  ``S_i = sum_j w_ij true_j`` from prefix sums of non-negative terms only (nothing cancels):
  unweighted ``S_i`` = true weight before ``i`` plus after it; linear ``S_i = D<(i) + D>(i)``,
  ``D<(i+1) = D<(i) + A<=(i)`` (``A``: the running true weight); quadratic
  ``Q<(i+1) = Q<(i) + 2 D<(i) + A<=(i)``, mirrored for ``>``.

Twins (one dispatcher, :func:`cohen_kappa`): :func:`kappa_dense` is scikit-learn's K x K
computation operation for operation (bit-for-bit values; used while ``K <= DENSE_MAX``),
:func:`kappa_sparse` the vectorised O(cells + K) form used beyond. The parity table is
``tests/kernels/test_sparse_confusion.py``.

``*_many`` twins: the same operations on a stack of ``n`` matrices ``(n, K, K)`` (rows of
per-label sums), one value per matrix, nan (no warning) where the scalar twin warns and gives
nan: many small windows at once (``LabelMonitor.snapshot_many``). Sums run along the last,
contiguous axis (numpy then adds each row as it adds the scalar twin's 1-D array), so each value
equals its scalar twin's bit for bit for ``K <= 7`` (sums of at most 7 terms, in order: a nan
left out or added as 0 alike) and whole-number sums below ``2**53`` (the dot products: any order
is exact), what unit-weight windows hold; ``tests/monitors/test_labels_many.py`` holds them equal.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from streammetrics.core.exceptions import UndefinedMetricWarning

__all__ = ["DENSE_MAX", "balanced_accuracy", "balanced_accuracy_many", "cohen_kappa", "kappa_dense",
           "kappa_dense_many", "kappa_sparse", "matthews", "matthews_many"]

#: largest K computed by the dense twin (a K x K float64 matrix of at most 32 KiB)
DENSE_MAX = 64

_NO_LABELS = ("`y2` contains no labels that are present in both `y1` and `labels`."
              "`cohen_kappa_score` is undefined and set to the value defined by "
              "the `replace_undefined_by` param, which is set to nan.")
_ONE_LABEL = ("`y1`, `y2` and `labels` have only one label in common. "
              "`cohen_kappa_score` is undefined and set to the value defined by the "
              "the `replace_undefined_by` param, which is set to nan.")


def _undefined(message: str) -> float:
    warnings.warn(message, UndefinedMetricWarning, stacklevel=4)
    return math.nan


def kappa_dense(rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, k: int,
                kind: str | None) -> float:
    """Cohen's kappa through the K x K matrix, as scikit-learn computes it (small ``K``)."""
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (rows, cols), weights)
    sum0 = np.sum(confusion, axis=0)
    sum1 = np.sum(confusion, axis=1)
    denominator = np.sum(sum0)
    if denominator == 0:
        return _undefined(_NO_LABELS)
    expected = np.outer(sum0, sum1) / denominator
    if kind is None:
        w_mat = np.ones([k, k], dtype=np.float64)
        np.fill_diagonal(w_mat, 0)
    else:
        w_mat = np.zeros([k, k], dtype=np.float64)
        w_mat += np.arange(k)
        w_mat = np.abs(w_mat - w_mat.T) if kind == "linear" else (w_mat - w_mat.T) ** 2
    numerator = np.sum(w_mat * confusion)
    denominator = np.sum(w_mat * expected)
    if denominator == 0:
        return _undefined(_ONE_LABEL)
    return float(1 - numerator / denominator)


def _spread(true: np.ndarray, kind: str | None) -> np.ndarray:
    """``S_i = sum_j w_ij true_j`` for every ``i`` (see the module docstring), O(K)."""
    k = len(true)
    below = np.zeros(k)  # weight of labels j < i
    below[1:] = np.cumsum(true)[:-1]
    rev = true[::-1]
    above = np.zeros(k)  # weight of labels j > i
    above[:-1] = np.cumsum(rev)[:-1][::-1]
    if kind is None:
        return below + above

    def distances(a: np.ndarray, a_below: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # d[i] = sum_{j<i} (i - j) a_j and q[i] = sum_{j<i} (i - j)^2 a_j, by the recurrences
        a_upto = a_below + a  # weight of labels j <= i
        d = np.zeros(len(a))
        d[1:] = np.cumsum(a_upto)[:-1]
        q = np.zeros(len(a))
        q[1:] = np.cumsum(2.0 * d + a_upto)[:-1]
        return d, q

    d_lo, q_lo = distances(true, below)
    d_hi, q_hi = distances(rev, above[::-1])
    if kind == "linear":
        return d_lo + d_hi[::-1]
    return q_lo + q_hi[::-1]


def kappa_sparse(rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, k: int,
                 kind: str | None) -> float:
    """Cohen's kappa from the cells in O(cells + K) memory and time."""
    true = np.bincount(rows, weights=weights, minlength=k).astype(np.float64)
    pred = np.bincount(cols, weights=weights, minlength=k).astype(np.float64)
    total = float(np.sum(pred))
    if total == 0:
        return _undefined(_NO_LABELS)
    t_on, p_on = np.flatnonzero(true), np.flatnonzero(pred)
    if len(t_on) == 1 and len(p_on) == 1 and t_on[0] == p_on[0]:  # every w_ij pred_i true_j is 0
        return _undefined(_ONE_LABEL)
    if kind is None:
        off = rows != cols
        numerator = float(np.sum(weights[off]))
    else:
        gap = np.abs(rows - cols).astype(np.float64)
        numerator = float(np.sum((gap if kind == "linear" else gap * gap) * weights))
    denominator = float(np.sum(pred * _spread(true, kind))) / total
    if denominator == 0:
        return _undefined(_ONE_LABEL)
    return 1.0 - numerator / denominator


def cohen_kappa(rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, k: int,
                kind: str | None) -> float:
    """Cohen's kappa of the cells (``kind``: None, "linear" or "quadratic"); NaN with
    scikit-learn's ``UndefinedMetricWarning`` where it is undefined. The dispatcher."""
    twin = kappa_dense if k <= DENSE_MAX else kappa_sparse
    return twin(np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp),
                np.asarray(weights, dtype=np.float64), k, kind)


def balanced_accuracy(tp: np.ndarray, true: np.ndarray, adjusted: bool) -> float:
    """Mean recall over the labels with true weight (``true > 0``); a
    ``UserWarning`` when some label has none (predicted only), as scikit-learn."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_class = tp / true
    if np.any(np.isnan(per_class)):
        warnings.warn("y_pred contains classes not in y_true", UserWarning, stacklevel=3)
        per_class = per_class[~np.isnan(per_class)]
    score = np.mean(per_class)
    if adjusted:
        n_classes = per_class.shape[0]
        chance = 1 / n_classes
        score -= chance
        score /= 1 - chance
    return float(score)


def matthews(t_sum: np.ndarray, p_sum: np.ndarray, n_correct: float) -> float:
    """Multiclass Matthews correlation from the row sums, column sums and trace (0.0 when a
    marginal holds one class or a variance product is 0), O(K)."""
    if np.count_nonzero(t_sum) <= 1 or np.count_nonzero(p_sum) <= 1:
        return 0.0  # a zero variance: 0.0 without rounding noise
    n_samples = p_sum.sum()
    cov_ytyp = n_correct * n_samples - np.dot(t_sum, p_sum)
    cov_ypyp = n_samples**2 - np.dot(p_sum, p_sum)
    cov_ytyt = n_samples**2 - np.dot(t_sum, t_sum)
    cov_ypyp_ytyt = cov_ypyp * cov_ytyt
    if cov_ypyp_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ypyp_ytyt))


def kappa_dense_many(confusion: np.ndarray) -> np.ndarray:
    """:func:`kappa_dense` (unweighted kappa) of each ``K x K`` matrix of ``confusion`` ``(n, K, K)``."""
    n, k = confusion.shape[0], confusion.shape[1]
    sum0 = np.sum(confusion, axis=1)  # column sums (kappa_dense's axis 0)
    sum1 = np.sum(confusion, axis=2)
    total = np.sum(sum0, axis=1)
    ok = total != 0
    expected = sum0[:, :, None] * sum1[:, None, :] / np.where(ok, total, 1.0)[:, None, None]
    off = np.ones((k, k), dtype=np.float64)
    np.fill_diagonal(off, 0)
    numerator = np.sum((off * confusion).reshape(n, k * k), axis=1)
    denominator = np.sum((off * expected).reshape(n, k * k), axis=1)
    ok &= denominator != 0
    return np.where(ok, 1 - numerator / np.where(ok, denominator, 1.0), np.nan)


def balanced_accuracy_many(tp: np.ndarray, true: np.ndarray) -> np.ndarray:
    """:func:`balanced_accuracy` (not adjusted) of each row of ``tp`` and ``true`` ``(n, K)``."""
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a row without true weight: nan)
        return np.nanmean(tp / true, axis=1)


def matthews_many(t_sum: np.ndarray, p_sum: np.ndarray, n_correct: np.ndarray) -> np.ndarray:
    """:func:`matthews` of each row of ``t_sum`` and ``p_sum`` ``(n, K)`` with its trace ``n_correct``."""
    n_samples = p_sum.sum(axis=1)
    cov_ytyp = n_correct * n_samples - np.einsum("ij,ij->i", t_sum, p_sum)
    cov_ypyp = n_samples**2 - np.einsum("ij,ij->i", p_sum, p_sum)
    cov_ytyt = n_samples**2 - np.einsum("ij,ij->i", t_sum, t_sum)
    product = cov_ypyp * cov_ytyt
    zero = (np.count_nonzero(t_sum, axis=1) <= 1) | (np.count_nonzero(p_sum, axis=1) <= 1) | (product == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(zero, 0.0, cov_ytyp / np.sqrt(np.where(zero, 1.0, product)))
