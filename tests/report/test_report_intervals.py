"""The report draws each metric's interval as a band and marks significant changes (contract
section 9, issue 26): the captions say so, the summary marks the latest window's significant
changes, and the sources read ``intervals`` / ``changes`` leniently."""
from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("matplotlib")

from streammetrics.report import build_report  # noqa: E402
from streammetrics.report.history import group_by_key  # noqa: E402
from streammetrics.report.sources import from_dicts, parse_snapshot  # noqa: E402
from streammetrics.stream.pipeline import Pipeline, PipelineConfig  # noqa: E402


def _snapshots() -> list[dict]:
    rng = random.Random(7)
    p = Pipeline(PipelineConfig(window=60.0, max_future=None, compare="previous", confidence=0.9))
    for w in range(4):  # the last window loses the model's signal: a significant change
        signal = 0.0 if w == 3 else 0.35
        for i in range(500):
            y = int(rng.random() < 0.4)
            s = min(max(rng.gauss(0.35 + signal * y, 0.2), 0.001), 0.999)
            p.process(json.dumps({"ts": 1767225600 + 60 * w + 50 * i / 500, "model": "m", "y_true": y, "score": s}))
    return p.poll() + p.flush()


def test_bands_and_significant_changes_are_shown() -> None:
    snaps = _snapshots()
    assert snaps[-1]["changes"]["roc_auc"]["significant"] is True
    [history] = group_by_key(from_dicts(snaps).snapshots)
    low, high = history.interval_series("roc_auc")
    assert all(lo <= v <= hi for lo, v, hi in zip(low, history.series("roc_auc"), high))
    assert history.significant("roc_auc")[-1] and not any(history.significant("roc_auc")[:-1])
    page, _ = build_report(from_dicts(snaps))
    assert "light bands: 90% confidence intervals" in page
    assert "diamonds: significant changes" in page
    row = page[page.index('data-key="m|"'):]
    cell = row[row.index('data-metric="roc_auc"'):]
    assert '<span class="sig"' in cell[:cell.index("</td>")]


def test_malformed_intervals_and_changes_are_left_out() -> None:
    base = _snapshots()[0]
    odd = dict(base, intervals={"confidence": 2, "accuracy": [0.9, 0.1], "f1": "x", "recall": [0.1, 0.2]},
               changes={"f1": {"significant": "yes"}, "recall": {"significant": False}})
    w = parse_snapshot(odd)
    assert dict(w.intervals) == {"recall": (0.1, 0.2)} and w.intervals_confidence is None
    assert list(w.changes) == ["recall"]
    assert parse_snapshot(dict(base, intervals=None, changes=[1])).intervals == {}
