"""Prometheus metrics and a health endpoint for the service.

``/metrics`` (Prometheus text format, through ``prometheus_client``) exposes:

* counters ``streammetrics_events_total`` (events applied), ``streammetrics_messages_total``
  (Kafka messages read), ``streammetrics_bad_events_total{reason}`` (rejected events, by
  reason class), ``streammetrics_late_events_total``, ``streammetrics_snapshots_total`` and
  ``streammetrics_dead_letters_total``;
* gauges ``streammetrics_window_metric{model, segment, metric}`` (the latest closed window's
  value of each numeric metric), ``streammetrics_window_end_seconds{model, segment}``,
  ``streammetrics_consumer_lag{topic, partition}`` and
  ``streammetrics_last_checkpoint_timestamp_seconds``.

``/healthz`` answers 200 ``ok`` while the poll loop has run within ``stall_after`` seconds,
503 otherwise.
"""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["ServiceMetrics", "MetricsServer"]


class ServiceMetrics:
    """The service's Prometheus metrics, in a registry of their own."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.messages = Counter("streammetrics_messages", "Kafka messages read", registry=r)
        self.events = Counter("streammetrics_events", "Prediction events applied to windows", registry=r)
        self.bad_events = Counter("streammetrics_bad_events", "Rejected events, by reason class",
                                  ["reason"], registry=r)
        self.late_events = Counter("streammetrics_late_events", "Events whose windows had closed", registry=r)
        self.snapshots = Counter("streammetrics_snapshots", "Snapshots published", registry=r)
        self.dead_letters = Counter("streammetrics_dead_letters", "Messages sent to the dead-letter topic",
                                    registry=r)
        self.window_metric = Gauge("streammetrics_window_metric", "Latest closed window's metric value",
                                   ["model", "segment", "metric"], registry=r)
        self.window_end = Gauge("streammetrics_window_end_seconds", "End of the latest closed window (epoch s)",
                                ["model", "segment"], registry=r)
        self.lag = Gauge("streammetrics_consumer_lag", "Messages behind the partition's high watermark",
                         ["topic", "partition"], registry=r)
        self.last_checkpoint = Gauge("streammetrics_last_checkpoint_timestamp_seconds",
                                     "Wall time of the last checkpoint and offset commit", registry=r)
        self.rollbacks = Counter("streammetrics_rollbacks", "Partitions rolled back to their checkpoint after an "
                                 "internal error", registry=r)
        self.offset_resets = Counter("streammetrics_offset_resets", "Checkpoint offsets found beyond the "
                                     "partition's end (topic recreated): read from the start", registry=r)
        self.checkpoint_failures = Counter("streammetrics_checkpoint_failures", "Checkpoint writes that failed",
                                           registry=r)
        self.oversized_snapshots = Counter("streammetrics_oversized_snapshots", "Snapshots over the producer's "
                                           "max_request_size, by outcome (state_dropped, dropped)", ["outcome"],
                                           registry=r)
        self.truncated_dead_letters = Counter("streammetrics_truncated_dead_letters", "Dead letters whose value "
                                              "was truncated to fit max_request_size", registry=r)
        self.last_poll = time.monotonic()

    def observe_snapshot(self, snapshot: dict[str, Any]) -> None:
        """Count a published snapshot and expose its flat numeric metrics as gauges."""
        self.snapshots.inc()
        if not snapshot.get("final"):
            return
        model, segment = snapshot["key"]["model"], snapshot["key"]["segment"]
        self.window_end.labels(model, segment).set(snapshot["window"]["end"])
        for name, value in snapshot["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.window_metric.labels(model, segment, name).set(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer:
    """``/metrics`` and ``/healthz`` over HTTP in a daemon thread."""

    def __init__(self, metrics: ServiceMetrics, port: int, host: str = "0.0.0.0", stall_after: float = 60.0):
        self.metrics = metrics
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.split("?")[0] == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif self.path.split("?")[0] == "/healthz":
                    stalled = time.monotonic() - outer.metrics.last_poll > stall_after
                    self._send(503 if stalled else 200, b"stalled\n" if stalled else b"ok\n", "text/plain")
                else:
                    self._send(404, b"not found: try /metrics or /healthz\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # quiet by default
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> "MetricsServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
