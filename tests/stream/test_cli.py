"""`streammetrics replay` on the command line: refusing to overwrite its input, a closed output
pipe, one-line errors, a wrong --task, exit codes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streammetrics.cli import main
from streammetrics.stream.replay import ABORT_AFTER, REPORT_LIMIT
from streammetrics.stream.synthetic import generate_events

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def events_file(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in generate_events(3000, duration=1800.0, seed=7)))
    return path


@pytest.mark.parametrize("how", ["same", "relative", "symlink", "hardlink"])
def test_output_onto_an_input_is_refused_and_the_input_kept(events_file, tmp_path, capsys, monkeypatch, how):
    before = events_file.read_bytes()
    target = str(events_file)
    if how == "relative":
        monkeypatch.chdir(tmp_path)
        target = "./events.jsonl"
    elif how == "symlink":
        target = str(tmp_path / "link.jsonl")
        os.symlink(events_file, target)
    elif how == "hardlink":
        target = str(tmp_path / "hard.jsonl")
        os.link(events_file, target)
    code = main(["replay", str(events_file), "-o", target])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "refusing to overwrite" in err and "usage" not in err
    assert events_file.read_bytes() == before


def test_a_closed_output_pipe_ends_quietly(events_file):
    script = (f"cd {ROOT} && {sys.executable} -c 'import sys; from streammetrics.cli import main; "
              f"sys.exit(main())' replay {events_file} --window 10s | head -1 > /dev/null; "
              "echo \"status=${PIPESTATUS[0]}\"")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": ROOT}, check=False)
    assert "status=0" in out.stdout, out
    assert "Traceback" not in out.stderr and "error reading" not in out.stderr, out.stderr


@pytest.mark.parametrize("args,needle", [
    (["--task", "multiclass"], "--task multiclass needs --classes"),
    (["--task", "multiclass", "--classes", "a"], "--classes needs at least two"),
    (["--field", "bogus=x"], "unknown field 'bogus'"),
    (["--task", "binary", "--classes", "a,b"], "--classes only applies to --task multiclass"),
])
def test_errors_after_parsing_are_one_line_without_usage(events_file, capsys, args, needle):
    code = main(["replay", str(events_file), *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("streammetrics replay: ") and err.count("\n") == 1, err
    assert needle in err and "usage:" not in err


def test_a_wrong_task_stops_after_a_bounded_number_of_identical_reasons(events_file, capsys):
    code = main(["replay", str(events_file), "--task", "regression"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert sum(line.startswith("line ") for line in err.splitlines()) == REPORT_LIMIT
    assert f"stopped after {ABORT_AFTER} events rejected" in err and "--task (regression)" in err
    assert f"0 events applied, {ABORT_AFTER} rejected" in err
    assert f"not listed: {ABORT_AFTER - REPORT_LIMIT} missing_field (y_pred)" in err


def test_nothing_applied_exits_non_zero_and_repeated_reasons_are_listed_a_bounded_number_of_times(tmp_path,
                                                                                                  capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"ts": 1767225600, "model": "m", "y_true": 1}\n' * 50 + "[1]\n")
    code = main(["replay", str(path)])
    _, err = capsys.readouterr()
    assert code == 1
    assert sum(line.startswith("line ") for line in err.splitlines()) == REPORT_LIMIT + 1
    assert "0 events applied, 51 rejected" in err
    # some events applied: exit 0, the bad ones still counted
    path.write_text(path.read_text() + '{"ts": 1767225600, "model": "m", "y_true": 1, "score": 0.5}\n')
    assert main(["replay", str(path)]) == 0
    # an empty input is fine
    path.write_text("")
    assert main(["replay", str(path)]) == 0


def test_max_keys_and_max_snapshot_bytes_flags(tmp_path, capsys):
    path = tmp_path / "keys.jsonl"
    path.write_text("".join(json.dumps({"ts": 1767225600 + i, "model": f"m{i}", "y_true": 1, "score": 0.5}) + "\n"
                            for i in range(5)))
    code = main(["replay", str(path), "--max-keys", "3", "--max-snapshot-bytes", "650"])
    out, err = capsys.readouterr()
    snaps = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(snaps) == 3 and "3 events applied, 2 rejected" in err
    assert "max_keys=3" in err
    assert all(s["state_dropped"] is True and len(line) <= 650 for s, line in zip(snaps, out.splitlines()))


def test_output_onto_the_file_on_stdin_is_refused(events_file):
    before = events_file.read_bytes()
    with open(events_file, "rb") as stdin:
        out = subprocess.run([sys.executable, "-c", "import sys; from streammetrics.cli import main; sys.exit(main())",
                              "replay", "-", "-o", str(events_file)], stdin=stdin, capture_output=True, text=True,
                             timeout=300, env={**os.environ, "PYTHONPATH": ROOT}, check=False)
    assert out.returncode == 2 and "standard input" in out.stderr and out.stderr.count("\n") == 1
    assert events_file.read_bytes() == before
