"""Hard-label metric formulas from per-class counts, shared by the confusion accumulators.

Each function takes weighted per-class sums (``tp``: true positives, ``pred``: predicted
count, ``true``: true count / support) in the order of the requested labels and follows
scikit-learn 1.9's ``precision_recall_fscore_support``, ``jaccard_score`` and helpers
(``_prf_divide``, ``_warn_prf``, ``_nanaverage``) operation for operation, so values agree
to the last bits and ``zero_division`` / warning behaviour is the same:

* ``zero_division="warn"`` gives 0.0 and an :class:`UndefinedMetricWarning`;
  0 or 1 give that value silently; ``nan`` gives NaN, which ``macro``/``weighted``
  averages then skip (``jaccard`` accepts only ``"warn"``, 0 and 1, as in scikit-learn);
* precision = tp / pred, recall = tp / true,
  F-beta = (1 + b^2) tp / (b^2 true + pred) (undefined only when true = pred = 0),
  Jaccard = tp / (tp + fp + fn), specificity = tn / (tn + fp);
* ``micro`` sums the counts first, ``macro`` is the unweighted mean over labels,
  ``weighted`` weights by support (``true``), ``samples`` by the event weights.

Specificity has no scikit-learn counterpart; it uses the same machinery as recall (per
class, ``zero_division``, support-weighted ``weighted`` average), as imbalanced-learn's
``specificity_score`` does.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Sequence

import numpy as np

from streammetrics.core.exceptions import UndefinedMetricWarning, undefined

__all__ = [
    "AVERAGES",
    "check_average",
    "check_beta",
    "check_zero_division",
    "nanaverage",
    "prf",
    "jaccard",
    "specificity",
    "warn_undefined_state",
]

AVERAGES = (None, "binary", "micro", "macro", "weighted", "samples")


# ----------------------------------------------------------------------- parameters
def check_average(average: Any) -> None:
    if not (average is None or (isinstance(average, str) and average in AVERAGES)):
        raise ValueError(
            f"average has to be one of {AVERAGES!r}, got {average!r}"
        )


def check_zero_division(zero_division: Any, *, allow_nan: bool = True) -> float:
    """The value a 0/0 is replaced by (``"warn"`` -> 0.0); ValueError if not allowed."""
    if isinstance(zero_division, str):
        if zero_division == "warn":
            return 0.0
    elif isinstance(zero_division, numbers.Real) and not isinstance(zero_division, bool):
        z = float(zero_division)
        if z in (0.0, 1.0):
            return z
        if allow_nan and math.isnan(z):
            return math.nan
    allowed = '"warn", 0, 1' + (" or np.nan" if allow_nan else "")
    raise ValueError(f"zero_division must be {allowed}, got {zero_division!r}")


def check_beta(beta: Any) -> float:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"beta must be a real number, got {beta!r}")
    b = float(beta)
    if not b >= 0.0:
        raise ValueError(f"beta must be >= 0, got {beta!r}")
    return b


def warn_undefined_state(what: str) -> None:
    """An accumulator without any event of non-zero weight cannot score anything."""
    undefined(f"{what} is undefined on an accumulator with no events of non-zero weight "
              "(scikit-learn raises on such input); returning nan.", 3)


# ------------------------------------------------------------------------- helpers
def _warn_prf(average: str | None, modifier: str, msg_start: str, result_size: int) -> None:
    # scikit-learn's sklearn.metrics._classification._warn_prf, message for message
    axis0, axis1 = "sample", "label"
    if average == "samples":
        axis0, axis1 = axis1, axis0
    msg = (
        f"{msg_start} ill-defined and being set to 0.0 {{0}} no {modifier} {axis0}s. "
        "Use `zero_division` parameter to control this behavior."
    )
    msg = msg.format("due to" if result_size == 1 else f"in {axis1}s with")
    warnings.warn(msg, UndefinedMetricWarning, stacklevel=4)


def _divide(
    numerator: np.ndarray,
    denominator: np.ndarray,
    metric: str,
    modifier: str,
    average: str | None,
    warn_for: Sequence[str],
    zero_division: Any,
    result_size: int | None = None,
) -> np.ndarray:
    """numerator / denominator with 0/0 -> ``zero_division`` (scikit-learn's ``_prf_divide``)."""
    mask = denominator == 0
    denominator = np.array(denominator, dtype=np.float64, copy=True)
    denominator[mask] = 1
    result = np.asarray(numerator, dtype=np.float64) / denominator
    if not mask.any():
        return result
    result[mask] = check_zero_division(zero_division)
    if zero_division == "warn" and metric in warn_for:
        size = result.shape[0] if result_size is None else result_size
        _warn_prf(average, modifier, f"{metric.capitalize()} is", size)
    return result


def _average(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    # numpy.average raises ZeroDivisionError when the weights sum to zero
    return float(np.average(values, weights=weights))


def nanaverage(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Weighted mean ignoring NaN entries (scikit-learn's ``utils.extmath._nanaverage``)."""
    if values.shape[0] == 0:
        return math.nan
    mask = np.isnan(values)
    if mask.all():
        return math.nan
    if weights is None:
        return float(np.nanmean(values))
    weights = np.asarray(weights)
    values, weights = values[~mask], weights[~mask]
    try:
        return _average(values, weights)
    except ZeroDivisionError:  # all weights zero: ignore them
        return _average(values)


def _counts(tp: Any, pred: Any, true: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tp = np.asarray(tp, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    true = np.asarray(true, dtype=np.float64)
    # scikit-learn goes through the 2x2 matrices: fp = pred - tp, pred' = tp + fp, ...
    fp = pred - tp
    fn = true - tp
    return tp, fp, fn


# ------------------------------------------------------------------------- metrics
def prf(
    tp: Any,
    pred: Any,
    true: Any,
    *,
    beta: float = 1.0,
    average: str | None,
    warn_for: Sequence[str] = ("precision", "recall", "f-score"),
    zero_division: Any = "warn",
    sample_weight: np.ndarray | None = None,
    n_samples: int | None = None,
) -> tuple[Any, Any, Any, np.ndarray]:
    """Precision, recall, F-beta and support from per-class (or per-sample) counts.

    ``average`` is None (per-class arrays) or "binary"/"micro"/"macro"/"weighted"/"samples"
    (floats); for "samples" the rows are (groups of identical) samples, ``sample_weight``
    their weights and ``n_samples`` the number of events (it words the warnings).
    """
    check_zero_division(zero_division)
    tp, fp, fn = _counts(tp, pred, true)
    pred_sum = tp + fp
    true_sum = tp + fn
    if average == "micro":
        tp = np.reshape(np.sum(tp), (1,))
        pred_sum = np.reshape(np.sum(pred_sum), (1,))
        true_sum = np.reshape(np.sum(true_sum), (1,))
    beta2 = beta**2
    precision = _divide(tp, pred_sum, "precision", "predicted", average, warn_for, zero_division, n_samples)
    recall = _divide(tp, true_sum, "recall", "true", average, warn_for, zero_division, n_samples)
    if math.isinf(beta):
        f_score = recall
    elif beta == 0:
        f_score = precision
    else:
        denom = beta2 * true_sum + pred_sum
        f_score = _divide(
            (1 + beta2) * tp, denom, "f-score", "true nor predicted", average, warn_for, zero_division,
            n_samples,
        )
    if average is None:
        return precision, recall, f_score, true_sum
    if average == "weighted":
        weights = true_sum
    elif average == "samples":
        weights = sample_weight
    else:
        weights = None
    return (
        nanaverage(precision, weights),
        nanaverage(recall, weights),
        nanaverage(f_score, weights),
        true_sum,
    )


def jaccard(
    tp: Any,
    pred: Any,
    true: Any,
    *,
    average: str | None,
    zero_division: Any = "warn",
    sample_weight: np.ndarray | None = None,
    n_samples: int | None = None,
) -> Any:
    """Jaccard index tp / (tp + fp + fn) (scikit-learn's ``jaccard_score``)."""
    check_zero_division(zero_division, allow_nan=False)
    tp, fp, fn = _counts(tp, pred, true)
    numerator = tp
    denominator = tp + fp + fn
    if average == "micro":
        numerator = np.sum(numerator, keepdims=True)
        denominator = np.sum(denominator, keepdims=True)
    result = _divide(
        numerator, denominator, "jaccard", "true or predicted", average, ("jaccard",), zero_division,
        n_samples,
    )
    if average is None:
        return result
    if average == "weighted":
        weights = fn + tp
        if not np.any(weights):
            weights = None
    elif average == "samples":
        weights = sample_weight
    else:
        weights = None
    return _average(result, weights)


def specificity(
    tp: Any,
    pred: Any,
    true: Any,
    total: float,
    *,
    average: str | None,
    zero_division: Any = "warn",
    tn_fp: tuple[Any, Any] | None = None,
) -> Any:
    """Specificity tn / (tn + fp) per class, tn = total - tp - fp - fn.

    ``tn_fp``: the per-class ``(tn, fp)`` when the caller has them exactly (rounded once);
    derived by those subtractions otherwise, which lose a tn or fp that is small next to the
    total (``tn = 1e-6`` beside weights of 1e3: 1e-7 relative error).

    Averaged like recall: micro sums tn and tn + fp over labels, macro is the plain
    mean, weighted uses the class supports (``true``) as weights; NaN (from
    ``zero_division=np.nan``) is skipped by macro/weighted averages.
    """
    check_zero_division(zero_division)
    tp, fp, fn = _counts(tp, pred, true)
    true_sum = tp + fn
    if tn_fp is None:
        tn = total - tp - fp - fn
    else:
        tn, fp = np.asarray(tn_fp[0], dtype=np.float64), np.asarray(tn_fp[1], dtype=np.float64)
    numerator = tn
    denominator = tn + fp
    if average == "micro":
        numerator = np.reshape(np.sum(numerator), (1,))
        denominator = np.reshape(np.sum(denominator), (1,))
    result = _divide(
        numerator, denominator, "specificity", "negative", average, ("specificity",), zero_division
    )
    if average is None:
        return result
    weights = true_sum if average == "weighted" else None
    return nanaverage(result, weights)
