"""The service's fast path for the common message: one valid binary-task prediction event.

:meth:`Pipeline.process <streammetrics.stream.pipeline.Pipeline.process>` decodes a message,
runs the general field parser (every task, remapped names, ISO times, precise rejection
reasons) and applies the event. :class:`BinaryFastPath` does the same for the message most
producers send: a JSON object whose fields already have their canonical types (``ts`` an int or
float of epoch seconds, ``model`` / ``segment`` / ``id`` ASCII strings, ``y_true`` 0/1 or
true/false, ``score`` / ``weight`` floats). Such an event is checked with a handful of class
and range tests and handed to :meth:`Pipeline.process_event`; anything else (a tombstone, an
array, invalid JSON, another type or an out-of-range value, a label event, a prediction
awaiting its label) is *declined* and the caller processes the message the general way. The
fast path never refuses anything itself, so every rejection keeps the general parser's code and
reason.

Exactness: an event the fast path accepts is equal, field by field and type by type, to the one
:meth:`EventParser.parse <streammetrics.events.parser.EventParser.parse>` builds from the same
decoded object (property-tested in ``tests/consumers/test_fastpath.py``), and it is applied by
the same ``process_event`` call the general path ends in, so windows, counters and snapshots do
not depend on which path a message took.

>>> from streammetrics.stream.pipeline import Pipeline, PipelineConfig
>>> pipe = Pipeline(PipelineConfig(window=60.0, include_state=False))
>>> fast = BinaryFastPath.for_pipeline(pipe)
>>> fast.event(b'{"ts": 1767225601, "model": "m", "y_true": true, "score": 0.9}')
Event(ts=1767225601.0, model='m', segment='', y_true=1, score=0.9, weight=1.0)
>>> fast.event(b'{"ts": "2026-01-01T00:00:01Z", "model": "m", "y_true": 1, "score": 0.9}') is None
True
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any, Optional, Union

from streammetrics.events.decoding import MAX_NESTING
from streammetrics.events.fields import MAX_NAME_LENGTH, MAX_WEIGHT
from streammetrics.events.records import Event
from streammetrics.stream.pipeline import Pipeline

__all__ = ["BinaryFastPath", "plain_event_decoder"]

#: epoch seconds the parser accepts: years 1 to 9999 (see :mod:`streammetrics.events.parser`)
TS_MIN = -62135596800.0
TS_MAX = 253402300800.0
_INF = float("inf")


class BinaryFastPath:
    """Decode-and-check of single binary-task events; see the module docstring.

    ``decode``: the pipeline's msgspec decoder (the fast path needs it: without msgspec every
    message takes the general path). ``fields``: the parser's canonical -> input field names.
    :attr:`event` is a closure over both (the per-message hot path).
    """

    __slots__ = ("event",)

    def __init__(self, fields: dict[str, str]) -> None:
        self.event: Callable[[Any], Event | None] = _event_reader(tuple(sorted(fields.items())))

    @classmethod
    def for_pipeline(cls, pipeline: Pipeline) -> BinaryFastPath | None:
        """The fast path of ``pipeline``'s parser, or None where it does not apply (another task,
        a parser with relaxed key rules, no msgspec, slices: their fields are read by the slicing
        layer's parse)."""
        parser = pipeline.parser
        decode = parser.fast_decode
        if parser.task != "binary" or decode is None or not getattr(parser, "require_key", False):
            return None
        if pipeline.config.slicing is not None:
            return None
        return cls(dict(parser.fields))


def plain_event_decoder(fields: dict[str, str] | None = None) -> Callable[[bytes], Any]:
    """msgspec's decoder of a plain binary event (``fields``: canonical -> input names): a struct
    with the event's fields, type- and bound-checked while decoding; raises on anything else.
    Also the typed bare loop's decoder in ``benchmarks/bench_consumer.py``."""
    import msgspec
    from msgspec import Meta

    names = {**{key: key for key in ("ts", "model", "segment", "y_true", "score", "weight", "id")}, **(fields or {})}
    # msgspec checks the JSON types and the numeric and length bounds while decoding (an int is
    # accepted for a float field, converted as the parser converts it) and skips unknown fields
    name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_LENGTH)]
    optional_name = Optional[Annotated[str, Meta(max_length=MAX_NAME_LENGTH)]]
    canonical: dict[str, Any] = {
        "ts": Annotated[float, Meta(ge=TS_MIN, lt=TS_MAX)],
        "model": name,
        "y_true": Union[Annotated[int, Meta(ge=0, le=1)], bool],
        "score": float,
        "segment": (optional_name, None),
        "weight": (Optional[Annotated[float, Meta(ge=0.0, le=MAX_WEIGHT)]], None),
        "id": (optional_name, None),
    }
    plain = msgspec.defstruct(
        "PlainBinaryEvent", [(key, *kind) if isinstance(kind, tuple) else (key, kind)
                             for key, kind in canonical.items()],
        rename={key: names[key] for key in canonical}, forbid_unknown_fields=False)
    return msgspec.json.Decoder(plain).decode


@lru_cache(maxsize=16)
def _event_reader(fields: tuple[tuple[str, str], ...]) -> Callable[[Any], Event | None]:
    """The reader of one field mapping, built once: building the decoder's struct type costs
    ~0.1 ms, and the service asks for the fast path at every poll batch."""
    decode = plain_event_decoder(dict(fields))  # a value whose decoding fails for any reason is declined
    max_nesting, inf, new_event = MAX_NESTING, _INF, Event

    def event(value: Any) -> Event | None:
        """The :class:`Event` of a message value holding one plain valid binary event, else None
        (the caller then takes the general path, which also decides every rejection)."""
        # ASCII only: msgspec skips unknown fields without checking their UTF-8, which the general
        # path refuses (invalid_json); short: the general path checks nesting before decoding
        if value.__class__ is not bytes or len(value) > max_nesting or not value.isascii():
            return None
        try:
            ev = decode(value)
        except Exception:  # noqa: BLE001 - the general path decides, with its exact reason
            return None
        model, segment, ident = ev.model, ev.segment, ev.id
        if "|" in model or not model.isascii():  # (non-ASCII names: the general path)
            return None
        if segment is None:
            segment = ""
        elif "|" in segment or not segment.isascii():
            return None
        if ident is not None and not ident.isascii():
            return None
        score = ev.score
        if not -inf < score < inf:
            return None
        y_true = ev.y_true
        if y_true.__class__ is bool:
            y_true = 1 if y_true else 0
        weight = ev.weight
        return new_event(ev.ts, model, segment, y_true, score, None, None, 1.0 if weight is None else weight, ident)

    return event
