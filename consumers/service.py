"""``streammetrics consume``: the Kafka service.

Reads prediction events from a topic in a consumer group, updates per-partition windowed
monitors, publishes each closed window's snapshot to the output topic (key
``model|segment|window_start``) and sends every bad or late event to the dead-letter topic.

Exactly-once *results* under crashes (``--state-dir``), without Kafka transactions:

1. records are applied in offset order to the partition's
   :class:`~streammetrics.stream.pipeline.Pipeline` (decode, parse, window; batch mode,
   deterministic: see :mod:`streammetrics.stream.windows`);
2. every ``checkpoint_interval`` seconds (and on revocation and clean stop) the producer is
   flushed (at most ``delivery_timeout``) and every send future checked, so every snapshot and
   dead letter derived so far is acknowledged by the broker; if one is not, nothing more is
   checkpointed and the service exits with status 1;
3. then each partition's window state and next offset are written atomically
   (:mod:`consumers.checkpoint`) and the offsets committed to the group (for lag tools);
4. on (re)assignment the partition's checkpoint is loaded and the consumer seeks to its
   offset.

A crash between 2 and 3 re-reads records whose snapshots were already published: they are
re-published byte for byte under the same keys (windows are deterministic and re-emitting
a window yields the same key and content), so a compacted output topic, or any consumer
keeping the last value per key, sees exactly the snapshots of an uninterrupted run. No event
is lost (nothing is committed before its effects are published) or counted twice (state and
offset are saved together).

Windows close by event time (contract section 7; docs/watermarks.md): one watermark per input
partition for every key, so the snapshots are those ``replay`` writes for the partition's events;
``--idle-close`` moves a partition's watermark only as far as the slowest active partition's, and
the advanced watermark is checkpointed *before* the windows it closes are published
(:meth:`MetricsService.checkpoint`).

Each partition has its own windows, so with ``--partitioning key`` (the default) every
(model, segment) key must live in one partition: produce with the message key
``model|segment`` (as ``demo`` does). That is checked from the records themselves, before they
are applied, so a wrong input never publishes a partial window as if it were the whole one
(contract section 7): when the input topic has more than one partition, a predictions record
whose message key is not ``model|segment`` of its events (e.g. keyed by prediction id, as a
labels topic needs), or a key seen on two of the instance's partitions, stops the service with
one error line naming the record and status 2 (use ``--partitioning any``; or
``--partitioning key-unchecked`` when the producer's own partitioner keeps each key in one
partition). A message key already checked is trusted (one dict lookup per record).

Delayed labels from a second topic (``--labels-topic T``, contract section 5): the labels
topic is co-partitioned with the predictions by prediction ``id`` (same partition count, message
key = id, so a label lands on its prediction's partition number). The service subscribes to
both topics with kafka-python's range assignor, which cuts every topic's sorted partitions into
the same ranges over the same sorted members, so each member owns partition p of both topics
(verified in kafka-python 3.0.12's ``RangePartitionAssignor.assign``; other assignors do not
promise it, and a partition of one topic without its pair stops the service with status 2).
Partition p's pipeline gets both topics' records merged by event time (each message's first
event's ``ts``; on equal ``ts`` the prediction first; a message without a valid event keeps
its place after its topic's previous one), as ``replay PRED --labels LAB`` merges its files, as
far as both topics have records buffered; when one of them is read to its high watermark the
other goes on alone (so a quiet labels topic does not stall predictions; the order then
depends on arrival, which is the one place a live run can differ from a replay). Messages are
merged whole: an array message is ordered by its first event. Each record is parsed twice
(once for its merge time). Buffers are bounded by ``max_merge_buffer`` records per side: the
fuller side is paused (``consumer.pause``) until the merge drains it. Checkpoints hold the next
offset of both topics (``label_offset``) with the pipeline's state, pending labels included,
and both offsets are committed; a rollback or restart seeks both. Revisions (under the window's key)
come at the window engine's revision ticks, as in ``replay``: docs/revisions.md.

Nothing in a message can stop the service: undecodable, malformed, refused and late events
become ONE dead letter per message, carrying the original bytes as value (truncated to the
producer's ``max_request_size``) and ``streammetrics.*`` headers with the reasons, codes, fields
and indexes and the source topic/partition/offset (see :meth:`MetricsService._dead_letter`).
What happens on exceptions, failed deliveries, unusable checkpoints and oversized snapshots is
listed in :class:`MetricsService`; the time and size bounds in :class:`ServiceConfig`.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from streammetrics.events.records import Rejection
from streammetrics.monitors import DEFAULT_MAX_LABELS, make_monitor
from streammetrics.monitors.reference import DEFAULT_MAX_REFERENCES
from streammetrics.stream.alerting import alert_key, alert_line
from streammetrics.stream.pending import DEFAULT_MAX_PENDING
from streammetrics.stream.pipeline import DEFAULT_LABEL_TTL, Pipeline, PipelineConfig, Problem
from streammetrics.stream.snapshots import content_header, snapshot_key, snapshot_line
from streammetrics.stream.windows import DEFAULT_MAX_FUTURE, DEFAULT_MAX_KEYS

from .checkpoint import Chain, CheckpointError, CheckpointStore, loads, new_chain_id
from .clients import fetch_error_position
from .fastpath import BinaryFastPath
from .gc_tuning import paused_gc, tune_gc
from .lean_producer import RecordSender
from .partials import partial_record, watermark_record
from .settings import FETCH_SETTINGS, consumer_settings

__all__ = ["ServiceConfig", "MetricsService", "snapshot_key", "consumer_settings", "FETCH_SETTINGS", "tune_gc"]

log = logging.getLogger("streammetrics.consume")

#: room for the snapshot key (``model|segment|window_start``) when the pipeline's
#: ``max_snapshot_bytes`` is derived from the producer's ``max_request_size``; a longer key is
#: caught by the final check in ``_publish_ready``
SNAPSHOT_KEY_ROOM = 256

#: bytes kept free in each produced record for Kafka's record and batch framing (kafka-python
#: estimates 61 + 21 bytes plus varints)
RECORD_OVERHEAD = 512

#: a dead letter lists at most this many problems in its ``streammetrics.problems`` header
MAX_LISTED_PROBLEMS = 100

#: keys remembered for the "key seen on two partitions" check (cleared when exceeded), and message
#: keys remembered as checked per partition (``--partitioning key``)
MAX_TRACKED_KEYS = 100_000

#: a dead letter's key is cut to this many bytes
MAX_DEAD_LETTER_KEY = 1024

#: a record batch the Kafka client cannot read (unsupported codec, CRC, corrupt batch) is fetched
#: this many times in all (back-off ``POLL_BACKOFF * 2**k`` s between), then skipped: see
#: :meth:`MetricsService._client_error`
FETCH_ATTEMPTS = 3
#: first back-off (s) after an exception out of ``poll``; doubled per failure, at most ``MAX_POLL_BACKOFF``
POLL_BACKOFF = 0.1
MAX_POLL_BACKOFF = 5.0

#: an environment failure while a partition's records are applied (disk full, unwritable temp
#: dir, a failing SQLite spill) pauses the partition this long (s), doubled per failure at the
#: same offset, at most ``MAX_PAUSE_BACKOFF``: see :meth:`MetricsService._pause`
PAUSE_BACKOFF = 1.0
MAX_PAUSE_BACKOFF = 60.0


def environment_error(exc: BaseException) -> bool:
    """An error of the machine, not of the record: ``OSError`` (disk full, read-only or
    unwritable directory, I/O error; :class:`~streammetrics.stream.pending.SpillError` is one) or
    ``sqlite3.OperationalError`` (SQLite's "database or disk is full", "unable to open")."""
    return isinstance(exc, (OSError, sqlite3.OperationalError))


@dataclass
class ServiceConfig:
    """Everything ``consume`` needs; mirrors its command-line flags.

    Bounds on time (each blocking call of the loop has one): ``delivery_timeout`` (s) bounds
    the producer flush before each checkpoint, ``send()`` waits for metadata or buffer space
    and each produce request; past it the deliveries count as failed, the service publishes
    no checkpoint and exits with status 1 (a restart resumes exactly from the last checkpoint).
    ``commit_timeout`` (s) bounds each offset commit and client close. ``stop_timeout`` (s):
    ``streammetrics consume`` exits at most this long after SIGTERM/SIGINT, in any state (a
    watchdog ends the process with status 1 if a clean stop has not finished by then).
    ``stall_after`` (s): ``/healthz`` answers 503 when the loop has not polled for that long.

    Bounds on ``/metrics``: per-key gauges for at most ``metrics_keys`` keys (the most events in
    their latest window; 0: none), at most ``metrics_max_connections`` HTTP connections at once,
    each given ``metrics_timeout`` s in all for its request and answer, the last connection kept
    for quick requests such as ``/healthz`` (see :mod:`consumers.observability`).
    """

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
    #: confidence of the snapshots' intervals (``--confidence``; contract section 9)
    confidence: float = 0.95
    #: ``changes`` against the reference or the previous window (``--compare``), their ``--fdr``
    compare: str | None = None
    fdr: float = 0.05
    classes: list | None = None
    labels: list | None = None
    #: labels task, discovered labels: most labels a window keeps (``--max-labels``)
    max_labels: int = DEFAULT_MAX_LABELS
    fields: dict[str, str] = field(default_factory=dict)
    cumulative: bool = False
    include_state: bool = True
    checkpoint_interval: float = 1.0
    #: most of the loop's wall time periodic checkpoints may take (``--checkpoint-max-share``): after a
    #: checkpoint that took ``d`` s the next periodic one comes no sooner than ``d * (1 / share - 1)`` s
    #: (a minimum pause between checkpoints, as Flink's, proportional to their cost); 1: every interval
    checkpoint_share: float = 0.25
    max_poll_records: int = 5000
    #: the consumer decodes plain record batches with :mod:`consumers.lean_records` (the same
    #: ``ConsumerRecord`` tuples as kafka-python's, ~2.5x cheaper) and a poll's snapshots go into
    #: the producer's batches at once (:mod:`consumers.lean_producer`, the same batch bytes, ~6x
    #: cheaper); False: kafka-python's own loop and ``send``
    lean_records: bool = True
    kafka_options: dict[str, Any] = field(default_factory=dict)
    delivery_timeout: float = 10.0
    commit_timeout: float = 5.0
    stop_timeout: float = 30.0
    #: a member of the input or merge group that has been rebalancing this long (s) leaves and joins
    #: again with a new consumer (``--rejoin-after``; None or 0: never; :mod:`consumers.membership`)
    rejoin_after: float | None = 30.0
    #: on stop, a member in the middle of a rebalance keeps polling until it is over, at most this
    #: long (s), before it leaves (leaving mid-rebalance stalls a group on tansu: consumers/NOTES.md)
    leave_wait: float = 10.0
    stall_after: float = 60.0
    metrics_keys: int = 100
    max_future: float | None = DEFAULT_MAX_FUTURE
    max_keys: int | None = DEFAULT_MAX_KEYS
    #: ``--max-snapshot-bytes``: published snapshots longer than this degrade (state coarsened or
    #: dropped, flagged, counted); the producer's ``max_request_size`` bounds them anyway. Partials
    #: (``--partitioning any``, slices) keep their state: the merge stage applies the bound
    max_snapshot_bytes: int | None = None
    metrics_max_connections: int = 16
    metrics_timeout: float = 10.0
    #: label-free metrics per (model, segment) against a reference (``--reference``), None: off
    references: Mapping[tuple[str, str], Any] | None = None
    max_references: int = DEFAULT_MAX_REFERENCES
    #: binary operating points in snapshots (``--target-recall`` ... ``--cost-fn``; contract
    #: section 11: :class:`streammetrics.monitors.operating_points.OperatingPoints`), None: off
    operating_points: Any = None
    #: delayed labels (contract section 5): the topic of label events, co-partitioned with
    #: ``topic`` by prediction ``id`` (``--labels-topic``); None: labels only inside ``topic``
    labels_topic: str | None = None
    label_ttl: float = DEFAULT_LABEL_TTL
    max_pending_labels: int = DEFAULT_MAX_PENDING
    #: records held per partition and topic while the other topic of the pair has none to merge
    #: with (``--max-merge-buffer``); past it the full side is paused until the merge drains it
    max_merge_buffer: int = 20_000
    #: checkpoints also go to this topic (partition p's to partition p) and are restored from it
    #: when ``state_dir`` has none or an older one (``--changelog-topic``; :mod:`consumers.changelog`)
    changelog_topic: str | None = None
    #: HMAC key file sealing internal records (``--internal-key``; else ``$STREAMMETRICS_INTERNAL_KEY``;
    #: :mod:`consumers.signing`)
    internal_key: str | None = None
    #: a partition whose offsets do not move still re-writes its checkpoint this often (seconds,
    #: ``--checkpoint-refresh``), so that a changelog retention longer than it always keeps one
    checkpoint_refresh: float = 3600.0
    #: ``"key"``: every (model, segment) lives in one input partition (produce with key
    #: ``model|segment``); ``"any"``: events of a key may be on every partition, partial windows
    #: are merged exactly by the merge stage (``--partitioning``; :mod:`consumers.partials`)
    partitioning: str = "key"
    #: ``--partitioning key``: refuse a predictions record of a multi-partition topic whose message
    #: key is not ``model|segment`` of its events, and a key seen on two partitions (status 2);
    #: False: ``--partitioning key-unchecked`` (a warning for the latter)
    key_check: bool = True
    #: ``--partitioning any``: the internal topic of partial windows and watermarks
    #: (``--partials-topic``, default ``<group>-<topic>-partials``)
    partials_topic: str | None = None
    #: ``--partitioning any``: windows the merge holds per partials partition (``--max-merge-windows``)
    max_merge_windows: int = 100_000
    #: alert rules (``--alert``, ``--alerts``, ``--alert-cooldown``;
    #: :class:`streammetrics.stream.alerting.AlertSpec`) evaluated on every published snapshot;
    #: their events go to ``alerts_topic`` (``--alerts-topic``, key ``rule|model|segment``)
    alerts: Any = None
    alerts_topic: str | None = None
    #: slices and roll-ups (``--slice-by``, ``--rollup``, ``--fairness-by``, ``--max-slice-values``;
    #: contract section 11: :class:`streammetrics.stream.slicing.SliceSpec`), None: off. In both
    #: partitioning modes the partitions publish their slice windows as partials and the merge
    #: stage applies the budget and rolls up (a roll-up spans partitions: docs/slices.md)
    slicing: Any = None

    def __post_init__(self) -> None:
        if not 0.0 < self.checkpoint_share <= 1.0:
            raise ValueError(f"--checkpoint-max-share must be above 0 and at most 1, got {self.checkpoint_share!r}")
        if self.metrics_max_connections < 2:
            raise ValueError(f"metrics_max_connections must be at least 2 (one is kept for /healthz), got "
                             f"{self.metrics_max_connections}")
        if self.partitioning not in ("key", "any"):
            raise ValueError(f"--partitioning must be 'key' or 'any', got {self.partitioning!r}")
        if self.slicing is not None:
            if self.labels_topic:
                raise ValueError("--slice-by, --rollup and --fairness-by read the slice fields of each prediction "
                                 "with its label: not with --labels-topic")
            if self.alerts is not None:
                raise ValueError("--slice-by, --rollup and --fairness-by: alert rules (--alert, --alerts) are "
                                 "not evaluated on slices in consume yet")
        if self.merged:
            why = "--partitioning any" if self.partitioned else "--slice-by, --rollup and --fairness-by"
            if self.cumulative:
                raise ValueError(f"--cumulative is not supported with {why}")
            if not self.changelog_topic and not self.state_dir:
                raise ValueError(f"{why} keeps the merge stage's state in a changelog topic or under "
                                 "--state-dir: give one of them (not --changelog-topic '' without --state-dir)")
            if not self.partials_topic:
                self.partials_topic = f"{self.group_id}-{self.topic}-partials"


    @property
    def partitioned(self) -> bool:
        """Any input partitioning (``--partitioning any``): partials merged by the merge stage."""
        return self.partitioning == "any"

    @property
    def merged(self) -> bool:
        """The partitions publish partials that the merge stage merges: ``--partitioning any``,
        or slices (their budget and roll-ups span the partitions)."""
        return self.partitioning == "any" or self.slicing is not None

    def monitor_factory(self) -> Callable[[], Any]:
        task, threshold, classes, labels = self.task, self.threshold, self.classes, self.labels
        confidence, max_labels = self.confidence, self.max_labels

        def factory() -> Any:
            return make_monitor(task, threshold=threshold, classes=classes, labels=labels, max_labels=max_labels,
                                confidence=confidence)

        factory()  # configuration errors surface at start-up
        return factory

    def pipeline_config(self, max_snapshot_bytes: int | None = None) -> PipelineConfig:
        """The per-partition :class:`PipelineConfig` of these settings."""
        partitioned = self.merged  # partial windows: one watermark per partition, states for the merge
        return PipelineConfig(
            slicing=self.slicing, slice_output=False,  # (slices keyed here, budget and roll-ups at the merge)
            task=self.task, window=self.window, slide=self.slide, grace=self.grace,
            threshold=self.threshold, classes=self.classes, labels=self.labels, max_labels=self.max_labels,
            confidence=self.confidence, compare=self.compare, fdr=self.fdr,
            fields=dict(self.fields),
            cumulative=self.cumulative, include_state=self.include_state or partitioned, max_future=self.max_future,
            max_keys=self.max_keys or None, max_snapshot_bytes=max_snapshot_bytes, batch=True,
            references=self.references, max_references=self.max_references,
            operating_points=self.operating_points,
            label_ttl=self.label_ttl, max_pending_labels=self.max_pending_labels,
            alerts=None if partitioned else self.alerts,  # partials: the merge stage evaluates the merged windows
        )

    def window_settings(self) -> dict[str, Any]:
        """What a checkpoint's windows depend on: a checkpoint written with other values is refused."""
        return {"task": self.task, "window": self.window, "slide": self.slide, "grace": self.grace,
                "threshold": self.threshold, "classes": self.classes, "labels": self.labels,
                "fields": dict(sorted(self.fields.items())), "cumulative": self.cumulative,
                **({"labels_topic": self.labels_topic, "label_ttl": self.label_ttl} if self.labels_topic else {}),
                **({"partitioning": "any"} if self.partitioned else {}),
                **({"slice_by": list(self.slicing.fields)} if self.slicing is not None else {}),
                **({"max_labels": self.max_labels} if self.task == "labels" and self.labels is None else {})}

    def topics(self) -> list[str]:
        """The topics the service subscribes to (predictions, then labels)."""
        return [self.topic] + ([self.labels_topic] if self.labels_topic else [])


class DeliveryError(RuntimeError):
    """Snapshots or dead letters could not be delivered (send failed, flush timed out)."""


class _Partition:
    """Pipeline (windows) and position of one assigned input partition.

    ``saved_offset`` / ``chain``: the last consistent checkpoint (offset, and the encoded pipeline
    state as a full checkpoint and the deltas since: :class:`consumers.checkpoint.Chain`; no full
    one = empty windows), the point a failure rolls back to.
    """

    __slots__ = ("tp", "pipeline", "next_offset", "saved_offset", "committed_offset",
                 "known_keys", "dirty", "poison", "failures", "labels", "preds", "saved_at", "last_record",
                 "advanced", "checked_keys", "chain")

    def __init__(self, tp: Any, pipeline: Pipeline, next_offset: int | None,
                 payload: bytes | None = None, now: float = 0.0) -> None:
        self.tp = tp
        self.last_record = now  # service clock when a record of it (or its labels side) last came
        self.advanced = False  # its watermark was advanced (--idle-close): publish once that is saved
        self.checked_keys: set[bytes] = set()  # message keys found to be model|segment of their events
        self.pipeline = pipeline
        self.known_keys = 0  # keys of the pipeline's windows already checked against other partitions
        self.next_offset = next_offset  # next offset to apply (None: whatever comes first)
        self.saved_offset = next_offset  # offset of the last checkpoint
        self.chain = Chain(payload)  # incremental checkpoints since the last full one (consumers.checkpoint)
        self.committed_offset = next_offset
        self.dirty = False  # state changed (an idle partition's watermark advanced) without the offset moving
        self.saved_at = -math.inf  # clock() of the last checkpoint written (--checkpoint-refresh)
        self.poison: set[int] = set()  # offsets whose processing raised twice: dead-lettered, not applied
        self.failures: dict[Any, int] = {}  # offset -> exceptions while processing it (bounded: see _rollback)
        self.labels: _LabelSide | None = None  # --labels-topic: the labels partition of the same number
        self.preds: _Side | None = None  # --labels-topic: predictions polled, awaiting the merge


class _Unreadable:
    """What :meth:`MetricsService._dead_letter` needs of a record the client could not read."""

    __slots__ = ("topic", "partition", "offset", "key", "value")

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.key: bytes | None = None
        self.value = b""


class _Pause:
    """A partition paused after an environment failure (:meth:`MetricsService._pause`): until
    when (service clock), the offset that failed and failures there in a row, and whether its
    pipeline still has to be reloaded from the checkpoint."""

    __slots__ = ("until", "offset", "failures", "reload")

    def __init__(self, offset: Any) -> None:
        self.until = 0.0
        self.offset = offset
        self.failures = 0
        self.reload = True


class _Side:
    """Records of one topic-partition polled but not yet applied (``--labels-topic`` merge), each
    with the event time it is merged by; ``end``: the offset after the last one buffered."""

    __slots__ = ("buffer", "end", "last_ts", "paused")

    def __init__(self) -> None:
        self.buffer: deque[tuple[float, Any]] = deque()
        self.end: int | None = None
        self.last_ts = -math.inf  # a message without a valid event keeps its place after the previous one
        self.paused = False

    def clear(self) -> None:
        self.buffer.clear()
        self.end = None
        self.last_ts = -math.inf


class _LabelSide(_Side):
    """The labels topic's partition paired with a predictions partition: its offsets as
    :class:`_Partition` keeps the predictions' (next to apply, last checkpoint, last commit)."""

    __slots__ = ("tp", "next_offset", "saved_offset", "committed_offset")

    def __init__(self, tp: Any, next_offset: int | None) -> None:
        super().__init__()
        self.tp = tp
        self.next_offset = self.saved_offset = self.committed_offset = next_offset


class MetricsService:
    """The consume loop; see the module docstring. ``run()`` blocks until :meth:`stop` and
    returns the exit status (0 clean stop, 1 delivery or internal failure, 2 unusable checkpoint).

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

    Failures (each proved by ``tests/consumers/test_service_faults.py``):

    * an exception while a partition's records are parsed or applied rolls that partition back
      to its last checkpoint (windows reloaded, consumer seeked) and re-reads from there; a
      record that raises twice is dead-lettered (code ``internal``) instead of applied;
    * a send that raises, a delivery that fails or a flush that times out: no checkpoint is
      written from then on; the loop stops and :meth:`run` returns 1 (restart = exact resume);
    * a checkpoint write that fails (disk full): logged and counted, the partition keeps its
      previous checkpoint and is saved at the next interval; a failed offset commit is retried
      at the next checkpoint (the checkpoint, not the group offset, is the source of truth);
    * a checkpoint that cannot be used: one error line naming the file and what to do, exit 2;
    * an exception out of the Kafka client's ``poll``: see :meth:`_client_error` (counted in
      ``streammetrics_fetch_errors_total{error, outcome}``; never an exit);
    * an environment failure while records are applied (disk full, unwritable temp dir, a failing
      SQLite spill): the partition is paused and read again from its checkpoint later, never
      dead-lettered (:meth:`_pause`).
    """

    def __init__(self, config: ServiceConfig, consumer: Any = None, producer: Any = None, *,
                 clock: Callable[[], float] = time.monotonic, store: CheckpointStore | None = None,
                 listener: Callable[[Callable[[Any], None], Callable[[Any], None]], Any] | None = None,
                 changelog: Any = None, merge: Any = None, consumer_factory: Callable[[], Any] | None = None,
                 group_stable: Callable[[Any], bool | None] | None = None) -> None:
        from .observability import ServiceMetrics

        self.config = config
        self._clock = clock
        #: the decoder/parser settings every partition's pipeline copies (``parser.fast_decode = None``
        #: before the partitions are assigned turns msgspec off, as benchmarks/bench_consumer.py does)
        self.parser = config.pipeline_config().parser()
        self._factory = config.monitor_factory()
        self.metrics = ServiceMetrics(max_keys=config.metrics_keys)
        if store is None and config.state_dir:
            store = CheckpointStore(config.state_dir, config.group_id, config.topic, config.window_settings())
        self.store = store
        #: encodes and checks checkpoints (the state-dir store, or one without files)
        self.codec = store if store is not None else CheckpointStore(None, config.group_id, config.topic,
                                                                     config.window_settings())
        self.partitions: dict[Any, _Partition] = {}
        #: --labels-topic: labels topic-partition -> the predictions partition it is merged into
        self._label_parts: dict[Any, _Partition] = {}
        #: plain totals of what the loop did (also exported as Prometheus counters)
        self.counts = {"messages": 0, "events": 0, "rejected": 0, "late": 0, "snapshots": 0, "dead_letters": 0,
                       "rollbacks": 0, "checkpoint_failures": 0, "commit_failures": 0, "offset_resets": 0,
                       "merge_pauses": 0}
        self._key_partition: dict[tuple[str, str], int] = {}
        self._stop = threading.Event()
        self._caught_up = False
        self._last_checkpoint = clock()
        self._inflight: list[Any] = []  # send futures since the last successful flush
        #: why the service stopped on its own (None while healthy) and the exit status it returns
        self.failure: str | None = None
        self.exit_status = 0
        self._server: Any = None
        if listener is None:
            from .clients import rebalance_listener

            listener = rebalance_listener
        self._listener = listener
        if consumer is None or producer is None:
            from .clients import kafka_clients

            consumer, producer = kafka_clients(config)
        self.consumer = consumer
        self.producer = producer
        #: many records at once into the producer (the snapshots of a poll); lean with kafka-python's own
        self._records = RecordSender(producer, lean=config.lean_records)
        #: builds a new consumer (not subscribed) for a forced rejoin (None: none can be built)
        self._consumer_factory = consumer_factory
        from .membership import GroupWatch

        #: how long this member has been rebalancing (``--rejoin-after``, :mod:`consumers.membership`)
        self._group = GroupWatch("input", config.rejoin_after, clock=clock, stable=group_stable)
        from .signing import RecordSigner

        #: seals the internal records this service writes (changelog, partials, watermarks) and opens
        #: those it reads (``--internal-key``; without a key values pass unchanged)
        self.signer = RecordSigner.from_option(config.internal_key)
        if changelog is None and config.changelog_topic:
            from .changelog import Changelog, KafkaChangelogReader

            reader = KafkaChangelogReader(config.changelog_topic, bootstrap_servers=config.bootstrap_servers,
                                          **security_options(config.kafka_options))
            changelog = Changelog(producer, config.changelog_topic, reader, self.max_record_bytes,
                                  signer=self.signer)
        if changelog is not None and getattr(changelog, "on_reject", False) is None:
            topic = changelog.topic
            changelog.on_reject = lambda reason: self.metrics.internal_rejected.labels(topic, reason).inc()
        #: checkpoints in Kafka (None: only ``--state-dir``)
        self.changelog = changelog
        #: ``--partitioning any``: the merge stage (:class:`consumers.partials.MergeStage`, its own
        #: thread), the partials topic's partition count, and the last watermark sent per partition
        self.merge = merge
        self.partials_partitions: int | None = None
        self._input_partitions: int | None = None  # of --topic (the key check applies when more than 1)
        self._watermarks_sent: dict[int, tuple[int, float]] = {}
        self._watermark_moved: dict[int, tuple[float, float]] = {}  # partition -> (watermark, since when)
        self._idle_logged: dict[int, float] = {}  # partition -> clock of the last "cannot advance" INFO line
        self._unassigned_since = clock()  # since when no input partition is assigned (INFO every 10 s)
        self._unassigned_logged = -math.inf
        #: exceptions out of poll: (tp, offset) -> failed fetches of that batch; failures in a row without one
        self._fetch_failures: dict[tuple[Any, int], int] = {}
        #: --labels-topic: tp -> (first, after last) offsets skipped while records before them were buffered
        self._skips: dict[Any, tuple[int, int]] = {}
        self._poll_errors = 0
        self._checkpoint_bytes = 0  # state bytes written by the checkpoint under way
        self._checkpoint_pause = 0.0  # least time (s) before the next periodic checkpoint (checkpoint_share)
        #: partitions paused by an environment failure (see _pause)
        self._paused: dict[Any, _Pause] = {}
        #: tp -> (next offsets, since when): how long each partition has applied nothing
        self._positions: dict[Any, tuple[tuple[Any, Any], float]] = {}
        #: at the last revocation, tp (of both topics) -> the first offset its records were not applied
        #: from (see :meth:`_revoke`): where a partition kept through the rebalance is read again from
        self._unapplied: dict[Any, int] = {}

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        """Ask the loop to finish its batch, checkpoint, commit and return."""
        self._stop.set()

    def _fail(self, message: str, status: int = 1) -> None:
        """Stop without any further checkpoint: state may be ahead of what was published."""
        if self.failure is None:
            self.failure, self.exit_status = message, status
            self.metrics.failed = True
            log.error("%s", message)
        self._stop.set()

    def start(self) -> "MetricsService":
        """Serve metrics (if configured) and join the group; :meth:`poll_once` then does the work."""
        if self.config.metrics_port is not None:
            from .observability import MetricsServer

            self._server = MetricsServer(self.metrics, self.config.metrics_port, self.config.metrics_host,
                                         stall_after=self.config.stall_after,
                                         max_connections=self.config.metrics_max_connections,
                                         timeout=self.config.metrics_timeout).start()
            log.info("metrics on %s:%d/metrics", self.config.metrics_host, self._server.port)
        self.consumer.subscribe(self.config.topics(), listener=self._listener(self._assign, self._revoke))
        if self.merge is not None:
            self.merge.start()
        return self

    def run(self) -> int:
        """Run until :meth:`stop`: poll, apply, publish, checkpoint; then a last checkpoint and close.
        Returns the exit status (see the class docstring)."""
        try:
            self.start()
            while not self._stop.is_set():
                self.poll_once()
            if self.merge is not None:
                self.merge.stop(timeout=0)  # it leaves its group meanwhile (joined in close())
            if self.failure is None:
                self._settle_before_leaving()
            if self.failure is None:
                self.checkpoint()
        except DeliveryError as exc:
            self._fail(f"stopping without a checkpoint: {exc}; a restart resumes from the last checkpoint")
        except Exception as exc:  # a bug: state may be partly applied, so no checkpoint from here on
            log.exception("internal error")
            self._fail(f"stopping without a checkpoint after an internal error: {type(exc).__name__}: {exc}")
        finally:
            self.close()
        return self.exit_status

    def close(self) -> None:
        """Leave the group and close the clients, each within ``commit_timeout``."""
        timeout = self.config.commit_timeout
        if self.merge is not None:
            self.merge.stop(timeout=self.config.stop_timeout / 2)
            if self.merge.failure is not None and self.failure is None:
                self._fail(self.merge.failure)
        try:
            self.consumer.close(autocommit=False, timeout_ms=int(timeout * 1000))
        except Exception as exc:
            log.warning("consumer close failed: %s", exc)
        finally:
            try:
                self.producer.close(timeout=timeout)
            except Exception as exc:
                log.warning("producer close failed: %s", exc)
            if self._server is not None:
                self._server.stop()
            close_reader = getattr(getattr(self.changelog, "reader", None), "close", None)
            if close_reader is not None:
                close_reader()

    # ------------------------------------------------------------------ rebalancing
    def _settle_before_leaving(self) -> None:
        """Stopping in the middle of a rebalance: keep polling until it is over (at most
        ``leave_wait`` s) before leaving the group. On tansu a member that leaves while its
        JoinGroup is pending can become the leader of the next generation, and the group then has
        no assignment for 50 s to more than 120 s (consumers/NOTES.md)."""
        if self._group.stable(self.consumer) is not False:
            return
        log.info("stopping during a rebalance of the input group: waiting up to %g s for it to finish before "
                 "leaving the group", self.config.leave_wait)
        if not self._group.settled(self.consumer, self.poll_once, self.config.leave_wait,
                                   lambda: self.failure is not None):
            log.info("the input group's rebalance did not finish within %g s: leaving anyway",
                     self.config.leave_wait)

    def _check_membership(self) -> None:
        """``--rejoin-after``: a member rebalancing that long leaves and joins again with a new consumer
        (a group whose generation never completes, e.g. led by a member that had already left)."""
        if not self._group.due(self.consumer):
            return
        self.metrics.forced_rejoins.labels("input").inc()
        self.counts["forced_rejoins"] = self.counts.get("forced_rejoins", 0) + 1
        new = self._group.replace(self.consumer, self._consumer_factory, lambda c: c.subscribe(
            self.config.topics(), listener=self._listener(self._assign, self._revoke)), self.config.commit_timeout)
        if new is not None:
            self.consumer = new

    def _new_pipeline(self) -> Pipeline:
        # the pipeline degrades snapshots over the producer's limit itself (coarser state, then no
        # state); _publish_ready still checks each record with its actual key
        limit = self.max_record_bytes - RECORD_OVERHEAD - SNAPSHOT_KEY_ROOM
        if self.config.max_snapshot_bytes is not None and not self.config.merged:
            limit = min(limit, self.config.max_snapshot_bytes)
        config = self.config.pipeline_config(max_snapshot_bytes=max(limit, 1))
        if self.parser.fast_decode is None:  # msgspec turned off (benchmarks' "json only")
            config = dataclasses.replace(config, fast_json=False)
        pipeline = Pipeline(config)
        pipeline.track_changes()  # incremental checkpoints: changes since the state restored
        return pipeline

    def _pipeline_from(self, payload: bytes | None, partition: int) -> Pipeline:
        pipeline = self._new_pipeline()
        if payload is not None:
            state = loads(payload)["windows"]
            try:
                if isinstance(state, dict) and state.get("type") == "WindowManager":  # written before the pipeline
                    pipeline.windows.load_dict(state)
                else:
                    pipeline.load_dict(state)
                pipeline.track_changes()
            except Exception as exc:  # whatever the monitors raise on foreign state
                if environment_error(exc):  # (restoring spilled pending predictions needs the disk)
                    raise
                path = self.codec.path(partition)
                raise CheckpointError(path, f"its windows do not load ({type(exc).__name__}: {exc})") from None
        return pipeline

    def _assign(self, assigned: Any) -> None:
        labels_topic = self.config.labels_topic
        try:
            label_tps = {tp.partition: tp for tp in assigned if labels_topic and tp.topic == labels_topic}
            for tp in assigned:
                if tp.topic != self.config.topic:
                    continue
                offset, payload, label_offset = None, None, None
                saved, checked = self._restore(tp.partition)
                if saved is not None:
                    offset, label_offset = saved["offset"], saved.get("label_offset")
                    payload = self.codec.encode(tp.partition, offset, saved["windows"], label_offset)
                unloadable = None
                try:
                    pipeline = checked if checked is not None else self._pipeline_from(payload, tp.partition)
                except Exception as exc:
                    if not environment_error(exc):
                        raise
                    unloadable, pipeline = exc, self._new_pipeline()  # paused below: loaded after a back-off
                offset = self._position(tp, offset)
                part = self.partitions[tp] = _Partition(tp, pipeline, offset, payload, self._clock())
                if labels_topic:
                    ltp = label_tps.pop(tp.partition, None)
                    if ltp is None:
                        self._fail(f"partition {tp.partition} of {tp.topic!r} was assigned without partition "
                                   f"{tp.partition} of the labels topic {labels_topic!r}: the two topics must have "
                                   "the same number of partitions (co-partitioned by id)", status=2)
                        return
                    label_offset = self._position(ltp, label_offset)
                    part.preds, part.labels = _Side(), _LabelSide(ltp, label_offset)
                    self._label_parts[ltp] = part
                log.info("assigned %s[%d] from offset %s%s", tp.topic, tp.partition, offset,
                         f" with {labels_topic}[{tp.partition}] from offset {label_offset}" if labels_topic else "")
                if unloadable is not None:  # e.g. no room to spill its pending predictions: not a bad checkpoint
                    self._pause(part, offset, unloadable)
            if label_tps:
                extra = sorted(label_tps)
                self._fail(f"partitions {extra} of the labels topic {labels_topic!r} were assigned without the same "
                           f"partitions of {self.config.topic!r}: the two topics must have the same number of "
                           "partitions (co-partitioned by id)", status=2)
        except CheckpointError as exc:
            self._fail(str(exc), status=2)
        except Exception as exc:  # kafka-python would swallow it on its thread: stop instead
            log.exception("partition assignment failed")
            self._fail(f"stopping: partition assignment failed: {type(exc).__name__}: {exc}")
        finally:
            self._unapplied.clear()  # (kafka-python keeps a partition's state only from one assignment to the next)

    def _position(self, tp: Any, offset: int | None) -> int | None:
        """Where a newly assigned ``tp`` is read from, set on the consumer: its checkpoint's ``offset``;
        without one, the first record this instance had not applied when the partition was revoked,
        if it keeps the partition through the rebalance. kafka-python (3.0.12, eager protocol) keeps
        the fetch position *and the paused flag* of a partition assigned again to the same member,
        while the partition's new state starts from the checkpoint: without this seek the records
        buffered but not applied (a labels side waiting for the predictions to pass its event time)
        were skipped, and a side paused by ``--max-merge-buffer`` was never fetched again, holding its
        partition's watermark, and with ``--partitioning any`` every merged window, forever. Returns
        the offset the partition's state continues from (None: the consumer's own start)."""
        self.consumer.resume(tp)  # a new _Partition/_Side is not paused
        if offset is None:
            offset = self._unapplied.get(tp)
            if offset is not None:
                log.info("%s[%d]: kept through the rebalance without a checkpoint: read again from offset %d",
                         tp.topic, tp.partition, offset)
        if offset is not None:
            self.consumer.seek(tp, offset)
        return offset

    def _restore(self, partition: int) -> tuple[dict[str, Any] | None, Pipeline | None]:
        """The partition's checkpoint: the state dir's or the changelog's, whichever covers more
        input (a state dir is a cache: missing, wiped or behind another instance's progress); and,
        when the changelog's wins, the pipeline its check loaded from it (else None: the caller
        loads it), so that a restore loads the state once."""
        local = self.store.load(partition) if self.store is not None else None
        if self.changelog is None:
            return local, None
        where = f"the changelog checkpoint of partition {partition} in {self.changelog.topic!r}"

        def merged(chain: list[bytes], metas: list[dict[str, Any]] | None = None) -> dict[str, Any]:
            links = [self.codec.decode(partition, raw, where) for raw in chain]
            for data, meta in zip(links, metas or (), strict=False):
                if data["offset"] != meta["offset"] or data.get("label_offset") != meta.get("label_offset") \
                        or ("chain" in meta and data.get("chain") != [meta["chain"], meta["n"]]):
                    raise ValueError("its offsets or chain differ from its header's")
            return self.codec.merge(partition, links, where)

        checked: list[Any] = [None, None, None]  # the last chain checked, its merged checkpoint, its pipeline

        def reach(c: dict[str, Any]) -> tuple[int, int]:
            return c["offset"], c.get("label_offset") or 0

        def check(chain: list[bytes], metas: list[dict[str, Any]]) -> None:  # a bad one is skipped
            checked[:] = [None, None, None]
            if local is not None and metas and reach(metas[-1]) <= reach(local):
                checked[0] = chain  # its header's offsets do not beat the state dir's: not even decoded
                return  # (a header understating its offsets loses nothing: the state dir's is this instance's)
            data = merged(chain, metas)  # (offsets as the header's, else refused)
            payload = self.codec.encode(partition, data["offset"], data["windows"])
            checked[:] = [chain, data, self._pipeline_from(payload, partition)]

        chain = self.changelog.restore(partition, check)
        same = chain is not None and checked[0] is not None and len(chain) == len(checked[0]) and all(
            a is b for a, b in zip(chain, checked[0]))  # the chain the last check passed
        remote = None if chain is None else checked[1] if same else merged(chain)
        candidates = [c for c in (local, remote) if c is not None]
        if not candidates:
            return None, None
        best = max(candidates, key=reach)
        from_changelog = best is remote and best is not local
        log.info("partition %d: restored the %s checkpoint (offset %d)", partition,
                 "changelog" if from_changelog else "state-dir", best["offset"])
        return best, checked[2] if from_changelog and same else None

    def _revoke(self, revoked: Any) -> None:
        # kafka-python runs this on its IO thread, where a blocking commit is refused: save the
        # checkpoints (the source of truth for the next owner) and leave the commit to it
        mine = [tp for tp in revoked if tp in self.partitions]
        try:
            if mine and self.failure is None:
                self.checkpoint(mine, commit=False)
        except DeliveryError as exc:
            self._fail(f"stopping without a checkpoint: {exc}; the next owner resumes from the last checkpoint")
        except Exception as exc:
            log.exception("checkpoint on revocation failed")
            self._fail(f"stopping: checkpoint on revocation failed: {type(exc).__name__}: {exc}")
        finally:
            for tp in mine:
                self._watermark_moved.pop(tp.partition, None)
                part = self.partitions.pop(tp)
                self._remember_unapplied(part)
                self._paused.pop(tp, None)  # its next owner (maybe this instance) starts from the checkpoint
                if part.labels is not None:
                    self._label_parts.pop(part.labels.tp, None)
                log.info("revoked %s[%d]", tp.topic, tp.partition)
            self._show_paused()

    def _remember_unapplied(self, part: _Partition) -> None:
        """Note, for :meth:`_position`, the first offset of each of ``part``'s topics whose record was
        not applied: the next offset to apply, else the first record buffered for the merge."""
        for tp, side, next_offset in ((part.tp, part.preds, part.next_offset),
                                      (part.labels.tp if part.labels else None, part.labels,
                                       part.labels.next_offset if part.labels else None)):
            if tp is None:
                continue
            if next_offset is None and side is not None and side.buffer:
                next_offset = side.buffer[0][1].offset
            if next_offset is not None:
                self._unapplied[tp] = next_offset

    def _saved_state(self, part: _Partition) -> bytes | None:
        """The partition's last checkpoint as one full checkpoint's bytes (its chain merged)."""
        chain = part.chain
        if chain.full is None or not chain.deltas:
            return chain.full
        links = [self.codec.decode(part.tp.partition, raw) for raw in (chain.full, *chain.deltas)]
        data = self.codec.merge(part.tp.partition, links)
        return self.codec.encode(part.tp.partition, data["offset"], data["windows"], data.get("label_offset"))

    def _rollback(self, part: _Partition, bad_offset: int | None, exc: BaseException) -> None:
        """Back to the partition's last consistent checkpoint after ``exc``; ``bad_offset`` (the
        record being processed) is tried again, and dead-lettered instead if it fails twice."""
        self.counts["rollbacks"] += 1
        self.metrics.rollbacks.inc()
        log.error("%s[%d]: %s: %s while processing offset %s; rolling back to the checkpoint at offset %s",
                  part.tp.topic, part.tp.partition, type(exc).__name__, exc, bad_offset, part.saved_offset,
                  exc_info=(type(exc), exc, exc.__traceback__))
        if bad_offset is not None:  # a second failure on the same record makes it a dead letter
            if len(part.failures) >= 1000:
                part.failures.clear()
            part.failures[bad_offset] = part.failures.get(bad_offset, 0) + 1
            if part.failures[bad_offset] >= 2:
                part.poison.add(bad_offset)
        self._reset_to_checkpoint(part)
        if part.labels is not None and part.preds is not None:
            self._resume(part)

    def _reset_to_checkpoint(self, part: _Partition) -> None:
        """The partition's pipeline reloaded from its last checkpoint, the consumer seeked there
        (both topics with ``--labels-topic``); an environment error while reloading propagates
        (the partition keeps its pipeline)."""
        pipeline = self._pipeline_from(self._saved_state(part), part.tp.partition)
        old, part.pipeline = part.pipeline, pipeline
        try:
            old.close()  # its spill files (delayed labels)
        except Exception as exc:  # noqa: BLE001 - scratch files: removed at exit anyway
            log.debug("closing a discarded pipeline failed: %s", exc)
        part.known_keys = 0
        part.dirty = False
        part.next_offset = part.saved_offset
        if part.saved_offset is not None:
            self.consumer.seek(part.tp, part.saved_offset)
        if part.labels is not None and part.preds is not None:  # both topics back to the checkpoint
            part.preds.clear()
            side = part.labels
            side.clear()
            side.next_offset = side.saved_offset
            if side.saved_offset is not None:
                self.consumer.seek(side.tp, side.saved_offset)

    def _out_of_range(self, part: _Partition, high: int) -> None:
        """The checkpoint's offset is past the partition's end: the topic was recreated (or the
        log truncated). Keep the open windows (their events were real) and read the partition
        from its start; every record there is newer than the checkpoint."""
        self.counts["offset_resets"] += 1
        self.metrics.offset_resets.inc()
        log.warning("%s[%d]: checkpoint offset %d is beyond the partition's end (%d): topic recreated or "
                    "truncated? Keeping the open windows and reading the partition from its start",
                    part.tp.topic, part.tp.partition, part.next_offset, high)
        part.next_offset = part.saved_offset = part.committed_offset = None
        part.dirty = True
        if part.preds is not None:
            part.preds.clear()
        self.consumer.seek_to_beginning(part.tp)

    # ------------------------------------------------------------------ processing
    def poll_once(self, timeout_ms: int = 200) -> int:
        """One poll: apply its records, publish closed windows, checkpoint when due.
        Returns the number of records applied."""
        if self._paused:
            self._resume_paused()
        batches = self._poll(timeout_ms)
        applied = 0
        highwater = self.consumer.highwater
        if self.config.labels_topic:
            applied = self._merge_batches(batches)
            batches = {}
        for tp, records in batches.items():
            part = self.partitions.get(tp)
            if part is None or not records or tp in self._paused:  # revoked (or paused) while in flight
                continue
            high = highwater(tp)
            if part.next_offset is not None and high is not None and high < part.next_offset:
                self._out_of_range(part, high)
                continue
            polled = len(records)
            part.last_record = self._clock()
            first = part.next_offset
            if first is not None and records[0].offset < first:  # (records come in offset order)
                records = [rec for rec in records if rec.offset >= first]  # covered by the checkpoint
                if not records:
                    continue
            if part.saved_offset is None:  # empty windows before the first record: consistent
                part.saved_offset = records[0].offset
            if self._key_check_needed() and not self._check_keys(part, records):
                return applied  # stopping (status 2): nothing of this batch is applied or published
            try:
                events = self._apply_records(part, records)
            except DeliveryError:
                raise
            except Exception as exc:
                if environment_error(exc):
                    self._pause(part, part.next_offset, exc)
                else:
                    self._rollback(part, part.next_offset, exc)
                continue
            applied += len(records)
            if events:
                self.counts["events"] += events
                self.metrics.events.inc(events)
            self._check_new_keys(part)
            if self.failure is not None:  # a key on two partitions (--partitioning key): publish nothing
                return applied
            self._publish_ready(part)
            self.metrics.messages.inc(polled)
            self.counts["messages"] += polled
        now = self._clock()
        if self.config.idle_close and not self.config.merged:
            self._publish_quiet_revisions(now)
        if now - self._last_checkpoint >= max(self.config.checkpoint_interval, self._checkpoint_pause):
            self.checkpoint()
        if self.merge is not None and self.merge.failure is not None:
            self._fail(f"stopping: {self.merge.failure}")
        if not self.partitions and now - self._unassigned_logged >= 10.0:
            if self._unassigned_logged > -math.inf:  # (not at the start: the first join takes a few seconds)
                log.info("no partition of %r assigned to this instance for %.0f s: the group is rebalancing, or "
                         "has more members than partitions", self.config.topic, now - self._unassigned_since)
            self._unassigned_logged = now
        elif self.partitions:
            self._unassigned_logged = -math.inf
            self._unassigned_since = now
        self._check_membership()
        self._update_lag()
        self._caught_up = self._compute_caught_up()
        return applied

    # ------------------------------------------------------------------ revisions of quiet partitions
    def _publish_quiet_revisions(self, now: float) -> None:
        """A partition read to its end that has applied nothing for ``--idle-close`` seconds
        publishes the label revisions waiting for the next revision tick (a quiet stream still
        shows its labels), then is checkpointed at once: its windows' revision numbers are saved
        with the offset, so a restart numbers the next revision after it and re-reads nothing
        that the published one covers. Only a crash between that publish and its checkpoint can
        re-publish such a (key, revision) with more labels (docs/revisions.md)."""
        quiet_after = self.config.idle_close or 0.0
        for tp, part in list(self.partitions.items()):
            if tp in self._paused:
                continue
            position = (part.next_offset, part.labels.next_offset if part.labels is not None else None)
            seen = self._positions.get(tp)
            if seen is None or seen[0] != position:
                self._positions[tp] = (position, now)
                continue
            if now - seen[1] < quiet_after or not self._read_to_end(part):
                continue
            if self._publish_ready(part, revisions=True):
                part.dirty = True
                self.counts["quiet_revisions"] = self.counts.get("quiet_revisions", 0) + 1
                self.checkpoint([tp])

    # ------------------------------------------------------------------ environment failures
    def _pause(self, part: _Partition, offset: Any, exc: BaseException) -> None:
        """The rule for an environment failure (:func:`environment_error`) while ``part``'s records
        are applied: never a dead letter, never a window published without the record. The
        partition is paused (``consumer.pause``, both topics with ``--labels-topic``), reset to its
        last checkpoint (windows reloaded; while that fails too, an empty pipeline stands in and
        the reload is retried) and excluded from checkpoints and publishing; after
        :data:`PAUSE_BACKOFF` s (doubled per failure at the same offset, at most
        :data:`MAX_PAUSE_BACKOFF`) it resumes and re-reads from the checkpoint. ``/healthz``
        answers 503 while any partition is paused; ``streammetrics_partition_pauses_total`` counts
        the pauses, ``streammetrics_paused_partitions`` shows how many are paused."""
        pause = self._paused.get(part.tp)
        if pause is None:
            pause = self._paused[part.tp] = _Pause(offset)
        pause.failures = pause.failures + 1 if pause.offset == offset else 1
        pause.offset = offset
        delay = min(PAUSE_BACKOFF * 2 ** (pause.failures - 1), MAX_PAUSE_BACKOFF)
        pause.until = self._clock() + delay
        self.consumer.pause(*self._pair(part))
        self.counts["pauses"] = self.counts.get("pauses", 0) + 1
        self.metrics.partition_pauses.inc()
        self._show_paused()
        log.error("%s[%d]: %s: %s while processing offset %s: an environment failure (disk, temp dir), not a bad "
                  "record: partition paused for %g s, then read again from its checkpoint at offset %s (nothing "
                  "dead-lettered)", part.tp.topic, part.tp.partition, type(exc).__name__, exc, offset, delay,
                  part.saved_offset)
        pause.reload = True
        self._reload(part, pause)

    def _reload(self, part: _Partition, pause: _Pause) -> bool:
        """Reset a paused partition to its checkpoint; False (an empty pipeline stands in) while an
        environment failure prevents it."""
        try:
            self._reset_to_checkpoint(part)
        except Exception as exc:
            if not environment_error(exc):
                raise
            log.error("%s[%d]: the checkpoint cannot be reloaded either (%s: %s); retrying after the pause",
                      part.tp.topic, part.tp.partition, type(exc).__name__, exc)
            part.pipeline = self._new_pipeline()  # nothing to publish or checkpoint from a half-applied state
            part.next_offset = part.saved_offset
            return False
        pause.reload = False
        return True

    def _resume_paused(self) -> None:
        """Resume the paused partitions whose pause is over (their checkpoint reloaded first)."""
        now = self._clock()
        for tp, pause in list(self._paused.items()):
            part = self.partitions.get(tp)
            if part is None:  # revoked meanwhile
                del self._paused[tp]
                continue
            if now < pause.until:
                continue
            if pause.reload and not self._reload(part, pause):
                pause.failures += 1
                pause.until = now + min(PAUSE_BACKOFF * 2 ** (pause.failures - 1), MAX_PAUSE_BACKOFF)
                continue
            del self._paused[tp]
            self.consumer.resume(*self._pair(part))
            for side in (part.preds, part.labels):
                if side is not None:
                    side.paused = False
            log.info("%s[%d]: resumed after a pause: reading again from offset %s", tp.topic, tp.partition,
                     part.next_offset)
        self._show_paused()

    def _show_paused(self) -> None:
        self.metrics.paused = len(self._paused)
        self.metrics.paused_partitions.set(len(self._paused))

    @staticmethod
    def _pair(part: _Partition) -> list:
        return [part.tp] + ([part.labels.tp] if part.labels is not None else [])

    # ------------------------------------------------------------------ client errors
    def _poll(self, timeout_ms: int) -> Mapping[Any, list]:
        """``consumer.poll``; an exception out of it is handled by :meth:`_client_error` (then no records)."""
        try:
            batches = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.config.max_poll_records)
        except Exception as exc:  # noqa: BLE001 - every client exception: see _client_error
            self._client_error(exc)
            return {}
        self._poll_errors = 0
        self.metrics.last_poll = time.monotonic()
        return batches

    def _client_error(self, exc: Exception) -> None:
        """The rule for an exception out of ``poll`` (the service never exits on one):

        * a record batch's (unsupported codec, CRC, corrupt batch: the partition and offset are
          known, :func:`consumers.clients.fetch_error_position`): the batch is fetched again after
          a back-off, :data:`FETCH_ATTEMPTS` times in all; then its offsets are skipped: ONE dead
          letter (code ``unreadable``, empty value, the offset range and error in its reason) and the
          partition goes on after the batch (the skip is checkpointed with the next offset);
        * any other (no broker, a rebalance, authorisation): logged, retried with back-off
          (:data:`POLL_BACKOFF` doubled per failure up to :data:`MAX_POLL_BACKOFF`); ``/healthz``
          answers 503 once they last ``stall_after`` seconds (no successful poll).
        """
        name = type(exc).__name__
        where = fetch_error_position(exc)
        if where is None:
            self._poll_errors += 1
            delay = min(POLL_BACKOFF * 2 ** (self._poll_errors - 1), MAX_POLL_BACKOFF)
            self.metrics.fetch_errors.labels(name, "retried").inc()
            log.error("poll failed (%s: %s); retrying in %.1f s (failure %d in a row)", name, exc, delay,
                      self._poll_errors)
            self._stop.wait(delay)
            return
        self.metrics.last_poll = time.monotonic()  # the client answers: the loop is alive
        tp, offset, skip_to = where
        failures = self._fetch_failures
        if len(failures) > 1000:
            failures.clear()
        attempts = failures.get((tp, offset), 0) + 1
        if attempts < FETCH_ATTEMPTS:
            failures[(tp, offset)] = attempts
            self.metrics.fetch_errors.labels(name, "retried").inc()
            delay = POLL_BACKOFF * 2 ** (attempts - 1)
            log.warning("%s[%d]: cannot read offset %d (%s: %s); fetching it again in %.1f s (attempt %d of %d)",
                        tp.topic, tp.partition, offset, name, exc, delay, attempts + 1, FETCH_ATTEMPTS)
            self._seek_if_assigned(tp, offset)
            self._stop.wait(delay)
            return
        failures.pop((tp, offset), None)
        self.metrics.fetch_errors.labels(name, "skipped").inc()
        self._skip_unreadable(tp, offset, skip_to, f"{name}: {exc}")

    def _skip_unreadable(self, tp: Any, offset: int, skip_to: int, error: str) -> None:
        """Dead-letter and skip the offsets ``[offset, skip_to)`` of ``tp`` (see :meth:`_client_error`)."""
        part = self.partitions.get(tp)
        labels = part is None
        if part is None:
            part = self._label_parts.get(tp)
            if part is None:  # revoked meanwhile: the next owner meets the batch
                return
        reason = (f"the Kafka client could not read offsets {offset}-{skip_to - 1} of {tp.topic}[{tp.partition}] "
                  f"after {FETCH_ATTEMPTS} attempts ({error[:500]}); skipped")
        log.error("%s", reason)
        self._problems(_Unreadable(tp.topic, tp.partition, offset), [Problem(None, "unreadable", reason, None)])
        self.metrics.skipped_offsets.inc(skip_to - offset)
        self.counts["skipped_offsets"] = self.counts.get("skipped_offsets", 0) + skip_to - offset
        side = (part.labels if labels else part.preds) if self.config.labels_topic else None
        if side is not None:  # --labels-topic: records before the batch may still wait in the merge buffer
            side.end = skip_to
            if side.buffer:  # the offset moves past the batch once they are applied (_apply_skips)
                self._skips[tp] = (offset, skip_to)
                self._seek_if_assigned(tp, skip_to)
                return
        holder = part.labels if labels else part
        assert holder is not None
        if holder.saved_offset is None:  # nothing read before: empty state up to the batch is consistent
            holder.saved_offset = offset
        if holder.next_offset is None or holder.next_offset < skip_to:
            holder.next_offset = skip_to
        self._seek_if_assigned(tp, skip_to)

    def _apply_skips(self, part: _Partition) -> None:
        """``--labels-topic``: a skipped batch (:meth:`_skip_unreadable`) whose side has applied every
        record before it moves that side's offset past it (else the other topic would wait for it)."""
        for holder in (part, part.labels):
            if holder is None:
                continue
            skip = self._skips.get(holder.tp)
            if skip is not None and (holder.next_offset is None or holder.next_offset >= skip[0]):
                del self._skips[holder.tp]
                if holder.next_offset is None or holder.next_offset < skip[1]:
                    holder.next_offset = skip[1]

    def _seek_if_assigned(self, tp: Any, offset: int) -> None:
        try:
            self.consumer.seek(tp, offset)
        except Exception as exc:  # noqa: BLE001 - revoked meanwhile (kafka-python: IllegalStateError)
            log.warning("%s[%d]: seek to %d failed: %s", tp.topic, tp.partition, offset, exc)

    # ------------------------------------------------------------------ --labels-topic: merge by event time
    def _merge_batches(self, batches: Mapping[Any, list]) -> int:
        """Buffer the polled records of both topics per partition, then apply each partition's
        buffers merged by event time (:meth:`_merge_apply`); the number of records applied."""
        touched: dict[Any, _Partition] = {}
        for tp, records in batches.items():
            if not records:
                continue
            part = self.partitions.get(tp)
            side: _Side | None
            if part is not None:
                side, next_offset = part.preds, part.next_offset
                high = self.consumer.highwater(tp)
                if next_offset is not None and high is not None and high < next_offset:
                    self._out_of_range(part, high)
                    continue
            else:
                part = self._label_parts.get(tp)
                if part is None or part.labels is None:  # revoked while the batch was in flight
                    continue
                side = part.labels
                next_offset = side.next_offset
            if part.tp in self._paused:  # fetched before the pause: read again on resume
                continue
            assert side is not None
            first = side.end if side.end is not None else next_offset
            if first is not None and records[0].offset < first:
                records = [rec for rec in records if rec.offset >= first]
                if not records:
                    continue
            if side is part.preds and part.saved_offset is None:  # nothing of it in the saved state yet
                part.saved_offset = records[0].offset
            if side is part.preds and self._key_check_needed() and not self._check_keys(part, records):
                return 0  # stopping (status 2): nothing of this batch is applied or published
            elif part.labels is not None and side is part.labels and part.labels.saved_offset is None:
                part.labels.saved_offset = records[0].offset
            self.metrics.messages.inc(len(records))
            self.counts["messages"] += len(records)
            part.last_record = self._clock()
            parse = part.pipeline.parser.parse_value
            for rec in records:
                side.buffer.append((self._merge_ts(parse, side, rec.value), rec))
            side.end = records[-1].offset + 1
            touched[part.tp] = part
        applied = 0
        for part in list(self.partitions.values()):  # an idle side can release the other's buffer
            if part.tp in self._paused:
                continue
            if part.preds is not None and (part.preds.buffer or (part.labels and part.labels.buffer)):
                applied += self._merge_apply(part)
                if self._skips:
                    self._apply_skips(part)
                self._check_new_keys(part)
                if self.failure is not None:
                    return applied
                self._publish_ready(part)
            self._pause_full(part)
        return applied

    @staticmethod
    def _merge_ts(parse: Callable[[Any], list], side: _Side, value: Any) -> float:
        """The event time a message is merged by: its first valid item's ``ts``; a message without
        one keeps its place after the side's previous message (as ``replay`` does)."""
        if value is not None:
            for item in parse(value):
                if item.__class__ is not Rejection:
                    side.last_ts = item.ts
                    break
        return side.last_ts

    def _idle(self, tp: Any, side: _Side, next_offset: int | None) -> bool:
        """Nothing of ``tp`` is buffered and everything up to its high watermark was applied:
        the other topic of the pair may go on without it."""
        if side.buffer:
            return False
        high = self.consumer.highwater(tp)
        if high is None:
            return False
        return (next_offset if next_offset is not None else 0) >= high

    def _merge_apply(self, part: _Partition) -> int:
        """Apply ``part``'s buffered predictions and labels in event-time order (on equal ``ts``
        the prediction first, as ``replay PRED --labels LAB``) as far as both topics have data:
        once one side's buffer is empty, the other waits unless that side is read to its high
        watermark (then it is idle and the other goes on). Records applied; an exception rolls
        the partition back to its checkpoint (both topics)."""
        preds, labels = part.preds, part.labels
        assert preds is not None and labels is not None
        pb, lb = preds.buffer, labels.buffer
        applied = events = 0
        bad: Any = None
        try:
            while pb or lb:
                if pb and (not lb or pb[0][0] <= lb[0][0]):
                    if not lb and not self._idle(labels.tp, labels, labels.next_offset):
                        break
                    rec = pb[0][1]
                    bad = rec.offset
                    part.next_offset = rec.offset
                    events += self._apply_one(part, rec, rec.offset)
                    pb.popleft()
                    part.next_offset = rec.offset + 1
                else:
                    if not pb and not self._idle(part.tp, preds, part.next_offset):
                        break
                    rec = lb[0][1]
                    bad = ("labels", rec.offset)
                    labels.next_offset = rec.offset
                    events += self._apply_one(part, rec, bad)
                    lb.popleft()
                    labels.next_offset = rec.offset + 1
                applied += 1
        except DeliveryError:
            raise
        except Exception as exc:
            if environment_error(exc):
                self._pause(part, bad, exc)
            else:
                self._rollback(part, bad, exc)
            return applied
        finally:
            if events:
                self.counts["events"] += events
                self.metrics.events.inc(events)
        return applied

    def _apply_one(self, part: _Partition, rec: Any, poison_key: Any) -> int:
        if part.poison and poison_key in part.poison:
            self._dead_letter(rec, [Problem(None, "internal", "internal error while processing this message "
                                                              "(see the service log)")])
            return 0
        result = part.pipeline.process(rec.value)
        if result.problems:
            self._problems(rec, result.problems)
        return result.applied

    def _pause_full(self, part: _Partition) -> None:
        """Bound the merge buffers: a side holding ``max_merge_buffer`` records stops being
        fetched (``consumer.pause``) until the merge has drained it below half of that."""
        limit = self.config.max_merge_buffer
        for side, tp in ((part.preds, part.tp), (part.labels, part.labels.tp if part.labels else None)):
            if side is None:
                continue
            if not side.paused and len(side.buffer) >= limit:
                self.consumer.pause(tp)
                side.paused = True
                self.counts["merge_pauses"] += 1
            elif side.paused and len(side.buffer) < limit // 2:
                self.consumer.resume(tp)
                side.paused = False

    def _resume(self, part: _Partition) -> None:
        for side, tp in ((part.preds, part.tp), (part.labels, part.labels.tp if part.labels else None)):
            if side is not None and side.paused:
                self.consumer.resume(tp)
                side.paused = False

    def _apply_records(self, part: _Partition, records: list) -> int:
        """Apply ``records`` in order, then move ``part.next_offset`` past the last; the number
        of events applied. An exception leaves ``part.next_offset`` at the record at fault.

        A message holding one plain valid binary event goes through :mod:`consumers.fastpath`
        (checked and applied with ``Pipeline.process_event``); every other message, and every
        message of a batch holding a poisoned offset, through ``Pipeline.process``: the same
        windows, counters and dead letters either way."""
        pipeline = part.pipeline
        process = pipeline.process
        poison = part.poison
        if poison and records and any(records[0].offset <= offset <= records[-1].offset for offset in poison):
            fast = None  # (poisoned offsets are few: checked per batch, not per record)
        else:
            fast = BinaryFastPath.for_pipeline(pipeline)
        events = 0
        if fast is not None and records:
            event_of, process_event, problems = fast.event, pipeline.process_event, self._problems
            rec = records[0]
            try:
                for rec in records:  # the per-message loop: counters and offsets are per batch
                    value = rec.value
                    event = event_of(value)
                    result = process(value) if event is None else process_event(event)
                    if result.problems:
                        problems(rec, result.problems)
                    events += result.applied
            except BaseException:
                part.next_offset = rec.offset  # the record at fault (see _rollback)
                raise
            part.next_offset = records[-1].offset + 1
            return events
        if not records:
            return 0
        rec = records[0]
        try:
            for rec in records:
                if poison and rec.offset in poison:
                    self._dead_letter(rec, [Problem(None, "internal", "internal error while processing this "
                                                                      "message (see the service log)")])
                    continue
                result = process(rec.value)
                events += result.applied
                if result.problems:
                    self._problems(rec, result.problems)
        except BaseException:
            part.next_offset = rec.offset  # the record at fault (see _rollback)
            raise
        part.next_offset = records[-1].offset + 1
        return events

    def _problems(self, rec: Any, problems: list[Problem]) -> None:
        """Count a message's problems (Prometheus label = the rejection code) and send its ONE
        dead letter."""
        for problem in problems:
            if problem.code == "late":
                self.counts["late"] += 1
                self.metrics.late_events.inc()
            else:
                self.counts["rejected"] += 1
                self.metrics.bad_events.labels(problem.code).inc()
        self._dead_letter(rec, problems)

    def _key_check_needed(self) -> bool:
        """``--partitioning key`` over an input topic of more than one partition."""
        if not self.config.key_check or self.config.partitioned or self.failure is not None:
            return False
        if self._input_partitions is None:
            try:
                found = self.producer.partitions_for(self.config.topic)
            except Exception:  # noqa: BLE001 - metadata not there yet: check (a 1-partition topic passes anyway)
                found = None
            if not found:
                return True
            self._input_partitions = len(found)
        return self._input_partitions > 1

    def _check_keys(self, part: _Partition, records: list) -> bool:
        """``--partitioning key``: every record's message key is ``model|segment`` of each of its
        events (labels, which have no key, and invalid events aside: they are dealt with as usual).
        A key checked once is trusted. False (the service stopping with status 2, one line naming
        the record) at the first that is not, before anything of the batch is applied."""
        checked = part.checked_keys
        parse = part.pipeline.parser.parse_value
        for rec in records:
            key = rec.key
            if key is not None and key in checked:
                continue
            if rec.value is None:
                continue
            expected = None
            for item in parse(rec.value):
                model, segment = getattr(item, "model", None), getattr(item, "segment", None)
                if item.__class__ is Rejection or not isinstance(model, str) or not isinstance(segment, str):
                    continue  # a label event, or a bad one (dead-lettered when applied)
                expected = f"{model}|{segment}".encode()
                if key != expected:
                    shown = "no key" if key is None else f"message key {key[:80]!r}"
                    self._fail(
                        f"{rec.topic}[{rec.partition}]@{rec.offset} has {shown}, not {expected[:160]!r} "
                        f"(model|segment of its event): with --partitioning key each model|segment must live "
                        f"in one partition, so records must be keyed by it. Predictions keyed by id (as a "
                        f"labels topic needs) or unkeyed: run with --partitioning any, which merges the "
                        f"partitions' windows exactly; a producer whose own partitioner keeps each key in one "
                        f"partition: --partitioning key-unchecked. Nothing of this record was published",
                        status=2)
                    return False
            if expected is not None and key is not None:
                if len(checked) >= MAX_TRACKED_KEYS:
                    checked.clear()
                checked.add(key)
        return True

    def _check_new_keys(self, part: _Partition) -> None:
        """A (model, segment) key new to this partition that was already seen on another: stop
        (status 2) with ``--partitioning key``, a warning with ``key-unchecked``."""
        if self.config.partitioned:  # spread keys are the point
            return
        windows = part.pipeline.windows
        count = windows.key_count
        if count <= part.known_keys:  # no new key (or keys evicted: the check is best effort)
            part.known_keys = count
            return
        keys = windows.newest_keys(count - part.known_keys)  # (O(new keys): at 100,000 keys a copy of all
        # of them at every poll with a new one cost 5% of the loop)
        partition = part.tp.partition
        if len(self._key_partition) > MAX_TRACKED_KEYS:
            self._key_partition.clear()
        for key in keys:
            seen = self._key_partition.setdefault(key, partition)
            if seen != partition:
                self._key_partition[key] = partition
                if self.config.key_check:
                    self._fail(f"key model={key[0]!r:.80} segment={key[1]!r:.80} seen on partitions {seen} and "
                               f"{partition}: with --partitioning key each model|segment must live in one "
                               f"partition (produce with key 'model|segment'), or run with --partitioning any",
                               status=2)
                    return
                log.warning("key model=%r segment=%r seen on partitions %d and %d: produce with key "
                            "'model|segment' so that each key lives in one partition",
                            key[0], key[1], seen, partition)
        part.known_keys = count

    # ------------------------------------------------------------------ producing
    @property
    def max_record_bytes(self) -> int:
        """The largest record the producer accepts (its ``max_request_size``)."""
        config = getattr(self.producer, "config", None) or {}
        return int(config.get("max_request_size", 1_048_576))

    def _send(self, topic: str, key: bytes | None, value: bytes | None, headers: list | None = None) -> None:
        try:
            future = self.producer.send(topic, key=key, value=value, headers=headers)
        except Exception as exc:
            raise DeliveryError(f"send to {topic!r} failed: {type(exc).__name__}: {exc}") from exc
        self._inflight.append(future)

    def _send_many(self, topic: str, records: list[tuple[bytes, bytes, list[tuple[str, bytes]]]]) -> None:
        """``records`` to ``topic`` in order, appended to the producer together
        (:class:`consumers.lean_producer.RecordSender`: one handle per batch to check at the flush)."""
        try:
            handles = self._records.send_many(topic, records)
        except Exception as exc:
            raise DeliveryError(f"send to {topic!r} failed: {type(exc).__name__}: {exc}") from exc
        self._inflight.extend(handles)

    def _publish_ready(self, part: _Partition, revisions: bool = False) -> int:
        """Publish the snapshots of the partition's closed windows (``--partitioning any``: as
        partials to the partials topic); how many. Label revisions come at the window engine's
        revision ticks (a function of the input, as in ``replay``: see
        :meth:`_publish_quiet_revisions`); ``revisions=True`` also those changed since the last tick.
        The poll's records go to the producer together (:meth:`_send_many`), then are counted;
        no garbage collection meanwhile (:func:`streammetrics.stream.replay.paused_gc`)."""
        with paused_gc():
            return self._publish_polled(part, revisions)

    def _publish_polled(self, part: _Partition, revisions: bool) -> int:
        partitioned = self.config.merged
        pipeline = part.pipeline
        snaps = pipeline.poll(revisions=revisions or partitioned)  # (partials: the merge stage numbers them)
        sent: list[dict[str, Any]] = []
        if snaps:
            # the canonical line of each snapshot, encoded once by the pipeline's size check
            lines = pipeline.lines if len(pipeline.lines) == len(snaps) else [None] * len(snaps)
            records: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = []
            if partitioned:
                source = part.tp.partition
                seal = self.signer.seal
                by_model = self.config.slicing is not None

                def wrap(s: dict[str, Any]) -> bytes:
                    return seal(partial_record(source, s))

                for snap in snaps:
                    key = snapshot_key(snap)
                    value = self.snapshot_value(snap, key, wrap)
                    if value is None:
                        continue
                    # keyed model|segment: every window of a key goes to one merge partition, whose alert
                    # rules then see the key's whole window series (sequential rules, lifecycles); slices
                    # keyed model: one merge partition sees every slice of a model's window
                    records.append((snap["key"]["model"].encode() if by_model else key.rsplit(b"|", 1)[0], value, []))
                    sent.append(snap)
                self._send_many(self.config.partials_topic or "", records)
                self.metrics.partials.inc(len(sent))  # (the merge stage publishes and observes the snapshots)
                self.counts["partials"] = self.counts.get("partials", 0) + len(sent)
            else:
                value_of = self.snapshot_value
                for snap, line in zip(snaps, lines):
                    key = snapshot_key(snap)
                    value = value_of(snap, key, line=line)
                    if value is None:
                        continue
                    records.append((key, value, [content_header(value)]))
                    sent.append(snap)
                self._send_many(self.config.output_topic, records)
                self.metrics.observe_snapshots(sent)
                self.counts["snapshots"] += len(sent)
            for snap in sent:
                if "state_coarsened" in snap or "state_dropped" in snap or "metrics_truncated" in snap:
                    for flag in ("state_coarsened", "state_dropped", "metrics_truncated"):
                        if snap.get(flag):  # degraded by the pipeline to fit max_snapshot_bytes
                            self.metrics.oversized_snapshots.labels(flag).inc()
        if pipeline.alerts is not None:
            self.publish_alerts(pipeline.take_alerts())
            self.metrics.alert_pairs_forgotten.labels("window", str(part.tp.partition)).set(pipeline.alerts.dropped)
        return len(sent)

    def publish_alerts(self, events: list[dict[str, Any]]) -> None:
        """Publish alert events to ``--alerts-topic`` (key ``rule|model|segment``) and follow them in
        ``streammetrics_alert_firing``. Re-published after a restore from a checkpoint, an event
        has the same key and bytes (its id and content come from the snapshots)."""
        for event in events:
            self.metrics.observe_alert(event)
            if self.config.alerts_topic:
                self._send(self.config.alerts_topic, alert_key(event), alert_line(event).encode())

    def snapshot_value(self, snap: dict[str, Any], key: bytes,
                       wrap: Callable[[dict[str, Any]], bytes] | None = None, *,
                       line: str | None = None) -> bytes | None:
        """The record value of ``snap`` (``wrap``: how it is encoded, default its snapshot line;
        ``line``: that line if already encoded), without its state if over the producer's limit
        (or, for a published snapshot, ``wrap`` None, over ``--max-snapshot-bytes``), None
        (dropped, counted) if still over."""
        encode = wrap or (lambda s: snapshot_line(s).encode())
        value = line.encode() if line is not None and wrap is None else encode(snap)
        room = self.max_record_bytes - RECORD_OVERHEAD - len(key)
        if wrap is None and self.config.max_snapshot_bytes is not None:
            room = min(room, self.config.max_snapshot_bytes)
        if len(value) > room:
            return self._shrink_snapshot(snap, value, room, encode)
        return value

    def _advance_idle(self) -> list[_Partition]:
        """``--idle-close``: each assigned partition that received no record for ``idle_close`` seconds
        (service clock) and is read to its end adopts the smallest watermark of the *active*
        partitions: this instance's partitions that did receive a record in that time and, with
        ``--partitioning any``, the other source partitions whose watermark (as the local merge
        stage knows it) moved in that time. Never beyond the slowest active one. With no active
        partition only a partition that has received nothing at all moves, to the smallest watermark
        of all the others (every source known, with ``--partitioning any``). The windows it passes
        close at the partition's next poll, after the checkpoint that holds the new watermark (see
        :meth:`checkpoint`): its later events for them are late (dead-lettered, counted), never
        merged twice or lost silently. Returns the partitions advanced."""
        idle_after = self.config.idle_close
        if not idle_after:
            return []
        now = self._clock()
        own = {part.tp.partition: part for part in list(self.partitions.values()) if part.tp not in self._paused}
        known = {s: p.pipeline.windows.watermark_us() for s, p in own.items()}
        active = [w for s, w in known.items() if now - own[s].last_record < idle_after]
        if self.merge is not None:
            for source, watermark in self.merge.known_watermarks().items():
                if source in own:
                    continue
                known[source] = watermark
                seen = self._watermark_moved.get(source)
                if seen is None or seen[0] != watermark:
                    self._watermark_moved[source] = seen = (watermark, now)
                if now - seen[1] < idle_after:
                    active.append(watermark)
        active = [w for w in active if w != -math.inf]
        advanced = []
        for source, part in own.items():
            windows = part.pipeline.windows
            current = windows.watermark_us()
            if now - part.last_record < idle_after:
                continue
            if active:
                target = min(active)
            else:  # everything is quiet: only a partition without any event catches up with the rest
                others = [w for s, w in known.items() if s != source and w != -math.inf]
                sources = self.merge.sources if self.merge is not None else len(own)
                if current != -math.inf or not others or len(others) < sources - 1:
                    if current == -math.inf and self.merge is not None:
                        unknown = sources - 1 - len(others)
                        self._log_idle_wait(part, now, f"no event yet, and the watermarks of {unknown} other source "
                                            "partitions are unknown here (this instance's merge stage holds no "
                                            "partials partition with them yet)")
                    continue
                target = min(others)
            if current >= target or not self._read_to_end(part):
                continue
            floor = target
            windows.advance_watermark(int(floor))
            if part.next_offset is None:  # an empty partition: its checkpoint must hold the watermark
                part.next_offset = 0
            part.dirty = part.advanced = True
            advanced.append(part)
            self.counts["idle_advances"] = self.counts.get("idle_advances", 0) + 1
            log.info("%s[%d]: no record for %g s: watermark advanced to the slowest active partition's (%d us)",
                     part.tp.topic, source, idle_after, floor)
        return advanced

    def _log_idle_wait(self, part: _Partition, now: float, why: str) -> None:
        """At INFO, at most every 30 s per partition: why an idle partition's watermark cannot move."""
        last = self._idle_logged.get(part.tp.partition)
        if last is None or now - last >= 30.0:
            self._idle_logged[part.tp.partition] = now
            log.info("%s[%d]: no record for %g s; its watermark stays: %s", part.tp.topic, part.tp.partition,
                     self.config.idle_close, why)

    def _read_to_end(self, part: _Partition) -> bool:
        high = self.consumer.highwater(part.tp)
        if high is None or (part.next_offset if part.next_offset is not None else 0) < high:
            return False
        return self._labels_read_to_end(part)

    def _labels_read_to_end(self, part: _Partition) -> bool:
        """The partition's labels side (if any) read to its end, nothing buffered on either side."""
        side = part.labels
        if side is None:
            return True
        high = self.consumer.highwater(side.tp)
        return not (high is None or (side.next_offset or 0) < high or side.buffer or (part.preds and part.preds.buffer))

    def _send_watermarks(self) -> None:
        """``--partitioning any``: each assigned partition's watermark to every partials partition,
        when it moved (or every 10 s), after every partial it covers was sent (same producer)."""
        topic = self.config.partials_topic
        if self.partials_partitions is None:
            found = self.producer.partitions_for(topic)
            self.partials_partitions = len(found) if found else None
            if not self.partials_partitions:
                return
        now = self._clock()
        for part in list(self.partitions.values()):
            self._publish_ready(part)  # every window up to the watermark is closed and sent first
            watermark = part.pipeline.windows.watermark_us()
            if watermark == -math.inf:
                continue
            source = part.tp.partition
            sent = self._watermarks_sent.get(source)
            if sent is not None and sent[0] == watermark and now - sent[1] < 10.0:
                continue
            value = self.signer.seal(watermark_record(source, int(watermark)))
            for p in range(self.partials_partitions):
                try:
                    future = self.producer.send(topic, key=f"watermark|{source}".encode(), value=value, partition=p)
                except Exception as exc:
                    raise DeliveryError(f"send to {topic!r} failed: {type(exc).__name__}: {exc}") from exc
                self._inflight.append(future)
            self._watermarks_sent[source] = (int(watermark), now)

    def _shrink_snapshot(self, snap: dict[str, Any], value: bytes, room: int,
                         encode: Callable[[dict[str, Any]], bytes] | None = None) -> bytes | None:
        """A snapshot over the producer's limit without its ``state`` (``"state_dropped": true``,
        counted); None (dropped, counted, logged) if even that does not fit."""
        size = len(value)
        if "state" in snap:
            smaller = {k: v for k, v in snap.items() if k != "state"}
            smaller["state_dropped"] = True
            value = encode(smaller) if encode is not None else snapshot_line(smaller).encode()
            if len(value) <= room:
                self.counts["snapshot_states_dropped"] = self.counts.get("snapshot_states_dropped", 0) + 1
                self.metrics.oversized_snapshots.labels("state_dropped").inc()
                log.warning("snapshot %s is %d bytes, over its limit (%d bytes: the producer's max_request_size "
                            "or --max-snapshot-bytes): published without its state", snap["key"], size, room)
                return value
        self.counts["snapshots_dropped"] = self.counts.get("snapshots_dropped", 0) + 1
        self.metrics.oversized_snapshots.labels("dropped").inc()
        log.error("snapshot %s window %s is %d bytes even without its state, over its limit (%d bytes: the "
                  "producer's max_request_size or --max-snapshot-bytes): not published", snap["key"],
                  snap["window"], len(value), room)
        return None

    def _dead_letter(self, rec: Any, problems: list[Problem]) -> None:
        """ONE dead letter for ``rec`` listing every problem ``(index, code, reason, field)``.

        Value: the original bytes, truncated to fit the producer's ``max_request_size`` (then
        header ``streammetrics.truncated`` holds the original length). Headers:
        ``streammetrics.reason`` / ``.code`` / ``.field`` / ``.index`` (the first problem; the
        reason says how many more), ``streammetrics.problems`` (JSON list of
        ``{"index", "code", "reason", "field"}``, at most :data:`MAX_LISTED_PROBLEMS`, reasons cut
        to 300 characters), ``streammetrics.problem_count`` and the source coordinates
        ``streammetrics.source`` (``topic/partition/offset``), ``.topic``, ``.partition``, ``.offset``.
        """
        first = problems[0]
        index, code, reason, field_name = first.index, first.code, first.reason, first.field
        if not self.config.dlq_topic:
            log.debug("dropped bad message at %s[%d]@%d: %s", rec.topic, rec.partition, rec.offset, reason)
            return
        if len(problems) > 1:
            reason = f"{reason} (and {len(problems) - 1} more problems: see streammetrics.problems)"
        listed = [{"index": p.index, "code": p.code, "reason": p.reason[:300], "field": p.field}
                  for p in problems[:MAX_LISTED_PROBLEMS]]
        headers = [
            ("streammetrics.reason", reason[:1000].encode()),
            ("streammetrics.code", code.encode()),
            ("streammetrics.problems", json.dumps(listed, separators=(",", ":")).encode()),
            ("streammetrics.problem_count", str(len(problems)).encode()),
            ("streammetrics.source", f"{rec.topic}/{rec.partition}/{rec.offset}".encode()),
            ("streammetrics.topic", rec.topic.encode()),
            ("streammetrics.partition", str(rec.partition).encode()),
            ("streammetrics.offset", str(rec.offset).encode()),
        ]
        if field_name is not None:
            headers.append(("streammetrics.field", field_name.encode()))
        if index is not None:
            headers.append(("streammetrics.index", str(index).encode()))
        key, value = rec.key, rec.value
        if key is not None and len(key) > MAX_DEAD_LETTER_KEY:
            key = key[:MAX_DEAD_LETTER_KEY]
        room = (self.max_record_bytes - RECORD_OVERHEAD - len(key or b"")
                - sum(len(k) + len(v) + 10 for k, v in headers) - 40)
        if value is not None and len(value) > room:
            headers.append(("streammetrics.truncated", str(len(value)).encode()))
            value = value[:max(room, 0)]
            self.metrics.truncated_dead_letters.inc()
        self._send(self.config.dlq_topic, key, value, headers)
        self.metrics.dead_letters.inc()
        self.counts["dead_letters"] += 1

    # ------------------------------------------------------------------ checkpoints
    def _flush(self) -> None:
        """Wait (at most ``delivery_timeout``) until every send since the last flush is
        acknowledged; DeliveryError if one failed or the wait timed out."""
        if not self._inflight:
            return
        timeout = self.config.delivery_timeout
        try:
            self.producer.flush(timeout=timeout)
        except Exception as exc:
            raise DeliveryError(f"the producer did not deliver within {timeout:g} s ({type(exc).__name__}: "
                                f"{exc})") from exc
        sent = list({id(f): f for f in self._inflight}.values())  # (a bulk-sent batch's handle comes once a send)
        failed = [f for f in sent if not f.is_done or f.failed()]
        if failed:
            first = next((f.exception for f in failed if f.is_done), None)
            raise DeliveryError(f"{len(failed)} of {len(sent)} sends (a record, or a batch of snapshots sent together) "
                                f"were not delivered (first error: {type(first).__name__ if first else 'timeout'}: "
                                f"{first})")
        self._inflight.clear()

    def checkpoint(self, tps: list | None = None, commit: bool = True) -> None:
        """Flush the producer (DeliveryError if anything was not delivered: then nothing is
        saved), then save each changed partition's windows and offset, then commit
        (:meth:`_checkpoint_now`); its duration and the bytes written go to ``/metrics``
        (``streammetrics_checkpoint_duration_seconds``, ``streammetrics_checkpoint_bytes``)."""
        if self.failure is not None:
            return
        started, began = time.perf_counter(), self._clock()
        self._checkpoint_bytes = 0
        with paused_gc():  # (the state's tree: about ten containers a key, all freed once encoded)
            self._checkpoint_now(tps, commit)
        self.metrics.observe_checkpoint(time.perf_counter() - started, self._checkpoint_bytes)
        if tps is None:  # a periodic one: the next waits in proportion (ServiceConfig.checkpoint_share)
            share = self.config.checkpoint_share
            self._checkpoint_pause = (self._clock() - began) * (1.0 / share - 1.0) if share < 1.0 else 0.0

    def _checkpoint_now(self, tps: list | None = None, commit: bool = True) -> None:
        from kafka.structs import OffsetAndMetadata

        if self.failure is not None:
            return
        parts = [self.partitions[tp] for tp in (tps if tps is not None else list(self.partitions))
                 if tp in self.partitions and tp not in self._paused]  # (paused: its checkpoint stays)
        if tps is None:  # before the save: an advanced watermark is saved before the windows it closes go out
            self._advance_idle()
        self._flush()
        commits = {}
        now = self._clock()
        for part in parts:
            if part.next_offset is None:
                continue
            side = part.labels
            label_offset = side.next_offset if side is not None else None
            # a quiet partition still re-writes its checkpoint every --checkpoint-refresh (and at its
            # first checkpoint after assignment), so that changelog retention never removes the last one
            if part.next_offset != part.saved_offset or part.dirty or (side is not None and label_offset
                                                                        != side.saved_offset) \
                    or now - part.saved_at >= self.config.checkpoint_refresh:
                partition = part.tp.partition
                chain = part.chain
                try:
                    if chain.full_due(now, self.config.checkpoint_refresh):
                        chain.broken()  # until the full one is written
                        link = (new_chain_id(), 0)
                        windows = part.pipeline.to_dict()
                        part.pipeline.track_changes()
                        payload = self.codec.encode(partition, part.next_offset, windows, label_offset, chain=link)
                        if self.store is not None:
                            self.store.write(partition, payload)
                    else:  # what changed since the last checkpoint (compacted at full_due)
                        link = chain.next_link()
                        chain.broken()  # the changes are taken: unless this delta is written, go full
                        payload = self.codec.encode(partition, part.next_offset, {}, label_offset, chain=link,
                                                    delta=part.pipeline.delta_dict())
                        if self.store is not None:
                            self.store.append_delta(partition, payload)
                    if self.changelog is not None:
                        self._inflight.extend(self.changelog.write(partition, payload, part.next_offset, label_offset,
                                                                   chain=link))
                    if link[1] == 0:
                        chain.started(link[0], payload, now)
                    else:
                        chain.ident = link[0]
                        chain.added(payload)
                except DeliveryError:
                    raise
                except Exception as exc:  # disk full, permissions...: keep the previous checkpoint
                    self.counts["checkpoint_failures"] += 1
                    self.metrics.checkpoint_failures.inc()
                    log.error("checkpoint of %s[%d] failed (%s: %s); keeping the previous one (offset %s), "
                              "retrying at the next interval", part.tp.topic, partition, type(exc).__name__, exc,
                              part.saved_offset)
                    continue
                part.saved_offset, part.dirty = part.next_offset, False
                part.saved_at = now
                self._checkpoint_bytes += len(payload)
                if side is not None:
                    side.saved_offset = label_offset
        if self.changelog is not None:
            self._flush()  # the changelog checkpoints are acknowledged before any offset is committed
        for part in parts:
            side = part.labels
            if part.saved_offset is not None and part.saved_offset != part.committed_offset:
                commits[part.tp] = OffsetAndMetadata(part.saved_offset, "", -1)
            if side is not None and side.saved_offset is not None and side.saved_offset != side.committed_offset:
                commits[side.tp] = OffsetAndMetadata(side.saved_offset, "", -1)
        if commits and commit:
            try:
                self.consumer.commit(commits, timeout_ms=int(self.config.commit_timeout * 1000))
            except Exception as exc:  # a commit failure (e.g. rebalance) is safe: the checkpoint decides
                self.counts["commit_failures"] += 1
                log.warning("offset commit failed (%s); checkpoints still hold the offsets", exc)
            else:
                for tp, om in commits.items():
                    if tp in self.partitions:
                        self.partitions[tp].committed_offset = om.offset
                    elif tp in self._label_parts:
                        lside = self._label_parts[tp].labels
                        if lside is not None:
                            lside.committed_offset = om.offset
        for part in list(self.partitions.values()):
            if part.advanced and not part.dirty and part.tp not in self._paused:  # the advance is saved: now
                # its windows close and go out
                part.advanced = False
                if self._publish_ready(part):
                    part.dirty = True
        if self.config.merged:
            self._send_watermarks()
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
            if high is None or (part.next_offset or 0) < high or part.pipeline.windows.open_panes():
                return False
            if not self._labels_read_to_end(part):
                return False
        return True

    def _update_lag(self) -> None:
        for tp, part in list(self.partitions.items()):
            high = self.consumer.highwater(tp)
            if high is not None and part.next_offset is not None:
                if high < part.next_offset:
                    self._out_of_range(part, high)
                    continue
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(high - part.next_offset)
            side = part.labels
            if side is not None and side.next_offset is not None:
                high = self.consumer.highwater(side.tp)
                if high is not None:
                    self.metrics.lag.labels(side.tp.topic, str(side.tp.partition)).set(max(high - side.next_offset, 0))


def security_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``--kafka`` options a second, group-less client needs (TLS/SASL) to reach the cluster."""
    return {k: v for k, v in options.items() if k.startswith(("security_", "ssl_", "sasl_"))}
