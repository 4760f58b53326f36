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
from itertools import islice
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


Chunks = Iterator[tuple[list[Any], list[int], list[int]]]


def _merged(sources: Sequence[tuple[Any, ...]], parse: Callable[[Any], list[Any]], counter: list[int],
            chunked: tuple[Any, Any] | None = None) -> tuple[list[str], Chunks]:
    """The sources' names, and their items merged by ``(ts, rank)`` (see :func:`_items`) as chunks
    ``(items, ranks, line numbers)``; with ``chunked`` (the two sources' chunk decoders) read,
    decoded and merged a chunk at a time (:mod:`streammetrics.stream.label_columns`), in the
    same order."""
    given = [Source(*source) for source in sources]
    names = [source.name for source in given]
    if chunked is not None:
        first, second = (source_chunks(source.units, decode, parse, counter, source.first_line)
                         for source, decode in zip(given, chunked))
        return names, merged_chunks(first, second)
    merged = heapq.merge(*[_items(source, parse, rank, counter) for rank, source in enumerate(given)])
    return names, _in_chunks(merged)


def _in_chunks(merged: Iterator[tuple[float, int, int, int, Any]]) -> Chunks:
    while True:
        chunk = list(islice(merged, POLL_EVERY + 1))
        if not chunk:
            return
        yield [c[4] for c in chunk], [c[1] for c in chunk], [c[3] for c in chunk]


def replay_merged(sources: Sequence[tuple[Any, ...]], pipeline: Any, write: Callable[[str], Any],
                  stats: Any, note: Callable[[str, Any], Any], progress: Any = None) -> Any:
    """Feed the merged items of ``sources`` (predictions first) to ``pipeline``
    (``process_events``, up to each poll); ``write`` each snapshot line; ``note(where, problem)``
    each problem (a parse rejection or a pipeline :class:`~streammetrics.stream.pipeline.Problem`),
    in the items' order. ``stats.lines`` is kept up to date."""
    counter = [0, 0]
    n = 0
    names, merged = _merged(sources, pipeline.parser.parse_value, counter, _decoders(pipeline, sources))
    for items, ranks, lines in merged:
        pos, size = 0, len(items)
        while pos < size:
            stop = min(size, pos + POLL_EVERY + 1 - (n & POLL_EVERY))  # (up to the next poll)
            _process(pipeline, items, ranks, lines, pos, stop, names, note)
            n += stop - pos
            pos = stop
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


def _process(pipeline: Any, items: list[Any], ranks: list[int], lines: list[int], lo: int, hi: int,
             names: list[str], note: Callable[[str, Any], Any]) -> None:
    """Items ``lo`` to ``hi``: the events and labels to the pipeline together, each problem and
    rejection noted in the items' order."""
    part = items[lo:hi]
    rejected = [i for i, item in enumerate(part) if item.__class__ is Rejection]
    if rejected:
        keep = [i for i, item in enumerate(part) if item.__class__ is not Rejection]
        found = [(keep[i], problems) for i, problems in pipeline.process_events([part[i] for i in keep])]
        found += [(i, [part[i]]) for i in rejected]
        found.sort(key=lambda x: x[0])
    else:
        found = pipeline.process_events(part)
    for i, problems in found:
        where = f"{names[ranks[lo + i]]}:{lines[lo + i]}"
        for problem in problems:
            note(where, problem)
