"""Odd values refused with an accurate reason naming the field (issue 30, findings 14 and 15;
probes p_input.py and p_state.py)."""
from __future__ import annotations

import json

import pytest

import streammetrics as sm
from streammetrics.cli import main
from streammetrics.events.decoding import decode_value
from streammetrics.events.parser import EventParser

T0 = 1767225600


def _one(line: str, task: str = "binary"):
    (result,) = EventParser(task).parse_value(line.encode())
    return result


def _event(**fields) -> str:
    base = {"ts": T0 + 1, "model": "m", "y_true": 1, "score": 0.5}
    base.update(fields)
    return json.dumps(base)


def test_end_of_year_9999_is_out_of_range_not_malformed():
    r = _one(_event(ts="9999-12-31T23:59:59.999999Z"))
    assert r.code == "out_of_range" and r.field == "ts"
    assert "out of range" in r.reason and "ISO-8601" not in r.reason and "253402300800.0" in r.reason
    assert _one(_event(ts="9999-12-31T23:59:59Z")).ts == 253402300799.0  # the last whole second is fine


def test_leap_second_says_so():
    r = _one(_event(ts="2025-12-31T23:59:60Z"))
    assert r.field == "ts" and "leap second" in r.reason and r.code == "bad_value"


def test_invalid_iso_gives_the_parser_reason():
    r = _one(_event(ts="2026-13-01T00:00:00Z"))
    assert r.field == "ts" and "month must be in 1..12" in r.reason


def test_5000_digit_integer_names_its_field():
    line = '{"ts": %d, "model": "m", "y_true": 1, "score": 0.5, "weight": %s}' % (T0 + 1, "9" * 5000)
    r = _one(line)
    assert r.field == "weight" and "5000-digit integer" in r.reason and "invalid JSON" not in r.reason
    r = _one('{"ts": %s, "model": "m", "y_true": 1, "score": 0.5}' % ("-" + "1" * 5000))
    assert r.field == "ts" and r.code == "out_of_range" and "5000-digit integer" in r.reason
    # in a field no rule reads, it is ignored like any other extra value
    ok = _one('{"ts": %d, "model": "m", "y_true": 1, "score": 0.5, "note": %s}' % (T0 + 1, "1" * 5000))
    assert ok.score == 0.5
    assert decode_value(b"[" + b"7" * 4300 + b"]") == [int("7" * 4300)]  # at the limit: an int
    assert decode_value(b'{"a": 1' + b"9" * 5000).code == "invalid_json"  # still invalid JSON


def test_replay_reports_the_field(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text('{"ts": %d, "model": "m", "y_true": 1, "score": 0.5, "weight": %s}\n' % (T0 + 1, "9" * 5000)
                   + _event(ts="2025-12-31T23:59:60Z") + "\n" + _event() + "\n")
    assert main(["replay", str(src), "-o", str(tmp_path / "out.jsonl"), "--max-future", "0"]) == 0
    err = capsys.readouterr().err
    assert "line 1: field 'weight'" in err and "5000-digit integer" in err
    assert "line 2: field 'ts' is a leap second" in err


def test_regression_count_beyond_any_stream_is_refused():
    d = sm.Regression().update_many([1.0, 2.0], [1.5, 2.5]).to_dict()
    d["state"]["count"] = 2**70  # weight 2: two events of weight 1 were written
    with pytest.raises(ValueError, match=r"state\['count'\]: .* more events than any stream holds"):
        sm.from_dict(d)
    d["state"]["count"] = 2**63 - 1  # zero-weight events count too: possible in principle
    assert sm.from_dict(d).count == 2**63 - 1


def test_confusion_count_beyond_any_stream_is_refused():
    cm = sm.ConfusionMatrix().update_many(["a", "b"], ["a", "a"], [0.5, 2.0])
    d = cm.to_dict()
    d["state"]["count"] = 10**30
    with pytest.raises(ValueError, match="more events than any stream holds"):
        sm.from_dict(d)
