"""Operating points in replay snapshots (contract section 11; issue 28 point 5): equal to
scikit-learn on each window's events, the same lines on every window path, and the default
output unchanged."""
from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_curve

from streammetrics.cli import main
from streammetrics.monitors.operating_points import OperatingPoints
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines

ADDED = ("precision_at_recall", "threshold_at_recall", "recall_at_precision", "threshold_at_precision",
         "tpr_at_fpr", "threshold_at_fpr", "expected_cost")
POINTS = OperatingPoints(target_recall=0.7, target_precision=0.6, target_fpr=0.2, cost_fp=1.0, cost_fn=4.0)


def _events(seed: int = 0, keys: int = 40, n: int = 1500) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = float(np.round(rng.random(), 3))
        s = min(max(s, 0.001), 0.999)
        out.append({"ts": i * 300.0 / n, "model": f"m{int(rng.integers(keys))}", "segment": "",
                    "y_true": int(rng.random() < s), "score": s})
    return out


def _lines(events: list[dict], **config) -> list[str]:
    pipe = Pipeline(PipelineConfig(window=60.0, **config))
    out: list[str] = []
    replay_lines([json.dumps(e).encode() for e in events], pipe, out.append)
    return out


def _lexmax(rows):
    best = max(rows, default=None)
    return (0.0, None) if best is None or best[0] == 0 else (best[0], best[-1])


def test_snapshots_equal_sklearn_on_each_window() -> None:
    events = _events()
    windows: dict = defaultdict(list)
    for e in events:
        windows[(e["model"], int(e["ts"] // 60))].append(e)
    lines = _lines(events, operating_points=POINTS)
    checked = 0
    for line in lines:
        snap = json.loads(line)
        m = snap["metrics"]
        evs = windows[(snap["key"]["model"], int(snap["window"]["start"] // 60))]
        y = np.array([e["y_true"] for e in evs])
        s = np.array([e["score"] for e in evs])
        pred = s >= 0.5
        assert m["expected_cost"] == pytest.approx(
            (1.0 * np.sum(pred & (y == 0)) + 4.0 * np.sum(~pred & (y == 1))) / len(y), rel=1e-12)
        if y.min() == y.max():
            assert m["tpr_at_fpr"] is None and m["threshold_at_fpr"] is None
            continue
        p, r, t = precision_recall_curve(y, s)
        fpr, tpr, rt = roc_curve(y, s, drop_intermediate=False)
        assert (m["precision_at_recall"], m["threshold_at_recall"]) == _lexmax(
            (a, b, c) for a, b, c in zip(p, r, t) if b >= 0.7)
        assert (m["recall_at_precision"], m["threshold_at_precision"]) == _lexmax(
            (b, a, c) for a, b, c in zip(p, r, t) if a >= 0.6)
        assert (m["tpr_at_fpr"], m["threshold_at_fpr"]) == _lexmax((b, c) for a, b, c in zip(fpr, tpr, rt) if a <= 0.2)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("include_state", [True, False])
def test_every_window_path_writes_the_same_lines(include_state: bool) -> None:
    """Small tumbling windows take the vectorised pass without the flags; with them, the
    window-by-window path: batched, event by event, and the flagless lines plus the metrics."""
    events = _events(1, keys=200, n=3000)
    batched = _lines(events, operating_points=POINTS, include_state=include_state)
    single = _lines(events, operating_points=POINTS, include_state=include_state, batch=False)
    assert batched == single
    plain = _lines(events, include_state=include_state)
    assert len(plain) == len(batched)
    for a, b in zip(plain, batched):
        snap = json.loads(b)
        extra = {k: snap["metrics"].pop(k) for k in ADDED}
        assert all(v is None or math.isfinite(v) for v in extra.values())
        assert snap == json.loads(a)


def test_default_output_has_no_operating_points(tmp_path, capsys) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["replay", "--sample", "-o", str(out), "-q"]) == 0
    assert not any(k in out.read_text() for k in ("precision_at_recall", "expected_cost", "tpr_at_fpr"))
    assert main(["replay", "--sample", "-o", str(out), "-q", "--target-fpr", "0.1"]) == 0
    first = json.loads(out.read_text().splitlines()[0])["metrics"]
    assert "tpr_at_fpr" in first and "precision_at_recall" not in first


def test_flags_are_checked(tmp_path, capsys) -> None:
    assert main(["replay", "--sample", "-o", str(tmp_path / "o"), "--cost-fp", "1"]) == 2
    assert "--cost-fn" in capsys.readouterr().err
    assert main(["replay", "--sample", "-o", str(tmp_path / "o"), "--task", "regression", "--target-fpr", "0.1"]) == 2
    assert "--task binary" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", "--sample", "--target-recall", "1.5"])


def test_estimated_expected_cost_from_the_reference(tmp_path) -> None:
    from streammetrics.monitors.reference import Reference

    rng = np.random.default_rng(5)
    s = rng.random(4000)
    y = (rng.random(4000) < s).astype(int)
    ref = Reference.from_arrays(y, s, exact=True)
    window = _events(2, keys=1, n=500)
    lines = _lines(window, operating_points=POINTS, references={("m0", ""): ref}, include_state=False)
    ys = np.array([e["y_true"] for e in window])
    ss = np.array([e["score"] for e in window])
    for line in lines:
        snap = json.loads(line)
        m = snap["metrics"]
        sel = (ss >= 0) & np.array([int(e["ts"] // 60) * 60 == snap["window"]["start"] for e in window])
        c = ref.calibrated(ss[sel])  # CBPE: the calibrated probability stands for the label
        pred = ss[sel] >= 0.5
        want = (1.0 * np.sum((1 - c)[pred]) + 4.0 * np.sum(c[~pred])) / sel.sum()
        assert m["estimated_expected_cost"] == pytest.approx(want, rel=1e-9)
        assert "estimated_roc_auc" in m
    assert ys.size
