"""Appending router events to a seq_mem.jsonl file, safely shared by concurrent emitters.

The row matches the reference emitter's (`ts_ms`, `dur_us`, `ok`, `session_id`, `event_id`,
`content_hash`, `name`, `subject` as a JSON string with sorted keys), `event_id` included.
Each row is written with one `write` under an exclusive `flock`, then fsynced, so parallel
shell hooks never interleave lines, and a row is on disk when the emitter reports success. If
an earlier writer died mid-line, the torn fragment is closed off first, so it cannot swallow
the next row.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat

from plaudit.errors import ValidationError
from plaudit.signals.contract import Emission

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def safe_json(value: Any) -> str:
    # The reference's encoding: ASCII-only, sorted keys, default separators.
    return json.dumps(value, ensure_ascii=True, sort_keys=True)


def row_event_id(name: str, session_id: str, payload: dict[str, Any], ts_ms: int) -> str:
    """The reference emitter's `event_id`: sha256 of `name|session|decision_id|outcome|ts_ms`,
    64 hex digits, new for every row written at another millisecond. (The log keeps its own
    idempotent id: a retry is a new seq_mem row but the same log event.)"""
    key = f"{name}|{session_id}|{payload.get('decision_id', '')}|{payload.get('outcome', '')}"
    return hashlib.sha256(f"{key}|{ts_ms}".encode()).hexdigest()


def seq_mem_row(emission: Emission, ts_ms: int) -> dict[str, Any]:
    subject = safe_json(emission.payload)
    return {
        "ts_ms": ts_ms,
        "dur_us": 0,
        "ok": emission.ok,
        "session_id": emission.session_id,
        "event_id": row_event_id(emission.type, emission.session_id, emission.payload, ts_ms),
        "content_hash": hashlib.sha256(subject.encode()).hexdigest(),
        "name": emission.type,
        "subject": subject,
    }


def open_for_append(path: str | os.PathLike[str]) -> tuple[int, str]:
    """Open (creating it and its directory) for appending; (fd, path as opened). Raises
    ValidationError naming the path, so a caller can check the file before writing elsewhere."""
    target = os.path.expanduser(os.fspath(path))
    try:
        if not target:
            raise ValueError("the path is empty")
        parent = os.path.dirname(os.path.abspath(target))
        os.makedirs(parent, exist_ok=True)
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValidationError(
            "seq_mem", f"cannot open {target!r} for appending: {reason}"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValidationError("seq_mem", f"cannot append to {target!r}: not a regular file")
    return fd, target


def write_line(fd: int, target: str, line: str) -> None:
    """Append one line to an open file under an exclusive lock, fsynced; closes `fd`."""
    data = (line.rstrip("\n") + "\n").encode()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            # A writer killed mid-line left a torn row: end it, so ours stays a line of its own.
            data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        raise ValidationError("seq_mem", f"cannot append to {target!r}: {exc.strerror}") from None
    finally:
        os.close(fd)  # closing releases the lock


def write_row(fd: int, target: str, emission: Emission, ts_ms: int) -> dict[str, Any]:
    """Append the emission's seq_mem row to a file opened with `open_for_append`."""
    row = seq_mem_row(emission, ts_ms)
    write_line(fd, target, safe_json(row))
    return row
