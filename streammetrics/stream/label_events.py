"""Parsing of streams that carry delayed labels (contract section 5): each JSON object is one of

* a **prediction with its label** (``y_true`` present): an :class:`~streammetrics.events.parser.Event`,
  exactly as :class:`~streammetrics.events.parser.EventParser` parses it;
* a **prediction awaiting its label** (no ``y_true``, or ``null``): an ``Event`` with
  ``y_true=None``; it needs an ``id``; everything else is checked as for a labelled event;
* a **label event** (no ``score``, ``scores``, ``y_pred`` or ``model``; an ``id`` or ``y_true``): a
  :class:`~streammetrics.stream.labels.Label` ``(id, y_true, ts)``; ``id``, ``y_true`` (checked
  as the task's ground truth) and ``ts`` are required, other fields are ignored.

Field names follow the parser's ``fields=`` remapping. Like ``EventParser`` it never raises on
input data: anything else is a :class:`~streammetrics.events.parser.Rejection` naming the field.

>>> p = DelayedEventParser("binary")
>>> p.parse({"ts": 10, "model": "m", "score": 0.9, "id": "a"})
Event(ts=10.0, model='m', segment='', score=0.9, weight=1.0, id='a')
>>> p.parse({"ts": 20, "id": "a", "y_true": 1})
Label(id='a', y_true=1, ts=20.0)
>>> p.parse({"ts": 10, "model": "m", "score": 0.9}).reason
"a prediction without field 'y_true' needs field 'id' (to meet its label)"
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from streammetrics.events.parser import Event, EventParser, Rejection
from streammetrics.stream.labels import Label

__all__ = ["DelayedEventParser"]


class DelayedEventParser:
    """Predictions (labelled or awaiting a label) and label events; see the module docstring.

    ``parse(obj)`` takes one decoded value, ``parse_value(raw)`` a JSONL line or message value
    (one object or an array of them), as :class:`EventParser` does.
    """

    def __init__(self, task: str, classes: Sequence[Hashable] | None = None,
                 fields: Mapping[str, str] | None = None, *, fast_json: bool = True,
                 base: EventParser | None = None) -> None:
        # ``base``: an EventParser to extend (its parse then answers for this parser too)
        self.base = EventParser(task, classes=classes, fields=fields, fast_json=fast_json) if base is None else base
        task = self.base.task
        self.task = task
        self.classes = self.base.classes
        f = self.base.fields
        self._inner = self.base.parse
        self._true, self._id, self._ts = f["y_true"], f["id"], f["ts"]
        self._pred = f["y_pred"]
        self._prediction_fields = (f["score"], f["scores"], f["y_pred"])
        # what a label event lacks, filled in so that the inner parser checks the rest
        self._model = f["model"]
        if task == "binary":
            self._fill_pred: dict[str, Any] = {f["score"]: 0.0}
        elif task == "multiclass":
            self._fill_pred = {f["scores"]: [0.0] * len(self.classes or ())}
        elif task == "regression":
            self._fill_pred = {f["y_pred"]: 0.0}
        else:
            self._fill_pred = {}  # labels: y_pred = y_true (same kind)
        self._fill_true = {"binary": 0, "regression": 0.0}.get(task)
        if task == "multiclass":
            self._fill_true = (self.classes or [None])[0]
        # parse_value decodes and then calls self.base.parse on each object: route it here
        self.base.parse = self.parse  # type: ignore[method-assign,assignment]  # it may also return a Label

    def __getattr__(self, name: str) -> Any:
        """Everything else (``fields``, ``fast_decode``, ...) is the base parser's."""
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    @classmethod
    def extending(cls, base: EventParser) -> DelayedEventParser:
        """A parser of delayed-label streams on top of ``base`` (same task, classes, fields);
        ``base.parse`` and ``base.parse_value`` then answer for it too."""
        return cls(base.task, base=base)

    def parse(self, obj: Any) -> Event | Label | Rejection:
        """One decoded JSON value -> Event, Label or Rejection; never raises."""
        if obj.__class__ is not dict:
            return self._inner(obj)  # not an object: the inner parser says so
        a, b, c = self._prediction_fields
        is_prediction = a in obj or b in obj or c in obj
        if is_prediction and obj.get(self._true) is not None:
            return self._inner(obj)  # a labelled prediction
        if not is_prediction and (self._model in obj or (self._id not in obj and self._true not in obj)):
            return self._inner(obj)  # neither kind: the prediction's rules say what is missing
        try:
            return self._awaiting(obj) if is_prediction else self._label(obj)
        except Exception as exc:  # noqa: BLE001 - a safety net: input data never raises
            return Rejection(f"unparseable event ({type(exc).__name__})", code="bad_value")

    def parse_value(self, value: bytes | bytearray | memoryview | str) -> list[Any]:
        """A JSONL line or message value -> list of Event, Label or Rejection; never raises."""
        return self.base.parse_value(value)

    def _awaiting(self, obj: dict[str, Any]) -> Event | Rejection:
        probe = dict(obj)
        if self.task == "labels":
            probe[self._true] = obj.get(self._pred)
        else:
            probe[self._true] = self._fill_true
        result = self._inner(probe)
        if result.__class__ is Rejection:
            if result.field == self._true:  # only y_pred's value can make the filled-in truth fail
                return Rejection(result.reason.replace(f"'{self._true}'", f"'{self._pred}'"), self._pred,
                                 code=result.code)
            return result
        if result.id is None:  # type: ignore[union-attr]
            return Rejection(f"a prediction without field '{self._true}' needs field '{self._id}' "
                             f"(to meet its label)", self._id, code="missing_field")
        result.y_true = None  # type: ignore[union-attr]
        return result

    def _label(self, obj: dict[str, Any]) -> Label | Rejection:
        if obj.get(self._true) is None:
            return Rejection(f"missing field '{self._true}' (a label event has '{self._id}', "
                             f"'{self._true}' and '{self._ts}')", self._true, code="missing_field")
        probe = {k: obj[k] for k in (self._ts, self._id, self._true) if k in obj}
        probe[self._model] = "label"
        probe.update(self._fill_pred)
        if self.task == "labels":
            probe[self._pred] = obj[self._true]
        result = self._inner(probe)
        if result.__class__ is Rejection:
            return result
        if result.id is None:  # type: ignore[union-attr]
            return Rejection(f"a label event needs field '{self._id}'", self._id, code="missing_field")
        return Label(result.id, result.y_true, result.ts)  # type: ignore[union-attr]
