"""``BinaryMonitor.snapshot_many`` (many monitors in the small form in one vectorised pass:
monitors.fleet_snapshot) gives, for every monitor, the JSON of ``(m.snapshot(), m.to_dict(),
m.intervals())`` computed from the monitor's parts; hypothesis panes with ties, the threshold,
one-class panes, grid and dense scores, and monitors outside the small form (weights other than
1, absent labels, scores 0.0 / 1.0 / outside [0, 1], too many events), which it builds one by one."""
from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.parser import EventParser
from streammetrics.kernels.exact_sum import ExactSum
from streammetrics.kernels.intervals import intervals_text
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.fleet_snapshot import FLEET_MAX_EVENTS
from streammetrics.stream.snapshots import build_snapshot, snapshot_line, window_line

PARSER = EventParser("binary")

common_score = st.one_of(
    st.sampled_from([0.5, 0.25, 0.75, 2.0**-60, 1.0 - 2.0**-53, 0.1, 0.9, 1e-05, 1e-4, 5e-324]),
    st.integers(1, 9).map(lambda k: k / 10),
    st.floats(0.0, 1.0, exclude_min=True, exclude_max=True),
)
common_event = st.tuples(st.integers(0, 1), common_score)
odd_event = st.one_of(
    st.tuples(st.integers(0, 1), st.sampled_from([0.0, 1.0, -0.5, 1.5]), st.just(None)),  # score not in (0, 1)
    st.tuples(st.integers(0, 1), common_score, st.sampled_from([0.0, 0.5, 2.0, 3.25])),  # weight other than 1
    st.tuples(st.none(), common_score, st.just(None)),  # no label
)


def parse(y, s, w=None) -> object:
    """A parsed event (``y`` None: a prediction whose label has not come, as the delayed-label
    parser gives it)."""
    raw = {"ts": 0.0, "model": "m", "y_true": 1 if y is None else y, "score": s}
    if w is not None:
        raw["weight"] = w
    event = PARSER.parse(raw)
    assert event.__class__.__name__ == "Event", event
    if y is None:
        event.y_true = None
    return event


pane = st.one_of(
    st.lists(common_event, min_size=1, max_size=40).map(lambda evs: (True, [parse(y, s) for y, s in evs])),
    st.tuples(st.lists(common_event, max_size=10), odd_event, st.lists(common_event, max_size=10)).map(
        lambda t: (False, [parse(y, s) for y, s in t[0]] + [parse(*t[1])] + [parse(y, s) for y, s in t[2]])),
)


def engine_monitor(events: list, threshold: float = 0.5, confidence: float | None = None) -> BinaryMonitor:
    """A monitor given its events as a window engine gives them (one by one)."""
    m = BinaryMonitor(threshold=threshold)
    if confidence is not None:
        m.confidence = confidence
    for e in events:
        if e.y_true is None:
            m.update_prediction(e)
        else:
            m.update_event(e)
    return m


def from_parts(events: list, threshold: float = 0.5, confidence: float | None = None) -> tuple:
    """``(snapshot_state(), intervals())`` of a monitor of the events, computed from its parts."""
    m = engine_monitor(events, threshold, confidence)
    assert m.predictions.count == len(events)  # (reading a part builds the parts)
    return (*m.snapshot_state(), m.intervals())


def in_small_form(m: BinaryMonitor) -> bool:
    return "_scores" not in m.__dict__


@settings(max_examples=150, deadline=None)
@given(st.lists(pane, min_size=1, max_size=12), st.sampled_from([0.5, 0.3, 0.9]))
def test_records_equal_the_monitors_parts(panes: list, threshold: float) -> None:
    monitors = [engine_monitor(events, threshold) for _, events in panes]
    assert [in_small_form(m) for m in monitors] == [common for common, _ in panes]
    assert BinaryMonitor._small_group(monitors) == [i for i, (common, _) in enumerate(panes) if common]
    records = BinaryMonitor.snapshot_many(monitors)
    assert len(records) == len(panes)
    for (_, events), record in zip(panes, records):
        expected = from_parts(events, threshold)
        assert json.dumps(record) == json.dumps(expected)  # same keys, order and values
        snap = {"metrics": record[0], "state": record[1]}
        assert snapshot_line(snap) == snapshot_line({"metrics": expected[0], "state": expected[1]})
        assert BinaryMonitor.from_dict(record[1]) == engine_monitor(events, threshold)
    assert [r[1] for r in BinaryMonitor.snapshot_many(monitors, include_state=False)] == [None] * len(panes)


def test_the_vectorised_pass_takes_small_monitors_only() -> None:
    common = [parse(1, 0.7), parse(0, 0.2)]
    big = [parse(i % 2, (i + 1) / (FLEET_MAX_EVENTS + 2)) for i in range(FLEET_MAX_EVENTS + 1)]
    at_bound = big[:FLEET_MAX_EVENTS]
    exact = BinaryMonitor(exact=True).update_events(common)
    monitors = [engine_monitor([]), engine_monitor(big), engine_monitor(at_bound), exact, engine_monitor(common)]
    assert BinaryMonitor._small_group(monitors) == [2, 4]  # (empty, too many events, exact=True: one by one)
    records = BinaryMonitor.snapshot_many(monitors)
    for events, record in zip([big, at_bound, common], [records[1], records[2], records[4]]):
        assert json.dumps(record) == json.dumps(from_parts(events))
    assert json.dumps(records[3]) == json.dumps((*exact.snapshot_state(), exact.intervals()))


def test_events_not_of_the_parsers_types_give_the_same_records() -> None:
    """Hand-built events (an int weight, a numpy score, a bool label): the same records as the
    monitors' parts (a numpy score leaves the small form)."""
    import numpy as np

    from streammetrics.events.records import Event

    int_weight = [Event(0.0, "m", y_true=1, score=0.7, weight=1), parse(0, 0.2)]
    numpy_score = [Event(0.0, "m", y_true=1, score=np.float64(0.7)), parse(0, 0.2)]
    bool_label = [Event(0.0, "m", y_true=True, score=0.7), parse(0, 0.2)]
    common = [parse(1, 0.6), parse(0, 0.6)]
    panes = [int_weight, numpy_score, bool_label, common]
    monitors = [engine_monitor(events) for events in panes]
    assert [in_small_form(m) for m in monitors] == [True, False, True, True]
    for events, record in zip(panes, BinaryMonitor.snapshot_many(monitors)):
        assert json.dumps(record) == json.dumps(from_parts(events))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.floats(0.0, 40.0, allow_subnormal=True),
    st.sampled_from([1.0, 2.0**-53, 2.0**-54, 3 * 2.0**-54, 2.0**52, 0.1, 1e-300, 5e-324])), min_size=1, max_size=64))
def test_fsum_is_the_exact_sums_value(terms: list[float]) -> None:
    """The fleet's sums (``math.fsum`` of the terms) are the value ExactSum reads, in any order."""
    exact = ExactSum()
    exact.terms.extend(terms)
    assert math.fsum(terms) == exact.value == math.fsum(reversed(terms))


@settings(max_examples=150, deadline=None)
@given(st.lists(pane, min_size=1, max_size=12), st.sampled_from([0.5, 0.3, 0.9]))
def test_texts_are_the_json_of_the_records(panes: list, threshold: float) -> None:
    """``snapshot_texts`` (every window's metrics and events encoded in a few calls, and the
    windows holding a float below 1e-4 written by json) gives the compact JSON of
    ``snapshot_many``'s records for the monitors in the small form, None for the others."""
    monitors = [engine_monitor(events, threshold) for _, events in panes]
    texts = BinaryMonitor.snapshot_texts(monitors)
    records = BinaryMonitor.snapshot_many(monitors)
    compact = [None if not common else (json.dumps(r[0], separators=(",", ":"), allow_nan=False),
                                         json.dumps(r[1], separators=(",", ":"), allow_nan=False),
                                         intervals_text(r[2])) for (common, _), r in zip(panes, records)]
    assert texts == compact


large_pane = st.tuples(st.integers(20, 256), st.sampled_from([0.05, 0.2, 0.5]), st.integers(0, 2**32 - 1),
                       st.sampled_from([None, 10, 100])).map(
    lambda t: _large_pane(*t))


def _large_pane(n: int, prevalence: float, seed: int, grid: int | None) -> list:
    """A pane large enough for intervals (scores on a grid of ``grid`` values: ties)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = int(rng.random() < prevalence)
        s = min(max(rng.gauss(0.35 + 0.3 * y, 0.2), 0.001), 0.999)
        out.append(parse(y, round(s * grid) / grid if grid and 0 < round(s * grid) < grid else s))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(large_pane, min_size=1, max_size=6), st.sampled_from([0.5, 0.3]), st.sampled_from([0.95, 0.9]))
def test_intervals_equal_the_monitors_on_every_path(panes: list, threshold: float, confidence: float) -> None:
    """Windows large enough for intervals (contract section 9): the vectorised pass's records and
    texts, the parts' ``snapshot_state`` + ``intervals``, and ``build_snapshot`` of the monitor
    give the same intervals and the same lines, to the byte, at the monitors' confidence."""
    monitors = [engine_monitor(events, threshold, confidence) for events in panes]
    records = BinaryMonitor.snapshot_many(monitors)
    texts = BinaryMonitor.snapshot_texts(monitors)
    for events, record, text in zip(panes, records, texts):
        assert text is not None
        expected = from_parts(events, threshold, confidence)
        assert json.dumps(record) == json.dumps(expected)
        assert record[2]["intervals"]["confidence"] == confidence
        line = snapshot_line(build_snapshot(("m", ""), engine_monitor(events, threshold, confidence), 0, 60_000,
                                            final=True))
        assert window_line(("m", ""), 0, 60_000, len(events), 0, *text) == line
        assert snapshot_line(build_snapshot(("m", ""), None, 0, 60_000, final=True, count=len(events),
                                            record=record)) == line
        assert '"intervals":' in line


def test_interval_texts_in_one_pass_equal_each_windows_text() -> None:
    """``_Intervals.texts`` (windows grouped by which intervals they have, their bounds encoded in
    one call) writes each window's intervals as ``intervals_text`` of its record: bounds below
    1e-4 (json's exponent form), -0.0, a nan end (None), windows with none."""
    import numpy as np

    from streammetrics.kernels.intervals import BINARY_INTERVALS
    from streammetrics.monitors.fleet_snapshot import _Intervals

    rng = np.random.default_rng(7)
    m = 400
    columns = {}
    for name in BINARY_INTERVALS:
        lo = rng.random(m) * rng.choice([1.0, 1e-3, 1e-6], size=m)
        hi = lo + rng.random(m)
        lo[rng.random(m) < 0.3] = np.nan
        hi[rng.random(m) < 0.05] = np.nan
        lo[rng.random(m) < 0.05] = -0.0
        columns[name] = (lo, hi)
    given = np.zeros(m, dtype=bool)
    for name in BINARY_INTERVALS:
        given |= ~np.isnan(columns[name][0])
    given[:5] = False
    for name in BINARY_INTERVALS:
        columns[name][0][:5] = np.nan
    for confidence in (0.95, 0.9):
        intervals = _Intervals(columns, given, confidence)
        expected = [intervals_text(intervals.record(j)) for j in range(m)]
        assert intervals.texts() == expected
        assert any("e-0" in t for t in expected) and any("null" in t for t in expected)
