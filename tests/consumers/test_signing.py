"""consumers.signing: HMAC-SHA256 seal/open of internal records (RFC 2104 vectors; forgeries refused)."""
from __future__ import annotations

import hashlib
import hmac

import pytest

from consumers.signing import KEY_ENV, ForgedRecord, RecordSigner


def test_no_key_passes_values_through() -> None:
    s = RecordSigner(None)
    assert not s.enabled
    assert s.seal(b'{"a": 1}') == b'{"a": 1}'
    assert s.open(b"smsig1:whatever") == b"smsig1:whatever"


def test_seal_format_is_prefix_hex_hmac_colon_value() -> None:
    key, value = b"k3y", b'{"offset": 5}'
    sealed = RecordSigner(key).seal(value)
    expected = hmac.new(key, value, hashlib.sha256).hexdigest().encode()
    assert sealed == b"smsig1:" + expected + b":" + value


def test_rfc4231_case_2() -> None:
    # RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?"
    sealed = RecordSigner(b"Jefe").seal(b"what do ya want for nothing?")
    assert sealed.split(b":")[1] == b"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


def test_round_trip_including_colons_and_empty_value() -> None:
    s = RecordSigner(b"secret")
    for value in (b"", b"a:b:c", b"smsig1:nested", bytes(range(256))):
        assert s.open(s.seal(value)) == value


@pytest.mark.parametrize("mutate", [
    lambda v: v[len(b"smsig1:"):],                       # tag prefix removed
    lambda v: v.split(b":", 2)[2],                        # unsigned payload
    lambda v: v[:-1] + bytes([v[-1] ^ 1]),                # payload bit flipped
    lambda v: v[:10] + (b"0" if v[10:11] != b"0" else b"1") + v[11:],  # tag digit changed
    lambda v: v[:20] + v[21:],                            # tag shortened
    lambda v: v.replace(b":", b";", 2),                   # separator broken
    lambda v: b"",
])
def test_forged_or_unsigned_refused(mutate) -> None:
    s = RecordSigner(b"secret")
    sealed = s.seal(b'{"offset": 7, "windows": {}}')
    with pytest.raises(ForgedRecord) as info:
        s.open(mutate(sealed))
    assert "secret" not in str(info.value) and "\n" not in str(info.value)


def test_other_key_refused() -> None:
    sealed = RecordSigner(b"one").seal(b"x")
    with pytest.raises(ForgedRecord):
        RecordSigner(b"two").open(sealed)


def test_from_option_file_env_and_none(tmp_path) -> None:
    f = tmp_path / "key"
    f.write_bytes(b"filekey\n")
    assert RecordSigner.from_option(str(f), env={}).seal(b"v") == RecordSigner(b"filekey").seal(b"v")
    # the file wins over the environment
    assert RecordSigner.from_option(str(f), env={KEY_ENV: "envkey"}).seal(b"v") == RecordSigner(b"filekey").seal(b"v")
    assert RecordSigner.from_option(None, env={KEY_ENV: "envkey"}).seal(b"v") == RecordSigner(b"envkey").seal(b"v")
    assert not RecordSigner.from_option(None, env={}).enabled


def test_from_option_bad_sources_one_line_without_secret(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"  \n")
    for path, env in ((str(empty), {}), (str(tmp_path / "missing"), {}), (None, {KEY_ENV: "  "})):
        with pytest.raises(ValueError) as info:
            RecordSigner.from_option(path, env=env)
        assert "\n" not in str(info.value)
    assert "secret" not in repr(RecordSigner(b"secret"))


def test_consume_refuses_an_unreadable_or_empty_key_before_connecting(tmp_path) -> None:
    import subprocess
    import sys

    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path in (str(tmp_path / "missing"), str(empty)):
        out = subprocess.run([sys.executable, "-m", "streammetrics.cli", "consume", "--bootstrap-servers",
                              "127.0.0.1:9", "--topic", "a", "--output-topic", "b", "--internal-key", path],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and "--internal-key" in out.stderr and "Traceback" not in out.stderr
        assert out.stderr.count("\n") == 1
