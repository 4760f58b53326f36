"""Snapshots: the JSON record a closed window publishes (contract section 3).

``snapshot_line`` is the one canonical encoding (compact, keys in schema order, no NaN) that
``replay`` prints and the service publishes; ``snapshot_key`` is its Kafka message key
``model|segment|window_start``, the same for every re-emission of a window.

Fields: ``count`` is the window's events; ``late`` is the running total of late events dropped
for the snapshot's key so far (contract section 3), not a count per window: a late event
belongs to a window that has already been emitted. Snapshots degraded to fit
``max_snapshot_bytes`` carry ``"state_dropped": true`` (or ``"state_coarsened": true``) and,
past that, ``"metrics_truncated": true``; all-time snapshots carry ``"cumulative": true``.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from functools import partial
from json.encoder import encode_basestring_ascii
from operator import is_not
from typing import Any, Callable, Sequence

from streammetrics.kernels.intervals import intervals_text

__all__ = ["CONTENT_HEADER", "SNAPSHOT_SCHEMA", "content_header", "intervals_text", "snapshot_key", "snapshot_line",
           "window_line", "window_lines"]

SNAPSHOT_SCHEMA = "streammetrics.snapshot/1"

#: the canonical encoder (made once: ``json.dumps`` with options builds one per call)
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
try:  # the ``fast`` extra: ~8x faster on a binary snapshot
    from msgspec.json import Encoder as _MsgspecEncoder

    _fast_encode: Callable[[Any], bytes] | None = _MsgspecEncoder().encode
except ImportError:  # pragma: no cover - exercised where msgspec is absent
    _fast_encode = None
#: where msgspec's output may differ from json's: floats in exponent form (``1e16`` /
#: ``1e+16``), below 1e-4 (``0.00001`` / ``1e-05``), escapes, DEL (json escapes it). Found
#: in the output as ``0.0000``, and with digits mapped to 0 and backslash / DEL to ``~``, as
#: ``0e`` and ``~``. Escapes and DEL: json encodes; floats: rewritten (:func:`_json_floats`)
_MARK = bytes.maketrans(b"123456789\\\x7f", b"000000000~~")
#: the test that some float may need rewriting, on msgspec's bytes: every exponent form holds
#: ``e`` then a digit or ``-`` (``1e16``, ``1.5e-7``), every small decimal ``.0000``. (Regular
#: expressions starting with a rare byte: ``b"0e" in marked`` scans a line of digits ~2x slower)
_EXPONENT_FORM, _SMALL_DECIMAL = re.compile(rb"e[0-9-]").search, re.compile(rb"\.0000").search
#: the bytes of a JSON number (msgspec writes no ``+`` or ``E``), and those around a value
_NUMBER = frozenset(b"0123456789.-e")
_BEFORE, _AFTER = frozenset(b":,["), frozenset(b",]}")
_INF = math.inf


def snapshot_line(snapshot: dict[str, Any]) -> str:
    """A snapshot as one canonical JSON line: compact, keys in schema order, no NaN.

    The line is ``json.dumps(snapshot, separators=(",", ":"), allow_nan=False)``. With msgspec
    installed it is encoded by msgspec and kept when it cannot differ from that (pure ASCII,
    no escape: both print floats as ``repr`` does from 1e-4 to 1e16), with the float values
    outside that range rewritten as ``repr`` writes them (:func:`_json_floats`: a score of
    1e-05 is common), else encoded by json: byte-identical either way. json refuses NaN and
    infinities where msgspec writes null: the metrics are checked here (a non-finite one goes
    to json, which raises); states are finite by construction (``to_dict`` writes numbers that
    ``from_dict`` accepts)."""
    fast = _fast_encode
    if fast is not None and _finite(snapshot.get("metrics")):
        try:
            raw = fast(snapshot)
        except (TypeError, ValueError, OverflowError):  # json decides, with its own error
            raw = None
        # (no escape, no DEL and no ``~``: what the marked bytes hold no ``~`` for, found without them)
        if raw is not None and raw.isascii() and b"\\" not in raw and b"\x7f" not in raw and b"~" not in raw:
            if _EXPONENT_FORM(raw) or _SMALL_DECIMAL(raw):
                raw = _json_floats(raw, raw.translate(_MARK))
            if raw is not None:
                return raw.decode("ascii")
    return _JSON.encode(snapshot)


def _json_floats(raw: bytes, marked: bytes) -> bytes | None:
    """msgspec's ``raw`` (ASCII, no escape; ``marked``: its digits mapped to 0) with each float
    value that msgspec writes otherwise than json (``0.00001``, ``1e-7``, ``1e16``) rewritten as
    json writes it (``repr``: ``1e-05``, ``1e-07``, ``1e+16``; msgspec's digits are the
    shortest that round-trip, so ``float`` of them is the same float). Each such value holds
    one mark (``0.0000``, or a digit before ``e``), found by ``bytes.find``. A mark inside a
    string (an odd number of quotes before it: ``raw`` has no escape, so every quote opens or
    closes one) is left as it is (a state's base64 text holds many), unless the string is all
    number bytes (a float dict key: msgspec writes ``"0.00001"``, json ``"1e-05"``). None (json
    decides) for that key, or a mark anything else than a float value outside strings (a name
    like ``v2e`` there cannot be: names are quoted). (An ordinary float holding a mark, such as
    ``10.00001``, is rewritten as itself.)"""
    marks = _finds(raw, b"0.0000") + _finds(marked, b"0e")
    marks.sort()
    parts = []
    last = quotes = counted = 0
    checked = -1  # the closing quote of the last string looked at (its other marks: no second look)
    size = len(raw)
    for mark in marks:
        quotes += raw.count(b'"', counted, mark)
        counted = mark
        if quotes & 1:  # inside a string: kept, unless it may be a float key
            if mark < checked:
                continue
            opened, checked = raw.rfind(b'"', 0, mark), raw.find(b'"', mark)
            if not raw[opened + 1:checked].strip(b"0123456789.-e+"):
                return None
            continue
        start = end = mark
        while start and raw[start - 1] in _NUMBER:
            start -= 1
        while end < size and raw[end] in _NUMBER:
            end += 1
        token = raw[start:end]
        if start < last or not start or raw[start - 1] not in _BEFORE or end == size or raw[end] not in _AFTER:
            return None  # (outside strings, a value of these bytes is a JSON number: a float here)
        parts.append(raw[last:start])
        parts.append(repr(float(token)).encode("ascii"))
        last = end
    parts.append(raw[last:])
    return b"".join(parts)


def _finds(data: bytes, mark: bytes) -> list[int]:
    """Every position of ``mark`` in ``data`` (non-overlapping, left to right)."""
    out = []
    i = data.find(mark)
    while i != -1:
        out.append(i)
        i = data.find(mark, i + len(mark))
    return out


_fsum = math.fsum
_not_none = partial(is_not, None)


def _finite(value: Any, depth: int = 0) -> bool:
    """No NaN or infinity in the metrics (containers nested up to 4 levels, e.g.
    ``per_class``; deeper ones: False, json decides). A flat dict of numbers and None (a
    binary window's metrics) is decided by one C-level ``math.fsum`` of its numbers: NaN or
    an infinity makes the sum NaN or infinite (or raises, as overflow and anything but a
    number do: then the values are looked at one by one)."""
    cls = value.__class__
    if cls is dict and not depth:
        try:
            if -_INF < _fsum(filter(_not_none, value.values())) < _INF:
                return True
        except (TypeError, ValueError, OverflowError):
            pass
    if cls is dict or cls is list:
        if depth >= 4:
            return False
        for x in (value.values() if cls is dict else value):
            c = x.__class__
            if c is float:
                if not -_INF < x < _INF:
                    return False
            elif c is not int and c is not str and x is not None and not _finite(x, depth + 1):
                return False
        return True
    if isinstance(value, float):  # numpy's float64 too
        return -_INF < value < _INF
    return not isinstance(value, (tuple, set, frozenset))  # other containers: json decides


def snapshot_key(snapshot: dict[str, Any]) -> bytes:
    """Kafka key of a snapshot: ``model|segment|window_start`` (``|cumulative`` for all-time ones)."""
    k = snapshot["key"]
    tail = "cumulative" if snapshot.get("cumulative") else json.dumps(snapshot["window"]["start"])
    return f"{k['model']}|{k['segment']}|{tail}".encode()


#: :func:`window_line`'s format: a final window's snapshot (revision 0, nothing awaiting labels)
_WINDOW_LINE = ('{"schema":"' + SNAPSHOT_SCHEMA + '","key":{"model":%s,"segment":%s},"window":{"start":%s,"end":%s},'
                '"final":true,"count":%d,"late":%d,"revision":0,"labeled":%d,"expired":0,"pending":0,'
                '"metrics":%s%s,"state":%s}')


def window_line(key: tuple[str, str], start_ms: int, end_ms: int, count: int, late: int, metrics: str,
                state: str, intervals: str = "") -> str:
    """:func:`snapshot_line` of ``build_snapshot(key, ..., start_ms, end_ms, final=True,
    late=late, count=count, record=(m, s, i))`` given the JSON texts of ``m`` and ``s`` (compact,
    as ``snapshot_line`` writes them) and ``intervals``, the text of the record ``i``'s two
    fields (``,"intervals":{...},"insufficient":[...]``, or empty): the line written directly, for
    windows whose texts come from a vectorised pass (``BinaryMonitor.snapshot_texts``).

    >>> snap = build_snapshot(("m", ""), None, 0, 60_000, final=True, count=1, record=({"n": 1}, {"s": 0.5}))
    >>> window_line(("m", ""), 0, 60_000, 1, 0, '{"n":1}', '{"s":0.5}') == snapshot_line(snap)
    True
    """
    encode = _JSON.encode  # (a str straight through json's encode_basestring_ascii)
    return _WINDOW_LINE % (encode(key[0]), encode(key[1]), repr(_seconds(start_ms)), repr(_seconds(end_ms)),
                           count, late, count, metrics, intervals, state)


def window_lines(keys: Sequence[tuple[str, str]], starts_ms: Sequence[int], ends_ms: Sequence[int],
                 counts: Sequence[int], lates: Sequence[int], texts: Sequence[tuple[str, str, str]]) -> list[str]:
    """:func:`window_line` of each window given as columns: its key, start, end, count, late and
    ``(metrics, state, intervals)`` texts; every line one ``%`` of the format over columns made
    by C-level maps (the keys' strings encoded by json's own function, each distinct time's text
    made once: a close's windows share few)."""
    if not keys:
        return []
    models, segments = zip(*keys)
    try:  # (strings: what _JSON.encode does with one)
        model_texts = list(map(encode_basestring_ascii, models))
    except TypeError:  # a key part that is not a string (the library API allows one): json's text of it
        model_texts = list(map(_JSON.encode, models))
    segment_texts = {g: _JSON.encode(g) for g in set(segments)}  # (a fleet's keys share few segments)
    times = {t: repr(_seconds(t)) for t in {*starts_ms, *ends_ms}}
    metrics, states, intervals = zip(*texts)
    return list(map(_WINDOW_LINE.__mod__, zip(model_texts, map(segment_texts.__getitem__, segments),
                                              map(times.__getitem__, starts_ms), map(times.__getitem__, ends_ms),
                                              counts, lates, counts, metrics, intervals, states)))


def _seconds(ms: int) -> int | float:
    """Epoch milliseconds as JSON seconds: an int when whole, else a float."""
    return ms // 1000 if ms % 1000 == 0 else ms / 1000.0


def build_snapshot(
    key: tuple[str, str], monitor: Any, start_ms: int, end_ms: int, *, final: bool, late: int = 0,
    revision: int = 0, pending: int = 0, expired: int = 0, cumulative: bool = False, include_state: bool = True,
    extra_metrics: Callable[[tuple[str, str], Any, dict[str, Any]], Any] | None = None,
    count: int | None = None, record: tuple[dict[str, Any], ...] | None = None,
) -> dict[str, Any]:
    """The snapshot of ``monitor`` for ``key`` and the window ``[start_ms, end_ms)`` (contract
    section 3; ``labeled = count - pending - expired``). The window engine and Spark both build
    their snapshots here, so the two give the same record for the same monitor.
    ``extra_metrics(key, monitor, metrics)`` may add metrics (e.g. ``--reference``'s). An all-time
    (``cumulative``) snapshot has no revision fields: awaiting counts are per window. A
    caller that computed ``(snapshot(), to_dict(), intervals())`` already (``Monitor.snapshot_many``)
    passes it as ``record`` with the window's ``count``
    (``monitor`` is then read by ``extra_metrics`` only: the window engine's windows closed many at a
    time)."""
    if record is None or count is None:
        count = monitor.count
    snap: dict[str, Any] = {
        "schema": SNAPSHOT_SCHEMA,
        "key": {"model": key[0], "segment": key[1]},
        "window": {"start": _seconds(start_ms), "end": _seconds(end_ms)},
        "final": final,
        "count": count,
        "late": late,
    }
    if not cumulative:  # (item by item: no keyword dict per snapshot)
        snap["revision"] = revision
        snap["labeled"] = count - pending - expired
        snap["expired"] = expired
        snap["pending"] = pending
    if record is not None:  # metrics, state and intervals computed already (the engine's snapshot_many)
        snap["metrics"] = metrics = record[0]
        intervals = record[2] if len(record) > 2 else None
        if extra_metrics is not None:  # (a record's metrics, then the hook's: as below)
            extra_metrics(key, monitor, metrics)
            intervals = _with_extra(intervals, key, monitor, extra_metrics)
        _add_intervals(snap, intervals)
        if cumulative:
            snap["cumulative"] = True
        if include_state:
            snap["state"] = record[1]
        return snap
    snap["metrics"] = monitor.snapshot()
    if extra_metrics is not None:
        extra_metrics(key, monitor, snap["metrics"])
    _add_intervals(snap, _with_extra(_intervals_of(monitor, snap["metrics"]), key, monitor, extra_metrics))
    if cumulative:
        snap["cumulative"] = True
    if include_state:
        snap["state"] = monitor.to_dict()
    return snap


def _add_intervals(snap: dict[str, Any], record: dict[str, Any] | None) -> None:
    """The window's ``intervals`` and ``insufficient`` (contract section 9; a monitor's
    ``intervals()``), after its metrics; nothing without labelled events."""
    if record is not None:
        snap["intervals"] = record["intervals"]
        snap["insufficient"] = record["insufficient"]


def _with_extra(record: dict[str, Any] | None, key: tuple[str, str], monitor: Any,
                extra_metrics: Any) -> dict[str, Any] | None:
    """``record`` with the intervals of the extra metrics appended (``extra_metrics.intervals(key,
    monitor, confidence)``: ``--reference``'s CBPE estimates), a record of them alone for a window
    without labelled events."""
    extra = getattr(extra_metrics, "intervals", None)
    if extra is None:
        return record
    confidence = record["intervals"]["confidence"] if record is not None else getattr(monitor, "confidence", 0.95)
    pairs = extra(key, monitor, confidence)
    if not pairs:
        return record
    if record is None:
        record = {"intervals": {"confidence": confidence}, "insufficient": []}
    for name, pair in pairs.items():
        record["intervals"][name] = None if pair is None else [pair[0], pair[1]]
        if pair is None:
            record["insufficient"].append(name)
    return record


def _intervals_of(monitor: Any, metrics: dict[str, Any]) -> dict[str, Any] | None:
    """``monitor.intervals(metrics=metrics)`` (``Monitor.intervals``), None for an object without it."""
    intervals = getattr(monitor, "intervals", None)
    return None if intervals is None else intervals(metrics=metrics)


#: Kafka header of a published snapshot: the SHA-256 of its value, so that a reader can tell a
#: re-publication of the same (key, revision) with other content (docs/revisions.md)
CONTENT_HEADER = "streammetrics.content"


def content_header(value: bytes) -> tuple[str, bytes]:
    """``(CONTENT_HEADER, hex SHA-256 of value)``: the header the service sends with a snapshot."""
    return CONTENT_HEADER, hashlib.sha256(value).hexdigest().encode()
