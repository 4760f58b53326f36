"""Snapshot ``changes`` (contract section 9): against the key's reference or previous window,
MOVER differences, Benjamini-Hochberg over the windows of one poll, the bound on remembered keys."""
from __future__ import annotations

import json
import random

import pytest

from streammetrics.cli import main
from streammetrics.kernels.intervals import benjamini_hochberg
from streammetrics.stream.changes import Changes
from streammetrics.stream.pipeline import Pipeline, PipelineConfig


def _events(n: int, seed: int, t0: float, model: str, signal: float = 0.3) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = int(rng.random() < 0.4)
        s = min(max(rng.gauss(0.35 + signal * y, 0.2), 0.001), 0.999)
        out.append({"ts": t0 + 50 * i / n, "model": model, "y_true": y, "score": s})
    return out


def _run(config: PipelineConfig, events: list[dict]) -> list[dict]:
    p = Pipeline(config)
    for e in sorted(events, key=lambda e: e["ts"]):
        p.process(json.dumps(e))
    return p.poll() + p.flush()


def test_previous_window_changes_and_benjamini_hochberg() -> None:
    events = []
    for k in range(6):  # six keys: window 1 healthy, window 2 healthy except key 0 (no signal)
        events += _events(600, k, 0.0, f"m{k}") + _events(600, 100 + k, 60.0, f"m{k}", 0.0 if k == 0 else 0.3)
    snaps = _run(PipelineConfig(window=60.0, max_future=None, compare="previous"), events)
    first = [s for s in snaps if s["window"]["start"] == 0]
    second = [s for s in snaps if s["window"]["start"] == 60]
    assert len(first) == len(second) == 6
    assert all("changes" not in s for s in first)
    by_key = {s["key"]["model"]: s for s in first}
    p_values = []
    for s in second:
        before = by_key[s["key"]["model"]]
        ch = s["changes"]
        assert list(s)[list(s).index("insufficient") + 1] == "changes" and list(s)[-1] == "state"
        assert set(ch) == {k for k, v in s["intervals"].items() if k != "confidence" and v is not None
                           and before["intervals"].get(k) is not None}
        for name, c in ch.items():
            assert c["baseline"] == before["metrics"][name]
            assert c["difference"] == pytest.approx(s["metrics"][name] - before["metrics"][name])
            assert c["interval"][0] <= c["difference"] <= c["interval"][1]
            p_values.append((s["key"]["model"], name, c["p_value"], c["significant"]))
    want = benjamini_hochberg([p for _, _, p, _ in p_values], 0.05).tolist()
    assert [sig for *_, sig in p_values] == want
    assert any(sig for model, name, _, sig in p_values if model == "m0" and name == "roc_auc")
    assert not any(sig for model, name, _, sig in p_values if model != "m0" and name == "roc_auc")


def test_reference_changes_from_the_cli(tmp_path, capsys) -> None:
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps({**e, "ts": 1767225600 + e["ts"]}) + "\n" for e in _events(2000, 1, 0.0, "m")))
    cur = tmp_path / "cur.jsonl"
    cur.write_text("".join(json.dumps({**e, "ts": 1767225600 + e["ts"]}) + "\n"
                           for e in _events(800, 2, 0.0, "m", signal=0.0)))
    assert main(["replay", str(cur), "--reference", str(ref), "--fdr", "0.1"]) == 0
    [snap] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    auc = snap["changes"]["roc_auc"]
    assert auc["significant"] is True and auc["difference"] < -0.2 and auc["p_value"] < 1e-6
    assert 0.8 < auc["baseline"] < 0.95


def test_changes_bound_on_remembered_keys() -> None:
    changes = Changes("previous", max_keys=1)

    def snap(model: str, start: int, auc: float) -> dict:
        return {"key": {"model": model, "segment": ""}, "window": {"start": start, "end": start + 60},
                "metrics": {"roc_auc": auc}, "intervals": {"confidence": 0.95, "roc_auc": [auc - 0.05, auc + 0.05]},
                "insufficient": [], "state": {}}
    changes.annotate([snap("a", 0, 0.8), snap("b", 0, 0.8)])
    assert changes.forgotten == 1
    out = changes.annotate([snap("a", 60, 0.6), snap("b", 60, 0.6)])
    assert "changes" in out[0] and "changes" not in out[1]
    assert out[0]["changes"]["roc_auc"]["baseline"] == 0.8
    # a revision of window 60 is compared with window 0 again, not with itself
    [rev] = changes.annotate([snap("a", 60, 0.7)])
    assert rev["changes"]["roc_auc"]["baseline"] == 0.8


@pytest.mark.parametrize("kwargs, match", [({"mode": "nearest"}, "--compare"), ({"mode": "previous", "fdr": 0.0},
                                           "--fdr"), ({"mode": "reference"}, "--reference")])
def test_changes_options_are_checked(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Changes(**kwargs)


def _pipeline_run(config: PipelineConfig, events: list[dict], restore_after: float | None = None,
                  delta: bool = False) -> list[dict]:
    """Events in time order, polled after each window's events; with ``restore_after``, the
    pipeline is checkpointed (whole, or whole then a delta) once events pass that time and a new
    pipeline restored from the checkpoint goes on."""
    p = Pipeline(config)
    out: list[dict] = []
    restored = False
    if delta:
        p.to_dict()
        full = p.to_dict()
        p.track_changes()
    for e in sorted(events, key=lambda e: e["ts"]):
        if restore_after is not None and not restored and e["ts"] >= restore_after:
            out += p.poll()
            data = Pipeline.apply_delta(full, p.delta_dict()) if delta else p.to_dict()
            data = json.loads(json.dumps(data))
            p = Pipeline(config).load_dict(data)
            restored = True
        p.process(json.dumps(e))
    return out + p.poll() + p.flush()


@pytest.mark.parametrize("delta", [False, True])
def test_previous_window_memory_survives_a_checkpoint(delta: bool) -> None:
    """--compare previous: a pipeline restored from a checkpoint (whole or with a delta) between
    two windows gives the second window the changes the uninterrupted run gives it."""
    events = []
    for k in range(3):
        events += _events(400, k, 0.0, f"m{k}") + _events(400, 50 + k, 60.0, f"m{k}", 0.0 if k == 0 else 0.3)
    config = PipelineConfig(window=60.0, max_future=None, compare="previous")
    whole = _pipeline_run(config, events)
    again = _pipeline_run(config, events, restore_after=80.0, delta=delta)
    second = [s for s in whole if s["window"]["start"] == 60]
    assert second and all(s.get("changes") for s in second)
    assert [s for s in again if s["window"]["start"] == 60] == second
    # without the memory (a checkpoint taken before it was kept), the second window has no changes
    p = Pipeline(config)
    for e in sorted(events, key=lambda e: e["ts"]):
        if e["ts"] >= 80.0:
            break
        p.process(json.dumps(e))
    p.poll()
    data = p.to_dict()
    assert data["changes"]["keys"]
    del data["changes"]
    q = Pipeline(config).load_dict(json.loads(json.dumps(data)))
    for e in sorted(events, key=lambda e: e["ts"]):
        if e["ts"] >= 80.0:
            q.process(json.dumps(e))
    assert all(not s.get("changes") for s in q.poll() + q.flush() if s["window"]["start"] == 60)


@pytest.mark.parametrize("bad, match", [
    ({"type": "Changes", "version": 1, "forgotten": -1, "keys": []}, "forgotten"),
    ({"type": "Changes", "version": 1, "forgotten": 0, "keys": [["m", "", "x", {}, None]]}, "start"),
    ({"type": "Changes", "version": 1, "forgotten": 0, "keys": [["m", "", 0, {"roc_auc": [0.8, [0.7]]}, None]]},
     "roc_auc"),
    ({"type": "Changes", "version": 1, "forgotten": 0, "keys": [["a", "", 0, {}, None], ["b", "", 0, {}, None]]},
     "max-keys"),
    ({"type": "Nope"}, "changes"),
])
def test_hostile_changes_checkpoints_are_refused(bad: dict, match: str) -> None:
    config = PipelineConfig(window=60.0, max_future=None, compare="previous", max_keys=1)
    p = Pipeline(config)
    data = p.to_dict()
    data["changes"] = bad
    with pytest.raises(ValueError, match=match):
        p.load_dict(data)


def test_multiclass_changes_against_previous_and_reference(tmp_path, capsys) -> None:
    """Multiclass windows: accuracy and macro F1 compared with the previous window, and with a
    multiclass reference's arg-max confusion matrix."""
    rng = random.Random(3)
    classes = ["a", "b", "c"]

    def rows(n: int, t0: float, right: float) -> list[dict]:
        out = []
        for i in range(n):
            y = rng.randrange(3)
            p = [0.1, 0.1, 0.1]
            p[y if rng.random() < right else rng.randrange(3)] = 0.8
            out.append({"ts": 1767225600 + t0 + 50 * i / n, "model": "m", "y_true": classes[y],
                        "scores": dict(zip(classes, p))})
        return out
    cur = tmp_path / "cur.jsonl"
    cur.write_text("".join(json.dumps(e) + "\n" for e in rows(600, 0.0, 0.9) + rows(600, 60.0, 0.4)))
    assert main(["replay", str(cur), "--task", "multiclass", "--classes", "a,b,c", "--window", "60s",
                 "--compare", "previous"]) == 0
    snaps = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    second = [s for s in snaps if s.get("changes")]
    assert len(second) == 1 and {"accuracy", "macro_f1"} <= set(second[0]["changes"])
    assert second[0]["changes"]["accuracy"]["significant"] is True
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps(e) + "\n" for e in rows(2000, 0.0, 0.9)))
    assert main(["replay", str(cur), "--task", "multiclass", "--classes", "a,b,c", "--window", "60s",
                 "--reference", str(ref)]) == 0
    snaps = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all({"accuracy", "macro_f1"} <= set(s["changes"]) for s in snaps)
    first, later = sorted(snaps, key=lambda s: s["window"]["start"])
    assert first["changes"]["accuracy"]["significant"] is False
    assert later["changes"]["accuracy"]["significant"] is True and later["changes"]["accuracy"]["difference"] < -0.3


def test_a_weighted_reference_gives_baselines_by_its_effective_size() -> None:
    """Every reference event of weight 2: the same baselines and intervals as unit weights (they
    were missing for the confusion metrics of a weighted reference)."""
    import numpy as np

    from streammetrics.monitors.reference import Reference
    from streammetrics.stream.changes import reference_baseline

    rng = np.random.default_rng(8)
    s = rng.random(2000)
    y = rng.random(2000) < s
    unit = reference_baseline(Reference.from_arrays(y, s), 0.95)
    doubled = reference_baseline(Reference.from_arrays(y, s, np.full(2000, 2.0)), 0.95)
    assert set(doubled) == set(unit) and "accuracy" in doubled and "recall" in doubled
    for name, (value, pair) in unit.items():
        assert doubled[name][0] == pytest.approx(value)
        assert doubled[name][1] == pytest.approx(pair, abs=1e-12), name


def test_benjamini_hochberg_per_window_span_within_a_poll() -> None:
    """One poll holding two window spans tests each span's (key, metric) tests as its own family
    (the windows one pane boundary closes, as the merge stage publishes them), not all together:
    window 2 has one mildly changed key among healthy ones, window 3 every key broken; pooled, the
    many discoveries of window 3 would lift window 2's mild tests over the threshold."""
    signals2 = {"m0": 0.24, **{f"m{k}": 0.3 for k in range(1, 8)}}
    events = []
    for k in range(8):
        events += _events(400, k, 0.0, f"m{k}") + _events(400, 100 + k, 60.0, f"m{k}", signals2[f"m{k}"])
        events += _events(400, 200 + k, 120.0, f"m{k}", 0.0)
    events.append({"ts": 500.0, "model": "late", "y_true": 1, "score": 0.9})  # closes windows 2 and 3 at once
    p = Pipeline(PipelineConfig(window=60.0, max_future=None, compare="previous"))
    for e in sorted(events, key=lambda e: e["ts"]):
        p.process(json.dumps(e))
    snaps = p.poll()  # (one poll: both spans)
    assert {s["window"]["start"] for s in snaps} == {0, 60, 120}
    tests = {start: [(c["p_value"], c["significant"]) for s in snaps if s["window"]["start"] == start
                     for c in s["changes"].values()] for start in (60, 120)}
    for family in tests.values():
        assert [sig for _, sig in family] == benjamini_hochberg([p for p, _ in family], 0.05).tolist()
    pooled = benjamini_hochberg([p for p, _ in tests[60] + tests[120]], 0.05).tolist()
    assert pooled[: len(tests[60])] != [sig for _, sig in tests[60]]
