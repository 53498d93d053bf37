"""When and how the log signs checkpoints, and where copies of them go.

The sequencer keeps the Merkle tree's compact range in the head row and extends it in the
transaction that gives events their positions. Every `every` events or `seconds` seconds
(whichever comes first) that transaction also signs a checkpoint of the new tree, stores it in
`plaudit_checkpoints`, and, once it has committed, copies it into each witness directory, so a
rewrite of the database alone can no longer go unnoticed (docs/proofs.md).

Settings come from `Plaudit.open(...)` arguments, else the environment:
`$PLAUDIT_CHECKPOINT_EVERY` (events, default 1000; 0 turns automatic checkpoints off),
`$PLAUDIT_CHECKPOINT_SECONDS` (default 60), `$PLAUDIT_WITNESS` (directories, ':'-separated) and
`$PLAUDIT_SIGNING_KEY` (see `plaudit.store.keys`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plaudit.errors import ConfigError, PlauditError

if TYPE_CHECKING:
    # Imported where used: `cryptography` costs a shell hook's emit tens of milliseconds, and
    # only signing and verifying need it.
    from plaudit.store.backend import Backend, Tx
    from plaudit.store.checkpoints import Checkpoint
    from plaudit.store.keys import LogKey
    from plaudit.store.ops import HeadState

_log = logging.getLogger("plaudit.checkpoints")

ENV_EVERY = "PLAUDIT_CHECKPOINT_EVERY"
ENV_SECONDS = "PLAUDIT_CHECKPOINT_SECONDS"
DEFAULT_EVERY = 1000
DEFAULT_SECONDS = 60.0


def _env_number(env: Mapping[str, str], name: str, default: float, kind: type) -> Any:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"${name} must be a number, not {raw!r}") from None
    if value < 0:
        raise ConfigError(f"${name} must not be negative, got {raw!r}")
    return value


class Checkpointer:
    """The checkpoint policy of one open store: its key, its schedule and its witnesses."""

    def __init__(
        self,
        backend: Backend,
        *,
        every: int | None = None,
        seconds: float | None = None,
        witness: Sequence[str | os.PathLike[str]] = (),
        signing_key: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.backend = backend
        self.every = int(
            _env_number(env, ENV_EVERY, DEFAULT_EVERY, int) if every is None else every
        )
        self.seconds = float(
            _env_number(env, ENV_SECONDS, DEFAULT_SECONDS, float) if seconds is None else seconds
        )
        if self.every < 0 or self.seconds < 0:
            raise ConfigError("checkpoint_every and checkpoint_seconds must not be negative")
        self.witnesses: list[Any] = []
        if witness or env.get("PLAUDIT_WITNESS"):  # pathlib & co only when there are any
            from plaudit.store.witness import witness_dirs

            self.witnesses = witness_dirs(witness, env)
        self._configured = signing_key
        self._env = env
        self._key: LogKey | None = None
        self._no_key: str | None = None
        # Per thread: checkpoints signed in the transaction this thread is running, copied to
        # the witnesses only once that transaction has committed.
        self._pending: dict[int, list[Checkpoint]] = {}
        self._lock = threading.Lock()
        self._preparing = False
        self._key_lock = threading.Lock()

    # -- the key --------------------------------------------------------------------------
    @property
    def store_path(self) -> str | None:
        return None if self.backend.dialect == "postgres" else self.backend.url

    def key(self) -> LogKey:
        """The signing key, created next to a SQLite store on first use."""
        from plaudit.store.keys import load_or_create_key

        if self._key is None:
            with self._key_lock:  # `prepare` may be loading it on another thread
                if self._key is None:
                    self._key = load_or_create_key(
                        self.store_path, self._env, configured=self._configured
                    )
        return self._key

    def existing_key(self) -> LogKey | None:
        """The signing key if one exists already: verify reads, it never creates one."""
        from plaudit.store.keys import ENV_SIGNING_KEY, key_path_for, load_signing_key

        if self._key is not None:
            return self._key
        spec = self._configured or self._env.get(ENV_SIGNING_KEY)
        if spec:
            self._key = load_signing_key(spec)
            return self._key
        path = self.store_path
        if path is None or path in ("", ":memory:"):
            return None
        if key_path_for(path).exists():
            self._key = load_signing_key(str(key_path_for(path)))
        return self._key

    def prepare(self) -> None:
        """Load (or create) the signing key now, if automatic checkpoints are on.

        The first signature otherwise pays for importing `cryptography` and reading or making
        the key file inside some append's transaction: 60 to 90 ms on one request of a server
        that had answered every other within 15 ms. A server calls this at start-up; a
        long-lived writer gets it from `maybe_sign`, on a thread of its own, shortly before the
        first checkpoint is due. A store without a key is left as `maybe_sign` would leave it."""
        if (not self.every and not self.seconds) or self._key is not None or self._no_key:
            return
        try:
            key = self.key()
            # The first signature loads the rest of the signing path (the checkpoint module,
            # OpenSSL's Ed25519 code): pay for that here too, on a throw-away message.
            from plaudit.store.checkpoints import sign_checkpoint

            sign_checkpoint(key, 0, bytes(32), 0)
        except ConfigError as exc:
            self._no_key = str(exc)
            _log.warning("automatic checkpoints are off for %s: %s", self.backend.url, exc)
        except PlauditError as exc:  # e.g. an unreadable key file: the signing will say so
            _log.warning("could not load the signing key of %s ahead: %s", self.backend.url, exc)

    def _prepare_ahead(self, head: HeadState, size: int) -> None:
        """Start `prepare` on a thread once the first count-triggered checkpoint is near."""
        if self._key is not None or self._no_key is not None or self._preparing or not self.every:
            return
        if size - head.checkpoint_size < self.every - self.every // 10:
            return
        with self._lock:
            if self._preparing:
                return
            self._preparing = True
        threading.Thread(target=self.prepare, name="plaudit-key", daemon=True).start()

    # -- signing in the sequencing transaction --------------------------------------------
    def due(self, head: HeadState, size: int, now_ms: int) -> bool:
        if size <= head.checkpoint_size:
            return False
        if self.every and size - head.checkpoint_size >= self.every:
            return True
        return bool(self.seconds) and now_ms - head.checkpoint_ms >= self.seconds * 1000

    def maybe_sign(
        self, tx: Tx, head: HeadState, size: int, root: bytes, now_ms: int
    ) -> tuple[int, int] | None:
        """Sign a checkpoint when one is due; returns the head's new (checkpoint size, time),
        or None. A store without a key just goes without."""
        if not self.every and not self.seconds:
            return None
        if not self.due(head, size, now_ms):
            self._prepare_ahead(head, size)
            return None
        if self._no_key is not None:
            return None
        try:
            key = self.key()
        except ConfigError as exc:
            self._no_key = str(exc)
            _log.warning("automatic checkpoints are off for %s: %s", self.backend.url, exc)
            return None
        self.sign(tx, key, size, root, now_ms)
        return size, now_ms

    def sign(self, tx: Tx, key: LogKey, size: int, root: bytes, now_ms: int) -> Checkpoint:
        """Store a checkpoint of the tree of `size` leaves in this transaction; it reaches the
        witnesses once the transaction has committed (`flush`)."""
        from plaudit.store.checkpoints import sign_checkpoint

        ck = sign_checkpoint(key, size, root, now_ms)
        tx.execute(
            "INSERT INTO plaudit_checkpoints (size, root, time_ms, note) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (size) DO NOTHING",
            (size, tx.blob(root), now_ms, ck.to_text()),
        )
        tx.execute(
            "UPDATE plaudit_head SET checkpoint_size = ?, checkpoint_ms = ? WHERE one = 1",
            (size, now_ms),
        )
        with self._lock:
            self._pending.setdefault(threading.get_ident(), []).append(ck)
        return ck

    def discard(self) -> None:
        """This thread's transaction did not commit: its checkpoints never existed."""
        with self._lock:
            self._pending.pop(threading.get_ident(), None)

    def flush(self, *, flushed: bool = True) -> list[str]:
        """Copy committed checkpoints to every witness; returns the problems (logged too).

        Only a prefix of the log that is on disk is published: after a commit that did not
        wait for the disk (`flushed=False`), the backend makes it durable first, so a power
        cut can never leave a witness holding a checkpoint the log lost
        (`tests/test_trust.py::test_a_power_cut_never_leaves_a_witness_ahead`). A witness
        that cannot be written does not undo the append that triggered it: the events are
        committed. `plaudit log verify` reports a missing or forked witness."""
        with self._lock:
            pending = self._pending.pop(threading.get_ident(), [])
        if not pending:
            return []
        if not flushed:
            self.backend.make_durable()
        from plaudit.store.witness import write_witness

        problems: list[str] = []
        for ck in pending:
            for d in self.witnesses:
                try:
                    write_witness(d, ck)
                except (PlauditError, OSError) as exc:
                    msg = f"witness {d}: checkpoint of size {ck.size} not written: {exc}"
                    _log.warning(msg)
                    problems.append(msg)
        return problems


def stored_checkpoints(tx: Tx, *, after: int = 0, upto: int | None = None) -> list[Checkpoint]:
    """Checkpoints stored in the database with after < size <= upto, oldest first; a row whose
    note does not parse is reported by verify, not here."""
    from plaudit.store.checkpoints import parse_checkpoint

    sql = "SELECT note FROM plaudit_checkpoints WHERE size > ?"
    params: list[Any] = [after]
    if upto is not None:
        sql += " AND size <= ?"
        params.append(upto)
    out: list[Checkpoint] = []
    for (note,) in tx.fetchall(sql + " ORDER BY size", params):
        try:
            out.append(parse_checkpoint(note, where="plaudit_checkpoints"))
        except PlauditError:
            continue
    return out


__all__ = ["Checkpointer", "stored_checkpoints"]
