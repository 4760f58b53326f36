"""`streammetrics demo` end to end: produce, consume, print the windows, write the report."""
from __future__ import annotations

import io
import re

from consumers.demo import HEADER, run_demo
from streammetrics.cli import build_parser


def test_demo_prints_every_window_and_writes_a_report(bootstrap_servers, unique_name, tmp_path):
    report = tmp_path / "demo.html"
    args = build_parser().parse_args([
        "demo", "--bootstrap-servers", bootstrap_servers, "--events", "6000", "--duration", "300",
        "--rate", "0", "--topic", unique_name("in"), "--output-topic", unique_name("out"),
        "--report", str(report),
    ])
    out = io.StringIO()
    assert run_demo(args, out=out) == 0
    text = out.getvalue()
    assert HEADER in text
    rows = [line for line in text.splitlines() if re.match(r"\d\d:\d\d-\d\d:\d\d ", line)]
    assert len(rows) == 15  # 5 one-minute windows x 3 (model, segment) keys
    assert "6,000 events produced; 6,000 applied, 3 dead letters" in text
    assert "15 window snapshots" in text
    html = report.read_text()
    assert html.count("<svg") >= 10 and "fraud-v2" in html


def test_demo_produce_only(bootstrap_servers, unique_name):
    args = build_parser().parse_args([
        "demo", "--bootstrap-servers", bootstrap_servers, "--events", "500", "--rate", "0",
        "--topic", unique_name("in"), "--produce-only",
    ])
    out = io.StringIO()
    assert run_demo(args, out=out) == 0
    assert "produced 500 events" in out.getvalue()


def test_demo_without_matplotlib_runs_without_the_report(bootstrap_servers, unique_name, tmp_path):
    # the Dockerfile installs only the kafka extra: the demo used to end in a traceback there
    import os
    import subprocess
    import sys

    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "streammetrics.cli", "demo", "--bootstrap-servers", bootstrap_servers,
                          "--events", "600", "--duration", "120", "--rate", "0", "--topic", unique_name("in"),
                          "--output-topic", unique_name("out"), "--report", str(tmp_path / "r.html")],
                         capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr + out.stdout
    assert "(no report:" in out.stdout and "matplotlib" in out.stdout
    assert not (tmp_path / "r.html").exists()
