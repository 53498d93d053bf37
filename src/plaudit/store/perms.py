"""Files and directories of a store are private to their owner by default.

The store, its lock file, its signing key, its verifier state and its sockets are created
0600 (directories 0700), whatever the umask: another local user who could read the database
would read every event, and one who could open its lock file could take the lock and freeze
every writer. A team that shares a store through a Unix group sets `$PLAUDIT_GROUP` to that
group's name: files are then created 0660 and directories 0770, owned by that group.

Only what plaudit creates is touched: an existing file or directory keeps its mode.
"""

from __future__ import annotations

import os

from plaudit.errors import ConfigError

ENV_GROUP = "PLAUDIT_GROUP"


def _group() -> int | None:
    """The gid named by `$PLAUDIT_GROUP`, or None (private to the owner)."""
    name = os.environ.get(ENV_GROUP, "").strip()
    if not name:
        return None
    import grp

    try:
        return grp.getgrnam(name).gr_gid if not name.isdigit() else int(name)
    except KeyError:
        raise ConfigError(f"${ENV_GROUP} names group {name!r}, which does not exist") from None


def file_mode() -> int:
    return 0o600 if _group() is None else 0o660


def dir_mode() -> int:
    return 0o700 if _group() is None else 0o770


def _own(path: str | os.PathLike[str], mode: int) -> None:
    """Give what was just created its mode (the umask may have narrowed or widened it) and,
    with a configured group, that group."""
    gid = _group()
    if gid is not None:
        os.chown(path, -1, gid)
    os.chmod(path, mode)


def make_dirs(path: str | os.PathLike[str]) -> None:
    """Create `path` and any missing parents, each new one private (or the group's).
    (os.path, not pathlib: a shell hook's emit must not pay for importing it.)"""
    p = os.path.abspath(os.fspath(path))
    if os.path.exists(p) and not os.path.isdir(p):
        raise NotADirectoryError(20, "not a directory", p)
    missing: list[str] = []
    while not os.path.exists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    mode = dir_mode()
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue  # another process made it meanwhile: its mode is its own
        _own(d, mode)


def create_file(path: str | os.PathLike[str]) -> bool:
    """Create an empty private file at `path` if none is there; True when this call made it."""
    mode = file_mode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        return False
    try:
        _own(path, mode)
    finally:
        os.close(fd)
    return True


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """`os.open` with O_CREAT: a file it creates is private (or the group's)."""
    create_file(path)
    return os.open(path, flags | os.O_CLOEXEC)
