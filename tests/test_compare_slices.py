"""benchmarks/compare_slices.py: sliced replay output against a revision, byte for byte (issue 28
beside issue 24's compare_replay): on a small corpus against HEAD itself (identical unless the work
tree changed the output), every sliced stream family present and writing snapshots."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "compare_slices.py"


def _module():
    spec = importlib.util.spec_from_file_location("compare_slices", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sliced_replay_of_the_work_tree_is_identical_to_head(tmp_path, capsys):
    if shutil.which("git") is None or subprocess.run(
            ["git", "cat-file", "-e", "HEAD:streammetrics/cli.py"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("needs the git repository")
    module = _module()
    rc = module.main(["--base", "HEAD", "--events", "400", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    names = [s["name"] for s in module.build_corpus(tmp_path / "again", 400, 28)]
    for wanted in ("sliced-rollups", "sliced-budget", "sliced-hopping", "sliced-max-keys"):
        assert wanted in names and f"{wanted} " in out
    assert rc == 0, out
    assert (tmp_path / "out-new" / "sliced-rollups.out").stat().st_size > 1000
