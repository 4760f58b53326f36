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

Each :class:`Rejection` carries a machine-readable ``code`` beside its text (``invalid_json``,
``missing_field``, ``bad_type``, ``bad_value``, ``out_of_range``, ``unknown_label``,
``unparseable``; see ``REJECTION_CODES``), for counters and dead-letter headers: never derive
a category from the text.

Decoding (bytes -> JSON value, msgspec or json, nesting limit) lives in
:mod:`streammetrics.events.decoding`, the field rules in :mod:`streammetrics.events.fields`, the
records in :mod:`streammetrics.events.records`; this module ties them into :class:`EventParser`.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from streammetrics.core.validation import labels_from_json
from streammetrics.events.decoding import (
    FAST_DECODE,
    MAX_NESTING,
    decode_value,
)
from streammetrics.events.fields import (
    FIELDS,
    MAX_NAME_LENGTH,
    MAX_WEIGHT,
    TASKS,
    build_field_parser,
    label_key,
    object_key,
)
from streammetrics.events.records import REJECTION_CODES, Event, Rejection

__all__ = ["FIELDS", "MAX_NAME_LENGTH", "MAX_NESTING", "MAX_WEIGHT", "REJECTION_CODES", "TASKS", "Event",
           "EventParser", "Rejection", "parse_field_map"]


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
        self.fast_decode = FAST_DECODE if fast_json else None
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
            self._class_index = {label_key(c): i for i, c in enumerate(self.classes)}
            self._object_index = {}
            for i, c in enumerate(self.classes):
                key = object_key(c)
                if key in self._object_index:
                    raise ValueError(f"classes {self.classes[self._object_index[key]]!r} and {c!r} "
                                     f"would share the scores object key {key!r}")
                self._object_index[key] = i
        # the hot path: a closure over precomputed names (an instance attribute shadows the method)
        self.parse = build_field_parser(  # type: ignore[method-assign,assignment]  # per-instance closure
            task, self.fields, self.classes, self._class_index, self._object_index, self.require_key)

    def parse(self, obj: Any) -> Event | Rejection:  # pragma: no cover - replaced per instance
        """One decoded JSON value -> :class:`Event` or :class:`Rejection`; never raises."""
        return build_field_parser(self.task, self.fields, self.classes, self._class_index, self._object_index,
                                  self.require_key)(obj)

    def parse_value(self, value: bytes | bytearray | memoryview | str) -> list[Event | Rejection]:
        """A JSONL line or Kafka message value (one object, or an array of objects) -> results.

        Bytes must be UTF-8 (RFC 8259; a leading BOM is skipped). Invalid JSON, invalid UTF-8
        or a value that is not an object/array give a single Rejection; an empty array gives
        ``[]``. Never raises.
        """
        decoded = decode_value(value, self.fast_decode)
        if decoded.__class__ is Rejection:
            return [decoded]
        return self.parse_decoded(decoded)

    def parse_decoded(self, decoded: Any) -> list[Event | Rejection]:
        """The results of one decoded JSON value (an object, or an array of them: rejections
        then carry their ``index``); what :meth:`parse_value` gives after decoding. Never raises."""
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

    _parse_decoded = parse_decoded  # former private name


def parse_field_map(pairs: Sequence[str]) -> dict[str, str]:
    """``--field NAME=SOURCE`` pairs as a map of contract field name -> field name in the events."""
    fields: dict[str, str] = {}
    for pair in pairs:
        name, sep, source = pair.partition("=")
        if not sep or not name or not source:
            raise ValueError(f"--field takes NAME=SOURCE (e.g. y_true=label), got {pair!r}")
        fields[name.strip()] = source.strip()
    return fields
