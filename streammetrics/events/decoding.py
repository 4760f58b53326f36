"""Decoding of message values (JSONL lines, Kafka values) into JSON values, apart from any field rule.

:func:`decode_value` takes bytes or str and returns the decoded JSON value or a
:class:`~streammetrics.events.records.Rejection` (code ``invalid_json``); it never raises.

JSON decoding follows the standard library's ``json`` module (RFC 8259 plus its ``NaN`` and
``Infinity`` literals, which the field rules then reject). When the optional ``msgspec``
package is installed (the ``fast`` extra) it first tries msgspec's decoder, ~2.5x faster than
the json path; whatever msgspec refuses (``NaN``, lone surrogates, numbers beyond float range, a
BOM, invalid JSON) goes through ``json`` as before. Where msgspec succeeds its value is the one
``json`` gives (same floats bit for bit, arbitrary-size integers, last duplicate key wins;
property-tested in ``tests/stream/test_events.py``), and values nested deeper than
``MAX_NESTING`` are rejected before either decoder runs (their own recursion limits differ), so
results and rejection reasons do not depend on whether msgspec is installed.

>>> decode_value(b'{"a": [1, 2.5]}')
{'a': [1, 2.5]}
>>> decode_value(b'{"a": ').code
'invalid_json'
"""
from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any

from streammetrics.events.records import Rejection

__all__ = ["FAST_DECODE", "MAX_NESTING", "OverlongInteger", "decode_value"]

#: deepest nesting of arrays and objects accepted in a message value. Deeper values are rejected
#: before decoding: json's and msgspec's own limits (near 1,000) depend on the caller's stack
#: depth and differ by a few levels, so without this the outcome would too.
MAX_NESTING = 500

_loads = json.loads
_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__, not declared
_JSON_SPACE = " \t\n\r"  # the only whitespace RFC 8259 (and json.loads) allows around a value

# for _too_deep: the characters that decide nesting, and JSON strings (escapes included)
_NOT_MARK_BYTES = bytes(b for b in range(256) if b not in b'"[]{}\\')
_STRING_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class OverlongInteger(float):
    """A JSON integer with more digits than Python converts (``sys.get_int_max_str_digits()``,
    4,300 by default): decoded as this float (its value, +-inf), which the field rules then refuse
    by name; its ``repr`` says what it was ("a 5000-digit integer")."""

    digits: int

    def __new__(cls, text: str) -> "OverlongInteger":
        obj = super().__new__(cls, float(text))
        obj.digits = len(text) - text.startswith("-")
        return obj

    def __repr__(self) -> str:
        return f"a {self.digits}-digit integer"


def _int_or_overlong(text: str) -> int | float:
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return OverlongInteger(text) if limit and len(text) - text.startswith("-") > limit else int(text)


def _decode_overlong(value: str) -> Any:
    """``value`` decoded with over-long integers as :class:`OverlongInteger` (the json module
    refuses them with a bare ValueError); None if it still does not decode."""
    try:
        return _loads(value[1:] if value[:1] == "\ufeff" else value, parse_int=_int_or_overlong)
    except (ValueError, RecursionError):
        return None


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

    #: msgspec's decoder when the ``fast`` extra is installed, else None
    FAST_DECODE: Any = _MsgspecDecoder().decode
except ImportError:  # pragma: no cover - exercised where msgspec is absent
    FAST_DECODE = None


def decode_value(value: bytes | bytearray | memoryview | str, fast_decode: Any = FAST_DECODE) -> Any:
    """The JSON value of ``value``, or a :class:`Rejection` (code ``invalid_json``); never raises.

    Bytes must be UTF-8 (RFC 8259; a leading BOM is skipped). ``fast_decode`` (msgspec's decoder
    by default, when installed; None: json only) is tried first.
    """

    if len(value) > MAX_NESTING and _too_deep(value):
        return Rejection(f"invalid JSON: nested deeper than {MAX_NESTING} levels", code="invalid_json")
    if fast_decode is not None:
        try:
            decoded = fast_decode(value)
        except Exception:  # noqa: BLE001, S110 - refused: json below decides, with its exact reason
            pass
        else:
            return decoded
    try:
        if value.__class__ is not str:
            try:
                value = (value if value.__class__ is bytes else bytes(value)).decode("utf-8")  # type: ignore[arg-type]  # not a str here
            except UnicodeDecodeError as exc:
                return Rejection(f"value is not valid UTF-8 (byte {exc.start})", code="invalid_json")
        try:
            try:
                # the json module's C scanner, without json.loads' Python wrappers; anything it
                # does not take cleanly (leading space, trailing data, errors) goes to json.loads
                decoded, end = _scan_once(value, 0)
                if end != len(value) and value[end:].strip(_JSON_SPACE):
                    raise ValueError("trailing data")
            except (StopIteration, ValueError):
                decoded = _loads(value)
        except json.JSONDecodeError as exc:
            if value[:1] != "\ufeff":
                return Rejection(f"invalid JSON: {exc.msg} at char {exc.pos}", code="invalid_json")
            decoded = _loads(value[1:])
    except json.JSONDecodeError as exc:
        return Rejection(f"invalid JSON: {exc.msg} at char {exc.pos}", code="invalid_json")
    except (ValueError, RecursionError) as exc:  # e.g. integer too long, nesting too deep
        if isinstance(exc, ValueError) and value.__class__ is str:  # an integer of more digits than int() takes
            decoded = _decode_overlong(value)
            if decoded is not None:
                return decoded
        return Rejection(f"invalid JSON: {type(exc).__name__}", code="invalid_json")
    except Exception as exc:  # noqa: BLE001 - never raise on input data
        return Rejection(f"unreadable value ({type(exc).__name__})", code="invalid_json")
    return decoded
