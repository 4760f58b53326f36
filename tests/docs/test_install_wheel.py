"""The wheel `python -m build` makes installs into a clean virtual environment and works there
(the README's third install route), without the checkout on the path."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_installs_into_a_clean_venv(tmp_path):
    pytest.importorskip("build")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir",
                            str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, env=env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("streammetrics-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                         env=env)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    out = subprocess.run([str(venv / "bin" / "streammetrics"), "replay", "--sample"], capture_output=True,
                         text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines and all(line.startswith('{"schema":"streammetrics.snapshot/1"') for line in lines)
    where = subprocess.run([str(python), "-c", "import streammetrics; print(streammetrics.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert str(venv) in where.stdout  # the installed copy, not the checkout
