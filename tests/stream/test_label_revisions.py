"""Revision numbers of delayed-label windows are a function of the events' timestamps.

Closed windows that labels or expiries changed emit their new revision at the next revision
tick (event time minus grace entering a new pane) and at the end of input
(:meth:`WindowManager.revision_tick`), so replay's output does not depend on how often it polls
or on the order of items with equal ``ts``, and a window's last revision number is the number
of distinct panes in which labels or expiries changed it after it closed: the rule
``streammetrics.spark.window_snapshots`` computes, checked here against an independent count.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from streammetrics.cli import main
from streammetrics.stream import label_replay

WINDOW, SLIDE, GRACE, TTL = 10, 5, 2, 30  # seconds; panes of 5 s


def scenario(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Predictions of four keys at whole seconds (many equal ``ts``) over ~40 panes, labels
    arriving 0-60 s later (past the TTL: expired), some never; a few labelled inline; three
    still pending at the end."""
    rnd = random.Random(seed)
    preds, labels = [], []
    for i in range(700):
        ts = 1000 + rnd.randrange(200)
        p: dict[str, Any] = {"ts": ts, "model": rnd.choice(["a", "b"]), "segment": rnd.choice(["", "s"]),
                             "id": f"p{i}", "score": rnd.randrange(9) / 8}
        if rnd.random() < 0.1:
            p["y_true"] = rnd.randrange(2)
        elif rnd.random() < 0.85:
            labels.append({"id": f"p{i}", "y_true": rnd.randrange(2), "ts": ts + rnd.randrange(61)})
        preds.append(p)
    preds += [{"ts": 1255, "model": "a", "segment": "", "id": f"q{i}", "score": 0.5} for i in range(3)]  # pending
    preds.sort(key=lambda r: r["ts"])
    labels.sort(key=lambda r: r["ts"])
    return preds, labels


def shuffle_ties(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The same rows, each run of equal ``ts`` in another order (still time-ordered)."""
    rnd = random.Random(seed)
    out: list[dict[str, Any]] = []
    for ts in sorted({r["ts"] for r in rows}):
        run = [r for r in rows if r["ts"] == ts]
        rnd.shuffle(run)
        out += run
    return out


def run(tmp: Path, preds: list[dict[str, Any]], labels: list[dict[str, Any]], name: str) -> list[str]:
    pp, lp, out = tmp / f"{name}-p.jsonl", tmp / f"{name}-l.jsonl", tmp / f"{name}-out.jsonl"
    pp.write_text("".join(json.dumps(r) + "\n" for r in preds))
    lp.write_text("".join(json.dumps(r) + "\n" for r in labels))
    assert main(["replay", str(pp), "--labels", str(lp), "--window", f"{WINDOW}s", "--slide", f"{SLIDE}s",
                 "--grace", f"{GRACE}s", "--label-ttl", f"{TTL}s", "--output", str(out), "--progress", "off"]) == 0
    return out.read_text().splitlines()


def expected_revisions(preds: list[dict[str, Any]], labels: list[dict[str, Any]]) -> dict[tuple, int]:
    """The rule, counted from timestamps alone (seconds here; every label is the first of its id
    and comes at or after its prediction): for window k of key A, C = the first ts of a
    prediction (of any key: one watermark for the stream) at or after the window's end + grace
    (when it closes); a label at L changes it after it closed if
    L >= C (predictions go first on equal ts), in pane (L - grace) // pane; an expiry (no label
    within the TTL) happens at X, the first item ts past ts + TTL, after the close if
    C <= ts + TTL, in pane (X - grace) // pane. Revisions = distinct panes of such changes."""
    pane = SLIDE
    label_at = {r["id"]: r["ts"] for r in labels}
    items = sorted([r["ts"] for r in preds] + [r["ts"] for r in labels])
    times = [p["ts"] for p in preds]
    changes: dict[tuple, set[int]] = {}
    for p in preds:
        if "y_true" in p:
            continue
        key, ts = (p["model"], p["segment"]), p["ts"]
        for k in range((ts - WINDOW) // SLIDE + 1, ts // SLIDE + 1):
            end = k * SLIDE + WINDOW
            closes = [t for t in times if t >= end + GRACE]
            if not closes:
                continue  # closed by the end of input: everything is in revision 0
            c = min(closes)
            win = changes.setdefault((*key, k * SLIDE), set())
            if p["id"] in label_at and label_at[p["id"]] <= ts + TTL:
                if label_at[p["id"]] >= c:
                    win.add((label_at[p["id"]] - GRACE) // pane)
            else:
                later = [t for t in items if t > ts + TTL]
                if later and c <= ts + TTL:
                    win.add((min(later) - GRACE) // pane)
    return {k: len(v) for k, v in changes.items() if v}


def last_revisions(lines: list[str]) -> dict[tuple, dict[str, Any]]:
    last: dict[tuple, dict[str, Any]] = {}
    for line in lines:
        s = json.loads(line)
        key = (s["key"]["model"], s["key"]["segment"], round(s["window"]["start"]))
        assert key not in last or s["revision"] == last[key]["revision"] + 1  # 0, 1, 2, ... in order
        last[key] = s
    return last


@pytest.mark.parametrize("seed", [1, 2])
def test_revision_numbers_do_not_depend_on_polls_or_on_the_order_of_equal_times(tmp_path, monkeypatch, seed):
    preds, labels = scenario(seed)
    outputs = {}
    for poll_every in (0, 0x3F, (1 << 62) - 1):  # every item, every 64, only at the end
        monkeypatch.setattr(label_replay, "POLL_EVERY", poll_every)
        outputs[poll_every] = run(tmp_path, preds, labels, f"poll{poll_every}")
    assert outputs[0] == outputs[0x3F] == outputs[(1 << 62) - 1]
    reordered = run(tmp_path, shuffle_ties(preds, seed), shuffle_ties(labels, seed), "ties")
    assert sorted(reordered) == sorted(outputs[0])  # windows may close in another order, same lines
    last = last_revisions(outputs[0])
    assert max(s["revision"] for s in last.values()) >= 3  # labels over many panes
    assert any(s["expired"] for s in last.values()) and any(s["pending"] for s in last.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_last_revision_is_the_number_of_panes_with_changes_after_the_close(tmp_path, seed):
    preds, labels = scenario(seed)
    last = last_revisions(run(tmp_path, preds, labels, "rule"))
    want = expected_revisions(preds, labels)
    assert {k: s["revision"] for k, s in last.items() if s["revision"]} == want
    assert sum(want.values()) > 50


def test_a_quiet_stream_keeps_revisions_until_a_tick_or_the_end(tmp_path):
    """Labels in one pane after the window closed: one revision, emitted when event time enters
    the next pane (or at the end), however many labels and polls."""
    preds = [{"ts": 1000 + i, "model": "m", "id": f"p{i}", "score": 0.5} for i in range(5)]
    preds.append({"ts": 1013, "model": "m", "y_true": 1, "score": 0.5})  # closes [1000, 1010) (grace 2)
    labels = [{"id": f"p{i}", "y_true": 1, "ts": 1017 + i * 0.5} for i in range(5)]  # one pane: [1017, 1022)
    lines = run(tmp_path, preds, labels, "quiet")
    first = [json.loads(x) for x in lines if json.loads(x)["window"]["start"] == 1000]
    assert [(s["revision"], s["labeled"], s["final"]) for s in first] == [(0, 0, False), (1, 5, True)]
