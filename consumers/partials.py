"""Any input partitioning (``--partitioning any``): partial windows per partition, merged exactly.

With ``--partitioning any`` the events of one (model, segment) may arrive on every input
partition (e.g. keyed by prediction id). Each input partition ``p`` keeps its own windows, with
one event-time watermark for all its keys (as every partition: the largest
event time on ``p`` minus ``--grace``), and:

* publishes each window it closes, and each later label revision of it, as a **partial** to the
  partials topic (``--partials-topic``, default ``<group>-<topic>-partials``), key
  ``model|segment|window_start``, value::

      {"schema": "streammetrics.partial/1", "source": p, "snapshot": <p's snapshot, with state>}

* after each checkpoint, even when idle, sends its **watermark** to every partition of the
  partials topic (key ``watermark|p``)::

      {"schema": "streammetrics.watermark/1", "source": p, "watermark_us": <int>}

  meaning: every window of ``p`` ending at or before it has been published as a partial
  *before* this record (same producer, same partition: Kafka keeps the order), and any later
  event of ``p`` for such a window is late (dead-lettered, counted), never applied.

The **merge stage** (:class:`MergeStage`: a thread of every ``consume`` process, consumer group
``<group>-merge`` on the partials topic) runs one :class:`Merger` per partials partition. It
keeps the latest partial per (window, source partition) and the largest watermark per source;
when the smallest watermark over *all* input partitions reaches a window's end it publishes the
exact merge (``merge`` of the partial states in source order, :func:`streammetrics.from_dict`)
under the window's key ``model|segment|window_start`` (revision 0), then one new revision per
later partial revision of it (delayed labels), the last ``"final": true`` once every partial is
final. A partial's version is its ``labeled + expired`` (labels only ever settle predictions),
so a partial re-sent after a source's crash (same content) is recognised and ignored, and so is
any partial of a window already merged and forgotten: re-publication is idempotent, and every
output follows from the partials partition's records in offset order (deterministic). The
merge stage checkpoints its state and offset like the sources do (state dir and a changelog
topic, ``<group>-<topic>-merge-changelog``), so a killed instance loses nothing.

Every partials record is validated in full before it is used (schema, source, key, window, whole
counters with ``labeled + expired + pending == count``, a state of the task's monitor type holding
``count`` predictions); a bad one is skipped and counted (``malformed``) and its window published
with ``"merge_incomplete": true``. With ``--internal-key`` records are sealed with an HMAC
(:mod:`consumers.signing`). ``--max-merge-windows`` bounds the windows held per partials partition.
Operators' view, forged watermarks, idle partitions and bounds: docs/scaleout.md.
"""
from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from streammetrics.core.accumulator import from_dict
from streammetrics.stream.alerting import alert_key, alert_line
from streammetrics.stream.snapshots import build_snapshot, content_header, snapshot_key, snapshot_line

__all__ = ["Merger", "MergeStage", "partial_record", "watermark_record", "DEFAULT_MAX_MERGE_WINDOWS",
           "PARTIAL_SCHEMA", "WATERMARK_SCHEMA"]

log = logging.getLogger("streammetrics.merge")

PARTIAL_SCHEMA = "streammetrics.partial/1"
WATERMARK_SCHEMA = "streammetrics.watermark/1"
#: windows held per partials partition by the merge (``--max-merge-windows``)
DEFAULT_MAX_MERGE_WINDOWS = 100_000


def partial_record(source: int, snapshot: dict[str, Any]) -> bytes:
    """The partials-topic value of source partition ``source``'s snapshot (deterministic JSON)."""
    return json.dumps({"schema": PARTIAL_SCHEMA, "source": source, "snapshot": snapshot},
                      separators=(",", ":"), allow_nan=False).encode()


def watermark_record(source: int, watermark_us: int) -> bytes:
    """The partials-topic value announcing source partition ``source``'s watermark."""
    return json.dumps({"schema": WATERMARK_SCHEMA, "source": source, "watermark_us": watermark_us},
                      separators=(",", ":")).encode()


def _ms(seconds: Any) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not abs(seconds) <= 1e13:
        raise ValueError(f"window bound must be a number of seconds (at most 1e13), got {seconds!r:.40}")
    return round(seconds * 1000)


def _settled(snap: Mapping[str, Any]) -> int:
    """A partial's version: its predictions with a label or expired (only ever grows)."""
    return int(snap.get("labeled") or 0) + int(snap.get("expired") or 0)


def _count(snap: Mapping[str, Any], name: str) -> int:
    value = snap.get(name, 0)
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r:.40}")
    return value


class _Window:
    __slots__ = ("end_ms", "parts", "raw", "revision", "monitors", "refused")

    def __init__(self, end_ms: int, revision: int = -1) -> None:
        self.end_ms = end_ms
        # source partition -> its latest partial snapshot (without its state), its monitor (the
        # state loaded when the partial was validated), and the record as received: checkpoints
        # copy the text as is, a tenth of the cost of re-encoding the states every interval
        self.parts: dict[int, dict[str, Any]] = {}
        self.monitors: dict[int, Any] = {}
        self.raw: dict[int, str] = {}
        self.revision = revision  # last published revision, -1: not yet published
        self.refused: set[int] = set()  # sources with a partial refused as malformed


class Merger:
    """The merge of one partials partition (see the module docstring): :meth:`apply` one record
    value, get the merged snapshots to publish. Pure and deterministic; ``to_dict`` / ``load_dict``
    checkpoint it.

    >>> import streammetrics as sm
    >>> def part(src, y_true, score):
    ...     m = sm.BinaryMonitor()
    ...     m.update({"y_true": y_true, "score": score})
    ...     snap = build_snapshot(("m", ""), m, 0, 60_000, final=True)
    ...     return partial_record(src, snap)
    >>> merger = Merger(sources=2)
    >>> merger.apply(part(0, 1, 0.9)) + merger.apply(part(1, 0, 0.8)) + merger.apply(watermark_record(0, 60_000_000))
    []
    >>> [(s["count"], s["final"], s["metrics"]["accuracy"]) for s in merger.apply(watermark_record(1, 61_000_000))]
    [(2, True, 0.5)]
    """

    def __init__(self, sources: int, *, include_state: bool = True,
                 extra_metrics: Callable[[tuple[str, str], Any, dict[str, Any]], None] | None = None,
                 max_windows: int = DEFAULT_MAX_MERGE_WINDOWS,
                 loader: Callable[[Mapping[str, Any]], Any] | None = None, template: Any = None,
                 alerts: Any = None, slicer: Any = None, changes: Any = None) -> None:
        if sources < 1:
            raise ValueError(f"sources must be at least 1, got {sources!r}")
        if isinstance(max_windows, bool) or not isinstance(max_windows, int) or max_windows < 1:
            raise ValueError(f"max_merge_windows must be a positive integer, got {max_windows!r}")
        self.sources = sources
        self.include_state = include_state
        #: slices (:class:`streammetrics.stream.slicing.Slicer`): the partials are slice windows
        #: keyed by model; each frontier's merged windows get the budget and the roll-ups
        self.slicer = slicer
        self.extra_metrics = extra_metrics if slicer is None else slicer.hook
        self.max_windows = max_windows
        #: rebuilds a partial's monitor (``PipelineConfig.monitor_loader``: bound to its reference)
        self.loader = loader or from_dict
        #: alert rules on the merged windows (``AlertSpec``; their state is in the merge checkpoint)
        self.alert_spec = alerts
        self.alerts = alerts.engine() if alerts is not None else None
        self.alert_events: list[dict[str, Any]] = []
        #: ``--reference`` / ``--compare previous`` on the merged windows
        #: (:class:`streammetrics.stream.changes.Changes`; its memory is in the merge checkpoint).
        #: Benjamini-Hochberg runs over the tests of each window span among the windows one record
        #: publishes (a watermark advance: every key's window it closes; ``Changes.annotate``)
        self.changes = changes
        #: an empty monitor of the service's task: a partial's state must have its type and config
        self.expected = None if template is None else {k: v for k, v in template.to_dict().items()
                                                        if k in ("type", "version", "config")}
        #: windows published final, most recent last (at most ``max_windows``): a partial of one from
        #: a source it did not hold, or newer, reopens it (a forged watermark published it early)
        self.finished: OrderedDict[tuple[str, str, int], _Window] = OrderedDict()
        self.watermarks: dict[int, int] = {}
        self.frontier_us: float = -math.inf  # smallest watermark over every source, once all reported
        self.evicted_end_ms: int | None = None  # windows ending at or before it were evicted
        self.windows: dict[tuple[str, str, int], _Window] = {}
        #: records by outcome: partials / watermarks applied, replayed (already known, ignored),
        #: dropped (of an evicted range), malformed; windows published and evicted
        self.counts = dict.fromkeys(("partials", "watermarks", "replayed", "dropped", "malformed", "published",
                                     "evicted", "forged", "unmergeable", "reopened"), 0)

    # ------------------------------------------------------------------ input
    def apply(self, value: bytes | None) -> list[dict[str, Any]]:
        """Apply one partials-topic record value; the merged snapshots now due, in order."""
        try:
            text = value.decode() if isinstance(value, (bytes, bytearray)) else str(value or "")
            rec: dict[str, Any] = json.loads(text) if value is not None else {}
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
            schema = rec.get("schema")
            source = rec["source"] if schema in (PARTIAL_SCHEMA, WATERMARK_SCHEMA) else None
            if type(source) is not int or not 0 <= source < self.sources:
                raise ValueError(f"source {source!r:.40} is not an input partition (0..{self.sources - 1})")
            if schema == WATERMARK_SCHEMA:
                watermark = rec["watermark_us"]
                if type(watermark) is not int:
                    raise ValueError("watermark_us must be an integer")
                return self._observed(self._sliced(self._watermark(source, watermark)))
            if schema != PARTIAL_SCHEMA:
                raise ValueError(f"schema {schema!r:.60} is not {PARTIAL_SCHEMA!r}")
            snap = rec["snapshot"]
            key, end_ms, monitor = self._validate(snap)
        except Exception as exc:  # noqa: BLE001 - whatever a hostile record makes the parsing or the loader raise
            return self._refuse(value, exc)
        return self._observed(self._sliced(self._partial(source, key, end_ms, snap, text, monitor)))

    def _observed(self, snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The snapshots one record publishes with their ``changes`` (Benjamini-Hochberg over each
        window span's tests among them, as replay's poll: ``Changes.annotate``), then seen by the
        alert rules (which read the changes), in order."""
        if self.changes is not None and snaps:
            snaps = self.changes.annotate(snaps)
        if self.alerts is not None:
            for snap in snaps:
                self.alert_events += self.alerts.observe(snap)
        return snaps

    def _sliced(self, snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """With slices: each merged (model, window)'s slices, the budget applied, then its
        roll-ups (``Slicer.process``: every window handed over is complete)."""
        if self.slicer is None or not snaps:
            return snaps
        return self.slicer.process(snaps, None)

    def _validate(self, snap: Any) -> tuple[tuple[str, str, int], int, Any]:
        """The key, end and loaded monitor of a partial snapshot checked in full (ValueError)."""
        if not isinstance(snap, dict):
            raise ValueError("snapshot is not a JSON object")
        model, segment = snap["key"]["model"], snap["key"]["segment"]
        if not isinstance(model, str) or not isinstance(segment, str):
            raise ValueError("key model and segment must be strings")
        if self.slicer is not None:
            self.slicer.key_values(segment)  # a slice key (ValueError naming it)
        start_ms, end_ms = _ms(snap["window"]["start"]), _ms(snap["window"]["end"])
        if not start_ms < end_ms:
            raise ValueError(f"window end {end_ms} ms is not after its start {start_ms} ms")
        count = _count(snap, "count")
        labeled, expired, pending = _count(snap, "labeled"), _count(snap, "expired"), _count(snap, "pending")
        _count(snap, "late")
        _count(snap, "revision")
        if labeled + expired + pending != count:
            raise ValueError(f"labeled {labeled} + expired {expired} + pending {pending} != count {count}")
        if not isinstance(snap.get("final"), bool):
            raise ValueError("final must be true or false")
        state = snap.get("state")
        if not isinstance(state, dict):
            raise ValueError("the partial carries no state")
        if self.expected is not None:
            got = {k: state.get(k) for k in self.expected}
            if got != self.expected:
                raise ValueError(f"state of type {state.get('type')!r:.60} (version/config) is not this "
                                 f"service's {self.expected.get('type')!r}")
        monitor = self.loader(state)
        if getattr(monitor, "count", count) != count:
            raise ValueError(f"its state holds {monitor.count} predictions, the partial claims count {count}")
        return (model, segment, start_ms), end_ms, monitor

    def _refuse(self, value: Any, exc: BaseException) -> list[dict[str, Any]]:
        """A malformed record: skipped and counted; its (window, source) keeps its previous partial,
        and the window is marked incomplete when the record names one."""
        self.counts["malformed"] += 1
        log.warning("partials record ignored: %s: %.300s", type(exc).__name__, exc)
        try:
            rec = json.loads(value)
            snap, source = rec["snapshot"], rec["source"]
            key = (str(snap["key"]["model"]), str(snap["key"]["segment"]), _ms(snap["window"]["start"]))
            win = self.windows.get(key)
            if win is not None and type(source) is int:
                win.refused.add(source)
        except Exception:  # noqa: BLE001, S110 - it names no window: nothing to mark
            pass
        return []

    def forged(self, reason: str) -> None:
        """A record refused by the HMAC check (``--internal-key``): counted, logged, skipped."""
        self.counts["forged"] += 1
        log.warning("partials record refused: %s", reason)

    def _partial(self, source: int, key: tuple[str, str, int], end_ms: int,
                 snap: dict[str, Any], raw: str, monitor: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        win = self.windows.get(key)
        if win is None:
            done = self.finished.get(key)
            if done is not None:
                old = done.parts.get(source)
                if old is not None and _settled(snap) <= _settled(old):
                    self.counts["replayed"] += 1  # a source's replay of what was merged
                    return out
                # published final without it (a forged or early watermark): reopen, a new revision
                self.counts["reopened"] += 1
                log.warning("partial of %s from source %d came after its window was merged: republished "
                            "as revision %d (was the watermark forged?)", key, source, done.revision + 1)
                win = self.windows[key] = self.finished.pop(key)
            elif end_ms * 1000 <= self.frontier_us:  # merged and final already, and forgotten
                self.counts["replayed"] += 1
                return out
            elif self.evicted_end_ms is not None and end_ms <= self.evicted_end_ms:
                self.counts["dropped"] += 1
                log.warning("partial of %s dropped: windows ending at or before %d ms were evicted "
                            "(--max-merge-windows)", key, self.evicted_end_ms)
                return out
            else:
                if len(self.windows) >= self.max_windows:
                    evicted = self._evict()
                    if evicted is not None:
                        out.append(evicted)
                win = self.windows[key] = _Window(end_ms)
        old = win.parts.get(source)
        if old is not None and _settled(snap) <= _settled(old):
            self.counts["replayed"] += 1
            return out
        self.counts["partials"] += 1
        win.parts[source] = {k: v for k, v in snap.items() if k != "state"}
        win.monitors[source] = monitor
        win.raw[source] = raw
        win.refused.discard(source)
        if win.revision >= 0:  # published already: a label revision of one partial
            out.extend(self._publish_safely(key, win))
        return out

    def _watermark(self, source: int, watermark: int) -> list[dict[str, Any]]:
        self.counts["watermarks"] += 1
        if watermark <= self.watermarks.get(source, -math.inf):
            return []
        self.watermarks[source] = watermark
        if len(self.watermarks) < self.sources:
            return []
        frontier = min(self.watermarks.values())
        if frontier <= self.frontier_us:
            return []
        self.frontier_us = frontier
        due = sorted((w.end_ms, k) for k, w in self.windows.items() if w.revision < 0 and w.end_ms * 1000 <= frontier)
        out: list[dict[str, Any]] = []
        for _, k in due:  # each on its own: one that cannot be merged holds back or drops no other
            out.extend(self._publish_safely(k, self.windows[k]))
        return out

    def _publish_safely(self, key: tuple[str, str, int], win: _Window) -> list[dict[str, Any]]:
        try:
            return [self._publish(key, win)]
        except Exception as exc:  # noqa: BLE001 - validated partials that still do not merge (e.g. other classes)
            self.counts["unmergeable"] += 1
            log.error("merge: window %s cannot be merged (%s: %.300s): dropped; the other windows go on",
                      key, type(exc).__name__, exc)
            self.windows.pop(key, None)
            return []

    def _evict(self) -> dict[str, Any] | None:
        """Make room: publish the window that ends first as it stands (not final)."""
        end_ms, key = min((w.end_ms, k) for k, w in self.windows.items())
        self.counts["evicted"] += 1
        self.evicted_end_ms = end_ms if self.evicted_end_ms is None else max(self.evicted_end_ms, end_ms)
        log.warning("merge holds %d windows (--max-merge-windows): publishing window %s before it is complete",
                    len(self.windows), key)
        try:
            snap = self._publish(key, self.windows[key], incomplete=True)
        except Exception as exc:  # noqa: BLE001 - as in _publish_safely
            self.counts["unmergeable"] += 1
            log.error("merge: window %s cannot be merged (%s: %.300s): dropped", key, type(exc).__name__, exc)
            snap = None
        self.windows.pop(key, None)
        self.finished.pop(key, None)
        return snap

    # ------------------------------------------------------------------ output
    def _publish(self, key: tuple[str, str, int], win: _Window, incomplete: bool = False) -> dict[str, Any]:
        sources = sorted(win.parts)
        parts = [win.parts[s] for s in sources]
        if not parts:
            raise ValueError(f"no valid partial of window {key}")
        monitor = win.monitors[sources[0]].copy()
        for s in sources[1:]:
            monitor.merge(win.monitors[s])
        missing = len(win.refused - set(sources))  # sources whose only partial was refused
        win.revision += 1
        final = not incomplete and all(p.get("final") for p in parts)
        snap = build_snapshot(key[:2], monitor, key[2], win.end_ms, final=final,
                              late=sum(int(p.get("late") or 0) for p in parts), revision=win.revision,
                              pending=sum(int(p.get("pending") or 0) for p in parts),
                              expired=sum(int(p.get("expired") or 0) for p in parts),
                              include_state=self.include_state, extra_metrics=self.extra_metrics)
        snap["sources"] = len(parts)
        if incomplete or missing or win.refused:
            snap["merge_incomplete"] = True
        if final:
            del self.windows[key]
            self.finished[key] = win
            self.finished.move_to_end(key)
            while len(self.finished) > self.max_windows:
                self.finished.popitem(last=False)
        self.counts["published"] += 1
        return snap  # (changes and alert rules: _observed, over all the record publishes)

    def take_alerts(self) -> list[dict[str, Any]]:
        """The alert events of the merged snapshots published since the last call."""
        events, self.alert_events = self.alert_events, []
        return events

    @property
    def open_windows(self) -> int:
        return len(self.windows)

    def waiting(self) -> str | None:
        """Why windows are held (one line naming the sources that hold them back), or None when no
        window waits for a watermark."""
        pending = [w.end_ms for w in self.windows.values() if w.revision < 0]
        if not pending:
            return None
        first = min(pending)
        missing = sorted(set(range(self.sources)) - set(self.watermarks))
        if missing:
            return (f"{len(pending)} windows (the first ends at {first} ms) wait for a first watermark of source "
                    f"partitions {missing[:20]} (no event there yet, or their instance has not checkpointed; "
                    f"an empty partition adopts the others' after --idle-close)")
        slow = sorted(s for s, w in self.watermarks.items() if w < first * 1000)
        return (f"{len(pending)} windows (the first ends at {first} ms) wait for source partitions {slow[:20]} "
                f"(watermarks {[self.watermarks[s] // 1000 for s in slow[:5]]} ms)")

    # ------------------------------------------------------------------ checkpoint
    def to_dict(self) -> dict[str, Any]:
        out = {"type": "Merger", "version": 1, "sources": self.sources,
                "watermarks": sorted([s, w] for s, w in self.watermarks.items()),
                "frontier_us": None if self.frontier_us == -math.inf else self.frontier_us,
                "evicted_end_ms": self.evicted_end_ms,
                "windows": [[k[0], k[1], k[2], w.end_ms, w.revision, [[s, w.raw[s]] for s in sorted(w.raw)]]
                            for k, w in sorted(self.windows.items())]}
        if self.alerts is not None:
            out["alerts"] = self.alerts.to_dict()
        if self.changes is not None and self.changes.mode == "previous":  # each key's last merged windows
            out["changes"] = self.changes.to_dict()
        return out

    def load_dict(self, data: Mapping[str, Any]) -> Merger:
        if not isinstance(data, Mapping) or data.get("type") != "Merger" or data.get("version") != 1:
            raise ValueError("not a Merger checkpoint (type/version)")
        if data.get("sources") != self.sources:
            raise ValueError(f"merge checkpoint written for {data.get('sources')!r} input partitions, the input "
                             f"topic has {self.sources}: reset the merge state (see docs/scaleout.md)")
        try:
            watermarks = {int(s): int(w) for s, w in data["watermarks"]}
            windows = {}
            for model, segment, start, end, revision, parts in data["windows"]:
                win = _Window(int(end), int(revision))
                for source, raw in parts:
                    snap = json.loads(raw)["snapshot"]
                    win.parts[int(source)] = {k: v for k, v in snap.items() if k != "state"}
                    win.monitors[int(source)] = self.loader(snap["state"])
                    win.raw[int(source)] = str(raw)
                windows[(str(model), str(segment), int(start))] = win
            frontier = data.get("frontier_us")
            evicted = data.get("evicted_end_ms")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed Merger checkpoint: {exc}") from None
        alerts = None
        if self.alert_spec is not None:
            alerts = self.alert_spec.engine()
            if data.get("alerts") is not None:
                alerts.load(data["alerts"])  # ValueError naming what is wrong, before anything changes
        changes = self.changes
        if changes is not None and changes.mode == "previous":  # (validated before anything changes)
            changes = type(changes)(changes.mode, changes.fdr, None, changes.max_keys)
            if data.get("changes") is not None:
                changes.load(data["changes"])
        self.watermarks, self.windows = watermarks, windows
        self.changes = changes
        if alerts is not None:
            self.alerts, self.alert_events = alerts, []
        self.frontier_us = -math.inf if frontier is None else int(frontier)
        self.evicted_end_ms = None if evicted is None else int(evicted)
        return self


class _MergePart:
    __slots__ = ("tp", "merger", "next_offset", "saved_offset", "committed_offset")

    def __init__(self, tp: Any, merger: Merger, offset: int | None) -> None:
        self.tp = tp
        self.merger = merger
        self.next_offset = self.saved_offset = self.committed_offset = offset


class MergeStage:
    """The merge stage's loop on its own thread: consumer group ``<group>-merge`` on the partials
    topic, one :class:`Merger` per assigned partition, merged snapshots to the output topic,
    checkpoints (``store`` and/or ``changelog``) every ``checkpoint_interval`` after the
    producer acknowledged everything they cover, then commits. Any failure to deliver stops
    the stage (:attr:`failure`); the service then exits with status 1 and a restart resumes
    from the last checkpoint.

    ``publish(key, snapshot) -> bytes | None``: the record value of a merged snapshot (the
    service's size checks), None to drop it."""

    def __init__(self, *, consumer: Any, producer: Any, partials_topic: str, output_topic: str, sources: int,
                 make_merger: Callable[[], Merger], codec: Any, store: Any = None, changelog: Any = None,
                 checkpoint_interval: float = 1.0, delivery_timeout: float = 10.0, commit_timeout: float = 5.0,
                 encode: Callable[[dict[str, Any]], bytes | None] | None = None,
                 listener: Callable[[Any, Any], Any] | None = None, metrics: Any = None,
                 signer: Any = None, alerts_topic: str | None = None,
                 key_of: Callable[[dict[str, Any]], bytes] = snapshot_key, rejoin_after: float | None = None,
                 leave_wait: float = 0.0, consumer_factory: Callable[[], Any] | None = None,
                 group_stable: Callable[[Any], bool | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from .membership import GroupWatch

        self.consumer, self.producer = consumer, producer
        #: ``--rejoin-after`` / leaving after a rebalance (:mod:`consumers.membership`); the factory
        #: builds the new consumer (not subscribed) of a forced rejoin
        self._group = GroupWatch("merge", rejoin_after, clock=clock, stable=group_stable)
        self.leave_wait = leave_wait
        self._consumer_factory = consumer_factory
        #: the output record key of a merged snapshot (slices: ``sliced_snapshot_key``)
        self.key_of = key_of
        #: opens each partials record (``--internal-key``: :class:`consumers.signing.RecordSigner`)
        self.signer = signer
        #: topic of the alert events of merged windows (``--alerts-topic``; None: not published)
        self.alerts_topic = alerts_topic
        self.partials_topic, self.output_topic, self.sources = partials_topic, output_topic, sources
        self.make_merger, self.codec, self.store, self.changelog = make_merger, codec, store, changelog
        self.checkpoint_interval = checkpoint_interval
        self.delivery_timeout, self.commit_timeout = delivery_timeout, commit_timeout
        self.encode = encode or (lambda snap: snapshot_line(snap).encode())
        self._listener = listener
        #: the service's :class:`~consumers.observability.ServiceMetrics` (None: not exported)
        self.metrics = metrics
        self.parts: dict[Any, _MergePart] = {}
        self.failure: str | None = None
        self.counts = {"records": 0, "published": 0, "checkpoints": 0}
        self._inflight: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_checkpoint = time.monotonic()
        self._last_wait_log = time.monotonic()
        #: how often (s) a merge holding windows back logs why at INFO
        self.wait_log_interval = 10.0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> MergeStage:
        self._thread = threading.Thread(target=self._run, name="streammetrics-merge", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            if self._listener is None:
                from .clients import rebalance_listener

                self._listener = rebalance_listener
            self.consumer.subscribe([self.partials_topic], listener=self._listener(self._assign, self._revoke))
            while not self._stop.is_set() and self.failure is None:
                self.poll_once()
            if self.failure is None and self._group.stable(self.consumer) is False:
                log.info("merge: stopping during a rebalance: waiting up to %g s for it to finish before leaving "
                         "the group", self.leave_wait)
                self._group.settled(self.consumer, self.poll_once, self.leave_wait, lambda: self.failure is not None)
            if self.failure is None:
                self.checkpoint()
        except Exception as exc:
            log.exception("merge stage failed")
            self.failure = f"merge stage: {type(exc).__name__}: {exc}"
        finally:
            for close in (lambda: self.consumer.close(autocommit=False, timeout_ms=int(self.commit_timeout * 1000)),
                          lambda: self.producer.close(timeout=self.commit_timeout),
                          getattr(getattr(self.changelog, "reader", None), "close", None)):
                try:
                    if close is not None:
                        close()
                except Exception as exc:  # noqa: BLE001 - closing is best effort
                    log.warning("merge stage close: %s", exc)

    # ------------------------------------------------------------------ rebalancing
    def _assign(self, assigned: Any) -> None:
        try:
            for tp in assigned:
                if tp.topic != self.partials_topic or tp in self.parts:
                    continue
                merger = self.make_merger()
                offset = None
                saved = self._restore(tp.partition)
                if saved is not None:
                    merger.load_dict(saved["windows"])
                    offset = saved["offset"]
                    self.consumer.seek(tp, offset)
                self.parts[tp] = _MergePart(tp, merger, offset)
                log.info("merge: assigned %s[%d] from offset %s", tp.topic, tp.partition, offset)
        except Exception as exc:
            log.exception("merge: assignment failed")
            self.failure = f"merge stage: assignment failed: {type(exc).__name__}: {exc}"

    def _restore(self, partition: int) -> dict[str, Any] | None:
        candidates = []
        if self.store is not None:
            local = self.store.load(partition)
            if local is not None:
                candidates.append(local)
        if self.changelog is not None:
            where = f"merge changelog checkpoint {partition}"

            def check(chain: list[bytes], metas: list[dict[str, Any]]) -> None:  # a bad one is skipped
                self.make_merger().load_dict(self.codec.decode(partition, chain[0], where)["windows"])

            # the merge writes full checkpoints only: a chain of one
            chain = self.changelog.restore(partition, check)
            if chain:
                candidates.append(self.codec.decode(partition, chain[0], where))
        return max(candidates, key=lambda c: c["offset"]) if candidates else None

    def _revoke(self, revoked: Any) -> None:
        mine = [tp for tp in revoked if tp in self.parts]
        try:
            if mine and self.failure is None:
                self.checkpoint(mine, commit=False)
        except Exception as exc:
            self.failure = f"merge stage: checkpoint on revocation failed: {type(exc).__name__}: {exc}"
        finally:
            for tp in mine:
                self.parts.pop(tp, None)
                log.info("merge: revoked %s[%d]", tp.topic, tp.partition)

    # ------------------------------------------------------------------ processing
    def poll_once(self, timeout_ms: int = 200) -> int:
        batches = self.consumer.poll(timeout_ms=timeout_ms, max_records=5000)
        applied = 0
        for tp, records in batches.items():
            part = self.parts.get(tp)
            if part is None:
                continue
            for rec in records:
                if part.next_offset is not None and rec.offset < part.next_offset:
                    continue
                if part.saved_offset is None:
                    part.saved_offset = rec.offset  # the empty merge state is consistent before it
                before = dict(part.merger.counts) if self.metrics is not None else None
                value, merged = rec.value, []
                if self.signer is not None and self.signer.enabled and value is not None:
                    try:
                        value = self.signer.open(value)
                    except ValueError as exc:  # ForgedRecord: no valid tag
                        part.merger.forged(f"{rec.topic}[{rec.partition}]@{rec.offset}: {exc}")
                        value = None
                if value is not None or not (self.signer is not None and self.signer.enabled):
                    merged = part.merger.apply(value)
                for snap in merged:
                    value = self.encode(snap)
                    if value is not None:
                        self._send(self.key_of(snap), value)
                        if self.metrics is not None:
                            self.metrics.observe_snapshot(snap)
                for event in part.merger.take_alerts():
                    self._send_alert(event)
                if part.merger.alerts is not None and self.metrics is not None:
                    self.metrics.alert_pairs_forgotten.labels("merge", str(tp.partition)).set(
                        part.merger.alerts.dropped)
                if before is not None:
                    self._count(before, part.merger.counts)
                part.next_offset = rec.offset + 1
                applied += 1
        self.counts["records"] += applied
        now = time.monotonic()
        if now - self._last_checkpoint >= self.checkpoint_interval:
            self.checkpoint()
        if now - self._last_wait_log >= self.wait_log_interval:
            self._last_wait_log = now
            self.log_waiting()
        self._check_membership()
        return applied

    def _check_membership(self) -> None:
        """``--rejoin-after``: see :meth:`consumers.service.MetricsService._check_membership`."""
        if not self._group.due(self.consumer):
            return
        if self.metrics is not None:
            self.metrics.forced_rejoins.labels("merge").inc()
        listener = self._listener
        assert listener is not None
        new = self._group.replace(self.consumer, self._consumer_factory, lambda c: c.subscribe(
            [self.partials_topic], listener=listener(self._assign, self._revoke)), self.commit_timeout)
        if new is not None:
            self.consumer = new

    def log_waiting(self) -> list[str]:
        """Log at INFO, per partials partition, why merged windows are held (the lines logged)."""
        lines = []
        for part in list(self.parts.values()):
            why = part.merger.waiting()
            if why is not None:
                lines.append(f"merge of {part.tp.topic}[{part.tp.partition}]: {why}")
                log.info("%s", lines[-1])
        if not self.parts:
            lines.append(f"merge: no partition of {self.partials_topic} assigned to this instance")
            log.info("%s", lines[-1])
        return lines

    def _count(self, before: dict[str, int], after: dict[str, int]) -> None:
        metrics = self.metrics
        for outcome, name in (("partials", "partial"), ("watermarks", "watermark"), ("replayed", "replayed"),
                              ("dropped", "dropped"), ("malformed", "malformed"), ("forged", "forged"),
                              ("unmergeable", "unmergeable"), ("reopened", "reopened")):
            if after[outcome] != before[outcome]:
                metrics.merge_records.labels(name).inc(after[outcome] - before[outcome])
        if after["evicted"] != before["evicted"]:
            metrics.merge_evicted.inc(after["evicted"] - before["evicted"])
        metrics.merge_windows.set(self.open_windows())

    def _send(self, key: bytes, value: bytes) -> None:
        self._inflight.append(self.producer.send(self.output_topic, key=key, value=value,
                                                 headers=[content_header(value)]))
        self.counts["published"] += 1

    def _send_alert(self, event: dict[str, Any]) -> None:
        """An alert event of a merged window, delivered before the checkpoint that covers it."""
        if self.metrics is not None:
            self.metrics.observe_alert(event)
        if self.alerts_topic:
            self._inflight.append(self.producer.send(self.alerts_topic, key=alert_key(event),
                                                     value=alert_line(event).encode()))

    def _flush(self) -> None:
        if not self._inflight:
            return
        self.producer.flush(timeout=self.delivery_timeout)
        failed = [f for f in self._inflight if not f.is_done or f.failed()]
        if failed:
            raise RuntimeError(f"{len(failed)} merged snapshots / merge checkpoints were not delivered")
        self._inflight.clear()

    def checkpoint(self, tps: list | None = None, commit: bool = True) -> None:
        """Flush, save each changed partition's merge state and offset, flush the changelog, commit."""
        from kafka.structs import OffsetAndMetadata

        parts = [self.parts[tp] for tp in (tps if tps is not None else list(self.parts)) if tp in self.parts]
        self._flush()
        for part in parts:
            if part.next_offset is None or part.next_offset == part.saved_offset:
                continue
            payload = self.codec.encode(part.tp.partition, part.next_offset, part.merger.to_dict())
            if self.store is not None:
                self.store.write(part.tp.partition, payload)
            if self.changelog is not None:
                self._inflight.extend(self.changelog.write(part.tp.partition, payload, part.next_offset, None))
            part.saved_offset = part.next_offset
            self.counts["checkpoints"] += 1
        self._flush()
        commits = {p.tp: OffsetAndMetadata(p.saved_offset, "", -1) for p in parts
                   if p.saved_offset is not None and p.saved_offset != p.committed_offset}
        if commits and commit:
            try:
                self.consumer.commit(commits, timeout_ms=int(self.commit_timeout * 1000))
                for tp, om in commits.items():
                    if tp in self.parts:
                        self.parts[tp].committed_offset = om.offset
            except Exception as exc:  # the checkpoint, not the group offset, is the source of truth
                log.info("merge: offset commit failed (%s); the checkpoint holds the offsets", exc)
        self._last_checkpoint = time.monotonic()

    def open_windows(self) -> int:
        return sum(p.merger.open_windows for p in list(self.parts.values()))

    def known_watermarks(self) -> dict[int, int]:
        """The largest watermark of each source partition over this stage's mergers (read from the
        service's thread: a copy, retried if the merge thread changes a dict meanwhile)."""
        for _ in range(5):
            try:
                out: dict[int, int] = {}
                for part in list(self.parts.values()):
                    for source, watermark in list(part.merger.watermarks.items()):
                        if watermark > out.get(source, watermark - 1):
                            out[source] = watermark
                return out
            except RuntimeError:  # changed size during iteration
                continue
        return {}
