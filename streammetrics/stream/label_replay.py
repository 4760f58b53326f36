"""``replay`` with delayed labels: predictions and label events from one or two JSONL sources.

With two sources (``replay PREDICTIONS --labels LABELS``) the items of both are interleaved
by ``ts`` (each source in its own time order; on equal ``ts`` the predictions' source goes
first, so a label dated with its prediction finds it). One source may hold both kinds.
Labelled predictions take the same path as in :func:`~streammetrics.stream.replay.replay_lines`
until the first label event or prediction awaiting a label appears; from then on everything
goes through a :class:`~streammetrics.stream.label_stream.LabelStream` whose join starts at the
event time reached so far. Closed windows are polled every 1024 items and revisions every
65536, so the labels arriving in that span give one revision per window; at the end every
window still open closes and the latest revision of every window is out (final only if
nothing in it awaits a label).

``report(where, message)`` gets ``"FILE:LINE"`` and a one-line message for every rejected
event or label, late event and expiry (an expiry is reported at the line whose time made it
due, naming the prediction's id and ``ts``).
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streammetrics.stream.events import Event, Rejection
from streammetrics.stream.label_events import DelayedEventParser
from streammetrics.stream.label_stream import LabelStream
from streammetrics.stream.labels import LabelJoin
from streammetrics.stream.snapshots import snapshot_line
from streammetrics.stream.windows import EventRejected, WindowManager

__all__ = ["LabelReplayStats", "replay_labelled"]

#: closed windows are polled every 1024 items, label revisions every 65536 (mask): a revision
#: snapshot costs a full snapshot, and a file replay gains nothing from finer revisions
REVISION_LINES = 0xFFFF
_BLANK_START = frozenset([b"", b" ", b"\t", b"\r", b"\n", "", " ", "\t", "\r", "\n"])


class LabelReplayStats:
    """What a replay saw: lines, events, rejections, late events, snapshots and the join's counts."""

    def __init__(self) -> None:
        self.lines = self.events = self.rejected = self.late = self.snapshots = 0
        self.stream: LabelStream | None = None

    def summary(self) -> str:
        text = (f"replayed {self.lines} lines: {self.events} events applied, {self.rejected} rejected, "
                f"{self.late} late, {self.snapshots} snapshots")
        if self.stream is not None:
            j = self.stream.summary()
            text += (f"; delayed labels: {j['predictions']} predictions awaited labels, {j['labels']} labels "
                     f"accepted, {j['joined']} joined, {j['expired']} predictions expired "
                     f"({j['evicted']} early: pending bound), {j['pending']} still pending, "
                     f"{j['duplicate']} duplicate and {j['rejected_expired']} expired labels rejected, "
                     f"{j['labels_expired']} labels found no prediction")
        return text


def _items(name: str, lines: Iterable[bytes], parse: Callable[[Any], list[Any]], rank: int,
           stats: LabelReplayStats, progress: Any) -> Iterator[tuple[float, int, int, str, Any]]:
    """(ts, rank, seq, FILE:LINE, item) for every parsed item of one source; rejections carry
    the time of the source's previous item so that they keep their place."""
    ts = -math.inf
    seq = 0
    for lineno, line in enumerate(lines, 1):
        stats.lines += 1
        if progress is not None:
            progress.done += len(line)
            if stats.lines & 0x3FFF == 0:
                progress.draw(progress.done, stats)
        if line[:1] in _BLANK_START and not line.strip():
            continue
        for item in parse(line):
            if item.__class__ is not Rejection:
                ts = item.ts
            seq += 1
            yield (ts, rank, seq, f"{name}:{lineno}", item)


def replay_labelled(
    sources: list[tuple[str, Iterable[bytes]]],
    parser: DelayedEventParser,
    windows: WindowManager,
    make_join: Callable[[], LabelJoin],
    write: Callable[[str], Any],
    report: Callable[[str, str], Any] | None = None,
    progress: Any = None,
) -> LabelReplayStats:
    """Replay ``sources`` (``[(name, lines)]``, predictions first) into ``windows``; ``write``
    each snapshot line. ``make_join()`` builds the label join when the first delayed item comes."""
    stats = LabelReplayStats()
    if progress is not None:
        progress.done = 0
    parse = parser.parse_value
    streams = [_items(name, lines, parse, rank, stats, progress) for rank, (name, lines) in enumerate(sources)]
    merged: Iterable[tuple[float, int, int, str, Any]] = (
        streams[0] if len(streams) == 1 else heapq.merge(*streams, key=lambda x: (x[0], x[1])))
    add = windows.add
    stream: LabelStream | None = None
    max_ts = -math.inf
    n = 0
    for _, _, _, where, item in merged:
        n += 1
        cls = item.__class__
        if cls is Event and stream is None and item.y_true is not None:  # the plain path
            try:
                applied = add(item)
            except EventRejected as exc:
                stats.rejected += 1
                if report is not None:
                    report(where, exc.reason)
                continue
            if item.ts > max_ts:
                max_ts = item.ts
            if applied:
                stats.events += 1
            else:
                stats.late += 1
                if report is not None:
                    report(where, f"late event for model={item.model!r} segment={item.segment!r} "
                                  f"ts={item.ts!r}: its windows have closed")
        elif cls is Rejection:
            stats.rejected += 1
            if report is not None:
                report(where, item.reason)
        else:
            if stream is None:
                join = make_join()
                if max_ts > -math.inf:
                    join.advance(max_ts)
                stream = stats.stream = LabelStream(windows, join)
            for note in stream.add(item):
                if note.kind == "late":
                    stats.late += 1
                elif note.kind == "rejected":
                    stats.rejected += 1
                if report is not None:
                    report(where, note.message)
        if n & 0x3FF == 0:
            for snap in windows.poll(revisions=n & REVISION_LINES == 0):
                write(snapshot_line(snap))
                stats.snapshots += 1
    if stream is not None:
        c = stream.counts
        stats.events += c["events"] + c["predictions"]
    for snap in windows.poll() + windows.flush():
        write(snapshot_line(snap))
        stats.snapshots += 1
    if progress is not None:
        progress.draw(progress.done, stats, final=True)
    return stats
