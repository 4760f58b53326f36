"""Prometheus metrics and a health endpoint for the service.

``/metrics`` (Prometheus text format, through ``prometheus_client``) exposes:

* counters ``streammetrics_events_total`` (events applied), ``streammetrics_messages_total``
  (Kafka messages read), ``streammetrics_bad_events_total{reason}`` (rejected events, by
  reason class), ``streammetrics_late_events_total``, ``streammetrics_snapshots_total`` and
  ``streammetrics_dead_letters_total``;
* gauges ``streammetrics_window_metric{model, segment, metric}`` (the latest closed window's
  value of each numeric metric: label-based ones from final snapshots, label-free ones
  (drift, estimated performance) from a window's first snapshot on; per-class score drift of
  multiclass ``--reference`` keys as ``metric="drift_ks[CLASS]"`` etc., the ``--alert`` syntax, for at most
  ``MAX_CLASS_GAUGES`` classes per key, the others counted in
  ``streammetrics_class_gauges_skipped_total``); the same values split by kind of number
  (:func:`streammetrics.integrations.prometheus.metric_kind`) in ``streammetrics_window_ratio``
  (unit ratio: accuracy, f1, roc_auc...), ``streammetrics_window_loss`` (log_loss, mse...),
  ``streammetrics_window_events`` (count), ``streammetrics_window_weight`` and
  ``streammetrics_window_value`` (the rest), each ``{model, segment, metric}``;
  ``streammetrics_window_end_seconds{model, segment}``,
  ``streammetrics_consumer_lag{topic, partition}`` and
  ``streammetrics_last_checkpoint_timestamp_seconds``.

Bounded: the per-key gauges cover at most ``max_keys`` keys (``--metrics-keys``, default 100;
0 turns them off): the keys with the most events in their latest closed window. A key with
more events than the smallest exported one takes its place (that key's series disappear);
the others are counted in ``streammetrics_metric_keys_skipped_total``. Snapshots themselves
always carry every key.

The HTTP server serves at most ``max_connections`` connections at once (default 16), one
thread each; a connection beyond that is closed at once (counted in
``streammetrics_http_refused_total``), and a connection idle for ``timeout`` seconds (default
10) is closed, so idle or slow clients cannot exhaust threads or file descriptors.

``/healthz`` answers 200 ``ok`` while the poll loop has run within ``stall_after`` seconds,
503 ``stalled`` otherwise (or once the service has stopped on a failure).
"""
from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from streammetrics.integrations.prometheus import KINDS, metric_kind

__all__ = ["ServiceMetrics", "MetricsServer"]


#: metrics a window has before any label: exported from its first snapshot, not only its final one
LABEL_FREE_PREFIXES = ("drift_", "estimated_")


class _Exported:
    """One exported key's gauges: the newest window's event count (admission), and per group
    (label-free, label-based) the metric names set and the end of the window they come from."""

    __slots__ = ("count", "window_end", "free_names", "free_end", "labelled_names", "final_end")

    def __init__(self) -> None:
        self.count = 0
        self.window_end = self.free_end = self.final_end = float("-inf")
        self.free_names: tuple[str, ...] = ()
        self.labelled_names: tuple[str, ...] = ()


#: per-class metrics exported as gauges (``metric="drift_ks[CLASS]"``) and the most classes per key
CLASS_GAUGE_METRICS = ("drift_ks", "drift_wasserstein", "drift_psi", "drift_js")
MAX_CLASS_GAUGES = 64


class ServiceMetrics:
    """The service's Prometheus metrics, in a registry of their own."""

    def __init__(self, max_keys: int = 100) -> None:
        if max_keys < 0:
            raise ValueError(f"--metrics-keys must be 0 or more, got {max_keys}")
        self.max_keys = max_keys
        self._exported: dict[tuple[str, str], _Exported] = {}
        r = self.registry = CollectorRegistry()
        self.messages = Counter("streammetrics_messages", "Kafka messages read", registry=r)
        self.events = Counter("streammetrics_events", "Prediction events applied to windows", registry=r)
        self.bad_events = Counter("streammetrics_bad_events", "Rejected events, by reason class",
                                  ["reason"], registry=r)
        self.late_events = Counter("streammetrics_late_events", "Events whose windows had closed", registry=r)
        self.snapshots = Counter("streammetrics_snapshots", "Snapshots published", registry=r)
        self.dead_letters = Counter("streammetrics_dead_letters", "Messages sent to the dead-letter topic",
                                    registry=r)
        self.window_metric = Gauge("streammetrics_window_metric", "Latest closed window's metric value (every "
                                   "kind; the streammetrics_window_<kind> families split them by kind)",
                                   ["model", "segment", "metric"], registry=r)
        # one family per kind of number (a count, a ratio, a loss...), as MonitorCollector names them
        self.window_kinds = {kind: Gauge("streammetrics_window" if unit else f"streammetrics_window_{kind}",
                                         f"Latest closed window's metric: {text}", ["model", "segment", "metric"],
                                         registry=r, unit=unit) for kind, (unit, text) in KINDS.items()}
        self.window_end = Gauge("streammetrics_window_end_seconds", "End of the latest closed window (epoch s)",
                                ["model", "segment"], registry=r)
        # contract section 9: each exported metric's confidence interval (absent where the snapshot has null)
        self.window_bounds = tuple(Gauge(f"streammetrics_window_metric_{end}", f"Latest closed window's metric: "
                                         f"{end} end of its confidence interval", ["model", "segment", "metric"],
                                         registry=r) for end in ("low", "high"))
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
        self.keys_skipped = Counter("streammetrics_metric_keys_skipped", "Closed windows whose key is not among "
                                    "the --metrics-keys exported ones", registry=r)
        self.class_gauges_skipped = Counter("streammetrics_class_gauges_skipped", "Classes past MAX_CLASS_GAUGES "
                                            "whose per-class drift has no gauge", registry=r)
        self.keys_exported = Gauge("streammetrics_metric_keys", "Keys with per-key gauges", registry=r)
        self.fetch_errors = Counter("streammetrics_fetch_errors", "Exceptions out of the Kafka client's poll, by "
                                    "exception class and outcome (retried, skipped)", ["error", "outcome"], registry=r)
        self.skipped_offsets = Counter("streammetrics_skipped_offsets", "Offsets skipped (dead-lettered with code "
                                       "unreadable) because the Kafka client could not read their batch", registry=r)
        self.http_refused = Counter("streammetrics_http_refused", "HTTP connections closed at once: "
                                    "max_connections reached", registry=r)
        # --partitioning any (consumers.partials)
        self.partials = Counter("streammetrics_partials", "Partial windows published to the partials topic",
                                registry=r)
        self.merge_records = Counter("streammetrics_merge_records", "Partials-topic records merged, by outcome: "
                                     "partial, watermark, replayed (known already), dropped (evicted range), "
                                     "malformed", ["outcome"], registry=r)
        self.merge_evicted = Counter("streammetrics_merge_evicted", "Windows published incomplete because "
                                     "--max-merge-windows was reached", registry=r)
        self.merge_windows = Gauge("streammetrics_merge_windows", "Windows held by this process's merge stage",
                                   registry=r)
        self.internal_rejected = Counter("streammetrics_internal_records_rejected", "Internal-topic records "
                                         "skipped on restore, by topic and reason (malformed, forged, invalid)",
                                         ["topic", "reason"], registry=r)
        self.last_poll = time.monotonic()
        #: set when the service stopped on a failure: /healthz then answers 503
        self.failed = False

    def observe_snapshot(self, snapshot: dict[str, Any]) -> None:
        """Count a published snapshot and expose its flat numeric metrics as gauges (for at most
        ``max_keys`` keys: those with the most events in their latest window).

        Label-based metrics come from final snapshots (with delayed labels, a window's first
        revisions have only part of its labels); label-free ones (``drift_*``, ``estimated_*``,
        :data:`LABEL_FREE_PREFIXES`) from a window's first snapshot on, since that is when teams
        watch them. Each group follows the newest window it has seen: a later revision of an
        older window does not move a gauge back in time."""
        self.snapshots.inc()
        final = bool(snapshot.get("final"))
        model, segment = snapshot["key"]["model"], snapshot["key"]["segment"]
        key = (model, segment)
        end = snapshot["window"]["end"]
        count = snapshot.get("count") or 0
        metrics = dict(snapshot["metrics"])
        rows = metrics.get("per_class")
        if isinstance(rows, dict):  # per-class drift (multiclass --reference) as METRIC[CLASS]
            drifting = [(c, r) for c, r in rows.items() if isinstance(r, dict) and "drift_ks" in r]
            if len(drifting) > MAX_CLASS_GAUGES:
                self.class_gauges_skipped.inc(len(drifting) - MAX_CLASS_GAUGES)
            for label, row in drifting[:MAX_CLASS_GAUGES]:
                metrics.update((f"{m}[{label}]", row.get(m)) for m in CLASS_GAUGE_METRICS)
        names = [name for name, value in metrics.items()
                 if isinstance(value, (int, float)) and not isinstance(value, bool)]
        free = tuple(name for name in names if name.startswith(LABEL_FREE_PREFIXES))
        if not (final or free):
            return  # a first revision without label-free metrics: nothing to show yet
        if key not in self._exported:
            if len(self._exported) >= self.max_keys:
                if not self._exported:
                    self.keys_skipped.inc()
                    return
                smallest = min(self._exported, key=lambda k: self._exported[k].count)
                if self._exported[smallest].count >= count:
                    self.keys_skipped.inc()
                    return
                self._forget(smallest)
            self._exported[key] = _Exported()
            self.keys_exported.set(len(self._exported))
        entry = self._exported[key]
        if end >= entry.free_end and (free or final):
            self._replace(key, entry.free_names, free, metrics)
            entry.free_names, entry.free_end = free, end
        if final and end >= entry.final_end:
            labelled = tuple(name for name in names if not name.startswith(LABEL_FREE_PREFIXES))
            self._replace(key, entry.labelled_names, labelled, metrics, snapshot.get("intervals") or {})
            entry.labelled_names, entry.final_end = labelled, end
        if end >= entry.window_end:
            entry.count, entry.window_end = count, end
            self.window_end.labels(model, segment).set(end)

    def _replace(self, key: tuple[str, str], old: tuple[str, ...], new: tuple[str, ...],
                 metrics: dict[str, Any], intervals: dict[str, Any] | None = None) -> None:
        for name in set(old) - set(new):
            self.window_metric.remove(key[0], key[1], name)
            self.window_kinds[metric_kind(name)].remove(key[0], key[1], name)
        for name in new:
            self.window_metric.labels(key[0], key[1], name).set(metrics[name])
            self.window_kinds[metric_kind(name)].labels(key[0], key[1], name).set(metrics[name])
        if intervals is not None:  # (labelled metrics: their _low/_high gauges follow them)
            for name in (*old, *new):
                pair = intervals.get(name) if name in new else None
                for gauge, i in zip(self.window_bounds, (0, 1)):
                    if isinstance(pair, list) and len(pair) == 2:
                        gauge.labels(key[0], key[1], name).set(pair[i])
                    else:
                        gauge.remove(key[0], key[1], name)

    def _forget(self, key: tuple[str, str]) -> None:
        entry = self._exported.pop(key)
        for name in (*entry.free_names, *entry.labelled_names):
            self.window_metric.remove(key[0], key[1], name)
            self.window_kinds[metric_kind(name)].remove(key[0], key[1], name)
            for gauge in self.window_bounds:
                gauge.remove(key[0], key[1], name)
        if entry.window_end > float("-inf"):
            self.window_end.remove(key[0], key[1])

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once; more are closed at once."""

    daemon_threads = True
    request_queue_size = 128  # listen backlog: connections the kernel holds until accepted

    def __init__(self, address: tuple[str, int], handler: Any, max_connections: int, on_refused: Any) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self._slots = threading.BoundedSemaphore(max_connections)
        self._on_refused = on_refused
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._on_refused()
            self.shutdown_request(request)  # no thread, no file descriptor kept
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class MetricsServer:
    """``/metrics`` and ``/healthz`` over HTTP in a daemon thread; see the module docstring
    for the bounds (``max_connections``, ``timeout``)."""

    def __init__(self, metrics: ServiceMetrics, port: int, host: str = "0.0.0.0", stall_after: float = 60.0,
                 max_connections: int = 16, timeout: float = 10.0):
        self.metrics = metrics
        outer = self
        idle_timeout = timeout

        class Handler(BaseHTTPRequestHandler):
            timeout = idle_timeout  # socket timeout of each connection (StreamRequestHandler.setup)

            def handle(self) -> None:
                try:
                    super().handle()
                except (socket.timeout, ConnectionError):
                    pass  # an idle or vanished client: drop the connection

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.split("?")[0] == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif self.path.split("?")[0] == "/healthz":
                    stalled = outer.metrics.failed or time.monotonic() - outer.metrics.last_poll > stall_after
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

        self.server = _BoundedHTTPServer((host, port), Handler, max_connections, metrics.http_refused.inc)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> "MetricsServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
