"""Snapshots: the JSON record a closed window publishes (contract section 3).

``snapshot_line`` is the one canonical encoding (compact, keys in schema order, no NaN) that
``replay`` prints and the service publishes; ``snapshot_key`` is its Kafka message key
``model|segment|window_start``, the same for every re-emission of a window.

Fields: ``count`` is the window's events; ``late`` is the running total of late events dropped
for the snapshot's key so far (contract section 3), not a count per window: a late event
belongs to a window that has already been emitted. Snapshots degraded to fit
``max_snapshot_bytes`` carry ``"state_dropped": true`` (or ``"state_coarsened": true``) and,
past that, ``"metrics_truncated": true``; all-time snapshots carry ``"cumulative": true``.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["SNAPSHOT_SCHEMA", "snapshot_key", "snapshot_line"]

SNAPSHOT_SCHEMA = "streammetrics.snapshot/1"


def snapshot_line(snapshot: dict[str, Any]) -> str:
    """A snapshot as one canonical JSON line: compact, keys in schema order, no NaN."""
    return json.dumps(snapshot, separators=(",", ":"), allow_nan=False)


def snapshot_key(snapshot: dict[str, Any]) -> bytes:
    """Kafka key of a snapshot: ``model|segment|window_start`` (``|cumulative`` for all-time ones)."""
    k = snapshot["key"]
    tail = "cumulative" if snapshot.get("cumulative") else json.dumps(snapshot["window"]["start"])
    return f"{k['model']}|{k['segment']}|{tail}".encode()
