"""Delayed labels end to end with the real monitors, against scikit-learn on the joined events
of each window: random label delays (before the prediction, within and past the TTL, twice,
never), tumbling and hopping windows, weights, every task; and the final snapshots do not
depend on batching, on a checkpoint-restore at any point, or on splitting the stream."""
from __future__ import annotations

import json
import math
import random
import warnings
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.events.parser import Event
from streammetrics.monitors import make_monitor
from streammetrics.stream.label_stream import LabelStream
from streammetrics.stream.labels import JOINED, Label, LabelJoin
from streammetrics.stream.pending import PendingStore
from streammetrics.stream.windows import WindowManager

CLASSES = ["a", "b", "c"]
TTL = 40.0


def prediction(task: str, rng: random.Random, t: float, i: int) -> tuple[Event, Any]:
    """A prediction awaiting its label (or, one in five, carrying it inline) and its truth."""
    w = rng.choice([1.0, 0.5, 2.0, 3.0])
    if task == "binary":
        y: Any = rng.randrange(2)
        e = Event(t, "m", "", None, round(min(max(rng.gauss(0.3 + 0.4 * y, 0.25), 0.01), 0.99), 2), None, None, w)
    elif task == "multiclass":
        y = rng.choice(CLASSES)
        raw = [rng.random() + (1.0 if c == y else 0.0) for c in CLASSES]
        e = Event(t, "m", "", None, None, tuple(v / sum(raw) for v in raw), None, w)
    elif task == "labels":
        y = rng.choice(CLASSES)
        e = Event(t, "m", "", None, None, None, y if rng.random() < 0.6 else rng.choice(CLASSES), w)
    else:
        y = round(rng.gauss(10, 3), 3)
        e = Event(t, "m", "", None, None, None, round(y + rng.gauss(0, 1), 3), w)
    e.id = f"p{i}"
    if rng.random() < 0.2:
        e.y_true = y
    return e, y


def scenario(task: str, seed: int, n: int = 160) -> list[Event | Label]:
    """Predictions in time order; labels with random delays merged in by time."""
    rng = random.Random(seed)
    items: list[tuple[float, int, Any]] = []
    for i in range(n):
        t = i * 0.5
        e, y = prediction(task, rng, t, i)
        items.append((t, 0, e))
        if e.y_true is not None:
            continue
        u = rng.random()
        if u < 0.1:
            continue  # never labelled
        delay = rng.uniform(-5, 0) if u < 0.2 else rng.uniform(TTL + 1, TTL + 20) if u < 0.3 else rng.uniform(0, TTL)
        items.append((t + delay, 1, Label(e.id, y, t + delay)))  # type: ignore[arg-type]
        if rng.random() < 0.05:  # sent twice, the second time with another value
            other = 1 - y if task == "binary" else rng.choice(CLASSES) if task != "regression" else y + 1
            items.append((t + delay + 1, 1, Label(e.id, other, t + delay + 1)))  # type: ignore[arg-type]
    items.sort(key=lambda x: (x[0], x[1]))
    return [x[2] for x in items]


def factory(task: str) -> Any:
    return lambda: make_monitor(task, classes=CLASSES if task == "multiclass" else None)


def build(task: str, slide: float | None, batch: bool = False, ttl: float = TTL) -> LabelStream:
    wm = WindowManager(factory(task), 10.0, slide, batch=batch, max_future=None)
    return LabelStream(wm, LabelJoin(ttl, store=PendingStore(memory_budget=7)))


def run(task: str, stream: list, slide: float | None, *, batch: bool = False, checkpoint_at: int | None = None,
        tmp: Any = None, ttl: float = TTL, restore: bool = True) -> list[dict[str, Any]]:
    s = build(task, slide, batch, ttl)
    snaps: list[dict[str, Any]] = []
    for n, item in enumerate(stream):
        if n == checkpoint_at:
            snaps += s.poll()  # a checkpoint holds state, not snapshots ready to publish
            if restore:
                state = json.loads(json.dumps(s.to_dict(None if tmp is None else str(tmp / "pending.sqlite"))))
                fresh = build(task, slide, batch, ttl).load_dict(state)
                s.join.store.close()
                s = fresh
        s.add(item)
        if n % 7 == 0:
            snaps += s.poll()
    snaps += s.poll() + s.flush()
    end, _ = prediction(task, random.Random(0), 1e7, 10**7)  # on another key; every TTL is over
    end.model, end.y_true = "end", None
    s.add(end)
    snaps += s.poll()
    s.join.store.close()
    return [x for x in snaps if x["key"]["model"] == "m"]


def finals(snaps: list[dict[str, Any]]) -> dict[float, dict[str, Any]]:
    out: dict[float, dict[str, Any]] = {}
    for x in snaps:
        out[x["window"]["start"]] = x  # the latest revision wins
    return out


def joined_events(stream: list) -> list[Event]:
    """What the join pairs, from a join of its own (tested against a brute force in test_labels)."""
    join = LabelJoin(TTL)
    out = []
    for item in stream:
        if isinstance(item, Label):
            outs = join.add_label(item)
        elif item.y_true is None:
            outs = join.add_prediction(item)
        else:
            out.append(item)
            outs = join.advance(item.ts)
        out += [o.event for o in outs if o.kind is JOINED]
    return out


def close(a: Any, b: Any, tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is None and (b is None or (isinstance(b, float) and math.isnan(b)))
    return abs(a - b) <= tol * max(1.0, abs(b))


def reference(task: str, events: list[Event]) -> dict[str, Any]:
    if not events:
        return {}
    w = np.array([e.weight for e in events])
    y = [e.y_true for e in events]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if task == "binary":
            s = np.array([e.score for e in events])
            p = (s >= 0.5).astype(int)
            ref = {"accuracy": skm.accuracy_score(y, p, sample_weight=w), "brier_score":
                   skm.brier_score_loss(y, s, sample_weight=w) if len(set(y)) > 1 else None}
            if len(set(y)) > 1:
                ref["roc_auc"] = skm.roc_auc_score(y, s, sample_weight=w)
                ref["log_loss"] = skm.log_loss(y, s, sample_weight=w, labels=[0, 1])
            return ref
        if task == "multiclass":
            s = np.array([e.scores for e in events])
            p = [CLASSES[int(i)] for i in s.argmax(axis=1)]
            return {"accuracy": skm.accuracy_score(y, p, sample_weight=w),
                    "log_loss": skm.log_loss(y, s, sample_weight=w, labels=CLASSES)}
        if task == "labels":
            p = [e.y_pred for e in events]
            return {"accuracy": skm.accuracy_score(y, p, sample_weight=w),
                    "macro_f1": skm.f1_score(y, p, average="macro", sample_weight=w, zero_division=np.nan)}
        p = [e.y_pred for e in events]
        ref = {"mse": skm.mean_squared_error(y, p, sample_weight=w),
               "mae": skm.mean_absolute_error(y, p, sample_weight=w)}
        if len(events) > 1:
            ref["r2"] = skm.r2_score(y, p, sample_weight=w)
        return ref


TASKS = ["binary", "multiclass", "labels", "regression"]


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("slide", [None, 5.0])
@pytest.mark.parametrize("seed", range(3))
def test_final_revisions_match_sklearn_on_the_joined_events(task, slide, seed):
    stream = scenario(task, seed)
    snaps = run(task, stream, slide)
    joined = joined_events(stream)
    predictions = [x for x in stream if isinstance(x, Event)]
    by_window: dict[float, list[dict[str, Any]]] = {}
    for x in snaps:
        by_window.setdefault(x["window"]["start"], []).append(x)
    assert by_window
    for start, revisions in by_window.items():
        end = revisions[0]["window"]["end"]
        assert [x["revision"] for x in revisions] == list(range(len(revisions)))
        assert [x["final"] for x in revisions] == [False] * (len(revisions) - 1) + [True]
        last = revisions[-1]
        inside = [e for e in predictions if start <= e.ts < end]
        labelled = [e for e in joined if start <= e.ts < end]
        assert last["count"] == len(inside)
        assert last["labeled"] == len(labelled) and last["pending"] == 0
        assert last["expired"] == len(inside) - len(labelled)
        for name, value in reference(task, labelled).items():
            assert close(last["metrics"][name], value), (start, name, last["metrics"][name], value)
        if task == "binary":  # label-free: every prediction of the window
            total = sum(e.weight for e in inside)
            assert close(last["metrics"]["mean_score"], sum(e.weight * e.score for e in inside) / total)


def assert_same(got: dict[float, dict[str, Any]], base: dict[float, dict[str, Any]]) -> None:
    """Same windows, revisions and counts; metrics equal up to the last bits of float sums
    (batch updates sum with numpy, per-event ones one by one; BinaryScores' to_dict folds its
    running product of unit-weight probabilities into the log-loss sum, so an accumulator
    restored from a checkpoint rounds later additions differently)."""
    assert got.keys() == base.keys()
    for k, snap in base.items():
        assert {f: v for f, v in got[k].items() if f not in ("metrics", "state")} == \
            {f: v for f, v in snap.items() if f not in ("metrics", "state")}
        for name, value in snap["metrics"].items():
            if isinstance(value, float):
                assert close(got[k]["metrics"][name], value, 1e-12), name
            else:
                assert got[k]["metrics"][name] == value, name


@pytest.mark.parametrize("task", TASKS)
def test_batch_checkpoints_and_spill_give_identical_final_snapshots(tmp_path, task):
    stream = scenario(task, 11)
    base = finals(run(task, stream, 5.0))
    assert_same(finals(run(task, stream, 5.0, batch=True)), base)
    rng = random.Random(task)
    for cut in sorted(rng.sample(range(len(stream)), 4)) + [0, len(stream) - 1]:
        uninterrupted = finals(run(task, stream, 5.0, checkpoint_at=cut, restore=False))  # same polls
        restored = finals(run(task, stream, 5.0, checkpoint_at=cut, tmp=tmp_path if cut % 2 else None))
        if task != "binary":
            assert restored == uninterrupted  # bit for bit, states included
        assert_same(restored, uninterrupted)


@pytest.mark.parametrize("task", TASKS)
def test_split_and_merge_gives_the_whole_streams_windows(task):
    """Two halves of the predictions (by id), each with its labels, merged window by window."""
    stream = scenario(task, 5)
    # a TTL beyond the stream: each half then joins exactly what the whole stream joins
    whole = finals(run(task, stream, 5.0, ttl=1e5))
    halves = [finals(run(task, [x for x in stream if hash_half(x) == h], 5.0, ttl=1e5)) for h in (0, 1)]
    for start, snap in whole.items():
        parts = [h[start]["state"] for h in halves if start in h]
        merged = sm.from_dict(parts[0])
        for other in parts[1:]:
            merged.merge(sm.from_dict(other))
        assert merged.count == snap["count"] and merged.labeled == snap["labeled"]
        for name, value in snap["metrics"].items():
            if isinstance(value, float):
                assert close(merged.snapshot()[name], value, 1e-12), name


def hash_half(item: Any) -> int:
    return int(item.id[1:]) % 2
