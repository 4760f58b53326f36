"""EventParser: valid events per task, every rejection reason, remapping, timestamps,
array messages, and fuzzing (parse never raises, never returns anything but Event/Rejection)."""
from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics.events.parser import (
    MAX_NAME_LENGTH,
    MAX_NESTING,
    Event,
    EventParser,
    Rejection,
)

TS = 1_700_000_000.25
BASE = {"ts": TS, "model": "m1", "segment": "eu", "id": "p1"}
VALID = {
    "binary": {**BASE, "y_true": 1, "score": 0.8},
    "multiclass": {**BASE, "y_true": "cat", "scores": {"cat": 0.7, "dog": 0.2, "bird": 0.1}},
    "labels": {**BASE, "y_true": "cat", "y_pred": "dog", "weight": 2.0},
    "regression": {**BASE, "y_true": 3.5, "y_pred": 2.0},
}
CLASSES = ["cat", "dog", "bird"]


def parser(task: str, **kw) -> EventParser:
    if task == "multiclass":
        kw.setdefault("classes", CLASSES)
    return EventParser(task, **kw)


def event(task: str, **changes):
    obj = dict(VALID[task])
    for k, v in changes.items():
        if v is DROP:
            obj.pop(k, None)
        else:
            obj[k] = v
    return parser(task).parse(obj)


DROP = object()


# --------------------------------------------------------------------------- valid events
def test_binary_event_fields():
    ev = event("binary")
    assert ev.__class__ is Event
    assert (ev.ts, ev.model, ev.segment, ev.y_true, ev.score, ev.weight, ev.id) == (TS, "m1", "eu", 1, 0.8, 1.0, "p1")
    assert ev.scores is None and ev.y_pred is None and ev.key == ("m1", "eu")
    for raw, want in [(True, 1), (False, 0), (0, 0), (1.0, 1), (0.0, 0)]:
        got = event("binary", y_true=raw).y_true
        assert got == want and got.__class__ is int
    assert event("binary", score=-3).score == -3.0 and event("binary", score=-3).score.__class__ is float
    assert event("binary", score=12.5).score == 12.5  # any finite real (a margin)


def test_multiclass_scores_object_or_array_normalised_to_class_order():
    a = event("multiclass", scores={"bird": 0.1, "dog": 0.2, "cat": 0.7})
    b = event("multiclass", scores=[0.7, 0.2, 0.1])
    c = event("multiclass", scores=[0.7, 0.2, 0])  # ints are numbers too
    assert a.scores == b.scores == (0.7, 0.2, 0.1) and a.scores.__class__ is tuple
    assert c.scores == (0.7, 0.2, 0.0) and all(v.__class__ is float for v in c.scores)
    assert a.y_true == "cat"
    # y_pred is ignored for multiclass (the prediction is the arg-max of the scores)
    assert event("multiclass", y_pred="not-a-class").__class__ is Event
    # integer classes: JSON object keys are strings
    p = EventParser("multiclass", classes=[0, 1, 2])
    ev = p.parse({"ts": 1, "model": "m", "y_true": 2, "scores": {"0": 0.5, "1": 0.25, "2": 0.25}})
    assert ev.y_true == 2 and ev.scores == (0.5, 0.25, 0.25)
    assert p.parse({"ts": 1, "model": "m", "y_true": 2.0, "scores": [1, 0, 0]}).y_true == 2
    bad = p.parse({"ts": 1, "model": "m", "y_true": "2", "scores": [1, 0, 0]})
    assert bad.reason == "field 'y_true' must be one of the classes [0, 1, 2], got '2'"
    assert p.parse({"ts": 1, "model": "m", "y_true": True, "scores": [1, 0, 0]}).__class__ is Rejection


def test_labels_and_regression_events():
    ev = event("labels")
    assert (ev.y_true, ev.y_pred, ev.weight) == ("cat", "dog", 2.0)
    lab = event("labels", y_true=3.0, y_pred=2)
    assert (lab.y_true, lab.y_pred) == (3, 2) and lab.y_true.__class__ is int
    assert event("labels", y_true=2.5, y_pred=1).y_true == 2.5
    assert event("labels", y_true=False, y_pred=True).y_pred is True
    fixed = EventParser("labels", classes=["cat", "dog"])
    assert fixed.parse(VALID["labels"]).__class__ is Event
    r = fixed.parse({**VALID["labels"], "y_pred": "cow"})
    assert (r.reason, r.field) == ("field 'y_pred' must be one of ['cat', 'dog'], got 'cow'", "y_pred")
    reg = event("regression", y_true=3, y_pred=-1e300)
    assert (reg.y_true, reg.y_pred) == (3.0, -1e300) and reg.y_true.__class__ is float


def test_optional_fields_defaults_and_nulls():
    for task in VALID:
        ev = event(task, segment=DROP, weight=DROP, id=DROP)
        assert (ev.segment, ev.weight, ev.id) == ("", 1.0, None)
        ev = event(task, segment=None, weight=None, id=None)
        assert (ev.segment, ev.weight, ev.id) == ("", 1.0, None)
    assert event("binary", weight=0).weight == 0.0
    assert event("binary", weight=3).weight.__class__ is float
    assert event("binary", id=12345).id == "12345"
    assert event("binary", extra_field={"nested": [1, 2]}).__class__ is Event


# --------------------------------------------------------------------------- timestamps
@pytest.mark.parametrize(
    "ts, want",
    [
        (1700000000, 1700000000.0),
        (1700000000.5, 1700000000.5),
        (0, 0.0),
        (-86400, -86400.0),
        ("2023-11-14T22:13:20Z", 1700000000.0),
        ("2023-11-14T22:13:20z", 1700000000.0),
        ("2023-11-14T22:13:20+00:00", 1700000000.0),
        ("2023-11-14T23:13:20.250+01:00", 1700000000.25),
        ("2023-11-14T22:13:20", 1700000000.0),      # no zone: UTC
        ("2023-11-14 22:13:20.5", 1700000000.5),
        ("2023-11-14", 1699920000.0),
        ("0001-01-01T00:00:00Z", -62135596800.0),
    ],
)
def test_ts_epoch_and_iso(ts, want):
    ev = event("binary", ts=ts)
    assert ev.ts == want and ev.ts.__class__ is float


def test_ts_iso_without_zone_is_utc_not_local(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")  # make local time differ from UTC
    time.tzset()
    try:
        assert datetime(2024, 6, 1, 12).timestamp() != datetime(2024, 6, 1, 12, tzinfo=timezone.utc).timestamp()
        naive = event("binary", ts="2024-06-01T12:00:00").ts
        assert naive == datetime(2024, 6, 1, 12, tzinfo=timezone.utc).timestamp()
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "ts, reason",
    [
        (True, "field 'ts' must be epoch seconds or an ISO-8601 string, got true"),
        (None, "field 'ts' must be epoch seconds or an ISO-8601 string, got null"),
        (float("nan"), "field 'ts' must be epoch seconds or an ISO-8601 string, got nan"),
        (float("inf"), "field 'ts' must be epoch seconds or an ISO-8601 string, got inf"),
        ("yesterday", "field 'ts' must be epoch seconds or an ISO-8601 string, got 'yesterday'"),
        ("1700000000", "field 'ts' must be epoch seconds or an ISO-8601 string, got '1700000000'"),
        ("2024-13-01T00:00:00Z", ("field 'ts' must be epoch seconds or an ISO-8601 string, got "
                                  "'2024-13-01T00:00:00Z' (month must be in 1..12)")),
        ([1], "field 'ts' must be epoch seconds or an ISO-8601 string, got an array"),
        ({"s": 1}, "field 'ts' must be epoch seconds or an ISO-8601 string, got an object"),
        (1700000000000, ("field 'ts' is out of range (epoch seconds of years 1-9999), got 1700000000000 "
                        "(epoch milliseconds?)")),
        (1e300, "field 'ts' is out of range (epoch seconds of years 1-9999), got 1e+300"),
        (10**400, "field 'ts' must be epoch seconds or an ISO-8601 string, got a 1329-bit integer"),
        ("x" * 100, "field 'ts' must be epoch seconds or an ISO-8601 string, got '" + "x" * 40 + "'..."),
    ],
)
def test_ts_rejections(ts, reason):
    r = event("binary", ts=ts)
    assert r.__class__ is Rejection
    assert (r.reason, r.field) == (reason, "ts")


# --------------------------------------------------------------------------- rejections
REJECTIONS = [
    # (task, changes, reason, field)
    ("binary", {"ts": DROP}, "missing field 'ts'", "ts"),
    ("binary", {"model": DROP}, "missing field 'model'", "model"),
    ("binary", {"model": ""}, "field 'model' must be a non-empty string, got ''", "model"),
    ("binary", {"model": None}, "field 'model' must be a non-empty string, got null", "model"),
    ("binary", {"model": 7}, "field 'model' must be a non-empty string, got 7", "model"),
    ("binary", {"model": "m" * (MAX_NAME_LENGTH + 1)},
     f"field 'model' must be at most {MAX_NAME_LENGTH} characters, got {MAX_NAME_LENGTH + 1}", "model"),
    ("binary", {"model": "m\ud800"}, "field 'model' must be valid Unicode, got a lone surrogate", "model"),
    ("binary", {"segment": 3}, "field 'segment' must be a string, got 3", "segment"),
    ("binary", {"segment": "\udfff"}, "field 'segment' must be valid Unicode, got a lone surrogate", "segment"),
    ("binary", {"segment": ["eu"]}, "field 'segment' must be a string, got an array", "segment"),
    ("binary", {"weight": -1}, "field 'weight' must be a number from 0 to 1e+15, got -1", "weight"),
    ("binary", {"weight": -0.5}, "field 'weight' must be a number from 0 to 1e+15, got -0.5", "weight"),
    ("binary", {"weight": True}, "field 'weight' must be a number from 0 to 1e+15, got true", "weight"),
    ("binary", {"weight": "2"}, "field 'weight' must be a number from 0 to 1e+15, got '2'", "weight"),
    ("binary", {"weight": float("nan")}, "field 'weight' must be a number from 0 to 1e+15, got nan", "weight"),
    ("binary", {"weight": float("inf")}, "field 'weight' must be a number from 0 to 1e+15, got inf", "weight"),
    ("binary", {"id": 1.5}, "field 'id' must be a string, got 1.5", "id"),
    ("binary", {"id": True}, "field 'id' must be a string, got true", "id"),
    ("binary", {"id": "i" * (MAX_NAME_LENGTH + 1)},
     f"field 'id' must be at most {MAX_NAME_LENGTH} characters, got {MAX_NAME_LENGTH + 1}", "id"),
    ("binary", {"y_true": DROP}, "missing field 'y_true'", "y_true"),
    ("binary", {"y_true": 2}, "field 'y_true' must be 0, 1, true or false, got 2", "y_true"),
    ("binary", {"y_true": "1"}, "field 'y_true' must be 0, 1, true or false, got '1'", "y_true"),
    ("binary", {"y_true": 0.5}, "field 'y_true' must be 0, 1, true or false, got 0.5", "y_true"),
    ("binary", {"y_true": None}, "field 'y_true' must be 0, 1, true or false, got null", "y_true"),
    ("binary", {"score": DROP}, "missing field 'score'", "score"),
    ("binary", {"score": "abc"}, "field 'score' must be a finite number, got 'abc'", "score"),
    ("binary", {"score": None}, "field 'score' must be a finite number, got null", "score"),
    ("binary", {"score": False}, "field 'score' must be a finite number, got false", "score"),
    ("binary", {"score": float("nan")}, "field 'score' must be a finite number, got nan", "score"),
    ("binary", {"score": float("-inf")}, "field 'score' must be a finite number, got -inf", "score"),
    ("binary", {"score": 10**400}, "field 'score' must be a finite number, got a 1329-bit integer", "score"),
    ("multiclass", {"y_true": "cow"},
     "field 'y_true' must be one of the classes ['cat', 'dog', 'bird'], got 'cow'", "y_true"),
    ("multiclass", {"y_true": ["cat"]},
     "field 'y_true' must be one of the classes ['cat', 'dog', 'bird'], got an array", "y_true"),
    ("multiclass", {"scores": DROP}, "missing field 'scores'", "scores"),
    ("multiclass", {"scores": 0.7}, "field 'scores' must be an array or an object of class scores, got 0.7", "scores"),
    ("multiclass", {"scores": [0.7, 0.3]}, "field 'scores' must have 3 values (one per class), got 2", "scores"),
    ("multiclass", {"scores": [0.7, 0.3, 0, 0]}, "field 'scores' must have 3 values (one per class), got 4",
     "scores"),
    ("multiclass", {"scores": [0.7, "x", 0.1]}, "field 'scores' must hold finite numbers, got 'x' for class 'dog'",
     "scores"),
    ("multiclass", {"scores": [0.7, 0.2, float("nan")]},
     "field 'scores' must hold finite numbers, got nan for class 'bird'", "scores"),
    ("multiclass", {"scores": [1e308, 1e308, True]},
     "field 'scores' must hold finite numbers, got true for class 'bird'", "scores"),
    ("multiclass", {"scores": {"cat": 0.7, "dog": 0.3}}, "field 'scores' is missing class 'bird'", "scores"),
    ("multiclass", {"scores": {"cat": 0.7, "dog": 0.2, "cow": 0.1}},
     "field 'scores' has unknown class 'cow'; classes are ['cat', 'dog', 'bird']", "scores"),
    ("multiclass", {"scores": {"cat": 0.7, "dog": 0.2, "bird": None}},
     "field 'scores' must hold finite numbers, got null for class 'bird'", "scores"),
    ("labels", {"y_pred": DROP}, "missing field 'y_pred'", "y_pred"),
    ("labels", {"y_true": None},
     "field 'y_true' must be a label (string, integer, boolean or finite number), got null", "y_true"),
    ("labels", {"y_pred": {"a": 1}},
     "field 'y_pred' must be a label (string, integer, boolean or finite number), got an object", "y_pred"),
    ("labels", {"y_pred": 3}, ("fields 'y_true' and 'y_pred' must be labels of one kind (strings, numbers or "
                              "booleans), got 'cat' and 3"), "y_pred"),
    ("labels", {"y_true": True}, ("fields 'y_true' and 'y_pred' must be labels of one kind (strings, numbers or "
                                 "booleans), got true and 'dog'"), "y_pred"),
    ("labels", {"y_pred": float("inf")},
     "field 'y_pred' must be a label (string, integer, boolean or finite number), got inf", "y_pred"),
    ("regression", {"y_true": "3.5"}, "field 'y_true' must be a finite number, got '3.5'", "y_true"),
    ("regression", {"y_true": True}, "field 'y_true' must be a finite number, got true", "y_true"),
    ("regression", {"y_pred": float("nan")}, "field 'y_pred' must be a finite number, got nan", "y_pred"),
    ("regression", {"y_pred": DROP}, "missing field 'y_pred'", "y_pred"),
]


@pytest.mark.parametrize("task, changes, reason, field", REJECTIONS)
def test_every_rejection_reason(task, changes, reason, field):
    r = event(task, **changes)
    assert r.__class__ is Rejection, r
    assert (r.reason, r.field, r.index) == (reason, field, None)


@pytest.mark.parametrize("value", [None, 1, "x", True, [VALID["binary"]], 2.5])
def test_non_object_events(value):
    r = parser("binary").parse(value)
    assert r.__class__ is Rejection and r.field is None
    assert r.reason.startswith("event must be a JSON object, got ")


def test_long_and_huge_values_are_described_briefly():
    r = event("binary", score="s" * 10_000)
    assert r.reason == "field 'score' must be a finite number, got '" + "s" * 40 + "'..."
    p = EventParser("multiclass", classes=list(range(50)))
    r = p.parse({"ts": 1, "model": "m", "y_true": 99, "scores": [0.0] * 50})
    assert r.reason == ("field 'y_true' must be one of the classes [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (50 classes)], "
                        "got 99")


# --------------------------------------------------------------------------- remapping
def test_field_remapping_reads_and_reports_the_input_names():
    p = EventParser("binary", fields={"y_true": "label", "score": "p", "model": "model_version", "ts": "time"})
    obj = {"time": "2023-11-14T22:13:20Z", "model_version": "v2", "label": 0, "p": 0.25,
           "y_true": "ignored", "score": "ignored"}
    ev = p.parse(obj)
    assert (ev.ts, ev.model, ev.y_true, ev.score) == (1700000000.0, "v2", 0, 0.25)
    r = p.parse({k: v for k, v in obj.items() if k != "label"})
    assert (r.reason, r.field) == ("missing field 'label'", "label")
    r = p.parse({**obj, "p": "high"})
    assert (r.reason, r.field) == ("field 'p' must be a finite number, got 'high'", "p")
    r = p.parse({**obj, "time": None})
    assert r.field == "time" and r.reason.startswith("field 'time' must be")
    # swapping two names is fine; two fields reading one input name is a configuration error
    swapped = EventParser("labels", fields={"y_true": "y_pred", "y_pred": "y_true"})
    ev = swapped.parse({"ts": 1, "model": "m", "y_true": "a", "y_pred": "b"})
    assert (ev.y_true, ev.y_pred) == ("b", "a")
    with pytest.raises(ValueError, match="both read the input field 'label'"):
        EventParser("labels", fields={"y_true": "label", "y_pred": "label"})
    with pytest.raises(ValueError, match="both read the input field 'score'"):
        EventParser("binary", fields={"y_true": "score"})
    with pytest.raises(ValueError, match="unknown field 'truth'"):
        EventParser("binary", fields={"truth": "label"})
    with pytest.raises(ValueError, match="non-empty string"):
        EventParser("binary", fields={"y_true": ""})


def test_configuration_errors():
    with pytest.raises(ValueError, match="task must be one of"):
        EventParser("ranking")
    with pytest.raises(ValueError, match="at least two classes"):
        EventParser("multiclass")
    with pytest.raises(ValueError, match="at least two classes"):
        EventParser("multiclass", classes=["a"])
    with pytest.raises(ValueError, match="duplicates"):
        EventParser("multiclass", classes=["a", "a"])
    with pytest.raises(ValueError, match="share the scores object key '1'"):
        EventParser("multiclass", classes=[1, "1"])
    with pytest.raises(ValueError, match="classes only apply"):
        EventParser("binary", classes=[0, 1])


def test_require_key_false_for_monitors():
    p = EventParser("regression", require_key=False)
    ev = p.parse({"y_true": 1, "y_pred": 2})
    assert (ev.ts, ev.model, ev.segment) == (0.0, "", "")
    assert p.parse({"y_true": 1, "y_pred": 2, "ts": "bad"}).field == "ts"
    assert p.parse({"y_true": 1, "y_pred": 2, "model": ""}).field == "model"


# --------------------------------------------------------------------------- parse_value
def test_parse_value_object_array_and_bad_values():
    p = parser("binary")
    good = json.dumps(VALID["binary"])
    for raw in (good, good.encode(), bytearray(good.encode()), memoryview(good.encode()),
                b"\xef\xbb\xbf" + good.encode(), good + "\n"):
        (ev,) = p.parse_value(raw)
        assert ev == event("binary")
    batch = json.dumps([VALID["binary"], {**VALID["binary"], "score": None}, 5, [VALID["binary"]]])
    out = p.parse_value(batch.encode())
    assert [o.__class__ for o in out] == [Event, Rejection, Rejection, Rejection]
    assert [o.index for o in out[1:]] == [1, 2, 3]
    assert out[1].reason == "field 'score' must be a finite number, got null" and str(out[1]).startswith("[1] ")
    assert out[2].reason == "event must be a JSON object, got 5"
    assert out[3].reason == "event must be a JSON object, got an array"
    assert p.parse_value(b"[]") == []
    cases = {
        b"": "invalid JSON: Expecting value at char 0",
        b"{\"ts\": 1,": "invalid JSON: Expecting property name enclosed in double quotes at char 9",
        b"{} {}": "invalid JSON: Extra data at char 3",
        b"\xff{}": "value is not valid UTF-8 (byte 0)",
        "{}".encode("utf-16"): "value is not valid UTF-8 (byte 0)",
        b"[" * 100_000: f"invalid JSON: nested deeper than {MAX_NESTING} levels",
        b"1" * 5000: "event must be a JSON object, got a 5000-digit integer",  # (was: invalid JSON: ValueError)
        b"null": "event must be a JSON object, got null",
        b"\"text\"": "event must be a JSON object, got 'text'",
        b"NaN": "event must be a JSON object, got nan",
    }
    for raw, reason in cases.items():
        (r,) = p.parse_value(raw)
        assert r.__class__ is Rejection and r.reason == reason and r.field is None, (raw[:20], r)


def test_event_round_trip_through_to_dict():
    for task in VALID:
        ev = event(task)
        again = parser(task).parse(json.loads(json.dumps(ev.to_dict())))
        assert again == ev and again is not ev
    assert "scores" in repr(event("multiclass")) and "Event(" in repr(event("binary"))
    assert repr(event("binary", score=None)).startswith("Rejection(")


# --------------------------------------------------------------------------- fuzzing
json_scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
                | st.text(max_size=12))
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
parsers = {task: parser(task) for task in VALID} | {
    "multiclass-int": EventParser("multiclass", classes=[0, 1, True]),
    "labels-fixed": EventParser("labels", classes=[0, "a", False], fields={"y_pred": "pred"}),
}


@given(st.sampled_from(sorted(parsers)), json_values)
def test_parse_never_raises_on_arbitrary_json(name, value):
    result = parsers[name].parse(value)
    assert result.__class__ in (Event, Rejection)
    if result.__class__ is Rejection:
        assert isinstance(result.reason, str) and len(result.reason) < 300


@given(st.sampled_from(sorted(VALID)), st.sampled_from(["ts", "model", "segment", "y_true", "score", "scores",
                                                          "y_pred", "weight", "id"]), json_values)
def test_corrupting_one_field_is_accepted_or_blamed_on_that_field(task, field, value):
    """A valid event with one field replaced: either an Event, or a Rejection naming that field."""
    obj = {**VALID[task], field: value}
    result = parser(task).parse(obj)
    if result.__class__ is Rejection:
        if "of one kind" in result.reason:  # y_true vs y_pred: blamed on y_pred
            assert field in ("y_true", "y_pred") and result.field == "y_pred"
        else:
            assert result.field == field, (result, obj)
    else:
        assert result.__class__ is Event
        assert isinstance(result.ts, float) and math.isfinite(result.ts)
        assert isinstance(result.model, str) and result.model
        assert isinstance(result.weight, float) and 0 <= result.weight < math.inf
        # whatever the parser accepts, the task's accumulator accepts too
        if task == "regression":
            sm.Regression().update(result.y_true, result.y_pred, result.weight)
        elif task == "labels":
            sm.ConfusionMatrix().update(result.y_true, result.y_pred, result.weight)
        elif task == "binary":
            assert result.y_true in (0, 1) and math.isfinite(result.score)
        else:
            assert len(result.scores) == 3 and all(math.isfinite(s) for s in result.scores)
        json.dumps(result.to_dict())  # keys and ids are JSON/UTF-8 safe
        result.model.encode("utf-8"), result.segment.encode("utf-8")


@given(st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
def test_parse_value_never_raises_on_arbitrary_bytes(raw):
    for name in ("binary", "multiclass"):
        out = parsers[name].parse_value(raw)
        assert isinstance(out, list) and all(o.__class__ in (Event, Rejection) for o in out)


def test_mapping_that_raises_is_a_rejection_not_an_exception():
    class Hostile(dict):
        def get(self, *a):
            raise RuntimeError("boom")

    r = parser("binary").parse(Hostile(VALID["binary"]))
    assert r.__class__ is Rejection and r.reason == "unparseable event (RuntimeError)"


@pytest.mark.parametrize("field,value,match", [
    ("model", "a|b", "must not contain '|'"),
    ("segment", "eu|west", "must not contain '|'"),
    ("weight", 1e16, "from 0 to 1e\\+15"),
])
def test_names_with_key_separator_and_huge_weights_are_rejected(field, value, match):
    event = {"ts": 1, "model": "m", "segment": "s", "y_true": 1, "score": 0.5, field: value}
    rejection = EventParser("binary").parse(event)
    assert isinstance(rejection, Rejection) and rejection.field == field
    assert re.search(match, rejection.reason)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@given(json_values, st.sampled_from(["", " ", "\n", "\r\n", " \t", "\x0c"]), st.sampled_from(["", " ", "\n", "\x0c"]),
       st.sampled_from(["", "x", "}", ",1"]))
def test_parse_value_decodes_exactly_like_json_loads(value, lead, trail, junk):
    text = lead + json.dumps(value) + trail + junk
    for fast_json in (False, True):
        parser = EventParser("binary", require_key=False, fast_json=fast_json)
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            [rejection] = parser.parse_value(text)
            assert isinstance(rejection, Rejection) and "invalid JSON" in rejection.reason
            continue
        expected = [parser.parse(x) for x in decoded] if isinstance(decoded, list) else [parser.parse(decoded)]
        got = parser.parse_value(text.encode())

        def key(item):
            return (item.reason, item.field) if isinstance(item, Rejection) else item.to_dict()

        assert [key(g) for g in got] == [key(e) for e in expected]


# --------------------------------------------------------------------------- msgspec, the optional decoder
def _exact(value):
    """A value with its types, float bits and key order spelled out (== on floats is too lenient)."""
    if isinstance(value, dict):
        return ("dict", [(k, _exact(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_exact(v) for v in value])
    if isinstance(value, float):
        return ("float", value.hex() if math.isfinite(value) else repr(value))
    return (type(value).__name__, value)


number_texts = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(min_value=-(10 ** 40), max_value=10 ** 40).map(str),
    st.builds(lambda sign, whole, frac, exp: f"{sign}{whole}.{frac}e{exp}", st.sampled_from(["", "-"]),
              st.integers(0, 10 ** 20), st.integers(0, 10 ** 25), st.integers(-340, 320)),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-0", "-0.0", "4.9e-324", "2.4703282292062328e-324",
                     "18446744073709551615", "18446744073709551616", "-9223372036854775809", "1" * 4301]),
)
texts = st.text(st.characters(codec=None), max_size=6)  # surrogates included (escaped by json.dumps)
json_texts = st.recursive(
    st.one_of(number_texts, texts.map(json.dumps), texts.map(lambda t: json.dumps(t, ensure_ascii=False)),
              st.sampled_from(["true", "false", "null"])),
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        # pairs, not a dict: keys may repeat (the last one wins, in the first one's place)
        st.lists(st.tuples(st.sampled_from(["ts", "a", "b", "\u00e9", "\ud800"]), children), max_size=4)
        .map(lambda pairs: "{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}"),
    ),
    max_leaves=10,
)


def _with_noise(text: str, data) -> bytes:
    """``text`` as UTF-8 (surrogates kept as in a broken producer), maybe with a byte changed or
    whitespace around it."""
    raw = text.encode("utf-8", "surrogatepass")
    how = data.draw(st.sampled_from(["as is", "spaces", "byte", "bom"]))
    if how == "spaces":
        raw = (data.draw(st.sampled_from([b" ", b"\n", b"\x0c", b""])) + raw
               + data.draw(st.sampled_from([b" ", b"\r\n", b"\x0c", b""])))
    elif how == "byte" and raw:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([data.draw(st.integers(0, 255))]) + raw[i + 1:]
    elif how == "bom":
        raw = "\ufeff".encode() + raw
    return raw


@settings(max_examples=500)
@given(json_texts, st.data())
def test_msgspec_decodes_like_json_loads_or_refuses(text, data):
    """Where msgspec decodes a value at all, it is json's value exactly (types, float bits, key order)."""
    from streammetrics.events.parser import FAST_DECODE as fast_decode

    if fast_decode is None:
        pytest.skip("msgspec is not installed")
    raw = _with_noise(text, data)
    try:
        fast = fast_decode(raw)
    except Exception:  # noqa: BLE001 - refused: parse_value falls back to json
        return
    reference = json.loads(raw.decode("utf-8"))
    assert _exact(fast) == _exact(reference), raw


event_fields = st.sampled_from(["ts", "model", "segment", "y_true", "score", "scores", "y_pred", "weight", "id"])


@settings(max_examples=500)
@given(st.sampled_from(sorted(parsers)), st.lists(st.tuples(event_fields, number_texts | json_texts), max_size=3),
       st.booleans(), st.data())
def test_parse_value_results_do_not_depend_on_msgspec(name, changes, as_array, data):
    """Events and rejection reasons are the same with and without the msgspec decoder."""
    pytest.importorskip("msgspec")
    base = parsers[name]
    task = base.task
    fast = EventParser(task, classes=base.classes, fields=base.fields, fast_json=True)
    slow = EventParser(task, classes=base.classes, fields=base.fields, fast_json=False)
    assert fast.fast_decode is not None and slow.fast_decode is None
    valid = (VALID[task] if task != "multiclass" or base.classes == CLASSES
             else {**BASE, "y_true": 0, "scores": [0.5, 0.3, 0.2]})
    pairs = [(base.fields.get(k, k), json.dumps(v)) for k, v in valid.items()]
    pairs += [(base.fields.get(k, k), v) for k, v in changes]
    text = "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"
    if as_array:
        text = "[" + text + "," + json.dumps(valid) + "]"
    raw = _with_noise(text, data)
    assert repr(fast.parse_value(raw)) == repr(slow.parse_value(raw)), raw



@pytest.mark.parametrize("depth", [3, MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 993, 996, 998, 5000])
@pytest.mark.parametrize("kind", [bytes, str, memoryview])
def test_nesting_limit_decides_alike_with_either_decoder_and_any_stack(depth, kind):
    """json's and msgspec's own recursion limits (near 1,000, shifting with the caller's stack) never
    decide: MAX_NESTING does, before either runs."""
    extra = "[" * (depth - 2) + "]" * (depth - 2)  # inside an event inside an array: `depth` levels
    text = "[" + json.dumps(VALID["binary"])[:-1] + ', "x": ' + extra + "}]"
    value = text if kind is str else kind(text.encode())
    too_deep = [Rejection(f"invalid JSON: nested deeper than {MAX_NESTING} levels")]

    def deeper(levels):  # the same call, made from `levels` frames further down the stack
        return deeper(levels - 1) if levels else EventParser("binary", fast_json=fast_json).parse_value(value)

    for fast_json in (True, False):
        for frames in (0, 40):
            got = deeper(frames)
            if depth <= MAX_NESTING:
                assert [type(r) for r in got] == [Event], (fast_json, frames)
            else:
                assert got == too_deep, (fast_json, frames)
    bare = "[" * depth + "]" * depth
    for fast_json in (True, False):
        got = EventParser("binary", fast_json=fast_json).parse_value(bare)
        assert got == (too_deep if depth > MAX_NESTING else [Rejection("event must be a JSON object, got an array",
                                                                      index=0)] if depth > 1 else [])


def test_brackets_inside_strings_do_not_count_as_nesting():
    plain = {**VALID["binary"], "note": "[" * 2000, "tags": ["{" * 900]}
    escaped = {**VALID["binary"], "note": "[" * 2000 + '\\"{{', "tags": ["]" * 900]}
    values = [json.dumps(plain), json.dumps(plain).encode(), json.dumps([plain] * 600).encode(),
              json.dumps(escaped), json.dumps(escaped).encode(), json.dumps([escaped] * 600).encode()]
    for value in values:
        for fast_json in (True, False):
            got = EventParser("binary", fast_json=fast_json).parse_value(value)
            assert got and all(type(r) is Event for r in got), got[:1]
