"""Parsed records of the stream: :class:`Event` (a valid prediction event, contract section 2)
and :class:`Rejection` (why an input is not one, with a machine-readable ``code``), plus the
compact JSON codec that checkpoints use for queued events.

>>> ev = Event(1700000000.0, "m", y_true=1, score=0.9)
>>> decode_event(encode_event(ev)) == ev
True
>>> Rejection("missing field 'ts'", "ts", code="missing_field").code
'missing_field'
"""
from __future__ import annotations

from typing import Any

__all__ = ["EVENT_CODEC", "REJECTION_CODES", "Event", "Rejection", "decode_event", "encode_event"]


class Event:
    """One parsed prediction event. Fields a task does not use are None.

    ``y_true``: int 0/1 (binary), a class (multiclass), a label (labels) or a float
    (regression); ``score``: float (binary); ``scores``: tuple of floats aligned with the
    parser's classes (multiclass); ``y_pred``: label or float (labels, regression).
    """

    __slots__ = ("ts", "model", "segment", "y_true", "score", "scores", "y_pred", "weight", "id")  # noqa: RUF023 - contract order

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
        id: str | None = None,
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


#: machine-readable rejection codes (``Rejection.code``), stable across releases:
#: ``invalid_json`` (undecodable value: invalid JSON or UTF-8, nested too deep), ``missing_field``,
#: ``bad_type`` (a field of the wrong JSON type), ``bad_value`` (right type, unusable value:
#: a '|' in a key, a lone surrogate, wrong number of scores, mixed label kinds, y_true not 0/1),
#: ``out_of_range`` (a number or string beyond its bound), ``unknown_label`` (not one of the
#: configured classes/labels), ``unparseable`` (the parser's safety net). The windows and the
#: pipeline add ``late``, ``future``, ``key_limit``, ``kind_mismatch`` and ``tombstone``.
REJECTION_CODES = ("invalid_json", "missing_field", "bad_type", "bad_value", "out_of_range", "unknown_label",
                   "unparseable", "late", "future", "key_limit", "kind_mismatch", "tombstone")


class Rejection:
    """Why an input is not a valid event: ``reason`` (short, stable text), ``code`` (one of
    :data:`REJECTION_CODES`), ``field`` (as named in the input, None when the whole value is at
    fault) and, for array messages, the ``index`` of the element."""

    __slots__ = ("code", "field", "index", "reason")

    def __init__(self, reason: str, field: str | None = None, index: int | None = None,
                 code: str = "bad_value") -> None:
        self.reason = reason
        self.field = field
        self.index = index
        self.code = code

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Rejection:
            return NotImplemented
        return (self.reason, self.field, self.index) == (other.reason, other.field, other.index)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return self.reason if self.index is None else f"[{self.index}] {self.reason}"

    def __repr__(self) -> str:
        return (f"Rejection(reason={self.reason!r}, field={self.field!r}, index={self.index!r}, "
                f"code={self.code!r})")


def encode_event(ev: Event) -> list:
    """An event as a compact JSON list (field order of ``Event.__slots__``)."""
    return [ev.ts, ev.model, ev.segment, ev.y_true, ev.score,
            None if ev.scores is None else list(ev.scores), ev.y_pred, ev.weight, ev.id]


def decode_event(values: list) -> Event:
    """Inverse of :func:`encode_event`; ValueError for anything else."""
    if not isinstance(values, list) or len(values) != 9:
        raise ValueError(f"queued event must be a list of 9 fields, got {values!r:.80}")
    ts, model, segment, y_true, score, scores, y_pred, weight, id_ = values
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not isinstance(model, str) \
            or not isinstance(segment, str):
        raise ValueError(  # noqa: TRY004 - one error type for every malformed checkpoint
            f"queued event needs a numeric ts and string model/segment, got {values!r:.80}")
    if scores is not None and not isinstance(scores, list):
        raise ValueError(f"queued event scores must be a list, got {scores!r:.80}")
    return Event(float(ts), model, segment, y_true, score, None if scores is None else tuple(scores), y_pred,
                 weight, id_)


#: ``(encode, decode)`` for :class:`~streammetrics.stream.windows.WindowManager`'s ``event_codec``
EVENT_CODEC = (encode_event, decode_event)
