"""``BinaryMonitor.update``'s queue (issue 12 point 4): the common dict event is queued as its
signed score and applied to the parts through their ``update_many`` when the queue is full or
a part is read. Whatever the interleaving of queued events, other events, reads, copies,
merges, pickles and resets, the monitor holds the state of a monitor fed the same events
through the per-event paths, and the queue never holds more than ``update_queue_max`` events."""
from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.parser import EventParser
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.binary import SMALL_BATCH

PARSER = EventParser("binary", require_key=False)


def direct(monitor: BinaryMonitor, event: dict) -> None:
    """The per-event paths, no queue: what update did before it queued."""
    monitor.update_event(PARSER.parse(dict(event)))


class Small(BinaryMonitor):
    """A lowered queue bound: the queue fills (and is applied) within short streams."""

    update_queue_max = 40


scores = st.one_of(
    st.floats(0.0, 1.0, allow_nan=False),
    st.sampled_from([0.0, 1.0, 0.5, 5e-324, 1.0 - 2.0**-53, 0.25]),
    st.floats(-2.0, 2.0, allow_nan=False),  # margins: not queued
)
event = st.fixed_dictionaries(
    {"y_true": st.sampled_from([0, 1, True, False]), "score": scores},
    optional={"weight": st.sampled_from([0.5, 2.0, 1.0])})
step = st.one_of(
    event.map(lambda e: ("event", e)),
    st.sampled_from(["read", "copy", "pickle", "merge", "reset", "to_dict"]).map(lambda op: (op, None)),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(step, max_size=400), st.sampled_from([BinaryMonitor, Small]), st.booleans())
def test_any_interleaving_gives_the_state_of_the_per_event_paths(steps, cls, exact):
    m, ref = cls(exact=exact), BinaryMonitor(exact=exact)
    other, other_ref = cls(exact=exact), BinaryMonitor(exact=exact)
    for i, (op, e) in enumerate(steps):
        if op == "event":
            m.update(e)
            direct(ref, e)
            if i % 3 == 0:  # a second monitor, merged in later
                other.update(e)
                direct(other_ref, e)
        elif op == "read":
            assert m.snapshot() == ref.snapshot()
        elif op == "copy":  # the copy takes the queued events; the original keeps them too
            m = m.copy()
        elif op == "pickle":
            m = pickle.loads(pickle.dumps(m))
        elif op == "merge":  # both sides may hold queued events
            m.merge(other)
            ref.merge(other_ref)
        elif op == "reset":
            m.reset()
            ref.reset()
            assert m._queue == []
        else:
            assert m.to_dict() == ref.to_dict()
        assert len(m._queue) < cls.update_queue_max
    assert m.to_dict()["state"] == ref.to_dict()["state"]
    assert other.to_dict() == other_ref.to_dict()


@pytest.mark.parametrize("cls", [BinaryMonitor, Small])
def test_the_queue_is_applied_when_it_reaches_its_bound(cls):
    bound = cls.update_queue_max
    rng = random.Random(1)
    m, ref = cls(), BinaryMonitor()
    for i in range(3 * bound + 5):
        e = {"y_true": rng.randint(0, 1), "score": rng.random()}
        m.update(e)
        direct(ref, e)
        assert len(m._queue) == (i + 1) % bound  # applied at the bound, never above it
    assert m._queue and m.to_dict() == ref.to_dict() and not m._queue  # (a read applies the rest)


@pytest.mark.parametrize("n", [1, SMALL_BATCH, SMALL_BATCH + 1, 1000])
def test_a_read_applies_the_queue_event_by_event_or_vectorised(n):
    rng = random.Random(n)
    m, ref = BinaryMonitor(), BinaryMonitor()
    for _ in range(n):
        e = {"y_true": rng.random() < 0.3, "score": rng.random()}
        m.update(e)
        direct(ref, e)
    assert len(m._queue) == n
    assert m.count == n and len(m._queue) == n  # (the small form counts its queue)
    assert m.predictions.count == n and not m._queue  # reading a part applies the queue
    assert m.to_dict() == ref.to_dict() and m.snapshot() == ref.snapshot()


def test_only_the_common_event_is_queued():
    m = BinaryMonitor()
    m.update({"y_true": 1, "score": 0.7})
    m.update({"y_true": False, "score": 0.2})
    assert m._queue == [0.7, -0.2]
    for other in ({"y_true": 1, "score": 1.0},
                  {"y_true": 0, "score": 0.0}, {"y_true": 1, "score": 1.5}, {"y_true": 1.0, "score": 0.5}):
        m.update(other)  # the accumulators' paths, straight into the parts
        assert m._queue == [0.7, -0.2]
    assert m.count == 6 and m.labeled == 6 and m._queue == []


def test_a_copy_and_the_original_each_apply_the_queued_events_once():
    m = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.4})
    c = m.copy()
    c.update({"y_true": 0, "score": 0.9})
    assert (m.count, c.count) == (2, 3)
    assert m.snapshot()["accuracy"] == 1.0 and c.snapshot()["accuracy"] == 2 / 3


def test_templates_share_no_queue():
    template = BinaryMonitor()
    a, b = template.empty(), template.empty()
    a.update({"y_true": 1, "score": 0.8})
    assert a._queue is not b._queue and a._queue is not template._queue
    assert b.count == 0 and template.count == 0 and a.count == 1


def test_reset_drops_the_queued_events():
    m = BinaryMonitor().update({"y_true": 1, "score": 0.8})
    m.reset()
    assert m.count == 0 and m == BinaryMonitor()


@pytest.mark.parametrize("bad, field", [
    ({"y_true": 2, "score": 0.3}, "y_true"), ({"y_true": 1, "score": float("nan")}, "score"),
    ({"score": 0.3}, "y_true"), ({"y_true": 1, "score": 0.3, "weight": -1.0}, "weight")])
def test_a_bad_event_is_refused_and_the_queued_events_stay(bad, field):
    rng = random.Random(3)
    m, ref = BinaryMonitor(), BinaryMonitor()
    for _ in range(100):
        e = {"y_true": rng.randint(0, 1), "score": rng.random()}
        m.update(e)
        direct(ref, e)
    queued = list(m._queue)
    with pytest.raises(ValueError, match=field) as info:
        m.update(bad)
    assert "\n" not in str(info.value)
    assert m._queue == queued and m.to_dict() == ref.to_dict()


class OwnRefresh(BinaryMonitor):
    """A subclass overriding the (empty) ``_refresh`` hook without calling ``super()``."""

    def _refresh(self) -> None:
        self.cache = None


def test_a_subclass_with_its_own_refresh_keeps_a_queue_of_its_own():
    m = OwnRefresh().update({"y_true": 1, "score": 0.8})
    c, e = m.copy(), OwnRefresh().empty()
    c.update({"y_true": 0, "score": 0.3})
    e.update({"y_true": 0, "score": 0.4})
    assert (m.count, c.count, e.count) == (1, 2, 1)
    assert m._queue is not c._queue and e._queue is not m._queue


def test_setting_a_part_applies_the_queue_to_the_parts_it_leaves():
    m = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.3})
    m.scores = BinaryMonitor().scores  # replaces the label-based scores only
    assert m.predictions.count == 2 and m.confusion.count == 2 and m.scores.count == 0


def test_a_held_part_sees_queued_events_once_the_monitor_is_read():
    """The parts are read through the monitor: a reference kept across update(dict) calls sees
    their events after the next read of the monitor (documented on BinaryMonitor)."""
    m = BinaryMonitor()
    held = m.scores
    m.update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.3})
    assert held.count == 0 and m._queue  # queued
    assert m.count == 2 and held.count == 2 and held.roc_auc() == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(event, min_size=SMALL_BATCH + 1, max_size=300), st.sampled_from([BinaryMonitor, Small]),
       st.booleans())
def test_events_one_by_one_give_the_state_of_the_vectorised_batch(events, cls, exact):
    """What a window engine gives a monitor with a small form (``update_event`` per event: the
    common event queued as its signed score, any other into the parts) gives the state of the
    vectorised batch (``update_events`` of more than SMALL_BATCH events: the parts' update_many)."""
    parsed = [PARSER.parse(dict(e)) for e in events]
    m, ref = cls(exact=exact), BinaryMonitor(exact=exact)
    for e in parsed:
        m.update_event(e)
        assert len(m._queue) < cls.update_queue_max
    ref.update_events(parsed)
    queued = sum(e.weight == 1.0 and e.score.__class__ is float and 0.0 < e.score < 1.0 for e in parsed)
    # (the parts are built only by an event outside the small form or a full queue)
    assert ("_scores" in m.__dict__) == (queued < len(parsed) or queued >= cls.update_queue_max)
    assert m.to_dict() == ref.to_dict() and m.snapshot() == ref.snapshot()


def test_the_small_form_merges_copies_and_loads_without_parts():
    """Monitors in the small form (no parts built) merge by concatenation, copy their queue and
    load an events-form state as a queue; the state is the one of the parts."""
    a = BinaryMonitor().update({"y_true": 1, "score": 0.8}).update({"y_true": 0, "score": 0.3})
    b = BinaryMonitor().update({"y_true": 1, "score": 0.3})
    merged = a.copy().merge(b)
    loaded = BinaryMonitor.from_dict(merged.to_dict())
    for m in (a, b, merged, loaded):
        assert "_scores" not in m.__dict__
    assert sorted(loaded._queue) == sorted(merged._queue) == [-0.3, 0.3, 0.8]
    ref = BinaryMonitor().update_events([PARSER.parse(e) for e in (
        {"y_true": 1, "score": 0.8}, {"y_true": 0, "score": 0.3}, {"y_true": 1, "score": 0.3})])
    ref._apply_queue()  # (the parts)
    assert merged.to_dict() == ref.to_dict() and merged.snapshot() == ref.snapshot()
    assert merged.copy().merge(merged).count == 6 and merged.count == 3


@pytest.mark.parametrize("n", [5, SMALL_BATCH + 1, 100])
@pytest.mark.parametrize("bad", [0.5, 2, "1", None])
def test_a_batch_with_a_label_that_is_not_0_or_1_is_refused_unchanged(n, bad):
    """update_events / update_outcomes (event by event or vectorised): InvalidEvent naming
    y_true, the monitor unchanged (a cast alone would make 0.5 a 0)."""
    from streammetrics.core.exceptions import InvalidEvent

    events = [PARSER.parse({"y_true": i % 2, "score": 0.3 + i / 1000}) for i in range(n)]
    events[-1].y_true = bad
    for update in ("update_events", "update_outcomes"):
        m = BinaryMonitor().update_events(events[:3])
        before = m.to_dict()
        if update == "update_events" and n <= SMALL_BATCH:  # event by event: the events before it apply
            continue
        with pytest.raises(InvalidEvent, match="y_true"):
            getattr(m, update)(events)
        assert m.to_dict() == before


@pytest.mark.parametrize("bad", [1.0, -1.0, 0.0, -0.0, 1.5, float("nan"), float("inf")])
def test_update_items_checks_the_signed_scores_before_applying(bad):
    """A columnar batch (signed scores, any other event as itself): a float that is no signed
    score is refused (InvalidEvent naming the item), nothing of the batch applied."""
    from streammetrics.core.exceptions import InvalidEvent

    m = BinaryMonitor().update_items([0.25, -0.75])
    before = m.to_dict()
    with pytest.raises(InvalidEvent, match=r"items\[2\]"):
        m.update_items([0.5, PARSER.parse({"y_true": 1, "score": 0.5, "weight": 2.0}), bad])
    assert m.to_dict() == before
    ref = BinaryMonitor().update_events([PARSER.parse({"y_true": y, "score": s}) for y, s in
                                         [(1, 0.25), (0, 0.75), (1, 0.5), (0, 0.5)]])
    assert m.update_items([0.5, PARSER.parse({"y_true": 0, "score": 0.5})]).to_dict() == ref.to_dict()
