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
