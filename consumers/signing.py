"""Authenticated internal records: an HMAC-SHA256 tag over a record's value bytes.

With a key (``--internal-key FILE`` or ``$STREAMMETRICS_INTERNAL_KEY``) every record the service
writes to its internal topics (changelog, partials) is sealed as::

    b"smsig1:" + hex(HMAC-SHA256(key, value)) + b":" + value

and every record it reads back is opened: a missing or wrong tag raises :class:`ForgedRecord`
(RFC 2104; compared with ``hmac.compare_digest``). Without a key, values pass unchanged. The tag
authenticates a record's bytes, not its place: protect the topics with ACLs as well (docs/internal-key.md).
"""
from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping

__all__ = ["ForgedRecord", "RecordSigner", "KEY_ENV"]

KEY_ENV = "STREAMMETRICS_INTERNAL_KEY"
_PREFIX = b"smsig1:"
_TAG_HEX = 64  # hex digits of a SHA-256 digest


class ForgedRecord(ValueError):
    """An internal record whose HMAC tag is missing or does not match the key."""


class RecordSigner:
    """Seals and opens internal record values with one HMAC-SHA256 key (or passes them through)."""

    def __init__(self, key: bytes | None) -> None:
        if key is not None and not isinstance(key, bytes):
            raise TypeError("internal key must be bytes")
        if key is not None and not key:
            raise ValueError("internal key is empty")
        self._key = key
        self.enabled: bool = key is not None

    @classmethod
    def from_option(cls, path: str | None, env: Mapping[str, str] = os.environ) -> RecordSigner:
        """The key from ``path`` (the file's bytes, surrounding whitespace stripped) or else from
        ``$STREAMMETRICS_INTERNAL_KEY``; no key when neither is given. Raises ValueError (one line,
        naming the source, never the key) on an unreadable or empty key."""
        if path:
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError as exc:
                raise ValueError(f"--internal-key {path}: cannot read: {exc.strerror or exc}") from None
            key = raw.strip()
            if not key:
                raise ValueError(f"--internal-key {path}: the file is empty")
            return cls(key)
        value = env.get(KEY_ENV)
        if value is None:
            return cls(None)
        key = value.strip().encode()
        if not key:
            raise ValueError(f"${KEY_ENV} is set but empty")
        return cls(key)

    def _tag(self, value: bytes) -> bytes:
        assert self._key is not None
        return hmac.new(self._key, value, hashlib.sha256).hexdigest().encode()

    def seal(self, value: bytes) -> bytes:
        """``value`` unchanged without a key; else ``b"smsig1:" + hex(hmac) + b":" + value``."""
        if self._key is None:
            return value
        return _PREFIX + self._tag(value) + b":" + value

    def open(self, value: bytes) -> bytes:
        """The sealed value's payload; ``value`` itself without a key. Raises ForgedRecord when the
        tag is missing or wrong."""
        if self._key is None:
            return value
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ForgedRecord("internal record is not bytes: no signature")
        value = bytes(value)
        if not value.startswith(_PREFIX):
            raise ForgedRecord("internal record carries no signature (smsig1 tag missing)")
        start = len(_PREFIX)
        tag = value[start:start + _TAG_HEX]
        if len(tag) != _TAG_HEX or value[start + _TAG_HEX:start + _TAG_HEX + 1] != b":":
            raise ForgedRecord("internal record has a malformed signature tag")
        payload = value[start + _TAG_HEX + 1:]
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise ForgedRecord("internal record signature does not match the internal key")
        return payload

    def __repr__(self) -> str:  # never shows the key
        return f"RecordSigner(enabled={self.enabled})"
