"""Parsing delayed-label streams: labelled predictions exactly as EventParser, predictions
awaiting a label, label events; rejections name the field."""
from __future__ import annotations

import pytest

from streammetrics.events.parser import Event, EventParser, Rejection
from streammetrics.stream.label_events import DelayedEventParser
from streammetrics.stream.labels import Label

CASES = {
    "binary": ({"score": 0.25}, 1, 0.0),
    "multiclass": ({"scores": [0.1, 0.9]}, "b", 0.0),
    "labels": ({"y_pred": "x"}, "y", 0.0),
    "regression": ({"y_pred": 2.5}, 3.25, 0.0),
}


def parser(task: str, **kw) -> DelayedEventParser:
    return DelayedEventParser(task, classes=["a", "b"] if task == "multiclass" else None, **kw)


@pytest.mark.parametrize("task", list(CASES))
def test_three_kinds_per_task(task):
    pred, truth, _ = CASES[task]
    p = parser(task)
    base = EventParser(task, classes=p.classes)
    labelled = {"ts": 5, "model": "m", "id": "a", "y_true": truth, **pred}
    assert p.parse(labelled) == base.parse(labelled)
    awaiting = p.parse({"ts": 5, "model": "m", "id": "a", **pred})
    assert isinstance(awaiting, Event) and awaiting.y_true is None and awaiting.id == "a"
    expected = base.parse(labelled)
    expected.y_true = None
    assert awaiting == expected
    assert p.parse({"id": "a", "y_true": truth, "ts": "1970-01-01T00:00:07Z", "weight": 3}) == Label("a", truth, 7.0)


@pytest.mark.parametrize(("obj", "field"), [
    ({"ts": 1, "model": "m", "score": 0.5}, "id"),  # awaiting, no id
    ({"ts": 1, "model": "m", "score": "x", "id": "a"}, "score"),
    ({"id": "a", "ts": 1}, "y_true"),  # a label without its truth
    ({"y_true": 1, "ts": 1}, "id"),
    ({"id": "a", "y_true": 2, "ts": 1}, "y_true"),  # not a binary truth
    ({"id": "a", "y_true": 1}, "ts"),
    ({"id": ["a"], "y_true": 1, "ts": 1}, "id"),
])
def test_rejections_name_the_field(obj, field):
    r = parser("binary").parse(obj)
    assert isinstance(r, Rejection) and r.field == field, r


def test_labels_task_checks_the_prediction_and_names_it():
    p = DelayedEventParser("labels", classes=["x", "y"])
    r = p.parse({"ts": 1, "model": "m", "y_pred": "z", "id": "a"})
    assert isinstance(r, Rejection) and r.field == "y_pred" and "y_pred" in r.reason
    assert isinstance(p.parse({"id": "a", "y_true": "z", "ts": 1}), Rejection)


def test_field_remapping_and_arrays():
    p = DelayedEventParser("binary", fields={"y_true": "label", "id": "request", "ts": "time"})
    out = p.parse_value(b'[{"time": 1, "model": "m", "score": 0.5, "request": "r1"}, '
                        b'{"request": "r1", "label": true, "time": 2}, {"time": 3}]')
    assert out[0].id == "r1" and out[0].y_true is None
    assert out[1] == Label("r1", 1, 2.0)
    assert isinstance(out[2], Rejection) and out[2].index == 2
    assert DelayedEventParser.extending(EventParser("regression")).parse({"id": "a", "y_true": 1, "ts": 0}) == \
        Label("a", 1.0, 0.0)


def test_never_raises():
    p = parser("multiclass")
    for junk in (None, 1, "x", [], {"scores": {"a": 1}}, {"id": 1, "y_true": "a", "ts": 1e300}):
        assert isinstance(p.parse(junk), (Rejection, Label, Event))
