"""Reading snapshots for the report: a JSONL file, standard input or a Kafka topic.

Every source yields :class:`WindowSnapshot` objects (a validated view of one snapshot of the
contract's schema ``streammetrics.snapshot/1``) plus the problems met on the way: malformed
lines or messages are skipped and counted, never fatal. Only an unreadable source (missing
file, unreachable broker, unknown topic) raises :class:`SourceError`.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Iterable, Mapping
from urllib.parse import urlsplit

from streammetrics.stream.snapshots import SNAPSHOT_SCHEMA

__all__ = [
    "WindowSnapshot", "LoadResult", "SourceError", "parse_snapshot", "from_dicts", "read_jsonl",
    "read_source", "read_kafka", "parse_kafka_url",
]

#: problems kept verbatim (the rest are only counted)
MAX_PROBLEMS = 20


class SourceError(Exception):
    """The source cannot be read at all (as opposed to single malformed snapshots)."""


@dataclass(frozen=True)
class WindowSnapshot:
    """One snapshot: a window of one stream key, its metrics and (optionally) monitor state."""

    model: str
    segment: str
    start: float
    end: float
    count: int
    late: int
    metrics: Mapping[str, Any]
    state: Mapping[str, Any] | None = None
    cumulative: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """The stream key ``(model, segment)``."""
        return (self.model, self.segment)

    @property
    def identity(self) -> tuple[str, str, float, float, bool]:
        """What makes two snapshots the same window (re-emitted windows share it)."""
        return (self.model, self.segment, self.start, self.end, self.cumulative)


@dataclass
class LoadResult:
    """Snapshots read from a source, with the number of skipped items and why."""

    snapshots: list[WindowSnapshot] = field(default_factory=list)
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    duplicates: int = 0

    def skip(self, where: str, reason: str) -> None:
        """Count one unusable line/message; keep the first reasons for the warning."""
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{where}: {reason}")


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def parse_snapshot(obj: Any) -> WindowSnapshot:
    """Validate one decoded snapshot; ``ValueError`` names what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a snapshot object, got {type(obj).__name__}")
    schema = obj.get("schema")
    if schema != SNAPSHOT_SCHEMA:
        raise ValueError(f"not a snapshot (schema {schema!r}, expected {SNAPSHOT_SCHEMA!r})")
    key, window, metrics = obj.get("key"), obj.get("window"), obj.get("metrics")
    if not isinstance(key, dict) or not isinstance(key.get("model"), str):
        raise ValueError("key must be an object with a string 'model'")
    segment = key.get("segment", "")
    if not isinstance(segment, str):
        raise ValueError(f"key.segment must be a string, got {segment!r}")
    if not isinstance(window, dict):
        raise ValueError("window must be an object with 'start' and 'end'")
    start, end = _number(window.get("start"), "window.start"), _number(window.get("end"), "window.end")
    if end <= start:
        raise ValueError(f"window end {end:g} is not after its start {start:g}")
    if not isinstance(metrics, dict):
        raise ValueError("metrics must be an object")
    state = obj.get("state")
    if state is not None and not isinstance(state, dict):
        raise ValueError("state must be an object")
    return WindowSnapshot(
        model=key["model"], segment=segment, start=start, end=end,
        count=_count(obj.get("count", metrics.get("count", 0)), "count"),
        late=_count(obj.get("late", 0), "late"),
        metrics=metrics, state=state, cumulative=bool(obj.get("cumulative", False)),
    )


def _deduplicate(result: LoadResult) -> LoadResult:
    """Keep the last snapshot of each window (re-published windows are identical)."""
    latest: dict[tuple, WindowSnapshot] = {}
    for snap in result.snapshots:
        latest.pop(snap.identity, None)  # re-insert: order of last occurrence
        latest[snap.identity] = snap
    result.duplicates += len(result.snapshots) - len(latest)
    result.snapshots = list(latest.values())
    return result


def from_dicts(snapshots: Iterable[Any]) -> LoadResult:
    """Validate already-decoded snapshots (e.g. the demo's); malformed ones are skipped."""
    result = LoadResult()
    for i, obj in enumerate(snapshots):
        try:
            result.snapshots.append(parse_snapshot(obj))
        except ValueError as exc:
            result.skip(f"snapshot {i}", str(exc))
    return _deduplicate(result)


def read_jsonl(stream: Iterable[str], result: LoadResult | None = None) -> LoadResult:
    """Snapshots from JSONL lines; blank lines are ignored, malformed ones skipped."""
    result = result if result is not None else LoadResult()
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            result.skip(f"line {lineno}", f"not JSON ({exc})")
            continue
        try:
            result.snapshots.append(parse_snapshot(obj))
        except ValueError as exc:
            result.skip(f"line {lineno}", str(exc))
    return _deduplicate(result)


def read_source(source: str, *, stdin: IO[str] | None = None, kafka_timeout: float = 60.0) -> LoadResult:
    """Snapshots from ``source``: a JSONL path, ``-`` (standard input) or ``kafka://HOST:PORT/TOPIC``."""
    if source.startswith("kafka://"):
        servers, topic = parse_kafka_url(source)
        return read_kafka(servers, topic, timeout=kafka_timeout)
    if source == "-":
        return read_jsonl(stdin if stdin is not None else sys.stdin)
    try:
        with open(source, encoding="utf-8", errors="replace") as fh:
            return read_jsonl(fh)
    except OSError as exc:
        raise SourceError(f"cannot read {source}: {exc.strerror or exc}") from None


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC`` -> (bootstrap servers, topic); ``ValueError`` if malformed."""
    parts = urlsplit(url)
    topic = parts.path[1:] if parts.path.startswith("/") else ""
    if parts.scheme != "kafka" or not parts.netloc or not topic or "/" in topic or parts.query:
        raise ValueError(f"bad Kafka source {url!r}: expected kafka://HOST:PORT/TOPIC")
    return parts.netloc, topic


def read_kafka(bootstrap_servers: str, topic: str, *, timeout: float = 60.0) -> LoadResult:
    """Read every partition of ``topic`` from the beginning to its high watermark.

    The high watermark is taken from the first fetch response of each partition
    (``consumer.highwater``): ``end_offsets`` is unreliable on tansu (consumers/NOTES.md).
    Records are de-duplicated by Kafka key, keeping the last value, as compaction would.
    """
    try:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError
    except ImportError:
        raise SourceError("reading from Kafka needs kafka-python: pip install 'streammetrics[kafka]'") from None
    settings: dict[str, Any] = {"group_id": None, "enable_auto_commit": False, "auto_offset_reset": "earliest"}
    if "bootstrap_timeout_ms" in KafkaConsumer.DEFAULT_CONFIG:  # kafka-python 3.0.12 has it (default 30 s)
        settings["bootstrap_timeout_ms"] = int(min(timeout, 10.0) * 1000)
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers.split(","), **settings)
    except KafkaError as exc:
        raise SourceError(f"cannot connect to Kafka at {bootstrap_servers}: {exc}") from None
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise SourceError(f"topic {topic!r} does not exist on {bootstrap_servers}")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        values, replaced = _read_to_end(consumer, tps, timeout, f"kafka://{bootstrap_servers}/{topic}")
    except KafkaError as exc:
        raise SourceError(f"error reading {topic!r} from {bootstrap_servers}: {exc}") from None
    finally:
        consumer.close()
    result = LoadResult(duplicates=replaced)
    for where, value in values:
        try:
            obj = json.loads(value)
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            result.skip(where, f"not JSON ({exc})")
            continue
        try:
            result.snapshots.append(parse_snapshot(obj))
        except ValueError as exc:
            result.skip(where, str(exc))
    return _deduplicate(result)


def _read_to_end(consumer: Any, tps: list, timeout: float, name: str) -> tuple[list[tuple[str, bytes]], int]:
    """Poll ``tps`` from the beginning until each reaches the high watermark seen at first fetch.

    Returns ``(where, value)`` of the last record per key (plus every unkeyed record) and the
    number of records replaced by a later one with the same key."""
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    by_key: dict[Any, tuple[str, bytes]] = {}
    replaced = 0
    ends: dict[Any, int] = {}
    pending = set(tps)
    deadline = time.monotonic() + timeout
    while pending:
        if time.monotonic() > deadline:
            raise SourceError(f"timed out after {timeout:g}s reading {name} "
                              f"(partitions {sorted(tp.partition for tp in pending)} not read to their end)")
        for tp, records in consumer.poll(timeout_ms=500).items():
            for rec in records:
                where = f"partition {tp.partition} offset {rec.offset}"
                slot = rec.key if rec.key is not None else ("unkeyed", tp.partition, rec.offset)
                replaced += by_key.pop(slot, None) is not None
                if rec.value is not None:  # a null value (tombstone) deletes the key
                    by_key[slot] = (where, rec.value)
        for tp in list(pending):
            if tp not in ends and consumer.highwater(tp) is not None:
                ends[tp] = consumer.highwater(tp)
            if tp in ends and consumer.position(tp) >= ends[tp]:
                pending.discard(tp)
    return list(by_key.values()), replaced
