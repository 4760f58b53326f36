"""Per-partition checkpoints: open-window state plus the input offset it covers, written
atomically under ``--state-dir``.

A checkpoint file ``<state-dir>/<group>/<topic>/<partition>.json`` holds::

    {"version": 1, "topic": ..., "partition": ..., "offset": <next offset to read>,
     "windows": <WindowManager.to_dict(), queued events included>}

It is written to a temporary file in the same directory, flushed and fsync'd, then renamed
over the old one (``os.replace`` is atomic on POSIX) and the directory fsync'd: after a crash
the file is either the old checkpoint or the new one, never a torn mix. The service writes
a checkpoint only after the producer has flushed every snapshot and dead letter derived from
the records it covers, so restarting from it re-reads exactly the records whose effects may
not have been published, and re-publishes byte-identical messages under the same keys.
"""
from __future__ import annotations

import json
import os
from typing import Any

from streammetrics.core.files import write_atomically
from streammetrics.stream.events import Event

__all__ = ["CheckpointStore", "encode_event", "decode_event", "EVENT_CODEC"]

VERSION = 1


def encode_event(ev: Event) -> list:
    """An event as a compact JSON list (field order of ``Event.__slots__``)."""
    return [ev.ts, ev.model, ev.segment, ev.y_true, ev.score,
            None if ev.scores is None else list(ev.scores), ev.y_pred, ev.weight, ev.id]


def decode_event(values: list) -> Event:
    """Inverse of :func:`encode_event`."""
    if not isinstance(values, list) or len(values) != 9:
        raise ValueError(f"queued event must be a list of 9 fields, got {values!r:.80}")
    ts, model, segment, y_true, score, scores, y_pred, weight, id_ = values
    return Event(ts, model, segment, y_true, score, None if scores is None else tuple(scores), y_pred, weight, id_)


EVENT_CODEC = (encode_event, decode_event)


class CheckpointStore:
    """Reads and atomically writes the checkpoints of one consumer group and topic."""

    def __init__(self, state_dir: str, group: str, topic: str) -> None:
        self.directory = os.path.join(state_dir, _safe(group), _safe(topic))
        os.makedirs(self.directory, exist_ok=True)
        self.topic = topic

    def path(self, partition: int) -> str:
        return os.path.join(self.directory, f"{int(partition)}.json")

    def load(self, partition: int) -> dict[str, Any] | None:
        """The partition's checkpoint, or None if there is none. A corrupt file raises ValueError."""
        try:
            with open(self.path(partition), "rb") as fh:
                data = json.loads(fh.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ValueError(f"unreadable checkpoint {self.path(partition)}: {exc}") from None
        if (
            not isinstance(data, dict)
            or data.get("version") != VERSION
            or data.get("topic") != self.topic
            or data.get("partition") != partition
            or type(data.get("offset")) is not int
            or data["offset"] < 0
            or not isinstance(data.get("windows"), dict)
        ):
            raise ValueError(f"checkpoint {self.path(partition)} is not a version-{VERSION} checkpoint "
                             f"of {self.topic}[{partition}]")
        return data

    def save(self, partition: int, offset: int, windows: dict[str, Any]) -> None:
        """Atomically replace the partition's checkpoint."""
        payload = json.dumps(
            {"version": VERSION, "topic": self.topic, "partition": partition, "offset": offset,
             "windows": windows},
            separators=(",", ":"), allow_nan=False,
        ).encode()
        write_atomically(self.path(partition), payload, durable=True)


def _safe(name: str) -> str:
    """A group or topic name as one path component."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "_"
