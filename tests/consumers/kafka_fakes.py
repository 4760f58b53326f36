"""In-memory stand-ins for kafka-python's consumer and producer, for unit tests of
:class:`consumers.service.MetricsService` without a broker.

:class:`FakeCluster` holds topics as lists of records per partition and the groups' committed
offsets; :class:`FakeConsumer` is one group member that owns every partition of its topic
(``rebalance()`` moves partitions explicitly); :class:`FakeProducer` buffers sends until
``flush()`` (or ``deliver()``) appends them. ``faults`` (a :class:`Faults`) makes a named call
raise on its n-th use: ``poll``, ``send``, ``deliver`` (the future fails), ``flush``, ``commit``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka.structs import TopicPartition

__all__ = ["FakeCluster", "FakeConsumer", "FakeProducer", "FakeRecord", "FakeFuture", "Faults", "InjectedFault",
           "TopicPartition"]


class InjectedFault(RuntimeError):
    """The exception :class:`Faults` raises."""


class Faults:
    """``arm(step, nth=1)``: the ``nth`` next call of ``step`` raises :class:`InjectedFault`."""

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.fired: list[str] = []

    def arm(self, step: str, nth: int = 1) -> None:
        self.armed[step] = nth

    def check(self, step: str) -> None:
        self.calls[step] = self.calls.get(step, 0) + 1
        if step in self.armed:
            self.armed[step] -= 1
            if self.armed[step] <= 0:
                del self.armed[step]
                self.fired.append(step)
                raise InjectedFault(f"injected fault at {step}")


@dataclass
class FakeRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)


class FakeFuture:
    """What ``KafkaProducer.send`` returns: done once delivered or failed."""

    def __init__(self) -> None:
        self.is_done = False
        self.exception: BaseException | None = None

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None


class FakeCluster:
    """Topics (partition -> records) and committed group offsets."""

    def __init__(self) -> None:
        self.topics: dict[str, list[list[FakeRecord]]] = {}
        self.committed: dict[tuple[str, TopicPartition], int] = {}

    def create(self, topic: str, partitions: int = 1) -> str:
        self.topics[topic] = [[] for _ in range(partitions)]
        return topic

    def append(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
               headers: list | None = None) -> int:
        parts = self.topics.setdefault(topic, [[]])
        if partition is None:
            partition = 0 if key is None else sum(key) % len(parts)
        log = parts[partition]
        log.append(FakeRecord(topic, partition, len(log), key, value, list(headers or [])))
        return len(log) - 1

    def records(self, topic: str) -> list[FakeRecord]:
        return [rec for part in self.topics.get(topic, []) for rec in part]


class FakeConsumer:
    """A group member owning every partition of its subscribed topic (until ``rebalance``)."""

    def __init__(self, cluster: FakeCluster, group: str = "g", faults: Faults | None = None) -> None:
        self.cluster, self.group = cluster, group
        self.faults = faults or Faults()
        self.listener: Any = None
        self.topic: str | None = None
        self.topics: list[str] = []
        self.paused: set[TopicPartition] = set()
        self.assigned: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}
        self.closed = False
        self._pending_assignment = True
        #: called when a poll finds every assigned partition read to its end (e.g. service.stop)
        self.on_idle: Any = None

    # kafka-python API used by the service
    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        self.topics = list(topics)
        self.topic = self.topics[0]
        self.listener = listener

    def _all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for topic in self.topics for p in range(len(self.cluster.topics[topic]))]

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
        self.faults.check("poll")
        if self._pending_assignment:
            self._pending_assignment = False
            self.assign(self._all_partitions())
        budget = max_records or 500
        out: dict[TopicPartition, list[FakeRecord]] = {}
        self._turn = getattr(self, "_turn", -1) + 1  # round robin over the partitions, as fetches are
        order = self.assigned[self._turn % len(self.assigned):] + self.assigned[:self._turn % len(self.assigned)] \
            if self.assigned else []
        for tp in order:
            if tp in self.paused:
                continue
            log = self.cluster.topics[tp.topic][tp.partition]
            pos = self.positions[tp]
            if pos > len(log):  # like auto_offset_reset="earliest" after an out-of-range fetch
                pos = self.positions[tp] = 0
            batch = log[pos:pos + budget]
            if batch:
                out[tp] = batch
                self.positions[tp] = pos + len(batch)
                budget -= len(batch)
            if budget <= 0:
                break
        if not out and self.on_idle is not None:
            self.on_idle()
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        assert tp in self.assigned, tp
        self.positions[tp] = offset

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.positions[tp] = 0

    def commit(self, offsets: dict, timeout_ms: int | None = None) -> None:
        self.faults.check("commit")
        for tp, om in offsets.items():
            self.cluster.committed[(self.group, tp)] = om.offset

    def highwater(self, tp: TopicPartition) -> int | None:
        return len(self.cluster.topics[tp.topic][tp.partition])

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        if not self.closed and self.assigned and self.listener is not None:
            self.listener.on_partitions_revoked(list(self.assigned))  # as leaving the group does
        self.closed = True

    # test controls
    def assign(self, tps: list[TopicPartition], retain: bool = False) -> None:
        """``retain``: as kafka-python 3.0.12 does, a partition assigned again keeps its position (and,
        always, its paused flag); the others start from the group's committed offset."""
        for tp in tps:
            if not (retain and tp in self.assigned):
                self.positions[tp] = self.cluster.committed.get((self.group, tp), 0)
        self.assigned = list(tps)
        self.paused &= set(tps)
        if self.listener is not None:
            self.listener.on_partitions_assigned(list(tps))

    def rebalance(self, keep: list[TopicPartition], retain: bool = False) -> None:
        """Eager rebalance: revoke everything, then assign ``keep`` (``retain``: see :meth:`assign`)."""
        if self.listener is not None:
            self.listener.on_partitions_revoked(list(self.assigned))
        self.assign(keep, retain=retain)


class FakeProducer:
    """Buffers sends; ``flush()`` delivers them to the cluster in order."""

    def __init__(self, cluster: FakeCluster, max_request_size: int = 1_048_576, faults: Faults | None = None) -> None:
        self.cluster = cluster
        self.config = {"max_request_size": max_request_size}
        self.faults = faults or Faults()
        self.buffer: list[tuple[FakeFuture, str, bytes | None, bytes | None, list, int | None]] = []
        self.closed = False
        self.stuck = False  # a broker that never answers: flush() times out

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: list | None = None, partition: int | None = None) -> FakeFuture:
        self.faults.check("send")
        size = len(value or b"") + len(key or b"") + sum(len(k) + len(v) for k, v in headers or [])
        if size + 100 > self.config["max_request_size"]:
            raise ValueError(f"MessageSizeTooLargeError: {size} bytes")
        future = FakeFuture()
        self.buffer.append((future, topic, key, value, list(headers or []), partition))
        return future

    def partitions_for(self, topic: str) -> set[int]:
        return set(range(len(self.cluster.topics.get(topic, [[]]))))

    def deliver(self) -> None:
        pending, self.buffer = self.buffer, []
        for future, topic, key, value, headers, partition in pending:
            try:
                self.faults.check("deliver")
            except InjectedFault as exc:
                future.exception, future.is_done = exc, True
                continue
            self.cluster.append(topic, value, key, partition=partition, headers=headers)
            future.is_done = True

    def flush(self, timeout: float | None = None) -> None:
        self.faults.check("flush")
        if self.stuck:
            raise TimeoutError(f"KafkaTimeoutError: flush did not complete in {timeout} s")
        self.deliver()

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class FakeListener:
    """What :func:`consumers.clients.rebalance_listener` builds for kafka-python, without kafka."""

    def __init__(self, on_assigned: Any, on_revoked: Any) -> None:
        self.on_partitions_assigned = on_assigned
        self.on_partitions_revoked = on_revoked


class ManualClock:
    """A monotonic clock the test moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def fake_changelog_reader(cluster: FakeCluster, topic: str) -> Any:
    """A :class:`consumers.changelog.Changelog` reader over ``cluster`` (records near the end)."""

    def read(partition: int, from_end: int) -> tuple[list[FakeRecord], bool]:
        log = cluster.topics[topic][partition] if topic in cluster.topics else []
        start = max(0, len(log) - from_end)
        return list(log[start:]), start == 0

    return read
