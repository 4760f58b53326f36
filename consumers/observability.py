"""Prometheus metrics and a health endpoint for the service.

``/metrics`` (Prometheus text format, through ``prometheus_client``) exposes the series listed,
with their help texts, in docs/prometheus.md (generated from this module: ``python -m
consumers.observability``): event, message, rejection and snapshot counters, and per key the
latest closed window's numeric metrics, split by kind of number
(:func:`streammetrics.integrations.prometheus.metric_kind`).

Bounded: the per-key gauges cover at most ``max_keys`` keys (``--metrics-keys``, default 100;
0 turns them off): the keys with the most events in their latest closed window. A key with
more events than the smallest exported one takes its place (that key's series disappear);
the others are counted in ``streammetrics_metric_keys_skipped_total``. Snapshots themselves
always carry every key.

The HTTP server serves at most ``max_connections`` connections at once (default 16), one
thread each; a connection beyond that is closed at once (counted in
``streammetrics_http_refused_total``). Each connection has ``timeout`` seconds (default 10) *in
all* to send its request and receive the answer (a deadline, not a per-``recv`` timeout: a client
dripping one byte every few seconds is cut off at it, counted in
``streammetrics_http_timeouts_total``). The last of the ``max_connections`` is a spare whose
request must arrive within ``spare_timeout`` seconds (default 1): while slow clients hold every
other connection, ``/healthz`` (and a quick scrape) still gets an answer. So idle or slow clients
cannot exhaust threads or file descriptors, nor keep a liveness probe out.

``/healthz`` answers 200 ``ok`` while the poll loop has run within ``stall_after`` seconds,
503 ``stalled`` otherwise (or once the service has stopped on a failure).
"""
from __future__ import annotations

import heapq
import io
import socket
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from streammetrics.integrations.prometheus import KINDS, metric_kind
from streammetrics.stream.slicing import slice_label

__all__ = ["ServiceMetrics", "MetricsServer"]


#: buckets (s) of ``streammetrics_checkpoint_duration_seconds``
CHECKPOINT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class SeriesRegistry(CollectorRegistry):
    """A registry remembering the label names of the metrics built in it (by :func:`Counter`,
    :func:`Gauge`, :func:`Histogram` below), for docs/prometheus.md (:func:`prometheus_doc`)."""

    def __init__(self) -> None:
        super().__init__()
        self.labelnames: dict[str, tuple[str, ...]] = {}


def _recorded(kind: Any) -> Any:
    def make(name: str, documentation: str, labelnames: Any = (), *, registry: Any, **options: Any) -> Any:
        metric = kind(name, documentation, labelnames, registry=registry, **options)
        if isinstance(registry, SeriesRegistry):
            for family in metric.describe():
                registry.labelnames[family.name] = tuple(labelnames)
        return metric

    make.__name__ = make.__qualname__ = kind.__name__
    make.__doc__ = f"``prometheus_client.{kind.__name__}``, its label names recorded in a :class:`SeriesRegistry`."
    return make


Counter = _recorded(prometheus_client.Counter)
Gauge = _recorded(prometheus_client.Gauge)
Histogram = _recorded(prometheus_client.Histogram)


#: metrics a window has before any label: exported from its first snapshot, not only its final one
LABEL_FREE_PREFIXES = ("drift_", "estimated_")


class _Exported:
    """One exported key's gauges: the newest window's event count (admission), and per group
    (label-free, label-based) the metric names set and the end of the window they come from."""

    __slots__ = ("count", "window_end", "free_names", "free_end", "labelled_names", "final_end", "seq",
                 "gauges", "bounds")

    def __init__(self) -> None:
        self.count = 0
        self.seq = 0  # its current entry in ServiceMetrics' admission heap
        self.window_end = self.free_end = self.final_end = float("-inf")
        self.free_names: tuple[str, ...] = ()
        self.labelled_names: tuple[str, ...] = ()
        # the labelled children set for this key (prometheus-client's ``labels()`` validates and
        # looks up on every call; a child is set directly until its name is removed): metric name ->
        # (window_metric child, its kind's child), and -> (low, high) for the names with an interval
        self.gauges: dict[str, tuple[Any, Any]] = {}
        self.bounds: dict[str, tuple[Any, ...]] = {}


#: alert series (model, segment, rule) exported at most; past it resolved ones are forgotten first
MAX_ALERT_SERIES = 10_000
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
        # (count, seq, key) of the exported keys, smallest count first; entries whose seq is not
        # their key's current one are stale and dropped when they reach the top (O(log keys) per
        # snapshot instead of a min() over every exported key)
        self._by_count: list[tuple[int, int, tuple[str, str]]] = []
        self._seq = 0
        r = self.registry = SeriesRegistry()
        # the process's memory, CPU, file descriptors (Linux), GC and Python version, in this registry
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        PlatformCollector(registry=r)
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
        self.http_timeouts = Counter("streammetrics_http_timeouts", "HTTP connections closed because the request "
                                     "was not complete (or its answer not sent) within its deadline", registry=r)
        # checkpoints (MetricsService.checkpoint): how long each took and how much it wrote
        self.checkpoint_seconds = Histogram("streammetrics_checkpoint_duration_seconds", "Duration of each "
                                            "checkpoint: producer flush, state encoding and writes, offset commit",
                                            registry=r, buckets=CHECKPOINT_BUCKETS)
        self.checkpoint_bytes = Gauge("streammetrics_checkpoint_bytes", "Bytes of checkpoint state the last "
                                      "checkpoint wrote (every partition it saved)", registry=r)
        self.forced_rejoins = Counter("streammetrics_forced_rejoins", "Consumers replaced because their member "
                                      "had been rebalancing for --rejoin-after, by group: input, merge",
                                      ["group"], registry=r)
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
        # alert rules (--alert, --alerts): one series per (key, rule) that ever fired, at most
        # MAX_ALERT_SERIES (resolved ones are forgotten first)
        self.alert_firing = Gauge("streammetrics_alert_firing", "1 while an alert rule fires for a key, 0 once "
                                  "resolved", ["model", "segment", "rule"], registry=r)
        self.alert_events = Counter("streammetrics_alert_events", "Alert events published, by state (firing, "
                                    "resolved)", ["state"], registry=r)
        self.alert_series_dropped = Counter("streammetrics_alert_series_dropped", "Alert series not exported or "
                                            "forgotten past MAX_ALERT_SERIES", registry=r)
        self._alert_series: dict[tuple[str, str, str], bool] = {}  # (model, segment, rule) -> firing
        self.alert_pairs_forgotten = Gauge("streammetrics_alert_pairs_forgotten", "(rule, key) pairs an alert "
                                           "engine forgot past its bound (AlertSpec.max_keys), by stage (window: a "
                                           "partition's pipeline, merge: a partials partition) and partition",
                                           ["stage", "partition"], registry=r)
        self.window_labeled_ratio = Gauge("streammetrics_window_labeled_ratio", "Labelled share of the latest "
                                          "window's predictions (delayed labels: label arrival)",
                                          ["model", "segment"], registry=r)
        self.partition_pauses = Counter("streammetrics_partition_pauses", "Partitions paused after an environment "
                                        "failure (disk full, unwritable temp dir, failing SQLite spill)", registry=r)
        self.paused_partitions = Gauge("streammetrics_paused_partitions", "Partitions paused now (an environment "
                                       "failure; /healthz answers 503 meanwhile)", registry=r)
        self.last_poll = time.monotonic()
        #: set when the service stopped on a failure: /healthz then answers 503
        self.failed = False
        #: partitions paused after an environment failure: /healthz answers 503 while any is
        self.paused = 0

    def observe_checkpoint(self, seconds: float, written: int) -> None:
        """One checkpoint took ``seconds`` and wrote ``written`` bytes of state."""
        self.checkpoint_seconds.observe(seconds)
        self.checkpoint_bytes.set(written)

    def observe_alert(self, event: dict[str, Any]) -> None:
        """Follow an alert event in ``streammetrics_alert_firing`` (1 firing, 0 resolved)."""
        state = event.get("state")
        key = event.get("key") or {}
        series = (str(key.get("model", "")), str(key.get("segment", "")), str(event.get("rule")))
        self.alert_events.labels(str(state)).inc()
        firing = state == "firing"
        if series not in self._alert_series and len(self._alert_series) >= MAX_ALERT_SERIES:
            resolved = next((s for s, f in self._alert_series.items() if not f), None)
            self.alert_series_dropped.inc()
            if resolved is None:
                return  # every exported series fires: this one is not exported (counted)
            del self._alert_series[resolved]
            self.alert_firing.remove(*resolved)
        self._alert_series.pop(series, None)
        self._alert_series[series] = firing  # most recent last
        self.alert_firing.labels(*series).set(1 if firing else 0)

    def observe_snapshot(self, snapshot: dict[str, Any]) -> None:
        """Count a published snapshot and expose its flat numeric metrics as gauges (for at most
        ``max_keys`` keys: those with the most events in their latest window).

        Label-based metrics come from final snapshots (with delayed labels, a window's first
        revisions have only part of its labels); label-free ones (``drift_*``, ``estimated_*``,
        :data:`LABEL_FREE_PREFIXES`) from a window's first snapshot on, since that is when teams
        watch them. Each group follows the newest window it has seen: a later revision of an
        older window does not move a gauge back in time."""
        self.observe_snapshots((snapshot,))

    def observe_snapshots(self, snapshots: Sequence[dict[str, Any]]) -> None:
        """:meth:`observe_snapshot` of each in order, the counters added to once (a window close
        at 100,000 keys publishes ~86,000 snapshots at once, most of them not admitted)."""
        if not snapshots:
            return
        self.snapshots.inc(len(snapshots))
        observe = self._observe
        skipped = 0
        for snapshot in snapshots:
            skipped += observe(snapshot)
        if skipped:
            self.keys_skipped.inc(skipped)

    def _observe(self, snapshot: dict[str, Any]) -> int:
        """One snapshot's gauges; 1 if its key is not admitted (counted by the caller), else 0."""
        final = bool(snapshot.get("final"))
        named = snapshot["key"]
        model, segment = named["model"], named.get("segment", "")
        if len(named) > 2 or "rollup" in snapshot:  # a slice or roll-up (contract section 11)
            segment = slice_label(snapshot, named, segment)
        key = (model, segment)
        end = snapshot["window"]["end"]
        count = snapshot.get("count") or 0
        exported = self._exported
        if final and key not in exported and len(exported) >= self.max_keys and (
                not exported or exported[self._smallest()].count >= count):
            return 1  # not admitted (most snapshots at many keys): O(1), its metrics unread
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
            return 0  # a first revision without label-free metrics: nothing to show yet
        if key not in self._exported:
            if len(self._exported) >= self.max_keys:
                if not self._exported:
                    return 1
                smallest = self._smallest()
                if self._exported[smallest].count >= count:
                    return 1
                self._forget(smallest)
            self._exported[key] = _Exported()
            self._rank(key, self._exported[key])
            self.keys_exported.set(len(self._exported))
        entry = self._exported[key]
        if end >= entry.free_end and (free or final):
            self._replace(key, entry, entry.free_names, free, metrics)
            entry.free_names, entry.free_end = free, end
        if final and end >= entry.final_end:
            labelled = tuple(name for name in names if not name.startswith(LABEL_FREE_PREFIXES))
            self._replace(key, entry, entry.labelled_names, labelled, metrics, snapshot.get("intervals") or {})
            entry.labelled_names, entry.final_end = labelled, end
        if end >= entry.window_end:
            if entry.count != count:
                entry.count = count
                self._rank(key, entry)
            entry.window_end = end
            self.window_end.labels(model, segment).set(end)
            labeled = snapshot.get("labeled")
            if isinstance(labeled, int) and count:
                self.window_labeled_ratio.labels(model, segment).set(labeled / count)
        return 0

    def _rank(self, key: tuple[str, str], entry: _Exported) -> None:
        """(Re)place ``key`` in the admission heap at its current count."""
        self._seq += 1
        entry.seq = self._seq
        heapq.heappush(self._by_count, (entry.count, self._seq, key))
        if len(self._by_count) > 4 * len(self._exported) + 64:  # bound the stale entries
            self._by_count = [(e.count, e.seq, k) for k, e in self._exported.items()]
            heapq.heapify(self._by_count)

    def _smallest(self) -> tuple[str, str]:
        """The exported key with the fewest events in its latest window (the oldest such entry)."""
        heap = self._by_count
        while True:
            count, seq, key = heap[0]
            entry = self._exported.get(key)
            if entry is not None and entry.seq == seq:
                return key
            heapq.heappop(heap)

    def _replace(self, key: tuple[str, str], entry: _Exported, old: tuple[str, ...], new: tuple[str, ...],
                 metrics: dict[str, Any], intervals: dict[str, Any] | None = None) -> None:
        """Set ``key``'s gauges of the names ``new`` (one group's: they replace its ``old``) and,
        for label-based ones (``intervals``), their ``_low``/``_high`` gauges; names gone are removed."""
        model, segment = key
        gauges = entry.gauges
        fresh = set(new)
        for name in set(old) - fresh:
            del gauges[name]
            self.window_metric.remove(model, segment, name)
            self.window_kinds[metric_kind(name)].remove(model, segment, name)
        for name in new:
            children = gauges.get(name)
            if children is None:
                children = gauges[name] = (self.window_metric.labels(model, segment, name),
                                           self.window_kinds[metric_kind(name)].labels(model, segment, name))
            value = metrics[name]
            children[0].set(value)
            children[1].set(value)
        if intervals is None:
            return
        bounds = entry.bounds
        for name in dict.fromkeys((*old, *new)):
            pair = intervals.get(name) if name in fresh else None
            if isinstance(pair, list) and len(pair) == 2:
                children = bounds.get(name)
                if children is None:
                    children = bounds[name] = tuple(g.labels(model, segment, name) for g in self.window_bounds)
                children[0].set(pair[0])
                children[1].set(pair[1])
            elif bounds.pop(name, None) is not None:  # (never set: nothing to remove)
                for gauge in self.window_bounds:
                    gauge.remove(model, segment, name)

    def _forget(self, key: tuple[str, str]) -> None:
        entry = self._exported.pop(key)
        for name in entry.gauges:
            self.window_metric.remove(key[0], key[1], name)
            self.window_kinds[metric_kind(name)].remove(key[0], key[1], name)
        for name in entry.bounds:
            for gauge in self.window_bounds:
                gauge.remove(key[0], key[1], name)
        if entry.window_end > float("-inf"):
            self.window_end.remove(key[0], key[1])
            try:
                self.window_labeled_ratio.remove(key[0], key[1])
            except KeyError:  # never set: the key's windows had no label counts
                pass

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _DeadlineReader(io.RawIOBase):
    """A connection's bytes, each ``recv`` waiting at most until ``deadline`` (monotonic s): a
    client sending one byte every few seconds cannot hold a request open past the deadline."""

    def __init__(self, sock: socket.socket, deadline: float, on_timeout: Any) -> None:
        super().__init__()
        self._sock, self.deadline, self._on_timeout = sock, deadline, on_timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self._on_timeout()
            raise socket.timeout("request not complete within its deadline")
        self._sock.settimeout(remaining)
        try:
            return self._sock.recv_into(buffer)
        except socket.timeout:
            self._on_timeout()
            raise


#: seconds a new connection waits for the spare connection while that one is sending its answer
#: (a client reading an answer and connecting again at once comes before the spare is released)
SPARE_WAIT = 0.2


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection: at most ``max_connections - 1`` ordinary ones, each with
    ``timeout`` s in all to send its request and read the answer, plus one spare connection whose
    request must arrive within ``spare_timeout`` s (kept for ``/healthz`` and quick scrapes while
    slow clients hold the others); more are closed at once."""

    daemon_threads = True
    request_queue_size = 128  # listen backlog: connections the kernel holds until accepted

    def __init__(self, address: tuple[str, int], handler: Any, max_connections: int, on_refused: Any,
                 timeout: float = 10.0, spare_timeout: float = 1.0) -> None:
        if max_connections < 2:
            raise ValueError(f"max_connections must be at least 2 (one is kept for /healthz), got {max_connections}")
        if not timeout > 0 or not spare_timeout > 0:
            raise ValueError(f"HTTP timeouts must be positive, got {timeout} and {spare_timeout}")
        self._slots = threading.BoundedSemaphore(max_connections - 1)
        self._spare = threading.BoundedSemaphore(1)
        self._on_refused = on_refused
        self.request_timeout, self.spare_timeout = timeout, spare_timeout
        #: per handler thread: monotonic deadlines to read the request (``read``), to finish the
        #: answer (``total``); ``spare``: the thread serves the spare connection
        self.deadlines = threading.local()
        self.spare_answering = threading.Event()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if self._slots.acquire(blocking=False):
            slot, read_within = self._slots, self.request_timeout
        elif self._spare.acquire(blocking=False) or (self.spare_answering.is_set()
                                                      and self._spare.acquire(timeout=SPARE_WAIT)):
            slot, read_within = self._spare, min(self.spare_timeout, self.request_timeout)
        else:
            self._on_refused()
            self.shutdown_request(request)  # no thread, no file descriptor kept
            return
        try:
            thread = threading.Thread(target=self._serve, args=(request, client_address, slot, read_within),
                                      daemon=True)
            thread.start()
        except BaseException:
            slot.release()
            self.shutdown_request(request)
            raise

    def _serve(self, request: Any, client_address: Any, slot: Any, read_within: float) -> None:
        start = time.monotonic()
        self.deadlines.read, self.deadlines.total = start + read_within, start + self.request_timeout
        self.deadlines.spare = slot is self._spare
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a broken connection never reaches the service
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            if slot is self._spare:
                self.spare_answering.clear()
            slot.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # (socketserver prints a traceback to stderr)


class MetricsServer:
    """``/metrics`` and ``/healthz`` over HTTP in a daemon thread; see the module docstring
    for the bounds (``max_connections``, ``timeout``, ``spare_timeout``)."""

    def __init__(self, metrics: ServiceMetrics, port: int, host: str = "0.0.0.0", stall_after: float = 60.0,
                 max_connections: int = 16, timeout: float = 10.0, spare_timeout: float = 1.0):
        self.metrics = metrics
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 1.0  # replaced per recv/send by the connection's deadlines (setup, _send)

            def setup(self) -> None:
                super().setup()
                deadlines = outer.server.deadlines
                self.total_deadline = deadlines.total
                self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadlines.read,
                                                               outer.metrics.http_timeouts.inc))

            def handle(self) -> None:
                try:
                    super().handle()
                except (socket.timeout, ConnectionError):
                    pass  # a slow, idle or vanished client: drop the connection

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.split("?")[0] == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif self.path.split("?")[0] == "/healthz":
                    stalled = outer.metrics.failed or time.monotonic() - outer.metrics.last_poll > stall_after
                    if stalled or outer.metrics.paused:
                        self._send(503, b"stalled\n" if stalled else b"paused\n", "text/plain")
                    else:
                        self._send(200, b"ok\n", "text/plain")
                else:
                    self._send(404, b"not found: try /metrics or /healthz\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                if outer.server.deadlines.spare:
                    outer.server.spare_answering.set()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self._within_deadline()
                self.end_headers()
                self._within_deadline()
                self.wfile.write(body)  # (sendall: the timeout bounds the whole call)

            def _within_deadline(self) -> None:
                remaining = self.total_deadline - time.monotonic()
                if remaining <= 0:
                    outer.metrics.http_timeouts.inc()
                    raise socket.timeout("answer not sent within the request deadline")
                self.connection.settimeout(remaining)

            def log_message(self, *args: Any) -> None:  # quiet by default
                pass

        self.server = _BoundedHTTPServer((host, port), Handler, max_connections, metrics.http_refused.inc,
                                         timeout=timeout, spare_timeout=spare_timeout)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> "MetricsServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


#: how each metric type's series are named in the exposition (``prometheus_client``)
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "summary": ("_count", "_sum")}

PROMETHEUS_DOC_HEADER = """# Prometheus series of `streammetrics consume`

`/metrics` (`--metrics-port`) serves these series, from one registry per service
(`consumers.observability.ServiceMetrics`): the service's own (`streammetrics_*`) and
prometheus-client's process, GC and platform collectors (`process_*` on Linux, `python_*`).
Counters also have a `_created` series (prometheus-client's default). Per-key gauges
(`streammetrics_window_metric`, `streammetrics_window_end_seconds`) cover at most `--metrics-keys`
keys. This file is generated: `python -m consumers.observability > docs/prometheus.md`
(`tests/consumers/test_prometheus_doc.py` fails when it is stale).

| series | type | labels | meaning |
| --- | --- | --- | --- |
"""


def prometheus_doc(metrics: ServiceMetrics | None = None) -> str:
    """``docs/prometheus.md``: every metric family of the service's registry, sorted by name,
    with its exposed series names, type, label names and help text."""
    metrics = metrics or ServiceMetrics()
    rows = []
    for family in metrics.registry.collect():
        labels = metrics.registry.labelnames.get(family.name)
        if labels is None:  # a collector's: the labels its samples carry
            labels = tuple(sorted({k for sample in family.samples for k in sample.labels if k != "le"}))
        names = [family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))]
        kind = "gauge" if family.type == "info" else family.type
        shown = ", ".join(f"`{n}`" for n in names)
        text = " ".join(family.documentation.split()).replace("|", "\\|")
        rows.append((family.name, f"| {shown} | {kind} | {', '.join(labels) or '-'} | {text} |"))
    return PROMETHEUS_DOC_HEADER + "\n".join(row for _, row in sorted(rows)) + "\n"


if __name__ == "__main__":
    print(prometheus_doc(), end="")
