"""Multiclass ``--reference`` in pipelines: per-event CBPE estimates (before any label, beside
the realised values once labels come), per-class score drift over every prediction, hopping
windows, checkpoints and the replay CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import ks_2samp, wasserstein_distance

from streammetrics.cli import main
from streammetrics.core.accumulator import from_dict
from streammetrics.monitors.reference_multiclass import MULTICLASS_METRICS, MulticlassReference
from streammetrics.stream.pipeline import Pipeline, PipelineConfig

T0 = 1767225600
CLASSES = ["a", "b", "c"]


def _reference(seed: int = 0, n: int = 600, exact: bool = True) -> MulticlassReference:
    rng = np.random.default_rng(seed)
    s = np.round(rng.dirichlet([1, 1, 1], n), 3)
    y = np.array(CLASSES)[[rng.choice(3, p=r / r.sum()) for r in s]]
    return MulticlassReference.from_arrays(y, s, classes=CLASSES, exact=exact)


def _window_rows(seed: int = 1, n: int = 240) -> np.ndarray:
    return np.round(np.random.default_rng(seed).dirichlet([3, 1, 1], n), 3)


def _config(ref: MulticlassReference, **kw) -> PipelineConfig:
    return PipelineConfig(task="multiclass", classes=CLASSES, references={("m", ""): ref}, **kw)


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("slide", [None, 20.0])
def test_labelled_windows_carry_the_estimate_of_their_rows(batch, slide):
    """Every window (tumbling or hopping: panes merged) has estimated_accuracy/_macro_f1 equal
    to the reference's estimate of the window's own rows, beside the realised metrics."""
    ref = _reference()
    s = _window_rows()
    pipe = Pipeline(_config(ref, window=60.0, slide=slide, batch=batch))
    for i, row in enumerate(s):
        pipe.process(json.dumps({"ts": T0 + i * 0.5, "model": "m", "y_true": CLASSES[i % 3],
                                 "scores": row.tolist()}))
    snaps = [x for x in pipe.flush() if not x.get("cumulative")]
    assert len(snaps) >= 2
    ts = T0 + np.arange(len(s)) * 0.5
    for snap in snaps:
        inside = (ts >= snap["window"]["start"]) & (ts < snap["window"]["end"])
        want = ref.estimate(s[inside])
        m = snap["metrics"]
        assert m["estimated_accuracy"] == pytest.approx(want["estimated_accuracy"], abs=1e-12)
        assert m["estimated_macro_f1"] == pytest.approx(want["estimated_macro_f1"], abs=1e-12)
        assert m["accuracy"] is not None and m["macro_f1"] is not None
        s_ref = _ref_rows()[1]
        for c, name in enumerate(CLASSES):
            assert m["per_class"][name]["drift_ks"] == pytest.approx(
                ks_2samp(s[inside, c], s_ref[:, c]).statistic, abs=1e-12)


def _ref_rows(seed: int = 0, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = np.round(rng.dirichlet([1, 1, 1], n), 3)
    y = np.array([rng.choice(3, p=r / r.sum()) for r in s])
    return y, s


def test_delayed_labels_estimates_and_per_class_drift_before_any_label():
    """Revision 0 (no label yet): estimates and per-class drift from every prediction (scipy
    on the window's rows), realised metrics null; the labelled revision keeps the estimates
    and adds the realised accuracy / macro F1."""
    ref = _reference()
    _, s_ref = _ref_rows()
    s = _window_rows(2, 200)
    pipe = Pipeline(_config(ref, window=60.0))
    for i, row in enumerate(s):
        pipe.process(json.dumps({"ts": T0 + i * 0.25, "model": "m", "scores": row.tolist(), "id": f"p{i}"}))
    pipe.process(json.dumps({"ts": T0 + 130, "model": "m", "scores": [0.2, 0.3, 0.5], "id": "closer"}))
    first = [x for x in pipe.poll() if x["window"]["start"] == T0]
    assert first and first[0]["revision"] == 0 and first[0]["pending"] == 200
    m0 = first[0]["metrics"]
    want = ref.estimate(s)
    assert m0["estimated_accuracy"] == pytest.approx(want["estimated_accuracy"], abs=1e-12)
    assert m0["estimated_macro_f1"] == pytest.approx(want["estimated_macro_f1"], abs=1e-12)
    assert m0["accuracy"] is None and m0["macro_f1"] is None
    for c, name in enumerate(CLASSES):
        row = m0["per_class"][name]
        assert row["drift_ks"] == pytest.approx(ks_2samp(s[:, c], s_ref[:, c]).statistic, abs=1e-12)
        assert row["drift_wasserstein"] == pytest.approx(wasserstein_distance(s[:, c], s_ref[:, c]), abs=1e-12)
    assert m0["drift_ks"] == max(m0["per_class"][c]["drift_ks"] for c in CLASSES)
    rng = np.random.default_rng(3)
    truth = [CLASSES[rng.choice(3, p=r / r.sum())] for r in s]
    for i, t in enumerate(truth):
        pipe.process(json.dumps({"id": f"p{i}", "y_true": t, "ts": T0 + 131}))
    later = [x for x in pipe.flush() if x["window"]["start"] == T0]
    m1 = later[-1]["metrics"]
    assert later[-1]["revision"] >= 1 and m1["accuracy"] is not None and m1["macro_f1"] is not None
    assert m1["estimated_accuracy"] == m0["estimated_accuracy"]  # labels do not change the estimate
    assert m1["per_class"]["a"]["drift_ks"] == m0["per_class"]["a"]["drift_ks"]
    realised = np.mean(np.array(CLASSES)[s.argmax(axis=1)] == np.array(truth))
    assert m1["accuracy"] == pytest.approx(realised)


def test_checkpoint_restore_reproduces_the_uninterrupted_snapshots():
    ref = _reference()
    s = _window_rows(4, 300)
    lines = [json.dumps({"ts": T0 + i * 0.5, "model": "m", "y_true": CLASSES[i % 3], "scores": r.tolist()})
             for i, r in enumerate(s)]
    whole = Pipeline(_config(ref, window=60.0, slide=30.0))
    for line in lines:
        whole.process(line)
    expected = whole.flush()
    first = Pipeline(_config(ref, window=60.0, slide=30.0))
    head = []
    for line in lines[:137]:
        first.process(line)
        head += first.poll()
    state = json.loads(json.dumps(first.to_dict()))
    second = Pipeline(_config(ref, window=60.0, slide=30.0)).load_dict(state)
    for line in lines[137:]:
        second.process(line)
    got = head + second.flush()
    assert [x["metrics"] for x in got] == [x["metrics"] for x in expected]
    assert all(x["metrics"]["estimated_accuracy"] is not None for x in got)


def test_snapshot_state_round_trip_and_other_reference_reads_null():
    """The snapshot's state (an unbound monitor) gives the same estimates; a reference with
    another fingerprint does not read the sums (null)."""
    ref, other = _reference(0), _reference(5)
    s = _window_rows(6, 100)
    pipe = Pipeline(_config(ref, window=600.0))
    for i, r in enumerate(s):
        pipe.process(json.dumps({"ts": T0 + i, "model": "m", "y_true": "a", "scores": r.tolist()}))
    (snap,) = pipe.flush()
    state = from_dict(snap["state"])
    assert ref.metrics(state)["estimated_accuracy"] == snap["metrics"]["estimated_accuracy"]
    assert other.fingerprint != ref.fingerprint
    assert other.metrics(state)["estimated_accuracy"] is None


def test_replay_cli_multiclass_reference(tmp_path):
    y_ref, s_ref = _ref_rows()
    ref_file = tmp_path / "ref.jsonl"
    ref_file.write_text("".join(json.dumps({"ts": T0 + i, "model": "m", "y_true": CLASSES[t], "scores": r.tolist()})
                                + "\n" for i, (t, r) in enumerate(zip(y_ref, s_ref))))
    s = _window_rows(7, 200)
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps({"ts": T0 + 10_000 + i, "model": "m", "scores": r.tolist(), "id": str(i)})
                              + "\n" for i, r in enumerate(s)))
    out = tmp_path / "snaps.jsonl"
    assert main(["replay", str(events), "--task", "multiclass", "--classes", "a,b,c", "--window", "1h",
                 "--reference", str(ref_file), "--no-state", "-q", "-o", str(out)]) == 0
    snaps = [json.loads(line) for line in out.read_text().splitlines()]
    assert snaps and all(set(MULTICLASS_METRICS) <= set(x["metrics"]) for x in snaps)
    m = snaps[0]["metrics"]
    assert m["estimated_accuracy"] is not None and m["estimated_macro_f1"] is not None
    assert m["per_class"]["a"]["drift_ks"] is not None
