"""Whole-file writes that a crash cannot leave half done (keys and witness files)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a new name in `directory` durable; a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_temp(directory: Path, name: str, data: bytes, mode: int = 0o644) -> Path:
    """`data`, synced, in a new hidden file of `directory`, to be linked or renamed into place."""
    tmp = directory / f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp
