"""`Plaudit`: one handle on a store, with the log and the three jobs built on it."""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

from plaudit.config import make_backend
from plaudit.store.backend import Backend
from plaudit.store.log import EventLog

if TYPE_CHECKING:
    from plaudit.bandit import Bandit
    from plaudit.ledger import Ledger
    from plaudit.signals import Signals


class Plaudit:
    """Open with :meth:`open`; close with :meth:`close` or use it as a context manager."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.log = EventLog(backend)
        # Every handle, however its backend was made, applies the built-in projections.
        from plaudit import builtins  # noqa: F401 - registers them (by import string: cheap)

        self.log.init()

    @classmethod
    def open(
        cls,
        db: str | os.PathLike[str] | None = None,
        *,
        schema: str | None = None,
        durability: str = "full",
    ) -> Plaudit:
        """Open a SQLite path or a `postgresql://` DSN (default: $PLAUDIT_DB, else
        ./.plaudit/plaudit.db). `durability="normal"` trades power-loss safety for speed on
        SQLite; a killed process still loses nothing that was acknowledged."""
        return cls(make_backend(db, schema=schema, durability=durability))

    @property
    def dialect(self) -> str:
        return self.backend.dialect

    @cached_property
    def bandit(self) -> Bandit:
        from plaudit.bandit import Bandit

        return Bandit(self)

    @cached_property
    def signals(self) -> Signals:
        from plaudit.signals import Signals

        return Signals(self)

    @cached_property
    def ledger(self) -> Ledger:
        from plaudit.ledger import Ledger

        return Ledger(self)

    def rebuild(self) -> dict[str, int]:
        """Drop every projection and rebuild it from the log."""
        return self.log.rebuild()

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Plaudit:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Plaudit {self.backend.describe()}>"
