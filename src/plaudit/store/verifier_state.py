"""The verifier's own state: the newest checkpoint a verify of this store confirmed, kept in a
file of the user's (`plaudit.store.trust_paths.verifier_state_path`, 0600), never in a table
the database's writer could change.

The default verify starts from it: the stored tree must still give that checkpoint's root at
its size, so only what came after needs checking. Without one (a first verify, a new machine,
a deleted file) verify checks everything and records what it confirmed. A state file that
cannot be read, or names another log, is set aside with a warning and the verify is full: it
can make a verify slower, never weaker.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from plaudit.errors import PlauditError
from plaudit.ids import now_ms

if TYPE_CHECKING:
    from plaudit.store.backend import Backend
    from plaudit.store.checkpoints import Checkpoint


class Confirmed(msgspec.Struct):
    """What the state file holds: the store it is about, and the signed checkpoint."""

    store: str
    checkpoint: str
    verified_ms: int


def load(backend: Backend, log: str | None) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint confirmed earlier for this store and log (None: verify everything),
    and a warning when a state file was there but could not be used."""
    from plaudit.store.checkpoints import parse_checkpoint
    from plaudit.store.trust_paths import verifier_state_path

    path = verifier_state_path(backend)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"verifier state {path} is unreadable ({exc.strerror}): verified in full"
    try:
        state = msgspec.json.decode(data, type=Confirmed)
        ck = parse_checkpoint(state.checkpoint, where=str(path))
    except (msgspec.DecodeError, msgspec.ValidationError, PlauditError) as exc:
        return None, f"verifier state {path} is malformed ({exc}): verified in full"
    if log is not None and ck.log != log:
        return None, f"verifier state {path} is of another log's key: verified in full"
    return ck, None


def save(backend: Backend, ck: Checkpoint) -> str | None:
    """Remember `ck` as confirmed (atomically, private); returns a warning if it could not."""
    from plaudit.store.atomic import fsync_dir, write_temp
    from plaudit.store.perms import file_mode, make_dirs
    from plaudit.store.trust_paths import verifier_state_path

    path = verifier_state_path(backend)
    body = msgspec.json.encode(Confirmed(backend.identity()[1], ck.to_text(), now_ms()))
    try:
        make_dirs(path.parent)
        tmp = write_temp(path.parent, path.name, body, file_mode())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        return f"verifier state {path} not written ({exc.strerror or exc}): next verify is full"
    return None
