"""``/metrics`` carries the process's memory, CPU and GC series and the checkpoints' duration and
size; docs/prometheus.md lists every series (regenerate: ``python -m consumers.observability >
docs/prometheus.md``)."""
from __future__ import annotations

from pathlib import Path

from kafka_fakes import FakeCluster
from prometheus_client.parser import text_string_to_metric_families
from test_service_unit import drain, events_with_closers, fill, make_service

from consumers.observability import prometheus_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "prometheus.md"


def test_docs_list_every_series_of_the_registry():
    assert DOC.read_text() == prometheus_doc(), (
        "docs/prometheus.md is stale: python -m consumers.observability > docs/prometheus.md")


def samples(text: str) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if not s.labels or set(s.labels) <= {"generation"}}


def test_metrics_have_process_gc_and_checkpoint_series(tmp_path):
    cluster = FakeCluster()
    fill(cluster, events_with_closers(300))
    service = make_service(cluster, tmp_path)
    drain(service)
    got = samples(service.metrics.render().decode())
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total", "python_gc_objects_collected_total",
                 "python_gc_collections_total"):
        assert name in got, name
    assert got["process_resident_memory_bytes"] > 0
    checkpoints = got["streammetrics_checkpoint_duration_seconds_count"]
    assert checkpoints >= 1 and got["streammetrics_checkpoint_duration_seconds_sum"] > 0
    assert service.counts["checkpoint_failures"] == 0


def test_checkpoint_bytes_is_what_the_last_checkpoint_wrote(tmp_path):
    cluster = FakeCluster()
    fill(cluster, events_with_closers(300))
    service = make_service(cluster, tmp_path)
    service.start()
    for _ in range(3):
        service.poll_once(timeout_ms=0)
    written = []
    store_write = service.store.write
    service.store.write = lambda partition, payload: (written.append(len(payload)), store_write(partition, payload))
    store_append = service.store.append_delta  # incremental checkpoints: a change after a full one is a delta
    service.store.append_delta = lambda partition, payload: (written.append(len(payload)),
                                                             store_append(partition, payload))
    service.consumer.poll = lambda **_: {}  # nothing new: every partition was saved by poll_once's checkpoints
    service.checkpoint()
    assert written == [] and samples(service.metrics.render().decode())["streammetrics_checkpoint_bytes"] == 0
    for part in service.partitions.values():
        part.dirty = True
    service.checkpoint()
    assert written and samples(service.metrics.render().decode())["streammetrics_checkpoint_bytes"] == sum(written)
    service.close()
