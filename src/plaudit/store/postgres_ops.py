"""The log's statements in PostgreSQL's words: the lease, the head, the intake, the relay.

Id look-ups probe the id index once per id (`LATERAL ... OFFSET 0`): `id = ANY(...)` or a
plain join let the plan psycopg prepares at a statement's fifth use be a scan of the whole
log, planned while the log was new and kept as it grew
(`tests/test_log_conformance.py::test_appends_never_scan_the_log`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plaudit.store.backend import MARK_COLUMNS, MARK_TYPES
from plaudit.store.ops import HEAD_COLUMNS, HeadState, LogOps
from plaudit.store.schema import EVENT_COLUMNS, INTAKE_COLUMNS

if TYPE_CHECKING:
    from plaudit.store.backend import Tx

#: The sequencer lease: one advisory lock per schema, released when its transaction ends.
LEASE_KEY = "hashtext('plaudit.sequencer'), hashtext(current_schema())"
#: The pump's own lock (see plaudit.store.relay): a session lock, so it lasts across passes
#: and ends with its connection.
PUMP_KEY = "hashtext('plaudit.pump'), hashtext(current_schema())"
#: Whether any intake is pending, found in the primary key: `EXISTS (SELECT 1 FROM ...)` read
#: the table's heap from the start, through every row that passes had deleted since vacuum.
INTAKE_PENDING = "((SELECT n FROM plaudit_intake ORDER BY n LIMIT 1) IS NOT NULL)"
#: The head as the statement's snapshot saw it. A statement that takes the lease reads the head
#: row FOR UPDATE, which returns its latest version, but its other reads (which ids the log
#: holds) use the snapshot taken when the statement began, before the lease: a sequencer that
#: committed in between is missing from them. Every sequencing commit moves the head, so a
#: snapshot head equal to the locked one means nothing was missed; otherwise those reads are
#: repeated under the lease.
SNAPSHOT_HEAD = "(SELECT seq FROM plaudit_head WHERE one = 1)"
#: The oldest pending append calls, whole: `= ANY(ARRAY(...))` is looked up in the batch index,
#: where `IN (subquery)` was planned as a scan of the intake, dead rows included.
_TAKE_BATCHES = "batch = ANY(ARRAY(SELECT batch FROM plaudit_intake ORDER BY n LIMIT %s))"
_EVENT_OF_I = "(SELECT id, content_digest, seq FROM plaudit_events WHERE id = i.id OFFSET 0) e"
#: The log's rows holding the ids of text-array parameter `%s`.
_HELD = f"unnest(%s::text[]) AS i(id) CROSS JOIN LATERAL {_EVENT_OF_I}"
#: For each row `i` of a FROM list, the log's row `e` holding its id (NULLs when none does).
_PROBE_EVENTS = f"LEFT JOIN LATERAL {_EVENT_OF_I} ON true"
_KNOWN_JOIN = (
    "LEFT JOIN LATERAL (SELECT content_digest, seq FROM plaudit_events WHERE id = t.id "
    "OFFSET 0) e ON true"
)
#: Up to this many rows go in the one statement that also moves the head.
SMALL_INSERT = 64

_COLUMN_TYPES = {
    **dict.fromkeys(("seq", "ts_ms"), "bigint"),
    **dict.fromkeys(("id", "type", "session_id", "source", "payload", "meta", "batch"), "text"),
    **dict.fromkeys(("content_digest", "hash"), "bytea"),
    "strict": "boolean",
}
_INTAKE_TYPES = tuple(_COLUMN_TYPES[c] for c in INTAKE_COLUMNS)
_INTAKE_ONE = "VALUES (" + ", ".join(f"%s::{t}" for t in _INTAKE_TYPES) + ")"
_INTAKE_MANY = "SELECT * FROM unnest(" + ", ".join(f"%s::{t}[]" for t in _INTAKE_TYPES) + ")"
#: Event rows as column arrays: the statement's text is the same for any number of rows, so
#: the driver parses it once, where a multi-row VALUES list is parsed anew per row count.
EVENTS_UNNEST = (
    f"INSERT INTO plaudit_events ({','.join(EVENT_COLUMNS)}) "
    "SELECT * FROM unnest(" + ", ".join(f"%b::{_COLUMN_TYPES[c]}[]" for c in EVENT_COLUMNS) + ")"
)
_MARKS_UNNEST = (
    f"INSERT INTO plaudit_projections ({', '.join(MARK_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"%b::{t.replace('{bigint}', 'bigint')}[]" for t in MARK_TYPES)
    + ") ON CONFLICT (name) DO UPDATE SET version = excluded.version, "
    "applied_seq = excluded.applied_seq"
)
#: Joined into a lone intake statement (its own transaction) to commit it without waiting for
#: the WAL flush: see `PostgresOps.intake_put`.
_RELAXED_JOIN = " CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed"
#: Who holds the lease (or the pump lock): the session, what it is doing, since when.
_HOLDER = (
    "SELECT a.application_name, a.pid, host(a.client_addr), a.state, "
    "extract(epoch FROM now() - COALESCE(a.xact_start, a.backend_start))::float8 "
    "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
    "AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = "
    "current_database()) AND l.classid = hashtext(%s)::oid AND l.objid = "
    "hashtext(current_schema())::oid AND l.objsubid = 2 LIMIT 1"
)


#: Which of the ids in parameter `%s` the log holds, as one array of (id, hex digest, seq).
_KNOWN_IDS = (
    f"(SELECT array_agg(ARRAY[e.id, encode(e.content_digest, 'hex'), e.seq::text]) FROM {_HELD})"
)


#: The lease, if the head is still exactly the one this process wrote last, no intake is
#: pending and none of the ids in the last parameter is in the log; otherwise it divides by
#: zero, which aborts the transaction (no statement of plaudit's divides otherwise). It needs
#: no answer, so a group's whole transaction goes in one round trip (`expect_head`). It also
#: sets the transaction's idle limit (`set_deadlines`).
_EXPECT_HEAD = (
    "SELECT 1 / COALESCE((SELECT CASE WHEN (h.seq, h.hash, h.tree_size, h.frontier, "
    "h.checkpoint_size, h.checkpoint_ms) IS NOT DISTINCT FROM (%s::bigint, %s::bytea, "
    "%s::bigint, %s::bytea, %s::bigint, %s::bigint) "
    f"AND {SNAPSHOT_HEAD} = h.seq AND NOT {INTAKE_PENDING} "
    f"AND NOT EXISTS (SELECT 1 FROM {_HELD}) THEN 1 ELSE 0 END "
    "FROM plaudit_head h, (SELECT set_config('idle_in_transaction_session_timeout', %s, true)) d "
    f"WHERE h.one = 1 AND pg_try_advisory_xact_lock({LEASE_KEY}) FOR UPDATE OF h), 0)"
)
#: Fails at once: queued after an error of plaudit's own inside a pipeline's implicit
#: transaction, so that its Sync rolls back instead of committing what was sent.
ABORT = "SELECT 1 / 0"


def _idle_limit(deadline_s: float) -> str:
    """How long a write transaction may stay idle: half the deadline."""
    return f"{max(100, int(deadline_s * 500))}ms"


def as_columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Rows as one list per column, for an `unnest` of arrays."""
    return [list(col) for col in zip(*rows, strict=True)]


def _head_select(extra: str, where: str) -> str:
    return (
        f"SELECT {', '.join('h.' + c for c in HEAD_COLUMNS.split(', '))}, {extra} "
        f"FROM plaudit_head h WHERE h.one = 1 AND {where} FOR UPDATE OF h"
    )


def _cursor(tx: Tx) -> Any:
    """A cursor of the PostgreSQL connection under `tx` (these statements are psycopg's)."""
    from plaudit.store.postgres import PostgresTx

    assert isinstance(tx, PostgresTx), "PostgreSQL's statements need a PostgreSQL transaction"
    return tx.cursor()


class PostgresOps(LogOps):
    ABORT = ABORT

    def held(self, tx: Tx, ids: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        cur = _cursor(tx)
        cur.execute(f"SELECT e.id, e.content_digest, e.seq FROM {_HELD}", (wanted,))
        return {r[0]: (bytes(r[1]), int(r[2])) for r in cur.fetchall()}

    def insert_events(
        self,
        tx: Tx,
        rows: list[tuple[Any, ...]],
        head: HeadState,
        marks: Mapping[str, tuple[int, int]] | None,
    ) -> None:
        """A few rows, the head's move and the projections' marks in one statement (psycopg
        sends each statement on its own while holding the interpreter lock)."""
        if len(rows) > SMALL_INSERT:
            super().insert_events(tx, rows, head, marks)
            return
        named = list((marks or {}).items())
        _cursor(tx).execute(
            f"WITH ins AS ({EVENTS_UNNEST} RETURNING 1), marks AS ({_MARKS_UNNEST} RETURNING 1) "
            "UPDATE plaudit_head SET seq = %s, hash = %s, tree_size = %s, frontier = %s "
            "WHERE one = 1",
            [
                *as_columns(rows),
                [n for n, _ in named],
                [v for _, (v, _) in named],
                [a for _, (_, a) in named],
                head.seq,
                head.hash,
                head.tree_size,
                head.frontier,
            ],
        )

    # -- the lease ------------------------------------------------------------------------
    @staticmethod
    def set_deadlines(tx: Tx, deadline_s: float) -> None:
        """This transaction loses its session (the lease with it) when it stays idle for half
        the deadline: a stopped holder must not keep the others waiting past their deadline
        (docs/log.md, "Deadlines"). Lock waits end at the deadline (`lock_timeout`, set on
        every connection)."""
        _cursor(tx).execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
            (_idle_limit(deadline_s),),
        )

    def head_pending(self, tx: Tx) -> HeadState:
        """Under the lease: the head row (FOR UPDATE, older writers' lock) and whether intake
        is pending."""
        cur = _cursor(tx)
        cur.execute(_head_select(INTAKE_PENDING, "true"))
        row = cur.fetchone()
        return HeadState.from_row(row, bool(row[6]))

    def head_with_lease(
        self, tx: Tx, deadline_s: float, ids: Sequence[str] | None = None, *, wait: bool
    ) -> tuple[HeadState, dict[str, tuple[bytes, int]] | None] | None:
        """The lease (waited for, or None at once when `wait` is false and it is taken), the
        head row under it with whether intake is pending, which of `ids` the log holds, and
        this transaction's idle limit (`set_deadlines`): one statement."""
        lease = (
            f"EXISTS (SELECT pg_advisory_xact_lock({LEASE_KEY}))"
            if wait
            else f"pg_try_advisory_xact_lock({LEASE_KEY})"
        )
        cur = _cursor(tx)
        cur.execute(
            "WITH d AS (SELECT set_config('idle_in_transaction_session_timeout', %s, true)) "
            f"SELECT {', '.join('h.' + c for c in HEAD_COLUMNS.split(', '))}, {INTAKE_PENDING}, "
            f"{_KNOWN_IDS}, {SNAPSHOT_HEAD} FROM plaudit_head h, d WHERE h.one = 1 AND {lease} "
            "FOR UPDATE OF h",
            (_idle_limit(deadline_s), list(ids or ())),
        )
        row = cur.fetchone()
        if row is None:
            return None
        head = HeadState.from_row(row, bool(row[6]))
        if not ids:
            return head, None
        if row[8] != row[0]:  # the snapshot predates the lease: read the ids again under it
            return head, self.held(tx, ids)
        return head, {i: (bytes.fromhex(d), int(s)) for i, d, s in (row[7] or [])}

    def expect_head(self, tx: Tx, head: HeadState, ids: Sequence[str], deadline_s: float) -> None:
        """Go ahead on `head` (the one this process's last write left) without reading it:
        the statement checks, under the lease, that it is still the head, that no intake is
        pending and that none of `ids` is in the log, and aborts the transaction if not."""
        _cursor(tx).execute(
            _EXPECT_HEAD,
            [
                head.seq,
                head.hash,
                head.tree_size,
                head.frontier,
                head.checkpoint_size,
                head.checkpoint_ms,
                list(ids),
                _idle_limit(deadline_s),
            ],
        )

    def take_if_leased(
        self, tx: Tx, limit: int
    ) -> tuple[HeadState, list[tuple[Any, ...]], dict[str, tuple[bytes, int]]] | None:
        """The lease, the head row and up to `limit` pending intake rows (oldest calls whole,
        with which of their ids the log holds), in one statement: a pass's whole first half.
        None when another writer holds the lease."""
        cols = ", ".join(INTAKE_COLUMNS)
        cur = _cursor(tx)
        cur.execute(
            f"WITH h AS (SELECT {HEAD_COLUMNS} FROM plaudit_head WHERE one = 1 AND "
            f"pg_try_advisory_xact_lock({LEASE_KEY}) FOR UPDATE), "
            f"t AS (DELETE FROM plaudit_intake WHERE EXISTS (SELECT 1 FROM h) AND {_TAKE_BATCHES} "
            f"RETURNING n, {cols}) "
            f"SELECT {SNAPSHOT_HEAD}, h.*, t.*, e.content_digest, e.seq FROM h "
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
        if rows and got[0][0] != got[0][1]:  # the snapshot predates the lease: read again
            known = self.held(tx, [r[1] for r in rows])
        return HeadState.from_row(got[0][1:7]), rows, known

    def take(
        self, tx: Tx, limit: int
    ) -> tuple[list[tuple[Any, ...]], dict[str, tuple[bytes, int]]]:
        """Under the lease: up to `limit` pending intake rows (oldest calls whole), and which
        of their ids the log holds."""
        cols = ", ".join(INTAKE_COLUMNS)
        cur = _cursor(tx)
        cur.execute(
            f"WITH t AS (DELETE FROM plaudit_intake WHERE {_TAKE_BATCHES} RETURNING n, {cols}) "
            f"SELECT t.*, e.content_digest, e.seq FROM t {_KNOWN_JOIN} ORDER BY t.n",
            (limit,),
        )
        rows: list[tuple[Any, ...]] = []
        known: dict[str, tuple[bytes, int]] = {}
        for row in cur.fetchall():
            rows.append(row[:-2])
            if row[-2] is not None:
                known[row[1]] = (bytes(row[-2]), int(row[-1]))
        return rows, known

    def lease_holder(self, tx: Tx, lock: str = "plaudit.sequencer") -> str:
        """Who holds the lease (or `lock`), as people read it."""
        from plaudit.store import deadlines

        cur = _cursor(tx)
        cur.execute(_HOLDER, (lock,))
        row = cur.fetchone()
        if row is None:
            return "another session (it let go meanwhile)"
        app, pid, addr, state, seconds = row
        who = _client(app, addr)
        return (
            f"{who} (server pid {pid}, {state or 'unknown state'} for {seconds:.1f} s)"
            if who
            else deadlines.holder(None, None) + f" (server pid {pid}, {state})"
        )

    # -- the intake -----------------------------------------------------------------------
    def intake_put(
        self, tx: Tx, rows: list[tuple[Any, ...]], *, relaxed: bool
    ) -> list[tuple[Any, ...]]:
        """Take in rows (INTAKE_COLUMNS order) in one statement, except ids already sequenced
        or pending. Returns, per row: (id, sequenced digest, sequenced seq, pending digest,
        inserted). `relaxed`: commit without waiting for the WAL flush (the caller
        acknowledges nothing until a pass has committed these rows, and that commit's flush
        covers this one)."""
        names = ", ".join(INTAKE_COLUMNS)
        inputs = ", ".join(f"i.{c}" for c in INTAKE_COLUMNS)
        relax = _RELAXED_JOIN if relaxed else ""
        if len(rows) == 1:  # the common case: plain parameters; look up only if not taken
            cur = _cursor(tx)
            cur.execute(
                f"INSERT INTO plaudit_intake ({names}) SELECT {inputs} "
                f"FROM ({_INTAKE_ONE}) AS i ({names}){relax} WHERE NOT EXISTS "
                "(SELECT 1 FROM plaudit_events e WHERE e.id = i.id OFFSET 0) "
                "ON CONFLICT (id) DO NOTHING RETURNING id",
                rows[0],
            )
            if cur.fetchone() is not None:
                return [(rows[0][0], None, None, None, True)]
            source, params = _INTAKE_ONE, list(rows[0])
        else:
            source, params = _INTAKE_MANY, as_columns(rows)
        cur = _cursor(tx)
        cur.execute(
            f"WITH input ({names}) AS ({source}), "
            f"held AS (SELECT i.*, e.content_digest AS held_digest, e.seq AS held_seq "
            f"FROM input i {_PROBE_EVENTS}), "
            f"ins AS (INSERT INTO plaudit_intake ({names}) SELECT {names} FROM held "
            "WHERE held_seq IS NULL ON CONFLICT (id) DO NOTHING RETURNING id) "
            "SELECT h.id, h.held_digest, h.held_seq, q.content_digest, "
            "EXISTS (SELECT 1 FROM ins WHERE ins.id = h.id) FROM held h "
            "LEFT JOIN LATERAL (SELECT content_digest FROM plaudit_intake WHERE id = h.id "
            f"OFFSET 0) q ON true{relax}",
            params,
        )
        return [(r[0], _bytes(r[1]), r[2], _bytes(r[3]), r[4]) for r in cur.fetchall()]

    def intake_digests(self, tx: Tx, ids: list[str]) -> dict[str, bytes]:
        cur = _cursor(tx)
        cur.execute(
            "SELECT q.id, q.content_digest FROM unnest(%s::text[]) AS k(id) CROSS JOIN LATERAL "
            "(SELECT id, content_digest FROM plaudit_intake WHERE id = k.id OFFSET 0) q",
            (ids,),
        )
        return {r[0]: bytes(r[1]) for r in cur.fetchall()}

    def sequenced(self, tx: Tx, ids: list[str]) -> tuple[dict[str, tuple[bytes, int]], set[str]]:
        """(id -> (digest, seq) for sequenced ids, ids still pending): one statement."""
        cur = _cursor(tx)
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

    def intake_pending(self, tx: Tx) -> bool:
        cur = _cursor(tx)
        cur.execute(f"SELECT {INTAKE_PENDING}")
        row = cur.fetchone()
        return bool(row and row[0])

    @staticmethod
    def notify(tx: Tx, channel: str, payloads: Sequence[str]) -> None:
        """Publish a pass's results; delivered only if this transaction commits."""
        if payloads:
            _cursor(tx).execute(
                "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (channel, list(payloads))
            )


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _client(app: str | None, addr: str | None) -> str:
    """'pid 12 on host h (stopped)' from a plaudit session's application_name."""
    from plaudit.store import deadlines

    if app and app.startswith("plaudit "):
        pid, _, host = app[len("plaudit ") :].partition("@")
        if pid.isdigit():
            return deadlines.holder(int(pid), host or None)
    if app or addr:
        return f"client {app or '?'} at {addr or 'local socket'}"
    return ""
