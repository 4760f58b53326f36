"""Write deploy/grafana/dashboards/streammetrics.json, the Grafana dashboard docker-compose.yml
provisions: ``python deploy/grafana/make_dashboard.py``. A test keeps the file equal to what this
prints and checks every series it queries against the service's Prometheus registry."""
from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards" / "streammetrics.json"
KEY = 'model=~"$model",segment=~"$segment"'

#: (title, unit, [(PromQL, legend)]) per panel, two per row
PANELS = [
    ("ROC AUC and its interval", "none", [
        (f'streammetrics_window_metric{{{KEY},metric="roc_auc"}}', "{{model}}/{{segment}} roc_auc"),
        (f'streammetrics_window_metric_low{{{KEY},metric="roc_auc"}}', "{{model}}/{{segment}} low"),
        (f'streammetrics_window_metric_high{{{KEY},metric="roc_auc"}}', "{{model}}/{{segment}} high"),
    ]),
    ("Precision, recall, F1 (at the monitor's threshold)", "none", [
        (f'streammetrics_window_metric{{{KEY},metric=~"precision|recall|f1"}}', "{{model}}/{{segment}} {{metric}}"),
    ]),
    ("Log loss and Brier score", "none", [
        (f'streammetrics_window_metric{{{KEY},metric=~"log_loss|brier_score"}}', "{{model}}/{{segment}} {{metric}}"),
    ]),
    ("Score drift against the reference", "none", [
        (f'streammetrics_window_metric{{{KEY},metric=~"drift_ks|drift_psi|drift_js|drift_wasserstein"}}',
         "{{model}}/{{segment}} {{metric}}"),
    ]),
    ("Estimated (CBPE) vs realised", "none", [
        (f'streammetrics_window_metric{{{KEY},metric=~"estimated_roc_auc|roc_auc|estimated_accuracy|accuracy"}}',
         "{{model}}/{{segment}} {{metric}}"),
    ]),
    ("Label arrival: labelled share of the latest window", "percentunit", [
        (f'streammetrics_window_labeled_ratio{{{KEY}}}', "{{model}}/{{segment}}"),
    ]),
    ("Consumer lag (messages)", "short", [
        ("sum by (topic, partition) (streammetrics_consumer_lag)", "{{topic}}/{{partition}}"),
    ]),
    ("Events, rejections and dead letters per second", "ops", [
        ("sum(rate(streammetrics_events_total[5m]))", "events"),
        ("sum by (reason) (rate(streammetrics_bad_events_total[5m]))", "rejected: {{reason}}"),
        ("sum(rate(streammetrics_dead_letters_total[5m]))", "dead letters"),
    ]),
    ("Alerts firing", "short", [
        (f'streammetrics_alert_firing{{{KEY}}} == 1', "{{model}}/{{segment}} {{rule}}"),
    ]),
    ("Process memory and checkpoint duration", "short", [
        ("process_resident_memory_bytes", "RSS bytes {{instance}}"),
        ("streammetrics_checkpoint_duration_seconds_sum / streammetrics_checkpoint_duration_seconds_count",
         "checkpoint seconds {{instance}}"),
    ]),
]


def _variable(name: str) -> dict:
    return {"name": name, "type": "query", "datasource": {"type": "prometheus", "uid": "prometheus"},
            "query": {"query": f"label_values(streammetrics_window_metric, {name})", "refId": name},
            "definition": f"label_values(streammetrics_window_metric, {name})",
            "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
            "current": {"text": "All", "value": "$__all"}}


def dashboard() -> dict:
    panels = []
    for i, (title, unit, targets) in enumerate(PANELS):
        panels.append({
            "id": i + 1, "type": "timeseries", "title": title,
            "datasource": {"type": "prometheus", "uid": "prometheus"},
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(65 + j), "expr": expr, "legendFormat": legend}
                        for j, (expr, legend) in enumerate(targets)],
        })
    return {"title": "streammetrics", "uid": "streammetrics", "schemaVersion": 39, "version": 1,
            "editable": True, "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
            "templating": {"list": [_variable("model"), _variable("segment")]}, "panels": panels,
            "tags": ["streammetrics", "ml-monitoring"]}


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
