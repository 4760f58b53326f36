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
