"""``streammetrics replay``: prediction events from a JSONL file (or stdin) to windowed snapshots.

Each line holds one event object or a JSON array of them. Rejected events are listed on
stderr with their line number and reason, late events likewise; a summary follows. The exit
code is non-zero only for unusable arguments (2) or an unreadable input (1).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import resources
from typing import IO, Any, Iterable

from streammetrics.monitors import make_monitor
from streammetrics.stream.events import Event, EventParser, parse_field_map
from streammetrics.stream.snapshots import snapshot_line
from streammetrics.stream.windows import EventRejected, WindowManager

__all__ = ["run_replay", "replay_lines", "sample_path", "ReplayStats"]

_BLANK_START = frozenset([b"", b" ", b"\t", b"\r", b"\n", "", " ", "\t", "\r", "\n"])


def sample_path() -> str:
    """Path of the sample events file shipped with the package."""
    return str(resources.files("streammetrics") / "data" / "sample_predictions.jsonl")


class ReplayStats:
    """What a replay saw: lines, events applied, rejected and late events, snapshots written."""

    __slots__ = ("lines", "events", "rejected", "late", "snapshots")

    def __init__(self) -> None:
        self.lines = self.events = self.rejected = self.late = self.snapshots = 0

    def summary(self) -> str:
        return (f"replayed {self.lines} lines: {self.events} events applied, {self.rejected} rejected, "
                f"{self.late} late, {self.snapshots} snapshots")


class _Progress:
    """A one-line progress bar on stderr, redrawn at most five times a second."""

    def __init__(self, total_bytes: int | None, stream: IO[str]) -> None:
        self.total = total_bytes
        self.stream = stream
        self.start = self.last = time.monotonic()

    def draw(self, done_bytes: int, stats: ReplayStats, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < 0.2:
            return
        self.last = now
        rate = stats.lines / max(now - self.start, 1e-9)
        if self.total:
            frac = min(done_bytes / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"\r[{bar:<30}] {frac:6.1%} {stats.lines:,} lines {rate:,.0f}/s"
        else:
            text = f"\r{stats.lines:,} lines {rate:,.0f}/s"
        self.stream.write(text + ("\n" if final else ""))
        self.stream.flush()


def replay_lines(
    lines: Iterable[bytes],
    parser: EventParser,
    windows: WindowManager,
    write: Any,
    report: Any = None,
    progress: _Progress | None = None,
) -> ReplayStats:
    """Feed JSONL ``lines`` through ``parser`` into ``windows``; ``write(line)`` each snapshot.

    ``report(lineno, message)`` is called for each rejected or late event (None: silent).
    """
    stats = ReplayStats()
    parse = parser.parse_value
    add = windows.add
    done = 0
    lineno = 0
    for lineno, line in enumerate(lines, 1):
        if progress is not None:
            done += len(line)
            if lineno & 0x3FFF == 0:
                progress.draw(done, stats)
        if line[:1] in _BLANK_START and not line.strip():  # skip blank lines without a copy per line
            continue
        for item in parse(line):
            if item.__class__ is Event:
                try:
                    applied = add(item)
                except EventRejected as exc:
                    stats.rejected += 1
                    if report is not None:
                        report(lineno, exc.reason)
                    continue
                if applied:
                    stats.events += 1
                else:
                    stats.late += 1
                    if report is not None:
                        report(lineno, f"late event for model={item.model!r} segment={item.segment!r} "
                                       f"ts={item.ts!r}: its windows have closed")
            else:
                stats.rejected += 1
                if report is not None:
                    report(lineno, item.reason)
        if lineno & 0x3FF == 0:
            for snap in windows.poll():
                write(snapshot_line(snap))
                stats.snapshots += 1
    stats.lines = lineno
    for snap in windows.poll() + windows.flush():
        write(snapshot_line(snap))
        stats.snapshots += 1
    if progress is not None:
        progress.draw(done, stats, final=True)
    return stats


def run_replay(args: argparse.Namespace, argparser: argparse.ArgumentParser) -> int:
    if args.sample:
        if args.file not in (None, ""):
            argparser.error("give either FILE or --sample, not both")
        args.file = sample_path()
    if args.file is None:
        argparser.error("give a JSONL FILE, '-' for standard input, or --sample")
    try:
        fields = parse_field_map(args.field)
        parser = EventParser(args.task, classes=args.labels if args.task == "labels" else args.classes,
                             fields=fields)

        def factory() -> Any:
            return make_monitor(args.task, threshold=args.threshold, classes=args.classes, labels=args.labels)

        factory()  # configuration errors surface now, not at the first event
        windows = WindowManager(factory, args.window, args.slide, args.grace, cumulative=args.cumulative,
                                include_state=not args.no_state, batch=True,
                                max_future=args.max_future)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        argparser.error(str(exc))

    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
    except OSError as exc:
        print(f"streammetrics replay: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        sink = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    except OSError as exc:
        print(f"streammetrics replay: cannot write {args.output}: {exc.strerror}", file=sys.stderr)
        return 1

    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    progress = None
    if show:
        size = None
        if source is not sys.stdin.buffer:
            try:
                size = os.fstat(source.fileno()).st_size
            except OSError:
                size = None
        progress = _Progress(size, sys.stderr)

    def write(line: str) -> None:
        sink.write(line)
        sink.write("\n")

    def report(lineno: int, message: str) -> None:
        if progress is not None:
            sys.stderr.write("\r\033[K")
        print(f"line {lineno}: {message}", file=sys.stderr)

    try:
        with source:
            stats = replay_lines(source, parser, windows, write, None if args.quiet else report, progress)
    except OSError as exc:
        print(f"streammetrics replay: error reading {args.file}: {exc}", file=sys.stderr)
        return 1
    finally:
        if sink is not sys.stdout:
            sink.close()
        else:
            sink.flush()
    print(stats.summary(), file=sys.stderr)
    return 0
