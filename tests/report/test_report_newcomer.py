"""Report defects (issue 29, point 4): estimated-vs-realised colours, the summary's label-free
columns, key order and partial last window, hopping windows in the events chart."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib")

from streammetrics.report import write_report  # noqa: E402
from streammetrics.report.charts import (  # noqa: E402
    COLORS,
    ESTIMATED,
    count_bars,
    estimated_chart,
    line_styles,
    window_hop,
)
from streammetrics.report.history import group_by_key  # noqa: E402
from streammetrics.report.sources import from_dicts  # noqa: E402

T0 = 1_767_225_600


def snap(model, start, count, size=60, **metrics):
    base = {"count": count, "roc_auc": 0.9, "f1": 0.8, "precision": 0.8, "recall": 0.8, "accuracy": 0.85,
            "log_loss": 0.3, "brier_score": 0.1}
    base.update(metrics)
    return {"schema": "streammetrics.snapshot/1", "key": {"model": model, "segment": ""},
            "window": {"start": start, "end": start + size}, "final": True, "count": count, "late": 0,
            "metrics": base}


def histories(snaps):
    return {h.model: h for h in group_by_key(from_dicts(snaps).snapshots)}


def test_estimated_and_realised_pairs_each_have_their_own_colour():
    metrics = [x for m in ("estimated_roc_auc", "estimated_accuracy", "estimated_f1") for x in (m, ESTIMATED[m])]
    styles = line_styles(metrics)
    for est in ("estimated_roc_auc", "estimated_accuracy", "estimated_f1"):
        assert styles[est] == (styles[ESTIMATED[est]][0], "--") and styles[ESTIMATED[est]][1] == "-"
    assert len({styles[m][0] for m in ("roc_auc", "accuracy", "f1")}) == 3  # was: two pairs in one colour
    assert styles["roc_auc"][0] == COLORS["roc_auc"]
    # two metrics whose usual colours clash get different ones
    clash = line_styles(["f1", "macro_f1"])
    assert clash["f1"][0] != clash["macro_f1"][0]


def test_estimated_chart_draws_dashed_estimates(tmp_path):
    snaps = [snap("m", T0 + 60 * i, 100, estimated_roc_auc=0.88, estimated_accuracy=0.8, estimated_f1=0.7)
             for i in range(6)]
    chart = estimated_chart(histories(snaps)["m"], "c")
    assert chart is not None and "dashed: estimated" in chart.caption
    strokes = re.findall(r"stroke: ?(#[0-9a-f]{6})", chart.svg)
    for m in ("roc_auc", "accuracy", "f1"):
        assert COLORS[m] in strokes or line_styles(["roc_auc", "accuracy", "f1"])[m][0] in strokes
    assert "stroke-dasharray" in chart.svg


def summary_rows(page):
    table = re.search(r'<table class="summary" data-task="binary">(.*?)</table>', page, re.S).group(1)
    return table, re.findall(r'<tr data-key="([^"]*)" data-alerts="(\d+)"', table)


def test_summary_label_free_columns_order_and_partial_last_window(tmp_path):
    snaps = []
    for model in ("alpha", "zulu"):
        for i in range(8):
            snaps.append(snap(model, T0 + 60 * i, 100, roc_auc=0.9 - (0.2 if model == "zulu" and i == 5 else 0),
                              drift_ks=0.05 + i / 100, estimated_roc_auc=0.87))
    snaps.append(snap("alpha", T0 + 480, 7, roc_auc=0.81))  # the input ended 7 events into this window
    snaps.append(snap("zulu", T0 + 480, 96))
    path = tmp_path / "r.html"
    write_report(snaps, str(path), alerts=["roc_auc<0.8"])
    page = path.read_text()
    table, rows = summary_rows(page)
    assert [k for k, _ in rows] == ["zulu|", "alpha|"]  # the key with an alert first (was alphabetical)
    for metric in ("drift_ks", "estimated_roc_auc"):
        assert f'<th data-metric="{metric}">' in table
    alpha = table[table.index('data-key="alpha|"'):]
    assert 'data-partial="1"' in alpha.split("</tr>")[0] and "then a partial window (7 events)" in alpha
    cell = re.search(r'<td data-metric="roc_auc"><span class="v">([^<]*)</span><span class="d ([a-z-]+)"', alpha)
    assert cell.group(1) == "0.900" and cell.group(2) == "same"  # the last complete window, no drop
    assert "partial window (input ended)" in page  # drawn apart in the charts


def test_partial_window_rules():
    base = [snap("m", T0 + 60 * i, 100) for i in range(6)]
    assert [w.count for w in histories([*base, snap("m", T0 + 360, 10)])["m"].partial] == [10]
    assert histories([*base, snap("m", T0 + 360, 80)])["m"].partial == []  # not cut short enough
    # the key stopped before the input did: a real decline, not the end of the input
    stopped = histories([*base, snap("m", T0 + 360, 10), snap("other", T0 + 900, 5)])["m"]
    assert stopped.partial == []
    assert histories([snap("m", T0, 100), snap("m", T0 + 60, 5)])["m"].partial == []  # too few windows to say


def test_hopping_windows_do_not_overlap_in_the_events_chart():
    snaps = [snap("m", T0 + 60 * i, 100, size=300) for i in range(10)]  # 5m windows every minute
    h = histories(snaps)["m"]
    assert window_hop(h) == 60
    chart = count_bars(h, "c")
    assert "hopping windows: each bar is the window starting there, drawn 1m wide" in chart.caption
    tumbling = histories([snap("m", T0 + 60 * i, 100) for i in range(4)])["m"]
    assert window_hop(tumbling) == 60 and "hopping" not in count_bars(tumbling, "c").caption
