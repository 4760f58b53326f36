"""Parsing of prediction events (contract section 2), shared by ``replay`` and the Kafka service.

:class:`EventParser` turns one decoded JSON value into either an :class:`Event` or a
:class:`Rejection` (a short, stable reason and the offending field, as named in the input).
It never raises on input data and never returns a partial result, so the caller can count
or dead-letter every bad event and carry on. :meth:`EventParser.parse_value` takes a raw
JSONL line or Kafka message value (bytes or str) holding one object or an array of them.

Rules (field names before remapping with ``fields=``):

=========  =====================================================================================
``ts``     epoch seconds (int or float, not bool, finite) or an ISO-8601 string
           (``datetime.fromisoformat``, plus a trailing ``Z``); a string without a zone is UTC.
           Years 1 to 9999 only (catches epoch *milliseconds*, a common producer mistake).
``model``  non-empty string, at most ``MAX_NAME_LENGTH`` characters, without ``|`` (the
           separator of snapshot keys ``model|segment|window_start``); with the ``segment`` it
           is the stream key ``Event.key``
``segment``  optional string (default ``""``; ``null`` counts as absent), same limits
``weight``   optional number from 0 to ``MAX_WEIGHT`` (1e15), not bool (default 1.0; ``null`` = absent)
``id``       optional string (or integer, kept as its decimal string; ``null`` = absent)
=========  =====================================================================================

Per task:

* ``binary``: ``y_true`` in {0, 1, true, false} (also 0.0/1.0), stored as int 0/1;
  ``score`` a finite number.
* ``multiclass``: ``y_true`` one of ``classes`` (stored as that class object); ``scores`` an
  array aligned with ``classes`` or an object class -> number covering every class exactly
  (object keys are strings: class ``0`` is key ``"0"``, ``true`` is ``"true"``), finite
  numbers, stored as a tuple of floats in class order. A ``y_pred`` field is ignored (the
  hard prediction of a score vector is its arg-max).
* ``labels``: ``y_true`` and ``y_pred`` labels: strings, integers, booleans or finite floats
  (integral floats become ints, as in ``ConfusionMatrix``), both of one kind (strings,
  numbers or booleans: labels of different kinds cannot be sorted); with ``classes`` given,
  labels outside it are rejected.
* ``regression``: ``y_true`` and ``y_pred`` finite numbers (not bool).

With ``require_key=False`` (monitors parsing single dicts) ``ts`` and ``model`` may be absent
(then ``0.0`` and ``""``); present, they are checked as above.

JSON decoding follows the standard library's ``json`` module (RFC 8259 plus its ``NaN`` and
``Infinity`` literals, which the rules above then reject). When the optional ``msgspec``
package is installed (the ``fast`` extra) :meth:`EventParser.parse_value` first tries its
decoder, ~2.5x faster than the json path; whatever msgspec refuses (``NaN``, lone surrogates,
numbers beyond float range, a BOM, invalid JSON) goes through ``json`` as before. Where msgspec
succeeds its value is the one ``json`` gives (same floats bit for bit, arbitrary-size
integers, last duplicate key wins; property-tested in ``tests/test_events.py``), and values
nested deeper than ``MAX_NESTING`` are rejected before either decoder runs (their own
recursion limits differ), so results and rejection reasons do not depend on whether msgspec
is installed.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from datetime import datetime, timezone
from itertools import accumulate
from typing import Any, Hashable, Mapping, Sequence

from streammetrics.core.validation import labels_from_json

__all__ = ["Event", "Rejection", "EventParser", "TASKS", "FIELDS", "MAX_NAME_LENGTH", "MAX_WEIGHT", "MAX_NESTING"]

TASKS = ("binary", "multiclass", "labels", "regression")
#: every field name of the contract (the keys ``fields=`` may remap)
FIELDS = ("ts", "model", "segment", "y_true", "score", "scores", "y_pred", "weight", "id")
#: longest accepted ``model``, ``segment`` and ``id`` (they end up in keys and snapshots)
MAX_NAME_LENGTH = 1000
#: largest event weight accepted: sums of any realistic number of events stay far from overflow
MAX_WEIGHT = 1e15
#: deepest nesting of arrays and objects accepted in a message value. Deeper values are rejected
#: before decoding: json's and msgspec's own limits (near 1,000) depend on the caller's stack
#: depth and differ by a few levels, so without this the outcome would too.
MAX_NESTING = 500

_TS_MIN = -62135596800.0  # 0001-01-01T00:00:00Z
_TS_MAX = 253402300800.0  # 10000-01-01T00:00:00Z (exclusive)
_INF = math.inf
_UTC = timezone.utc
_fromiso = datetime.fromisoformat
_loads = json.loads
_scan_once = json.JSONDecoder().scan_once
_MISSING: Any = object()
_JSON_SPACE = " \t\n\r"  # the only whitespace RFC 8259 (and json.loads) allows around a value

# for _too_deep: the characters that decide nesting, and JSON strings (escapes included)
_NOT_MARK_BYTES = bytes(b for b in range(256) if b not in b'"[]{}\\')
_STRING_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _too_deep(value: Any) -> bool:
    """True if ``value`` (a JSON text) nests arrays/objects deeper than ``MAX_NESTING``: the
    running sum of +1 per opening and -1 per closing bracket outside strings exceeds it."""
    raw = value.encode("utf-8", "surrogatepass") if value.__class__ is str else bytes(value)
    marks = raw.translate(None, _NOT_MARK_BYTES)  # quotes, brackets, backslashes
    if marks.count(b"[") + marks.count(b"{") <= MAX_NESTING:
        return False
    if b"\\" in marks:  # escaped quotes possible: cut the strings out of the whole text
        marks = _STRING_BYTES.sub(b"", raw).translate(None, _NOT_MARK_BYTES)
    else:  # quotes alternate between opening and closing a string
        marks = b"".join(marks.split(b'"')[::2])
    return max(accumulate(map(_DEPTH_STEP.__getitem__, marks)), default=0) > MAX_NESTING


try:  # the optional accelerator (see the module docstring)
    from msgspec.json import Decoder as _MsgspecDecoder

    _FAST_DECODE: Any = _MsgspecDecoder().decode
except ImportError:  # pragma: no cover - exercised where msgspec is absent
    _FAST_DECODE = None


class Event:
    """One parsed prediction event. Fields a task does not use are None.

    ``y_true``: int 0/1 (binary), a class (multiclass), a label (labels) or a float
    (regression); ``score``: float (binary); ``scores``: tuple of floats aligned with the
    parser's classes (multiclass); ``y_pred``: label or float (labels, regression).
    """

    __slots__ = ("ts", "model", "segment", "y_true", "score", "scores", "y_pred", "weight", "id")

    def __init__(
        self,
        ts: float,
        model: str,
        segment: str = "",
        y_true: Any = None,
        score: float | None = None,
        scores: tuple[float, ...] | None = None,
        y_pred: Any = None,
        weight: float = 1.0,
        id: str | None = None,  # noqa: A002 - the contract's field name
    ) -> None:
        self.ts = ts
        self.model = model
        self.segment = segment
        self.y_true = y_true
        self.score = score
        self.scores = scores
        self.y_pred = y_pred
        self.weight = weight
        self.id = id

    @property
    def key(self) -> tuple[str, str]:
        """The stream key ``(model, segment)``."""
        return (self.model, self.segment)

    def to_dict(self) -> dict[str, Any]:
        """The event as a contract-shaped dict (canonical field names, unused fields left out)."""
        out = {name: getattr(self, name) for name in self.__slots__}
        if out["scores"] is not None:
            out["scores"] = list(out["scores"])
        return {k: v for k, v in out.items() if v is not None}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Event:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__ if getattr(self, k) is not None)
        return f"Event({body})"


class Rejection:
    """Why an input is not a valid event: ``reason`` (short, stable), ``field`` (as named in
    the input, None when the whole value is at fault) and, for array messages, the ``index``
    of the element."""

    __slots__ = ("reason", "field", "index")

    def __init__(self, reason: str, field: str | None = None, index: int | None = None) -> None:
        self.reason = reason
        self.field = field
        self.index = index

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Rejection:
            return NotImplemented
        return (self.reason, self.field, self.index) == (other.reason, other.field, other.index)  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return self.reason if self.index is None else f"[{self.index}] {self.reason}"

    def __repr__(self) -> str:
        return f"Rejection(reason={self.reason!r}, field={self.field!r}, index={self.index!r})"


# --------------------------------------------------------------------------- helpers
def _describe(value: Any) -> str:
    """A short, bounded description of a JSON value for rejection reasons."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "..."
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 100 else f"a {value.bit_length()}-bit integer"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return f"a {type(value).__name__}"


def _encodable(text: str) -> bool:
    """False for strings holding lone surrogates (JSON "\\ud800"), which cannot be UTF-8 encoded
    (in Kafka keys, say)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_finite(value: Any) -> float | None:
    """Slow path: any real number (not bool) that is finite as a float, else None."""
    if value.__class__ is bool or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        x = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return x if -_INF < x < _INF else None


def _iso_to_epoch(text: str) -> float | None:
    """Epoch seconds of an ISO-8601 string (no zone: UTC), or None if it is not one."""
    if len(text) > 64:
        return None
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"  # Python 3.10's fromisoformat lacks "Z"
    try:
        dt = _fromiso(text)
    except (ValueError, TypeError):
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_UTC)
    try:
        return dt.timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def _label(value: Any) -> Hashable | None:
    """A label: str/int/bool as is, integral finite float -> int, other finite float; else None."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool:
        return value
    if cls is float:
        if -_INF < value < _INF:
            return int(value) if value.is_integer() else value
        return None
    if isinstance(value, bool):  # subclasses of the built-ins (not produced by json.loads)
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    return None


#: label kinds that can be compared (sorted) with each other, as ConfusionMatrix requires
_KIND = {str: "str", int: "number", float: "number", bool: "bool"}


def _label_key(value: Hashable) -> tuple[bool, Hashable]:
    # True == 1 in Python; keep booleans distinct from integers
    return (value.__class__ is bool, value)


def _object_key(cls_value: Hashable) -> str:
    """The JSON object key naming a class in a ``scores`` object."""
    return cls_value if isinstance(cls_value, str) else json.dumps(cls_value)


# --------------------------------------------------------------------------- parser
class EventParser:
    """Parse prediction events for one task; see the module docstring for the rules.

    >>> p = EventParser("binary", fields={"y_true": "label"})
    >>> p.parse({"ts": 1700000000, "model": "m", "label": True, "score": 0.9}).y_true
    1
    >>> p.parse({"ts": 1700000000, "model": "m", "score": 0.9}).reason
    "missing field 'label'"
    """

    def __init__(
        self,
        task: str,
        classes: Sequence[Hashable] | None = None,
        fields: Mapping[str, str] | None = None,
        *,
        require_key: bool = True,
        fast_json: bool = True,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
        self.task = task
        self.require_key = bool(require_key)
        #: msgspec's decoder when ``fast_json`` and msgspec is installed, else None (json only;
        #: setting it to None later switches a parser to json only)
        self.fast_decode = _FAST_DECODE if fast_json else None
        names = {f: f for f in FIELDS}
        for canonical, source in dict(fields or {}).items():
            if canonical not in names:
                raise ValueError(f"fields: unknown field {canonical!r}; known: {list(FIELDS)}")
            if not isinstance(source, str) or not source:
                raise ValueError(f"fields: {canonical!r} must map to a non-empty string, got {source!r}")
            names[canonical] = source
        used: dict[str, str] = {}
        for canonical, source in names.items():
            if source in used:
                raise ValueError(f"fields: {used[source]!r} and {canonical!r} both read the input field {source!r}")
            used[source] = canonical
        self.fields = names

        self.classes: list | None = None
        if classes is not None:
            self.classes = labels_from_json(list(classes), "classes")
        if task == "multiclass":
            if self.classes is None or len(self.classes) < 2:
                raise ValueError(f"multiclass events need at least two classes, got {classes!r}")
        elif task in ("binary", "regression") and classes is not None:
            raise ValueError(f"classes only apply to the multiclass and labels tasks, not {task!r}")
        self._class_index: dict | None = None
        self._object_index: dict | None = None
        if self.classes is not None:
            self._class_index = {_label_key(c): i for i, c in enumerate(self.classes)}
            self._object_index = {}
            for i, c in enumerate(self.classes):
                key = _object_key(c)
                if key in self._object_index:
                    raise ValueError(f"classes {self.classes[self._object_index[key]]!r} and {c!r} "
                                     f"would share the scores object key {key!r}")
                self._object_index[key] = i
        # the hot path: a closure over precomputed names (an instance attribute shadows the method)
        self.parse = self._build()  # type: ignore[method-assign]

    def parse(self, obj: Any) -> Event | Rejection:  # pragma: no cover - replaced per instance
        """One decoded JSON value -> :class:`Event` or :class:`Rejection`; never raises."""
        return self._build()(obj)

    def parse_value(self, value: bytes | bytearray | memoryview | str) -> list[Event | Rejection]:
        """A JSONL line or Kafka message value (one object, or an array of objects) -> results.

        Bytes must be UTF-8 (RFC 8259; a leading BOM is skipped). Invalid JSON, invalid UTF-8
        or a value that is not an object/array give a single Rejection; an empty array gives
        ``[]``. Never raises.
        """
        if len(value) > MAX_NESTING and _too_deep(value):
            return [Rejection(f"invalid JSON: nested deeper than {MAX_NESTING} levels")]
        if self.fast_decode is not None:
            try:
                decoded = self.fast_decode(value)
            except Exception:  # noqa: BLE001 - refused: json below decides, with its exact reason
                pass
            else:
                return self._parse_decoded(decoded)
        try:
            if value.__class__ is not str:
                try:
                    value = (value if value.__class__ is bytes else bytes(value)).decode("utf-8")  # type: ignore[union-attr]
                except UnicodeDecodeError as exc:
                    return [Rejection(f"value is not valid UTF-8 (byte {exc.start})")]
            try:
                try:
                    # the json module's C scanner, without json.loads' Python wrappers; anything it
                    # does not take cleanly (leading space, trailing data, errors) goes to json.loads
                    decoded, end = _scan_once(value, 0)
                    if end != len(value) and value[end:].strip(_JSON_SPACE):  # type: ignore[index]
                        raise ValueError("trailing data")
                except (StopIteration, ValueError):
                    decoded = _loads(value)
            except json.JSONDecodeError as exc:
                if value[:1] != "\ufeff":  # type: ignore[index]
                    return [Rejection(f"invalid JSON: {exc.msg} at char {exc.pos}")]
                decoded = _loads(value[1:])  # type: ignore[index]
        except json.JSONDecodeError as exc:
            return [Rejection(f"invalid JSON: {exc.msg} at char {exc.pos}")]
        except (ValueError, RecursionError) as exc:  # e.g. integer too long, nesting too deep
            return [Rejection(f"invalid JSON: {type(exc).__name__}")]
        except Exception as exc:  # noqa: BLE001 - never raise on input data
            return [Rejection(f"unreadable value ({type(exc).__name__})")]
        return self._parse_decoded(decoded)

    def _parse_decoded(self, decoded: Any) -> list[Event | Rejection]:
        """parse_value's results for its decoded JSON value."""
        parse = self.parse
        if decoded.__class__ is list:
            out = []
            for i, item in enumerate(decoded):
                result = parse(item)
                if result.__class__ is Rejection:
                    result.index = i
                out.append(result)
            return out
        return [parse(decoded)]

    # ------------------------------------------------------------------ internals
    def _build(self) -> Any:
        f = self.fields
        k_ts, k_model, k_segment, k_weight, k_id = f["ts"], f["model"], f["segment"], f["weight"], f["id"]
        k_true, k_score, k_scores, k_pred = f["y_true"], f["score"], f["scores"], f["y_pred"]
        task = self.task
        binary, multiclass, labels = task == "binary", task == "multiclass", task == "labels"
        require_key = self.require_key
        class_index, object_index = self._class_index, self._object_index
        classes = self.classes
        n_classes = len(classes) if classes is not None else 0
        if classes is None or n_classes <= 10:
            classes_text = repr(classes)
        else:
            classes_text = repr(classes[:10])[:-1] + f", ... ({n_classes} classes)]"
        max_len = MAX_NAME_LENGTH
        max_weight = MAX_WEIGHT
        encodable = _encodable
        missing = _MISSING
        new_event = Event

        def reject_ts(v: Any) -> Rejection:
            x = v if v.__class__ is float else _as_finite(v)
            if x is not None and -_INF < x < _INF:
                hint = " (epoch milliseconds?)" if 1e11 <= abs(x) < 1e15 else ""
                return Rejection(f"field '{k_ts}' is out of range (epoch seconds of years 1-9999), "
                                 f"got {_describe(v)}{hint}", k_ts)
            return Rejection(f"field '{k_ts}' must be epoch seconds or an ISO-8601 string, got {_describe(v)}", k_ts)

        def reject_name(key: str, v: Any, optional: bool) -> Rejection:
            if isinstance(v, str) and len(v) > max_len:
                return Rejection(f"field '{key}' must be at most {max_len} characters, got {len(v)}", key)
            if isinstance(v, str) and not _encodable(v):
                return Rejection(f"field '{key}' must be valid Unicode, got a lone surrogate", key)
            what = "a string" if optional else "a non-empty string"
            return Rejection(f"field '{key}' must be {what}, got {_describe(v)}", key)

        def reject_bar(key: str, v: str) -> Rejection:
            return Rejection(f"field '{key}' must not contain '|' (it separates model, segment and window "
                             f"in snapshot keys), got {_describe(v)}", key)

        def number_reason(key: str, v: Any) -> Rejection:
            return Rejection(f"field '{key}' must be a finite number, got {_describe(v)}", key)

        object_keys = tuple(_object_key(c) for c in classes) if classes is not None else ()
        # exact-type lookups for the common label types (True == 1 must not find class 1)
        str_index = {c: i for i, c in enumerate(classes or ()) if c.__class__ is str}
        int_index = {c: i for i, c in enumerate(classes or ()) if c.__class__ is int}

        def parse_scores(s: Any) -> tuple[float, ...] | Rejection:
            # fast path: plain floats for every class, finite sum (nan/inf fail it)
            t: Any = None
            if s.__class__ is list:
                if len(s) == n_classes:
                    t = s
            elif s.__class__ is dict and len(s) == n_classes:
                try:
                    t = [s[k] for k in object_keys]
                except KeyError:
                    pass
            if t is not None:
                for v in t:
                    if v.__class__ is not float:
                        break
                else:
                    if -_INF < sum(t) < _INF:
                        return tuple(t)
            # general path, with a precise reason for whatever is wrong
            if s.__class__ is list or isinstance(s, (list, tuple)):
                if len(s) != n_classes:
                    return Rejection(f"field '{k_scores}' must have {n_classes} values (one per class), "
                                     f"got {len(s)}", k_scores)
                out = []
                for i, v in enumerate(s):
                    if v.__class__ is not float or not -_INF < v < _INF:
                        v = _as_finite(v)
                        if v is None:
                            return Rejection(f"field '{k_scores}' must hold finite numbers, got "
                                             f"{_describe(s[i])} for class {classes[i]!r}", k_scores)
                    out.append(v)
                return tuple(out)
            if isinstance(s, Mapping):
                out = [missing] * n_classes
                for key, v in s.items():
                    i = object_index.get(key) if key.__class__ is str else None
                    if i is None:
                        return Rejection(f"field '{k_scores}' has unknown class {_describe(key)}; "
                                         f"classes are {classes_text}", k_scores)
                    if v.__class__ is not float or not -_INF < v < _INF:
                        v = _as_finite(v)
                        if v is None:
                            return Rejection(f"field '{k_scores}' must hold finite numbers, got "
                                             f"{_describe(s[key])} for class {classes[i]!r}", k_scores)
                    out[i] = v
                if len(s) != n_classes:
                    absent = next(c for c, v in zip(classes, out) if v is missing)
                    return Rejection(f"field '{k_scores}' is missing class {absent!r}", k_scores)
                return tuple(out)
            return Rejection(f"field '{k_scores}' must be an array or an object of class scores, "
                             f"got {_describe(s)}", k_scores)

        def parse_label(key: str, v: Any) -> Any:
            lab = _label(v)
            if lab is None:
                return Rejection(f"field '{key}' must be a label (string, integer, boolean or finite "
                                 f"number), got {_describe(v)}", key)
            if class_index is not None and _label_key(lab) not in class_index:
                return Rejection(f"field '{key}' must be one of {classes_text}, got {_describe(v)}", key)
            return lab

        def parse(obj: Any) -> Event | Rejection:
            try:
                if obj.__class__ is not dict and not isinstance(obj, Mapping):
                    return Rejection(f"event must be a JSON object, got {_describe(obj)}")
                get = obj.get
                # --- ts
                ts = get(k_ts, missing)
                cls = ts.__class__
                if cls is float:
                    if not _TS_MIN <= ts < _TS_MAX:
                        return reject_ts(ts)
                elif cls is int:
                    if not _TS_MIN <= ts < _TS_MAX:
                        return reject_ts(ts)
                    ts = float(ts)
                elif cls is str:
                    t = _iso_to_epoch(ts)
                    if t is None or not _TS_MIN <= t < _TS_MAX:
                        return Rejection(f"field '{k_ts}' must be epoch seconds or an ISO-8601 string, "
                                         f"got {_describe(ts)}", k_ts)
                    ts = t
                elif ts is missing:
                    if require_key:
                        return Rejection(f"missing field '{k_ts}'", k_ts)
                    ts = 0.0
                else:
                    t = _as_finite(ts)
                    if t is None or not _TS_MIN <= t < _TS_MAX:
                        return reject_ts(ts)
                    ts = t
                # --- model, segment
                model = get(k_model, missing)
                if model.__class__ is not str or not 0 < len(model) <= max_len or (
                        not model.isascii() and not encodable(model)):
                    if model is missing:
                        if require_key:
                            return Rejection(f"missing field '{k_model}'", k_model)
                        model = ""
                    elif isinstance(model, str) and 0 < len(model) <= max_len and encodable(model):
                        model = str(model)
                    else:
                        return reject_name(k_model, model, False)
                if "|" in model:
                    return reject_bar(k_model, model)
                segment = get(k_segment)
                if segment.__class__ is not str or len(segment) > max_len or (
                        not segment.isascii() and not encodable(segment)):
                    if segment is None:
                        segment = ""
                    elif isinstance(segment, str) and len(segment) <= max_len and encodable(segment):
                        segment = str(segment)
                    else:
                        return reject_name(k_segment, segment, True)
                if "|" in segment:
                    return reject_bar(k_segment, segment)
                # --- weight, id
                weight = get(k_weight)
                if weight.__class__ is not float or not 0.0 <= weight <= max_weight:
                    if weight is None:
                        weight = 1.0
                    else:
                        w = _as_finite(weight)
                        if w is None or not 0.0 <= w <= max_weight:
                            return Rejection(f"field '{k_weight}' must be a number from 0 to {max_weight:g}, got "
                                             f"{_describe(weight)}", k_weight)
                        weight = w
                ident = get(k_id)
                if ident is not None and ident.__class__ is not str:
                    if isinstance(ident, int) and not isinstance(ident, bool) and ident.bit_length() <= 64:
                        ident = str(int(ident))
                    elif isinstance(ident, str):
                        ident = str(ident)
                    else:
                        return Rejection(f"field '{k_id}' must be a string, got {_describe(ident)}", k_id)
                if ident is not None and (len(ident) > max_len or (not ident.isascii() and not encodable(ident))):
                    return reject_name(k_id, ident, True)
                # --- truth
                y_true = get(k_true, missing)
                if y_true is missing:
                    return Rejection(f"missing field '{k_true}'", k_true)
                if binary:
                    if (isinstance(y_true, (int, float)) and (y_true == 0 or y_true == 1)):
                        y_true = 1 if y_true else 0  # 0/1, false/true, 0.0/1.0
                    else:
                        return Rejection(f"field '{k_true}' must be 0, 1, true or false, got "
                                         f"{_describe(y_true)}", k_true)
                    score = get(k_score, missing)
                    if score.__class__ is not float or not -_INF < score < _INF:
                        if score is missing:
                            return Rejection(f"missing field '{k_score}'", k_score)
                        s = _as_finite(score)
                        if s is None:
                            return number_reason(k_score, score)
                        score = s
                    return new_event(ts, model, segment, y_true, score, None, None, weight, ident)
                if multiclass:
                    cls = y_true.__class__
                    if cls is str:
                        i = str_index.get(y_true)
                    elif cls is int:
                        i = int_index.get(y_true)
                    else:
                        lab = _label(y_true)
                        i = class_index.get(_label_key(lab)) if lab is not None else None  # type: ignore[union-attr]
                    if i is None:
                        return Rejection(f"field '{k_true}' must be one of the classes {classes_text}, got "
                                         f"{_describe(y_true)}", k_true)
                    s = get(k_scores, missing)
                    if s is missing:
                        return Rejection(f"missing field '{k_scores}'", k_scores)
                    scores = parse_scores(s)
                    if scores.__class__ is Rejection:
                        return scores  # type: ignore[return-value]
                    return new_event(ts, model, segment, classes[i], None, scores, None, weight, ident)  # type: ignore[index]
                y_pred = get(k_pred, missing)
                if y_pred is missing:
                    return Rejection(f"missing field '{k_pred}'", k_pred)
                if labels:
                    y_true = parse_label(k_true, y_true)
                    if y_true.__class__ is Rejection:
                        return y_true
                    y_pred = parse_label(k_pred, y_pred)
                    if y_pred.__class__ is Rejection:
                        return y_pred
                    if y_true.__class__ is not y_pred.__class__ and _KIND[y_true.__class__] != _KIND[y_pred.__class__]:
                        return Rejection(f"fields '{k_true}' and '{k_pred}' must be labels of one kind (strings, "
                                         f"numbers or booleans), got {_describe(y_true)} and {_describe(y_pred)}",
                                         k_pred)
                    return new_event(ts, model, segment, y_true, None, None, y_pred, weight, ident)
                # regression
                if y_true.__class__ is not float or not -_INF < y_true < _INF:
                    v = _as_finite(y_true)
                    if v is None:
                        return number_reason(k_true, y_true)
                    y_true = v
                if y_pred.__class__ is not float or not -_INF < y_pred < _INF:
                    v = _as_finite(y_pred)
                    if v is None:
                        return number_reason(k_pred, y_pred)
                    y_pred = v
                return new_event(ts, model, segment, y_true, None, None, y_pred, weight, ident)
            except Exception as exc:  # noqa: BLE001 - a safety net: input data never raises
                return Rejection(f"unparseable event ({type(exc).__name__})")

        parse.__doc__ = EventParser.parse.__doc__
        return parse


def parse_field_map(pairs: Sequence[str]) -> dict[str, str]:
    """``--field NAME=SOURCE`` pairs as a map of contract field name -> field name in the events."""
    fields: dict[str, str] = {}
    for pair in pairs:
        name, sep, source = pair.partition("=")
        if not sep or not name or not source:
            raise ValueError(f"--field takes NAME=SOURCE (e.g. y_true=label), got {pair!r}")
        fields[name.strip()] = source.strip()
    return fields
