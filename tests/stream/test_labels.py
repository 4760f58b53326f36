"""The label join against a brute-force reference of contract section 5 (random delays,
labels first, past the TTL, duplicates, never), its bounds at the edge, and checkpoints."""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.parser import Event
from streammetrics.stream.labels import Label, LabelJoin
from streammetrics.stream.pending import PendingStore

US = 1_000_000


class Reference:
    """The documented semantics with lists and linear scans (no heaps, no tiers)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = round(ttl * US)
        self.wm: int | None = None
        self.pending: list[Event] = []  # arrival order
        self.labels: dict[str, list[Any]] = {}  # id -> [y_true, ts, matched], insertion order
        self.expired: dict[str, int] = {}  # id -> forget after (us)

    def _advance(self, ts: float, out: list) -> None:
        t = round(ts * US)
        if self.wm is not None and t <= self.wm:
            return
        self.wm = t
        limit = t - self.ttl
        due = sorted((p for p in self.pending if round(p.ts * US) < limit), key=lambda p: p.ts)  # stable
        for p in due:
            self.pending.remove(p)
            out.append(("expired", "ttl", p.id, p.ts))
            self.expired[p.id] = round(p.ts * US) + self.ttl
        for ident, rec in sorted(self.labels.items(), key=lambda kv: kv[1][1]):
            if round(rec[1] * US) < limit:
                del self.labels[ident]
                if not rec[2]:
                    out.append(("label_expired", "ttl", ident, rec[1]))
        for ident, forget in list(self.expired.items()):
            if forget < limit:
                del self.expired[ident]

    def prediction(self, p: Event) -> list:
        out: list = []
        self._advance(p.ts, out)
        out.append(("pending", None, p.id, p.ts))
        if p.id in self.labels:
            self.labels[p.id][2] = True
            out.append(("joined", self.labels[p.id][0], p.id, p.ts))
        elif round(p.ts * US) < self.wm - self.ttl:
            out.append(("expired", "ttl", p.id, p.ts))
            self.expired[p.id] = round(p.ts * US) + self.ttl
        else:
            self.pending.append(p)
        return out

    def label(self, lab: Label) -> list:
        out: list = []
        self._advance(lab.ts, out)
        if lab.id in self.labels:
            return out + [("rejected", "duplicate", lab.id, lab.ts)]
        preds = [p for p in self.pending if p.id == lab.id]
        if not preds and lab.id in self.expired:
            return out + [("rejected", "expired", lab.id, lab.ts)]
        self.pending = [p for p in self.pending if p.id != lab.id]
        if not preds and round(lab.ts * US) < self.wm - self.ttl:
            return out + [("label_expired", "ttl", lab.id, lab.ts)]
        self.labels[lab.id] = [lab.y_true, lab.ts, bool(preds)]
        return out + [("joined", lab.y_true, p.id, p.ts) for p in preds]


def view(outputs) -> list:
    """Outputs as comparable tuples; joined ones carry their y_true in place of the code."""
    res = []
    for o in outputs:
        if o.kind == "joined":
            res.append(("joined", o.event.y_true, o.event.id, o.event.ts))
        else:
            res.append((o.kind, o.code, o.event.id, o.event.ts))
    return res


def make_stream(draw_items) -> list:
    """(kind, ts, id, value) items sorted by a jittered time (mostly in order, some disorder)."""
    return draw_items


items = st.lists(st.tuples(st.sampled_from(["p", "l"]), st.integers(0, 60), st.integers(0, 12), st.integers(0, 1)),
                 max_size=70)


def to_event(item) -> Event | Label:
    kind, t, i, v = item
    if kind == "p":
        return Event(t / 2, "m", "", None, 0.1 * (i % 10), None, None, 1.0, f"id{i}")
    return Label(f"id{i}", v, t / 2)


def feed(join: LabelJoin, ev) -> list:
    return join.add_prediction(ev) if isinstance(ev, Event) else join.add_label(ev)


@settings(max_examples=200)
@given(stream=items, ttl=st.sampled_from([0.0, 1.5, 4.0, 10.0]), budget=st.sampled_from([1, 3, 100_000]),
       cut=st.integers(0, 70), how=st.sampled_from(["dict", "file"]))
def test_join_matches_reference(tmp_path_factory, stream, ttl, budget, cut, how):
    ref = Reference(ttl)
    join = LabelJoin(ttl, store=PendingStore(memory_budget=budget))
    try:
        for n, item in enumerate(stream):
            if n == cut:  # checkpoint and continue from a restored copy
                if how == "file":
                    state = join.to_dict(str(tmp_path_factory.mktemp("c") / "store.sqlite"))
                else:
                    state = json.loads(json.dumps(join.to_dict()))
                fresh = LabelJoin(ttl, store=PendingStore(memory_budget=budget)).load_dict(state)
                assert fresh.to_dict() == join.to_dict()
                join.store.close()
                join = fresh
            ev = to_event(item)
            expected = ref.prediction(ev) if isinstance(ev, Event) else ref.label(ev)
            assert view(feed(join, ev)) == expected, (n, item)
        assert join.pending == len(ref.pending)
    finally:
        join.store.close()


def test_label_first_then_prediction_and_ttl_edge():
    join = LabelJoin(10)
    assert view(join.add_label(Label("a", 1, 5.0))) == []
    out = join.add_prediction(Event(6.0, "m", score=0.9, weight=2.0, id="a"))
    assert [o.kind for o in out] == ["pending", "joined"]
    j = out[1].event
    assert (j.ts, j.model, j.score, j.weight, j.y_true) == (6.0, "m", 0.9, 2.0, 1)
    # a label exactly at ts + ttl still joins; one microsecond later the prediction has expired
    join.add_prediction(Event(100.0, "m", score=0.1, id="b"))
    join.add_prediction(Event(100.0, "m", score=0.1, id="c"))
    assert view(join.add_label(Label("b", 0, 110.0))) == [("joined", 0, "b", 100.0)]
    out = view(join.add_label(Label("c", 0, 110.000001)))
    assert out == [("expired", "ttl", "c", 100.0), ("rejected", "expired", "c", 110.000001)]


def test_duplicate_and_expired_rejections_change_nothing():
    join = LabelJoin(5)
    join.add_prediction(Event(0.0, "m", score=0.3, id="x"))
    join.add_label(Label("x", 1, 1.0))
    before = join.to_dict()
    out = join.add_label(Label("x", 0, 1.0))
    assert [(o.kind, o.code) for o in out] == [("rejected", "duplicate")] and "duplicate" in out[0].reason
    after = join.to_dict()
    assert after["counts"]["duplicate"] == 1
    after["counts"]["duplicate"] = 0
    assert after == before
    join.add_prediction(Event(2.0, "m", score=0.3, id="y"))
    out = join.add_label(Label("y", 1, 7.5))
    assert [(o.kind, o.code) for o in out] == [("expired", "ttl"), ("rejected", "expired")]
    assert "expired" in out[1].reason


def test_remembered_ids_are_forgotten_after_their_time():
    join = LabelJoin(5)
    join.add_prediction(Event(0.0, "m", score=0.3, id="x"))
    join.add_label(Label("x", 1, 1.0))
    join.add_prediction(Event(0.0, "m", score=0.3, id="y"))
    join.advance(6.0)  # y expired (0 + 5 < 6); label x remembered until 1 + 5
    assert [o.code for o in join.add_label(Label("x", 1, 6.0))] == ["duplicate"]
    assert [o.code for o in join.add_label(Label("y", 1, 10.0))] == ["expired"]  # until 0 + 2*5
    assert join.add_label(Label("x", 1, 10.0)) == []  # forgotten: waits as a new label
    out = join.add_label(Label("y", 1, 10.000001))  # forgotten: waits too
    assert out == []
    out = join.advance(20.0)
    assert [(o.kind, o.code, o.event.id) for o in out] == [("label_expired", "ttl", "x"), ("label_expired", "ttl", "y")]
    assert join.stats()["remembered_labels"] == 0 and join.stats()["remembered_expired_ids"] == 0


def test_label_applies_to_every_pending_prediction_with_its_id():
    join = LabelJoin(60)
    join.add_prediction(Event(1.0, "champion", score=0.7, id="req-1"))
    join.add_prediction(Event(1.0, "challenger", score=0.2, id="req-1"))
    out = join.add_label(Label("req-1", 1, 30.0))
    assert [(o.kind, o.event.model) for o in out] == [("joined", "champion"), ("joined", "challenger")]
    out = join.add_prediction(Event(31.0, "shadow", score=0.5, id="req-1"))  # the label is still known
    assert [o.kind for o in out] == ["pending", "joined"]


def test_bounds_at_the_edge():
    join = LabelJoin(100, store=PendingStore(memory_budget=1, max_pending=2), max_labels=2, max_expired_ids=1)
    join.add_prediction(Event(1.0, "m", score=0.1, id="a"))
    join.add_prediction(Event(2.0, "m", score=0.1, id="b"))
    out = join.add_prediction(Event(3.0, "m", score=0.1, id="c"))  # third pending: the oldest goes
    assert [(o.kind, o.code, o.event.id) for o in out] == [("pending", None, "c"), ("expired", "evicted", "a")]
    out = join.add_prediction(Event(4.0, "m", score=0.1, id="d"))  # b evicted; a's id forgotten (bound 1)
    assert [(o.kind, o.code, o.event.id) for o in out] == [("pending", None, "d"), ("expired", "evicted", "b")]
    assert join.counts["evicted"] == 2 and join.counts["forgotten"] == 1
    assert [o.code for o in join.add_label(Label("b", 1, 5.0))] == ["expired"]
    assert join.add_label(Label("a", 1, 5.0)) == []  # a forgotten: waits as a new label
    assert [o.kind for o in join.add_label(Label("c", 1, 5.0))] == ["joined"]
    out = join.add_label(Label("d", 1, 5.0))  # joins d; three labels > 2: the oldest (waiting "a") goes
    assert [(o.kind, o.code, o.event.id) for o in out] == [("joined", None, "d"), ("label_expired", "evicted", "a")]
    assert join.counts["labels_evicted"] == 1 and join.stats()["remembered_labels"] == 2
    join.add_label(Label("e", 0, 5.0))  # the oldest now is c, already applied: forgotten silently
    assert join.counts["forgotten"] == 2 and [o.code for o in join.add_label(Label("c", 0, 5.0))] == []


def test_missing_id_is_rejected():
    join = LabelJoin(1)
    out = join.add_prediction(Event(0.0, "m", score=0.5))
    assert [(o.kind, o.code) for o in out] == [("rejected", "missing_id")]
    assert join.pending == 0


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "7d", True])
def test_ttl_is_validated(bad):
    with pytest.raises(ValueError, match="label_ttl"):
        LabelJoin(bad)


def test_malformed_checkpoint_raises():
    join = LabelJoin(5)
    good = join.to_dict()
    for bad in ({"type": "x"}, {**good, "ttl_us": 1}, {**good, "labels": [[1, 2]]}, {**good, "watermark_us": 1.5}):
        with pytest.raises(ValueError):
            join.load_dict(bad)
    assert join.to_dict() == good
