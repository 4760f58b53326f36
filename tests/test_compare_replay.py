"""benchmarks/compare_replay.py: replay's output against a revision, byte for byte (issue 24).

Runs the comparison machinery on a small corpus against HEAD itself (identical unless the work
tree changed replay's output), then checks that a difference in any part of a stream's outcome
is reported and turns the exit status to 1."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "compare_replay.py"


def _module():
    spec = importlib.util.spec_from_file_location("compare_replay", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _has_git_head() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "cat-file", "-e", "HEAD:streammetrics/cli.py"], cwd=ROOT, capture_output=True)
    return done.returncode == 0


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    if not _has_git_head():
        pytest.skip("needs the git repository")
    work = tmp_path_factory.mktemp("compare")
    module = _module()
    rc = module.main(["--base", "HEAD", "--events", "120", "--keep", str(work)])
    return module, work, rc


def test_replay_of_the_work_tree_is_identical_to_head(kept, capsys):
    module, work, rc = kept
    (work / "again").mkdir()
    streams = module.build_corpus(work / "again", 120, 24)
    names = [s["name"] for s in streams]
    # every task and option family of the issue is in the corpus
    for wanted in ("binary", "binary-hopping", "binary-weights", "binary-hostile", "binary-delayed-labels",
                   "binary-reference", "binary-no-state", "multiclass", "labels", "regression"):
        assert wanted in names
    # the corpus is deterministic: rebuilt, the same bytes
    for f in (work / "corpus").iterdir():
        assert (work / "again" / f.name).read_bytes() == f.read_bytes(), f.name
    results = module.compare(work / "base", work / "current", streams)
    assert results and all(status == "identical" for _, status in results), results
    assert rc == 0
    # snapshots were written (the comparison compares something)
    assert (work / "current" / "binary.out").stat().st_size > 1000
    assert (work / "current" / "multiclass.out").stat().st_size > 1000


@pytest.mark.parametrize("ext, part", [("out", "snapshots"), ("err", "stderr"), ("rc", "exit status")])
def test_an_altered_outcome_is_reported_different(kept, tmp_path, ext, part, capsys):
    module, work, _ = kept
    altered = tmp_path / "current"
    shutil.copytree(work / "current", altered)
    target = altered / f"binary-weights.{ext}"
    data = bytearray(target.read_bytes())
    if data:
        data[len(data) // 2] ^= 1
    else:
        data = bytearray(b"x")
    target.write_bytes(bytes(data))
    streams = [{"name": p.stem} for p in sorted((work / "current").glob("*.rc"))]
    results = dict(module.compare(work / "base", altered, streams))
    assert results["binary-weights"].startswith("DIFFERENT") and part in results["binary-weights"]
    assert all(status == "identical" for name, status in results.items() if name != "binary-weights")
    assert module.summarize(list(results.items())) == 1
    assert "binary-weights" in capsys.readouterr().out
