"""Writing files the user asked for: whole or not at all, and only where they said."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from plaudit.errors import ConfigError, ValidationError

#: The one directory that clients of a server (HTTP, MCP over HTTP) may export to and read from.
EXPORT_ROOT_ENV = "PLAUDIT_EXPORT_ROOT"


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any], *, what: str = "path"
) -> Any:
    """Call `write` on a temporary file beside `path`, fsync it, then rename it over `path`.

    A reader sees the old file or the whole new one, never a part, and a crash leaves at most
    a hidden temporary file. The directory must exist: a mistyped path is an error, never a
    tree of new directories. `what` names the input in that error (e.g. "output").
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ValidationError(
            what,
            f"cannot write {target}: its directory {target.parent} does not exist "
            "(create it first; plaudit makes no directories it was not asked for)",
        )
    # Unique per call, so two writers of one path (threads or processes) never share it.
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "xb") as f:
            result = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_directory(target.parent)  # the rename itself survives a power loss
    return result


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows, where a directory cannot be opened like this
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["atomic_write"]


def confine(root: str | None, field: str, value: str | None) -> str | None:
    """`value` resolved inside the export root `root` (else `$PLAUDIT_EXPORT_ROOT`); anything
    outside it, or no root at all, is refused, so a remote client can neither read nor write
    elsewhere on the server."""
    if value is None:
        return None
    root = root or os.environ.get(EXPORT_ROOT_ENV)
    if not root:
        raise ConfigError(
            f"{field}: server-side files are disabled; start the server with "
            f"{EXPORT_ROOT_ENV}=DIR to allow exports and audits under DIR"
        )
    if "\x00" in value:
        raise ValidationError(field, "must not contain NUL characters")
    base = Path(root).expanduser().resolve()
    target = (base / value).resolve()
    if not target.is_relative_to(base):
        raise ValidationError(field, "must stay inside the export root")
    return str(target)
