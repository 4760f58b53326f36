"""``--reference``: snapshots of keys with a reference carry the label-free metrics (equal to
``Reference.metrics`` of the window's monitor), keys without one get nulls; the number of
references is bounded."""
from __future__ import annotations

import json

import numpy as np
import pytest

from streammetrics.cli import main
from streammetrics.core.accumulator import from_dict
from streammetrics.monitors.reference import METRICS, Reference
from streammetrics.monitors.reference_multiclass import MULTICLASS_METRICS, MulticlassReference
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.references import load_references
from streammetrics.stream.replay import sample_path

T0 = 1767225600


def _sample_lines() -> list[bytes]:
    with open(sample_path(), "rb") as f:
        return f.readlines()


def test_pipeline_snapshots_equal_reference_metrics_of_each_window():
    lines = _sample_lines()
    refs = load_references(sample_path())
    known = sorted(refs)[0]
    refs = {known: refs[known]}  # the other keys have no reference
    pipe = Pipeline(PipelineConfig(window=120.0, references=refs))
    for line in lines:
        pipe.process(line)
    snaps = pipe.flush()
    assert {(s["key"]["model"], s["key"]["segment"]) for s in snaps} > {known}
    for snap in snaps:
        key = (snap["key"]["model"], snap["key"]["segment"])
        metrics = snap["metrics"]
        if key == known:
            expected = refs[key].metrics(from_dict(snap["state"]))
            assert {k: metrics[k] for k in METRICS} == expected
            assert metrics["drift_ks"] is not None and metrics["estimated_accuracy"] is not None
        else:
            assert all(metrics[k] is None for k in METRICS)
        assert metrics["accuracy"] is not None  # the monitor's own metrics are kept


def test_pipeline_without_references_is_unchanged():
    lines = _sample_lines()[:500]
    a, b = Pipeline(PipelineConfig()), Pipeline(PipelineConfig(references=None))
    for line in lines:
        a.process(line)
        b.process(line)
    sa = a.flush()
    assert sa == b.flush()
    assert "drift_ks" not in sa[0]["metrics"]


def test_reference_limit_names_the_limit():
    refs = load_references(sample_path())
    assert len(refs) > 1
    Pipeline(PipelineConfig(references=refs, max_references=len(refs)))  # at the limit: fine
    with pytest.raises(ValueError, match=f"more than {len(refs) - 1} .*--max-references {len(refs) - 1}"):
        Pipeline(PipelineConfig(references=refs, max_references=len(refs) - 1))
    assert len(load_references(sample_path(), max_references=len(refs))) == len(refs)
    with pytest.raises(ValueError, match=f"--max-references {len(refs) - 1}"):
        load_references(sample_path(), max_references=len(refs) - 1)
    with pytest.raises(TypeError, match="not a Reference"):
        Pipeline(PipelineConfig(references={("m", ""): object()}))


def test_replay_cli_reference(tmp_path, capsys):
    ref_file = tmp_path / "ref.jsonl"
    ref_file.write_bytes(b"".join(_sample_lines()[:1000]))
    out = tmp_path / "snaps.jsonl"
    assert main(["replay", "--sample", "--reference", str(ref_file), "--no-state", "-q", "-o", str(out)]) == 0
    snaps = [json.loads(line) for line in out.read_text().splitlines()]
    assert snaps and all(set(METRICS) <= set(s["metrics"]) for s in snaps)
    assert any(s["metrics"]["drift_psi"] is not None for s in snaps)
    assert main(["replay", "--sample", "--reference", str(ref_file), "--max-references", "1", "-q",
                 "-o", str(tmp_path / "x.jsonl")]) == 2
    assert "--max-references 1" in capsys.readouterr().err
    assert main(["replay", "--sample", "--reference", str(tmp_path / "missing.jsonl"), "-q",
                 "-o", str(tmp_path / "y.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_multiclass_pipeline_reference():
    classes = ["a", "b", "c"]
    rng = np.random.default_rng(0)
    s_ref = rng.dirichlet([1, 1, 1], 300)
    y_ref = np.array(classes)[[rng.choice(3, p=r) for r in s_ref]]
    ref = MulticlassReference.from_arrays(y_ref, s_ref, classes=classes)
    pipe = Pipeline(PipelineConfig(task="multiclass", classes=classes, window=60.0,
                                   references={("m", ""): ref}))
    s = rng.dirichlet([3, 1, 1], 200)
    for i, row in enumerate(s):
        for model in ("m", "other"):
            pipe.process(json.dumps({"ts": T0 + i, "model": model, "y_true": classes[i % 3],
                                     "scores": row.tolist()}))
    snaps = pipe.flush()
    for snap in snaps:
        metrics = snap["metrics"]
        if snap["key"]["model"] == "m":
            expected = ref.metrics(from_dict(snap["state"]))
            assert {k: metrics[k] for k in MULTICLASS_METRICS} == {k: expected[k] for k in MULTICLASS_METRICS}
            for c in classes:
                assert metrics["per_class"][c]["drift_ks"] == expected["per_class"][c]["drift_ks"]
                assert "precision" in metrics["per_class"][c]  # the monitor's per-class rows are kept
        else:
            assert all(metrics[k] is None for k in MULTICLASS_METRICS)


def test_reference_from_arrays_in_config_equals_file(tmp_path):
    lines = _sample_lines()[:800]
    events = [json.loads(line) for line in lines]
    key = (events[0]["model"], events[0].get("segment", ""))
    mine = [e for e in events if (e["model"], e.get("segment", "")) == key]
    ref = Reference.from_arrays([e["y_true"] for e in mine], [e["score"] for e in mine])
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(lines))
    loaded = load_references(str(path))[key]
    window = from_dict(Pipeline(PipelineConfig()).windows._factory().to_dict())  # an empty monitor
    window.update_many(mine[:50])
    assert loaded.metrics(window) == ref.metrics(window)


def test_delayed_labels_estimates_first_then_beside_the_realised_metrics():
    """Revision 0 of a window whose labels are still pending carries the estimates (and
    drift) with null realised metrics and ece; a later revision has both."""
    rng = np.random.default_rng(1)
    s_ref = rng.random(2000)
    ref = Reference.from_arrays(rng.random(2000) < s_ref, s_ref)
    pipe = Pipeline(PipelineConfig(window=60.0, references={("m", ""): ref}))
    scores = rng.random(200)
    for i, s in enumerate(scores):
        pipe.process(json.dumps({"ts": T0 + i * 0.25, "model": "m", "score": float(s), "id": f"p{i}"}))
    pipe.process(json.dumps({"ts": T0 + 130, "model": "m", "score": 0.5, "id": "closer"}))  # closes the window
    first = [s for s in pipe.poll() if s["window"]["start"] == T0]
    assert first and first[0]["revision"] == 0 and first[0]["pending"] == 200
    m0 = first[0]["metrics"]
    assert m0["estimated_accuracy"] is not None and m0["drift_ks"] is not None
    assert m0["accuracy"] is None and m0["ece"] is None
    for i, s in enumerate(scores):
        pipe.process(json.dumps({"id": f"p{i}", "y_true": int(rng.random() < s), "ts": T0 + 131}))
    later = [s for s in pipe.flush() if s["window"]["start"] == T0]
    m1 = later[-1]["metrics"]
    assert later[-1]["revision"] >= 1 and m1["accuracy"] is not None and m1["ece"] is not None
    assert m1["estimated_accuracy"] == m0["estimated_accuracy"]  # labels do not change the estimate
