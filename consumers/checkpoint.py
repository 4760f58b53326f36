"""Per-partition checkpoints: open-window state plus the input offset it covers, written
atomically under ``--state-dir``.

A checkpoint file ``<state-dir>/<group>/<topic>/<partition>.json`` holds::

    {"version": 1, "topic": ..., "partition": ..., "offset": <next offset to read>,
     "settings": {"task": ..., "window": ..., ...},   # what the windows were built with
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
from streammetrics.events.parser import Event

__all__ = ["CheckpointStore", "CheckpointError", "encode_event", "decode_event", "EVENT_CODEC"]

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


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used (unreadable, corrupt, or written for another topic,
    partition or window settings). The message names the file, what is wrong and what to do."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"checkpoint {path} cannot be used: {problem}. Move it away (that partition then "
                         "restarts from the group's committed offset without its open windows) or start "
                         "with a new --state-dir")


class CheckpointStore:
    """Reads and atomically writes the checkpoints of one consumer group and topic.

    ``settings``: what the windows are built with (task, window, slide, grace, classes...); a
    checkpoint written with other settings is refused on load with :class:`CheckpointError`.
    OSError if ``state_dir`` cannot be created or written.
    """

    def __init__(self, state_dir: str, group: str, topic: str, settings: dict[str, Any] | None = None) -> None:
        self.directory = os.path.join(state_dir, _safe(group), _safe(topic))
        os.makedirs(self.directory, exist_ok=True)
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise PermissionError(f"{self.directory} is not writable")
        self.topic = topic
        self.settings = settings

    def path(self, partition: int) -> str:
        return os.path.join(self.directory, f"{int(partition)}.json")

    def load(self, partition: int) -> dict[str, Any] | None:
        """The partition's checkpoint, or None if there is none; :class:`CheckpointError` for a
        file that cannot be used."""
        path = self.path(partition)
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(path, f"unreadable ({exc.strerror or exc})") from None
        return self.decode(partition, raw)

    def decode(self, partition: int, raw: bytes) -> dict[str, Any]:
        """A checkpoint's bytes, checked (:class:`CheckpointError` naming what is wrong)."""
        path = self.path(partition)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            problem = "empty file" if not raw.strip() else f"not valid JSON, truncated or corrupt ({exc})"
            raise CheckpointError(path, problem) from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise CheckpointError(path, f"not a version-{VERSION} streammetrics checkpoint")
        if data.get("topic") != self.topic or data.get("partition") != partition:
            raise CheckpointError(path, f"written for {data.get('topic')!r}[{data.get('partition')!r}], "
                                        f"not {self.topic!r}[{partition}]")
        if type(data.get("offset")) is not int or data["offset"] < 0 or not isinstance(data.get("windows"), dict):
            raise CheckpointError(path, "offset or windows missing or malformed")
        saved = data.get("settings")
        if self.settings is not None and isinstance(saved, dict) and saved != self.settings:
            diff = ", ".join(f"{k}={saved.get(k)!r} (now {self.settings.get(k)!r})"
                             for k in sorted(set(saved) | set(self.settings)) if saved.get(k) != self.settings.get(k))
            raise CheckpointError(path, f"written with other settings: {diff}")
        return data

    def encode(self, partition: int, offset: int, windows: dict[str, Any]) -> bytes:
        """The checkpoint file's bytes (deterministic JSON)."""
        body: dict[str, Any] = {"version": VERSION, "topic": self.topic, "partition": partition, "offset": offset}
        if self.settings is not None:
            body["settings"] = self.settings
        body["windows"] = windows
        return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()

    def write(self, partition: int, payload: bytes) -> None:
        """Atomically replace the partition's checkpoint with ``payload`` (from :meth:`encode`)."""
        write_atomically(self.path(partition), payload, durable=True)

    def save(self, partition: int, offset: int, windows: dict[str, Any]) -> None:
        """Atomically replace the partition's checkpoint."""
        self.write(partition, self.encode(partition, offset, windows))


def _safe(name: str) -> str:
    """A group or topic name as one path component."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "_"
