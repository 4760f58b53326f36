"""Inputs other than JSON Lines: CSV and Parquet files, pandas DataFrames, ``ts`` in any unit.

Contract section 12. Every row becomes the value a JSONL line of the same event decodes to (a
dict of field -> value), which then goes through the event parser and windows that JSONL lines
go through (:meth:`~streammetrics.stream.pipeline.Pipeline.process_decoded`): one set of field
rules, so the same events give the same snapshots whatever the format.

Missing values (an empty CSV cell, a null, pandas' ``None``/``NaN``/``NaT``/``pd.NA``) are absent
fields; numeric ``ts`` is divided exactly by its unit (``ts_unit``), timestamp columns read in
their own unit; CSV cells are typed by the task before parsing (:class:`CsvTyper`), and a cell
not of its field's type stays text for the parser to reject naming the field. :func:`sniff`
says in one line when a file looks like another format. The rules in full: ``docs/inputs.md``.
"""
from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import IO, Any

from streammetrics.events.decoding import decode_value
from streammetrics.events.fields import object_key
from streammetrics.events.records import Rejection

__all__ = ["FORMATS", "TS_UNITS", "CsvTyper", "InputError", "csv_rows", "extension_format", "format_of", "frame_rows",
           "jsonl_values", "parquet_rows", "rescale_ts", "sniff", "ts_scale"]

#: the input formats ``replay --format`` takes
FORMATS = ("jsonl", "csv", "parquet")
#: units of numeric ``ts`` (``--ts-unit``): the number of them in a second
TS_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
#: file name endings of each format (a trailing ``.gz`` etc. is not read: decompress first)
_EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet",
               ".pq": "parquet", ".parq": "parquet"}
_NAMES = {"jsonl": "JSON Lines", "csv": "CSV", "parquet": "Parquet"}
#: rows per Arrow record batch read from a Parquet file
PARQUET_BATCH = 65_536
_INT = re.compile(r"[+-]?[0-9]+\Z")
_TRUE = frozenset(["true", "1", "1.0"])
_FALSE = frozenset(["false", "0", "0.0"])


class InputError(ValueError):
    """An input that cannot be read as the format asked for (one line, naming the file)."""


def format_of(path: str | None, explicit: str | None = None) -> str:
    """The format of ``path``: ``explicit`` when given, else by its extension (JSONL otherwise)."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {explicit!r}")
        return explicit
    return extension_format(path) or "jsonl"


def extension_format(path: str | None) -> str | None:
    """The format the file name ``path`` ends in (``.csv``, ``.parquet``, ``.jsonl``...), or None."""
    return _EXTENSIONS.get(os.path.splitext(path or "")[1].lower())


def ts_scale(unit: str) -> int:
    """10**k for ``ts_unit`` (``s`` 1 ... ``ns`` 10**9); ValueError naming the option."""
    try:
        return TS_UNITS[unit]
    except (KeyError, TypeError):
        raise ValueError(f"ts_unit must be one of {', '.join(TS_UNITS)}, got {unit!r}") from None


def _looks_like(head: bytes) -> str | None:
    if head[:4] == b"PAR1":
        return "parquet"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return None
    if text[:1] in (b"{", b"["):
        return "jsonl"
    try:
        first = text.split(b"\n", 1)[0].decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    if "," in first or ";" in first or "\t" in first:
        return "csv"
    return None


def sniff(head: bytes, expected: str, name: str) -> str | None:
    """None when the first bytes ``head`` of file ``name`` may be ``expected``; else one line
    saying what it looks like and the ``--format`` to give."""
    seen = _looks_like(head)
    if seen is None or seen == expected:
        if expected == "parquet" and head[:4] != b"PAR1":
            return f"{name} is not a Parquet file (it does not start with PAR1); give --format jsonl or csv"
        return None
    if seen == "gzip":
        return f"{name} is gzip-compressed; decompress it first (zcat {name} | streammetrics replay - ...)"
    if seen == "binary":
        return (f"{name} is not UTF-8 text, so not {_NAMES[expected]}; a Parquet file starts with PAR1, "
                f"give --format jsonl, csv or parquet")
    if expected == "parquet" and seen in ("csv", "jsonl"):
        return f"{name} looks like {_NAMES[seen]}, not Parquet; give --format {seen}"
    rename = "" if name == "standard input" else f" (or name it .{seen})"
    return f"{name} looks like {_NAMES[seen]}, not {_NAMES[expected]}; give --format {seen}{rename}"


def _is_number(value: Any) -> bool:
    cls = value.__class__
    return cls is int or cls is float or (isinstance(value, (int, float)) and not isinstance(value, bool))


def rescale_ts(value: Any, ts_name: str, scale: int) -> Any:
    """``value`` (a decoded object, or an array of them) with a numeric ``ts_name`` divided by
    ``scale``; in place, returned. Other values (ISO strings, bad types) are left to the parser."""
    if scale == 1:
        return value
    items = value if value.__class__ is list else (value,)
    for obj in items:
        if obj.__class__ is dict:
            ts = obj.get(ts_name)
            if ts is not None and _is_number(ts):
                obj[ts_name] = _divide(ts, scale)
    return value


def _divide(ts: Any, scale: int) -> Any:
    if ts.__class__ is int or (isinstance(ts, int) and not isinstance(ts, bool)):
        return int(ts) / scale  # correctly rounded
    try:
        return float(ts) / scale
    except (OverflowError, ValueError):
        return ts  # the parser says why


def jsonl_values(lines: Iterator[bytes], ts_name: str, scale: int) -> Iterator[Any]:
    """Decoded JSONL lines with numeric ``ts`` rescaled (``--ts-unit`` other than ``s``); blank
    lines give None (skipped by the caller), undecodable ones a Rejection."""
    for line in lines:
        if not line.strip():
            yield None
            continue
        decoded = decode_value(line)
        yield decoded if decoded.__class__ is Rejection else rescale_ts(decoded, ts_name, scale)


# --------------------------------------------------------------------------- CSV
class CsvTyper:
    """Types the text cells of a CSV row for ``task`` (see the module docstring): ``typer(row)``
    returns the dict the parser reads. ``fields`` maps contract names to column names (as
    ``--field``); ``classes`` are the multiclass classes or the labels task's label set."""

    def __init__(self, task: str, fields: Mapping[str, str], classes: Sequence[Hashable] | None = None,
                 scale: int = 1) -> None:
        self.ts = fields.get("ts", "ts")
        self.scale = scale
        known: dict[str, Hashable] = {}
        for c in classes or ():
            known.setdefault(object_key(c), c)
            if c.__class__ is bool:
                known.setdefault(str(c), c)
        label = self._label(known)
        number = self._float
        self.typed: dict[str, Callable[[str], Any]] = {fields.get("weight", "weight"): number}
        if task == "binary":
            self.typed[fields.get("score", "score")] = number
            self.typed[fields.get("y_true", "y_true")] = self._binary
        elif task == "multiclass":
            self.typed[fields.get("scores", "scores")] = self._json
            self.typed[fields.get("y_true", "y_true")] = label
        elif task == "labels":
            self.typed[fields.get("y_true", "y_true")] = label
            self.typed[fields.get("y_pred", "y_pred")] = label
        else:
            self.typed[fields.get("y_true", "y_true")] = number
            self.typed[fields.get("y_pred", "y_pred")] = number

    @staticmethod
    def _float(text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            return text

    @staticmethod
    def _number(text: str) -> Any:
        return int(text) if _INT.match(text) else CsvTyper._float(text)

    @staticmethod
    def _binary(text: str) -> Any:
        low = text.strip().lower()
        if low in _TRUE:
            return 1
        if low in _FALSE:
            return 0
        return text

    @staticmethod
    def _json(text: str) -> Any:
        if text[:1] in ("[", "{"):
            decoded = decode_value(text)
            if decoded.__class__ is not Rejection:
                return decoded
        return text

    def _label(self, known: Mapping[str, Hashable]) -> Callable[[str], Any]:
        number = self._number

        def label(text: str) -> Any:
            if text in known:
                return known[text]
            value = number(text)
            return value if value.__class__ is int or (value.__class__ is float and math.isfinite(value)) else text

        return label

    def _ts(self, text: str) -> Any:
        value = self._number(text)
        if value.__class__ is str:
            return text  # an ISO-8601 string, or the parser's rejection
        return _divide(value, self.scale)

    def __call__(self, row: Mapping[Any, Any]) -> dict[str, Any] | Rejection:
        if None in row:  # csv.DictReader: more cells than the header has names
            return Rejection(f"row has {len(row) - 1 + len(row[None])} cells, the header names {len(row) - 1}",
                             code="bad_value")
        out: dict[str, Any] = {}
        typed = self.typed
        ts = self.ts
        for name, text in row.items():
            if text is None or text == "":  # an empty cell, or a short row
                continue
            if name == ts:
                out[name] = self._ts(text)
            else:
                conv = typed.get(name)
                out[name] = text if conv is None else conv(text)
        return out


def csv_rows(source: IO[bytes], typer: CsvTyper, name: str) -> Iterator[Any]:
    """The typed rows of a CSV file (UTF-8, a BOM skipped; the first line names the columns);
    InputError (naming the line) on text that is not UTF-8 or a header that is not CSV; a row
    that the csv module cannot read is a Rejection of that row only."""

    def text() -> Iterator[str]:
        for lineno, raw in enumerate(source, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{name} line {lineno}: not valid UTF-8 text (byte {exc.start + 1} of the "
                                 f"line); CSV must be UTF-8") from None
            yield line[1:] if lineno == 1 and line[:1] == "\ufeff" else line

    reader = csv.DictReader(text())
    try:
        header = reader.fieldnames or []
        if len(header) == 1 and ("\t" in header[0] or ";" in header[0]):
            raise InputError(f"{name} line 1: the header has no comma ({header[0][:60]!r}); CSV must be "
                             f"comma-separated")
    except csv.Error as exc:
        raise InputError(f"{name} line 1: the header is not readable as CSV ({exc})") from None
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a field over csv.field_size_limit(): this row only
            yield Rejection(f"row not readable as CSV ({exc})", code="bad_value")
            continue
        yield typer(row)


# --------------------------------------------------------------------------- Arrow (Parquet, DataFrames)
def _import_pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401 - pa.parquet below
    except ImportError:
        raise InputError("reading Parquet needs pyarrow: pip install 'streammetrics[parquet]'") from None
    return pa


def _arrow_rows(pa: Any, batch: Any, ts_name: str, scale: int) -> list[dict[str, Any]]:
    names = batch.schema.names
    if ts_name in names:
        i = names.index(ts_name)
        kind = batch.schema.field(i).type
        if pa.types.is_timestamp(kind):  # epoch integers in the column's own unit
            batch = batch.set_column(i, ts_name, batch.column(i).cast(pa.int64()))
            scale = TS_UNITS[kind.unit]
        elif pa.types.is_date(kind):
            batch = batch.set_column(i, ts_name, batch.column(i).cast(pa.timestamp("s")).cast(pa.int64()))
            scale = 1
    rows = batch.to_pylist()
    out = []
    for row in rows:
        obj = {k: v for k, v in row.items() if v is not None}
        if scale != 1:
            ts = obj.get(ts_name)
            if ts is not None and _is_number(ts):
                obj[ts_name] = _divide(ts, scale)
        out.append(obj)
    return out


def parquet_rows(source: Any, ts_name: str, scale: int, name: str) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet file (path or seekable binary file object) as decoded event objects; nulls
    are absent fields. InputError (one line) when it is not a readable Parquet file."""
    pa = _import_pyarrow()
    try:
        pf = pa.parquet.ParquetFile(source)
        batches = pf.iter_batches(batch_size=PARQUET_BATCH)
        for batch in batches:
            yield from _arrow_rows(pa, batch, ts_name, scale)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name}: not a readable Parquet file ({str(exc).splitlines()[0][:200]})") from None


def frame_rows(df: Any, ts_name: str, scale: int) -> Iterator[dict[str, Any]]:
    """The rows of a pandas DataFrame as decoded event objects (see the module docstring)."""
    import numpy as np
    import pandas as pd

    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise ValueError(f"DataFrame columns must be distinct, got {names}")
    columns: list[list[Any]] = []
    missing: list[list[bool] | None] = []
    scales: list[int] = []
    for name, (_, col) in zip(names, df.items()):
        col_scale = scale if name == ts_name else 1
        if pd.api.types.is_datetime64_any_dtype(col.dtype):  # epoch integers (UTC) in the column's unit
            index = pd.DatetimeIndex(col)
            mask = col.isna()
            values = index.asi8.tolist()
            if name == ts_name:
                col_scale = TS_UNITS.get(str(getattr(index, "unit", "ns")), TS_UNITS["ns"])
        else:
            mask = col.isna()
            values = col.tolist()
            if col.dtype == object:  # arrays in cells (scores) as lists
                values = [v.tolist() if v.__class__ is np.ndarray else v for v in values]
        missing.append(mask.tolist() if bool(mask.any()) else None)
        columns.append(values)
        scales.append(col_scale)
    n = len(df)
    for i in range(n):
        obj: dict[str, Any] = {}
        for name, values, miss, s in zip(names, columns, missing, scales):
            if miss is not None and miss[i]:
                continue
            v = values[i]
            obj[name] = _divide(v, s) if s != 1 and _is_number(v) else v
        yield obj

