"""Delayed labels: the window engine queues each monitor's predictions and labelled predictions
and applies them together (``update_predictions`` / ``update_outcomes``) before anything reads the
monitor - a close, a revision, a checkpoint - at most ``max_pending`` per monitor and part. The
windows' snapshots and checkpoints equal those of monitors updated event by event."""
from __future__ import annotations

import random

import pytest

from streammetrics.events.records import Event
from streammetrics.monitors import BinaryMonitor, RegressionMonitor
from streammetrics.stream.windows import LABEL_BATCH_MIN, WindowManager

T0 = 1_700_000_040.0  # a window start (60 s windows)


def predictions(n: int, seed: int = 5, regression: bool = False) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        weight = rng.choice([1.0, 1.0, 2.0, 0.5])
        if regression:
            out.append(Event(T0 + i * 50.0 / n, "m", "", None, None, None, round(rng.gauss(5, 2), 3), weight, f"p{i}"))
        else:
            out.append(Event(T0 + i * 50.0 / n, "m", "", None, round(rng.random(), 4), None, None, weight, f"p{i}"))
    return out


def labelled(p: Event, y: object) -> Event:
    return Event(p.ts, p.model, p.segment, y, p.score, p.scores, p.y_pred, p.weight, p.id)


@pytest.mark.parametrize("n", [5, LABEL_BATCH_MIN + 36])  # one by one, and vectorised
@pytest.mark.parametrize("kind", [BinaryMonitor, RegressionMonitor])
def test_snapshots_and_checkpoints_equal_event_by_event(n: int, kind: type) -> None:
    regression = kind is RegressionMonitor
    preds = predictions(n, regression=regression)
    rng = random.Random(n)
    truths = [round(rng.gauss(5, 2), 3) if regression else rng.randrange(2) for _ in preds]
    wm = WindowManager(kind, 60, include_state=True)
    firsts = [wm.add_prediction(p) for p in preds]
    direct = kind()
    for p in preds:
        direct.update_prediction(p)
    half = n // 2
    for p, y, first in zip(preds[:half], truths, firsts):  # labels while the window is open
        wm.add_outcome(labelled(p, y), first)
        direct.update_outcome(labelled(p, y))
    assert wm.queued_label_updates == n + half
    pane = wm.to_dict()["keys"][0]["panes"][0][1]  # a checkpoint applies the queues first
    assert wm.queued_label_updates == 0
    assert pane == direct.to_dict()
    wm.add_outcome(labelled(preds[half], truths[half]), firsts[half])  # queued when the window closes
    direct.update_outcome(labelled(preds[half], truths[half]))
    half += 1
    assert wm.add(Event(T0 + 61.0, "other", "", 1 if not regression else 1.0, 0.5 if not regression else None,
                        None, None if not regression else 2.0))  # closes [0, 60): revision 0
    (rev0,) = [s for s in wm.poll() if s["key"]["model"] == "m"]
    assert (rev0["revision"], rev0["pending"], rev0["final"]) == (0, n - half, False)
    assert rev0["state"] == direct.to_dict()
    for p, y, first in zip(preds[half:], truths[half:], firsts[half:]):  # labels of the closed window
        wm.add_outcome(labelled(p, y), first)
        direct.update_outcome(labelled(p, y))
    (final,) = wm.poll()  # (revisions=True: the new revision now)
    assert (final["revision"], final["pending"], final["final"]) == (1, 0, True)
    assert final["state"] == direct.to_dict()
    assert final["metrics"] == direct.snapshot()


def test_queues_applied_at_max_pending() -> None:
    """The bound: a monitor's queue is applied once it holds ``max_pending`` events."""
    wm = WindowManager(BinaryMonitor, 60, max_pending=8)
    preds = predictions(20)
    for i, p in enumerate(preds[:7]):
        wm.add_prediction(p)
        assert wm.queued_label_updates == i + 1
    wm.add_prediction(preds[7])
    assert wm.queued_label_updates == 0
    for p in preds[8:]:
        wm.add_prediction(p)
    assert wm.queued_label_updates == 4  # (16 applied: twice 8)
    direct = BinaryMonitor()
    for p in preds:
        direct.update_prediction(p)
    assert wm.to_dict()["keys"][0]["panes"][0][1] == direct.to_dict()


def test_loading_a_checkpoint_drops_the_queues_of_the_state_replaced() -> None:
    wm = WindowManager(BinaryMonitor, 60)
    saved = wm.to_dict()
    for p in predictions(3):
        wm.add_prediction(p)
    assert wm.queued_label_updates == 3
    wm.load_dict(saved)
    assert wm.queued_label_updates == 0
    assert wm.to_dict()["keys"] == []


@pytest.mark.parametrize("field, value", [("score", 1e308), ("score", -1e250), ("weight", 0.0),
                                          ("weight", 1e300)])
def test_an_event_not_ordinary_stops_the_queues(field: str, value: float) -> None:
    """Vectorised updates of hostile values would warn where event-by-event ones do not (and every
    vectorised update resets Python's once-per-location warning record): from the first such event
    on, what is queued is applied and nothing more is queued."""
    wm = WindowManager(BinaryMonitor, 60)
    preds = predictions(10)
    for p in preds[:5]:
        wm.add_prediction(p)
    assert wm.queued_label_updates == 5
    hostile = preds[5]
    setattr(hostile, field, value)
    wm.add_prediction(hostile)
    assert wm.queued_label_updates == 0
    for p in preds[6:]:
        wm.add_prediction(p)
        wm.add_outcome(labelled(p, 1), None)
    assert wm.queued_label_updates == 0


def test_a_labelled_event_not_ordinary_stops_the_queues() -> None:
    wm = WindowManager(BinaryMonitor, 60)
    preds = predictions(4)
    for p in preds[:3]:
        wm.add_prediction(p)
    assert wm.add_labelled(labelled(preds[3], 1)) and wm.queued_label_updates == 3  # (ordinary: queues stay)
    assert wm.add_labelled(Event(T0 + 1.0, "m", "", 0, -1e300))
    assert wm.queued_label_updates == 0
    wm.add_prediction(predictions(1, seed=9)[0])
    assert wm.queued_label_updates == 0


@pytest.mark.parametrize("n", [40, LABEL_BATCH_MIN + 36])
def test_labels_with_max_labels_are_applied_in_arrival_order(n: int) -> None:
    """``LabelMonitor(max_labels=L)`` folds labels when the bound is passed, so its state depends on
    the order of its updates (``updates_commute`` False): the engine never queues them, and the
    window equals a monitor given predictions and outcomes interleaved, as they came."""
    from streammetrics.monitors import LabelMonitor

    rng = random.Random(n)
    labels = [f"c{i}" for i in range(8)]
    preds = [Event(T0 + i * 50.0 / n, "m", "", None, None, None, rng.choice(labels), 1.0, f"p{i}") for i in range(n)]
    assert not LabelMonitor(max_labels=2).updates_commute and LabelMonitor().updates_commute
    wm = WindowManager(lambda: LabelMonitor(max_labels=2), 60, include_state=True)
    direct = LabelMonitor(max_labels=2)
    firsts, outcomes = [], []
    for i, p in enumerate(preds):  # each prediction's label comes two predictions later
        firsts.append(wm.add_prediction(p))
        direct.update_prediction(p)
        if i >= 2:
            outcomes.append(labelled(preds[i - 2], rng.choice(labels)))
            wm.add_outcome(outcomes[-1], firsts[i - 2])
            direct.update_outcome(outcomes[-1])
        assert wm.queued_label_updates == 0
    for p, first in zip(preds[-2:], firsts[-2:]):
        outcomes.append(labelled(p, rng.choice(labels)))
        wm.add_outcome(outcomes[-1], first)
        direct.update_outcome(outcomes[-1])
    assert wm.to_dict()["keys"][0]["panes"][0][1] == direct.to_dict()
    grouped = LabelMonitor(max_labels=2)  # what queueing gave: predictions first, then outcomes
    grouped.update_predictions(preds)
    grouped.update_outcomes(outcomes)
    assert grouped.to_dict() != direct.to_dict()  # (the order matters here: the test can fail)
