"""The events form of a small BinaryMonitor's state (monitors/binary_events.py): the
predictions themselves in canonical order, a function of their multiset, read back to the
same monitor; the parts' layout beyond its bound or for other weights; hostile dicts refused."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from order_free import check_order_free, per_event_or_batch, state_bytes

import streammetrics as sm
from streammetrics.events.records import Event
from streammetrics.monitors.binary_events import EVENTS_FORM_MAX

score = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 0.25, 0.75, 0.1, 0.9, 2.0**-60, 1.0 - 2.0**-53, -0.5, 1.5]),
    st.floats(0.0, 1.0),
)
event = st.tuples(st.sampled_from([0, 1, None]), score)


def events(pairs) -> list[Event]:
    return [Event(float(i), "m", y_true=y, score=s) for i, (y, s) in enumerate(pairs)]


def one(mon, e):
    (mon.update_prediction if e.y_true is None else mon.update_event)(e)


def many(mon, es):
    mon.update_predictions([e for e in es if e.y_true is None])
    return mon.update_events([e for e in es if e.y_true is not None])


FEED = per_event_or_batch(one, many)


def rejection(d) -> str:
    """``sm.from_dict(d)``'s ValueError message, checked to be one line."""
    with pytest.raises(ValueError) as info:
        sm.from_dict(d)
    assert "\n" not in str(info.value)
    return str(info.value)


def canonical(pairs) -> dict:
    """The form written out independently: by score (-0.0 as 0.0), then unlabelled, 0, 1."""
    rows = sorted(((s + 0.0, -1 if y is None else y) for y, s in pairs))
    return {"score": [s for s, _ in rows], "y_true": [None if y == -1 else y for _, y in rows]}


@settings(max_examples=300, deadline=None)
@given(st.lists(event, max_size=40), st.sampled_from([0.5, 0.3]), st.booleans(), st.integers(0, 2**16))
def test_events_form_is_the_canonical_multiset_and_reads_back_to_the_same_monitor(pairs, threshold, exact, seed):
    make = lambda: sm.BinaryMonitor(threshold=threshold, exact=exact)  # noqa: E731
    m = check_order_free(make, events(pairs), FEED, seed, rounds=2)  # any order, split, batch: one state
    d = m.to_dict()
    assert d["version"] == 3 and d["state"] == canonical(pairs)
    back = sm.from_dict(json.loads(json.dumps(d)))
    assert json.dumps(back.snapshot(), sort_keys=True) == json.dumps(m.snapshot(), sort_keys=True)
    if not any(math.copysign(1.0, s) < 0 and s == 0 for _, s in pairs):  # (-0.0 may key a histogram as -0.0)
        assert json.dumps(back._parts_state()) == json.dumps(m._parts_state())  # every part rebuilt as it was


def test_the_form_ends_at_its_bound_and_at_other_weights():
    pairs = [(i % 2, (i + 1) / (EVENTS_FORM_MAX + 2)) for i in range(EVENTS_FORM_MAX + 1)]
    m = sm.BinaryMonitor()
    for e in events(pairs[:-1]):
        m.update_event(e)
    assert set(m.to_dict()["state"]) == {"score", "y_true"} and len(m.to_dict()["state"]["score"]) == EVENTS_FORM_MAX
    m.update_event(events(pairs[-1:])[0])  # one more: the parts' layout
    assert set(m.to_dict()["state"]) == {"predictions", "scores", "confusion"}
    assert sm.from_dict(m.to_dict()) == m
    explicit = sm.BinaryMonitor().update({"y_true": 1, "score": 0.4, "weight": 1.0})
    assert explicit.to_dict()["state"] == {"score": [0.4], "y_true": [1]}  # a weight of 1 is no weight
    for weight in (0.0, 2.0, 0.5):
        w = sm.BinaryMonitor().update({"y_true": 1, "score": 0.4, "weight": weight})
        assert set(w.to_dict()["state"]) == {"predictions", "scores", "confusion"}, weight
        assert sm.from_dict(w.to_dict()) == w
    unlabelled = sm.BinaryMonitor().update_prediction(Event(0.0, "m", y_true=None, score=0.4, weight=2.0))
    assert set(unlabelled.to_dict()["state"]) == {"predictions", "scores", "confusion"}
    # two predictions of weight 1 and 1 at one score, or one of weight 2 and one of 0 elsewhere:
    # the same state in every part but the sum of squared weights (2 and 4: the effective sample
    # sizes of the intervals differ)
    a = sm.BinaryMonitor().update_predictions(events([(None, 0.4), (None, 0.4)]))
    b = sm.BinaryMonitor().update_predictions([Event(0.0, "m", y_true=None, score=0.4, weight=2.0),
                                               Event(0.0, "m", y_true=None, score=0.9, weight=0.0)])
    assert (a.predictions.weight_squares, b.predictions.weight_squares) == (2.0, 4.0)
    pa, pb = a._parts_state(), b._parts_state()
    pb["predictions"]["state"].pop("weight_squares")
    assert json.dumps(pa) == json.dumps(pb)


def test_a_smaller_bound_on_the_class_applies_to_writing_reading_and_the_fleet(monkeypatch):
    monkeypatch.setattr(sm.BinaryMonitor, "events_form_max", 3)
    parse = sm.BinaryMonitor()._parse
    pane = [parse({"ts": 0, "model": "m", "y_true": i % 2, "score": 0.1 + i / 10}) for i in range(4)]
    m = sm.BinaryMonitor().update_events(pane[:3])
    assert set(m.to_dict()["state"]) == {"score", "y_true"}
    assert set(sm.BinaryMonitor().update_events(pane).to_dict()["state"]) == {"predictions", "scores", "confusion"}
    small, large = sm.BinaryMonitor().update_events(pane[:3]), sm.BinaryMonitor().update_events(pane)
    assert sm.BinaryMonitor._small_group([large, small]) == [1]  # (the vectorised pass takes no more)
    assert sm.BinaryMonitor.snapshot_many([large, small])[1] == (*m.snapshot_state(), m.intervals())
    big = {**m.to_dict(), "state": {"score": [0.5] * 4, "y_true": [1] * 4}}
    assert "more than events_form_max=3" in rejection(big)


@pytest.mark.parametrize("state,words", [
    ({"score": [0.5] * (EVENTS_FORM_MAX + 1), "y_true": [1] * (EVENTS_FORM_MAX + 1)}, ["more than events_form_max"]),
    ({"score": [0.5, 0.6], "y_true": [1]}, ["differ in length", "2 != 1"]),
    ({"score": [0.5, "x"], "y_true": [1, 0]}, ["state['score'][1]", "finite number"]),
    ({"score": [0.5, math.nan], "y_true": [1, 0]}, ["state['score'][1]", "finite number"]),
    ({"score": [True], "y_true": [1]}, ["state['score'][0]"]),
    ({"score": [0.5], "y_true": [2]}, ["state['y_true'][0]", "0, 1 or null"]),
    ({"score": [0.5], "y_true": [True]}, ["state['y_true'][0]"]),
    ({"score": [0.5], "y_true": [1.0]}, ["state['y_true'][0]"]),
    ({"score": 0.5, "y_true": [1]}, ["must be lists"]),
    ({"score": [0.5], "y_true": [1], "extra": 1}, ["keys ['score', 'y_true']", "extra"]),
    ({"score": [0.5], "predictions": {}}, ["keys ['score', 'y_true']", "predictions"]),
])
def test_hostile_events_form_is_refused_in_one_line(state, words):
    d = {"type": "BinaryMonitor", "version": 3, "config": {"threshold": 0.5, "exact": False}, "state": state}
    text = rejection(d)
    assert text.startswith("malformed BinaryMonitor dict: ")
    for w in words:
        assert w in text, (w, text)


def test_a_small_window_state_is_a_fraction_of_the_parts_layout():
    m = sm.BinaryMonitor().update_events(events([(i % 2, 0.05 + i / 11) for i in range(10)]))
    small, parts = json.dumps(m.to_dict()), json.dumps({**m.to_dict(), "state": m._parts_state()})
    assert len(small) * 3 < len(parts)
    assert state_bytes(sm.from_dict(json.loads(small))) == state_bytes(m)


def test_the_form_depends_on_the_state_not_on_the_weights_path():
    """Predictions of weights 2, 0.5 and 0.5 hold the state of three of weight 1 (count 3,
    weights 2 at 0.0 and 1 at 0.25); the first came through units mode (a weight not whole),
    yet both write the same dict and a loaded copy writes it again (found by hypothesis in
    test_fast_snapshot: the form was refused in units mode, the loaded copy wrote it)."""
    weighted = sm.BinaryMonitor().update_predictions([Event(0.0, "m", y_true=None, score=0.0, weight=2.0),
                                                      Event(1.0, "m", y_true=None, score=0.25, weight=0.5),
                                                      Event(2.0, "m", y_true=None, score=0.25, weight=0.5)])
    unit = sm.BinaryMonitor().update_predictions(events([(None, 0.0), (None, 0.0), (None, 0.25)]))
    assert weighted.predictions._units and not unit.predictions._units
    assert weighted.to_dict() == unit.to_dict() == {**unit.to_dict(), "state": {"score": [0.0, 0.0, 0.25],
                                                                                 "y_true": [None, None, None]}}
    assert sm.from_dict(weighted.to_dict()).to_dict() == weighted.to_dict()
    half = sm.BinaryMonitor().update_predictions([Event(0.0, "m", y_true=None, score=0.25, weight=0.5)] * 3)
    assert set(half.to_dict()["state"]) == {"predictions", "scores", "confusion"}  # 1.5 at one score: not whole


def test_labelled_events_of_weight_zero_only_have_no_intervals():
    """A window whose labelled events all have weight 0 (no score level): every interval None
    (was: an IndexError in the weighted intervals, raised when such a window closed)."""
    from streammetrics.events.records import Event

    m = sm.BinaryMonitor().update_event(Event(0.0, "m", y_true=0, score=0.25, weight=0.0))
    record = m.intervals()
    assert record is not None and all(v is None for k, v in record["intervals"].items() if k != "confidence")
