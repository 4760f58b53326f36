"""Report views of ``--reference`` snapshots: a drift chart, estimated vs realised
performance and a reliability diagram per key; ``--alert`` rules on the label-free metrics."""
from __future__ import annotations

import json
import re

from streammetrics.cli import main
from streammetrics.stream.pipeline import Pipeline, PipelineConfig
from streammetrics.stream.references import load_references
from streammetrics.stream.replay import sample_path


def _snapshots(tmp_path, references):
    pipe = Pipeline(PipelineConfig(window=300.0, references=references))
    with open(sample_path(), "rb") as f:
        for line in f:
            pipe.process(line)
    path = tmp_path / "snaps.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in pipe.flush()))
    return path


def test_label_free_charts_and_alerts(tmp_path, capsys):
    refs = load_references(sample_path())
    src = _snapshots(tmp_path, refs)
    out = tmp_path / "r.html"
    assert main(["report", str(src), "-o", str(out), "--alert", "drift_ks>0.01", "--alert", "estimated_f1<0.99"]) == 0
    page = out.read_text()
    for kind in ("drift", "estimated", "reliability"):
        assert len(re.findall(rf'id="key-[^"]*-{kind}"', page)) == len(refs), kind
    assert "drift_ks&gt;0.01" in page or "drift_ks>0.01" in page
    assert "estimated_f1" in page


def test_no_label_free_charts_without_reference(tmp_path):
    src = _snapshots(tmp_path, None)
    out = tmp_path / "r.html"
    assert main(["report", str(src), "-o", str(out)]) == 0
    page = out.read_text()
    assert not re.search(r'id="key-[^"]*-(drift|estimated|reliability)"', page)
    assert main(["report", str(src), "-o", str(out), "--alert", "drift_ks>0.1"]) != 0  # unknown metric here


def test_multiclass_label_free_charts_and_alerts(tmp_path):
    """Multiclass --reference snapshots (labels delayed: revision 0 has estimates only): the
    drift, per-class drift and estimated-vs-realised charts, and --alert rules on the
    estimates and on one class's drift (METRIC[CLASS])."""
    import numpy as np

    from streammetrics.monitors.reference_multiclass import MulticlassReference

    classes = ["a", "b", "c"]
    rng = np.random.default_rng(0)
    s_ref = rng.dirichlet([1, 1, 1], 500)
    ref = MulticlassReference.from_arrays(np.array(classes)[s_ref.argmax(axis=1)], s_ref, classes=classes)
    pipe = Pipeline(PipelineConfig(task="multiclass", classes=classes, window=60.0, references={("m", ""): ref}))
    s = np.vstack([rng.dirichlet([1, 1, 1], 240), rng.dirichlet([6, 1, 1], 240)])  # drifts half way
    snaps = []
    for i, row in enumerate(s):
        pipe.process(json.dumps({"ts": 1767225600 + i, "model": "m", "scores": row.tolist(), "id": str(i)}))
        if i % 7 == 0:  # labels come later for some
            pipe.process(json.dumps({"id": str(i), "y_true": classes[int(row.argmax())], "ts": 1767225600 + i}))
        snaps += pipe.poll()
    snaps += pipe.flush()
    src = tmp_path / "snaps.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in snaps))
    out = tmp_path / "r.html"
    assert main(["report", str(src), "-o", str(out), "--alert", "estimated_accuracy<0.99",
                 "--alert", "estimated_macro_f1<0.99", "--alert", "drift_ks[a]>0.2"]) == 0
    page = out.read_text()
    for kind in ("drift", "class-drift", "estimated"):
        assert f'id="key-m-{kind}"' in page, kind
    for rule in ("estimated_accuracy&lt;0.99", "estimated_macro_f1&lt;0.99", "drift_ks[a]&gt;0.2"):
        assert re.search(rf'class="alert-tag">{re.escape(rule)}</span></td><td>[1-9]', page), rule
    assert main(["report", str(src), "-o", str(out), "--alert", "drift_ks[zzz]>0.2"]) != 0  # no such class
