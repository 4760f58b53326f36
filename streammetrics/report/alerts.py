"""Alert rules (``--alert 'roc_auc<0.8'``) and the windows where they fire.

A rule names a scalar metric of the snapshots (``estimated_accuracy<0.7``, ``drift_ks>0.2``:
for multiclass keys the largest over the classes) or a per-class one as ``METRIC[CLASS]``
(``drift_ks[upmarket_card]>0.2``, ``recall[cat]<0.5``: ``per_class[CLASS][METRIC]``)."""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from streammetrics.report.sources import WindowSnapshot

__all__ = ["AlertRule", "Alert", "parse_rule", "parse_rules", "check_metrics", "known_metrics", "metric_value"]

_RULE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\[[^\[\]]+\])?)"  # METRIC or METRIC[CLASS]
                   r"\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


@dataclass(frozen=True)
class AlertRule:
    """``metric op threshold``: fires on a window whose metric value satisfies the comparison."""

    metric: str
    op: str
    threshold: float
    text: str

    def fires(self, value: float | None) -> bool:
        """True if ``value`` crosses the bound; an undefined (None/NaN) value never fires."""
        if value is None or isinstance(value, bool) or not math.isfinite(value):
            return False
        return _OPS[self.op](value, self.threshold)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Alert:
    """A rule that fired on one window."""

    rule: AlertRule
    window: WindowSnapshot
    value: float


def parse_rule(text: str) -> AlertRule:
    """``"roc_auc<0.8"`` -> AlertRule; ``ValueError`` naming the rule if it is malformed."""
    m = _RULE.match(text)
    if not m:
        raise ValueError(f"bad --alert rule {text!r}: expected METRIC<VALUE or METRIC>VALUE "
                         "(also <=, >=), e.g. 'roc_auc<0.8' or 'log_loss>0.5'")
    metric, op, number = m.groups()
    return AlertRule(metric=metric, op=op, threshold=float(number), text=f"{metric}{op}{number}")


def parse_rules(texts: Iterable[str]) -> list[AlertRule]:
    """Parse every rule (the first malformed one raises)."""
    return [parse_rule(t) for t in texts]


def metric_value(window: WindowSnapshot, metric: str) -> float | None:
    """A window's numeric metric (``METRIC[CLASS]``: the per-class one), None when absent,
    undefined or not a number."""
    if metric.endswith("]") and "[" in metric:
        name, label = metric[:-1].split("[", 1)
        rows = window.metrics.get("per_class")
        row = rows.get(label) if isinstance(rows, dict) else None
        value = row.get(name) if isinstance(row, dict) else None
    else:
        value = window.metrics.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def known_metrics(windows: Iterable[WindowSnapshot]) -> list[str]:
    """Sorted names of the scalar metrics present in the snapshots, then the per-class ones
    as ``METRIC[CLASS]``."""
    names: set[str] = set()
    per_class: set[str] = set()
    for w in windows:
        names.update(w.metrics)  # parse_snapshot leaves numbers and nulls only, besides per_class
        rows = w.metrics.get("per_class")
        if isinstance(rows, dict):
            per_class.update(f"{m}[{label}]" for label, row in rows.items() for m in row)
    names.discard("per_class")
    return sorted(names) + sorted(per_class)


def check_metrics(rules: Sequence[AlertRule], known: Sequence[str]) -> None:
    """``ValueError`` listing the known metrics if a rule names a metric no snapshot has."""
    for rule in rules:
        if rule.metric not in known:
            scalars = [k for k in known if not k.endswith("]")]
            more = " and per-class METRIC[CLASS]" if len(scalars) < len(known) else ""
            raise ValueError(f"unknown metric {rule.metric!r} in --alert rule {rule.text!r}; "
                             f"known metrics: {', '.join(scalars) or '(none)'}{more}")


def evaluate(rules: Sequence[AlertRule], windows: Sequence[WindowSnapshot]) -> list[Alert]:
    """Every (rule, window) pair where the rule fires, in rule then window order."""
    alerts: list[Alert] = []
    for rule in rules:
        for w in windows:
            value: Any = metric_value(w, rule.metric)
            if rule.fires(value):
                alerts.append(Alert(rule=rule, window=w, value=value))
    return alerts
