"""Per-partition checkpoints: open-window state plus the input offset it covers, written
atomically under ``--state-dir``.

A checkpoint file ``<state-dir>/<group>/<topic>/<partition>.json`` holds::

    {"version": 1, "topic": ..., "partition": ..., "offset": <next offset to read>,
     "settings": {"task": ..., "window": ..., ...},   # what the windows were built with
     "windows": <Pipeline.to_dict(): open windows, queued events, pending labels>,
     "label_offset": <next offset of the labels topic's partition>}   # with --labels-topic only

Incremental checkpoints: a checkpoint is either *full* (the above, with ``"chain": [id, 0]``) or
a *delta* (``"delta": <Pipeline.delta_dict()>`` instead of ``"windows"``, ``"chain": [id, n]``):
what changed since checkpoint ``n - 1`` of the same chain (dirty keys and panes, closed windows
removed, evicted keys). A full one is written to ``<partition>.json`` as below and starts a new
chain (a new random id); a delta is appended to ``<partition>.deltas`` (framed
``<length> <sha256>\n<payload>\n``, fsync'd) and the file is removed when the next full one is
written. Restore = the full checkpoint + the deltas of its chain, in order, up to the first
missing, torn or corrupt one (:meth:`CheckpointStore.load`, :meth:`CheckpointStore.merge`), so a
crash between a delta and a compaction loses nothing that was acknowledged. The service
compacts (writes a full one) when the chain's deltas exceed the full one's size or
``MAX_DELTAS``, and at least every ``--checkpoint-refresh``; so a checkpoint's cost follows the
changes, not the state. Bytes are encoded with msgspec where it is installed (the same JSON
values as the standard library's; only whitespace-free formatting details may differ).

It is written to a temporary file in the same directory, flushed and fsync'd, then renamed
over the old one (``os.replace`` is atomic on POSIX) and the directory fsync'd: after a crash
the file is either the old checkpoint or the new one, never a torn mix. The service writes
a checkpoint only after the producer has flushed every snapshot and dead letter derived from
the records it covers, so restarting from it re-reads exactly the records whose effects may
not have been published, and re-publishes byte-identical messages under the same keys.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from streammetrics.core.files import write_atomically

__all__ = ["CheckpointStore", "CheckpointError", "Chain", "dumps", "loads"]

VERSION = 1
#: deltas in one chain before the next checkpoint is a full one (compaction)
MAX_DELTAS = 100

_ENCODE: Callable[[Any], bytes] | None
try:  # the ``fast`` extra: ~5x faster than the standard library's encoder on checkpoint state
    import msgspec as _msgspec

    _ENCODE = _msgspec.json.Encoder().encode
    _DECODE: Any = _msgspec.json.decode
except ImportError:  # pragma: no cover - depends on the environment
    _ENCODE = None
    _DECODE = json.loads


def dumps(value: Any) -> bytes:
    """Compact JSON bytes of checkpoint state: msgspec's encoder where installed (the same JSON
    values; it writes a non-finite float as null, which no monitor's ``to_dict`` holds), else the
    standard library's (which refuses one)."""
    if _ENCODE is not None:
        return _ENCODE(value)
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def loads(raw: bytes) -> Any:
    """The values of checkpoint bytes: msgspec's decoder where installed, else the standard
    library's; ValueError (or RecursionError) for bytes that are not JSON."""
    try:
        return _DECODE(raw)
    except (ValueError, RecursionError):
        raise
    except Exception as exc:  # msgspec.DecodeError is a ValueError; anything else: say so as one
        raise ValueError(str(exc)) from None


class Chain:
    """The service's record of one partition's checkpoint chain: its id, the number of deltas
    written since its full checkpoint, that full payload and the deltas (for a rollback), and
    when the full one was written (``--checkpoint-refresh``)."""

    __slots__ = ("ident", "full", "deltas", "delta_bytes", "full_at")

    def __init__(self, full: bytes | None = None) -> None:
        self.ident: str | None = None  # None: the next checkpoint is full
        self.full = full
        self.deltas: list[bytes] = []
        self.delta_bytes = 0
        self.full_at = float("-inf")

    def full_due(self, now: float, refresh: float) -> bool:
        """A full checkpoint is next: no chain yet, its deltas outgrew the full one (or
        ``MAX_DELTAS``), or the full one is ``refresh`` seconds old."""
        return (self.ident is None or len(self.deltas) >= MAX_DELTAS or now - self.full_at >= refresh
                or self.delta_bytes > max(len(self.full or b""), 65536))

    def started(self, ident: str, payload: bytes, now: float) -> None:
        self.ident, self.full, self.deltas, self.delta_bytes, self.full_at = ident, payload, [], 0, now

    def added(self, payload: bytes) -> None:
        self.deltas.append(payload)
        self.delta_bytes += len(payload)

    def broken(self) -> None:
        """A write failed after the changes were taken: the next checkpoint must be full."""
        self.ident = None

    def next_link(self) -> tuple[str, int]:
        assert self.ident is not None
        return self.ident, len(self.deltas) + 1


def new_chain_id() -> str:
    return os.urandom(8).hex()


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

    def __init__(self, state_dir: str | None, group: str, topic: str, settings: dict[str, Any] | None = None) -> None:
        # state_dir None: no files, only encode/decode (checkpoints kept in the changelog topic)
        self.directory = None if state_dir is None else os.path.join(state_dir, _safe(group), _safe(topic))
        if self.directory is not None:
            os.makedirs(self.directory, exist_ok=True)
            if not os.access(self.directory, os.W_OK | os.X_OK):
                raise PermissionError(f"{self.directory} is not writable")
        self.topic = topic
        self.settings = settings

    def path(self, partition: int) -> str:
        if self.directory is None:
            return f"changelog checkpoint of {self.topic}[{int(partition)}]"
        return os.path.join(self.directory, f"{int(partition)}.json")

    def load(self, partition: int) -> dict[str, Any] | None:
        """The partition's checkpoint, or None if there is none; :class:`CheckpointError` for a
        file that cannot be used."""
        if self.directory is None:
            return None
        path = self.path(partition)
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(path, f"unreadable ({exc.strerror or exc})") from None
        full = self.decode(partition, raw)
        if "windows" not in full:
            raise CheckpointError(path, "not a full checkpoint")
        deltas = self._read_deltas(partition, full)
        while True:  # the longest prefix of the chain that merges (a bad delta ends it)
            try:
                return self.merge(partition, [full, *deltas])
            except CheckpointError:
                if not deltas:
                    raise
                deltas = deltas[:-1]

    def decode(self, partition: int, raw: bytes, path: str | None = None) -> dict[str, Any]:
        """A checkpoint's bytes, checked (:class:`CheckpointError` naming what is wrong)."""
        path = path or self.path(partition)
        try:
            data = loads(raw)
        except (ValueError, RecursionError) as exc:
            problem = "empty file" if not raw.strip() else f"not valid JSON, truncated or corrupt ({exc})"
            raise CheckpointError(path, problem) from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise CheckpointError(path, f"not a version-{VERSION} streammetrics checkpoint")
        if data.get("topic") != self.topic or data.get("partition") != partition:
            raise CheckpointError(path, f"written for {data.get('topic')!r}[{data.get('partition')!r}], "
                                        f"not {self.topic!r}[{partition}]")
        if type(data.get("offset")) is not int or data["offset"] < 0 or not (
                isinstance(data.get("windows"), dict) or isinstance(data.get("delta"), dict)):
            raise CheckpointError(path, "offset or windows missing or malformed")
        chain = data.get("chain")
        if chain is not None and not (isinstance(chain, list) and len(chain) == 2 and isinstance(chain[0], str)
                                      and type(chain[1]) is int and chain[1] >= 0):
            raise CheckpointError(path, "chain malformed")
        if ("delta" in data) == (chain is None or chain[1] == 0) or ("delta" in data and "windows" in data):
            raise CheckpointError(path, "a delta must have a chain position n > 0, a full checkpoint n = 0")
        label_offset = data.get("label_offset")
        if label_offset is not None and (type(label_offset) is not int or label_offset < 0):
            raise CheckpointError(path, "label_offset malformed")
        saved = data.get("settings")
        if self.settings is not None and isinstance(saved, dict) and saved != self.settings:
            diff = ", ".join(f"{k}={saved.get(k)!r} (now {self.settings.get(k)!r})"
                             for k in sorted(set(saved) | set(self.settings)) if saved.get(k) != self.settings.get(k))
            raise CheckpointError(path, f"written with other settings: {diff}")
        return data

    def encode(self, partition: int, offset: int, windows: dict[str, Any], label_offset: int | None = None,
               chain: tuple[str, int] | None = None, delta: dict[str, Any] | None = None) -> bytes:
        """The checkpoint file's bytes (deterministic JSON); ``label_offset``: the next offset of
        the labels topic's partition of the same number (``--labels-topic``), None: no labels topic.
        ``chain`` ``(id, n)``: its place in a chain of incremental checkpoints (n = 0: full, with
        ``windows``; n > 0: ``delta`` instead, ``windows`` ignored)."""
        body: dict[str, Any] = {"version": VERSION, "topic": self.topic, "partition": partition, "offset": offset}
        if self.settings is not None:
            body["settings"] = self.settings
        if delta is not None:
            body["delta"] = delta
        else:
            body["windows"] = windows
        if label_offset is not None:
            body["label_offset"] = label_offset
        if chain is not None:
            body["chain"] = [chain[0], chain[1]]
        return dumps(body)

    def merge(self, partition: int, links: Sequence[dict[str, Any]], path: str | None = None) -> dict[str, Any]:
        """A full checkpoint (decoded) with the deltas of its chain applied in order: the decoded
        full checkpoint they amount to (CheckpointError if they do not form one chain)."""
        from streammetrics.stream.pipeline import Pipeline

        path = path or self.path(partition)
        full, deltas = links[0], links[1:]
        if "windows" not in full:
            raise CheckpointError(path, "a chain must start with a full checkpoint")
        if not deltas:
            return full
        ident = (full.get("chain") or [None])[0]
        for n, link in enumerate(deltas, 1):
            if link.get("chain") != [ident, n]:
                raise CheckpointError(path, f"delta {n} is not link {n} of chain {ident!r}")
        try:
            windows = Pipeline.apply_delta(full["windows"], *[d["delta"] for d in deltas])
        except ValueError as exc:
            raise CheckpointError(path, str(exc)) from None
        last = deltas[-1]
        out = {k: v for k, v in last.items() if k != "delta"}
        out["windows"] = windows
        out["chain"] = full.get("chain")
        return out

    def write(self, partition: int, payload: bytes) -> None:
        """Atomically replace the partition's checkpoint with ``payload`` (from :meth:`encode`),
        then drop the deltas of the previous chain."""
        write_atomically(self.path(partition), payload, durable=True)
        try:
            os.remove(self._deltas_path(partition))
        except FileNotFoundError:
            pass

    def _deltas_path(self, partition: int) -> str:
        assert self.directory is not None
        return os.path.join(self.directory, f"{int(partition)}.deltas")

    def append_delta(self, partition: int, payload: bytes) -> None:
        """Append a delta checkpoint (``encode(..., delta=...)``) to the partition's chain, durably."""
        frame = b"%d %s\n" % (len(payload), hashlib.sha256(payload).hexdigest().encode()) + payload + b"\n"
        fd = os.open(self._deltas_path(partition), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(frame)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _read_deltas(self, partition: int, full: dict[str, Any]) -> list[dict[str, Any]]:
        """The deltas after ``full`` in its chain: up to the first torn, corrupt or foreign one."""
        try:
            with open(self._deltas_path(partition), "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointError(self._deltas_path(partition), f"unreadable ({exc.strerror or exc})") from None
        chain = full.get("chain")
        out: list[dict[str, Any]] = []
        pos = 0
        while chain is not None and pos < len(raw):
            end = raw.find(b"\n", pos)
            head = raw[pos:end].split(b" ") if end >= 0 else []
            if len(head) != 2 or not head[0].isdigit():
                break
            size = int(head[0])
            payload = raw[end + 1:end + 1 + size]
            if len(payload) != size or raw[end + 1 + size:end + 2 + size] != b"\n" \
                    or hashlib.sha256(payload).hexdigest().encode() != head[1]:
                break  # torn by a crash mid-append (or corrupt): the chain ends before it
            pos = end + 2 + size
            try:
                data = self.decode(partition, payload, self._deltas_path(partition))
            except CheckpointError:
                break
            if data.get("chain") != [chain[0], len(out) + 1]:
                break  # a delta of an older chain (a crash between the full write and the removal)
            out.append(data)
        return out

    def save(self, partition: int, offset: int, windows: dict[str, Any]) -> None:
        """Atomically replace the partition's checkpoint."""
        self.write(partition, self.encode(partition, offset, windows))


def _safe(name: str) -> str:
    """A group or topic name as one path component."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "_"
