"""Witness directories: copies of every checkpoint kept where the database cannot reach.

A witness is any directory another party controls or can audit: a mounted share, a git
checkout that another host pushes. Each checkpoint goes in as its own small file, named by the
log and the tree size, written whole to a temporary file, synced and then linked into place,
so a reader never sees half a checkpoint under a real name and no existing file is ever
replaced. A second file per log, `<log>.latest`, holds a copy of the newest checkpoint so
that finding it costs one read; the numbered files are the record and the fallback.

A kill -9 mid-write can leave a temporary file (`.<name>.<pid>.<random>.tmp`) behind, and a
copy or merge by other tools can leave garbage under any name. Readers skip both with a
warning and never fail because of them.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from plaudit.errors import ConfigError, IntegrityError, PlauditError
from plaudit.store.atomic import fsync_dir, write_temp
from plaudit.store.checkpoints import Checkpoint, parse_checkpoint

ENV_WITNESS = "PLAUDIT_WITNESS"
#: Checkpoint files are small; anything much larger is not one (and is not read whole).
_MAX_FILE = 4096
_NAME_RE = re.compile(r"(?P<log>[0-9a-f]{16})\.(?P<size>[0-9]{20})\.checkpoint")
_log = logging.getLogger("plaudit.witness")


def log_prefix(log: str) -> str:
    """The part of a log fingerprint witness file names carry (the file holds all of it)."""
    return log[:16]


def checkpoint_name(ck: Checkpoint) -> str:
    """`<first 16 hex of the log fingerprint>.<size, 20 digits>.checkpoint`: sorts by size."""
    return f"{log_prefix(ck.log)}.{ck.size:020d}.checkpoint"


def latest_name(log: str) -> str:
    return f"{log_prefix(log)}.latest"


def witness_dirs(
    options: Sequence[str | os.PathLike[str]] = (), env: Mapping[str, str] | None = None
) -> list[Path]:
    """The witness directories: `--witness` options, then `$PLAUDIT_WITNESS` (split on the
    path separator, ':' on POSIX), each once."""
    env = os.environ if env is None else env
    raw: list[str] = [os.fspath(o) for o in options]
    raw += [p for p in env.get(ENV_WITNESS, "").split(os.pathsep) if p]
    out: list[Path] = []
    for r in raw:
        p = Path(r).expanduser()
        if p not in out:
            out.append(p)
    return out


class WitnessWrite(msgspec.Struct, frozen=True):
    path: str
    #: written: a new file; present: this checkpoint (or one of the same tree) was already there;
    #: skipped: a file of that name holds something unreadable, left alone.
    status: Literal["written", "present", "skipped"]


class WitnessRead(msgspec.Struct):
    directory: str
    checkpoint: Checkpoint | None = None
    path: str | None = None
    warnings: list[str] = msgspec.field(default_factory=list)
    #: Fingerprint prefixes of other logs with checkpoints here, when this log has none.
    other_logs: list[str] = msgspec.field(default_factory=list)


def _check_dir(directory: Path) -> None:
    if not directory.exists():
        raise ConfigError(f"witness directory {directory} does not exist")
    if not directory.is_dir():
        raise ConfigError(f"witness {directory} is not a directory")


def _read_small(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(_MAX_FILE + 1)


def _read_checkpoint(path: Path) -> Checkpoint:
    """Raises OSError or ValidationError."""
    data = _read_small(path)
    if len(data) > _MAX_FILE:
        raise ValueError(f"larger than {_MAX_FILE} bytes")
    return parse_checkpoint(data, where=str(path))


def _same_tree(existing: Path, ck: Checkpoint) -> Literal["present", "skipped"]:
    """What to do when a checkpoint's file name is taken."""
    try:
        old = _read_checkpoint(existing)
    except (OSError, ValueError, PlauditError) as exc:
        _log.warning("witness file %s is unreadable (%s); left as it is", existing, exc)
        return "skipped"
    if old.log == ck.log and old.size == ck.size and old.root != ck.root:
        raise IntegrityError(
            f"witness {existing} holds a different root for size {ck.size} of this log: "
            f"{old.root.hex()} there, {ck.root.hex()} now (the log was rewritten, or forked)"
        )
    return "present"


def write_witness(directory: str | os.PathLike[str], ck: Checkpoint) -> WitnessWrite:
    """Add `ck` to a witness directory, durably, never replacing a file of another content."""
    d = Path(directory)
    _check_dir(d)
    name = checkpoint_name(ck)
    final = d / name
    data = ck.to_text().encode()
    try:
        if final.exists():
            return WitnessWrite(str(final), _same_tree(final, ck))
        tmp = write_temp(d, name, data)
        try:
            os.link(tmp, final)  # fails, never replaces, if the name was taken meanwhile
        except FileExistsError:
            return WitnessWrite(str(final), _same_tree(final, ck))
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            _exclusive_write(final, data)  # a file system without hard links
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        fsync_dir(d)
        _advance_latest(d, ck, data)
    except OSError as exc:
        raise ConfigError(f"cannot write to witness {final}: {exc.strerror or exc}") from None
    return WitnessWrite(str(final), "written")


def _exclusive_write(final: Path, data: bytes) -> None:
    fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _advance_latest(d: Path, ck: Checkpoint, data: bytes) -> None:
    """Point `<log>.latest` at `ck` unless it already names a larger tree.

    Two writers racing can leave it one checkpoint behind; readers then see an older (still
    valid) checkpoint until the next write. It is our own pointer, the one file replaced.
    """
    latest = d / latest_name(ck.log)
    with contextlib.suppress(OSError, ValueError, PlauditError):
        if _read_checkpoint(latest).size >= ck.size:
            return
    tmp = write_temp(d, latest.name, data)
    try:
        os.replace(tmp, latest)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(d)


def newest_checkpoint(directory: str | os.PathLike[str], log: str) -> WitnessRead:
    """The newest checkpoint of `log` in a witness directory, or none; garbage is skipped.

    Reads `<log>.latest` when it is sound, else scans the numbered files from the largest
    size down. Checks the form only: the caller checks the signature.
    """
    d = Path(directory)
    _check_dir(d)
    out = WitnessRead(str(d))

    def warn(path: Path, exc: object) -> None:
        msg = f"ignoring witness file {path}: {exc}"
        _log.warning(msg)
        out.warnings.append(msg)

    latest = d / latest_name(log)
    try:
        ck = _read_checkpoint(latest)
    except FileNotFoundError:
        ck = None
    except (OSError, ValueError, PlauditError) as exc:
        warn(latest, exc)
        ck = None
    if ck is not None and ck.log != log:
        warn(latest, f"it is a checkpoint of another log ({ck.log[:16]}...)")
        ck = None
    if ck is not None:
        out.checkpoint, out.path = ck, str(latest)
        return out
    prefix = log_prefix(log)
    names: list[str] = []
    others: set[str] = set()
    try:
        entries = os.listdir(d)
    except OSError as exc:
        raise ConfigError(f"cannot list witness {d}: {exc.strerror or exc}") from None
    for n in entries:
        m = _NAME_RE.fullmatch(n)
        if m is None:
            continue
        if m["log"] == prefix:
            names.append(n)
        else:
            others.add(m["log"])
    for n in sorted(names, reverse=True):
        path = d / n
        try:
            ck = _read_checkpoint(path)
        except (OSError, ValueError, PlauditError) as exc:
            warn(path, exc)
            continue
        if ck.log != log or checkpoint_name(ck) != n:
            warn(path, "its contents do not match its name")
            continue
        out.checkpoint, out.path = ck, str(path)
        return out
    out.other_logs = sorted(others)
    return out


__all__ = [
    "ENV_WITNESS",
    "WitnessRead",
    "WitnessWrite",
    "checkpoint_name",
    "latest_name",
    "newest_checkpoint",
    "witness_dirs",
    "write_witness",
]
