"""``streammetrics consume``: the Kafka service.

Reads prediction events from a topic in a consumer group, updates per-partition windowed
monitors, publishes each closed window's snapshot to the output topic (key
``model|segment|window_start``) and sends every bad or late event to the dead-letter topic.

Exactly-once *results* under crashes (``--state-dir``), without Kafka transactions:

1. records are applied in offset order to the partition's :class:`WindowManager` (batch
   mode, deterministic: see :mod:`streammetrics.stream.windows`);
2. every ``checkpoint_interval`` seconds (and on revocation and clean stop) the producer is
   flushed, so every snapshot and dead letter derived so far is acknowledged by the broker;
3. then each partition's window state and next offset are written atomically
   (:mod:`consumers.checkpoint`) and the offsets committed to the group (for lag tools);
4. on (re)assignment the partition's checkpoint is loaded and the consumer seeks to its
   offset.

A crash between 2 and 3 re-reads records whose snapshots were already published: they are
re-published byte for byte under the same keys (windows are deterministic and re-emitting
a window yields the same key and content), so a compacted output topic, or any consumer
keeping the last value per key, sees exactly the snapshots of an uninterrupted run. No event
is lost (nothing is committed before its effects are published) or counted twice (state and
offset are saved together). Idle closing depends on wall time, so it is the one part that can
differ after a restart; set ``--idle-close 0`` where bit-exact replays matter more than
timely reporting of quiet keys.

Each partition has its own windows, so every (model, segment) key must live in one
partition: produce with the message key ``model|segment`` (as ``demo`` does). A key seen on
two partitions is logged.

Nothing in a message can stop the service: undecodable, malformed and late events become
dead letters carrying the original bytes as value and ``streammetrics.*`` headers with the
reason, the field and the source topic/partition/offset.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from streammetrics.monitors import make_monitor
from streammetrics.stream.events import Event, EventParser, Rejection
from streammetrics.stream.snapshots import snapshot_key, snapshot_line
from streammetrics.stream.windows import WindowManager

from .checkpoint import EVENT_CODEC, CheckpointStore
from .gc_tuning import tune_gc
from .settings import FETCH_SETTINGS, consumer_settings

__all__ = ["ServiceConfig", "MetricsService", "snapshot_key", "consumer_settings", "FETCH_SETTINGS", "tune_gc"]

log = logging.getLogger("streammetrics.consume")


@dataclass
class ServiceConfig:
    """Everything ``consume`` needs; mirrors its command-line flags."""

    bootstrap_servers: str
    topic: str
    output_topic: str
    group_id: str = "streammetrics"
    dlq_topic: str | None = None
    state_dir: str | None = None
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    task: str = "binary"
    window: float = 60.0
    slide: float | None = None
    grace: float = 0.0
    idle_close: float | None = 30.0
    threshold: float = 0.5
    classes: list | None = None
    labels: list | None = None
    fields: dict[str, str] = field(default_factory=dict)
    cumulative: bool = False
    include_state: bool = True
    checkpoint_interval: float = 1.0
    max_poll_records: int = 5000
    kafka_options: dict[str, Any] = field(default_factory=dict)

    def monitor_factory(self) -> Callable[[], Any]:
        task, threshold, classes, labels = self.task, self.threshold, self.classes, self.labels

        def factory() -> Any:
            return make_monitor(task, threshold=threshold, classes=classes, labels=labels)

        factory()  # configuration errors surface at start-up
        return factory


class _Partition:
    """Windows and position of one assigned input partition."""

    __slots__ = ("tp", "windows", "next_offset", "saved_offset", "known_keys")

    def __init__(self, tp: Any, windows: WindowManager, next_offset: int | None) -> None:
        self.tp = tp
        self.windows = windows
        self.known_keys = 0  # keys of `windows` already checked against other partitions
        self.next_offset = next_offset  # next offset to apply (None: whatever comes first)
        self.saved_offset = next_offset  # offset of the last checkpoint


class MetricsService:
    """The consume loop; see the module docstring. ``run()`` blocks until :meth:`stop`.

    ``consumer`` and ``producer`` are injected (:func:`consumers.clients.kafka_clients` builds
    the real kafka-python ones, which is what happens when they are omitted). The service calls
    only ``consumer.subscribe(topics, listener=)``, ``poll(timeout_ms=, max_records=)``,
    ``seek(tp, offset)``, ``seek_to_beginning(tp)``, ``commit(offsets, timeout_ms=)``,
    ``highwater(tp)``, ``close(autocommit=, timeout_ms=)`` and ``producer.send(topic, key=,
    value=, headers=)`` (a future with ``is_done``, ``failed()``, ``exception``),
    ``flush(timeout=)``, ``close(timeout=)``, ``config["max_request_size"]``: anything with
    those methods works, e.g. the in-memory fakes of ``tests/consumers/kafka_fakes.py``.
    ``listener`` wraps the rebalance callbacks for ``subscribe`` (kafka-python wants its own
    listener class; see :func:`consumers.clients.rebalance_listener`).
    """

    def __init__(self, config: ServiceConfig, consumer: Any = None, producer: Any = None, *,
                 clock: Callable[[], float] = time.monotonic, store: CheckpointStore | None = None,
                 listener: Callable[[Callable[[Any], None], Callable[[Any], None]], Any] | None = None) -> None:
        from .observability import ServiceMetrics

        self.config = config
        self._clock = clock
        self.parser = EventParser(config.task, classes=config.labels if config.task == "labels" else config.classes,
                                  fields=config.fields)
        self._factory = config.monitor_factory()
        self.metrics = ServiceMetrics()
        if store is None and config.state_dir:
            store = CheckpointStore(config.state_dir, config.group_id, config.topic)
        self.store = store
        self.partitions: dict[Any, _Partition] = {}
        #: plain totals of what the loop did (also exported as Prometheus counters)
        self.counts = {"messages": 0, "events": 0, "rejected": 0, "late": 0, "snapshots": 0, "dead_letters": 0}
        self._key_partition: dict[tuple[str, str], int] = {}
        self._stop = threading.Event()
        self._caught_up = False
        self._last_checkpoint = clock()
        self._last_idle_check = clock()
        self._server: Any = None
        if listener is None:
            from .clients import rebalance_listener as listener
        self._listener = listener
        if consumer is None or producer is None:
            from .clients import kafka_clients

            consumer, producer = kafka_clients(config)
        self.consumer = consumer
        self.producer = producer

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        """Ask the loop to finish its batch, checkpoint, commit and return."""
        self._stop.set()

    def start(self) -> "MetricsService":
        """Serve metrics (if configured) and join the group; :meth:`poll_once` then does the work."""
        if self.config.metrics_port is not None:
            from .observability import MetricsServer

            self._server = MetricsServer(self.metrics, self.config.metrics_port, self.config.metrics_host).start()
            log.info("metrics on :%d/metrics", self._server.port)
        self.consumer.subscribe([self.config.topic], listener=self._listener(self._assign, self._revoke))
        return self

    def run(self) -> None:
        """Run until :meth:`stop`: poll, apply, publish, checkpoint; then a last checkpoint and close."""
        self.start()
        try:
            while not self._stop.is_set():
                self.poll_once()
            self.checkpoint()
        finally:
            self.close()

    def close(self) -> None:
        try:
            self.consumer.close(autocommit=False)
        finally:
            self.producer.close()
            if self._server is not None:
                self._server.stop()

    # ------------------------------------------------------------------ rebalancing
    def _new_windows(self) -> WindowManager:
        c = self.config
        return WindowManager(
            self._factory, c.window, c.slide, c.grace, c.idle_close or None,
            cumulative=c.cumulative, include_state=c.include_state, batch=True,
            event_codec=EVENT_CODEC, clock=self._clock,
        )

    def _assign(self, assigned: Any) -> None:
        for tp in assigned:
            windows = self._new_windows()
            offset = None
            if self.store is not None:
                saved = self.store.load(tp.partition)
                if saved is not None:
                    windows.load_dict(saved["windows"])
                    offset = saved["offset"]
                    self.consumer.seek(tp, offset)
            self.partitions[tp] = _Partition(tp, windows, offset)
            log.info("assigned %s[%d] from offset %s", tp.topic, tp.partition, offset)

    def _revoke(self, revoked: Any) -> None:
        # kafka-python runs this on its IO thread, where a blocking commit is refused: save the
        # checkpoints (the source of truth for the next owner) and leave the commit to it
        mine = [tp for tp in revoked if tp in self.partitions]
        if mine:
            self.checkpoint(mine, commit=False)
        for tp in mine:
            del self.partitions[tp]
            log.info("revoked %s[%d]", tp.topic, tp.partition)

    # ------------------------------------------------------------------ processing
    def poll_once(self, timeout_ms: int = 200) -> int:
        """One poll: apply its records, publish closed windows, checkpoint when due.
        Returns the number of records applied."""
        batches = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.config.max_poll_records)
        self.metrics.last_poll = time.monotonic()
        applied = 0
        for tp, records in batches.items():
            part = self.partitions.get(tp)
            if part is None:  # revoked while the batch was in flight
                continue
            apply, parse_value, add = self._apply_items, self.parser.parse_value, part.windows.add
            polled = len(records)
            first = part.next_offset
            if first is not None and records[0].offset < first:  # (records come in offset order)
                records = [rec for rec in records if rec.offset >= first]  # covered by the checkpoint
            events = 0
            for rec in records:
                value = rec.value
                items = None if value is None else parse_value(value)
                # the common record, one valid event for an open window, inline; the rest in _apply_items
                if items is not None and len(items) == 1 and items[0].__class__ is Event:
                    try:
                        if add(items[0]):
                            events += 1
                            continue
                    except ValueError:
                        pass
                    else:  # late: add() counted it and changed nothing else
                        self._late(rec, None)
                        continue
                events += apply(part, rec, items)
            if records:
                part.next_offset = records[-1].offset + 1
                applied += len(records)
            if events:
                self.counts["events"] += events
                self.metrics.events.inc(events)
            self._check_new_keys(part)
            self._publish_ready(part)
            self.metrics.messages.inc(polled)
            self.counts["messages"] += polled
        now = self._clock()
        if self.config.idle_close and now - self._last_idle_check >= min(1.0, self.config.idle_close / 4):
            self._last_idle_check = now
            for part in self.partitions.values():
                self._publish_ready(part)
        if now - self._last_checkpoint >= self.config.checkpoint_interval:
            self.checkpoint()
        self._update_lag()
        self._caught_up = self._compute_caught_up()
        return applied

    def _apply_items(self, part: _Partition, rec: Any, items: list | None) -> int:
        """Apply one record's parsed ``items`` (None: the record had no value); dead-letter the bad
        and late ones. Returns the number of events applied."""
        if items is None:
            self._dead_letter(rec, "message has no value (tombstone)", None, None)
            return 0
        windows = part.windows
        applied = 0
        for index, item in enumerate(items):
            if item.__class__ is Event:
                try:
                    if windows.add(item):
                        applied += 1
                    else:
                        self._late(rec, index if len(items) > 1 else None)
                except ValueError as exc:
                    self.counts["rejected"] += 1
                    self.metrics.bad_events.labels("monitor").inc()
                    self._dead_letter(rec, str(exc), None, index if len(items) > 1 else None)
            else:
                assert isinstance(item, Rejection)
                self.counts["rejected"] += 1
                self.metrics.bad_events.labels(_reason_class(item.reason)).inc()
                idx = item.index if item.index is not None else (index if len(items) > 1 else None)
                self._dead_letter(rec, item.reason, item.field, idx)
        return applied

    def _late(self, rec: Any, index: int | None) -> None:
        self.counts["late"] += 1
        self.metrics.late_events.inc()
        self._dead_letter(rec, "late event: every window holding its time has closed", "ts", index)

    def _check_new_keys(self, part: _Partition) -> None:
        """Warn when a (model, segment) key new to this partition was already seen on another."""
        if part.windows.key_count == part.known_keys:
            return
        keys = part.windows.keys
        partition = part.tp.partition
        for key in keys[part.known_keys:]:
            seen = self._key_partition.setdefault(key, partition)
            if seen != partition:
                self._key_partition[key] = partition
                log.warning("key model=%r segment=%r seen on partitions %d and %d: produce with key "
                            "'model|segment' so that each key lives in one partition",
                            key[0], key[1], seen, partition)
        part.known_keys = len(keys)

    def _publish_ready(self, part: _Partition) -> None:
        for snap in part.windows.poll():
            self.producer.send(self.config.output_topic, key=snapshot_key(snap),
                               value=snapshot_line(snap).encode())
            self.metrics.observe_snapshot(snap)
            self.counts["snapshots"] += 1

    def _dead_letter(self, rec: Any, reason: str, field_name: str | None, index: int | None) -> None:
        if not self.config.dlq_topic:
            log.debug("dropped bad event at %s[%d]@%d: %s", rec.topic, rec.partition, rec.offset, reason)
            return
        headers = [
            ("streammetrics.reason", reason.encode()),
            ("streammetrics.source", f"{rec.topic}/{rec.partition}/{rec.offset}".encode()),
            ("streammetrics.topic", rec.topic.encode()),
            ("streammetrics.partition", str(rec.partition).encode()),
            ("streammetrics.offset", str(rec.offset).encode()),
        ]
        if field_name is not None:
            headers.append(("streammetrics.field", field_name.encode()))
        if index is not None:
            headers.append(("streammetrics.index", str(index).encode()))
        self.producer.send(self.config.dlq_topic, key=rec.key, value=rec.value, headers=headers)
        self.metrics.dead_letters.inc()
        self.counts["dead_letters"] += 1

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, tps: list | None = None, commit: bool = True) -> None:
        """Flush the producer, then save each partition's windows and offset, then commit."""
        from kafka.structs import OffsetAndMetadata

        parts = [self.partitions[tp] for tp in (tps if tps is not None else list(self.partitions))
                 if tp in self.partitions]
        self.producer.flush()
        commits = {}
        for part in parts:
            if part.next_offset is None or part.next_offset == part.saved_offset:
                continue
            if self.store is not None:
                self.store.save(part.tp.partition, part.next_offset, part.windows.to_dict())
            part.saved_offset = part.next_offset
            commits[part.tp] = OffsetAndMetadata(part.next_offset, "", -1)
        if commits and commit:
            try:
                self.consumer.commit(commits)
            except Exception as exc:  # a commit failure (e.g. rebalance) is safe: the checkpoint decides
                log.warning("offset commit failed (%s); checkpoints still hold the offsets", exc)
        self._last_checkpoint = self._clock()
        self.metrics.last_checkpoint.set(time.time())

    def caught_up(self) -> bool:
        """True when, at the end of the last poll, every assigned partition was read to its high
        watermark and no window was open (computed in the loop; safe to read from any thread)."""
        return self._caught_up

    def _compute_caught_up(self) -> bool:
        if not self.partitions:
            return False
        for tp, part in list(self.partitions.items()):
            high = self.consumer.highwater(tp)
            if high is None or (part.next_offset or 0) < high or part.windows.open_panes():
                return False
        return True

    def _update_lag(self) -> None:
        for tp, part in self.partitions.items():
            high = self.consumer.highwater(tp)
            if high is not None and part.next_offset is not None:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(high - part.next_offset, 0))


def _reason_class(reason: str) -> str:
    """A low-cardinality label for a rejection reason (the Prometheus label must not explode)."""
    for word in ("json", "missing", "must", "unknown", "array", "object"):
        if word in reason.lower():
            return word
    return "other"
