"""The log's own tables. Projections add theirs through `plaudit.store.projections`."""

from __future__ import annotations

from plaudit.ids import now_ms
from plaudit.store.backend import Tx
from plaudit.store.chain import GENESIS
from plaudit.store.tree import TREE_NODES_DDL

#: Signed checkpoints (docs/proofs.md): the note as signed. (`verified_ms` is no longer read or
#: written: which checkpoint a verifier confirmed lives with the verifier, outside the database,
#: `plaudit.store.verifier_state`. The column stays so older stores and processes still open.)
CHECKPOINTS_DDL = """CREATE TABLE IF NOT EXISTS plaudit_checkpoints (
    size {bigint} PRIMARY KEY,
    root {blob} NOT NULL,
    time_ms {bigint} NOT NULL,
    note TEXT NOT NULL,
    verified_ms {bigint}
)"""

#: Columns version 2 adds to the head row: the tree's size and compact range (kept with the
#: head, so the sequencer reads them in the same statement), and the newest checkpoint's size
#: and time (so deciding whether one is due costs nothing).
HEAD_COLUMNS_V2 = (
    ("tree_size", "{bigint} NOT NULL DEFAULT 0"),
    ("frontier", "{blob}"),
    ("checkpoint_size", "{bigint} NOT NULL DEFAULT 0"),
    ("checkpoint_ms", "{bigint} NOT NULL DEFAULT 0"),
)

#: 2 added the intake table (PostgreSQL), the Merkle tree (its compact range in the head row,
#: its upper nodes in plaudit_tree_nodes) and signed checkpoints; verify protects content_digest.
SCHEMA_VERSION = "2"
#: Additive changes within a schema version (an index, say). Older processes of the same
#: version ignore the revision and keep working; a newer one adds what is missing, once.
SCHEMA_REVISION = 1


EVENT_COLUMNS = (
    "seq",
    "id",
    "type",
    "ts_ms",
    "session_id",
    "source",
    "payload",
    "meta",
    "content_digest",
    "hash",
)

#: A pending append: durable, idempotent by id, not yet given a position. `batch` groups the
#: rows of one append call, and `strict` says a conflict anywhere refuses all of them.
INTAKE_COLUMNS = (
    "id",
    "type",
    "ts_ms",
    "session_id",
    "source",
    "payload",
    "meta",
    "content_digest",
    "batch",
    "strict",
)

_INTAKE_DDL = """CREATE TABLE IF NOT EXISTS plaudit_intake (
        n BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        ts_ms BIGINT NOT NULL,
        session_id TEXT NOT NULL,
        source TEXT NOT NULL,
        payload TEXT NOT NULL,
        meta TEXT NOT NULL,
        content_digest BYTEA NOT NULL,
        batch TEXT NOT NULL,
        strict BOOLEAN NOT NULL
    )"""
#: A pass takes whole append calls (`batch`) oldest first; without this index each pass read
#: the whole intake table, dead rows included (revision 1).
_INTAKE_INDEX = "CREATE INDEX IF NOT EXISTS plaudit_intake_batch ON plaudit_intake (batch)"

_DDL = (
    """CREATE TABLE IF NOT EXISTS plaudit_events (
        seq {seq_pk},
        id TEXT NOT NULL,
        type TEXT NOT NULL,
        ts_ms {bigint} NOT NULL,
        session_id TEXT NOT NULL,
        source TEXT NOT NULL,
        payload TEXT NOT NULL,
        meta TEXT NOT NULL,
        content_digest {blob} NOT NULL,
        hash {blob} NOT NULL
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS plaudit_events_id ON plaudit_events (id)",
    "CREATE INDEX IF NOT EXISTS plaudit_events_type ON plaudit_events (type, seq)",
    """CREATE TABLE IF NOT EXISTS plaudit_head (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        seq {bigint} NOT NULL,
        hash {blob} NOT NULL
    )""",
    TREE_NODES_DDL,
    CHECKPOINTS_DDL,
    "CREATE TABLE IF NOT EXISTS plaudit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS plaudit_projections (
        name TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        applied_seq {bigint} NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS plaudit_quarantine (
        qid {autoinc_pk},
        file TEXT NOT NULL,
        line_no {bigint} NOT NULL,
        reason TEXT NOT NULL,
        raw {blob} NOT NULL,
        raw_digest {blob} NOT NULL,
        ts_ms {bigint} NOT NULL,
        UNIQUE (file, line_no, raw_digest)
    )""",
)

# Defence in depth: ordinary SQL cannot rewrite history. Someone editing the file directly can
# drop these, which is why `verify` exists.
_GUARDS = {
    "sqlite": (
        """CREATE TRIGGER IF NOT EXISTS plaudit_events_no_update BEFORE UPDATE ON plaudit_events
           BEGIN SELECT RAISE(ABORT, 'plaudit_events is append-only'); END""",
        """CREATE TRIGGER IF NOT EXISTS plaudit_events_no_delete BEFORE DELETE ON plaudit_events
           BEGIN SELECT RAISE(ABORT, 'plaudit_events is append-only'); END""",
    ),
    "postgres": (
        """CREATE OR REPLACE FUNCTION plaudit_events_append_only() RETURNS trigger
           LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'plaudit_events is append-only'; END $$""",
        "DROP TRIGGER IF EXISTS plaudit_events_append_only ON plaudit_events",
        """CREATE TRIGGER plaudit_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
           ON plaudit_events FOR EACH STATEMENT EXECUTE FUNCTION plaudit_events_append_only()""",
    ),
}


def schema_version(tx: Tx) -> str | None:
    """The stored schema version, or None when the log's tables do not exist."""
    if not (tx.table_exists("plaudit_meta") and tx.table_exists("plaudit_head")):
        return None
    v = tx.scalar("SELECT value FROM plaudit_meta WHERE key = 'schema_version'")
    return None if v is None else str(v)


def _revision(tx: Tx) -> int:
    v = tx.scalar("SELECT value FROM plaudit_meta WHERE key = 'schema_revision'")
    return int(v) if v is not None and str(v).isdigit() else 0


def schema_current(tx: Tx) -> bool:
    """True when the log's tables exist at this version and revision (a read; no lock)."""
    return schema_version(tx) == SCHEMA_VERSION and _revision(tx) >= SCHEMA_REVISION


def create_schema(tx: Tx) -> None:
    """Create the log's tables, or upgrade them from an earlier version, in one transaction.

    Upgrades only add: version 1 stores open unchanged, their chain verifies as before, and a
    process of the older version sharing the database still serialises on the head row.
    """
    if tx.dialect == "postgres":
        # CREATE ... IF NOT EXISTS is not race-free in PostgreSQL; serialise first-time set-up.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema()))")
        if schema_current(tx):
            return
    found = schema_version(tx)
    if found is not None and found.isdigit() and int(found) > int(SCHEMA_VERSION):
        from plaudit.errors import ConfigError

        raise ConfigError(
            f"this store's schema is version {found}, newer than this plaudit's "
            f"{SCHEMA_VERSION}: upgrade plaudit to use it"
        )
    for stmt in _DDL:
        tx.execute(tx.ddl(stmt))
    have = tx.columns("plaudit_head")
    for name, decl in HEAD_COLUMNS_V2:
        if name not in have:
            tx.execute(tx.ddl(f"ALTER TABLE plaudit_head ADD COLUMN {name} {decl}"))
    if tx.dialect == "postgres":
        tx.execute(_INTAKE_DDL)
        tx.execute(_INTAKE_INDEX)
    for stmt in _GUARDS[tx.dialect]:
        tx.execute(stmt)
    # A new store's first checkpoint is due one period after it was made, not on its first
    # append: a shell hook that creates a store should not pay for signing (and its imports).
    tx.execute(
        "INSERT INTO plaudit_head (one, seq, hash, checkpoint_ms) VALUES (1, 0, ?, ?) "
        "ON CONFLICT (one) DO NOTHING",
        (GENESIS, now_ms()),
    )
    tx.execute(
        "INSERT INTO plaudit_meta (key, value) VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (SCHEMA_VERSION,),
    )
    tx.execute(
        "INSERT INTO plaudit_meta (key, value) VALUES ('schema_revision', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(max(SCHEMA_REVISION, _revision(tx))),),
    )
