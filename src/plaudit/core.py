"""`Plaudit`: one handle on a store, with the log and the three jobs built on it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from plaudit.config import make_backend
from plaudit.store.backend import Backend
from plaudit.store.checkpointing import Checkpointer
from plaudit.store.log import EventLog

if TYPE_CHECKING:
    from plaudit.bandit import Bandit
    from plaudit.ledger import Ledger
    from plaudit.signals import Signals


class Plaudit:
    """Open with :meth:`open`; close with :meth:`close` or use it as a context manager."""

    def __init__(self, backend: Backend, checkpointer: Checkpointer | None = None) -> None:
        if not isinstance(backend, Backend):
            # `Plaudit("x.db")` is the natural first guess; without this it fails deep inside
            # the log with an AttributeError about `dialect`.
            raise TypeError(
                f"Plaudit() takes a store backend, not {type(backend).__name__}: open a path "
                f"or a postgresql:// DSN with Plaudit.open({backend!r})"
            )
        self.backend = backend
        self.log = EventLog(backend, checkpointer)
        # Every handle, however its backend was made, applies the built-in projections.
        from plaudit import builtins  # noqa: F401 - registers them (by import string: cheap)

        #: True when this handle made a new store: surfaces say so, so a typo is visible.
        self.created = False
        if getattr(backend, "create", True):
            with backend.read() as tx:
                self.created = not tx.table_exists("plaudit_events")
        # (A backend opened with create=False refuses a missing store on its first connection.)
        self.log.init()

    @classmethod
    def open(
        cls,
        db: str | os.PathLike[str] | None = None,
        *,
        schema: str | None = None,
        durability: str = "full",
        create: bool = True,
        witness: Sequence[str | os.PathLike[str]] = (),
        checkpoint_every: int | None = None,
        checkpoint_seconds: float | None = None,
        signing_key: str | None = None,
        deadline_s: float | None = None,
    ) -> Plaudit:
        """Open a SQLite path or a `postgresql://` DSN (default: $PLAUDIT_DB, else
        ./.plaudit/plaudit.db). `durability="normal"` trades power-loss safety for speed on
        SQLite; a killed process still loses nothing that was acknowledged.

        `create=False` is for readers: a store that does not exist raises
        `StoreNotFoundError` instead of being made empty (a mistyped path would otherwise
        "verify" a log of 0 events). With `create=True`, `created` tells whether it was new.

        Checkpoints (docs/proofs.md) are signed every `checkpoint_every` events or
        `checkpoint_seconds` seconds (defaults: $PLAUDIT_CHECKPOINT_EVERY, else 1000;
        $PLAUDIT_CHECKPOINT_SECONDS, else 60), with `signing_key` (a path or PEM; default:
        $PLAUDIT_SIGNING_KEY, else `<db>.key` beside a SQLite store), and copied into every
        `witness` directory and those in $PLAUDIT_WITNESS.

        `deadline_s` (default: $PLAUDIT_DEADLINE_S, else 5) bounds every wait of this store: a
        lock, the lease, a host leader or a sequencing pass that does not answer within it
        gives a result by another route or a `DeadlineError` naming the holder."""
        backend = make_backend(
            db, schema=schema, durability=durability, create=create, deadline_s=deadline_s
        )
        try:
            checkpointer = Checkpointer(
                backend,
                every=checkpoint_every,
                seconds=checkpoint_seconds,
                witness=witness,
                signing_key=signing_key,
            )
        except BaseException:
            backend.close()
            raise
        return cls(backend, checkpointer)

    @property
    def dialect(self) -> str:
        return self.backend.dialect

    def warm(self) -> list[str]:
        """Load the caches of the jobs this store is used for (today the bandit's), so a
        long-lived process (a server) pays for them before its first request; returns the
        jobs warmed. A job the store has never been used for is left alone: warming it
        would create its tables."""
        with self.log.reading() as view:
            used = view.projection_positions()
        warmed = []
        if "bandit" in used:
            self.bandit.warm()
            warmed.append("bandit")
        return warmed

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
