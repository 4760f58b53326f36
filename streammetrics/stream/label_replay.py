"""``replay PREDICTIONS --labels LABELS``: two JSONL sources interleaved by event time.

The items of both files are parsed and merged by ``ts`` (each file in its own time order; on
equal ``ts`` the predictions' file goes first, so a label dated with its prediction finds it;
a rejected line keeps its place after its file's previous item) and handed one by one to a
:class:`~streammetrics.stream.pipeline.Pipeline` (``process_event``), which joins labels to
predictions and revises closed windows. Problems are reported as ``FILE:LINE``. One file that
holds both kinds needs none of this: :func:`~streammetrics.stream.replay.replay_lines` feeds
its lines to the pipeline as they are.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from streammetrics.events.records import Rejection
from streammetrics.stream.label_columns import decoders, merged_chunks, source_chunks

__all__ = ["COLLECT_READY", "POLL_EVERY", "Source", "replay_merged"]

_BLANK_START = frozenset([b"", b" ", b"\t", b"\r", b"\n", "", " ", "\t", "\r", "\n"])
#: replay collects the snapshots ready every 1024 items (a mask). It polls with
#: ``revisions=False``: label revisions come at the window engine's revision ticks (event time
#: entering a new pane, see :meth:`~streammetrics.stream.windows.WindowManager.revision_tick`)
#: and at the end, so the output does not depend on this number or on the items' positions
POLL_EVERY = 0x3FF
#: ...and writes them at once unless every ready one is a small window still to build and fewer
#: than this many wait (:meth:`~streammetrics.stream.pipeline.Pipeline.collect_due`): small
#: windows that close between two writes are built together (one vectorised pass, see
#: :mod:`streammetrics.monitors.fleet_snapshot`), at most this many at a time, each holding at
#: most 256 queued events. The polls keep their places, so closing and revisions are where
#: they were: the output is the same lines in the same order, whatever this number
COLLECT_READY = 1024


class Source(NamedTuple):
    """One input of the merge: ``units`` are raw JSONL lines, or, with ``parse`` given, decoded
    values (rows of CSV or Parquet files; None for a blank line) that ``parse`` turns into items,
    numbered from ``first_line``. A plain ``(name, lines)`` pair is a Source of raw lines."""

    name: str
    units: Iterable[Any]
    parse: Callable[[Any], list[Any]] | None = None
    first_line: int = 1


def _items(source: Source, parse_raw: Callable[[Any], list[Any]], rank: int,
           counter: list[int]) -> Iterator[tuple[float, int, int, int, Any]]:
    """``(ts, rank, seq, line, item)`` of every item of ``source``: tuples that order as the merge
    takes them (``seq`` numbers the source's items, so nothing past it is compared)."""
    ts = -math.inf
    seq = 0
    raw = source.parse is None
    parse = parse_raw if source.parse is None else source.parse
    for lineno, line in enumerate(source.units, source.first_line):
        counter[0] += 1
        if raw:
            counter[1] += len(line)
            if line[:1] in _BLANK_START and not line.strip():
                continue
        elif line is None:
            continue
        for item in parse(line):
            if item.__class__ is not Rejection:
                ts = item.ts
            seq += 1
            yield (ts, rank, seq, lineno, item)


def _decoders(pipeline: Any, sources: Sequence[tuple[Any, ...]]) -> tuple[Any, Any] | None:
    """The chunk decoders of :mod:`streammetrics.stream.label_columns` when both sources are raw
    JSONL lines of a binary stream without slices (None: item by item)."""
    config = pipeline.config
    if len(sources) != 2 or any(Source(*s).parse is not None for s in sources) \
            or config.slicing is not None or not config.batch:
        return None
    return decoders(pipeline.parser.base)


def _merged(sources: Sequence[tuple[Any, ...]], parse: Callable[[Any], list[Any]], counter: list[int],
            chunked: tuple[Any, Any] | None = None) -> tuple[list[str], Iterator[tuple[int, int, Any]]]:
    """The sources' names, and their items merged by ``(ts, rank)`` (see :func:`_items`) as
    ``(rank, line number, item)``; with ``chunked`` (the two sources' chunk decoders) read and
    merged a chunk at a time (:mod:`streammetrics.stream.label_columns`), in the same order."""
    given = [Source(*source) for source in sources]
    names = [source.name for source in given]
    if chunked is not None:
        first, second = (source_chunks(source.units, decode, parse, counter, source.first_line)
                         for source, decode in zip(given, chunked))
        return names, (x for items, ranks, lines in merged_chunks(first, second) for x in zip(ranks, lines, items))
    streams = [_items(source, parse, rank, counter) for rank, source in enumerate(given)]
    return names, ((rank, line, item) for _, rank, _, line, item in heapq.merge(*streams))


def replay_merged(sources: Sequence[tuple[Any, ...]], pipeline: Any, write: Callable[[str], Any],
                  stats: Any, note: Callable[[str, Any], Any], progress: Any = None) -> Any:
    """Feed the merged items of ``sources`` (predictions first) to ``pipeline``; ``write`` each
    snapshot line; ``note(where, problem)`` each problem (a parse rejection or a pipeline
    :class:`~streammetrics.stream.pipeline.Problem`). ``stats.lines`` is kept up to date."""
    counter = [0, 0]
    process = pipeline.process_event
    n = 0
    names, merged = _merged(sources, pipeline.parser.parse_value, counter, _decoders(pipeline, sources))
    for rank, lineno, item in merged:
        n += 1
        if item.__class__ is Rejection:
            note(f"{names[rank]}:{lineno}", item)
        else:
            problems = process(item).problems
            if problems:
                for problem in problems:
                    note(f"{names[rank]}:{lineno}", problem)
        if n & POLL_EVERY == 0:
            stats.lines = counter[0]
            if progress is not None:
                progress.draw(counter[1], stats)
            for line in pipeline.poll_lines(revisions=False, collect=pipeline.collect_due(COLLECT_READY)):
                write(line)
                stats.snapshots += 1
    stats.lines = counter[0]
    for line in pipeline.poll_lines(revisions=False) + pipeline.flush_lines():
        write(line)
        stats.snapshots += 1
    if progress is not None:
        progress.draw(counter[1], stats, final=True)
    return stats
