"""``streammetrics replay``: prediction events from a JSONL, CSV or Parquet file (or stdin) to windowed snapshots.

Each JSONL line holds one event object or a JSON array of them; CSV and Parquet rows are one
event each (read by :mod:`streammetrics.events.tables`, by extension or ``--format``, numeric
``ts`` in ``--ts-unit``); a :class:`~streammetrics.stream.pipeline.Pipeline`
does the work. Rejected and late events are listed on stderr with their line number and reason,
at most ``REPORT_LIMIT`` (10) times per distinct (code, field), the rest counted in the summary.

Exit codes: 0 when events were applied (or the input held none); 1 when the input was unreadable,
or when events came but none was applied (a wrong ``--task`` or ``--field``, say) — if the first
``ABORT_AFTER`` (1,000) rejections all share one code and field and nothing was applied, the
replay stops there with a summary; 2 for unusable arguments (one line, e.g. ``--output`` naming
an input file). A closed output pipe (``replay ... | head -1``) ends the replay quietly with 0.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import io
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from itertools import islice
from typing import IO, Any

from streammetrics.events.records import Rejection
from streammetrics.events.tables import (
    CsvTyper,
    InputError,
    csv_rows,
    extension_format,
    format_of,
    jsonl_values,
    parquet_rows,
    sniff,
    ts_scale,
)
from streammetrics.monitors.labels import DEFAULT_MAX_LABELS
from streammetrics.monitors.reference import DEFAULT_MAX_REFERENCES
from streammetrics.stream import label_replay
from streammetrics.stream.alerting import alert_line, spec_from_options
from streammetrics.stream.label_replay import Source, replay_merged
from streammetrics.stream.pipeline import Pipeline, PipelineConfig, Problem

__all__ = ["ABORT_AFTER", "REPORT_LIMIT", "ReplayStats", "paused_gc", "replay_gc", "replay_lines", "run_replay",
           "sample_path"]

_BLANK_START = frozenset([b"", b" ", b"\t", b"\r", b"\n", "", " ", "\t", "\r", "\n"])
#: problems of one (code, field) listed on stderr; further ones are only counted
REPORT_LIMIT = 10
#: rejections of a single (code, field), with no event applied yet, after which replay gives up
ABORT_AFTER = 1000
#: problem codes of delayed labels that report an expiry rather than refuse an event
EXPIRY_CODES = frozenset(["prediction_expired", "label_expired"])


#: the youngest generation's collection threshold during a replay (CPython's default: 700):
#: above the events a fleet's windows keep queued (~100,000 over 10,000 keys), which a young
#: collection would otherwise scan once each for nothing (at 20,000: 0.6-0.9 s of a 10 s
#: 10,000-key replay; at 100,000: 0.15 s)
REPLAY_GC_THRESHOLD = 100_000


@contextlib.contextmanager
def replay_gc() -> Iterator[None]:
    """Garbage-collector settings for a replay (``streammetrics replay`` runs inside it), in the
    manner of the service's ``tune_gc``: a replay allocates a few short-lived containers per
    event and per snapshot while window state for every key lives on, and with CPython's
    default thresholds the collector rescans that state every 700 allocations (a fifth of the
    time of a replay over 10,000 keys). Here the youngest generation is collected every
    :data:`REPLAY_GC_THRESHOLD` (100,000) allocations and the older ones every 50 of those (at
    most ~100,000 containers of garbage cycles, some 10-20 MB, wait longer: a replay makes
    almost none); the previous thresholds are restored on exit."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], REPLAY_GC_THRESHOLD), max(old[1], 50), max(old[2], 50))
    try:
        yield
    finally:
        gc.set_threshold(*old)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No automatic collection inside (restored on exit, exception or not; nested: the outermost
    restores): for a step that builds many containers which all die together and hold no cycles
    (loading a report's snapshots; the service's checkpoint state tree and a window close's
    snapshots: at 100,000 keys about a million each), which the collector would otherwise scan
    once or twice each while they are built. Reference counting frees them as before; garbage
    cycles made inside wait for the next collection after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sample_path() -> str:
    """Path of the sample events file shipped with the package."""
    return str(resources.files("streammetrics") / "data" / "sample_predictions.jsonl")


class ReplayStats:
    """What a replay saw: lines, events applied, rejected and late events, snapshots written."""

    __slots__ = ("aborted", "events", "expired", "labels", "late", "lines", "rejected", "snapshots", "suppressed")

    def __init__(self) -> None:
        self.lines = self.events = self.rejected = self.late = self.snapshots = self.expired = 0
        self.labels: dict[str, int] | None = None  # the label join's counts (delayed labels)
        self.suppressed: dict[tuple[str, str | None], int] = {}  # problems not listed, by (code, field)
        self.aborted: Problem | None = None

    def summary(self) -> str:
        text = (f"replayed {self.lines} lines: {self.events} events applied, {self.rejected} rejected, "
                f"{self.late} late, {self.snapshots} snapshots")
        if self.suppressed:
            more = ", ".join(f"{n} {code}" + (f" ({field})" if field else "")
                             for (code, field), n in sorted(self.suppressed.items(), key=lambda kv: -kv[1]))
            text += f"; not listed: {more}"
        if self.labels is not None:
            j = self.labels
            text += (f"; delayed labels: {j['predictions']} predictions awaited labels, {j['labels']} labels "
                     f"accepted, {j['joined']} joined, {j['expired']} predictions expired ({j['evicted']} early: "
                     f"pending bound), {j['pending']} still pending, {j['duplicate']} duplicate and "
                     f"{j['rejected_expired']} expired labels rejected, {j['labels_expired']} labels found no "
                     f"prediction")
        return text

    def note(self, problem: Any, seen: dict[tuple[str, str | None], int], report: Callable[[Any, str], Any] | None,
             where: Any) -> int:
        """Count one problem (late, expired or refused), ``report(where, text)`` it while its (code,
        field) has come at most ``REPORT_LIMIT`` times, else count it as not listed; its count so far."""
        if problem.code == "late":
            self.late += 1
        elif problem.code in EXPIRY_CODES:  # delayed labels: reported, not refused
            self.expired += 1
        else:
            self.rejected += 1
        kind = (problem.code, problem.field)
        n = seen[kind] = seen.get(kind, 0) + 1
        if n > REPORT_LIMIT:
            self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
        elif report is not None:
            report(where, ("" if problem.index is None else f"[{problem.index}] ") + problem.reason)
        return n


class OutputClosed(Exception):
    """The snapshot output went away (a closed pipe)."""


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
    lines: Iterable[Any],
    pipeline: Pipeline,
    write: Callable[[str], Any],
    report: Callable[[int, str], Any] | None = None,
    progress: _Progress | None = None,
    *,
    decoded: bool = False,
    first_line: int = 1,
    on_problem: Callable[[int, Problem], Any] | None = None,
) -> ReplayStats:
    """Feed JSONL ``lines`` through ``pipeline``; ``write(line)`` each snapshot line.

    ``report(lineno, message)`` is called for rejected and late events, at most
    ``REPORT_LIMIT`` times per (code, field) (None: silent). ``decoded=True``: ``lines`` are
    decoded values instead (rows of CSV or Parquet files, see :mod:`streammetrics.events.tables`;
    None for a blank line), numbered from ``first_line``. ``on_problem(lineno, problem)`` sees
    every problem first (it may raise to stop the replay).
    """
    stats = ReplayStats()
    events_before = pipeline.counters["events"]
    return _replay_chunks(iter(lines), pipeline, write, report, progress, first_line, on_problem, stats,
                          events_before, decoded)


def _replay_chunks(lines: Iterator[Any], pipeline: Pipeline, write: Callable[[str], Any],
                   report: Callable[[int, str], Any] | None, progress: _Progress | None, first_line: int,
                   on_problem: Callable[[int, Problem], Any] | None, stats: ReplayStats,
                   events_before: int, decoded: bool = False) -> ReplayStats:
    """:func:`replay_lines` of raw JSONL lines: the lines between two polls (``POLL_EVERY``) go
    to :meth:`Pipeline.process_lines <streammetrics.stream.pipeline.Pipeline.process_lines>` (columnar)
    together, once an event has been applied (before that, line by line: a first run of one
    rejection may stop the replay, see ``ABORT_AFTER``). The same polls, problems and output as
    one line at a time."""
    seen: dict[tuple[str, str | None], int] = {}
    poll_every = label_replay.POLL_EVERY
    lineno = first_line - 1  # the last line read
    done = 0

    def note(at: int, problem: Problem) -> bool:
        """Count and report one problem; True when the replay stops here (ABORT_AFTER)."""
        if on_problem is not None:
            on_problem(at, problem)
        n = stats.note(problem, seen, report, at)
        if n >= ABORT_AFTER and len(seen) == 1 and pipeline.counters["events"] == events_before:
            stats.aborted = problem
            return True
        return False

    while stats.aborted is None:
        chunk = list(islice(lines, (lineno | poll_every) + 1 - lineno))  # up to the next poll
        if not chunk:
            break
        base = lineno + 1
        lineno += len(chunk)
        if progress is not None:
            done += 0 if decoded else sum(map(len, chunk))
            if (base - 1) >> 14 != lineno >> 14:
                stats.events = pipeline.counters["events"] - events_before
                progress.draw(done, stats)
        rest = 0  # the chunk's lines from here go columnar
        if pipeline.counters["events"] == events_before:  # nothing applied yet: line by line, until an event is
            rest = len(chunk)
            for i, line in enumerate(chunk):
                if decoded:
                    if line is None:
                        continue
                    result = pipeline.process_decoded(line)
                elif line[:1] in _BLANK_START and not line.strip():
                    continue
                else:
                    result = pipeline.process(line)
                for problem in result.problems:
                    if note(base + i, problem):
                        lineno = base + i
                        break
                if stats.aborted is not None:
                    break
                if result.applied and pipeline.counters["events"] != events_before:
                    rest = i + 1
                    break
        if stats.aborted is None and rest < len(chunk):
            part = chunk[rest:] if rest else chunk
            for i, problems in (pipeline.process_rows(part) if decoded else pipeline.process_lines(part)):
                for problem in problems:
                    note(base + rest + i, problem)
        if stats.aborted is None and lineno & poll_every == 0:  # label revisions come at revision ticks
            for text in pipeline.poll_lines(revisions=False, collect=pipeline.collect_due(label_replay.COLLECT_READY)):
                write(text)
                stats.snapshots += 1
    stats.events = pipeline.counters["events"] - events_before
    stats.labels = pipeline.counters["labels"]
    stats.lines = lineno - first_line + 1 if lineno else 0
    for text in pipeline.poll_lines(revisions=False) + pipeline.flush_lines():
        write(text)
        stats.snapshots += 1
    if progress is not None:
        progress.draw(done, stats, final=True)
    return stats


def _same_file(a: str, b: str) -> bool:
    """True when paths ``a`` and ``b`` name one file (symbolic or hard links included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _stdin_is(path: str) -> bool:
    """True when standard input is the file ``path`` (``replay - -o x.jsonl < x.jsonl``)."""
    try:
        here, there = os.fstat(sys.stdin.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # no such file, or stdin without a descriptor
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _config(args: argparse.Namespace) -> PipelineConfig:
    """The pipeline configuration of the replay flags; ValueError naming the flag at fault."""
    if args.task == "multiclass" and not args.classes:
        raise ValueError("--task multiclass needs --classes A,B,C (the classes, in the order of score arrays)")
    if args.task == "multiclass" and len(args.classes) < 2:
        raise ValueError(f"--classes needs at least two classes, got {args.classes!r}")
    if args.classes and args.task not in ("multiclass",):
        raise ValueError(f"--classes only applies to --task multiclass (use --labels for --task labels), "
                         f"not --task {args.task}")
    if args.labels and args.task != "labels":
        raise ValueError(f"--labels only applies to --task labels, not --task {args.task}")
    from streammetrics.events.parser import parse_field_map
    from streammetrics.stream.slicing import slice_settings

    sliced = slice_settings(args)
    references = None
    if getattr(args, "reference", None):
        references = read_references(args)
    return PipelineConfig(**sliced,
        task=args.task, window=args.window, slide=args.slide, grace=args.grace, threshold=args.threshold,
        classes=args.classes, labels=args.labels, fields=parse_field_map(args.field),
        max_labels=getattr(args, "max_labels", DEFAULT_MAX_LABELS),
        cumulative=args.cumulative, include_state=not args.no_state, max_future=args.max_future or None,
        max_keys=args.max_keys or None, max_snapshot_bytes=args.max_snapshot_bytes,
        references=references, max_references=getattr(args, "max_references", None) or DEFAULT_MAX_REFERENCES,
        label_ttl=args.label_ttl, **({} if args.max_pending is None else {"max_pending_labels": args.max_pending}),
        confidence=getattr(args, "confidence", 0.95), compare=getattr(args, "compare", None),
        fdr=getattr(args, "fdr", 0.05),
    )


def read_references(args: argparse.Namespace) -> dict[tuple[str, str], Any]:
    """The references of ``--reference FILE`` (``--task``, ``--classes``, ``--field``,
    ``--threshold``, ``--max-references`` apply); ValueError (one line) when unusable."""
    from streammetrics.events.parser import parse_field_map
    from streammetrics.stream.references import load_references

    options: dict[str, Any] = {"threshold": args.threshold} if args.task == "binary" else {}
    try:
        return load_references(
            args.reference, fields=parse_field_map(args.field), task=args.task, classes=args.classes,
            max_references=getattr(args, "max_references", None) or DEFAULT_MAX_REFERENCES, **options,
        )
    except OSError as exc:
        raise ValueError(f"--reference {args.reference}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise ValueError(f"--reference: {exc}") from None


def run_replay(args: argparse.Namespace, argparser: argparse.ArgumentParser) -> int:
    def fail(message: str, code: int = 2) -> int:
        print(f"streammetrics replay: {message}", file=sys.stderr)
        return code

    if args.sample:
        if args.file not in (None, ""):
            return fail("give either FILE or --sample, not both")
        args.file = sample_path()
    if args.file is None:
        return fail("give a JSONL FILE, '-' for standard input, or --sample")
    if args.output != "-" and args.file != "-" and _same_file(args.file, args.output):
        return fail(f"--output {args.output} is the input file {args.file}: refusing to overwrite it")
    if args.output != "-" and args.file == "-" and _stdin_is(args.output):
        return fail(f"--output {args.output} is the file on standard input: refusing to overwrite it")
    try:
        config = _config(args)
        if config.slicing is not None and getattr(args, "labels_file", None) is not None:
            raise ValueError("--slice-by, --rollup and --fairness-by read the slice fields of each prediction "
                             "line; with --labels FILE they are not supported yet")
        alerts = spec_from_options(getattr(args, "alert", ()), getattr(args, "alerts", None),
                                   getattr(args, "alert_cooldown", None), getattr(args, "reference", None), config)
        pipeline = Pipeline(dataclasses.replace(config, alerts=alerts))
        fmt = format_of(None if args.file == "-" else args.file, getattr(args, "format", None))
        scale = ts_scale(getattr(args, "ts_unit", "s"))
    except (ValueError, TypeError, OSError) as exc:
        return fail(str(exc))
    alert_sink = None
    if getattr(args, "alerts_output", None):
        if alerts is None:
            pipeline.close()
            return fail("--alerts-output needs rules (--alert or --alerts)")
        try:
            alert_sink = open(args.alerts_output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            pipeline.close()
            return fail(f"cannot write {args.alerts_output}: {exc.strerror}", 1)

    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        return fail(f"cannot read {args.file}: {exc.strerror}", 1)
    labels_file = getattr(args, "labels_file", None)
    label_source = None
    if labels_file is not None:
        try:
            label_source = open(labels_file, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            source.close()
            return fail(f"cannot read {labels_file}: {exc.strerror}", 1)
    try:
        sink = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        source.close()
        if label_source is not None:
            label_source.close()
        return fail(f"cannot write {args.output}: {exc.strerror}", 1)

    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    progress = None
    if show:
        size = None
        if source is not sys.stdin.buffer:
            try:
                size = os.fstat(source.fileno()).st_size
                if label_source is not None:
                    size += os.fstat(label_source.fileno()).st_size
            except OSError:
                size = None
        progress = _Progress(size, sys.stderr)

    def write_line(line: str) -> None:
        try:
            sink.write(line)
            sink.write("\n")
        except BrokenPipeError:
            raise OutputClosed from None

    def write(line: str) -> None:
        write_line(line)
        if pipeline.alerts is not None:
            for event in pipeline.take_alerts():  # the alert events of the snapshots written
                if alert_sink is not None:
                    alert_sink.write(alert_line(event) + "\n")

    def report(lineno: int | str, message: str) -> None:  # a line number, or FILE:LINE with two files
        if progress is not None:
            sys.stderr.write("\r\033[K")
        print(f"line {lineno}: {message}" if isinstance(lineno, int) else f"{lineno}: {message}", file=sys.stderr)

    try:
        units, decoded, first_line = _input(args.file, source, fmt, scale, pipeline)
        if decoded and progress is not None:
            progress.total = None  # rows, not bytes: the bar counts them
        if label_source is not None:
            labels_fmt = extension_format(labels_file) or fmt
            label_units, labels_decoded, labels_first = _input(str(labels_file), label_source, labels_fmt, scale,
                                                               pipeline)
            with source, label_source, replay_gc():
                stats = _replay_two(args.file, units, str(labels_file), label_units, pipeline, write,
                                    None if args.quiet else report, progress,
                                    (first_line if decoded else None, labels_first if labels_decoded else None))
        else:
            with source, replay_gc():
                stats = replay_lines(units, pipeline, write, None if args.quiet else report, progress,
                                     decoded=decoded, first_line=first_line)
        if sink is sys.stdout:
            try:
                sink.flush()
            except BrokenPipeError:
                raise OutputClosed from None
    except OutputClosed:
        _silence_stdout()
        return 0
    except InputError as exc:
        source.close()
        if label_source is not None:
            label_source.close()
        return fail(str(exc), 1)
    except OSError as exc:
        return fail(f"error reading {args.file}: {exc}", 1)
    finally:
        pipeline.close()
        if sink is not sys.stdout:
            sink.close()
        if alert_sink is not None:
            alert_sink.close()
        if pipeline.alerts is not None:
            print(pipeline.alerts.summary(), file=sys.stderr)
    if stats.aborted is not None:
        p = stats.aborted
        print(f"streammetrics replay: stopped after {ABORT_AFTER} events rejected for one reason and none "
              f"applied ({p.code}: {p.reason}); check --task ({args.task}) and --field", file=sys.stderr)
    print(stats.summary(), file=sys.stderr)
    if stats.events == 0 and (stats.rejected or stats.late):
        return 1
    return 0


def _input(name: str, source: Any, fmt: str, scale: int, pipeline: Pipeline) -> tuple[Iterable[Any], bool, int]:
    """What replay feeds the pipeline from ``source`` read as ``fmt``: ``(units, decoded,
    first_line)``: raw JSONL lines (``decoded`` False) or decoded values (rows; see
    :mod:`streammetrics.events.tables`), and the line number of the first. InputError (one line)
    when the file's first bytes look like another format."""
    peek = getattr(source, "peek", None)
    head = peek(65536)[:65536] if peek is not None else b""
    problem = sniff(head, fmt, "standard input" if name == "-" else name)
    if problem is not None:
        raise InputError(problem)
    ts_name = pipeline.parser.fields["ts"]
    if fmt == "csv":
        config = pipeline.config
        typer = CsvTyper(config.task, pipeline.parser.fields,
                         config.labels if config.task == "labels" else config.classes, scale)
        return csv_rows(source, typer, name), True, 2
    if fmt == "parquet":
        seekable = source if source is not sys.stdin.buffer else io.BytesIO(source.read())
        return parquet_rows(seekable, ts_name, scale, name), True, 1
    if scale != 1:
        return jsonl_values(source, ts_name, scale), True, 1
    return source, False, 1


def _replay_two(name: str, source: Any, labels_name: str, labels: Any, pipeline: Pipeline,
                write: Callable[[str], Any], report: Callable[[str, str], Any] | None,
                progress: _Progress | None, inputs: tuple[int | None, int | None] = (None, None)) -> ReplayStats:
    """Predictions and label events from two files, merged by event time (delayed labels);
    ``inputs``: per file, None for raw JSONL lines, else the line number of its first decoded row."""
    stats = ReplayStats()
    seen: dict[tuple[str, str | None], int] = {}
    events_before = pipeline.counters["events"]

    def note(where: str, problem: Any) -> None:
        stats.note(problem, seen, report, where)

    def parse_decoded(value: Any) -> list[Any]:
        return [value] if value.__class__ is Rejection else pipeline.parser.parse_decoded(value)

    replay_merged([Source(n, units, parse_decoded if first is not None else None, first or 1)
                   for n, units, first in ((name, source, inputs[0]), (labels_name, labels, inputs[1]))],
                  pipeline, write, stats, note, progress)
    stats.events = pipeline.counters["events"] - events_before
    stats.labels = pipeline.counters["labels"]
    return stats


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of a closed pipe is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (tests)
        pass
