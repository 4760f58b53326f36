"""Every rejection carries a machine-readable code from REJECTION_CODES beside its text."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.decoding import decode_value
from streammetrics.events.parser import EventParser
from streammetrics.events.records import REJECTION_CODES, Rejection

BASE = {"ts": 1_700_000_000, "model": "m", "y_true": 1, "score": 0.5}


@pytest.mark.parametrize("change,code,field", [
    ({"ts": None}, "bad_type", "ts"),
    ({"ts": "yesterday"}, "bad_value", "ts"),
    ({"ts": 1.7e12}, "out_of_range", "ts"),
    ({"model": ""}, "bad_value", "model"),
    ({"model": "x" * 1001}, "out_of_range", "model"),
    ({"model": "a|b"}, "bad_value", "model"),
    ({"segment": 3}, "bad_type", "segment"),
    ({"weight": -1}, "out_of_range", "weight"),
    ({"id": [1]}, "bad_type", "id"),
    ({"y_true": 7}, "bad_value", "y_true"),
    ({"score": "0.5"}, "bad_type", "score"),
])
def test_binary_field_codes(change, code, field):
    r = EventParser("binary").parse({**BASE, **change})
    assert isinstance(r, Rejection) and (r.code, r.field) == (code, field)


@pytest.mark.parametrize("drop", ["ts", "model", "y_true", "score"])
def test_missing_field_code(drop):
    r = EventParser("binary").parse({k: v for k, v in BASE.items() if k != drop})
    assert (r.code, r.field) == ("missing_field", drop)


def test_label_and_class_codes():
    mc = EventParser("multiclass", classes=["a", "b"])
    base = {"ts": 1, "model": "m", "y_true": "a", "scores": [0.5, 0.5]}
    assert mc.parse({**base, "y_true": "z"}).code == "unknown_label"
    assert mc.parse({**base, "scores": {"a": 1.0, "z": 0.0}}).code == "unknown_label"
    assert mc.parse({**base, "scores": [0.5]}).code == "bad_value"
    assert mc.parse({**base, "scores": {"a": 1.0}}).code == "missing_field"
    lab = EventParser("labels", classes=["x", "y"])
    assert lab.parse({"ts": 1, "model": "m", "y_true": "x", "y_pred": "q"}).code == "unknown_label"
    free = EventParser("labels")
    assert free.parse({"ts": 1, "model": "m", "y_true": "x", "y_pred": 1}).code == "bad_value"
    assert free.parse({"ts": 1, "model": "m", "y_true": {}, "y_pred": 1}).code == "bad_type"


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b"[" * 501 + b"]" * 501, b"1 2", b"", b"nul"])
def test_undecodable_values_are_invalid_json(raw):
    r = decode_value(raw)
    assert isinstance(r, Rejection) and r.code == "invalid_json"
    [r2] = EventParser("binary").parse_value(raw)
    assert r2.code == "invalid_json" and r2.reason == r.reason


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
field_values = st.fixed_dictionaries({}, optional={
    k: json_values | st.sampled_from([0, 1, 0.5, "m", "", 1_700_000_000]) for k in
    ("ts", "model", "segment", "y_true", "score", "scores", "y_pred", "weight", "id")})


@settings(max_examples=300)
@given(st.sampled_from(["binary", "labels", "regression", "multiclass"]), field_values)
def test_every_rejection_has_a_known_code(task, obj):
    parser = EventParser(task, classes=["a", "b"] if task == "multiclass" else None)
    for r in parser.parse_value(json.dumps(obj)) + parser.parse_value(json.dumps([obj, 3])):
        if isinstance(r, Rejection):
            assert r.code in REJECTION_CODES, r
