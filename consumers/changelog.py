"""Checkpoints in Kafka: one changelog topic per service, restored on assignment.

Each checkpoint of input partition ``p`` (the bytes :class:`~consumers.checkpoint.CheckpointStore`
writes to ``--state-dir``: open windows, pending labels, the next input offsets) is also written
to partition ``p`` of the changelog topic (``--changelog-topic``, default
``<group>-<topic>-changelog``, created with the input's partition count), after every snapshot
and dead letter it covers was acknowledged, and before the offsets are committed. A checkpoint
larger than one record is cut into chunks under the producer's ``max_request_size``; every
chunk carries the header ``streammetrics.changelog``::

    {"seq": <checkpoint number of p>, "chunk": i, "chunks": n, "size": <bytes>, "sha256": <of the whole>,
     "offset": <next input offset>, "label_offset": <next labels offset or null>, "owner": <writer id>}

(key ``p``). Restore reads partition ``p`` of the changelog **from its end backwards** (a window
of records before the end, widened 4x until a complete checkpoint is found): the test broker
(tansu) never compacts, so the topic holds every checkpoint ever written and a forward scan would
grow with its age; on real Kafka a ``cleanup.policy=delete`` retention of a few checkpoint
intervals, or ``compact`` (key ``p``: only the last record of a chunked checkpoint would survive,
so keep ``delete`` for chunked state), bounds it. A checkpoint is *complete* when all its chunks
are there, in order, with its checksum; the latest complete one wins, so a writer killed mid-way
leaves the previous one in force.

Stale writers: a member that lost its partitions but still runs (SIGSTOP, long GC) could append a
checkpoint after the new owner restored. Its offsets are behind the new owner's, and restore
takes the checkpoint with the furthest input offsets among the complete ones in the window read,
so a stale checkpoint is never preferred to a newer one *that is in the window*; the hazard left
is a zombie writing many records, pushing the newest real checkpoint out of the first window
(then the scan widens: still found). tansu reports the same generation in every rebalance, so
generation fencing is not possible there; ``owner`` (a random id per process) is for forensics.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Changelog", "KafkaChangelogReader", "latest_checkpoint", "default_changelog_topic"]

HEADER = "streammetrics.changelog"
#: bytes kept free in each chunk for the key, the header and Kafka's framing
CHUNK_OVERHEAD = 2048
#: records read before the end at first; multiplied by 4 until a complete checkpoint is found
FIRST_WINDOW = 64


def default_changelog_topic(group: str, topic: str) -> str:
    """``<group>-<topic>-changelog``."""
    return f"{group}-{topic}-changelog"


def _meta(rec: Any) -> dict[str, Any] | None:
    for name, value in rec.headers or []:
        if name == HEADER:
            try:
                meta = json.loads(value)
            except ValueError:
                return None
            return meta if isinstance(meta, dict) else None
    return None


def latest_checkpoint(records: Iterable[Any]) -> tuple[dict[str, Any], bytes] | None:
    """The complete checkpoint with the furthest input offsets among ``records`` (changelog
    records of one partition, in offset order): ``(meta of its first chunk, payload)``, or None."""
    best: tuple[tuple[int, int, int], dict[str, Any], bytes] | None = None
    group: list[tuple[dict[str, Any], bytes]] = []
    for rec in records:
        meta = _meta(rec)
        if meta is None or not isinstance(meta.get("chunk"), int) or not isinstance(meta.get("chunks"), int):
            group = []
            continue
        if meta["chunk"] == 0:
            group = [(meta, rec.value or b"")]
        elif group and meta["chunk"] == len(group) and meta.get("seq") == group[0][0].get("seq") \
                and meta.get("owner") == group[0][0].get("owner"):
            group.append((meta, rec.value or b""))
        else:
            group = []
            continue
        first = group[0][0]
        if len(group) == first["chunks"]:
            payload = b"".join(v for _, v in group)
            group = []
            if len(payload) != first.get("size") or hashlib.sha256(payload).hexdigest() != first.get("sha256"):
                continue
            rank = (int(first.get("offset") or 0), int(first.get("label_offset") or 0), int(rec.offset))
            if best is None or rank >= best[0]:
                best = (rank, first, payload)
    return None if best is None else (best[1], best[2])


class Changelog:
    """Writes checkpoints to, and restores them from, the changelog topic (see the module docstring).

    ``producer``: the service's producer (``send(topic, key=, value=, headers=, partition=)``);
    ``reader(partition, start_from_end)``: the changelog records of ``partition`` from
    ``start_from_end`` records before its end, in offset order, plus whether that reached offset 0.
    """

    def __init__(self, producer: Any, topic: str, reader: Callable[[int, int], tuple[list[Any], bool]],
                 max_record_bytes: int) -> None:
        self.producer = producer
        self.topic = topic
        self.reader = reader
        self.chunk_bytes = max(max_record_bytes - CHUNK_OVERHEAD, 1024)
        self.owner = os.urandom(6).hex()
        self._seq: dict[int, int] = {}

    def write(self, partition: int, payload: bytes, offset: int, label_offset: int | None) -> list[Any]:
        """Send one checkpoint of ``partition`` (chunked); the send futures (the caller flushes)."""
        seq = self._seq.get(partition, 0) + 1
        self._seq[partition] = seq
        size = self.chunk_bytes
        chunks = max(1, -(-len(payload) // size))
        digest = hashlib.sha256(payload).hexdigest()
        key = str(partition).encode()
        futures = []
        for i in range(chunks):
            meta = {"seq": seq, "chunk": i, "chunks": chunks, "size": len(payload), "sha256": digest,
                    "offset": offset, "label_offset": label_offset, "owner": self.owner}
            futures.append(self.producer.send(self.topic, key=key, value=payload[i * size:(i + 1) * size],
                                              headers=[(HEADER, json.dumps(meta, separators=(",", ":")).encode())],
                                              partition=partition))
        return futures

    def restore(self, partition: int) -> bytes | None:
        """The latest complete checkpoint of ``partition`` (its payload), None if there is none."""
        window = FIRST_WINDOW
        while True:
            records, from_start = self.reader(partition, window)
            found = latest_checkpoint(records)
            if found is not None:
                meta, payload = found
                self._seq[partition] = max(self._seq.get(partition, 0), int(meta.get("seq") or 0))
                return payload
            if from_start:
                return None
            window *= 4


class KafkaChangelogReader:
    """Reads a changelog partition near its end with its own group-less kafka-python consumer.

    tansu answers ``end_offsets`` with the base offset of the partition's last batch + 1 (see
    NOTES.md), which is at or before the real end: reading forward from ``end - n`` to the high
    watermark of the fetch responses still covers at least the last ``n`` records."""

    def __init__(self, topic: str, timeout: float = 30.0, **consumer_config: Any) -> None:
        self.topic = topic
        self.timeout = timeout
        self.config = consumer_config
        self._consumer: Any = None

    def __call__(self, partition: int, from_end: int) -> tuple[list[Any], bool]:
        import time

        from kafka import KafkaConsumer, TopicPartition

        if self._consumer is None:
            from .settings import FETCH_SETTINGS

            # short fetch waits: an empty or fully read partition answers after fetch_max_wait_ms
            self._consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                                           **{**FETCH_SETTINGS, **self.config})
        consumer = self._consumer
        tp = TopicPartition(self.topic, partition)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        start = max(0, end - from_end)
        consumer.seek(tp, start)
        out: list[Any] = []
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(records)
            high = consumer.highwater(tp)
            if high is not None and consumer.position(tp) >= high:
                break
        else:
            raise TimeoutError(f"reading changelog {self.topic}[{partition}] took more than {self.timeout:g} s")
        return out, start == 0

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close(autocommit=False, timeout_ms=2000)
            self._consumer = None
