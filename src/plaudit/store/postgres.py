"""PostgreSQL backend (psycopg 3) so many agent hosts can share one log.

The write lock (the sequencer lease) is a transaction-level advisory lock scoped to the schema
in use, taken by a transaction's first statement. Appends that find it taken go to the intake
table instead, whose commits need no lock and run concurrently; whoever holds the lease next
sequences them (`plaudit.store.postgres_sequencer`). The head row is still read `FOR UPDATE`
under the lease, which keeps a process of an older plaudit, that knows only that lock, in line.

Every session names its process (`application_name = plaudit <pid>@<host>`), so a waiter that
reaches its deadline can name the holder; a sequencing transaction sets its own lock and idle
timeouts (`PostgresOps.set_deadlines`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from plaudit.errors import (
    BackendUnavailableError,
    ConfigError,
    IntegrityError,
    StoreNotFoundError,
    ValidationError,
)
from plaudit.store import deadlines
from plaudit.store.backend import DIALECT_WORDS, Backend, Tx, upsert_clause
from plaudit.store.ops import HeadState
from plaudit.store.postgres_ops import EVENTS_UNNEST, LEASE_KEY, PUMP_KEY, PostgresOps, as_columns
from plaudit.store.schema import EVENT_COLUMNS

if TYPE_CHECKING:
    from plaudit.store.sequencer import Sequencer
    from plaudit.store.sequencing import Sequencing

#: Intake rows a pass took with the lease, and which of their ids the log already holds.
Taken = tuple[list[tuple[Any, ...]], dict[str, tuple[bytes, int]]]


class HeadMoved(Exception):
    """A transaction that went ahead on the head this process last wrote found it had moved
    (or intake pending, an id held): it was rolled back, nothing written. The sequencer then
    reads the head and writes as usual."""


class Lease(NamedTuple):
    """A sequencing transaction: the lease held, the head read under it, the intake taken,
    and which of the ids asked for the log holds (None: not asked)."""

    tx: PostgresTx
    head: HeadState
    taken: Taken
    held: dict[str, tuple[bytes, int]] | None = None


_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Up to this many rows go in one multi-row INSERT rather than a COPY.
SMALL_INSERT = 64
#: Parameters per multi-row INSERT where COPY cannot be used (the protocol allows 65,535).
PIPELINE_INSERT_PARAMS = 20_000
LEASE_SQL = f"SELECT 1 FROM (SELECT pg_advisory_xact_lock({LEASE_KEY})) lease"


def _columns(alias: str, names: Sequence[str]) -> str:
    return ", ".join(f"{alias}.{n}" for n in names)


@lru_cache(maxsize=64)
def _upsert_unnest(
    table: str, columns: tuple[str, ...], types: tuple[str, ...], key: tuple[str, ...], update: bool
) -> str:
    words = DIALECT_WORDS["postgres"]
    arrays = ", ".join(f"%b::{t.format(**words)}[]" for t in types)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays})"
        + upsert_clause(columns, key, update)
    )


@lru_cache(maxsize=1024)
def _translate(sql: str) -> str:
    # `?` placeholders become psycopg's `%s`; a literal % must be doubled.
    return sql.replace("%", "%%").replace("?", "%s")


@contextmanager
def _translated() -> Iterator[None]:
    """PostgreSQL's data exceptions (class 22: a NUL byte in text, a number out of range) are
    caused by the input: they become a `ValidationError`, so no surface needs the driver."""
    import psycopg

    try:
        yield
    except psycopg.errors.DivisionByZero:
        raise  # `PostgresOps.expect_head`'s refusal (or `ABORT`), not the input's fault
    except psycopg.DataError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValidationError("value", f"the database cannot store it: {first}") from None


class PostgresTx(Tx):
    dialect = "postgres"
    multi_row_statements = False
    writes_with = True

    def __init__(self, conn: Any) -> None:
        import psycopg.errors

        self.conn = conn
        self.cur = conn.cursor()
        self.unique_violation = (psycopg.errors.UniqueViolation,)
        #: Inside a sequencing transaction sent in pipeline mode (see `PostgresBackend.lease`):
        #: statements whose results nobody reads travel with the next one that is read.
        self.pipelined = False
        self.pipeline: Any = None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cur = self.conn.cursor()
        with _translated():
            cur.execute(_translate(sql), params or None)
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            with _translated():
                self.cur.executemany(_translate(sql), rows)

    def iterate(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 5000
    ) -> Iterator[tuple[Any, ...]]:
        if self.pipelined:  # no server-side cursors in pipeline mode
            yield from super().iterate(sql, params, size=size)
            return
        # A server-side cursor keeps memory flat for full-log scans.
        with self.conn.cursor(name=f"plaudit_iter_{id(self)}") as cur:
            cur.itersize = size
            cur.execute(_translate(sql), params or None)
            yield from cur

    def chunks(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 4096
    ) -> Iterator[list[tuple[Any, ...]]]:
        if self.pipelined:
            yield from super().chunks(sql, params, size=size)
            return
        with self.conn.cursor(name=f"plaudit_chunks_{id(self)}") as cur:
            cur.execute(_translate(sql), params or None)
            while True:
                rows = cur.fetchmany(size)
                if not rows:
                    return
                yield rows

    def table_exists(self, name: str) -> bool:
        return self.scalar("SELECT to_regclass(?) IS NOT NULL", (name,)) is True

    def json_field(self, column: str, name: str, cast: Literal["int", "text"] = "int") -> str:
        # ::json (not ::jsonb) parses without building the binary form: twice as fast here.
        return f"({column}::json->>'{name}')::{'bigint' if cast == 'int' else 'text'}"

    def cursor(self) -> Any:
        return self.conn.cursor()

    def sync(self) -> None:
        if self.pipelined and self.pipeline is not None:
            with _translated():
                self.pipeline.sync()

    def upsert(
        self,
        table: str,
        columns: Sequence[str],
        types: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        key: Sequence[str],
        update: bool = True,
    ) -> None:
        """One statement whatever the number of rows: the rows travel as one typed array per
        column and are unnested server-side. Its text never changes, so it is prepared once,
        where `executemany` of a one-row statement costs the server a bind and an execute per
        row (most of a bandit checkpoint's time)."""
        if not rows:
            return
        with _translated():
            self.cur.execute(
                _upsert_unnest(table, tuple(columns), tuple(types), tuple(key), update),
                as_columns(rows),
            )

    def copy_rows(self, table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        """COPY for bulk; a multi-row INSERT for a few rows (one round trip, not two)."""
        with _translated():
            if (
                table == "plaudit_events"
                and tuple(columns) == EVENT_COLUMNS
                and (len(rows) <= SMALL_INSERT or self.pipelined)
            ):
                self.cur.execute(EVENTS_UNNEST, as_columns(rows))
                return
            if len(rows) <= SMALL_INSERT or self.pipelined:  # no COPY in pipeline mode
                one = "(" + ",".join(["%s"] * len(columns)) + ")"
                step = max(1, PIPELINE_INSERT_PARAMS // len(columns))
                for i in range(0, len(rows), step):
                    part = rows[i : i + step]
                    values = ",".join([one] * len(part))
                    sql = f"INSERT INTO {table} ({','.join(columns)}) VALUES {values}"
                    self.cur.execute(sql, [v for row in part for v in row])
                return
            with self.cur.copy(f"COPY {table} ({','.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    def columns(self, table: str) -> set[str]:
        return {
            r[0]
            for r in self.fetchall(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = ?",
                (table,),
            )
        }


class _OneStatementTx(PostgresTx):
    """A read of one statement on an autocommit connection (`read_statement`): the
    statement is its own snapshot, so a second one would see another and is refused."""

    used = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self.used:
            raise RuntimeError("read_statement() allows one statement: use read() for more")
        self.used = True
        return super().execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        raise RuntimeError("read_statement() is for reading")


class PostgresBackend(Backend):
    dialect = "postgres"
    ops: PostgresOps

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        create: bool = True,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(deadline_s)
        #: False: open only an existing store; never create a schema or a table.
        self.create = create
        if schema is not None and not _SCHEMA_RE.match(schema):
            raise ConfigError(f"schema {schema!r} must match {_SCHEMA_RE.pattern}")
        self.dsn = dsn
        self.schema = schema
        self.url = dsn if schema is None else f"{dsn} (schema {schema})"
        self.ops = PostgresOps()
        self._channel: str | None = None
        #: The pump's own connection (see `claim_pump`).
        self._pump_conn: Any = None
        #: This process's turn at the lease: its threads (request handlers, the pump, the
        #: bandit's checkpoints) take it one after another here, so a try for the lease
        #: fails only when another process holds it, never because a thread of this one
        #: does (which sent the try the long way, through the intake and a pass).
        self._turn = threading.RLock()

    def _connect(self) -> Any:
        import psycopg
        import psycopg.errors

        try:
            conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=max(2, int(self.deadline_s + 0.999)),
                # Whoever waits for this session's locks can name its process.
                application_name=f"plaudit {os.getpid()}@{deadlines.host()}"[:63],
            )
        except psycopg.OperationalError as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendUnavailableError(f"cannot connect to PostgreSQL: {msg}") from None
        if self.schema and self.create:
            # Concurrent first connections race on CREATE SCHEMA IF NOT EXISTS (PostgreSQL
            # checks, then inserts); the loser's error just means the schema now exists.
            with suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        if self.schema:
            conn.execute(f'SET search_path TO "{self.schema}"')
        # Every lock wait of this session ends at the deadline (the lease's holder is named).
        conn.execute(f"SET lock_timeout = {int(self.deadline_s * 1000)}")
        if not self.create:
            self._require_store(conn)
        # Transactions are explicit (BEGIN/COMMIT below), never psycopg's implicit ones.
        return conn

    def _idle(self, conn: Any) -> bool:
        from psycopg.pq import TransactionStatus

        return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE

    def _require_store(self, conn: Any) -> None:
        from plaudit.config import describe_store, redact_dsn

        schema, tables = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = current_schema()), "
            "to_regclass('plaudit_events') IS NOT NULL"
        ).fetchone()
        if tables:
            return
        conn.close()
        shown = redact_dsn(self.dsn)
        where = describe_store(self)
        why = "no such schema" if self.schema and not schema else "no plaudit tables there"
        dsn = (
            shown
            if self.schema is None
            else f"{shown}{'&' if '?' in shown else '?'}schema={self.schema}"
        )
        raise StoreNotFoundError.at(where, why=why, db=dsn)

    def identity(self) -> tuple[str, str]:
        from urllib.parse import urlsplit

        parts = urlsplit(self.dsn)
        schema = self.schema or "public"
        where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"
        label = f"{parts.path.strip('/') or 'postgres'}.{schema}"
        return label, f"postgres:{where}?schema={schema}"

    def sequencer(self, core: Sequencing) -> Sequencer:
        from plaudit.store.postgres_sequencer import PostgresSequencer

        return PostgresSequencer(self, core)

    @contextmanager
    def _local_turn(self, *, wait: bool) -> Iterator[bool]:
        """This process's turn at the lease (see `_turn`): False when another thread kept it
        past the deadline and `wait` is False; with `wait`, `DeadlineError` instead."""
        if not self._turn.acquire(timeout=self.deadline_s):
            if not wait:
                yield False
                return
            raise deadlines.waited(
                f"the sequencer lease of {self.describe()}",
                self.deadline_s,
                f"another thread of this process (pid {os.getpid()})",
                "a writer() block holds it: do slow work outside the block",
            )
        try:
            yield True
        finally:
            self._turn.release()

    @contextmanager
    def write(self, *, flush: bool = True) -> Iterator[PostgresTx]:
        """A plain transaction under the lease (no head read: schema set-up runs here too).
        Every commit is flushed (`flush` is SQLite's)."""
        with self._local_turn(wait=True), self._write() as tx:
            yield tx

    @contextmanager
    def _write(self) -> Iterator[PostgresTx]:
        import psycopg

        conn = self.connection()
        self._local.in_write = True
        idle = max(100, int(self.deadline_s * 500))
        try:
            try:  # one round trip: BEGIN, the deadlines and the lease in one simple query
                conn.execute(
                    f"BEGIN; SET LOCAL idle_in_transaction_session_timeout = {idle}; {LEASE_SQL}"
                )
            except psycopg.errors.LockNotAvailable:
                self._end(conn, "ROLLBACK")
                self._local.in_write = False
                raise self._lease_deadline() from None
            tx = self._local.write_tx = PostgresTx(conn)
            yield tx
        except BaseException as exc:
            self._end(conn, "ROLLBACK")
            if isinstance(exc, _session_ended()):
                self._replace(conn)
                raise _lost(exc) from None
            raise
        else:
            try:
                conn.execute("COMMIT")
            except _session_ended() as exc:
                self._replace(conn)
                raise _lost(exc) from None
        finally:
            self._local.in_write = False

    @contextmanager
    def lease(
        self,
        *,
        wait: bool = False,
        take: int | None = None,
        ids: Sequence[str] | None = None,
        expect: HeadState | None = None,
        conn: Any = None,
    ) -> Iterator[Lease | None]:
        """A sequencing transaction holding the lease, with the head row read under it; with
        `wait=False`, None at once when another writer holds it. With `take`, up to that many
        pending intake rows are taken in the same statement (the lease's `taken`); with `ids`,
        which of them the log holds (its `held`). `conn`: a connection of the caller's own
        (the pump's) instead of this thread's.

        With `expect` (the head this process's last write left), nothing is read: the
        transaction goes ahead on that head, and a statement that needs no answer checks it
        under the lease (`PostgresOps.expect_head`); if it was wrong, the transaction is
        rolled back and `HeadMoved` raised, nothing written. Nothing is read before the end,
        so there is no BEGIN or COMMIT either: the statements a pipeline sends before its Sync
        are one transaction, which the Sync commits. One round trip in all.

        Otherwise sent in pipeline mode too: BEGIN, the lease and the head travel in one round
        trip, and the writes nobody reads (rows, tree, projection states, the relay's
        notification) travel with COMMIT, whose errors are translated as they would be at the
        statement. A lease waited for past the deadline raises `DeadlineError` naming its
        holder; a holder idle for half the deadline loses its session."""
        with self._local_turn(wait=wait) as turn:
            if not turn:
                yield None
                return
            with self._lease(wait, take, ids, expect, conn) as lease:
                yield lease

    @contextmanager
    def _lease(
        self,
        wait: bool,
        take: int | None,
        ids: Sequence[str] | None,
        expect: HeadState | None,
        conn: Any,
    ) -> Iterator[Lease | None]:
        import psycopg

        own = conn is None
        conn = conn if conn is not None else self.connection()
        self._local.in_write = True
        state: dict[str, Any] = {"head": None, "aborted": False}
        try:
            with _translated():
                yield from self._pipelined(conn, state, wait, take, ids, expect)
        except (psycopg.Error, ValidationError) as exc:
            if not (state["aborted"] or isinstance(exc, psycopg.Error)):
                raise  # the caller's own error: the transaction was rolled back
            # The server refused a statement and skipped the rest of the pipeline. psycopg
            # notes a statement as prepared when it sends the request (its fifth use), so a
            # skipped one stays noted and its next use fails: this connection is replaced.
            self._replace(conn, own)
            self._local.in_write = False
            raise self._refusal(exc, state["head"], expect is not None) from None
        except BaseException:
            if expect is not None:
                self._replace(conn, own)  # the abort made the pipeline's transaction roll back
            raise
        finally:
            self._local.in_write = False

    def _pipelined(
        self,
        conn: Any,
        state: dict[str, Any],
        wait: bool,
        take: int | None,
        ids: Sequence[str] | None,
        expect: HeadState | None,
    ) -> Iterator[Lease | None]:
        """The body of `lease`: what it sends, and how it ends (see there)."""
        import psycopg

        failure: BaseException | None = None
        try:
            with conn.pipeline() as pipeline:
                if expect is None:
                    conn.execute("BEGIN")
                tx = self._local.write_tx = PostgresTx(conn)
                tx.pipelined, tx.pipeline = True, pipeline
                try:
                    lease = self._open(tx, wait, take, ids, expect)
                    if lease is None:
                        conn.execute("ROLLBACK")
                        yield None
                        return
                    state["head"] = lease.head
                    yield lease
                    if expect is None:
                        conn.execute("COMMIT")
                except BaseException as exc:
                    failure = exc
                    state["aborted"] = isinstance(exc, psycopg.Error)
                    # Undo what was sent: the Sync that leaving the pipeline sends would commit
                    # an implicit transaction, so make it fail first.
                    with suppress(Exception):
                        conn.execute(self.ops.ABORT if expect is not None else "ROLLBACK")
        except psycopg.Error as exc:  # leaving the pipeline read a refusal
            state["aborted"] = True
            failure = failure or exc
        if failure is not None:
            raise failure

    def _open(
        self,
        tx: PostgresTx,
        wait: bool,
        take: int | None,
        ids: Sequence[str] | None,
        expect: HeadState | None,
    ) -> Lease | None:
        """The lease's first statement, and what it read."""
        if expect is not None:
            self.ops.expect_head(tx, expect, ids or (), self.deadline_s)
            return Lease(tx, expect._replace(pending=False), ([], {}), {})
        if take is not None:
            self.ops.set_deadlines(tx, self.deadline_s)
            got = self.ops.take_if_leased(tx, take)
            return None if got is None else Lease(tx, got[0], (got[1], got[2]))
        opened = self.ops.head_with_lease(tx, self.deadline_s, ids, wait=wait)
        return None if opened is None else Lease(tx, opened[0], ([], {}), opened[1])

    def _refusal(self, exc: BaseException, head: HeadState | None, guessed: bool) -> Exception:
        """What a refused sequencing transaction means, for its caller."""
        import psycopg

        if guessed and isinstance(
            exc, psycopg.errors.DivisionByZero | psycopg.errors.PipelineAborted
        ):
            # The guess was refused (psycopg may report it on a later statement, as the
            # pipeline aborted): the normal write runs next and meets any other cause itself.
            return HeadMoved()
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return self._lease_deadline()
        if isinstance(exc, psycopg.errors.UniqueViolation):
            # Ids were settled under the lease, so it is a position: the head is behind rows
            # added outside plaudit.
            return IntegrityError.position_taken(head.seq if head is not None else 0)
        if isinstance(exc, psycopg.OperationalError):
            return _lost(exc)
        return exc if isinstance(exc, Exception) else RuntimeError(str(exc))

    def _replace(self, conn: Any, own: bool = True) -> None:
        """Drop a connection whose driver state can no longer be trusted."""
        if own:
            self._discard(conn)
        else:
            with suppress(Exception):
                conn.close()

    def _lease_deadline(self) -> Exception:
        try:
            with self.read_statement() as tx:
                who = self.ops.lease_holder(tx)
        except Exception:
            who = "another session"
        return deadlines.waited(
            f"the sequencer lease of {self.describe()}",
            self.deadline_s,
            who,
            "a writer that stops inside its transaction loses the lease within half the "
            "deadline; one that is busy (a long rebuild or import) keeps it: retry when it is "
            "done (a retried append is idempotent)",
        )

    @contextmanager
    def intake(self, *, atomic: bool = False) -> Iterator[PostgresTx]:
        """A connection for the intake's statements, each its own transaction (no lease);
        `atomic`: one transaction for the block, rolled back if it raises."""
        conn = self.connection()
        if not atomic:
            yield PostgresTx(conn)
            return
        with _translated(), conn.transaction():
            yield PostgresTx(conn)

    def channel(self) -> str:
        """The notification channel of this store (channels are per database, so the schema
        is part of the name)."""
        if self._channel is None:
            import hashlib

            schema = self.schema or str(
                self.connection().execute("SELECT current_schema()").fetchone()[0]
            )
            self._channel = "plaudit_" + hashlib.sha256(schema.encode()).hexdigest()[:24]
        return self._channel

    def listener(self) -> Any:
        """A connection of its own for LISTEN (it blocks in its thread)."""
        return self._connect()

    def claim_pump(self) -> Any | None:
        """The pump's lock, on a connection of its own (kept between claims) that the server
        ends after half the deadline idle: a stopped pump process lets another take over.
        None: another process holds it."""
        conn = self._pump_conn
        for _ in range(2):
            if conn is None or conn.closed:
                try:
                    conn = self._pump_conn = self._connect()
                    conn.execute(
                        "SELECT set_config('idle_session_timeout', %s, false)",
                        (f"{max(100, int(self.deadline_s * 500))}ms",),
                    )
                except Exception:
                    self._pump_conn = None
                    return None
            try:
                got = conn.execute(f"SELECT pg_try_advisory_lock({PUMP_KEY})").fetchone()[0]
                return conn if got else None
            except Exception:  # the server ended the idle connection: one more, fresh
                with suppress(Exception):
                    conn.close()
                conn = self._pump_conn = None
        return None

    def release_pump(self, conn: Any) -> None:
        """Let go of the pump's lock; the connection stays for the next claim."""
        try:
            conn.execute(f"SELECT pg_advisory_unlock({PUMP_KEY})")
        except Exception:
            with suppress(Exception):
                conn.close()  # a broken connection lets go of its locks as it closes

    def in_write(self) -> bool:
        return bool(getattr(self._local, "in_write", False))

    @staticmethod
    def _end(conn: Any, word: str) -> None:
        with suppress(Exception):
            conn.execute(word)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        if getattr(self._local, "in_write", False):  # nested inside a write: reuse its view
            yield self._local.write_tx
            return
        conn = self.connection()
        with self._read_on(conn) as tx:
            yield tx

    @contextmanager
    def read_statement(self) -> Iterator[Tx]:
        if getattr(self._local, "in_write", False):  # nested inside a write: reuse its view
            yield self._local.write_tx
            return
        conn = self.connection()
        yield _OneStatementTx(conn)

    @contextmanager
    def _read_on(self, conn: Any) -> Iterator[PostgresTx]:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield PostgresTx(conn)
        finally:
            self._end(conn, "ROLLBACK")

    def close(self) -> None:
        super().close()
        if self._pump_conn is not None:
            with suppress(Exception):
                self._pump_conn.close()
            self._pump_conn = None

    def drop_schema(self) -> None:
        """Remove the whole schema; used by tests and `plaudit` tooling to clean up."""
        if not self.schema:
            raise ConfigError("drop_schema needs an explicit schema")
        self.connection().execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _session_ended() -> tuple[type[BaseException], ...]:
    import psycopg

    return (psycopg.OperationalError, psycopg.errors.IdleInTransactionSessionTimeout)


def _lost(exc: BaseException) -> BackendUnavailableError:
    """A write whose session the server ended (or whose connection broke) mid-transaction."""
    import psycopg

    if isinstance(exc, psycopg.errors.IdleInTransactionSessionTimeout):
        return BackendUnavailableError(
            "this process stayed idle inside its write transaction for longer than half the "
            "store's deadline (stopped, or busy elsewhere), so the server ended its session "
            "and gave the lease to others: nothing of the transaction was committed; retry it"
        )
    return BackendUnavailableError(
        f"the connection to PostgreSQL failed during a write: {_first_line(exc)} "
        "(nothing of it was acknowledged; a retry is safe)"
    )
