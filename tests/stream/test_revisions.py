"""Window revisions with delayed labels (contract section 5), on a monitor that records which
predictions and outcomes it saw: every label lands in exactly the windows of its prediction,
revisions count up to a final one, and checkpoints/batching change nothing."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.parser import Event
from streammetrics.stream.label_stream import LabelStream
from streammetrics.stream.labels import Label, LabelJoin
from streammetrics.stream.pending import PendingStore
from streammetrics.stream.windows import WindowManager


class Ledger:
    """A monitor of ids: predictions seen (label-free part) and (id, y_true) outcomes."""

    def __init__(self) -> None:
        self.preds: list[str] = []
        self.outcomes: list[list[Any]] = []

    @property
    def count(self) -> int:
        return len(self.preds)

    def update_event(self, e: Event) -> Ledger:
        self.preds.append(e.id)
        self.outcomes.append([e.id, e.y_true])
        return self

    def update_events(self, events: list[Event]) -> Ledger:
        for e in events:
            self.update_event(e)
        return self

    def update_prediction(self, e: Event) -> Ledger:
        assert e.y_true is None
        self.preds.append(e.id)
        return self

    def update_outcome(self, e: Event) -> Ledger:
        assert e.y_true is not None
        self.outcomes.append([e.id, e.y_true])
        return self

    def merge(self, other: Ledger) -> Ledger:
        self.preds += other.preds
        self.outcomes += other.outcomes
        return self

    def copy(self) -> Ledger:
        new = Ledger()
        new.preds, new.outcomes = list(self.preds), [list(o) for o in self.outcomes]
        return new

    def snapshot(self) -> dict[str, Any]:
        return {"preds": sorted(self.preds), "outcomes": sorted(self.outcomes)}

    def to_dict(self) -> dict[str, Any]:
        return {"preds": self.preds, "outcomes": self.outcomes}

    @staticmethod
    def load(d: dict[str, Any]) -> Ledger:
        new = Ledger()
        new.preds, new.outcomes = list(d["preds"]), [list(o) for o in d["outcomes"]]
        return new


def make(window=10.0, slide=None, ttl=30.0, batch=False, budget=100_000) -> LabelStream:
    wm = WindowManager(Ledger, window, slide, batch=batch, max_future=None, monitor_loader=Ledger.load,
                       include_state=False)
    return LabelStream(wm, LabelJoin(ttl, store=PendingStore(memory_budget=budget)))


def test_revisions_of_a_tumbling_window():
    s = make()
    for i in range(3):
        s.add(Event(1.0 + i, "m", score=0.5, id=f"p{i}"))
    s.add(Event(12.0, "m", y_true=1, score=0.5, id="inline"))  # closes [0, 10)
    (r0,) = s.poll()
    assert (r0["revision"], r0["final"], r0["count"], r0["labeled"], r0["pending"]) == (0, False, 3, 0, 3)
    s.add(Label("p0", 1, 13.0))
    s.add(Label("p1", 0, 13.5))  # two labels, one poll: one revision
    (r1,) = s.poll()
    assert (r1["revision"], r1["final"], r1["labeled"], r1["pending"]) == (1, False, 2, 1)
    assert r1["metrics"]["outcomes"] == [["p0", 1], ["p1", 0]]
    assert s.poll() == []  # nothing changed: no revision
    s.add(Event(50.0, "m", y_true=0, score=0.5, id="late-clock"))  # p2 expires (2 + 30 < 50)
    snaps = s.poll()
    last = [x for x in snaps if x["window"]["start"] == 0][-1]
    assert (last["revision"], last["final"], last["labeled"], last["expired"], last["pending"]) == (2, True, 2, 1, 0)
    assert s.windows.awaiting_windows() == 0


def test_inline_labels_emit_once_final():
    s = make()
    for i in range(5):
        s.add(Event(float(i), "m", y_true=i % 2, score=0.5, id=f"p{i}"))
    snaps = s.flush()
    assert [(x["revision"], x["final"], x["labeled"], x["count"]) for x in snaps] == [(0, True, 5, 5)]


def test_hopping_label_credits_closed_and_open_windows():
    s = make(window=10.0, slide=5.0)
    s.add(Event(7.0, "m", score=0.5, id="a"))  # in windows [0,10) and [5,15)
    s.add(Event(10.0, "m", y_true=0, score=0.5, id="x"))  # closes [0,10) (and [-5,5), empty of a)
    assert [(x["window"]["start"], x["pending"]) for x in s.poll()] == [(0, 1)]
    s.add(Label("a", 1, 11.0))
    (rev,) = s.poll()
    assert (rev["window"]["start"], rev["revision"], rev["final"]) == (0, 1, True)
    snaps = s.flush()  # [5,15) closes with the label already in its pane
    w5 = next(x for x in snaps if x["window"]["start"] == 5)
    assert (w5["revision"], w5["final"], w5["labeled"]) == (0, True, 2)
    assert ["a", 1] in w5["metrics"]["outcomes"]


def test_prediction_after_a_shared_window_closed_does_not_touch_it():
    s = make(window=10.0, slide=5.0)
    s.add(Event(1.0, "m", score=0.5, id="early"))
    s.add(Event(10.0, "m", y_true=0, score=0.5, id="x"))  # closes [0,10), pending "early"
    s.poll()
    s.add(Event(8.0, "m", score=0.5, id="b"))  # pane [5,10): only [5,15) is still open
    s.add(Label("b", 1, 11.0))
    assert s.poll() == []  # [0,10) never held b: no revision
    s.add(Label("early", 0, 11.0))  # credits both windows of ts 1: [-5,5) and [0,10)
    revs = s.poll()
    assert [(x["window"]["start"], x["revision"], x["final"]) for x in revs] == [(-5, 1, True), (0, 1, True)]
    assert revs[1]["metrics"]["outcomes"] == [["early", 0]] and revs[1]["metrics"]["preds"] == ["early"]


events = st.lists(st.tuples(st.sampled_from("ppppl"), st.floats(0, 80, allow_nan=False).map(lambda x: round(x, 1)),
                            st.integers(0, 15), st.integers(0, 1), st.sampled_from(["m", "n"])), max_size=60)


def stream_of(items) -> list:
    out = []
    t = 0.0
    for kind, dt, i, v, model in items:
        t = max(0.0, t + (dt - 30) / 10)  # mostly increasing, some disorder
        if kind == "p":
            out.append(Event(t, model, "", v if i % 4 == 0 else None, 0.5, None, None, 1.0, f"id{i}"))
        else:
            out.append(Label(f"id{i}", v, t))
    return out


def run(stream, *, checkpoint_at=None, tmp=None, restore=True, **kw) -> list[dict[str, Any]]:
    s = make(**kw)
    snaps: list[dict[str, Any]] = []
    for n, item in enumerate(stream):
        if n == checkpoint_at:
            snaps += s.poll()  # a checkpoint holds state, not snapshots ready to publish
            if restore:
                path = None if tmp is None else str(tmp / "store.sqlite")
                state = json.loads(json.dumps(s.to_dict(path)))
                fresh = make(**kw).load_dict(state)
                s.join.store.close()
                s = fresh
        s.add(item)
        if n % 3 == 0:
            snaps += s.poll()
    snaps += s.poll() + s.flush()
    s.add(Event(10_000.0, "zz", y_true=0, score=0.5, id="end"))  # every label TTL is over
    snaps += s.poll() + s.flush()
    s.join.store.close()
    return snaps


@settings(max_examples=120)
@given(items=events, slide=st.sampled_from([None, 5.0, 2.5]), cut=st.integers(0, 60), batch=st.booleans())
def test_revisions_are_consistent_and_checkpoints_change_nothing(tmp_path_factory, items, slide, cut, batch):
    stream = stream_of(items)
    base = run(stream, slide=slide, checkpoint_at=cut, restore=False)
    assert run(stream, slide=slide, batch=batch, checkpoint_at=cut, budget=2,
               tmp=tmp_path_factory.mktemp("c") if batch else None) == base
    by_window: dict[tuple, list[dict[str, Any]]] = {}
    for x in base:
        by_window.setdefault((x["key"]["model"], x["window"]["start"]), []).append(x)
    joined = {}
    for item in stream:
        if isinstance(item, Event) and item.y_true is not None:
            joined.setdefault(item.id, item.y_true)
    for revisions in by_window.values():
        assert [x["revision"] for x in revisions] == list(range(len(revisions)))
        assert [x["final"] for x in revisions] == [False] * (len(revisions) - 1) + [True]
        for x in revisions:
            assert x["labeled"] + x["expired"] + x["pending"] == x["count"] == len(x["metrics"]["preds"])
            assert x["labeled"] == len(x["metrics"]["outcomes"])
            assert x["pending"] >= 0 and x["expired"] >= 0
            assert {i for i, _ in x["metrics"]["outcomes"]} <= set(x["metrics"]["preds"])
        assert revisions[-1]["pending"] == 0
        counts = [(x["labeled"], x["expired"]) for x in revisions]
        assert counts == sorted(counts)


@pytest.mark.parametrize("seed", range(3))
def test_batch_and_per_event_paths_agree(seed):
    rng = random.Random(seed)
    stream: list = []
    for i in range(300):
        t = i * 0.2
        stream.append(Event(t, "m", "", 1 if rng.random() < 0.3 else None, 0.5, None, None, 1.0, f"p{i}"))
        if rng.random() < 0.6:
            stream.append(Label(f"p{rng.randrange(i + 1)}", rng.randrange(2), t))
    assert run(stream, slide=2.0, batch=True) == run(stream, slide=2.0, batch=False)
