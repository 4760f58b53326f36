"""The example service of docs/embedding.md, run as written, under concurrent requests; and the
Prometheus collector of monitors."""
from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import streammetrics as sm

prometheus_client = pytest.importorskip("prometheus_client")

from streammetrics.integrations.prometheus import MonitorCollector, metric_kind  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"


def example_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/embedding.md should hold one python block: the example service"
    return blocks[0]


@pytest.fixture
def service():
    namespace: dict = {"__name__": "embedding_example"}
    exec(compile(example_code(), str(DOC), "exec"), namespace)  # noqa: S102 - the documented code, as written
    server = namespace["make_server"](0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def call(base, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(base + path, data=data, timeout=30) as r:
            raw = r.read()
            return r.status, raw if path == "/metrics" else json.loads(raw)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_example_service_counts_every_request(service):
    n = 300
    with ThreadPoolExecutor(12) as pool:
        preds = list(pool.map(lambda i: call(service, "/predict", {"id": f"r{i}", "features": [i % 10 / 10, 0.5]}),
                              range(n)))
        assert all(code == 200 for code, _ in preds)
        quality = call(service, "/quality")[1]
        assert quality["count"] == n and quality["accuracy"] is None  # no label yet
        code, body = call(service, "/label", {"id": "r1", "y_true": "maybe"})
        assert code == 400 and "'y_true'" in body["error"]  # and r1 still waits for its label
        labels = list(pool.map(lambda i: call(service, "/label", {"id": f"r{i}", "y_true": i % 2}), range(n)))
    assert all(body == {"matched": True} for code, body in labels)
    code, metrics = call(service, "/metrics")
    text = metrics.decode()
    assert code == 200 and 'streammetrics_monitor_events{metric="count",model="fraud-v3",segment=""} 300.0' in text
    assert 'streammetrics_monitor_ratio{metric="accuracy",model="fraud-v3",segment=""}' in text
    assert call(service, "/label", {"id": "nobody", "y_true": 1}) == (200, {"matched": False})
    assert call(service, "/predict", {"features": [0.1]})[0] == 400  # no id: nothing recorded
    drained = call(service, "/drain", {})[1]
    assert drained["count"] == n
    want = sm.BinaryMonitor().update_many(
        [{"y_true": i % 2, "score": min(max((i % 10 / 10 + 0.5) / 2, 0.0), 1.0)} for i in range(n)])
    assert drained == json.loads(json.dumps(want.snapshot()))
    assert call(service, "/quality")[1]["count"] == 0


def test_collector_families_and_bounds():
    registry = prometheus_client.CollectorRegistry()
    collector = MonitorCollector(labels=("model",), max_monitors=2)
    registry.register(collector)
    reg = sm.RegressionMonitor().update({"y_true": 1.0, "y_pred": 2.0})
    collector.add(reg, model="r")
    collector.add(sm.BinaryMonitor(), model="b")  # empty: undefined metrics left out
    with pytest.raises(ValueError, match="max_monitors"):
        collector.add(sm.BinaryMonitor(), model="c")
    with pytest.raises(ValueError, match=r"labels: \['segment'\] not among \['model'\]"):
        collector.add(reg, segment="x")
    with pytest.raises(ValueError, match="snapshot"):
        collector.add(object(), model="r")
    text = prometheus_client.generate_latest(registry).decode()
    assert 'streammetrics_monitor_loss{metric="mse",model="r"} 1.0' in text
    assert 'streammetrics_monitor_value{metric="r2",model="r"}' not in text  # undefined for one event
    assert 'streammetrics_monitor_events{metric="count",model="b"} 0.0' in text
    collector.remove(model="r")
    assert 'model="r"' not in prometheus_client.generate_latest(registry).decode()


@pytest.mark.parametrize("name,kind", [
    ("accuracy", "ratio"), ("roc_auc_low", "ratio"), ("estimated_f1", "ratio"), ("drift_ks[cat]", "ratio"),
    ("log_loss", "loss"), ("rmse", "loss"), ("estimated_expected_cost", "loss"), ("count", "events"),
    ("total_weight", "weight"), ("r2", "value"), ("drift_psi", "value"), ("matthews_corrcoef", "value"),
])
def test_metric_kinds(name, kind):
    assert metric_kind(name) == kind
