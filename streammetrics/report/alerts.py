"""Alert rules (``--alert 'roc_auc<0.8'``, ``--alerts FILE``) and the windows where they hold.

The rules are those of ``replay`` and ``consume`` (:mod:`streammetrics.stream.alerting`: one
grammar): a scalar metric of the snapshots (``estimated_accuracy<0.7``, ``drift_ks>0.2``: for
multiclass keys the largest over the classes), a per-class one as ``METRIC[CLASS]``
(``drift_ks[upmarket_card]>0.2``, ``recall[cat]<0.5``: ``per_class[CLASS][METRIC]``), the ends
of a metric's interval (``roc_auc.high<0.8``), its significant change (``roc_auc.change<0``) or a
sequential statistic over the key's windows (``roc_auc.drop>0.5``). ``band(K)`` rules need the
reference's windows, which a report does not have: use them with ``replay`` or ``consume``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from streammetrics.report.sources import WindowSnapshot
from streammetrics.stream.alerting import AlertEngine, AlertRule, load_rules_file, parse_rule, parse_rules

__all__ = ["AlertRule", "Alert", "parse_rule", "parse_rules", "load_rules_file", "check_metrics", "known_metrics",
           "metric_value", "evaluate"]


@dataclass(frozen=True)
class Alert:
    """A rule that fired on one window."""

    rule: AlertRule
    window: WindowSnapshot
    value: float


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
        if rule.band_k is not None:
            raise ValueError(f"--alert rule {rule.text!r}: band(K) needs the reference's windows; use it with "
                             "replay or consume (--reference)")
        if rule.metric_name not in known:
            scalars = [k for k in known if not k.endswith("]")]
            more = " and per-class METRIC[CLASS]" if len(scalars) < len(known) else ""
            raise ValueError(f"unknown metric {rule.metric_name!r} in --alert rule {rule.text!r}; "
                             f"known metrics: {', '.join(scalars) or '(none)'}{more}")


def evaluate(rules: Sequence[AlertRule], windows: Sequence[WindowSnapshot]) -> list[Alert]:
    """Every (rule, window) pair where the rule holds, in rule then window order; ``windows`` are
    one key's, in time order (sequential rules follow them as the service does)."""
    engine = AlertEngine(rules)
    held: list[list[Alert]] = [[] for _ in rules]
    for w in windows:
        snapshot = {"key": {"model": w.model, "segment": w.segment}, "window": {"start": w.start, "end": w.end},
                    "final": True, "metrics": w.metrics, "intervals": w.intervals, "changes": w.changes}
        for i, (rule, value, _, holds) in enumerate(engine.evaluate(snapshot)):
            if holds and value is not None:  # (a rule never holds on an undefined value)
                held[i].append(Alert(rule=rule, window=w, value=value))
    return [alert for alerts in held for alert in alerts]
