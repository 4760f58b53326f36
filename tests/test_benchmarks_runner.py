"""``python -m benchmarks``: the targets table and its gross-regression check (issue 24, point 5)."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _targets import Target  # noqa: E402


def _runner() -> dict:
    path = ROOT / "benchmarks" / "__main__.py"
    namespace: dict = {"__name__": "benchmarks_runner", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def test_met_and_gross_for_speeds_and_costs():
    assert Target("b", "speed", 15.0, 15.0).met
    assert not Target("b", "speed", 15.0, 14.9).met
    assert not Target("b", "speed", 15.0, 5.1).gross  # missed, but within a third
    assert Target("b", "speed", 15.0, 4.9).gross
    assert Target("b", "cost", 1.3, 1.3, at_most=True).met
    assert not Target("b", "cost", 1.3, 1.31, at_most=True).met
    assert not Target("b", "cost", 1.3, 3.8, at_most=True).gross
    assert Target("b", "cost", 1.3, 4.0, at_most=True).gross
    assert Target("b", "speed", 1.0, math.nan).gross


def test_an_open_target_is_checked_against_its_recorded_level():
    open_cost = Target("b", "multiclass", 3.0, 18.0, at_most=True, known=10.7)
    assert not open_cost.met and not open_cost.gross  # 18 < 3 * 10.7
    assert Target("b", "multiclass", 3.0, 33.0, at_most=True, known=10.7).gross
    assert Target("b", "decode", 0.2, 0.019, known=0.06).gross
    rate = Target("b", "M events/s", 50.0, 16.5, absolute=True)  # an absolute rate under load: reported only
    assert not rate.met and not rate.gross and rate.status == "MISSED"
    assert not Target("b", "decode", 0.2, 0.05, known=0.06).gross
    # a met target is checked against the target itself
    assert Target("b", "x", 3.0, 2.0, at_most=True, known=10.7).checked == 3.0


def test_table_and_markdown():
    table = _runner()["table"]
    rows = [Target("bench_x", "rate", 50.0, 61.2), Target("bench_x", "cost", 1.3, 2.41, at_most=True)]
    text = table(rows)
    assert "met" in text and "MISSED" in text and ">= 50" in text and "<= 1.3" in text
    md = table(rows, markdown=True)
    assert md.splitlines()[0] == "| benchmark | target | target ratio | measured ratio | met/MISSED |"
    assert len(md.splitlines()) == 4


def test_every_benchmark_script_is_run_or_says_why_not():
    runner = _runner()
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    # (the statistical simulations, sim_*.py, may give targets too: those registered count)
    scripts |= {p.stem for p in (ROOT / "benchmarks").glob("sim_*.py")} & set(runner["BENCHMARKS"])
    assert scripts == set(runner["BENCHMARKS"]) | set(runner["NOT_RUN"])
    for name in runner["BENCHMARKS"]:
        assert "def targets(" in (ROOT / "benchmarks" / f"{name}.py").read_text()


@pytest.mark.slow
def test_quick_check_runs_every_benchmark(tmp_path):
    """Every registered benchmark's smoke size in one process; exits 0 unless a ratio is grossly off."""
    out = tmp_path / "perf.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--check", "--markdown", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "met/MISSED" in done.stdout and "FAILED" not in done.stdout
    for name in _runner()["BENCHMARKS"]:
        assert name in done.stdout
    assert out.read_text().count("| bench_") >= 10
