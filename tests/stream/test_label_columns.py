"""The chunked, columnar reading of ``replay PREDICTIONS --labels LABELS``
(streammetrics.stream.label_columns) gives the items, in the order, of the line-by-line merge."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.stream.label_events import DelayedEventParser
from streammetrics.stream.label_replay import _merged

pytest.importorskip("msgspec")


def _files(rng: random.Random, n: int) -> tuple[list[bytes], list[bytes]]:
    preds, labels = [], []
    for i in range(n):
        ts = 1_700_000_000 + rng.uniform(0, 600) if rng.random() < 0.2 else 1_700_000_000 + i * 0.5
        ev: dict = {"ts": round(ts, 3), "model": rng.choice("ab"), "id": f"p{i}", "score": rng.random()}
        u = rng.random()
        if u < 0.03:
            ev["y_true"] = 1  # a labelled prediction
        elif u < 0.05:
            del ev["id"]  # refused: no id
        elif u < 0.07:
            ev["score"] = "x"
        elif u < 0.08:
            ev = {"id": f"q{i}", "y_true": 0, "ts": ev["ts"]}  # a label in the predictions file
        line = json.dumps(ev).encode() + b"\n"
        preds.append(b"\n" if rng.random() < 0.02 else line)
        lab: dict = {"id": f"p{i}", "y_true": rng.randrange(2), "ts": round(ts + rng.uniform(0, 60), 3)}
        v = rng.random()
        if v < 0.03:
            lab["y_true"] = 2
        elif v < 0.05:
            lab["id"] = 12345678901234567890123
        elif v < 0.06:
            lab["model"] = "m"
        elif v < 0.07:
            lab["ts"] = True
        elif v < 0.08:
            lab["id"] = i  # an integer id
        labels.append(json.dumps(lab).encode() + b"\n" if rng.random() > 0.02 else b"{bad\n")
    labels.sort(key=lambda line: rng.random() if rng.random() < 0.1 else 0)
    return preds, labels


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [7, 4096])
def test_chunked_merge_is_the_line_by_line_merge(seed: int, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from streammetrics.stream import label_columns

    monkeypatch.setattr(label_columns, "CHUNK_LINES", chunk)
    rng = random.Random(seed)
    preds, labels = _files(rng, 300)
    parser = DelayedEventParser("binary")
    sources = [("p", preds), ("l", labels)]
    c1, c2 = [0, 0], [0, 0]
    _, old = _merged(sources, parser.parse_value, c1)
    _, new = _merged(sources, parser.parse_value, c2, label_columns.decoders(parser.base))
    want = [(rank, line, repr(item)) for items, ranks, lines in old for rank, line, item in zip(ranks, lines, items)]
    got = [(rank, line, repr(item)) for items, ranks, lines in new for rank, line, item in zip(ranks, lines, items)]
    assert got == want
    assert c1 == c2
    assert any("Label" in g[2] for g in got) and any("Rejection" in g[2] for g in got)


def _stream(max_pending: int, max_labels: int):  # type: ignore[no-untyped-def]
    from streammetrics.monitors import BinaryMonitor
    from streammetrics.stream.label_stream import LabelStream
    from streammetrics.stream.labels import LabelJoin
    from streammetrics.stream.pending import PendingStore
    from streammetrics.stream.windows import WindowManager

    join = LabelJoin(300, store=PendingStore(memory_budget=50, max_pending=max_pending), max_labels=max_labels)
    return LabelStream(WindowManager(BinaryMonitor, 60, include_state=True), join)


def _items(rng: random.Random, n: int, rate: float) -> list:  # type: ignore[type-arg]
    from streammetrics.events.parser import Event
    from streammetrics.stream.labels import Label

    items: list = []  # type: ignore[type-arg]
    t = 1_700_000_000.0
    ids: list[str] = []
    for i in range(n):
        t += rng.expovariate(rate)
        u = rng.random()
        ts = t - rng.uniform(0, 200) if rng.random() < 0.005 else t  # some late or out of order
        if u < 0.5:
            ident = f"p{i}" if rng.random() > 0.02 else f"p{max(i - 3, 0)}"  # a repeated id now and then
            ids.append(ident)
            items.append(Event(ts, rng.choice(["a", "b", "c"]), "", None, rng.random(), None, None,
                               1.0 if rng.random() > 0.05 else 2.5, ident))
        elif u < 0.51:
            items.append(Event(ts, "a", "", rng.randrange(2), rng.random(), None, None, 1.0, None))
        elif ids:
            v = rng.random()  # mostly a prediction's first label; duplicates and unknown ids too
            ident = ids.pop(rng.randrange(min(len(ids), 50))) if v > 0.04 else f"none{i}" if v > 0.02 \
                else f"p{rng.randrange(i)}"
            items.append(Label(ident, rng.randrange(2), ts))
    return items


@pytest.mark.parametrize("seed", range(6))
def test_add_many_is_add_of_each(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs applied together change the windows, the join and the notices exactly as item by item,
    at the bounds too (a pending store of 300 and 1,500 remembered labels: evictions beside runs)."""
    from streammetrics.stream.label_stream import LabelStream

    taken = []
    run = LabelStream._take_run
    monkeypatch.setattr(LabelStream, "_take_run", lambda self, *a: taken.append(run(self, *a)) or taken[-1])
    rng = random.Random(seed)
    items = _items(rng, 6000, [1.0, 30.0][seed % 2])
    bounds = (300, 1500) if seed % 3 == 2 else (10**6, 10**6)
    one, many = _stream(*bounds), _stream(*bounds)
    want_notes, want_out, got_notes, got_out = [], [], [], []
    for lo in range(0, len(items), 500):
        part = items[lo:lo + 500]
        for i, item in enumerate(part):
            notes = one.add(item)
            if notes:
                want_notes.append((lo + i, [repr(x) for x in notes]))
        want_out += one.poll()
        got_notes += [(lo + i, [repr(x) for x in notes]) for i, notes in many.add_many(part)]
        got_out += many.poll()
    want_out += one.flush()
    got_out += many.flush()
    assert got_notes == want_notes
    assert got_out == want_out
    assert many.summary() == one.summary()
    assert many.to_dict() == one.to_dict()
    assert len(want_out) > 20 and len(want_notes) > 20
    if seed % 2:  # (dense: most items in runs)
        assert sum(taken) > len(items) // 3
