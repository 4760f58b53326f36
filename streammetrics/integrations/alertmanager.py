"""Prometheus alerting rules from streammetrics alert rules, for teams that alert in Alertmanager.

``streammetrics alert-rules --alerts rules.yaml > streammetrics-alerts.yml`` writes one
Prometheus rule group. A rule on a metric or a per-class metric becomes a comparison of the
service's gauge ``streammetrics_window_metric{metric="..."}`` (the latest closed window of each
exported key), ``.low``/``.high`` of ``streammetrics_window_metric_low`` / ``_high`` (its
interval); rules only the service can evaluate (``.change``, ``.drop``, ``.rise``, ``band(K)``:
they need the reference or the key's history) become ``streammetrics_alert_firing{rule="..."} == 1``,
the gauge the service sets while the rule fires (run the service with the same rules).

>>> print(prometheus_rules(parse_rules(["roc_auc<0.8"]), group="g").splitlines()[4])
        expr: streammetrics_window_metric{metric="roc_auc"} < 0.8
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Sequence

from streammetrics.stream.alerting import AlertRule, parse_rules

__all__ = ["prometheus_expr", "prometheus_rules", "parse_rules"]


_WHO = "{{ $labels.model }}/{{ $labels.segment }}"  # Prometheus template of the alert's key


def _label(value: str) -> str:
    return json.dumps(value)  # a PromQL string literal: double quotes, backslash escapes


def prometheus_expr(rule: AlertRule) -> str:
    """The PromQL expression that holds while ``rule`` holds."""
    if rule.field in ("change", "drop", "rise") or rule.band_k is not None:
        return f"streammetrics_alert_firing{{rule={_label(rule.text)}}} == 1"
    gauge = "streammetrics_window_metric" + ("" if rule.field is None else f"_{rule.field}")
    return f"{gauge}{{metric={_label(rule.metric_name)}}} {rule.op} {rule.threshold!r}"


def _name(rule: AlertRule) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", " ", rule.expr).title().replace(" ", "")
    return f"StreammetricsRule{words}{hashlib.sha256(rule.text.encode()).hexdigest()[:6]}"


def prometheus_rules(rules: Sequence[AlertRule], group: str = "streammetrics", for_: str = "0m",
                     severity: str = "warning") -> str:
    """A Prometheus rule file (YAML) with one alerting rule per streammetrics rule."""
    lines = ["groups:", f"  - name: {json.dumps(group)}", "    rules:"]
    for rule in rules:
        lines += [
            f"      - alert: {_name(rule)}",
            f"        expr: {prometheus_expr(rule)}",
            f"        for: {for_}",
            "        labels:",
            f"          severity: {json.dumps(severity)}",
            f"          streammetrics_rule: {json.dumps(rule.text)}",
            "        annotations:",
            f"          summary: {json.dumps(f'streammetrics rule {rule.text} holds for {_WHO}')}",
        ]
    return "\n".join(lines) + "\n"
