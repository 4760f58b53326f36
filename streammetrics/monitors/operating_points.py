"""The operating-point metrics a binary snapshot carries when asked (contract section 11).

========================  =====================================================================
flag                      snapshot metrics (:mod:`streammetrics.kernels.operating_points`)
========================  =====================================================================
``--target-recall R``     ``precision_at_recall``, ``threshold_at_recall``
``--target-precision P``  ``recall_at_precision``, ``threshold_at_precision``
``--target-fpr F``        ``tpr_at_fpr``, ``threshold_at_fpr``
``--cost-fp A``           ``expected_cost``: ``(A * FP + B * FN) / W`` realised at the monitor's
``--cost-fn B``           threshold (its confusion matrix, exact); with ``--reference``,
                          ``estimated_expected_cost``: the same from CBPE's expected confusion
                          (NannyML's estimated business value, per event and as a cost)
========================  =====================================================================

Values are those of ``BinaryScores.precision_at_recall`` and friends on the window's scores
(exact while the window is small; binned past ``max_bins``: the value its threshold attains,
a lower bound of the exact one). A threshold of ``inf`` ("predict nothing positive": no
point qualifies) and undefined values are written as null. The windows of these snapshots are
built from their monitors (the window engine's vectorised pass for small windows does not
run with a snapshot hook), so every path gives the same lines.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Mapping

from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import operating_points as op
from streammetrics.monitors.base import json_number

__all__ = ["OperatingPoints"]


@dataclass(frozen=True)
class OperatingPoints:
    """Which operating points a snapshot carries (None: not asked)."""

    target_recall: float | None = None
    target_precision: float | None = None
    target_fpr: float | None = None
    cost_fp: float | None = None
    cost_fn: float | None = None

    def __post_init__(self) -> None:
        for name in ("target_recall", "target_precision", "target_fpr"):
            value = getattr(self, name)
            if value is not None:
                op.check_target(value, "--" + name.replace("_", "-"))
        if (self.cost_fp is None) != (self.cost_fn is None):
            raise ValueError("--cost-fp and --cost-fn go together "
                             "(the cost of a false positive and of a false negative)")
        if self.cost_fp is not None:
            op.check_cost(self.cost_fp, "--cost-fp")
            op.check_cost(self.cost_fn, "--cost-fn")  # type: ignore[arg-type]  # set with cost_fp

    @property
    def enabled(self) -> bool:
        return any(v is not None for v in (self.target_recall, self.target_precision, self.target_fpr, self.cost_fp))

    def metrics(self, monitor: Any, reference: Any = None) -> dict[str, float | None]:
        """The named metrics of a ``BinaryMonitor`` (``reference``: its key's ``Reference``,
        for ``estimated_expected_cost``; None without one)."""
        out: dict[str, float | None] = {}
        scores = monitor.scores
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            for target, kind, names in (
                    (self.target_recall, scores.precision_at_recall, ("precision_at_recall", "threshold_at_recall")),
                    (self.target_precision, scores.recall_at_precision,
                     ("recall_at_precision", "threshold_at_precision")),
                    (self.target_fpr, scores.tpr_at_fpr, ("tpr_at_fpr", "threshold_at_fpr"))):
                if target is not None:
                    value, threshold = kind(target) if scores.count else (math.nan, math.nan)
                    out[names[0]] = json_number(value)
                    out[names[1]] = json_number(threshold) if not math.isnan(value) else None
            if self.cost_fp is not None:
                a, b = self.cost_fp, float(self.cost_fn or 0.0)  # (set together)
                cells = monitor.confusion.counts()
                out["expected_cost"] = json_number(op.expected_cost(
                    cells.get((0, 1), 0.0), cells.get((1, 0), 0.0), sum(cells.values()), a, b))
                if reference is not None:
                    e = reference.expected_confusion(monitor)
                    out["estimated_expected_cost"] = json_number(op.expected_cost(e["fp"], e["fn"], e["weight"], a, b))
        return out

    def hook(self, references: Mapping[Any, Any] | None = None,
             then: Any = None) -> Any:
        """A window engine's ``extra_metrics(key, monitor, metrics)`` adding :meth:`metrics`
        after ``then`` (another hook, e.g. ``--reference``'s). With references, every key gets
        ``estimated_expected_cost`` (null for a key without one)."""
        refs = references

        def hook(key: Any, monitor: Any, metrics: dict[str, Any]) -> None:
            if then is not None:
                then(key, monitor, metrics)
            found = self.metrics(monitor, None if refs is None else refs.get(key))
            if refs is not None and self.cost_fp is not None:
                found.setdefault("estimated_expected_cost", None)
            metrics.update(found)

        return hook
