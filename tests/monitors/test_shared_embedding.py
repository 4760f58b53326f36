"""SharedMonitor as an embedding kit: bounded shards, atomic drain, delayed labels across threads."""
from __future__ import annotations

import random
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.monitors.shared import DEFAULT_MAX_SHARDS, SharedMonitor


@pytest.fixture
def fast_switching():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up if there are any
    yield
    sys.setswitchinterval(interval)


def test_thread_per_request_reuses_shards():
    shared = SharedMonitor(sm.BinaryMonitor)
    for i in range(500):  # a thread per request, as http.server's ThreadingHTTPServer runs them
        t = threading.Thread(target=shared.update, args=({"y_true": i % 2, "score": (i % 7) / 7},))
        t.start()
        t.join()
    assert shared.shards <= 2  # was 500: one shard per thread ever started, kept forever
    assert shared.count == 500
    assert shared.counts["shared"] == 0


def test_more_threads_than_max_shards_share_shards_exactly(fast_switching):
    shared = SharedMonitor(sm.BinaryMonitor, max_shards=3)
    start, taken = threading.Barrier(8), threading.Barrier(8)

    def work(k):
        start.wait()
        shared.update({"y_true": 1, "score": 0.25, "weight": 1.0 + k})
        taken.wait()  # all eight alive with a shard each
        for i in range(1, 300):
            shared.update({"y_true": i % 2, "score": 0.25, "weight": 1.0 + k})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shared.shards == 3 and shared.counts["shared"] == 5
    merged = shared.merged()
    assert merged.count == 2400 and merged.total_weight == sum(300 * (1.0 + k) for k in range(8))
    assert DEFAULT_MAX_SHARDS == SharedMonitor(sm.BinaryMonitor).max_shards == 64


def test_drain_with_concurrent_writers_counts_every_event_once(fast_switching):
    shared = SharedMonitor(lambda: sm.BinaryMonitor(exact=True))
    rng = random.Random(2)
    events = [[{"y_true": rng.randint(0, 1), "score": rng.random(), "weight": rng.choice([1.0, 2.0])}
               for _ in range(3000)] for _ in range(6)]
    start = threading.Barrier(7)
    done = threading.Event()
    drained = []

    def writer(mine):
        start.wait()
        for ev in mine:
            shared.update(ev)

    def drainer():
        start.wait()
        while not done.is_set():
            drained.append(shared.drain_monitor())

    workers = [threading.Thread(target=writer, args=(mine,)) for mine in events]
    reader = threading.Thread(target=drainer)
    for t in [*workers, reader]:
        t.start()
    for t in workers:
        t.join()
    done.set()
    reader.join()
    drained.append(shared.drain_monitor())
    assert len(drained) > 2
    assert sum(m.count for m in drained) == 18_000  # was 12,288 of 21,822 with snapshot() then reset()
    total = drained[0].copy()
    for m in drained[1:]:
        total.merge(m)
    y = np.array([e["y_true"] for mine in events for e in mine])
    s = np.array([e["score"] for mine in events for e in mine])
    w = np.array([e["weight"] for mine in events for e in mine])
    assert total.snapshot()["roc_auc"] == pytest.approx(skm.roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert shared.drain()["count"] == 0


def test_delayed_labels_from_other_threads_equal_labelled_updates(fast_switching):
    rng = random.Random(4)
    events = [{"id": f"r{i}", "y_true": rng.randint(0, 1), "score": rng.random()} for i in range(4000)]
    shared = SharedMonitor(lambda: sm.BinaryMonitor(exact=True))
    predicted = threading.Event()

    def predictions(part):
        for ev in part:
            shared.update_prediction({"id": ev["id"], "score": ev["score"]})

    def labels(part):
        predicted.wait()
        for ev in part:
            assert shared.update_label(ev["id"], ev["y_true"])

    with ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(predictions, events[k::4]) for k in range(4)]
        for job in jobs:
            job.result()
        assert shared.pending == 4000 and shared.snapshot()["count"] == 4000
        predicted.set()
        for job in [pool.submit(labels, events[k::4]) for k in range(4)]:
            job.result()
    want = sm.BinaryMonitor(exact=True).update_many([{"y_true": e["y_true"], "score": e["score"]} for e in events])
    got = shared.merged()
    assert got.labeled == 4000 and shared.pending == 0 and shared.counts["joined"] == 4000
    assert got.snapshot() == want.snapshot()


def test_pending_predictions_are_bounded_and_counted():
    now = [0.0]
    shared = SharedMonitor(sm.BinaryMonitor, max_pending=3, label_ttl=10.0, clock=lambda: now[0])
    for i in range(5):
        shared.update_prediction({"id": i, "score": 0.5})
    assert shared.pending == 3 and shared.counts["evicted"] == 2
    assert shared.update_label(0, 1) is False and shared.counts["unmatched"] == 1  # evicted first
    assert shared.update_label("4", 1) is True and shared.update_label(4, 1) is False  # a second label
    now[0] = 11.0
    assert shared.update_label(3, 0) is False and shared.counts["expired"] == 2
    assert shared.snapshot()["count"] == 5  # every prediction counts in the label-free metrics
    shared.update_prediction({"id": "x", "score": 0.5})
    assert shared.reset().pending == 0 and shared.count == 0
    with pytest.raises(ValueError, match="max_pending must be a positive integer"):
        SharedMonitor(sm.BinaryMonitor, max_pending=0)
    with pytest.raises(ValueError, match="label_ttl"):
        SharedMonitor(sm.BinaryMonitor, label_ttl=-1)


def test_bad_input_names_the_field_and_changes_nothing():
    shared = SharedMonitor(sm.BinaryMonitor)
    shared.update_prediction({"id": "a", "score": 0.9})
    before = (shared.pending, shared.count)
    for bad, field in [({"score": 0.9}, "'id'"), ({"id": "b", "score": "x"}, "'score'"),
                       ({"id": "c", "score": 0.2, "y_true": 1}, "'y_true'"), ({"id": True, "score": 0.1}, "'id'")]:
        with pytest.raises(ValueError, match=field):
            shared.update_prediction(bad)
    with pytest.raises(ValueError, match="'y_true' must be 0, 1"):
        shared.update_label("a", "yes")
    assert (shared.pending, shared.count) == before
    assert shared.update_label("a", 1) and shared.merged().labeled == 1


@pytest.mark.parametrize("factory,prediction,label", [
    (lambda: sm.MulticlassMonitor(classes=["a", "b", "c"]), {"scores": [0.2, 0.5, 0.3]}, "b"),
    (sm.RegressionMonitor, {"y_pred": 2.5}, 3.0),
    (sm.LabelMonitor, {"y_pred": "cat"}, "dog"),
])
def test_delayed_labels_for_every_task(factory, prediction, label):
    shared = SharedMonitor(factory)
    shared.update_prediction({"id": "q", **prediction})
    assert shared.update_label("q", label)
    want = factory().update({"y_true": label, **prediction})
    assert shared.snapshot() == want.snapshot()


def test_event_and_reference_exported():
    assert sm.Event(1.0, "m", score=0.5).score == 0.5
    ref = sm.Reference.from_arrays([0, 1, 1, 0], [0.1, 0.8, 0.7, 0.3])
    assert isinstance(ref, sm.Reference)
    assert {"Event", "Reference", "replay_frame", "SharedMonitor"} <= set(sm.__all__)


def test_a_prediction_arriving_while_its_label_is_parsed_is_labelled_too(monkeypatch):
    shared = SharedMonitor(sm.BinaryMonitor)
    shared.update_prediction({"id": "x", "score": 0.2})
    original = sm.BinaryMonitor.parse_event
    raced = []

    def parse_event(self, event):
        if not raced:  # another thread's prediction with the same id, between read and commit
            raced.append(True)
            shared.update_prediction({"id": "x", "score": 0.9})
        return original(self, event)

    monkeypatch.setattr(sm.BinaryMonitor, "parse_event", parse_event)
    assert shared.update_label("x", 1)
    merged = shared.merged()
    assert raced and merged.labeled == 2 and merged.count == 2  # was: the second lost, yet counted joined
    assert shared.pending == 0 and shared.counts["joined"] == 2
