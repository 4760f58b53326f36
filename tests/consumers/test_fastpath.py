"""The service's fast path (consumers/fastpath.py) gives what the general path gives: per event
(an accepted event equals the parser's, field by field and type by type) and per service run
(a poll batch mixing valid, invalid, late and other messages publishes the same snapshots and
dead letters, byte for byte, as a run without the fast path), also under injected faults."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka_fakes import FakeCluster, Faults
from test_service_faults import FIRED, count_calls, run_until_done
from test_service_unit import counts, events_with_closers, expected_counts, fill, final_snapshots

from consumers.fastpath import TS_MAX, TS_MIN, BinaryFastPath
from streammetrics.events import fields as field_rules
from streammetrics.events.decoding import decode_value
from streammetrics.events.records import Event
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.windows import WindowManager

pytest.importorskip("msgspec")


def test_bounds_are_the_parsers():
    assert (TS_MIN, TS_MAX) == (field_rules.TS_MIN, field_rules.TS_MAX)


def test_only_binary_with_msgspec():
    assert BinaryFastPath.for_pipeline(Pipeline(PipelineConfig())) is not None
    assert BinaryFastPath.for_pipeline(Pipeline(PipelineConfig(task="regression"))) is None
    assert BinaryFastPath.for_pipeline(Pipeline(PipelineConfig(fast_json=False))) is None


def test_the_reader_is_built_once_per_field_mapping():
    # the service asks for the fast path at every poll batch; building the struct type each time
    # cost ~0.1 ms and left a class per batch for the garbage collector
    first, again = (BinaryFastPath.for_pipeline(Pipeline(PipelineConfig())) for _ in range(2))
    assert first is not None and again is not None and first.event is again.event
    other = BinaryFastPath.for_pipeline(Pipeline(PipelineConfig(fields={"ts": "time"})))
    assert other is not None and other.event is not first.event


def same_event(a: Any, b: Any) -> bool:
    return a.__class__ is Event and b.__class__ is Event and all(
        getattr(a, k) == getattr(b, k) and type(getattr(a, k)) is type(getattr(b, k)) for k in Event.__slots__)


# each field: valid values of every JSON type the parser accepts, and invalid ones
TS = st.one_of(st.integers(-10**13, 10**13), st.floats(allow_nan=False, allow_infinity=False),
               st.sampled_from([1767225600, 1767225600.5, -62135596800, 253402300799.9, 253402300800,
                                "2026-01-01T00:00:00Z", True, None, [1]]))
NAME = st.one_of(st.text(max_size=5), st.sampled_from(["m", "a|b", "", "é", "x" * 1000, "x" * 1001, 7, None]))
TRUTH = st.sampled_from([0, 1, True, False, 0.0, 1.0, 2, -1, "1", None, [0]])
NUMBER = st.one_of(st.floats(), st.integers(-10**20, 10**20), st.sampled_from([None, True, "0.5", 1e15, 1e16]))
IDENT = st.one_of(st.text(max_size=4), st.integers(-2**70, 2**70), st.sampled_from([None, "é", "x" * 1001, 1.5]))
FIELD = {"ts": TS, "model": NAME, "segment": NAME, "y_true": TRUTH, "score": NUMBER, "weight": NUMBER, "id": IDENT,
         "y_pred": TRUTH, "extra": st.one_of(NUMBER, NAME)}


@st.composite
def messages(draw: Any) -> bytes:
    obj = {name: draw(strategy) for name, strategy in FIELD.items() if draw(st.booleans()) or name in ("ts", "model")}
    if draw(st.booleans()):  # mostly the common, valid message, with one field varied
        obj = {"ts": 1767225600.25, "model": "m", "segment": "s", "y_true": 1, "score": 0.5, **dict(
            list(obj.items())[:1])}
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()), allow_nan=True)
    raw = text.encode("utf-8", "surrogatepass")
    tail = draw(st.sampled_from([b"", b" ", b"x", b"\xff", b"\xef\xbb\xbf"]))
    return tail + raw if tail == b"\xef\xbb\xbf" else raw + tail


@settings(max_examples=600, deadline=None)
@given(messages(), st.sampled_from([{}, {"ts": "time", "y_true": "label"}]))
@example(b'{"ts":1,"model":"m","y_true":1,"score":0.5,"ts":2}', {})  # duplicate keys: the last wins
@example(b'{"ts":1,"model":"m","y_true":1,"score":0.5,"x":"\xff"}', {})  # invalid UTF-8 in an unknown field
@example(b'{"ts":1,"model":"m","y_true":1,"score":0.5,"x":1e999}', {})  # out of float range, unknown field
@example(b'{"ts":1,"model":"m","y_true":true,"score":1,"weight":0,"id":"7"}', {})
@example(b'{"ts":1,"model":"m","score":0.5,"id":"7"}', {})  # a prediction awaiting its label
def test_an_accepted_event_is_the_parsers(value, names):
    if names:
        value = value.replace(b'"ts"', b'"time"').replace(b'"y_true"', b'"label"')
    pipeline = Pipeline(PipelineConfig(fields=names))
    fast = BinaryFastPath.for_pipeline(pipeline)
    assert fast is not None
    got = fast.event(value)
    if got is None:
        return
    decoded = decode_value(value, pipeline.parser.fast_decode)
    assert same_event(got, pipeline.parser.parse(decoded)), (got, pipeline.parser.parse(decoded))
    # and the general path applies it as the fast path does
    general = Pipeline(PipelineConfig(fields=names, max_future=None))
    result = general.process(value)
    assert result.applied == 1 and not result.problems


def test_declines_what_it_does_not_check():
    fast = BinaryFastPath.for_pipeline(Pipeline(PipelineConfig()))
    assert fast is not None
    plain = {"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5}
    assert fast.event(json.dumps(plain).encode()) is not None
    assert fast.event(json.dumps({**plain, "score": 1, "weight": 0}).encode()).score == 1.0  # ints: as the parser
    for change in ({"ts": "2026-01-01T00:00:00Z"}, {"y_true": None}, {"y_true": 1.0}, {"id": 7}, {"model": "é"},
                   {"segment": "a|b"}, {"weight": -1.0}, {"score": None}):
        assert fast.event(json.dumps({**plain, **change}).encode()) is None, change
    assert fast.event(None) is None
    assert fast.event(json.dumps([plain]).encode()) is None
    assert fast.event(json.dumps({**plain, "pad": "x" * 600}).encode()) is None  # long: nesting checked first


# ----------------------------------------------------------------------------- through the service
def mixed_events(seed: int = 3) -> list[Any]:
    """Valid events, then (shuffled in) bad and late ones, tombstones and arrays."""
    events: list[Any] = events_with_closers(900, seed=seed)
    rng = random.Random(seed)
    body, closers = events[:-6], events[-6:]
    bad: list[Any] = [
        {"ts": 1767225600.5, "model": "fraud-v1", "segment": "web", "y_true": 2, "score": 0.5},
        {"ts": "2026-01-01T00:00:03Z", "model": "fraud-v1", "segment": "web", "y_true": True, "score": 0.25},
        {"ts": 1767225601, "model": "fraud-v1", "segment": "web", "y_true": 1, "score": 1},
        {"ts": 1767225602, "model": "fraud-v2", "segment": "web", "score": 0.5},
        {"model": "fraud-v2", "segment": "web", "y_true": 1, "score": 0.5},
        {"ts": 1767225600, "model": "a|b", "y_true": 1, "score": 0.5},
        {"ts": 1767225600, "model": "fraud-v1", "segment": "web", "y_true": 1, "score": 0.5, "weight": -1.0},
        {"ts": 4102444800, "model": "fraud-v1", "segment": "web", "y_true": 1, "score": 0.5},  # 2100: future
        {"ts": 253402300000.0, "model": "fraud-v2", "segment": "web", "y_true": 0, "score": 0.5},  # 9999
        "not an object", b"{not json", None,
    ]
    late = [{"ts": 1767225600.0 + i, "model": "fraud-v1", "segment": "web", "y_true": 1, "score": 0.5}
            for i in range(5)]
    for item in bad * 3:
        body.insert(rng.randrange(len(body) + 1), item)
    for item in late:  # after the key's first windows closed
        body.insert(rng.randrange(len(body) // 2, len(body) + 1), item)
    return body + closers


def fill_mixed(cluster: FakeCluster, items: list[Any]) -> None:
    cluster.create("in", 2)
    cluster.create("out", 1)
    cluster.create("dlq", 1)
    for i, item in enumerate(items):
        if item is None or isinstance(item, bytes):
            value = item
        else:
            value = json.dumps(item).encode()
        key = f"{item['model']}|{item.get('segment', '')}" if isinstance(item, dict) and "model" in item else "x"
        if i % 97 == 0 and isinstance(item, dict):  # an array message now and then
            value = json.dumps([item]).encode()
        cluster.append("in", value, key=key.encode(), partition=sum(key.encode()) % 2)


def run(items: list[Any], tmp: Path, monkeypatch: Any, fast: bool, **options: Any) -> tuple[dict, list, dict]:
    cluster = FakeCluster()
    fill_mixed(cluster, items)
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(BinaryFastPath, "for_pipeline", classmethod(lambda cls, pipeline: None))
        counts_seen: dict = {}

        def setup(service: Any) -> None:
            counts_seen["counts"] = service.counts

        assert run_until_done(cluster, tmp, setup=setup, **options) == [0]
    letters = [(rec.key, rec.value, rec.headers) for rec in cluster.records("dlq")]
    return final_snapshots(cluster), letters, counts_seen["counts"]


@pytest.mark.parametrize("max_poll_records", [7, 500])
def test_a_mixed_batch_gives_the_general_paths_snapshots_and_dead_letters(max_poll_records, tmp_path, monkeypatch):
    items = mixed_events()
    calls = [0]
    original = BinaryFastPath.for_pipeline

    def counted(cls: Any, pipeline: Pipeline) -> Any:
        found = original(pipeline)
        if found is not None:
            event = found.event

            def counting(value: Any) -> Any:
                got = event(value)
                calls[0] += got is not None
                return got
            found.event = counting
        return found

    with monkeypatch.context() as patch:
        patch.setattr(BinaryFastPath, "for_pipeline", classmethod(counted))
        fast = run(items, tmp_path / "fast", monkeypatch, True, max_poll_records=max_poll_records,
                   max_future=3600.0)  # (the fakes' default is off) the wall clock: 2100 and 9999 are refused
    general = run(items, tmp_path / "general", monkeypatch, False, max_poll_records=max_poll_records, max_future=3600.0)
    assert calls[0] > 800  # the fast path did take the plain messages
    assert fast[0] == general[0]
    assert fast[1] == general[1]
    codes = [dict(headers).get("streammetrics.code") for _, _, headers in fast[1]]
    assert codes.count(b"future") == 3 * 2  # years 2100 and 9999, decoded by the fast path, then refused
    assert fast[2]["rejected"] >= 3 * 10 and fast[2]["late"] > 0  # (two of the "bad" ones are valid, slow-path events)
    assert {k: fast[2][k] for k in ("messages", "events", "rejected", "late", "snapshots", "dead_letters")} == \
        {k: general[2][k] for k in ("messages", "events", "rejected", "late", "snapshots", "dead_letters")}


@pytest.mark.parametrize("nth", [1, 17, 400])
def test_a_fault_in_the_fast_path_loses_and_double_counts_nothing(nth, tmp_path, monkeypatch):
    events = events_with_closers(1200, seed=11)
    cluster = FakeCluster()
    fill(cluster, events, per_message=1)
    faults = Faults()

    def setup(service: Any) -> None:
        monkeypatch.setattr(WindowManager, "add", count_calls(WindowManager, "add", nth))

    FIRED.clear()
    statuses = run_until_done(cluster, tmp_path / "faulty", faults, setup=setup)
    monkeypatch.undo()
    assert FIRED == ["add"] and statuses == [0]  # a rollback, then the record applied on the re-read
    got = final_snapshots(cluster)
    assert counts(got) == expected_counts(events)
    reference_cluster = FakeCluster()
    fill(reference_cluster, events, per_message=1)
    with monkeypatch.context() as patch:
        patch.setattr(BinaryFastPath, "for_pipeline", classmethod(lambda cls, pipeline: None))
        assert run_until_done(reference_cluster, tmp_path / "reference") == [0]
    assert got == final_snapshots(reference_cluster)
    assert cluster.records("dlq") == []
