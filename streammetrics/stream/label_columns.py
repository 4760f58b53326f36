"""Columnar reading of the two files of ``replay PREDICTIONS --labels LABELS`` (binary task).

Each file is read in chunks of lines. A chunk of the predictions file is decoded by the column
decoder of predictions awaiting their label (:class:`~streammetrics.events.columns.ColumnDecoder`
with ``awaiting``), a chunk of the labels file by :class:`LabelDecoder` (one typed msgspec decode
per line: ``ts``, ``id``, ``y_true``). A line either decoder cannot prove valid (a labelled
prediction, a label in the predictions file, a hostile value, a blank line...) goes through the
per-event parser (``parse_value``), which gives exactly today's items and rejections; the items
of both paths are the same objects.

:func:`merged_chunks` then merges the two files' items by event time exactly as
``heapq.merge`` of ``(ts, rank, seq)`` tuples does (``rank`` 0 for predictions): the merge of
two sequences taken in order by comparing their heads is the same as the stable sort of both
by their *running maximum* of ``ts`` (an item lower than one before it in its own file is taken
right after that one, as the heads' comparison takes it), ties to the predictions. A rejected
line keeps its place after its file's previous item (its key is the running maximum).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice, repeat
from typing import Any, Union

import numpy as np

from streammetrics.events.columns import ColumnDecoder, column_decoder
from streammetrics.events.decoding import MAX_NESTING
from streammetrics.events.fields import MAX_NAME_LENGTH, TS_MAX, TS_MIN, utf8_encodable
from streammetrics.events.parser import EventParser
from streammetrics.events.records import Event, Rejection
from streammetrics.stream.labels import Label

msgspec: Any
try:  # the optional accelerator (the ``fast`` extra)
    import msgspec
except ImportError:  # pragma: no cover - exercised where msgspec is absent
    msgspec = None

__all__ = ["CHUNK_LINES", "LabelDecoder", "decoders", "merged_chunks", "source_chunks"]

#: lines read and decoded at a time from each file
CHUNK_LINES = 4096
_BLANK_START = frozenset([b"", b" ", b"\t", b"\r", b"\n"])
_NEG_INF = -float("inf")

#: one file's chunk: (running maximum of ts per item, items, line numbers)
Chunk = tuple[np.ndarray, list[Any], list[int]]


class LabelDecoder:
    """Label events ``{"id", "y_true", "ts"}`` of a binary stream, as columns: ``decode(lines)``
    gives the :class:`~streammetrics.stream.labels.Label` of each line it proves valid and the
    indices of the others (odd: for the per-event parser). A line naming a prediction's field
    (``model``, ``score``, ``scores``, ``y_pred``) anywhere is odd: it is not a label event."""

    def __init__(self, parser: EventParser) -> None:
        if msgspec is None:  # pragma: no cover - exercised where msgspec is absent
            raise ValueError("columnar decoding needs msgspec (the 'fast' extra)")
        if parser.task != "binary":
            raise ValueError(f"no columnar label decoding for the {parser.task!r} task")
        f = parser.fields
        struct = msgspec.defstruct("LabelEvent", [("ts", float), ("id", Union[str, int]), ("y_true", int)],
                                   rename={k: f[k] for k in ("ts", "id", "y_true")}, gc=False)
        self._decode = msgspec.json.Decoder(struct).decode
        self._marks = [f'"{f[k]}"'.encode() for k in ("model", "score", "scores", "y_pred")]

    def decode(self, lines: Sequence[Any]) -> tuple[list[Label], np.ndarray, list[int]]:
        """``(labels, ts, odd)``: the labels of the valid lines (in line order) with their ``ts``
        (float64), and the indices of the other lines, ascending."""
        decode = self._decode
        marks = self._marks
        try:
            joined = b"".join(lines)
            plain = joined.isascii() and not any(m in joined for m in marks) and max(map(len, lines)) <= MAX_NESTING
        except (TypeError, ValueError):  # not all bytes-like (or no line)
            plain = False
        structs: list[Any] | None = None
        if plain:
            try:
                structs = list(map(decode, lines))
            except Exception:  # noqa: BLE001 - some line is odd: line by line below
                structs = None
        odd: list[int] = []
        if structs is None:
            structs = []
            for i, line in enumerate(lines):
                if line.__class__ is not bytes or not line.isascii() or len(line) > MAX_NESTING \
                        or any(m in line for m in marks):
                    odd.append(i)
                    continue
                try:
                    structs.append(decode(line))
                except Exception:  # noqa: BLE001 - the per-event path says why
                    odd.append(i)
            skipped = set(odd)
            rows = [i for i in range(len(lines)) if i not in skipped]
        else:
            rows = list(range(len(lines)))
        m = len(structs)
        ts = np.fromiter([x.ts for x in structs], dtype=np.float64, count=m)
        ys = [x.y_true for x in structs]
        ids = [x.id for x in structs]
        ok = (ts >= TS_MIN) & (ts < TS_MAX)
        ok &= np.fromiter([y == 0 or y == 1 for y in ys], dtype=bool, count=m)
        if any(i.__class__ is not str or len(i) > MAX_NAME_LENGTH or not i.isascii() for i in ids):
            for j, ident in enumerate(ids):  # an integer id as its decimal string; long or not UTF-8: odd
                if ident.__class__ is int:
                    if ident.bit_length() > 64:
                        ok[j] = False
                    ids[j] = str(ident)
                elif len(ident) > MAX_NAME_LENGTH or not (ident.isascii() or utf8_encodable(ident)):
                    ok[j] = False
        if not ok.all():
            keep = np.flatnonzero(ok).tolist()
            odd = sorted(odd + [rows[j] for j in np.flatnonzero(~ok).tolist()])
            ts, ys, ids = ts[keep], [ys[j] for j in keep], [ids[j] for j in keep]
        return list(map(Label, ids, ys, ts.tolist())), ts, odd


def _prediction_items(decoder: ColumnDecoder) -> Callable[[Sequence[Any]], tuple[list[Any], np.ndarray, list[int]]]:
    def decode(lines: Sequence[Any]) -> tuple[list[Any], np.ndarray, list[int]]:
        cols, odd = decoder.decode(lines)
        if cols is None:
            return [], np.empty(0), odd
        n = len(cols)
        keys = cols.keys
        idx = cols.key_index.tolist()
        models = [keys[i][0] for i in idx]
        segments = [keys[i][1] for i in idx]
        weight: Any = repeat(1.0, n) if cols.weight is None else cols.weight.tolist()
        ident: Any = repeat(None, n) if cols.id is None else cols.id.tolist()
        events = list(map(Event, cols.ts.tolist(), models, segments, repeat(None, n), cols.score.tolist(),
                          repeat(None, n), repeat(None, n), weight, ident))
        return events, cols.ts, odd

    return decode


def decoders(parser: EventParser) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """The chunk decoders of the predictions file and of the labels file, None where there is
    none (another task than binary, msgspec not installed, a parser without required keys)."""
    if parser.task != "binary" or msgspec is None:
        return None
    columns = column_decoder(parser, awaiting=True)
    if columns is None:
        return None
    return _prediction_items(columns), LabelDecoder(parser).decode


def source_chunks(lines: Iterable[Any], decode: Callable[[Sequence[Any]], tuple[list[Any], np.ndarray, list[int]]],
                  parse_raw: Callable[[Any], list[Any]], counter: list[int], first_line: int = 1) -> Iterator[Chunk]:
    """One file's items in chunks (see :data:`Chunk`); ``counter`` counts its lines and bytes as
    they are read. Blank lines give no item; odd lines what ``parse_raw`` gives."""
    it = iter(lines)
    lineno = first_line
    carry = _NEG_INF
    while True:
        batch = list(islice(it, CHUNK_LINES))
        if not batch:
            return
        counter[0] += len(batch)
        counter[1] += sum(map(len, batch))
        items, ts, odd = decode(batch)
        if not odd:
            numbers = list(range(lineno, lineno + len(batch)))
            times = ts
        else:
            items, times, numbers = _with_odd(batch, items, ts, odd, parse_raw, lineno)
        lineno += len(batch)
        if not items:
            continue
        keys = np.maximum.accumulate(np.concatenate(([carry], times)))[1:]
        carry = float(keys[-1])
        yield keys, items, numbers


def _with_odd(batch: list[Any], items: list[Any], ts: np.ndarray, odd: list[int], parse_raw: Callable[[Any], list[Any]],
              lineno: int) -> tuple[list[Any], np.ndarray, list[int]]:
    """The chunk's items in line order: the decoded ones, and each odd line's per-event items
    (a rejection's time -inf: its key is then its file's running maximum)."""
    out: list[Any] = []
    times: list[float] = []
    numbers: list[int] = []
    odd_set = set(odd)
    pos = 0
    ts_list = ts.tolist()
    for i, line in enumerate(batch):
        if i not in odd_set:
            out.append(items[pos])
            times.append(ts_list[pos])
            numbers.append(lineno + i)
            pos += 1
            continue
        if line[:1] in _BLANK_START and not line.strip():
            continue
        for item in parse_raw(line):
            out.append(item)
            times.append(_NEG_INF if item.__class__ is Rejection else item.ts)
            numbers.append(lineno + i)
    return out, np.array(times, dtype=np.float64), numbers


def merged_chunks(first: Iterator[Chunk], second: Iterator[Chunk]) -> Iterator[tuple[list[Any], list[int], list[int]]]:
    """The items of two files' chunks merged (module docstring): ``(items, ranks, line numbers)``
    at a time (rank 0: ``first``)."""
    bufs: list[Chunk | None] = [None, None]
    sources = [first, second]
    done = [False, False]
    while True:
        for r in (0, 1):
            if bufs[r] is None and not done[r]:
                bufs[r] = next(sources[r], None)
                if bufs[r] is None:
                    done[r] = True
        a, b = bufs
        if a is None and b is None:
            return
        if a is None or b is None:
            keys, items, numbers = a if b is None else b  # type: ignore[misc]
            yield items, [0 if b is None else 1] * len(items), numbers
            bufs = [None, None]
            continue
        ka, kb = a[0], b[0]
        na = int(np.searchsorted(ka, kb[-1], side="right"))  # A's items before B's last
        nb = int(np.searchsorted(kb, ka[-1], side="left"))  # B's items before A's last
        keys = np.concatenate((ka[:na], kb[:nb]))
        ranks = np.concatenate((np.zeros(na, dtype=np.int8), np.ones(nb, dtype=np.int8)))
        order = np.lexsort((ranks, keys)).tolist()
        both = a[1][:na] + b[1][:nb]
        lines = a[2][:na] + b[2][:nb]
        rank_list = ranks.tolist()
        yield [both[i] for i in order], [rank_list[i] for i in order], [lines[i] for i in order]
        bufs = [None if na == len(ka) else (ka[na:], a[1][na:], a[2][na:]),
                None if nb == len(kb) else (kb[nb:], b[1][nb:], b[2][nb:])]
