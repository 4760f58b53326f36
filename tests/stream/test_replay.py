"""`streammetrics replay`: windowed snapshots equal scikit-learn on each window's events."""
from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import warnings
from collections import defaultdict

import numpy as np
import pytest
from sklearn import metrics as skm

from streammetrics.cli import main
from streammetrics.stream.replay import sample_path
from streammetrics.stream.synthetic import generate_events


def run_cli(args, capsys, stdin_text=None, monkeypatch=None):
    if stdin_text is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin_text.encode())))
    code = main(args)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def windows_of(events, size, slide):
    """{(model, segment, start): [events]} for every window holding an event, by event time."""
    out = defaultdict(list)
    for ev in events:
        ms = round(ev["ts"] * 1000)
        k_hi = ms // round(slide * 1000)
        k = k_hi
        while k * slide * 1000 + size * 1000 > ms:
            out[(ev["model"], ev["segment"], k * slide)].append(ev)
            k -= 1
    return out


def assert_snapshot_matches_sklearn(snap, evs, threshold=0.5):
    y = np.array([e["y_true"] for e in evs])
    s = np.array([e["score"] for e in evs])
    m = snap["metrics"]
    assert snap["count"] == len(evs)
    pred = (s >= threshold).astype(int)
    assert m["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f1 = skm.f1_score(y, pred, zero_division=np.nan)
    assert (m["f1"] is None and math.isnan(f1)) or m["f1"] == pytest.approx(f1, abs=1e-12)
    assert m["log_loss"] == pytest.approx(skm.log_loss(y, s, labels=[0, 1]), abs=1e-12)
    assert m["brier_score"] == pytest.approx(skm.brier_score_loss(y, s), abs=1e-12)
    if len(set(y.tolist())) == 2:
        exact = skm.roc_auc_score(y, s)
        assert m["roc_auc_low"] <= exact <= m["roc_auc_high"]
        assert m["roc_auc"] == pytest.approx(exact, abs=2e-3)
    else:
        assert m["roc_auc"] is None


def test_replay_sample_matches_sklearn_per_window(capsys):
    code, snaps, err = run_cli(["replay", "--sample", "--window", "60s"], capsys)
    assert code == 0
    with open(sample_path()) as fh:
        events = [json.loads(line) for line in fh]
    expected = windows_of(events, 60, 60)
    got = {(s["key"]["model"], s["key"]["segment"], s["window"]["start"]): s for s in snaps}
    assert set(got) == set(expected)
    for key, evs in expected.items():
        assert_snapshot_matches_sklearn(got[key], evs)
        assert got[key]["schema"] == "streammetrics.snapshot/1" and got[key]["final"] is True
        assert got[key]["state"]["type"] == "BinaryMonitor"
    assert f"{len(events)} events applied, 0 rejected, 0 late, {len(snaps)} snapshots" in err


def test_replay_hopping_windows_with_shuffled_arrival_within_grace(tmp_path, capsys):
    events = list(generate_events(3000, duration=300.0, seed=5, jitter=4.0))
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    code, snaps, err = run_cli(["replay", str(path), "--window", "60s", "--slide", "20s", "--grace", "5s",
                                "--output", "-"], capsys)
    assert code == 0 and "0 late" in err
    expected = windows_of(events, 60, 20)
    got = {(s["key"]["model"], s["key"]["segment"], s["window"]["start"]): s for s in snaps}
    assert set(got) == set(expected)
    for key, evs in expected.items():
        assert_snapshot_matches_sklearn(got[key], evs)


def test_replay_counts_late_events_and_reports_them(tmp_path, capsys):
    lines = [
        {"ts": 0, "model": "m", "y_true": 1, "score": 0.9},
        {"ts": 70, "model": "m", "y_true": 0, "score": 0.2},  # closes [0, 60)
        {"ts": 10, "model": "m", "y_true": 0, "score": 0.8},  # late
    ]
    path = tmp_path / "late.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    code, snaps, err = run_cli(["replay", str(path), "--window", "1m"], capsys)
    assert code == 0
    assert [s["count"] for s in snaps] == [1, 1]
    assert snaps[-1]["late"] == 1
    assert "line 3: late event" in err and "1 late" in err


def test_replay_reports_rejected_lines_with_numbers_and_carries_on(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"ts": 1, "model": "m", "y_true": 1, "score": 0.9}\n'
        'not json\n'
        '{"ts": 2, "model": "m", "y_true": 1}\n'
        '\n'
        '[{"ts": 3, "model": "m", "y_true": 0, "score": 0.1}, {"ts": 4, "model": "m", "y_true": 2, "score": 0.5}]\n'
        '{"ts": 5, "model": "m", "y_true": 0, "score": NaN}\n'
    )
    code, snaps, err = run_cli(["replay", str(path)], capsys)
    assert code == 0
    assert [s["count"] for s in snaps] == [2]
    for lineno in (2, 3, 5, 6):
        assert f"line {lineno}:" in err
    assert "score" in err.split("line 3:")[1].splitlines()[0]
    assert "2 events applied, 4 rejected" in err


def test_replay_reads_stdin_and_remaps_fields(capsys, monkeypatch):
    text = '{"time": "2026-01-01T00:00:05Z", "name": "m", "label": 1, "p": 0.7}\n'
    code, snaps, _err = run_cli(["replay", "-", "--field", "ts=time", "--field", "model=name",
                                "--field", "y_true=label", "--field", "score=p"], capsys, text, monkeypatch)
    assert code == 0 and len(snaps) == 1
    assert snaps[0]["window"] == {"start": 1767225600, "end": 1767225660}


def test_replay_regression_and_labels_tasks(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"ts": i, "model": "m", "y_true": float(i), "y_pred": i + 0.5}) + "\n"
                            for i in range(10)))
    code, snaps, _ = run_cli(["replay", str(path), "--task", "regression", "--no-state"], capsys)
    assert code == 0 and snaps[0]["metrics"]["mae"] == pytest.approx(0.5) and "state" not in snaps[0]
    path.write_text("".join(json.dumps({"ts": i, "model": "m", "y_true": "a", "y_pred": "ab"[i % 2]}) + "\n"
                            for i in range(10)))
    code, snaps, _ = run_cli(["replay", str(path), "--task", "labels"], capsys)
    assert code == 0 and snaps[0]["metrics"]["accuracy"] == pytest.approx(0.5)


@pytest.mark.parametrize("args,code,message", [
    (["replay", "/nonexistent/file.jsonl"], 1, "cannot read"),
    (["replay", "x.jsonl", "--window", "soon"], 2, "duration"),
    (["replay", "x.jsonl", "--field", "y_true"], 2, "NAME=SOURCE"),
    (["replay", "x.jsonl", "--task", "multiclass"], 2, "classes"),
    (["replay"], 2, "FILE"),
])
def test_replay_argument_errors(args, code, message, capsys):
    try:
        got = main(args)
    except SystemExit as exc:
        got = exc.code
    assert got == code
    assert message in capsys.readouterr().err


def test_replay_help_shows_examples(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "--grace" in out and "--field" in out


MEMORY_PROBE = r"""
import json, resource, sys
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.synthetic import generate_events

def lines(n):
    for ev in generate_events(n, duration=n / 50.0, seed=1, ids=False):
        yield json.dumps(ev).encode()

def peak_after(n):
    pipe = Pipeline(PipelineConfig(window=60.0))
    stats = replay_lines(lines(n), pipe, lambda line: None)
    assert stats.events == n, stats.summary()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

small = peak_after(50_000)
large = peak_after(int(sys.argv[1]))
print(small, large)
"""


@pytest.mark.slow
def test_replay_memory_is_flat_in_the_stream_length():
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, "500000"], capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    small_kib, large_kib = map(int, out.stdout.split())
    # 500k events (10x more, ~35 MiB of JSON) may not raise the peak by more than 16 MiB
    assert large_kib - small_kib < 16 * 1024, (small_kib, large_kib)


def test_progress_bar_on_request_and_off_when_not_a_terminal(tmp_path, capsys):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in generate_events(40_000, duration=600.0, seed=2)))
    code, _, err = run_cli(["replay", str(path), "--no-state", "--progress", "on"], capsys)
    assert code == 0 and "\r[" in err and "100.0%" in err and "40,000 lines" in err
    code, _, err = run_cli(["replay", str(path), "--no-state"], capsys)  # auto: stderr is not a TTY here
    assert code == 0 and "\r[" not in err
