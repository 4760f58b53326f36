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
grow with its age; on real Kafka a ``cleanup.policy=delete`` retention bounds it: longer than
``--checkpoint-refresh`` (a quiet partition re-writes its checkpoint that often) plus the longest
time the group may be down (never ``compact``: only the last record of a chunked checkpoint would
survive). A checkpoint is *complete* when all its chunks
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
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from .signing import ForgedRecord, RecordSigner

__all__ = ["Changelog", "KafkaChangelogReader", "latest_checkpoint", "default_changelog_topic", "check_meta"]

HEADER = "streammetrics.changelog"
#: bytes kept free in each chunk for the key, the header and Kafka's framing
CHUNK_OVERHEAD = 2048
#: records read before the end at first; multiplied by 4 until a complete checkpoint is found
FIRST_WINDOW = 64
#: bytes a seal adds to a chunk (``smsig1:`` + 64 hex digits + ``:``)
SEAL_BYTES = 72

log = logging.getLogger("streammetrics.consume")


def default_changelog_topic(group: str, topic: str) -> str:
    """``<group>-<topic>-changelog``."""
    return f"{group}-{topic}-changelog"


_HEX = frozenset("0123456789abcdef")


def _nat(value: Any) -> bool:
    """A non-negative int (not a bool)."""
    return type(value) is int and value >= 0


def check_meta(meta: Any) -> str | None:
    """None when ``meta`` is a well-formed chunk header, else what is wrong (one phrase)."""
    if not isinstance(meta, dict):
        return "header is not a JSON object"
    for name in ("seq", "chunk", "size", "offset"):
        if not _nat(meta.get(name)):
            return f"header field {name!r} is not a non-negative integer"
    if not _nat(meta.get("chunks")) or meta["chunks"] < 1 or meta["chunk"] >= meta["chunks"]:
        return "header fields 'chunk'/'chunks' malformed"
    digest = meta.get("sha256")
    if not isinstance(digest, str) or len(digest) != 64 or not _HEX.issuperset(digest):
        return "header field 'sha256' is not a SHA-256 hex digest"
    if meta.get("label_offset") is not None and not _nat(meta["label_offset"]):
        return "header field 'label_offset' is not null or a non-negative integer"
    if not isinstance(meta.get("owner"), str):
        return "header field 'owner' is not a string"
    if "chain" in meta or "n" in meta:  # incremental checkpoints: chain id and place (0: full)
        if not isinstance(meta.get("chain"), str) or not _nat(meta.get("n")):
            return "header fields 'chain'/'n' malformed"
    return None


def _meta(rec: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A record's chunk header, or None and why it is unusable (None, None: no header at all)."""
    headers = getattr(rec, "headers", None)
    if not isinstance(headers, (list, tuple)):
        return None, None
    for item in headers:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or item[0] != HEADER:
            continue
        try:
            meta = json.loads(item[1])
        except (ValueError, TypeError, RecursionError):
            return None, "header is not valid JSON"
        problem = check_meta(meta)
        return (None, problem) if problem else (meta, None)
    return None, None


Reject = Callable[[Any, str, str], None]


def _complete(records: Iterable[Any], open_value: Callable[[bytes], bytes],
              reject: Reject | None = None) -> list[tuple[tuple[int, int, int], dict[str, Any], bytes]]:
    """Every complete, checksummed checkpoint among ``records`` as ``(rank, meta, payload)``,
    best (furthest input offsets, then latest) first. A record with a malformed header, a bad
    checksum or (``open_value`` raising ForgedRecord) a bad signature is passed to ``reject(rec,
    reason, detail)`` and skipped; records without a changelog header are ignored."""
    found: list[tuple[tuple[int, int, int], dict[str, Any], bytes]] = []
    group: list[tuple[dict[str, Any], bytes]] = []
    for rec in records:
        meta, problem = _meta(rec)
        if meta is None:
            if problem is not None and reject is not None:
                reject(rec, "malformed", problem)
            group = []
            continue
        value = rec.value if isinstance(rec.value, bytes) else b""
        try:
            value = open_value(value)
        except ForgedRecord as exc:
            if reject is not None:
                reject(rec, "forged", str(exc))
            group = []
            continue
        if meta["chunk"] == 0:
            group = [(meta, value)]
        elif group and meta["chunk"] == len(group) and meta["seq"] == group[0][0]["seq"] \
                and meta["owner"] == group[0][0]["owner"] and meta["chunks"] == group[0][0]["chunks"]:
            group.append((meta, value))
        else:
            group = []
            continue
        first = group[0][0]
        if len(group) == first["chunks"]:
            payload = b"".join(v for _, v in group)
            group = []
            if len(payload) != first["size"] or hashlib.sha256(payload).hexdigest() != first["sha256"]:
                if reject is not None:
                    reject(rec, "malformed", "payload size or sha256 does not match its header")
                continue
            found.append(((first["offset"], first["label_offset"] or 0, int(rec.offset)), first, payload))
    found.sort(key=lambda item: item[0], reverse=True)
    return found


def latest_checkpoint(records: Iterable[Any],
                      signer: RecordSigner | None = None) -> tuple[dict[str, Any], bytes] | None:
    """The complete checkpoint with the furthest input offsets among ``records`` (changelog
    records of one partition, in offset order): ``(meta of its first chunk, payload)``, or None."""
    found = _complete(records, (signer or RecordSigner(None)).open)
    return None if not found else (found[0][1], found[0][2])


class Changelog:
    """Writes checkpoints to, and restores them from, the changelog topic (see the module docstring).

    ``producer``: the service's producer (``send(topic, key=, value=, headers=, partition=)``);
    ``reader(partition, start_from_end)``: the changelog records of ``partition`` from
    ``start_from_end`` records before its end, in offset order, plus whether that reached offset 0.
    ``signer``: seals every chunk written and opens every chunk read (``--internal-key``).
    ``rejected``: records skipped on restore, by reason (``malformed``, ``forged``, ``invalid``:
    a checkpoint whose content ``check`` refused); ``on_reject(reason)`` is called for each.
    """

    def __init__(self, producer: Any, topic: str, reader: Callable[[int, int], tuple[list[Any], bool]],
                 max_record_bytes: int, signer: RecordSigner | None = None,
                 on_reject: Callable[[str], None] | None = None) -> None:
        self.producer = producer
        self.topic = topic
        self.reader = reader
        self.signer = signer or RecordSigner(None)
        overhead = CHUNK_OVERHEAD + (SEAL_BYTES if self.signer.enabled else 0)
        self.chunk_bytes = max(max_record_bytes - overhead, 1024)
        self.owner = os.urandom(6).hex()
        self._seq: dict[int, int] = {}
        self.rejected: dict[str, int] = {}
        self.on_reject = on_reject

    def write(self, partition: int, payload: bytes, offset: int, label_offset: int | None,
              chain: tuple[str, int] | None = None) -> list[Any]:
        """Send one checkpoint of ``partition`` (chunked); the send futures (the caller flushes).
        ``chain`` ``(id, n)``: its place in a chain of incremental checkpoints (0: full)."""
        seq = self._seq.get(partition, 0) + 1
        self._seq[partition] = seq
        size = self.chunk_bytes
        chunks = max(1, -(-len(payload) // size))
        digest = hashlib.sha256(payload).hexdigest()
        key = str(partition).encode()
        futures = []
        for i in range(chunks):
            meta: dict[str, Any] = {"seq": seq, "chunk": i, "chunks": chunks, "size": len(payload), "sha256": digest,
                                    "offset": offset, "label_offset": label_offset, "owner": self.owner}
            if chain is not None:
                meta["chain"], meta["n"] = chain
            value = self.signer.seal(payload[i * size:(i + 1) * size])
            futures.append(self.producer.send(self.topic, key=key, value=value,
                                              headers=[(HEADER, json.dumps(meta, separators=(",", ":")).encode())],
                                              partition=partition))
        return futures

    def _reject(self, partition: int, seen: set[Any], rec: Any, reason: str, detail: str) -> None:
        offset = getattr(rec, "offset", None)
        if offset in seen:  # read again by a wider scan: counted once
            return
        seen.add(offset)
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        if self.on_reject is not None:
            self.on_reject(reason)
        log.warning("changelog %s[%d] offset %s skipped (%s): %s; using an earlier checkpoint",
                    self.topic, partition, offset, reason, detail[:200])

    def restore(self, partition: int, check: Callable[[list[bytes], list[dict[str, Any]]], Any] | None = None
                ) -> list[bytes] | None:
        """The latest usable checkpoint of ``partition``: a full one and the deltas of its chain
        after it, in order (``[payload, ...]``), or None if there is none. Candidates are ranked
        by the input offsets their chain reaches; ``check(payloads, metas)`` raising ValueError
        refuses one: the chain is shortened by its last delta (then the next full one is tried);
        every refusal is skipped, counted and logged."""
        window = FIRST_WINDOW
        seen: set[Any] = set()
        while True:
            records, from_start = self.reader(partition, window)

            def reject(rec: Any, reason: str, detail: str) -> None:
                self._reject(partition, seen, rec, reason, detail)

            found = _complete(records, self.signer.open, reject)
            found.sort(key=lambda item: item[0][2])  # back in offset order
            chains = []
            for i, (_rank, meta, payload) in enumerate(found):
                if meta.get("n", 0) != 0:
                    continue
                links = [(meta, payload)]
                if "chain" in meta:
                    for _r, m, p in found[i + 1:]:
                        if m.get("chain") == meta["chain"] and m.get("n") == len(links):
                            links.append((m, p))
                last = links[-1][0]
                chains.append(((last["offset"], last["label_offset"] or 0, _rank[2]), links, _rank[2]))
            chains.sort(key=lambda c: c[0], reverse=True)
            for _rank, links, _at in chains:
                while links:
                    if check is None:
                        break
                    try:
                        check([p for _, p in links], [m for m, _ in links])
                        break
                    except (ValueError, TypeError, KeyError, RecursionError) as exc:
                        self._reject(partition, seen, _At(_at, len(links) - 1), "invalid",
                                     f"{type(exc).__name__}: {exc}")
                        links = links[:-1]
                if links:
                    self._seq[partition] = max(self._seq.get(partition, 0), max(m["seq"] for m, _ in links))
                    return [p for _, p in links]
            if from_start:
                return None
            window *= 4


class _At:
    """Stands for a checkpoint (its first record's offset, its chain link) refused by its content."""

    def __init__(self, offset: int, link: int = 0) -> None:
        self.offset = (offset, link)


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
