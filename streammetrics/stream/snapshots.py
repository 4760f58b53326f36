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
from typing import Any, Callable

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


def _seconds(ms: int) -> int | float:
    """Epoch milliseconds as JSON seconds: an int when whole, else a float."""
    return ms // 1000 if ms % 1000 == 0 else ms / 1000.0


def build_snapshot(
    key: tuple[str, str], monitor: Any, start_ms: int, end_ms: int, *, final: bool, late: int = 0,
    revision: int = 0, pending: int = 0, expired: int = 0, cumulative: bool = False, include_state: bool = True,
    extra_metrics: Callable[[tuple[str, str], Any, dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """The snapshot of ``monitor`` for ``key`` and the window ``[start_ms, end_ms)`` (contract
    section 3; ``labeled = count - pending - expired``). The window engine and Spark both build
    their snapshots here, so the two give the same record for the same monitor.
    ``extra_metrics(key, monitor, metrics)`` may add metrics (e.g. ``--reference``'s). An all-time
    (``cumulative``) snapshot has no revision fields: awaiting counts are per window."""
    count = monitor.count
    snap: dict[str, Any] = {
        "schema": SNAPSHOT_SCHEMA,
        "key": {"model": key[0], "segment": key[1]},
        "window": {"start": _seconds(start_ms), "end": _seconds(end_ms)},
        "final": final,
        "count": count,
        "late": late,
    }
    if not cumulative:
        snap.update(revision=revision, labeled=count - pending - expired, expired=expired, pending=pending)
    snap["metrics"] = monitor.snapshot()
    if extra_metrics is not None:
        extra_metrics(key, monitor, snap["metrics"])
    if cumulative:
        snap["cumulative"] = True
    if include_state:
        snap["state"] = monitor.to_dict()
    return snap
