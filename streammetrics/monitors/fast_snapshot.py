"""``binary_snapshot``: ``BinaryMonitor.snapshot()`` without numpy for small windows (issue 12).

The monitor's snapshot asks ``ConfusionMatrix`` for seven metrics (each through numpy and
scikit-learn's general ``average``/``zero_division`` machinery) and ``BinaryScores`` for
ROC AUC, its bounds and average precision (each rebuilding sorted arrays from the
histogram dicts, the bounds recomputing the AUC). Here the same numbers come from

* :func:`streammetrics.kernels.counts.binary_confusion_metrics` on the four cells, and
* :func:`streammetrics.kernels.ranking_small.ranking_summary` on one sorted pass over the
  histogram levels while they are at most ``SMALL_LEVELS`` (else the ``BinaryScores``
  methods, whose numpy arrays are then worth their set-up),

giving the same dict (same keys, same order; values equal to 1e-12, ``None`` in the same
places). Log loss, Brier score, counts and rates are read from the accumulators' sums. Exact weight
sums in units (weights that are not whole) are read as their correctly rounded floats.
``BinaryMonitor.snapshot`` returns ``binary_snapshot(self)``; many small monitors at once:
:mod:`~streammetrics.monitors.fleet_snapshot`.
"""
from __future__ import annotations

import math
from typing import Any

from streammetrics.kernels.counts import binary_confusion_metrics
from streammetrics.kernels.ranking_small import SMALL_LEVELS, ranking_summary
from streammetrics.monitors.base import json_number, quiet, quiet_pair

__all__ = ["SNAPSHOT_KEYS", "binary_snapshot"]

#: the keys of ``BinaryMonitor.snapshot()``, in its order
SNAPSHOT_KEYS = (
    "count", "total_weight", "accuracy", "balanced_accuracy", "precision", "recall", "f1", "specificity",
    "matthews_corrcoef", "roc_auc", "roc_auc_low", "roc_auc_high", "average_precision", "log_loss", "brier_score",
    "positive_rate", "predicted_positive_rate", "mean_score",
)


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _ranking(sc: Any) -> dict[str, float | None]:
    small = sc.small_levels(SMALL_LEVELS)
    if small is not None:  # (levels that are whole units: read as their correctly rounded floats)
        _, neg, pos, singleton = small
        out = ranking_summary(neg, pos, singleton)
        if sc.has_one_class():  # BinaryScores.roc_auc: undefined once a class has no events
            out["roc_auc"] = out["roc_auc_low"] = out["roc_auc_high"] = None
        return out
    low, high = quiet_pair(sc.roc_auc_bounds)  # the numpy path for large windows (levels built once)
    return {"roc_auc": quiet(sc.roc_auc), "roc_auc_low": low, "roc_auc_high": high,
            "average_precision": quiet(sc.average_precision)}


def binary_snapshot(monitor: Any) -> dict[str, Any]:
    """The dict ``BinaryMonitor.snapshot()`` returns, computed in plain floats."""
    sc, pr = monitor.scores, monitor.predictions
    log_sum, brier_sum = sc.score_sums()
    return _metrics(monitor, _ranking(sc), log_sum, brier_sum, pr.score_sum)


def _metrics(monitor: Any, rank: dict[str, float | None], log_sum: float, brier_sum: float,
             score_sum: float) -> dict[str, Any]:
    """The snapshot's metrics from the ranking summary and the three (folded) sums."""
    cm, sc, pr = monitor.confusion, monitor.scores, monitor.predictions
    get = cm.counts().get
    conf = binary_confusion_metrics(get((0, 0), 0.0), get((0, 1), 0.0), get((1, 0), 0.0), get((1, 1), 0.0))
    outside = sc.outside_unit
    weight = sc.total_weight  # labelled events
    seen = pr.total_weight  # every prediction (label-free ones too)
    return dict(zip(SNAPSHOT_KEYS, (
        monitor.count, json_number(seen), conf["accuracy"], conf["balanced_accuracy"], conf["precision"],
        conf["recall"], conf["f1"], conf["specificity"], conf["matthews_corrcoef"],
        rank["roc_auc"], rank["roc_auc_low"], rank["roc_auc_high"], rank["average_precision"],
        None if outside or not weight > 0 else _number(log_sum / weight),
        None if outside or not weight > 0 else _number(brier_sum / weight),
        conf["positive_rate"],
        _number(pr.positive_weight / seen) if seen > 0 else None,
        _number(score_sum / seen) if seen > 0 else None,
    )))
