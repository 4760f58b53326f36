"""Columnar decoding of JSONL prediction events (issue 24: "columnar batches").

:class:`ColumnDecoder` turns a batch of lines into :class:`EventColumns`: one typed msgspec
decode per line (a ``Struct`` of the task's fields, types checked while decoding), then the
field rules of :mod:`streammetrics.events.fields` applied to whole columns (numpy) and to each
distinct key once. A line it cannot prove valid this way - undecodable, refused by a rule, or
merely unusual (an ISO ``ts``, a ``scores`` object, an integer beyond 2**53, a
line longer than ``MAX_NESTING``...) - is returned as *odd*: the caller gives it to the per-event
path (:meth:`~streammetrics.events.parser.EventParser.parse_value`), which accepts or refuses it
with exactly today's reason. The columns of the other lines hold the values the per-event parser
gives (same floats, ``segment`` ``""`` when absent, ``weight`` 1.0 when absent), so both paths
build the same events.

Keys: a row's raw key (``model``, ``segment`` and the slice fields' values) is numbered by one
dict lookup into the keys met before (each new one checked once); the key fields' values met
(at most ``LITERAL_VALUES`` per field) are decoded by name, as one object each (a ``Literal``),
a line with a value not known yet decoded again with any string there.

Needs the optional ``msgspec`` (the ``fast`` extra): :func:`column_decoder` returns None without
it, and callers keep the per-event path. (``labels`` task: the rows whose labels are of the
batch's commonest kind - strings, numbers or booleans - as columns, the others per event.)

:meth:`ColumnDecoder.convert` does the same for decoded values (CSV and Parquet rows, JSONL
values rescaled by ``--ts-unit``: what ``Pipeline.process_decoded`` takes), through
``msgspec.convert``.

>>> from streammetrics.events.parser import EventParser
>>> dec = column_decoder(EventParser("binary"))
>>> cols, odd = dec.decode([b'{"ts": 1700000000, "model": "m", "y_true": 1, "score": 0.9}\\n', b'{"ts": "x"}\\n'])
>>> cols.rows.tolist(), odd, cols.keys, cols.score.tolist()
([0], [1], [('m', '')], [0.9])
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Literal, Optional, Union

import numpy as np

from streammetrics.events.decoding import MAX_NESTING
from streammetrics.events.fields import MAX_NAME_LENGTH, MAX_WEIGHT, TS_MAX, TS_MIN, utf8_encodable
from streammetrics.events.parser import EventParser
from streammetrics.events.records import Event

msgspec: Any
try:  # the optional accelerator (the ``fast`` extra)
    import msgspec
except ImportError:  # pragma: no cover - exercised where msgspec is absent
    msgspec = None

__all__ = ["ColumnDecoder", "EventColumns", "column_decoder", "object_column"]

#: numbers at least this large go through the per-event path: below it an integer and its float
#: are one value whichever decoder converts it
_EXACT = 2.0 ** 53
_INF = float("inf")
#: label kinds (as the labels monitor's ``event_tag`` names them) by the types of their labels
_KINDS = {"str": (str,), "number": (int, float), "bool": (bool,)}
_KIND_OF = {t: kind for kind, types in _KINDS.items() for t in types}
#: most valid keys a column decoder remembers (each distinct key is checked once per batch beyond it)
KEYS_CHECKED = 100_000
#: most values of a key field (``model``, ``segment``, a slice field) the decoder decodes by name:
#: each known value as one object (a ``Literal``: no new string per event, its hash computed once);
#: a field with more values is decoded as any string from then on
LITERAL_VALUES = 256
#: a decoder of new known values is built once this many lines per known value were decoded line by
#: line (batches holding a value the decoder does not know: about the cost of the build)
RELEARN_LINES = 32
_LITERAL: Any = Literal  # (built at run time from the values met)
_UNSEEN: Any = object()
#: the slice keys of events of some segments whose slice fields hold some values (None: refused)
SliceKeys = Callable[[list[str], list[tuple[Any, ...]]], list[Optional[str]]]
_REFUSED = ("", "")  # (the key of the rows whose key is refused: they go to the per-event path)
_SHARED = frozenset(["ts", "model", "segment", "weight", "id"])  # (the columns of every task)


class EventColumns:
    """Valid events as columns, in input order: ``rows`` (their line indices in the batch),
    ``ts`` (float64 epoch seconds), ``keys`` (distinct ``(model, segment)``) and ``key_index``
    (each row's index in ``keys``), ``weight`` (float64, None when every weight is 1), and per
    task ``y_true`` / ``score`` (binary: int64 0/1 and float64), ``y_true`` / ``y_pred``
    (regression: float64), ``y_true`` (multiclass: class indices) with ``scores`` (a list of
    float tuples), ``y_true`` / ``y_pred`` (labels: object arrays of labels, all of one kind)."""

    __slots__ = ("classes", "id", "key_index", "keys", "rows", "score", "scores", "task", "ts", "weight", "y_pred",
                 "y_true")

    def __init__(self, task: str, rows: np.ndarray, ts: np.ndarray, keys: list[tuple[str, str]],
                 key_index: np.ndarray, weight: np.ndarray | None, y_true: Any, score: Any = None,
                 scores: Any = None, y_pred: Any = None, classes: Sequence[Any] | None = None,
                 id: np.ndarray | None = None) -> None:  # noqa: A002 - the contract's field name
        self.task = task
        self.id = id
        self.rows = rows
        self.ts = ts
        self.keys = keys
        self.key_index = key_index
        self.weight = weight
        self.y_true = y_true
        self.score = score
        self.scores = scores
        self.y_pred = y_pred
        self.classes = classes

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, lo: int, hi: int) -> EventColumns:
        """Rows ``lo`` to ``hi`` (positions in these columns; keys kept whole)."""
        cut = slice(lo, hi)
        return EventColumns(self.task, self.rows[cut], self.ts[cut], self.keys, self.key_index[cut],
                            None if self.weight is None else self.weight[cut], self.y_true[cut],
                            None if self.score is None else self.score[cut],
                            None if self.scores is None else self.scores[cut],
                            None if self.y_pred is None else self.y_pred[cut], self.classes,
                            None if self.id is None else self.id[cut])

    def events(self) -> list[Event]:
        """The rows as the :class:`Event` objects the per-event parser gives for them."""
        n = len(self.rows)
        models = [k[0] for k in self.keys]
        segments = [k[1] for k in self.keys]
        idx = self.key_index.tolist()
        model = [models[i] for i in idx]
        segment = [segments[i] for i in idx]
        weight: Any = repeat(1.0, n) if self.weight is None else self.weight.tolist()
        ident: Any = repeat(None, n) if self.id is None else self.id.tolist()
        ts = self.ts.tolist()
        if self.task == "binary":
            return list(map(Event, ts, model, segment, self.y_true.tolist(), self.score.tolist(), repeat(None, n),
                            repeat(None, n), weight, ident))
        if self.task in ("regression", "labels"):
            return list(map(Event, ts, model, segment, self.y_true.tolist(), repeat(None, n), repeat(None, n),
                            self.y_pred.tolist(), weight, ident))
        classes = self.classes
        assert classes is not None
        return list(map(Event, ts, model, segment, [classes[i] for i in self.y_true.tolist()], repeat(None, n),
                        self.scores, repeat(None, n), weight, ident))

    def binary_items(self) -> np.ndarray:
        """Binary rows in the small form's input of a ``BinaryMonitor``
        (:meth:`~streammetrics.monitors.binary.BinaryMonitor.update_items`): the common event
        (weight 1, a score strictly inside (0, 1)) as its signed score, ``score`` if ``y_true``
        else ``-score``; any other as its :class:`Event`. float64 when every row is common, else
        an object array."""
        s = self.score
        signed = np.where(self.y_true == 1, s, -s)
        common = (s > 0.0) & (s < 1.0)
        if self.weight is not None:
            common &= self.weight == 1.0
        if common.all():
            return signed
        items = signed.tolist()
        events = self.events()
        for j in np.flatnonzero(~common).tolist():
            items[j] = events[j]
        return object_column(items)


def _integral(labels: list[Any]) -> list[Any]:
    return [int(v) if v.__class__ is float and v.is_integer() else v for v in labels]


def object_column(values: Sequence[Any]) -> np.ndarray:
    """``values`` as a 1-d object array, each value one element (a tuple too; ``np.fromiter``:
    several times faster than assigning a list to a slice, which checks every value for the
    sequence protocol)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _key_ok(model: Any, segment: Any) -> bool:
    """The field rules of ``model`` and ``segment`` (both strings here: typed decoding)."""
    for text, optional in ((model, False), (segment, True)):
        if not (0 if optional else 1) <= len(text) <= MAX_NAME_LENGTH or "|" in text:
            return False
        if not utf8_encodable(text):
            return False
    return True


def _raws0(structs: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.model, s.segment) for s in structs]


def _raws1(structs: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.model, s.segment, s.slice0) for s in structs]


def _raws2(structs: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.model, s.segment, s.slice0, s.slice1) for s in structs]


def _raws3(structs: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.model, s.segment, s.slice0, s.slice1, s.slice2) for s in structs]


#: each decoded event's raw key (model, segment[, slice values]), by the number of slice fields
#: (written out: a third cheaper than ``attrgetter`` of several names)
_RAWS = (_raws0, _raws1, _raws2, _raws3)


class ColumnDecoder:
    """Decode batches of JSONL lines into :class:`EventColumns` for one :class:`EventParser`'s
    task, field names and classes (see the module docstring); build with :func:`column_decoder`.

    ``slices = (fields, slice_keys)``: the events are keyed by slice (``--slice-by``): the string
    (or null, absent) values of ``fields`` decoded beside the event's, and each distinct
    ``(segment, values)`` made the key's segment once, by ``slice_keys(segments, values)`` of a
    batch's new ones (None: the rows go to the per-event path, which refuses them with its
    reason; a value of another type makes its line odd too).

    ``awaiting`` (binary only): decode predictions awaiting a delayed label instead (contract
    section 5): a row with a ``y_true`` (not null) or without an ``id`` is odd; ``y_true`` is
    checked as 0 (as :class:`~streammetrics.stream.label_events.DelayedEventParser` does) and
    its column is zeros."""

    def __init__(self, parser: EventParser,
                 slices: tuple[Sequence[str], SliceKeys] | None = None, awaiting: bool = False) -> None:
        if msgspec is None:  # pragma: no cover - exercised where msgspec is absent
            raise ValueError("columnar decoding needs msgspec (the 'fast' extra)")
        task = parser.task
        if task not in ("binary", "regression", "multiclass", "labels") or not parser.require_key:
            raise ValueError(f"no columnar decoding for the {task!r} task")
        if awaiting and task != "binary":
            raise ValueError(f"no columnar decoding of awaiting predictions for the {task!r} task")
        self.task = task
        self.awaiting = awaiting
        f = parser.fields
        common: list[tuple[Any, ...]] = [("ts", float), ("model", str)]
        optional: list[tuple[Any, ...]] = [("segment", Optional[str], None), ("weight", Optional[float], None),
                                           ("id", Optional[Union[str, int]], None)]
        if task == "binary":
            own: list[tuple[Any, ...]] = [("y_true", Union[bool, int, float]), ("score", float)]
            if awaiting:
                own = [("score", float), ("y_true", Optional[Union[bool, int, float]], None)]
        elif task == "regression":
            own = [("y_true", float), ("y_pred", float)]
        elif task == "labels":
            own = [("y_true", Union[str, int, float, bool]), ("y_pred", Union[str, int, float, bool])]
        else:
            own = [("y_true", Union[str, int, float, bool]), ("scores", list[float])]
        spec = common + own + optional
        self.names = [s[0] for s in spec]
        rename = {s[0]: f[s[0]] for s in spec}
        self._slice_keys = None
        self._pair = attrgetter("model", "segment")
        names: list[str] = []
        if slices is not None:
            fields, self._slice_keys = slices
            names = [f"slice{i}" for i in range(len(fields))]  # (as _RAWS reads them)
            spec += [(name, Optional[str], None) for name in names]
            rename.update(zip(names, fields))
            if len(set(rename.values())) != len(rename):
                raise ValueError("a slice field is also an event field")
            self._pair = attrgetter("model", "segment", *names)
        self._raws = _RAWS[len(names)] if len(names) < len(_RAWS) else lambda structs: list(map(self._pair, structs))
        struct = msgspec.defstruct("ColumnEvent", spec, rename=rename, gc=False)
        self._spec, self._rename = spec, rename
        self._struct = struct
        #: decodes any line: the key fields as any string
        self._generic = msgspec.json.Decoder(struct).decode
        #: decodes the lines whose key fields hold known values (:meth:`_learn`); the generic one
        #: until the first batch is seen
        self._decode = self._generic
        #: the key fields' values known (at most LITERAL_VALUES each; None: more, any string)
        self._known: dict[str, dict[str, None] | None] = {name: {} for name in ("model", "segment", *names)}
        self._stale = False  # values known that self._decode does not know
        self._redone = 0  # lines decoded line by line for a value not known since self._decode was built
        #: decoders built (the first, then one per RELEARN_LINES lines so decoded per known value)
        self.builds = 0
        self.classes = parser.classes
        #: the valid keys met, numbered in order (at most KEYS_CHECKED: beyond, a new key is numbered
        #: for its batch only), and each one's number
        self._keys: list[tuple[str, str]] = []
        self._key_number: dict[tuple[str, str], int] = {}
        #: raw keys (model, segment or None[, the slice fields' values]) met, by their key's number
        #: (at most KEYS_CHECKED; a refused one is checked again in each batch)
        self._raw_number: dict[tuple[Any, ...], int] = {}
        #: with slices: each raw (model, segment) met, and its key, None when refused (at most KEYS_CHECKED)
        self._bases: dict[tuple[Any, Any], tuple[str, str] | None] = {}
        # multiclass: the class of a str or int y_true (a float equal to an int class finds it, as
        # the field rules do; a bool goes through the per-event path: True == 1)
        self._class_of: dict[Any, int] = {}
        # labels: the known labels of each kind (None: any label)
        self._allowed: dict[str, set[Any]] | None = None
        if task == "labels" and parser.classes is not None:
            self._allowed = {kind: {c for c in parser.classes if c.__class__ in types}
                             for kind, types in _KINDS.items()}
        if parser.classes is not None and task == "multiclass":
            for i, c in enumerate(parser.classes):
                if c.__class__ in (str, int):
                    self._class_of[c] = i

    def decode(self, lines: Sequence[Any]) -> tuple[EventColumns | None, list[int]]:
        """``(columns, odd)``: the valid events of ``lines`` as columns (None when there is none)
        and the indices of the lines left to the per-event path, ascending."""
        n = len(lines)
        decode = self._decode
        odd: list[int] = []
        rows: Any = None
        # bytes, short (the per-event path checks the nesting of longer ones) and ASCII (msgspec
        # skips unknown fields without checking their UTF-8, which the per-event path refuses)
        try:
            plain = n > 0 and b"".join(lines).isascii() and max(map(len, lines)) <= MAX_NESTING
        except TypeError:  # not all bytes-like (a tombstone, say)
            plain = False
        if plain:
            try:
                structs = list(map(decode, lines))
            except Exception:  # noqa: BLE001 - some line is odd: line by line below
                structs = None
        else:
            structs = None
        redone: list[Any] = []  # decoded by the generic decoder after the other refused them
        if structs is None:
            structs = []
            keep = []
            generic = self._generic
            for i, line in enumerate(lines):
                if line.__class__ is not bytes or len(line) > MAX_NESTING or not (line.isascii() or _utf8(line)):
                    odd.append(i)
                    continue
                try:
                    structs.append(decode(line))
                except Exception:  # noqa: BLE001 - a key value not known yet, or odd
                    if decode is generic:
                        odd.append(i)
                        continue
                    try:
                        got = generic(line)
                    except Exception:  # noqa: BLE001 - the per-event path says why
                        odd.append(i)
                        continue
                    structs.append(got)
                    redone.append(got)
                keep.append(i)
            rows = np.array(keep, dtype=np.intp)
        else:
            rows = np.arange(n, dtype=np.intp)
        if redone or (decode is self._generic and structs):
            self._learn(redone or structs, n if redone else 0)
        return self._finish(structs, rows, odd)

    def _learn(self, structs: list[Any], redone: int) -> None:
        """Note the key values of ``structs`` (the first batch's, then those of lines decoded
        again, in a batch of ``redone`` lines decoded line by line), and build a decoder of the
        values known when it pays: the first time, when a field outgrew LITERAL_VALUES, or once
        RELEARN_LINES lines per known value were decoded line by line since the last build."""
        opened = False
        for name, known in self._known.items():
            if known is None:
                continue
            values = set(map(attrgetter(name), structs))
            values.discard(None)
            new = values.difference(known)
            if not new:
                continue
            if len(known) + len(new) > LITERAL_VALUES:
                self._known[name] = None
                opened = True
            else:
                known.update(dict.fromkeys(sorted(new)))
                self._stale = True
        self._redone += redone
        size = sum(len(known) for known in self._known.values() if known)
        if opened or (self._stale and (self.builds == 0 or self._redone >= RELEARN_LINES * size)):
            self._build()

    def _build(self) -> None:
        """The decoder of :attr:`_known`: each key field with known values a ``Literal`` of them."""
        spec = []
        for item in self._spec:
            known = self._known.get(item[0])
            if known:
                values = _LITERAL[tuple(known)]
                item = (item[0], values, *item[2:]) if item[0] == "model" else (item[0], Optional[values], None)
            spec.append(item)
        struct = msgspec.defstruct("ColumnEvent", spec, rename=self._rename, gc=False)
        self._decode = msgspec.json.Decoder(struct).decode
        self._stale = False
        self._redone = 0
        self.builds += 1

    def convert(self, values: Sequence[Any]) -> tuple[EventColumns | None, list[int]]:
        """:meth:`decode` of decoded values instead of lines: the dicts the per-event path's
        ``process_decoded`` takes (CSV and Parquet rows, JSONL values rescaled by ``--ts-unit``),
        through ``msgspec.convert`` (the same type checks, non-finite numbers left to the per-event
        path). Anything but a dict (None, a Rejection, an array) is odd."""
        struct = self._struct
        convert = msgspec.convert
        odd: list[int] = []
        try:
            structs = [convert(v, struct) for v in values]
            rows = np.arange(len(values), dtype=np.intp)
        except Exception:  # noqa: BLE001 - some value is odd: one by one below
            structs, keep = [], []
            for i, value in enumerate(values):
                try:
                    if value.__class__ is not dict:
                        raise TypeError  # noqa: TRY301 - (odd, as a failed conversion)
                    structs.append(convert(value, struct))
                except Exception:  # noqa: BLE001 - the per-event path says why
                    odd.append(i)
                    continue
                keep.append(i)
            rows = np.array(keep, dtype=np.intp)
        return self._finish(structs, rows, odd)

    def _finish(self, structs: list[Any], rows: np.ndarray, odd: list[int]) -> tuple[EventColumns | None, list[int]]:
        if not structs:
            return None, odd
        cols = self._columns(structs, rows)
        if cols is None:
            return None, sorted(odd + rows.tolist())
        good, more_odd = cols
        if more_odd:
            odd = sorted(odd + more_odd)
        return good, odd

    def _keys_of(self, structs: list[Any], m: int) -> tuple[np.ndarray, list[Any], np.ndarray | None]:
        """``(key_index, keys, refused)``: each row's index in ``keys``, the batch's distinct
        keys in order of their first row, and the rows whose key the field rules refuse (None:
        none; their key is ``_REFUSED``, which no row keeps). A raw key met before is numbered
        by one dict lookup per row (its key's number in :attr:`_keys`); the new ones are checked
        once each (:meth:`_new_keys`); the numbers are made dense by one ``np.unique``."""
        number = np.fromiter(map(self._raw_number.get, self._raws(structs), repeat(-1)), dtype=np.intp, count=m)
        extra: list[Any] = []
        if number.min() < 0:
            extra = self._new_keys(structs, number)
        if number[0] == number[-1] and (number == number[0]).all():  # (one key)
            used = number[:1].tolist()
            key_index = np.zeros(m, dtype=np.intp)
        else:  # numbered in order of their first row
            distinct, inverse = np.unique(number, return_inverse=True)
            first = np.full(len(distinct), m, dtype=np.intp)
            np.minimum.at(first, inverse, np.arange(m, dtype=np.intp))
            order = np.argsort(first)
            rank = np.empty(len(order), dtype=np.intp)
            rank[order] = np.arange(len(order), dtype=np.intp)
            key_index = rank[inverse]
            used = distinct[order].tolist()
        known = self._keys
        if not extra and min(used) >= 0:
            return key_index, [known[i] for i in used], None
        keys = [known[i] if 0 <= i < KEYS_CHECKED else _REFUSED if i < 0 else extra[i - KEYS_CHECKED] for i in used]
        return key_index, keys, key_index == used.index(-1) if -1 in used else None

    def _new_keys(self, structs: list[Any], number: np.ndarray) -> list[Any]:
        """Number in place the rows whose raw key is not in :attr:`_raw_number` (``number`` -1):
        each distinct one checked once (the field rules of ``model`` and ``segment``, then the
        slice's key), -1 where refused; a key beyond KEYS_CHECKED numbered ``KEYS_CHECKED + i``
        for this batch only, ``i`` its index in the list returned."""
        miss = np.flatnonzero(number < 0)
        raws = self._raws([structs[j] for j in miss.tolist()])
        met = dict.fromkeys(raws, -1)
        new = list(met)
        known, key_number, raw_number = self._keys, self._key_number, self._raw_number
        extra: list[Any] = []
        extra_number: dict[Any, int] = {}
        for raw, key in zip(new, self._keys_made(new)):
            if key is None:
                continue
            got = key_number.get(key)
            if got is None:
                if len(known) < KEYS_CHECKED:
                    got = key_number[key] = len(known)
                    known.append(key)
                else:
                    got = extra_number.get(key)
                    if got is None:
                        got = extra_number[key] = KEYS_CHECKED + len(extra)
                        extra.append(key)
            if got < KEYS_CHECKED and len(raw_number) < KEYS_CHECKED:
                raw_number[raw] = got
            met[raw] = got
        number[miss] = np.fromiter(map(met.__getitem__, raws), dtype=np.intp, count=len(raws))
        return extra

    def _keys_made(self, raws: list[tuple[Any, ...]]) -> list[tuple[str, str] | None]:
        """The key of each raw key, None where refused: ``(model, segment)`` by the field rules
        (checked once per distinct pair with slices), then with slices ``(model, slice key)``
        (``slice_keys`` of them all at once)."""
        if self._slice_keys is None:
            return [(raw[0], "" if raw[1] is None else raw[1]) if _key_ok(raw[0], "" if raw[1] is None else raw[1])
                    else None for raw in raws]
        bases = self._bases
        found = [bases.get(raw[:2], _UNSEEN) for raw in raws]
        for i, base in enumerate(found):
            if base is _UNSEEN:
                raw = raws[i]
                base = (raw[0], "" if raw[1] is None else raw[1])
                if not _key_ok(base[0], base[1]):
                    base = None
                if len(bases) < KEYS_CHECKED:
                    bases[raw[:2]] = base
                found[i] = base
        if None in found:
            raws = [raw for raw, base in zip(raws, found) if base is not None]
        sliced = iter(self._slice_keys([base[1] for base in found if base is not None], [raw[2:] for raw in raws]))
        out: list[tuple[str, str] | None] = []
        for base in found:
            key = None if base is None else next(sliced)
            out.append(None if key is None else (base[0], key))
        return out

    def _columns(self, structs: list[Any], rows: np.ndarray) -> tuple[EventColumns | None, list[int]] | None:
        m = len(structs)
        ts = np.fromiter(map(attrgetter("ts"), structs), dtype=np.float64, count=m)
        ok = (ts >= TS_MIN) & (ts < TS_MAX)
        weights = list(map(attrgetter("weight"), structs))
        weight: np.ndarray | None = None
        if weights.count(None) != m:
            weight = np.array([1.0 if w is None else w for w in weights], dtype=np.float64)
            ok &= (weight >= 0.0) & (weight <= MAX_WEIGHT)
        ids = list(map(attrgetter("id"), structs))
        ident: np.ndarray | None = None
        if ids.count(None) != m:  # an integer id is kept as its decimal string; a long one per event
            ident = np.empty(m, dtype=object)
            for j, v in enumerate(ids):
                if v.__class__ is int:
                    if v.bit_length() > 64:
                        ok[j] = False
                    v = str(v)
                elif v is not None and (len(v) > MAX_NAME_LENGTH or not (v.isascii() or utf8_encodable(v))):
                    ok[j] = False
                ident[j] = v
        key_index, keys, refused = self._keys_of(structs, m)
        if refused is not None:
            ok &= ~refused
        get = {name: map(attrgetter(name), structs) for name in self.names if name not in _SHARED}
        score = scores = y_pred = None
        task = self.task
        try:
            if task == "binary" and self.awaiting:  # (y_true absent or null, an id given)
                ok &= np.fromiter((v is None for v in get["y_true"]), dtype=bool, count=m)
                if ident is None:
                    return None, rows.tolist()
                ok &= ident != None  # noqa: E711 - elementwise
                score = np.fromiter(get["score"], dtype=np.float64, count=m)
                ok &= np.abs(score) < _EXACT
                y_true: Any = np.zeros(m, dtype=np.int64)
            elif task == "binary":
                y = np.fromiter(get["y_true"], dtype=np.float64, count=m)
                ok &= (y == 0.0) | (y == 1.0)
                score = np.fromiter(get["score"], dtype=np.float64, count=m)
                ok &= np.abs(score) < _EXACT
                y_true = (y == 1.0).astype(np.int64)
            elif task == "regression":
                y_true = np.fromiter(get["y_true"], dtype=np.float64, count=m)
                y_pred = np.fromiter(get["y_pred"], dtype=np.float64, count=m)
                ok &= (np.abs(y_true) < _EXACT) & (np.abs(y_pred) < _EXACT)
            elif task == "labels":
                truth, pred = list(get["y_true"]), list(get["y_pred"])
                types = set(map(type, truth)) | set(map(type, pred))
                kind = next((k for k, ts_ in _KINDS.items() if types <= set(ts_)), None)
                if kind is None:  # labels of several kinds: the commonest kind's rows, the others per event
                    row_kinds = [(_KIND_OF.get(a.__class__), _KIND_OF.get(b.__class__)) for a, b in zip(truth, pred)]
                    common = Counter(a for a, b in row_kinds if a == b and a is not None).most_common(1)
                    if not common:
                        return None
                    kind = common[0][0]
                    for j, (a, b) in enumerate(row_kinds):
                        if a != kind or b != kind:
                            ok[j] = False
                if float in types:  # an integral float is an int label, as the field rules make it
                    for j, (a, b) in enumerate(zip(truth, pred)):
                        if not (a.__class__ is not float or -_INF < a < _INF) or not (
                                b.__class__ is not float or -_INF < b < _INF):
                            ok[j] = False  # (nan, inf: a converted value, not JSON's)
                            truth[j] = pred[j] = 0
                    truth, pred = _integral(truth), _integral(pred)
                if not ok.all():  # (the rows left out hold labels of any kind: not looked up)
                    placeholder = next(iter(self._allowed[kind]), None) if self._allowed else None
                    for j in np.flatnonzero(~ok).tolist():
                        truth[j] = pred[j] = placeholder
                if self._allowed is not None:
                    known = self._allowed[kind].__contains__
                    ok &= np.fromiter(map(known, truth), dtype=bool, count=m)
                    ok &= np.fromiter(map(known, pred), dtype=bool, count=m)
                y_true, y_pred = object_column(truth), object_column(pred)
            else:
                truth = list(get["y_true"])
                kinds = set(map(type, truth))
                if not kinds <= {str, int, float}:
                    for j, t in enumerate(truth):
                        if t.__class__ not in (str, int, float):
                            ok[j] = False
                            truth[j] = None
                cls = np.fromiter((-1 if i is None else i for i in map(self._class_of.get, truth)),
                                  dtype=np.intp, count=m)
                ok &= cls >= 0
                y_true = cls
                k = len(self.classes or ())
                raw_scores = list(get["scores"])
                lengths = np.fromiter(map(len, raw_scores), dtype=np.intp, count=m)
                ok &= lengths == k
                flat = np.fromiter(chain.from_iterable(raw_scores), dtype=np.float64)
                if len(flat) and not bool((np.abs(flat) < _EXACT).all()):  # (nan fails too)
                    for j, row_scores in enumerate(raw_scores):
                        if not all(abs(v) < _EXACT for v in row_scores):
                            ok[j] = False
                scores = list(map(tuple, raw_scores))
        except (OverflowError, TypeError, ValueError):  # e.g. a 400-digit integer: the per-event path
            return None
        if ok.all():
            return EventColumns(task, rows, ts, keys, key_index, weight, y_true, score,
                                scores, y_pred, self.classes, ident), []
        bad = np.flatnonzero(~ok)
        keep = np.flatnonzero(ok)
        odd = rows[bad].tolist()
        if not len(keep):
            return None, odd
        return EventColumns(task, rows[keep], ts[keep], keys, key_index[keep],
                            None if weight is None else weight[keep], y_true[keep],
                            None if score is None else score[keep],
                            None if scores is None else [scores[j] for j in keep.tolist()],
                            None if y_pred is None else y_pred[keep], self.classes,
                            None if ident is None else ident[keep]), odd


def column_decoder(parser: EventParser, slices: tuple[Sequence[str], SliceKeys] | None = None,
                   awaiting: bool = False) -> ColumnDecoder | None:
    """A :class:`ColumnDecoder` for ``parser``'s task and fields (``slices``, ``awaiting``: see
    the class), None where there is none (msgspec not installed, a parser without required keys)."""
    if msgspec is None or getattr(parser, "fast_decode", None) is None:
        return None
    try:
        return ColumnDecoder(parser, slices, awaiting)
    except ValueError:
        return None
