"""Slices, roll-ups, worst slices and fairness in replay (contract section 11; issue 28
points 1-4): roll-ups equal runs keyed by their dimensions alone and scikit-learn on the merged
events, fairness equal to fairlearn's."""
from __future__ import annotations

import json
import warnings
from collections import defaultdict

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from streammetrics.cli import main
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.replay import replay_lines
from streammetrics.stream.slicing import OTHER, SliceSpec

COUNTRIES = ["us", "fr", "de", "jp", "br"]
DEVICES = ["ios", "android", "web"]


def _events(n: int = 4000, seed: int = 0, models: int = 2) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        d = DEVICES[int(rng.integers(len(DEVICES)))]
        s = min(max(float(np.round(rng.random(), 3)), 0.001), 0.999)
        out.append({"ts": i * 300.0 / n, "model": f"m{int(rng.integers(models))}",
                    "country": COUNTRIES[int(rng.integers(len(COUNTRIES)))], "device": d,
                    "tier": int(rng.integers(3)), "y_true": int(rng.random() < s * (0.7 if d == "web" else 1.0)),
                    "score": s})
    return out


def _run(events: list[dict], **config) -> list[dict]:
    pipe = Pipeline(PipelineConfig(window=60.0, **config))
    out: list[str] = []
    replay_lines([json.dumps(e).encode() for e in events], pipe, out.append)
    return [json.loads(line) for line in out]


def _body(snap: dict) -> tuple:
    return snap["window"], snap["count"], snap["metrics"], snap.get("state")


def test_rollups_equal_runs_keyed_by_their_dimensions() -> None:
    events = _events()
    spec = SliceSpec(fields=("country", "device", "tier"), rollups=(("country",), ()))
    sliced = _run(events, slicing=spec)
    by_country = _run(events, slicing=SliceSpec(fields=("country",)))
    plain = _run(events)
    leaves = [s for s in sliced if "rollup" not in s]
    assert leaves and all(set(s["key"]) == {"model", "segment", "country", "device", "tier"} for s in leaves)
    country_rollups = {(s["key"]["model"], s["key"]["country"], s["window"]["start"]): s
                       for s in sliced if s.get("rollup") == ["country"]}
    model_rollups = {(s["key"]["model"], s["window"]["start"]): s for s in sliced if s.get("rollup") == ["model"]}
    assert {tuple(s["key"]) for s in country_rollups.values()} == {("model", "country")}
    assert len(country_rollups) == len(by_country)
    for s in by_country:
        assert _body(country_rollups[(s["key"]["model"], s["key"]["country"], s["window"]["start"])]) == _body(s)
    assert len(model_rollups) == len(plain)
    for s in plain:
        assert _body(model_rollups[(s["key"]["model"], s["window"]["start"])]) == _body(s)
    # and scikit-learn on the merged events of each model window
    windows = defaultdict(list)
    for e in events:
        windows[(e["model"], int(e["ts"] // 60) * 60)].append(e)
    for (model, start), snap in model_rollups.items():
        evs = windows[(model, start)]
        want = roc_auc_score([e["y_true"] for e in evs], [e["score"] for e in evs])
        assert snap["metrics"]["roc_auc"] == pytest.approx(want, abs=1e-12)
        assert snap["count"] == len(evs)


def test_every_rollup_follows_its_slices_and_ranks_them_worst_first() -> None:
    events = _events(2000, seed=1, models=1)
    sliced = _run(events, slicing=SliceSpec(fields=("country", "device"), rollups=((),), worst_slices=4),
                  include_state=False)
    seen = set()
    for snap in sliced:
        if "rollup" not in snap:
            seen.add((snap["window"]["start"], json.dumps(snap["key"])))
            continue
        rows = snap["slices"]
        assert 0 < len(rows) <= 4
        for row in rows:
            assert (snap["window"]["start"], json.dumps(row["key"])) in seen  # its slices came first
        gaps = [r["gap"] for r in rows if r["gap"] is not None]
        assert gaps == sorted(gaps)
        assert all(r["gap"] == pytest.approx(r["roc_auc"] - snap["metrics"]["roc_auc"]) for r in rows if r["gap"])
    lower = _run(events, slicing=SliceSpec(fields=("device",), rollups=((),), worst_metric="log_loss"),
                 include_state=False)
    for snap in lower:
        if "rollup" in snap:
            gaps = [r["gap"] for r in snap["slices"]]
            assert gaps == sorted(gaps, reverse=True)


def test_fairness_equals_fairlearn() -> None:
    fm = pytest.importorskip("fairlearn.metrics")
    events = _events(3000, seed=2)
    sliced = _run(events, slicing=SliceSpec(fields=("country", "device"), rollups=((), ("country",)),
                                            fairness_by="device"), include_state=False)
    windows = defaultdict(list)
    for e in events:
        windows[(e["model"], int(e["ts"] // 60) * 60)].append(e)
    checked = 0
    for snap in sliced:
        if "rollup" not in snap:
            assert "fairness" not in snap
            continue
        evs = [e for e in windows[(snap["key"]["model"], snap["window"]["start"])]
               if snap["rollup"] == ["model"] or e["country"] == snap["key"]["country"]]
        y = np.array([e["y_true"] for e in evs])
        pred = np.array([e["score"] >= 0.5 for e in evs]).astype(int)
        groups = np.array([e["device"] for e in evs])
        f = snap["fairness"]
        assert f["dimension"] == "device"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert f["demographic_parity_difference"] == pytest.approx(
                fm.demographic_parity_difference(y, pred, sensitive_features=groups), abs=1e-12)
            assert f["demographic_parity_ratio"] == pytest.approx(
                fm.demographic_parity_ratio(y, pred, sensitive_features=groups), abs=1e-12)
            assert f["equalized_odds_difference"] == pytest.approx(
                fm.equalized_odds_difference(y, pred, sensitive_features=groups), abs=1e-12)
        for value, row in f["groups"].items():
            sel = groups == value
            assert row["count"] == int(sel.sum())
            assert row["selection_rate"] == pytest.approx(pred[sel].mean())
            if (y[sel] == 1).any():
                assert row["tpr"] == pytest.approx(pred[sel & (y == 1)].mean())
        checked += 1
    assert checked > 10


def test_fairness_with_a_group_without_positives_matches_fairlearn() -> None:
    fm = pytest.importorskip("fairlearn.metrics")
    from streammetrics.kernels.fairness import fairness

    y = np.array([0, 0, 1, 1, 0, 1, 0])
    pred = np.array([1, 0, 1, 0, 0, 1, 1])
    g = np.array(["a", "a", "b", "b", "b", "b", "c"])  # a and c: no positives
    cells = {}
    for v in "abc":
        s = g == v
        cells[v] = tuple(float(np.sum(s & (y == t) & (pred == p))) for t, p in ((0, 0), (0, 1), (1, 0), (1, 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fm.equalized_odds_difference(y, pred, sensitive_features=g)
    got = fairness(cells)
    assert got["equalized_odds_difference"] == pytest.approx(want)
    assert got["groups"]["a"]["tpr"] is None


def test_budget_keeps_each_windows_most_frequent_values_and_merges_the_rest_into_other() -> None:
    """--max-slice-values N: per (model, window) the N values with the most events keep their
    slices (ties by value), the others' slices are merged into __other__: the same window as a
    run whose events carry __other__ for those values; the folded events are counted."""
    events = _events(3000, seed=3, models=1)
    windows: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        windows[int(e["ts"] // 60) * 60].append(e)
    kept = {}
    for start, evs in windows.items():
        counts: dict[str, int] = defaultdict(int)
        for e in evs:
            counts[e["country"]] += 1
        kept[start] = {v for _, v in sorted((-c, v) for v, c in counts.items())[:2]}
    assert len({frozenset(k) for k in kept.values()}) > 1  # the kept set moves with the window
    pipe = Pipeline(PipelineConfig(window=60.0, slicing=SliceSpec(fields=("country",), max_values=2,
                                                                  rollups=((),))))
    out: list[str] = []
    replay_lines([json.dumps(e).encode() for e in events], pipe, out.append)
    snaps = [json.loads(line) for line in out]
    leaves = [s for s in snaps if "rollup" not in s]
    for start in windows:
        got = {s["key"]["country"] for s in leaves if s["window"]["start"] == start}
        assert got == kept[start] | {OTHER}
    folded_events = [{**e, "country": OTHER} if e["country"] not in kept[int(e["ts"] // 60) * 60] else e
                     for e in events]
    want = {(s["window"]["start"], s["key"]["country"]): s for s in _run(folded_events, slicing=SliceSpec(
        fields=("country",), max_values=5))}
    assert len(want) == len(leaves)
    for s in leaves:
        assert _body(s) == _body(want[(s["window"]["start"], s["key"]["country"])])
    folded = sum(1 for e in events if e["country"] not in kept[int(e["ts"] // 60) * 60])
    assert pipe._slicer.folded == {"country": folded}
    assert sum(s["folded"]["country"] for s in snaps if "rollup" in s) == folded
    assert sum(s["count"] for s in snaps if "rollup" in s) == len(events)


def test_budget_at_its_edge_folds_nothing_and_one_value_less_folds_one() -> None:
    events = _events(600, seed=11, models=1)
    distinct = len({e["country"] for e in events})
    exact = _run(events, slicing=SliceSpec(fields=("country",), max_values=distinct), include_state=False)
    assert OTHER not in {s["key"]["country"] for s in exact}
    one_less = _run(events, slicing=SliceSpec(fields=("country",), max_values=distinct - 1,
                                              rollups=((),)), include_state=False)
    for start in {s["window"]["start"] for s in one_less}:
        values = [s["key"]["country"] for s in one_less if s["window"]["start"] == start and "rollup" not in s]
        assert len(values) == distinct and OTHER in values  # (every country is in every window here)


def test_bad_slice_values_are_refused_naming_the_field() -> None:
    pipe = Pipeline(PipelineConfig(window=60.0, slicing=SliceSpec(fields=("country",))))
    ok = pipe.process(json.dumps({"ts": 1, "model": "m", "country": 7, "y_true": 1, "score": 0.5}))
    assert ok.applied == 1
    for bad, code in (({"a": 1}, "bad_type"), ("x|y", "bad_value"), ("x" * 1001, "bad_value")):
        res = pipe.process(json.dumps({"ts": 2, "model": "m", "country": bad, "y_true": 1, "score": 0.5}))
        assert res.applied == 0 and res.problems[0].field == "country" and res.problems[0].code == code
    snap = json.loads(pipe.flush_lines()[0])
    assert snap["key"] == {"model": "m", "segment": "", "country": "7"} and snap["count"] == 1


def test_cli_flags(tmp_path, capsys) -> None:
    src = tmp_path / "ev.jsonl"
    src.write_text("\n".join(json.dumps(e) for e in _events(600, seed=4)) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(src), "-o", str(out), "-q", "--no-state", "--slice-by", "country",
                 "--rollup", "model", "--fairness-by", "device"]) == 0
    snaps = [json.loads(line) for line in out.read_text().splitlines()]
    assert {tuple(s["key"]) for s in snaps} == {("model", "segment", "country", "device"), ("model",)}
    assert all("fairness" in s for s in snaps if "rollup" in s)
    assert main(["replay", str(src), "-o", str(out), "--rollup", "region"]) == 2
    assert "region" in capsys.readouterr().err
    assert main(["replay", str(src), "-o", str(out), "--slice-by", "score"]) == 2


def test_worst_slices_carry_the_gap_interval_and_significance() -> None:
    from streammetrics.monitors import BinaryMonitor
    from streammetrics.stream.slicing import gap_row, slice_interval

    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 400)
    s = np.clip(0.25 * y + rng.random(400) * 0.75, 0.001, 0.999)
    m = BinaryMonitor().update_many([{"y_true": int(a), "score": float(b)} for a, b in zip(y, s)])
    low, high = m.interval("roc_auc")
    row = gap_row({"model": "m"}, "roc_auc", m.snapshot()["roc_auc"], 0.5, slice_interval(m, "roc_auc"), 400)
    assert row["gap_low"] == pytest.approx(low - 0.5) and row["gap_high"] == pytest.approx(high - 0.5)
    assert row["significant"] is True  # 0.5 lies below the slice's interval
    inside = gap_row({}, "roc_auc", m.snapshot()["roc_auc"], (low + high) / 2, (low, high), 400)
    assert inside["significant"] is False
    assert slice_interval(m, "not_a_metric") is None
    few = BinaryMonitor().update_many([{"y_true": 1, "score": 0.9}, {"y_true": 0, "score": 0.1}])
    assert gap_row({}, "roc_auc", 1.0, 0.8, slice_interval(few, "roc_auc"), 2)["significant"] is None
    events = _events(3000, seed=5, models=1)
    snaps = _run(events, slicing=SliceSpec(fields=("device",), rollups=((),)), include_state=False)
    rows = [r for s in snaps if "rollup" in s for r in s["slices"]]
    assert rows and any(r["significant"] is not None for r in rows)
    assert all(r["gap_low"] <= r["gap"] <= r["gap_high"] for r in rows if r["gap_low"] is not None)


def test_slices_without_rollups_equal_segment_keyed_runs() -> None:
    """Without roll-ups the slice windows keep the engine's vectorised pass: the same metrics and
    states as a run keyed by the same values given as the segment."""
    events = _events(3000, seed=8)
    sliced = _run(events, slicing=SliceSpec(fields=("country",)))
    as_segment = _run([{**e, "segment": e["country"]} for e in events])
    assert len(sliced) == len(as_segment)
    as_segment.sort(key=lambda s: (s["window"]["end"], s["window"]["start"], s["key"]["model"], s["key"]["segment"]))
    for a, b in zip(sliced, as_segment):
        assert a["key"] == {"model": b["key"]["model"], "segment": "", "country": b["key"]["segment"]}
        assert _body(a) == _body(b)


def test_csv_input_is_sliced_and_two_file_replay_refuses_slices(tmp_path, capsys) -> None:
    src = tmp_path / "ev.csv"
    rows = _events(300, seed=9, models=1)
    src.write_text("ts,model,country,y_true,score\n" + "".join(
        f"{e['ts']},{e['model']},{e['country']},{e['y_true']},{e['score']}\n" for e in rows))
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(src), "-o", str(out), "-q", "--no-state", "--slice-by", "country"]) == 0
    keys = {json.loads(line)["key"]["country"] for line in out.read_text().splitlines()}
    assert keys == {e["country"] for e in rows}
    labels = tmp_path / "labels.jsonl"
    labels.write_text("")
    assert main(["replay", str(src), "-o", str(out), "--labels", str(labels), "--slice-by", "country"]) == 2
    assert "--labels FILE" in capsys.readouterr().err


def test_a_sliced_pipeline_refuses_a_checkpoint_it_could_not_restore() -> None:
    pipe = Pipeline(PipelineConfig(slicing=SliceSpec(fields=("country",), rollups=((),))))
    pipe.process(json.dumps({"ts": 1, "model": "m", "country": "fr", "y_true": 1, "score": 0.5}))
    with pytest.raises(ValueError, match="checkpointed"):
        pipe.to_dict()
    assert Pipeline(PipelineConfig()).to_dict()["type"] == "Pipeline"


@pytest.mark.parametrize("fields", [(), ("country",), ("country", "device"), ("country", "device", "tier"),
                                    ("country", "device", "tier", "app")])
def test_any_number_of_dimensions_keys_every_event_by_its_values(fields) -> None:
    events = [{**e, "segment": e["device"][0], "app": e["country"][::-1]} for e in _events(400, seed=13, models=1)]
    snaps = _run(events, slicing=SliceSpec(fields=fields, rollups=(("segment",),)), include_state=False)
    leaves = [s for s in snaps if "rollup" not in s]
    want: dict[tuple, int] = defaultdict(int)
    for e in events:
        want[(int(e["ts"] // 60) * 60, e["segment"], *[str(e[f]) for f in fields])] += 1
    assert {(s["window"]["start"], *list(s["key"].values())[1:]): s["count"] for s in leaves} == dict(want)
    assert sum(s["count"] for s in snaps if "rollup" in s) == len(events)
