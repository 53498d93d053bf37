"""Where a store's trust lives: outside the database, where its writer cannot change it.

* The **signing key** of a store, by default in the user's config directory
  (`$XDG_CONFIG_HOME/plaudit/keys/`, else `~/.config/plaudit/keys/`), one file per store,
  0600; or wherever `$PLAUDIT_SIGNING_KEY` or `Plaudit.open(signing_key=)` says.
* The **verifier's state**, the newest checkpoint a verify confirmed, in the user's state
  directory (`$XDG_STATE_HOME/plaudit/verified/`, else `~/.local/state/plaudit/verified/`),
  one file per store, 0600. The default `plaudit log verify` starts from it.

A store is named by where it is: a SQLite file's real path, or a PostgreSQL server, database
and schema. Each file's name is a readable label and 16 hex digits of a hash of that identity,
so two stores never share one and the same store always finds its own.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plaudit.store.backend import Backend

_LABEL_RE = re.compile(r"[^A-Za-z0-9._-]+")


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "plaudit"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "plaudit"


def _name(backend: Backend, suffix: str) -> str:
    label, identity = backend.identity()
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"{_LABEL_RE.sub('_', label)[:48]}-{digest}{suffix}"


def default_key_path(backend: Backend) -> Path:
    """Where this store's signing key lives unless one is configured."""
    return config_dir() / "keys" / _name(backend, ".key")


def legacy_key_path(backend: Backend) -> Path | None:
    """Where plaudit before trust outside the database kept a SQLite store's key: beside the
    database (`<db>.key`). Read, never written."""
    path = backend.file()
    return None if path is None else Path(f"{path}.key")


def verifier_state_path(backend: Backend) -> Path:
    """Where the newest checkpoint a verify confirmed is remembered for this store."""
    return state_dir() / "verified" / _name(backend, ".json")
