"""SharedMonitor: eight threads updating one monitor lose no event and count none twice."""
from __future__ import annotations

import random
import sys
import threading

import numpy as np
from sklearn import metrics as skm

from streammetrics.monitors import BinaryMonitor, LabelMonitor
from streammetrics.monitors.shared import SharedMonitor


def test_eight_threads_updating_concurrently_lose_no_event_while_readers_read():
    threads, per_thread = 8, 5_000
    rng = random.Random(5)
    events = [[{"y_true": rng.randint(0, 1), "score": rng.random()} for _ in range(per_thread)]
              for _ in range(threads)]
    shared = SharedMonitor(lambda: BinaryMonitor(exact=True))
    start = threading.Barrier(threads + 1)
    done = threading.Event()
    reads = []

    def writer(mine):
        start.wait()
        for i, ev in enumerate(mine):
            if i % 500 == 0:  # a batch of 100 every 500 events, single updates otherwise
                shared.update_many(mine[i:i + 100])
            elif i % 500 >= 100:
                shared.update(ev)

    def reader():
        start.wait()
        while not done.is_set():
            reads.append(shared.snapshot()["count"])

    workers = [threading.Thread(target=writer, args=(mine,)) for mine in events]
    watcher = threading.Thread(target=reader)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up if there are any
    try:
        for t in workers + [watcher]:
            t.start()
        for t in workers:
            t.join()
        done.set()
        watcher.join()
    finally:
        sys.setswitchinterval(interval)

    snap = shared.snapshot()
    assert snap["count"] == threads * per_thread
    assert reads == sorted(reads), "a read saw fewer events than an earlier one"
    y = np.array([e["y_true"] for mine in events for e in mine])
    s = np.array([e["score"] for mine in events for e in mine])
    assert abs(snap["roc_auc"] - skm.roc_auc_score(y, s)) <= 1e-12
    assert abs(snap["accuracy"] - skm.accuracy_score(y, s >= 0.5)) <= 1e-12
    assert shared.merged().confusion.count == threads * per_thread


def test_bad_events_raise_in_the_calling_thread_and_change_nothing():
    shared = SharedMonitor(LabelMonitor)
    shared.update({"y_true": "a", "y_pred": "b"})
    try:
        shared.update_many([{"y_true": "a", "y_pred": "a"}, {"y_true": "a"}])
    except ValueError as exc:
        assert "y_pred" in str(exc)
    else:
        raise AssertionError("a bad batch was accepted")
    assert shared.count == 1
    assert shared.reset().count == 0
