"""/metrics families by kind of number: counts, ratios (with their unit) and losses apart."""
from __future__ import annotations

from consumers.observability import ServiceMetrics


def test_window_metrics_split_by_kind_with_units():
    metrics = ServiceMetrics(max_keys=10)
    snap = {"final": True, "key": {"model": "m", "segment": "s"}, "window": {"start": 0, "end": 60}, "count": 9,
            "metrics": {"count": 9, "total_weight": 9.0, "accuracy": 0.75, "log_loss": 0.4, "r2": -0.5}}
    metrics.observe_snapshot(snap)
    text = metrics.render().decode()
    labels = 'model="m",segment="s"'
    assert f'streammetrics_window_events{{metric="count",{labels}}} 9.0' in text
    assert f'streammetrics_window_weight{{metric="total_weight",{labels}}} 9.0' in text
    assert f'streammetrics_window_ratio{{metric="accuracy",{labels}}} 0.75' in text
    assert f'streammetrics_window_loss{{metric="log_loss",{labels}}} 0.4' in text
    assert f'streammetrics_window_value{{metric="r2",{labels}}} -0.5' in text
    assert 'streammetrics_window_ratio{metric="log_loss"' not in text
    assert f'streammetrics_window_metric{{metric="accuracy",{labels}}} 0.75' in text  # the former family stays
    # a metric that disappears goes from its kind's family too
    metrics.observe_snapshot(dict(snap, window={"start": 60, "end": 120}, metrics={"count": 3, "accuracy": 0.5}))
    text = metrics.render().decode()
    assert 'metric="log_loss"' not in text and f'streammetrics_window_ratio{{metric="accuracy",{labels}}} 0.5' in text
