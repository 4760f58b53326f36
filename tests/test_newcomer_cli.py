"""Command-line and packaging defects a new user meets (issue 29, point 4)."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from streammetrics.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def help_text(command: str) -> str:
    sub = build_parser()._subparsers._group_actions[0].choices[command]  # noqa: SLF001 - argparse's own tree
    return sub.format_help()


def test_consume_help_lists_no_replay_only_flag():
    assert "--labels FILE" in help_text("replay")
    consume = help_text("consume")
    assert "--labels FILE" not in consume and "label events {id, y_true, ts} (delayed" not in consume
    assert "--labels-topic" in consume


def test_consume_labels_file_still_explained(capsys):
    with pytest.raises(SystemExit):
        main(["consume", "--bootstrap-servers", "x:1", "--topic", "t", "--output-topic", "o", "--labels", "f.jsonl"])
    assert "the service reads --labels-topic" in capsys.readouterr().err


def test_demo_report_goes_to_the_temporary_directory_not_the_checkout():
    from consumers.demo import report_path

    args = build_parser().parse_args(["demo"])
    path = report_path(args.report)
    assert os.path.dirname(path) == tempfile.gettempdir() and path.endswith(".html")
    assert report_path("") == "" and report_path("r.html") == "r.html"


def test_docker_image_installs_the_report_and_parquet_extras():
    text = (ROOT / "Dockerfile").read_text()
    extras = re.search(r'pip install "\.\[([a-z,]+)\]"', text)
    assert extras is not None and {"kafka", "report", "parquet"} <= set(extras.group(1).split(","))
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^parquet = \["pyarrow>=11"\]', pyproject, re.M)
