"""Atomic file replacement, shared by report writing and the Kafka service's checkpoints."""
from __future__ import annotations

import os
import tempfile

__all__ = ["write_atomically"]


def write_atomically(path: str, data: bytes, *, mode: int | None = None, durable: bool = False) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``
    (``os.replace``, atomic on POSIX): readers see the old file or the new one, never a mix.

    ``mode``: the file's permission bits (``mkstemp``'s 0600 otherwise). ``durable``: fsync the
    file before the rename and the directory after it, so the new file survives a crash of the
    machine too. The temporary file is removed if anything fails.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
