"""The report with delayed labels: latest revision per window, label counts, the label-arrival chart.

Snapshots come from ``replay`` of the shipped delayed-label example (predictions and labels in two
files) and from hand-written snapshots whose expected values are plain arithmetic. Old snapshots
(without ``revision``/``labeled``/``expired``/``pending``) and snapshots of streams whose labels all
came inline must give the same page as before delayed labels existed.
"""
from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streammetrics
from streammetrics import cli

if not os.environ.get("CI"):  # in CI the test extra must provide matplotlib: fail, do not skip
    pytest.importorskip("matplotlib", reason="the report needs matplotlib: pip install 'streammetrics[report]'")

from test_report import (  # noqa: E402  (the tiny DOM and replay helpers of the main report tests)
    BINARY_CHARTS,
    charts,
    load_lines,
    parse_html,
    replay,
    sections,
)

from streammetrics.report import build_report  # noqa: E402
from streammetrics.report.charts import label_arrival_points, max_charts_of  # noqa: E402
from streammetrics.report.history import group_by_key  # noqa: E402
from streammetrics.report.sources import LABEL_FIELDS, from_dicts, read_jsonl  # noqa: E402

DATA = Path(streammetrics.__file__).parent / "data"
T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC


def snap(start: float = T0, *, model: str = "m", size: float = 60.0, count: int = 10, revision: int | None = 0,
         labeled: int | None = None, expired: int = 0, tag: float = 0.0) -> dict[str, Any]:
    """A binary snapshot without state; ``labeled=None`` for an old snapshot (no label fields)."""
    out: dict[str, Any] = {"schema": "streammetrics.snapshot/1", "key": {"model": model, "segment": ""},
                           "window": {"start": start, "end": start + size}, "final": True, "count": count,
                           "late": 0, "metrics": {"roc_auc": 0.8, "roc_auc_low": 0.8, "roc_auc_high": 0.8,
                                                  "tag": tag}}
    if labeled is not None:
        out.update(revision=revision, labeled=labeled, expired=expired, pending=count - labeled - expired,
                   final=labeled + expired == count)
    return out


def page(loaded: Any, **kwargs: Any) -> str:
    html, _ = build_report(loaded, **kwargs)
    return re.sub(r"generated [^·]*·", "generated ·", html)  # the minute it was built


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("revisions")


@pytest.fixture(scope="module")
def delayed(workdir: Path) -> Path:
    """Snapshots of the shipped delayed-label example, one-minute windows (two revisions per window)."""
    return replay(workdir, "delayed", str(DATA / "delayed_predictions.jsonl"), "--labels",
                  str(DATA / "delayed_labels.jsonl"), "--label-ttl", "15m", "--window", "1m")


def latest_revisions(lines: list[dict]) -> dict[tuple, dict]:
    """The expected latest revision per window, computed from the snapshot dicts."""
    out: dict[tuple, dict] = {}
    for s in lines:
        ident = (s["key"]["model"], s["key"]["segment"], s["window"]["start"])
        if ident not in out or s["revision"] >= out[ident]["revision"]:
            out[ident] = s
    return out


# ---------------------------------------------------------------------- latest revision
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=9), st.randoms(use_true_random=False))
def test_the_highest_revision_wins_whatever_the_order_and_equal_ones_the_last(revisions: list[int],
                                                                             rnd: random.Random) -> None:
    snaps = [snap(revision=r, labeled=min(r + i % 2, 10), tag=float(i)) for i, r in enumerate(revisions)]
    order = list(range(len(snaps)))
    rnd.shuffle(order)
    loaded = from_dicts([snaps[i] for i in order])
    top = max(revisions)
    winner = [i for i in order if revisions[i] == top][-1]
    [kept] = loaded.snapshots
    assert (kept.revision, kept.metrics["tag"], kept.labeled) == (top, winner, snaps[winner]["labeled"])
    assert loaded.superseded == sum(r < top for r in revisions)
    assert loaded.duplicates == sum(r == top for r in revisions) - 1
    # every revision seen, once, with the label counts of its last copy read
    assert [r.revision for r in kept.revisions] == sorted(set(revisions))
    for r in kept.revisions:
        last = [i for i in order if revisions[i] == r.revision][-1]
        assert r.labeled == snaps[last]["labeled"] and r.predictions == 10 and r.labeled_share == r.labeled / 10


def test_out_of_order_duplicated_revisions_give_the_same_windows_and_summary(delayed: Path) -> None:
    lines = delayed.read_text().splitlines(keepends=True)
    clean = read_jsonl(lines)
    assert clean.superseded > 0  # the example has earlier revisions
    rnd = random.Random(13)
    hostile = lines[::-1] + rnd.sample(lines, len(lines))  # reversed, then every line again, shuffled
    messy = read_jsonl([line.encode() for line in hostile])

    def view(loaded: Any) -> dict:
        return {w.identity: (w.revision, w.labeled, w.expired, w.pending, dict(w.metrics)) for w in loaded.snapshots}

    expected = latest_revisions(load_lines(delayed))
    assert view(messy) == view(clean)
    assert {k[:3]: v[:4] for k, v in view(clean).items()} == {
        k: (s["revision"], s["labeled"], s["expired"], s["pending"]) for k, s in expected.items()}

    def summary(html: str) -> str:
        return str(parse_html(html).find("section", id="summary").text)

    assert summary(page(messy)) == summary(page(clean))


# ---------------------------------------------------------------------- validation
GOOD = snap(labeled=4, expired=1)


@pytest.mark.parametrize("change, field", [
    ({"revision": -1}, "revision"), ({"revision": "1"}, "revision"), ({"revision": True}, "revision"),
    ({"revision": 1.5}, "revision"), ({"labeled": -1, "pending": 10}, "labeled"), ({"expired": None}, "expired"),
    ({"pending": 2 ** 63}, "pending"), ({"pending": 4}, "labeled"),  # 4 + 1 + 4 != 10
    ({"labeled": 11, "pending": -2}, "pending"), ({"labeled": 5}, "labeled"),  # sums to 11
])
def test_bad_label_fields_skip_the_line_naming_the_field(change: dict, field: str) -> None:
    bad = {**GOOD, **change}
    for fast in (True, False):
        loaded = read_jsonl([json.dumps(GOOD), json.dumps(bad), json.dumps(snap(T0 + 60, labeled=10))], fast=fast)
        assert len(loaded.snapshots) == 2 and loaded.skipped == 1
        assert loaded.reasons == {field: 1}, loaded.reasons
        assert loaded.problems[0].startswith("line 2: ") and field in loaded.problems[0]


@pytest.mark.parametrize("missing", LABEL_FIELDS)
def test_label_fields_come_together(missing: str) -> None:
    partial = {k: v for k, v in GOOD.items() if k != missing}
    loaded = from_dicts([partial])
    assert loaded.skipped == 1 and not loaded.snapshots
    assert f"{missing} is missing" in loaded.problems[0]


def test_sum_mismatch_says_what_it_expected() -> None:
    loaded = from_dicts([{**GOOD, "pending": 3}])
    assert "labeled + expired + pending (4 + 1 + 3) must equal count (10)" in loaded.problems[0]


# ---------------------------------------------------------------------- old snapshots: as before
def test_old_snapshots_and_inline_labels_render_exactly_as_before(workdir: Path) -> None:
    """A replay without delayed labels writes revision 0, labeled == count; without those fields
    (snapshots written before delayed labels) the page is the same, with nothing about labels."""
    new = load_lines(replay(workdir, "inline", "--sample"))
    assert all(s["revision"] == 0 and s["labeled"] == s["count"] and s["pending"] == 0 for s in new)
    old = [{k: v for k, v in s.items() if k not in LABEL_FIELDS} for s in new]
    old_page, new_page = page(from_dicts(old), alerts=["roc_auc<0.85"]), page(from_dicts(new), alerts=["roc_auc<0.85"])
    assert old_page == new_page
    doc = parse_html(old_page)
    for section in sections(doc).values():
        assert set(charts(section)) == BINARY_CHARTS
    assert "labelled" not in old_page and "pending" not in old_page and "revision" not in old_page
    assert not [h for h in group_by_key(from_dicts(new).snapshots) if h.delayed_labels]


def test_old_and_delayed_keys_in_one_file(delayed: Path) -> None:
    old = [{k: v for k, v in s.items() if k not in LABEL_FIELDS} | {"key": {"model": "old", "segment": ""}}
           for s in load_lines(delayed) if s["revision"] == 0]
    loaded = from_dicts(old + load_lines(delayed))
    histories = {h.model: h for h in group_by_key(loaded.snapshots)}
    assert not histories["old"].delayed_labels and histories["fraud-v1"].delayed_labels
    assert max_charts_of(histories["fraud-v1"]) == max_charts_of(histories["old"]) + 1  # + label arrival
    doc = parse_html(page(loaded))
    row = doc.find("tr", data_key="old|")
    assert row.find("td", data_metric="labeled_share").text == "–"
    assert row.find("td", data_metric="pending").text == "–"
    found = sections(doc)
    assert "label-arrival" not in charts(found[("old", "")])
    assert "label-arrival" in charts(found[("fraud-v1", "web")])


# ---------------------------------------------------------------------- labels on the page
def test_summary_shows_the_latest_windows_labelled_share_and_pending(delayed: Path, workdir: Path) -> None:
    lines = load_lines(delayed)
    # keep only revision 0 of the last two windows: their latest revisions then still await labels
    starts = sorted({s["window"]["start"] for s in lines})
    cut = [s for s in lines if not (s["window"]["start"] in starts[-3:-1] and s["revision"] > 0)]
    path = workdir / "cut.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in cut))
    out = workdir / "cut.html"
    assert cli.main(["report", str(path), "-o", str(out)]) == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    expected = latest_revisions(cut)
    assert {"labelled", "pending"} <= set(doc.find("table", class_="summary").texts("th"))
    for (model, segment), section in sections(doc).items():
        mine = sorted((s for k, s in expected.items() if k[:2] == (model, segment)), key=lambda s: s["window"]["start"])
        last = mine[-1]
        row = doc.find("tr", data_key=f"{model}|{segment}")
        share = row.find("td", data_metric="labeled_share")
        assert share.find("span", class_="v").text == f"{last['labeled'] / last['count']:.1%}"
        assert share.find("span", class_="d").text == f"{last['labeled']} of {last['count']}"
        pending = row.find("td", data_metric="pending")
        assert pending.find("span", class_="v").text == f"{last['pending']:,}"
        in_all = sum(s["pending"] for s in mine)
        assert in_all > 0 and pending.find("span", class_="d").text == f"{in_all:,} in all"
        meta = section.find("p", class_="meta").text
        assert (f"delayed labels: {sum(s['labeled'] for s in mine):,} labelled, "
                f"{sum(s['expired'] for s in mine):,} expired, {in_all:,} pending") in meta
        found = charts(section)
        assert set(found) == BINARY_CHARTS | {"label-arrival"}
        count_svg = found["count"].find("svg").text
        assert "awaiting a label" in count_svg and "expired" in count_svg
        arrival = found["label-arrival"]
        assert "share labelled vs window age" in arrival.attrs["title"]
        assert "age now" in arrival.find("figcaption").text


def test_label_arrival_points_are_share_against_age() -> None:
    """Window A [0, 60) rev 0 (2/10) then rev 1 (8/10 + 2 expired), window B [60, 120) rev 0 (5/10
    pending 5), written A0, B0, A1: the stream clock is 60 at A0, 120 at B0 and A1; now is 120."""
    loaded = from_dicts([snap(T0, revision=0, labeled=2), snap(T0 + 60, revision=0, labeled=5),
                         snap(T0, revision=1, labeled=8, expired=2)])
    [history] = group_by_key(loaded.snapshots)
    assert history.now == T0 + 120 and history.delayed_labels
    assert label_arrival_points(history) == [([0.0, 60.0], [0.2, 0.8], [10, 10], False),
                                             ([0.0], [0.5], [10], True)]
    # reversed input: A1 first (clock 60), so the latest revision wins and A0 is only an earlier revision
    loaded = from_dicts([snap(T0, revision=1, labeled=8, expired=2), snap(T0 + 60, revision=0, labeled=5),
                         snap(T0, revision=0, labeled=2)])
    [history] = group_by_key(loaded.snapshots)
    assert label_arrival_points(history) == [([60.0, 60.0], [0.2, 0.8], [10, 10], False),
                                             ([0.0], [0.5], [10], True)]
