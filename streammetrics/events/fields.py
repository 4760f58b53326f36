"""Field rules of prediction events (contract section 2): one decoded JSON value -> an
:class:`~streammetrics.events.records.Event` or a :class:`~streammetrics.events.records.Rejection`
carrying a short reason, the field and a machine-readable code (see ``REJECTION_CODES``).
The rules themselves are listed in :mod:`streammetrics.events.parser`.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime, timezone
from typing import Any, cast

from streammetrics.events.decoding import OverlongInteger
from streammetrics.events.records import Event, Rejection

__all__ = ["FIELDS", "MAX_NAME_LENGTH", "MAX_WEIGHT", "TASKS", "build_field_parser", "label_key", "object_key",
           "utf8_encodable"]

TASKS = ("binary", "multiclass", "labels", "regression")
#: every field name of the contract (the keys ``fields=`` may remap)
FIELDS = ("ts", "model", "segment", "y_true", "score", "scores", "y_pred", "weight", "id")
#: longest accepted ``model``, ``segment`` and ``id`` (they end up in keys and snapshots)
MAX_NAME_LENGTH = 1000
#: largest event weight accepted: sums of any realistic number of events stay far from overflow
MAX_WEIGHT = 1e15

TS_MIN = -62135596800.0  # 0001-01-01T00:00:00Z
TS_MAX = 253402300800.0  # 10000-01-01T00:00:00Z (exclusive)
_INF = math.inf
_UTC = timezone.utc
_fromiso = datetime.fromisoformat
_MISSING: Any = object()
_LEAP_SECOND = re.compile(r"[Tt ]\d\d:?\d\d:?60")


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


def utf8_encodable(text: str) -> bool:
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


def _iso_to_epoch(text: str) -> float | str:
    """Epoch seconds of an ISO-8601 string (no zone: UTC), or why it is not a time in range
    (a str completing "field 'ts' ...")."""
    if len(text) > 64:
        return f"must be epoch seconds or an ISO-8601 string, got {_describe(text)}"
    original = text
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"  # Python 3.10's fromisoformat lacks "Z"
    try:
        dt = _fromiso(text)
    except (ValueError, TypeError) as exc:
        if _LEAP_SECOND.search(original):
            return (f"is a leap second, got {_describe(original)}: epoch seconds have no 60th second "
                    "(send :59.999999 or the next second)")
        detail = str(exc)  # a field out of its range ("month must be in 1..12") is worth saying
        detail = "" if not detail or detail.startswith("Invalid isoformat") else f" ({detail})"
        return f"must be epoch seconds or an ISO-8601 string, got {_describe(original)}{detail}"
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_UTC)
    try:
        t = dt.timestamp()
    except (OverflowError, ValueError, OSError):
        return f"is out of range (years 1-9999 in UTC), got {_describe(original)}"
    if not TS_MIN <= t < TS_MAX:
        return (f"is out of range, got {_describe(original)}: as float epoch seconds it is {t!r}, "
                "outside years 1-9999 (float rounding at the end of year 9999)" if t == TS_MAX else
                f"is out of range (years 1-9999 in UTC), got {_describe(original)}")
    return t


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


label_key = _label_key
object_key = _object_key


def build_field_parser(
    task: str,
    fields: Mapping[str, str],
    classes: list | None,
    class_index: dict | None,
    object_index: dict | None,
    require_key: bool = True,
) -> Callable[[Any], Event | Rejection]:
    """The per-event field validator of :class:`~streammetrics.events.parser.EventParser`: one
    decoded JSON value -> :class:`Event` or :class:`Rejection`; never raises. A closure over
    precomputed names, because it is the per-event hot path."""
    f = fields
    k_ts, k_model, k_segment, k_weight, k_id = f["ts"], f["model"], f["segment"], f["weight"], f["id"]
    k_true, k_score, k_scores, k_pred = f["y_true"], f["score"], f["scores"], f["y_pred"]
    binary, multiclass, labels = task == "binary", task == "multiclass", task == "labels"
    n_classes = len(classes) if classes is not None else 0
    if classes is None or n_classes <= 10:
        classes_text = repr(classes)
    else:
        classes_text = repr(classes[:10])[:-1] + f", ... ({n_classes} classes)]"
    max_len = MAX_NAME_LENGTH
    max_weight = MAX_WEIGHT
    encodable = utf8_encodable
    missing = _MISSING
    new_event = Event

    def reject_ts(v: Any) -> Rejection:
        x = v if v.__class__ is float else _as_finite(v)
        if (x is not None and -_INF < x < _INF) or v.__class__ is OverlongInteger:
            hint = " (epoch milliseconds?)" if x is not None and 1e11 <= abs(x) < 1e15 else ""
            return Rejection(f"field '{k_ts}' is out of range (epoch seconds of years 1-9999), "
                             f"got {_describe(v)}{hint}", k_ts, code="out_of_range")
        return Rejection(f"field '{k_ts}' must be epoch seconds or an ISO-8601 string, got {_describe(v)}", k_ts,
                         code="bad_type")

    def reject_name(key: str, v: Any, optional: bool) -> Rejection:
        if isinstance(v, str) and len(v) > max_len:
            return Rejection(f"field '{key}' must be at most {max_len} characters, got {len(v)}", key,
                             code="out_of_range")
        if isinstance(v, str) and not utf8_encodable(v):
            return Rejection(f"field '{key}' must be valid Unicode, got a lone surrogate", key, code="bad_value")
        what = "a string" if optional else "a non-empty string"
        return Rejection(f"field '{key}' must be {what}, got {_describe(v)}", key,
                         code="bad_value" if isinstance(v, str) else "bad_type")

    def reject_bar(key: str, v: str) -> Rejection:
        return Rejection(f"field '{key}' must not contain '|' (it separates model, segment and window "
                         f"in snapshot keys), got {_describe(v)}", key, code="bad_value")

    def number_reason(key: str, v: Any) -> Rejection:
        return Rejection(f"field '{key}' must be a finite number, got {_describe(v)}", key, code="bad_type")

    _classes: list = classes if classes is not None else []
    _object_index: dict = object_index if object_index is not None else {}
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
                                 f"got {len(s)}", k_scores, code="bad_value")
            out = []
            for i, v in enumerate(s):
                if v.__class__ is not float or not -_INF < v < _INF:
                    v = _as_finite(v)
                    if v is None:
                        return Rejection(f"field '{k_scores}' must hold finite numbers, got "
                                         f"{_describe(s[i])} for class {_classes[i]!r}", k_scores, code="bad_type")
                out.append(v)
            return tuple(out)
        if isinstance(s, Mapping):
            out = [missing] * n_classes
            for key, v in s.items():
                ci = _object_index.get(key) if key.__class__ is str else None
                if ci is None:
                    return Rejection(f"field '{k_scores}' has unknown class {_describe(key)}; "
                                     f"classes are {classes_text}", k_scores, code="unknown_label")
                if v.__class__ is not float or not -_INF < v < _INF:
                    v = _as_finite(v)
                    if v is None:
                        return Rejection(f"field '{k_scores}' must hold finite numbers, got "
                                         f"{_describe(s[key])} for class {_classes[ci]!r}", k_scores, code="bad_type")
                out[ci] = v
            if len(s) != n_classes:
                absent = next(c for c, v in zip(_classes, out) if v is missing)
                return Rejection(f"field '{k_scores}' is missing class {absent!r}", k_scores, code="missing_field")
            return tuple(out)
        return Rejection(f"field '{k_scores}' must be an array or an object of class scores, "
                         f"got {_describe(s)}", k_scores, code="bad_type")

    def parse_label(key: str, v: Any) -> Any:
        lab = _label(v)
        if lab is None:
            return Rejection(f"field '{key}' must be a label (string, integer, boolean or finite "
                             f"number), got {_describe(v)}", key, code="bad_type")
        if class_index is not None and _label_key(lab) not in class_index:
            return Rejection(f"field '{key}' must be one of {classes_text}, got {_describe(v)}", key,
                             code="unknown_label")
        return lab

    def parse(obj: Any) -> Event | Rejection:
        try:
            if obj.__class__ is not dict and not isinstance(obj, Mapping):
                return Rejection(f"event must be a JSON object, got {_describe(obj)}", code="bad_type")
            get = obj.get
            # --- ts
            ts = get(k_ts, missing)
            cls = ts.__class__
            if cls is float:
                if not TS_MIN <= ts < TS_MAX:
                    return reject_ts(ts)
            elif cls is int:
                if not TS_MIN <= ts < TS_MAX:
                    return reject_ts(ts)
                ts = float(ts)
            elif cls is str:
                iso = _iso_to_epoch(ts)
                if isinstance(iso, str):
                    return Rejection(f"field '{k_ts}' {iso}", k_ts,
                                     code="out_of_range" if "out of range" in iso else "bad_value")
                ts = iso
            elif ts is missing:
                if require_key:
                    return Rejection(f"missing field '{k_ts}'", k_ts, code="missing_field")
                ts = 0.0
            else:
                t = _as_finite(ts)
                if t is None or not TS_MIN <= t < TS_MAX:
                    return reject_ts(ts)
                ts = t
            # --- model, segment
            model = get(k_model, missing)
            if model.__class__ is not str or not 0 < len(model) <= max_len or (
                    not model.isascii() and not encodable(model)):
                if model is missing:
                    if require_key:
                        return Rejection(f"missing field '{k_model}'", k_model, code="missing_field")
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
                                         f"{_describe(weight)}", k_weight, code="out_of_range")
                    weight = w
            ident = get(k_id)
            if ident is not None and ident.__class__ is not str:
                if isinstance(ident, int) and not isinstance(ident, bool) and ident.bit_length() <= 64:
                    ident = str(int(ident))
                elif isinstance(ident, str):
                    ident = str(ident)
                else:
                    return Rejection(f"field '{k_id}' must be a string, got {_describe(ident)}", k_id, code="bad_type")
            if ident is not None and (len(ident) > max_len or (not ident.isascii() and not encodable(ident))):
                return reject_name(k_id, ident, True)
            # --- truth
            y_true = get(k_true, missing)
            if y_true is missing:
                return Rejection(f"missing field '{k_true}'", k_true, code="missing_field")
            if binary:
                if (isinstance(y_true, (int, float)) and (y_true == 0 or y_true == 1)):
                    y_true = 1 if y_true else 0  # 0/1, false/true, 0.0/1.0
                else:
                    return Rejection(f"field '{k_true}' must be 0, 1, true or false, got "
                                     f"{_describe(y_true)}", k_true, code="bad_value")
                score = get(k_score, missing)
                if score.__class__ is not float or not -_INF < score < _INF:
                    if score is missing:
                        return Rejection(f"missing field '{k_score}'", k_score, code="missing_field")
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
                                     f"{_describe(y_true)}", k_true, code="unknown_label")
                s = get(k_scores, missing)
                if s is missing:
                    return Rejection(f"missing field '{k_scores}'", k_scores, code="missing_field")
                scores = parse_scores(s)
                if scores.__class__ is Rejection:
                    return cast(Rejection, scores)
                return new_event(ts, model, segment, _classes[i], None, cast(tuple, scores), None, weight, ident)
            y_pred = get(k_pred, missing)
            if y_pred is missing:
                return Rejection(f"missing field '{k_pred}'", k_pred, code="missing_field")
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
                                     k_pred, code="bad_value")
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
            return Rejection(f"unparseable event ({type(exc).__name__})", code="unparseable")

    parse.__doc__ = "One decoded JSON value -> Event or Rejection; never raises."
    return parse
