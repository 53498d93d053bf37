"""PostgreSQL backend (psycopg 3) so many agent hosts can share one log.

The write lock (the sequencer lease) is a transaction-level advisory lock scoped to the schema
in use, taken by a transaction's first statement. Appends that find it taken go to the intake
table instead, whose commits need no lock and run concurrently; the lease holder sequences them
(see docs/log.md). The head row is still read `FOR UPDATE` under the lease, which keeps a
process of an older plaudit, that knows only that lock, in line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from plaudit.errors import (
    BackendUnavailableError,
    ConfigError,
    IntegrityError,
    StoreNotFoundError,
    ValidationError,
)
from plaudit.store.backend import (
    DIALECT_WORDS,
    MARK_COLUMNS,
    MARK_TYPES,
    Backend,
    HeadMoved,
    Tx,
    _head_state,
    upsert_clause,
)
from plaudit.store.schema import EVENT_COLUMNS, INTAKE_COLUMNS

if TYPE_CHECKING:
    from plaudit.store.checkpointing import HeadState

#: Which taken intake ids the log already holds, probed by index one row at a time: a plain
#: join was planned as a scan of the whole log whenever the intake's statistics were stale.
_KNOWN_JOIN = (
    "LEFT JOIN LATERAL (SELECT content_digest, seq FROM plaudit_events WHERE id = t.id "
    "OFFSET 0) e ON true"  # OFFSET 0: kept a per-row probe, never flattened into a join
)
#: The oldest pending append calls, whole: `= ANY(ARRAY(...))` is looked up in the batch
#: index, where `IN (subquery)` was planned as a scan of the intake, dead rows included.
#: Whether any intake is pending, found in the primary key: `EXISTS (SELECT 1 FROM ...)` read
#: the table's heap from the start, through every row that passes had deleted since vacuum.
_INTAKE_PENDING = "((SELECT n FROM plaudit_intake ORDER BY n LIMIT 1) IS NOT NULL)"
#: The head as the statement's snapshot saw it. A statement that takes the lease reads the head
#: row FOR UPDATE, which returns its latest version, but its other reads (which ids the log
#: holds) use the snapshot taken when the statement began, before the lease: a sequencer that
#: committed in between is missing from them. Every sequencing commit moves the head, so a
#: snapshot head equal to the locked one means nothing was missed; otherwise those reads are
#: repeated under the lease (`_known_now`).
_SNAPSHOT_HEAD = "(SELECT seq FROM plaudit_head WHERE one = 1)"
_TAKE_BATCHES = "batch = ANY(ARRAY(SELECT batch FROM plaudit_intake ORDER BY n LIMIT %s))"
#: The log's row `e` (id, content_digest, seq) holding the id of row `i`, probed in the id
#: index (OFFSET 0: a probe per id, never planned as a join). `id = ANY(...)` or a plain join
#: let the plan that psycopg prepares at a statement's fifth use be a scan of the whole log:
#: planned while the log was new and never analysed, it stayed a scan as the log grew, so every
#: append of a fresh store read every event before it until autovacuum analysed the table
#: (`tests/test_log_expected_head.py::test_appends_never_scan_the_log`).
_EVENT_OF_I = "(SELECT id, content_digest, seq FROM plaudit_events WHERE id = i.id OFFSET 0) e"
#: The log's rows holding the ids of text-array parameter `%s`.
_HELD = f"unnest(%s::text[]) AS i(id) CROSS JOIN LATERAL {_EVENT_OF_I}"
#: For each row `i` of a FROM list, the log's row `e` holding its id (NULLs when none does).
_PROBE_EVENTS = f"LEFT JOIN LATERAL {_EVENT_OF_I} ON true"
#: Which of the ids in parameter `%s` the log holds, as one array of (id, hex digest, seq),
#: read in the statement that takes the lease (see `_known`).
_KNOWN_IDS = (
    f"(SELECT array_agg(ARRAY[e.id, encode(e.content_digest, 'hex'), e.seq::text]) FROM {_HELD})"
)
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Up to this many rows go in one multi-row INSERT rather than a COPY.
SMALL_INSERT = 64
#: Parameters per multi-row INSERT where COPY cannot be used (the protocol allows 65,535).
PIPELINE_INSERT_PARAMS = 20_000

#: Each stored column's PostgreSQL type, for statements that cast parameters.
_COLUMN_TYPES = {
    **dict.fromkeys(("seq", "ts_ms"), "bigint"),
    **dict.fromkeys(("id", "type", "session_id", "source", "payload", "meta", "batch"), "text"),
    **dict.fromkeys(("content_digest", "hash"), "bytea"),
    "strict": "boolean",
}
#: The rows `intake_put` takes in, in INTAKE_COLUMNS order: one row, or columns as arrays.
_INTAKE_TYPES = tuple(_COLUMN_TYPES[c] for c in INTAKE_COLUMNS)
_INTAKE_ONE = "VALUES (" + ", ".join(f"%s::{t}" for t in _INTAKE_TYPES) + ")"
#: Event rows as column arrays (EVENT_COLUMNS order): the statement's text is the same for
#: any number of rows, so the driver parses it once, where a multi-row VALUES list is parsed
#: anew per row count (most of a small sequencing pass's driver time).
_EVENT_TYPES = tuple(_COLUMN_TYPES[c] for c in EVENT_COLUMNS)
_EVENTS_UNNEST = (
    f"INSERT INTO plaudit_events ({','.join(EVENT_COLUMNS)}) "
    "SELECT * FROM unnest(" + ", ".join(f"%b::{t}[]" for t in _EVENT_TYPES) + ")"
)
_INTAKE_MANY = "SELECT * FROM unnest(" + ", ".join(f"%s::{t}[]" for t in _INTAKE_TYPES) + ")"

#: Joined into a lone intake statement (its own transaction) to commit it without waiting for
#: the WAL flush; see `PostgresBackend.intake`.
_RELAXED_JOIN = " CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed"

#: The sequencer lease: one advisory lock per schema, released when its transaction ends.
_LEASE_KEY = "hashtext('plaudit.sequencer'), hashtext(current_schema())"
LEASE_SQL = f"SELECT 1 FROM (SELECT pg_advisory_xact_lock({_LEASE_KEY})) lease"
TRY_LEASE_SQL = f"SELECT pg_try_advisory_xact_lock({_LEASE_KEY})"
#: The lease, if the head is still exactly the one this process wrote last, no intake is
#: pending and none of the ids in `%s` is in the log; otherwise it divides by zero, which aborts
#: the transaction (no statement of plaudit's divides otherwise). It needs no answer, so a
#: group's whole transaction goes in one round trip (`try_sequence`).
_EXPECT_HEAD = (
    "SELECT 1 / COALESCE((SELECT CASE WHEN (h.seq, h.hash, h.tree_size, h.frontier, "
    "h.checkpoint_size, h.checkpoint_ms) IS NOT DISTINCT FROM (%s::bigint, %s::bytea, "
    "%s::bigint, %s::bytea, %s::bigint, %s::bigint) "
    f"AND {_SNAPSHOT_HEAD} = h.seq AND NOT {_INTAKE_PENDING} "
    f"AND NOT EXISTS (SELECT 1 FROM {_HELD}) THEN 1 ELSE 0 END "
    f"FROM plaudit_head h WHERE h.one = 1 AND pg_try_advisory_xact_lock({_LEASE_KEY}) "
    "FOR UPDATE OF h), 0)"
)
#: Fails at once (no table): queued after an error of plaudit's own inside a pipeline's
#: implicit transaction, so that its Sync rolls back instead of committing what was sent. Its
#: error is expected and dropped; the caller's exception is the one raised.
_ABORT = "SELECT 1 / 0"
#: The pump's own lock (see plaudit.store.relay): a session lock, so it lasts across passes and
#: dies with its connection.
_PUMP_KEY = "hashtext('plaudit.pump'), hashtext(current_schema())"


def _columns(alias: str, names: Sequence[str]) -> str:
    return ", ".join(f"{alias}.{n}" for n in names)


def _as_columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Rows as one list per column, for an `unnest` of arrays."""
    return [list(col) for col in zip(*rows, strict=True)]


def _known(agg: Sequence[Sequence[str]] | None) -> dict[str, tuple[bytes, int]]:
    """`_KNOWN_IDS`'s answer as id -> (content_digest, seq)."""
    return {i: (bytes.fromhex(d), int(s)) for i, d, s in (agg or [])}


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
        raise  # `_EXPECT_HEAD`'s refusal, not the input's fault
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
        #: Inside a sequencing transaction sent in pipeline mode (see `try_sequence`):
        #: statements whose results nobody reads travel with the next one that is read.
        self.pipelined = False
        self.pipeline: Any = None
        #: Intake commits need not wait for the WAL flush (see `PostgresBackend.intake`).
        self.relaxed = False

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

    # -- the intake table (see plaudit.store.log) -----------------------------------------
    def intake_put(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Take in rows (INTAKE_COLUMNS order) in one statement, except ids already sequenced
        or pending. Returns, per row: (id, sequenced digest, sequenced seq, pending digest,
        inserted). A pending digest of None on a row not inserted means another appender
        committed that id while this statement ran (see `intake_digests`)."""
        if not rows:
            return []
        names = ", ".join(INTAKE_COLUMNS)
        if len(rows) == 1:  # the common case: plain parameters, no arrays to build
            source = _INTAKE_ONE
            params: Sequence[Any] = rows[0]
            # A new id (nearly every call) needs only the insert; what holds the id already
            # is looked up (below) only when the insert did not happen.
            cur = self.conn.cursor()
            cur.execute(
                f"INSERT INTO plaudit_intake ({names}) SELECT {_columns('i', INTAKE_COLUMNS)} "
                f"FROM ({source}) AS i ({names})"
                + (_RELAXED_JOIN if self.relaxed else "")
                + " WHERE NOT EXISTS (SELECT 1 FROM plaudit_events e WHERE e.id = i.id OFFSET 0) "
                "ON CONFLICT (id) DO NOTHING RETURNING id",
                params,
            )
            if cur.fetchone() is not None:
                return [(rows[0][0], None, None, None, True)]
        else:
            source = _INTAKE_MANY
            params = [list(c) for c in zip(*rows, strict=True)]
        cur = self.conn.cursor()
        cur.execute(
            f"WITH input ({names}) AS ({source}), "
            f"held AS (SELECT i.*, e.content_digest AS held_digest, e.seq AS held_seq "
            f"FROM input i {_PROBE_EVENTS}), "
            f"ins AS (INSERT INTO plaudit_intake ({names}) SELECT {names} FROM held "
            "WHERE held_seq IS NULL ON CONFLICT (id) DO NOTHING RETURNING id) "
            "SELECT h.id, h.held_digest, h.held_seq, q.content_digest, "
            "EXISTS (SELECT 1 FROM ins WHERE ins.id = h.id) FROM held h "
            "LEFT JOIN LATERAL (SELECT content_digest FROM plaudit_intake WHERE id = h.id "
            "OFFSET 0) q ON true" + (_RELAXED_JOIN if self.relaxed else ""),
            params,
        )
        return [
            (
                r[0],
                None if r[1] is None else bytes(r[1]),
                r[2],
                None if r[3] is None else bytes(r[3]),
                r[4],
            )
            for r in cur.fetchall()
        ]

    def sequenced(self, ids: list[str]) -> tuple[dict[str, tuple[bytes, int]], set[str]]:
        """(id -> (digest, seq) for sequenced ids, ids still pending in intake): one trip."""
        cur = self.conn.cursor()
        cur.execute(
            "SELECT i.id, e.content_digest, e.seq, "
            "EXISTS (SELECT 1 FROM plaudit_intake q WHERE q.id = i.id OFFSET 0) "
            f"FROM unnest(%s::text[]) AS i(id) {_PROBE_EVENTS}",
            (ids,),
        )
        found: dict[str, tuple[bytes, int]] = {}
        pending: set[str] = set()
        for id_, digest, seq, waiting in cur.fetchall():
            if digest is not None:
                found[id_] = (bytes(digest), int(seq))
            elif waiting:
                pending.add(id_)
        return found, pending

    def notify(self, channel: str, payloads: Sequence[str]) -> None:
        """Publish a sequencing pass's results; delivered only if this transaction commits."""
        if payloads:
            self.conn.cursor().execute(
                "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (channel, list(payloads))
            )

    def intake_digests(self, ids: list[str]) -> dict[str, bytes]:
        cur = self.conn.cursor()
        cur.execute(
            "SELECT q.id, q.content_digest FROM unnest(%s::text[]) AS k(id) CROSS JOIN LATERAL "
            "(SELECT id, content_digest FROM plaudit_intake WHERE id = k.id OFFSET 0) q",
            (ids,),
        )
        return {r[0]: bytes(r[1]) for r in cur.fetchall()}

    def intake_pending(self) -> bool:
        cur = self.conn.cursor()
        cur.execute(f"SELECT {_INTAKE_PENDING}")
        return bool(cur.fetchone()[0])

    def intake_take_known(
        self, limit: int
    ) -> tuple[list[tuple[Any, ...]], dict[str, tuple[bytes, int]]]:
        """`intake_take`, and which of the taken ids the log already holds (id -> (digest,
        seq)), in the same statement."""
        cols = ", ".join(INTAKE_COLUMNS)
        cur = self.conn.cursor()
        cur.execute(
            f"WITH t AS (DELETE FROM plaudit_intake WHERE {_TAKE_BATCHES} "
            f"RETURNING n, {cols}) "
            "SELECT t.*, e.content_digest, e.seq FROM t "
            f"{_KNOWN_JOIN} ORDER BY t.n",
            (limit,),
        )
        rows: list[tuple[Any, ...]] = []
        known: dict[str, tuple[bytes, int]] = {}
        for row in cur.fetchall():
            rows.append(row[:-2])
            if row[-2] is not None:
                known[row[1]] = (bytes(row[-2]), int(row[-1]))
        return rows, known

    #: What `take_if_leased` took, for the caller's first sequencing chunk.
    taken: tuple[list[tuple[Any, ...]], dict[str, tuple[bytes, int]]] | None = None

    def take_if_leased(self, limit: int) -> HeadState | None:
        """The lease, the head row and up to `limit` pending intake rows (with which of their
        ids the log holds), all in one statement: a sequencing pass's whole first half.
        The rows land in `self.taken`."""
        cols = ", ".join(INTAKE_COLUMNS)
        cur = self.conn.cursor()
        cur.execute(
            "WITH h AS (SELECT seq, hash, tree_size, frontier, checkpoint_size, checkpoint_ms "
            f"FROM plaudit_head WHERE one = 1 AND pg_try_advisory_xact_lock({_LEASE_KEY}) "
            "FOR UPDATE), "
            f"t AS (DELETE FROM plaudit_intake WHERE EXISTS (SELECT 1 FROM h) AND {_TAKE_BATCHES} "
            f"RETURNING n, {cols}) "
            f"SELECT {_SNAPSHOT_HEAD}, h.*, t.*, e.content_digest, e.seq FROM h "
            f"LEFT JOIN t ON true {_KNOWN_JOIN} ORDER BY t.n",
            (limit,),
        )
        got = cur.fetchall()
        if not got:
            return None
        rows: list[tuple[Any, ...]] = []
        known: dict[str, tuple[bytes, int]] = {}
        for row in got:
            if row[7] is None:  # the head alone: nothing pending
                continue
            rows.append(row[7:-2])
            if row[-2] is not None:
                known[row[8]] = (bytes(row[-2]), int(row[-1]))
        if rows and got[0][0] != got[0][1]:
            known = self._known_now([r[1] for r in rows])
        self.taken = (rows, known)
        return _head_state(got[0][1:7], False)

    def held(self, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        cur.execute(f"SELECT e.id, e.content_digest, e.seq FROM {_HELD}", (list(ids),))
        return cur.fetchall()

    def _known_now(self, ids: Sequence[str]) -> dict[str, tuple[bytes, int]]:
        """Which of `ids` the log holds, read afresh under the lease: for when a statement's
        snapshot predates the lease it took (see `_SNAPSHOT_HEAD`)."""
        return {r[0]: (bytes(r[1]), int(r[2])) for r in self.held(ids)}

    def _held(self, row: Sequence[Any], ids: Sequence[str]) -> dict[str, tuple[bytes, int]]:
        """Which of `ids` the log holds, from a lease statement's row (`_KNOWN_IDS` at 7, the
        snapshot's head at 8); read again if its snapshot predates the lease it got."""
        return self._known_now(ids) if row[8] != row[0] else _known(row[7])

    def head_with_lease(self, ids: Sequence[str] | None = None) -> HeadState:
        """Wait for the lease and read the head row under it, in one statement; with `ids`,
        also which of them the log holds (`known`)."""
        cur = self.conn.cursor()
        if not ids:
            cur.execute(
                "SELECT h.seq, h.hash, h.tree_size, h.frontier, h.checkpoint_size, "
                f"h.checkpoint_ms, {_INTAKE_PENDING} FROM plaudit_head h WHERE h.one = 1 "
                f"AND EXISTS (SELECT pg_advisory_xact_lock({_LEASE_KEY})) FOR UPDATE OF h"
            )
            row = cur.fetchone()
            return _head_state(row[:6], bool(row[6]))
        cur.execute(
            "SELECT h.seq, h.hash, h.tree_size, h.frontier, h.checkpoint_size, h.checkpoint_ms, "
            f"{_INTAKE_PENDING}, "
            f"{_KNOWN_IDS}, {_SNAPSHOT_HEAD} "
            "FROM plaudit_head h WHERE h.one = 1 "
            f"AND EXISTS (SELECT pg_advisory_xact_lock({_LEASE_KEY})) FOR UPDATE OF h",
            (list(ids),),
        )
        row = cur.fetchone()
        return _head_state(row[:6], bool(row[6]))._replace(known=self._held(row, ids))

    def sync(self) -> None:
        if self.pipelined and self.pipeline is not None:
            with _translated():
                self.pipeline.sync()

    def head_if_leased(self, ids: Sequence[str] | None = None) -> HeadState | None:
        """Try for the lease and read the head row under it in one statement: None (and no
        lock waited for) when another transaction holds the lease."""
        cur = self.conn.cursor()
        cur.execute(
            "SELECT h.seq, h.hash, h.tree_size, h.frontier, h.checkpoint_size, h.checkpoint_ms, "
            f"{_INTAKE_PENDING}, "
            f"{_KNOWN_IDS}, {_SNAPSHOT_HEAD} "
            f"FROM plaudit_head h WHERE h.one = 1 AND pg_try_advisory_xact_lock({_LEASE_KEY}) "
            "FOR UPDATE OF h",
            (list(ids or ()),),
        )
        row = cur.fetchone()
        if row is None:
            return None
        known = self._held(row, ids) if ids else None
        return _head_state(row[:6], bool(row[6]))._replace(known=known)

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
                _as_columns(rows),
            )

    def copy_rows(self, table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        """COPY for bulk; a multi-row INSERT for a few rows (one round trip, not two)."""
        with _translated():
            if (
                table == "plaudit_events"
                and tuple(columns) == EVENT_COLUMNS
                and (len(rows) <= SMALL_INSERT or self.pipelined)
            ):
                self.cur.execute(_EVENTS_UNNEST, _as_columns(rows))
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

    def head_for_sequencing(self, ids: Sequence[str] | None = None) -> HeadState:
        # The head row FOR UPDATE (older writers' lock), whether intake is pending and which of
        # `ids` are committed: one trip.
        cur = self.conn.cursor()
        if not ids or len(ids) > 500:
            cur.execute(
                "SELECT seq, hash, tree_size, frontier, checkpoint_size, checkpoint_ms, "
                f"{_INTAKE_PENDING} FROM plaudit_head WHERE one = 1 FOR UPDATE"
            )
            row = cur.fetchone()
            return _head_state(row[:6], bool(row[6]))
        cur.execute(
            "SELECT h.seq, h.hash, h.tree_size, h.frontier, h.checkpoint_size, h.checkpoint_ms, "
            f"{_INTAKE_PENDING}, "
            f"{_KNOWN_IDS} "
            "FROM plaudit_head h WHERE h.one = 1 FOR UPDATE OF h",
            (list(ids),),
        )
        row = cur.fetchone()
        known = _known(row[7])
        return _head_state(row[:6], bool(row[6]))._replace(known=known)

    def insert_events(
        self,
        rows: list[Sequence[Any]],
        head: Sequence[Any],
        marks: Mapping[str, tuple[int, int]] | None = None,
    ) -> bool:
        """A few rows, the head move and the projections' marks in one statement (a round
        trip fewer, and a send fewer: psycopg sends each statement as it is executed, holding
        the interpreter lock), which also says whether intake arrived meanwhile, so the
        writer can sequence it before it commits."""
        if len(rows) > SMALL_INSERT:
            super().insert_events(rows, head, marks)
            return False if self.pipelined else self.intake_pending()
        named = list((marks or {}).items())
        marks_sql = _upsert_unnest("plaudit_projections", MARK_COLUMNS, MARK_TYPES, ("name",), True)
        with _translated():
            self.cur.execute(
                f"WITH ins AS ({_EVENTS_UNNEST} RETURNING 1), "
                f"marks AS ({marks_sql} RETURNING 1) "
                # (PostgreSQL runs a data-modifying WITH whether or not the UPDATE reads it.)
                "UPDATE plaudit_head SET seq = %s, hash = %s, tree_size = %s, frontier = %s "
                f"WHERE one = 1 RETURNING {_INTAKE_PENDING}",
                [
                    *_as_columns(rows),
                    [n for n, _ in named],
                    [v for _, (v, _) in named],
                    [a for _, (_, a) in named],
                    *head,
                ],
            )
            if self.pipelined:  # the pump sequences late intake; reading this costs a trip
                return False
            return bool(self.cur.fetchone()[0])

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

    def __init__(self, dsn: str, *, schema: str | None = None, create: bool = True) -> None:
        super().__init__()
        #: False: open only an existing store; never create a schema or a table.
        self.create = create
        if schema is not None and not _SCHEMA_RE.match(schema):
            raise ConfigError(f"schema {schema!r} must match {_SCHEMA_RE.pattern}")
        self.dsn = dsn
        self.schema = schema
        self.url = dsn if schema is None else f"{dsn} (schema {schema})"
        self._channel: str | None = None

    def _connect(self) -> Any:
        import psycopg
        import psycopg.errors

        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
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
        if not self.create:
            self._require_store(conn)
        # Transactions are explicit (BEGIN/COMMIT below), never psycopg's implicit ones.
        return conn

    has_intake = True

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

    @contextmanager
    def write(self) -> Iterator[PostgresTx]:
        with self._transaction(LEASE_SQL) as (tx, _):
            yield tx

    @contextmanager
    def try_write(self) -> Iterator[PostgresTx | None]:
        with self._transaction(TRY_LEASE_SQL) as (tx, got):
            yield tx if got else None

    @contextmanager
    def try_sequence(
        self,
        ids: Sequence[str] | None = None,
        *,
        take: int | None = None,
        wait: bool = False,
        expect: HeadState | None = None,
    ) -> Iterator[tuple[PostgresTx, HeadState] | None]:
        """A sequencing transaction if the lease is free, with the head row (and which of
        `ids` the log holds) read under it; None when it is taken. With `take`, up to that
        many pending intake rows are taken in the same statement (see `take_if_leased`).

        With `expect` (the head as this process last committed it), nothing is read: the
        transaction goes ahead on that head, none of `ids` held and no intake pending, and a
        statement that needs no answer checks all of it under the lease; if any of it is
        wrong the transaction is rolled back and `HeadMoved` raised, nothing written. So an
        uncontended writer's transaction is one round trip, where reading the head first
        takes two.

        Sent in pipeline mode: BEGIN, the lease and the head travel in one round trip, and
        the writes nobody reads (the rows, the tree, the projection states, the relay's
        notification) travel with COMMIT. Errors of those writes therefore surface at the
        commit; they are translated there as they would be at the statement."""
        import psycopg.errors

        conn = self.connection()
        self._local.in_write = True
        head: HeadState | None = None
        # With `expect` nothing is read before COMMIT, so nothing needs BEGIN either: the
        # statements a pipeline sends before its Sync are one transaction, which the Sync
        # commits, or rolls back if any of them failed.
        implicit = expect is not None
        #: What failed inside the pipeline, raised once it is left: an exception that escapes
        #: the pipeline block makes psycopg log a warning for each result it then skips.
        failure: BaseException | None = None
        aborted = False  # the server refused a statement, so it skipped the rest
        try:
            with _translated():
                try:
                    with conn.pipeline() as pipeline:
                        if not implicit:
                            conn.execute("BEGIN")
                        tx = PostgresTx(conn)
                        tx.pipelined = True
                        tx.pipeline = pipeline
                        try:
                            if expect is not None:
                                conn.cursor().execute(
                                    _EXPECT_HEAD, [*expect[:2], *expect[3:7], list(ids or ())]
                                )
                                head = expect._replace(pending=False, known={})
                            elif wait:
                                head = tx.head_with_lease(ids)
                            elif take is None:
                                head = tx.head_if_leased(ids)
                            else:
                                head = tx.take_if_leased(take)
                            if head is None:
                                conn.execute("ROLLBACK")
                                yield None
                                return
                            yield tx, head
                            if not implicit:
                                conn.execute("COMMIT")
                        except BaseException as exc:
                            failure = exc
                            aborted = isinstance(exc, psycopg.Error)
                            # Undo what was sent: the Sync that leaving the pipeline sends
                            # would commit an implicit transaction, so make it fail first.
                            with suppress(Exception):
                                conn.execute(_ABORT if implicit else "ROLLBACK")
                except psycopg.Error as exc:  # leaving the pipeline read a refusal
                    aborted = True
                    if failure is None:
                        failure = exc
                if failure is not None:
                    raise failure
        except (psycopg.Error, ValidationError) as exc:
            if not (aborted or isinstance(exc, psycopg.Error)):
                raise  # the caller's own error: the transaction was rolled back
            # The server refused a statement and skipped the rest of the pipeline. psycopg
            # notes a statement as prepared when it sends the request (its fifth use), so a
            # skipped one stays noted and its next use fails ("prepared statement ... does not
            # exist"): this connection's driver state is wrong, and it is replaced.
            self._discard(conn)
            if isinstance(exc, psycopg.errors.DivisionByZero) and implicit:
                raise HeadMoved from None
            if isinstance(exc, psycopg.errors.UniqueViolation):
                # Ids were looked up under the lease, so it is a position: the head is behind
                # rows added outside plaudit.
                raise IntegrityError.position_taken(head.seq if head is not None else 0) from None
            raise
        except BaseException:
            if implicit:
                self._discard(conn)  # `_ABORT` made the pipeline's transaction roll back
            raise
        finally:
            self._local.in_write = False

    @contextmanager
    def intake(self, *, single: bool = False, relaxed: bool = False) -> Iterator[PostgresTx]:
        """`relaxed`: the caller acknowledges nothing until a sequencing pass has committed
        these rows, and that commit waits for the WAL flush, which covers this earlier commit
        too; so this one need not wait for a flush of its own (`synchronous_commit` off for
        this transaction only). A crash before the pass loses only unacknowledged rows."""
        if single:  # one statement is its own transaction: no BEGIN/COMMIT round trips
            tx = PostgresTx(self.connection())
            tx.relaxed = relaxed
            yield tx
            return
        with self._transaction(None) as (tx, _):
            if relaxed:
                tx.execute("SET LOCAL synchronous_commit TO off")
            yield tx

    @contextmanager
    def _transaction(self, lease_sql: str | None) -> Iterator[tuple[PostgresTx, bool]]:
        conn = self.connection()
        self._local.in_write = True
        try:
            got = True
            if lease_sql is None:
                conn.execute("BEGIN")
            else:  # one round trip: BEGIN and the lease in one simple query
                cur = conn.execute(f"BEGIN; {lease_sql}")
                cur.nextset()
                got = bool(cur.fetchone()[0])
            tx = PostgresTx(conn)
            yield tx, got
        except BaseException:
            self._end(conn, "ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")
        finally:
            self._local.in_write = False

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

    def claim_pump(self) -> bool:
        row = self.connection().execute(f"SELECT pg_try_advisory_lock({_PUMP_KEY})").fetchone()
        return bool(row[0])

    def release_pump(self) -> None:
        with suppress(Exception):
            self.connection().execute(f"SELECT pg_advisory_unlock({_PUMP_KEY})")

    def intake_pending(self) -> bool:
        row = self.connection().execute(f"SELECT {_INTAKE_PENDING}").fetchone()
        return bool(row[0])

    def in_write(self) -> bool:
        return bool(getattr(self._local, "in_write", False))

    @staticmethod
    def _end(conn: Any, word: str) -> None:
        with suppress(Exception):
            conn.execute(word)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        conn = self.connection()
        if getattr(self._local, "in_write", False):  # nested inside a write: reuse its view
            yield PostgresTx(conn)
            return
        with self._read_on(conn) as tx:
            yield tx

    @contextmanager
    def read_statement(self) -> Iterator[Tx]:
        conn = self.connection()
        if getattr(self._local, "in_write", False):  # nested inside a write: reuse its view
            yield PostgresTx(conn)
            return
        yield _OneStatementTx(conn)

    @contextmanager
    def _read_on(self, conn: Any) -> Iterator[PostgresTx]:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield PostgresTx(conn)
        finally:
            self._end(conn, "ROLLBACK")

    def drop_schema(self) -> None:
        """Remove the whole schema; used by tests and `plaudit` tooling to clean up."""
        if not self.schema:
            raise ConfigError("drop_schema needs an explicit schema")
        self.connection().execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
