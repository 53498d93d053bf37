"""The `signals` projection: router decisions, outcomes and overrides joined as they arrive.

Each decision id has one row in `signals_decisions`, holding what the export writes for it:
the row's first half as JSON (`head`, up to `confidence`), its split bucket, its
`event_history` for the default history size, and, once it has an outcome, the outcome's part
of the row (`tail`), its `dedupe_id` digest and the rest of its line for the export's default
options (`rest`: a default export writes `head + rest` for every row). The log appends call
`apply` in their own transaction, so an export reads finished rows and pays for the rows it
writes, not for the log's history.

`apply` works a batch at a time: it reads each table once for every id the batch touches,
one query per session chunk for the timelines whose history moves, and one for the digests
whose duplicate flags may change; it then writes each changed row once. A batch of a
thousand new decisions therefore costs a few queries, not a few per decision.

What the export's options change is kept apart so the export can still derive it cheaply:

* **The age window.** Every table keeps, per id, how many events it folded and the oldest and
  newest of their timestamps. When no id has events on both sides of the window's start,
  the windowed result is exactly "the ids whose events are inside" (history entries older
  than the window are dropped at export; their `t_minus` does not change). Otherwise the
  export falls back to a full read of the log, which is exact by construction.
* **History size, seed, rewards, split by session**: history is rebuilt from the
  decisions' timeline (one ordered query), the bucket and reward computed per row.

Semantics are the reference exporter's, as `plaudit.signals.join` implements them for a file:
the last decision and outcome per id win, the last override fills `manual_override_task` when
the outcome has none, sessions are ordered by timestamp with ties in first-seen order.
"""

from __future__ import annotations

import binascii
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from plaudit.events import StoredEvent
from plaudit.seqmem import REPEAT
from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE, PREFIX
from plaudit.signals.join import (
    REWARDS,
    encode_tail,
    history_entry,
    row_digest,
    t_minus_prefix,
)
from plaudit.signals.scan import Scanner, _s
from plaudit.store.backend import DIALECT_WORDS, Tx

NAME = "signals"
#: 2: the default line kept as `rest` after `head` (not whole), batch-wise apply; the
#: export verifies through the log's own checkpoints (the `signals_checkpoint` mark is gone).
VERSION = 2
#: History stored with each decision: the export's default `--history-size`.
HISTORY = 3
#: Buckets stored with each decision are for the export's default seed.
SEED = 42
TABLES = (
    "signals_decisions",
    "signals_outcomes",
    "signals_overrides",
    "signals_other",
    "signals_conflicts",
    "signals_tally",
)
#: Tables whose rows depend on how the appends were batched, not only on the log, so a rebuild
#: gives other rows (the sums they hold stay the same): `signals_hours` counts the changes to
#: each hour's rows, and holds the three tables' totals, added to an hour each batch touched;
#: `signals_exports` records which hours an export's files hold (`plaudit.signals.reuse`).
#: Dropped with the others, so a rebuilt projection starts with no reuse at all.
CACHE_TABLES = ("signals_hours", "signals_exports")
#: Tables of earlier versions that nothing reads any more, dropped when the tables are made.
RETIRED = ("signals_checkpoint",)
#: The stretch of export order `signals_hours` tracks: rows are in timestamp order, so an
#: hour's rows are one run of lines in each split's file.
HOUR_MS = 3_600_000
_ID_CHUNK = 500
#: Sessions whose timelines one query reads (two compound terms each).
_SESSION_CHUNK = 50
_NEVER_OLD = 1 << 62

_DDL = (
    """CREATE TABLE IF NOT EXISTS signals_decisions (
        decision_id TEXT PRIMARY KEY,
        first_seq {bigint} NOT NULL,
        seq {bigint} NOT NULL,
        ts_ms {bigint} NOT NULL,
        min_ts {bigint} NOT NULL,
        max_ts {bigint} NOT NULL,
        n {bigint} NOT NULL,
        identical {bigint} NOT NULL,
        conflicting {bigint} NOT NULL,
        session_id TEXT NOT NULL,
        chosen_task TEXT NOT NULL,
        head {blob} NOT NULL,
        cut INTEGER NOT NULL,
        propensity TEXT,
        bucket INTEGER NOT NULL,
        history {blob} NOT NULL,
        hist_min_ts {bigint},
        outcome TEXT,
        tail {blob},
        digest {blob},
        overridden INTEGER,
        rest {blob},
        dup INTEGER
    )""",
    "CREATE INDEX IF NOT EXISTS signals_decisions_digest ON signals_decisions (digest)",
    # Covering the export's tallies (`dup` is NULL exactly when a row has no chosen task).
    "CREATE INDEX IF NOT EXISTS signals_decisions_tally ON signals_decisions"
    " (session_id, outcome, dup, chosen_task, bucket, overridden, ts_ms)",
    "CREATE INDEX IF NOT EXISTS signals_decisions_timeline"
    " ON signals_decisions (session_id, ts_ms, first_seq)",
    "CREATE INDEX IF NOT EXISTS signals_decisions_order ON signals_decisions (ts_ms, first_seq)",
    # Covering the window's checks and counts, so they never read the rows themselves.
    "CREATE INDEX IF NOT EXISTS signals_decisions_window"
    " ON signals_decisions (max_ts, min_ts, n, identical, conflicting)",
    """CREATE TABLE IF NOT EXISTS signals_outcomes (
        decision_id TEXT PRIMARY KEY,
        seq {bigint} NOT NULL,
        min_ts {bigint} NOT NULL,
        max_ts {bigint} NOT NULL,
        n {bigint} NOT NULL,
        identical {bigint} NOT NULL,
        conflicting {bigint} NOT NULL,
        task_executed TEXT NOT NULL,
        outcome TEXT NOT NULL,
        ttr {bigint} NOT NULL,
        error_kind TEXT NOT NULL,
        manual_override_task TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS signals_outcomes_window"
    " ON signals_outcomes (max_ts, min_ts, n, identical, conflicting)",
    """CREATE TABLE IF NOT EXISTS signals_overrides (
        decision_id TEXT PRIMARY KEY,
        seq {bigint} NOT NULL,
        min_ts {bigint} NOT NULL,
        max_ts {bigint} NOT NULL,
        n {bigint} NOT NULL,
        override_task TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS signals_overrides_window ON signals_overrides (max_ts, min_ts, n)",
    # Router events that make no record: `kind` is other (an unknown flow.router. type),
    # no_id (no decision id), error (a subject Python's json could not read) or old (ts <= 0).
    """CREATE TABLE IF NOT EXISTS signals_other (
        seq {bigint} PRIMARY KEY,
        ts_ms {bigint} NOT NULL,
        kind TEXT NOT NULL,
        reason TEXT NOT NULL
    )""",
    # Each repeat of an id with different content, in log order (the summary names the first).
    """CREATE TABLE IF NOT EXISTS signals_conflicts (
        seq {bigint} PRIMARY KEY,
        ts_ms {bigint} NOT NULL,
        what TEXT NOT NULL
    )""",
    # Decisions with an outcome, counted by what the summary tallies: `overridden` -1 and
    # `dup` -1 for rows without a chosen task (their NULLs), `dup` 1 for dropped duplicates.
    """CREATE TABLE IF NOT EXISTS signals_tally (
        outcome TEXT NOT NULL,
        chosen_task TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        overridden INTEGER NOT NULL,
        dup INTEGER NOT NULL,
        n {bigint} NOT NULL,
        PRIMARY KEY (outcome, chosen_task, bucket, overridden, dup)
    )""",
    # Per hour: `version` counts the batches that changed its rows. The other columns are
    # parts of sums over all hours (each batch adds what it changed to one hour it touched):
    # ids, events, identical and conflicting repeats of decisions (d_), outcomes (o_) and
    # overrides (v_), and the oldest event's timestamp: what an export whose window holds
    # every event counts, without reading the tables.
    """CREATE TABLE IF NOT EXISTS signals_hours (
        hour {bigint} PRIMARY KEY,
        version {bigint} NOT NULL,
        d_ids {bigint} NOT NULL,
        d_n {bigint} NOT NULL,
        d_identical {bigint} NOT NULL,
        d_conflicting {bigint} NOT NULL,
        o_ids {bigint} NOT NULL,
        o_n {bigint} NOT NULL,
        o_identical {bigint} NOT NULL,
        o_conflicting {bigint} NOT NULL,
        v_ids {bigint} NOT NULL,
        v_n {bigint} NOT NULL,
        min_ts {bigint}
    )""",
    """CREATE TABLE IF NOT EXISTS signals_exports (
        output_dir TEXT PRIMARY KEY,
        splits TEXT NOT NULL,
        files TEXT NOT NULL,
        hours {blob} NOT NULL
    )""",
)

#: `signals_decisions`' columns, in the order rows are held in memory (the indices below).
DECISION_COLUMNS = (
    "decision_id", "first_seq", "seq", "ts_ms", "min_ts", "max_ts", "n", "identical",
    "conflicting", "session_id", "chosen_task", "head", "cut", "propensity", "bucket",
    "history", "hist_min_ts", "outcome", "tail", "digest", "overridden", "rest", "dup",
)  # fmt: skip
(ID, FIRST, SEQ, TS, MIN_TS, MAX_TS, N, SAME, DIFF, SESSION, CHOSEN, HEAD, CUT, PROPENSITY,
 BUCKET, HIST, HIST_MIN, OUTCOME_, TAIL, DIGEST, HOW, REST, DUP) = range(23)  # fmt: skip
assert len(DECISION_COLUMNS) == 23
_BLOBS = (HEAD, HIST, TAIL, DIGEST, REST)
_COLS = ", ".join(DECISION_COLUMNS)
_UPSERT_DECISION = (
    f"INSERT INTO signals_decisions ({_COLS}) VALUES ({', '.join('?' * len(DECISION_COLUMNS))})"
    " ON CONFLICT (decision_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in DECISION_COLUMNS[1:])
)
_OUTCOME_COLS = (
    "decision_id, seq, min_ts, max_ts, n, identical, conflicting, task_executed, outcome, ttr,"
    " error_kind, manual_override_task"
)
_UPSERT_OUTCOME = (
    f"INSERT INTO signals_outcomes ({_OUTCOME_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (decision_id) DO UPDATE SET seq = excluded.seq, min_ts = excluded.min_ts,"
    " max_ts = excluded.max_ts, n = excluded.n, identical = excluded.identical,"
    " conflicting = excluded.conflicting, task_executed = excluded.task_executed,"
    " outcome = excluded.outcome, ttr = excluded.ttr, error_kind = excluded.error_kind,"
    " manual_override_task = excluded.manual_override_task"
)
_OVERRIDE_COLS = "decision_id, seq, min_ts, max_ts, n, override_task"
_UPSERT_OVERRIDE = (
    f"INSERT INTO signals_overrides ({_OVERRIDE_COLS}) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (decision_id) DO UPDATE SET seq = excluded.seq,"
    " min_ts = excluded.min_ts, max_ts = excluded.max_ts, n = excluded.n,"
    " override_task = excluded.override_task"
)
_SUMS = (
    "d_ids", "d_n", "d_identical", "d_conflicting", "o_ids", "o_n", "o_identical",
    "o_conflicting", "v_ids", "v_n",
)  # fmt: skip
_ADD_HOURS = (
    f"INSERT INTO signals_hours (hour, version, {', '.join(_SUMS)}, min_ts)"
    f" VALUES (?, 1, {', '.join('?' * len(_SUMS))}, ?) ON CONFLICT (hour) DO UPDATE SET"
    " version = signals_hours.version + 1, "
    + ", ".join(f"{c} = signals_hours.{c} + excluded.{c}" for c in _SUMS)
    + ", min_ts = CASE WHEN signals_hours.min_ts IS NULL OR excluded.min_ts <"
    " signals_hours.min_ts THEN excluded.min_ts ELSE signals_hours.min_ts END"
)
_TALLY_KEY = "outcome, chosen_task, bucket, overridden, dup"
_ADD_TALLY = (
    f"INSERT INTO signals_tally ({_TALLY_KEY}, n) VALUES (?, ?, ?, ?, ?, ?)"
    f" ON CONFLICT ({_TALLY_KEY}) DO UPDATE SET n = signals_tally.n + excluded.n"
)
_EMPTY_TALLY = (
    "DELETE FROM signals_tally WHERE outcome = ? AND chosen_task = ? AND bucket = ?"
    " AND overridden = ? AND dup = ? AND n = 0"
)
#: One session's timeline around a change at (ts, first seq): the HISTORY entries before it
#: (part 0) and every entry from it on (part 1).
_TIMELINE = "session_id, decision_id, chosen_task, ts_ms, first_seq, history, hist_min_ts"
_BEFORE = (
    "SELECT * FROM (SELECT 0 AS part, " + _TIMELINE + " FROM signals_decisions"
    " WHERE session_id = ? AND (ts_ms < ? OR (ts_ms = ? AND first_seq < ?))"
    f" ORDER BY ts_ms DESC, first_seq DESC LIMIT {HISTORY}) b{{}}"
)
_AFTER = (
    "SELECT 1, " + _TIMELINE + " FROM signals_decisions"
    " WHERE session_id = ? AND (ts_ms > ? OR (ts_ms = ? AND first_seq >= ?))"
)
EMPTY_HISTORY = b"[]"

_encode = msgspec.json.Encoder().encode


def repeated_router_event(payload: Any) -> tuple[str | None, Any]:
    """(type, payload) of the router event a repeat record (`plaudit.seqmem.REPEAT`) repeats;
    (None, None) when it repeats anything else, which the router's counts leave out."""
    kind = payload.get("type") if isinstance(payload, dict) else None
    inner = payload.get("payload") if isinstance(payload, dict) else None
    if not isinstance(kind, str) or not kind.startswith(PREFIX) or not isinstance(inner, dict):
        return None, None
    return kind, inner


def _value(json_text: str | None) -> Any:
    return None if json_text is None else msgspec.json.decode(json_text)


def text(value: str) -> str:
    """Text as stored: PostgreSQL's text cannot hold NUL, so it is kept as its JSON escape."""
    return value.replace("\x00", "\\u0000") if "\x00" in value else value


class _Tracked(Scanner):
    """The export's scanner, remembering which event (timestamp, position) made each record.

    Records are made one event at a time through the scanner's own code, so the projection
    reads events exactly as the file export does.
    """

    def __init__(self) -> None:
        super().__init__(now_ms=_NEVER_OLD, max_age_ms=_NEVER_OLD, seed=SEED)
        self.made: dict[str, list[tuple[int, int]]] = {DECISION: [], OUTCOME: [], OVERRIDE: []}
        self.missing: list[tuple[int, int, str, str]] = []  # (seq, ts, kind, reason)
        self.ts_of: dict[int, int] = {}

    def _track(self, name: str, records: list[Any], make: Any, meta: list[Any], got: list[Any]):
        # The scanner skips events whose decision id reads as empty (`_s`, its own rule);
        # those are set aside here first, so each record's event is known.
        kept_meta, kept = [], []
        for m, d in zip(meta, got, strict=True):
            did = d.decision_id
            if did if type(did) is str else _s(did):
                kept_meta.append(m)
                kept.append(d)
            else:
                self.missing.append((m[2], m[0], "no_id", ""))
        before = len(records)
        make(kept_meta, kept)
        if len(records) - before != len(kept):
            raise AssertionError("the scanner skipped an event the projection kept")
        self.made[name].extend((m[0], m[2]) for m in kept_meta)

    def _decisions(self, meta: list[Any], decoded: list[Any]) -> None:
        self._track(DECISION, self.out.decisions, super()._decisions, meta, decoded)

    def _outcomes(self, meta: list[Any], decoded: list[Any]) -> None:
        self._track(OUTCOME, self.out.outcomes, super()._outcomes, meta, decoded)

    def _overrides(self, meta: list[Any], decoded: list[Any]) -> None:
        self._track(OVERRIDE, self.out.overrides, super()._overrides, meta, decoded)

    def error(self, line_no: int, reason: str) -> None:
        self.missing.append((line_no, self.ts_of.get(line_no, 0), "error", reason))


def _in_chunks(tx: Tx, sql: str, ids: Iterable[Any]) -> list[tuple[Any, ...]]:
    """`sql` ending in `IN ({})`, run for every chunk of `ids`; all rows found."""
    wanted = list(ids)
    found: list[tuple[Any, ...]] = []
    for i in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[i : i + _ID_CHUNK]
        found.extend(tx.fetchall(sql.format(",".join("?" * len(chunk))), chunk))
    return found


def _by_id(tx: Tx, table: str, cols: str, ids: Iterable[str]) -> dict[str, list[Any]]:
    sql = f"SELECT {cols} FROM {table} WHERE decision_id IN ({{}})"
    return {row[0]: list(row) for row in _in_chunks(tx, sql, ids)}


def decision_rows(tx: Tx, ids: Iterable[str]) -> dict[str, list[Any]]:
    """Whole `signals_decisions` rows of `ids`, blobs as bytes."""
    rows = _by_id(tx, "signals_decisions", _COLS, ids)
    for row in rows.values():
        _bytes(row)
    return rows


def _bytes(row: list[Any]) -> list[Any]:
    for i in _BLOBS:
        if row[i] is not None and type(row[i]) is not bytes:
            row[i] = bytes(row[i])
    return row


_OUTCOME_TYPES = ("TEXT", *["{bigint}"] * 6, "TEXT", "TEXT", "{bigint}", "TEXT", "TEXT")
_OVERRIDE_TYPES = ("TEXT", *["{bigint}"] * 4, "TEXT")
_N_OUTCOME, _N_OVERRIDE = len(_OUTCOME_TYPES), len(_OVERRIDE_TYPES)
#: The three tables' rows of some ids, side by side in one result (the columns of the other
#: two NULL): (decision row, outcome row, override row) per id found. The first SELECT's
#: NULLs are typed, as PostgreSQL needs to match the columns of the SELECTs after it.
_STORED = (
    f"SELECT 0, {_COLS}, "
    + ", ".join(f"CAST(NULL AS {t})" for t in _OUTCOME_TYPES + _OVERRIDE_TYPES)
    + " FROM signals_decisions WHERE decision_id IN ({{0}})"
    f" UNION ALL SELECT 1{', NULL' * len(DECISION_COLUMNS)}, {_OUTCOME_COLS}"
    f"{', NULL' * _N_OVERRIDE} FROM signals_outcomes WHERE decision_id IN ({{{{0}}}})"
    f" UNION ALL SELECT 2{', NULL' * (len(DECISION_COLUMNS) + _N_OUTCOME)}, {_OVERRIDE_COLS}"
    " FROM signals_overrides WHERE decision_id IN ({{0}})"
)
assert len(_OUTCOME_COLS.split(",")) == _N_OUTCOME and len(_OVERRIDE_COLS.split(",")) == _N_OVERRIDE


@functools.cache
def _stored_sql(dialect: str, n: int) -> str:
    return _STORED.format(**DIALECT_WORDS[dialect]).format(",".join("?" * n))


def _stored(tx: Tx, ids: Iterable[str]) -> tuple[dict[str, list[Any]], ...]:
    """`ids`' rows in `signals_decisions`, `signals_outcomes` and `signals_overrides`."""
    found: tuple[dict[str, list[Any]], ...] = ({}, {}, {})
    wanted = list(ids)
    first = 1 + len(DECISION_COLUMNS)
    for i in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[i : i + _ID_CHUNK]
        sql = _stored_sql(tx.dialect, len(chunk))
        for row in tx.fetchall(sql, chunk * 3):
            if row[0] == 0:
                found[0][row[1]] = _bytes(list(row[1:first]))
            elif row[0] == 1:
                found[1][row[first]] = list(row[first : first + _N_OUTCOME])
            else:
                found[2][row[first + _N_OUTCOME]] = list(row[first + _N_OUTCOME :])
    return found


class SignalsProjection:
    name = NAME
    version = VERSION
    trailing = True  # off the write path: see plaudit.builtins
    prefixes = (PREFIX, REPEAT)
    tables = TABLES + CACHE_TABLES

    def create(self, tx: Tx) -> None:
        for table in RETIRED:
            tx.execute(f"DROP TABLE IF EXISTS {table}")
        for sql in _DDL:
            tx.execute(tx.ddl(sql))

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        scanner = _Tracked()
        other: list[tuple[int, int, str, str]] = []
        for ev in events:
            kind, payload = ev.type, ev.payload
            if kind == REPEAT:  # an exact repeat of a line, kept at import: fold it as the line
                kind, payload = repeated_router_event(payload)
                if kind is None:
                    continue
            if ev.ts_ms <= 0:  # outside every age window, as in the reference
                other.append((ev.seq, ev.ts_ms, "old", ""))
            elif kind in (DECISION, OUTCOME, OVERRIDE):
                scanner.ts_of[ev.seq] = ev.ts_ms
                scanner.event(kind, ev.ts_ms, ev.session_id, _encode(payload), ev.seq)
            else:
                other.append((ev.seq, ev.ts_ms, "other", ""))
        scan = scanner.finish()
        other.extend(scanner.missing)
        if other:
            tx.executemany(
                "INSERT INTO signals_other (seq, ts_ms, kind, reason) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (seq) DO NOTHING",
                other,
            )
        ids = {text(r[0]) for r in scan.decisions}
        ids.update(text(r[0]) for r in scan.outcomes)
        ids.update(text(r[0]) for r in scan.overrides)
        if ids:
            _Batch(tx, ids).apply(scan, scanner.made)


class _Batch:
    """One `apply`: the stored state of the ids a batch touches, folded and written back."""

    def __init__(self, tx: Tx, ids: set[str]) -> None:
        self.tx = tx
        # As stored before this batch, read in one statement (one round trip on PostgreSQL).
        self.known, self.outcomes, self.overrides = _stored(tx, ids)
        self.outcomes_before = dict(self.outcomes)  # folding replaces entries, never edits
        self.overrides_before = dict(self.overrides)
        #: Tally keys, as stored, of rows read for being shifted (`_histories`).
        self.shifted_keys: dict[str, tuple[Any, ...] | None] = {}
        #: (old key, new key) of rows whose duplicate flag alone changed (`_duplicates`).
        self.flag_keys: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        #: Hours whose rows this batch changes (their lines, or which lines there are).
        self.hours: set[int] = set()
        self.work: dict[str, list[Any]] = {}  # decision rows to write, as they will be
        self.rejoin: set[str] = set()  # rows whose joined part must be recomputed
        self.folded: set[str] = set()  # ids whose decision this batch folded
        self.touched: dict[str, tuple[int, int]] = {}  # session -> first changed position
        self.conflicts: list[tuple[int, int, str]] = []

    def apply(self, scan: Any, made: dict[str, list[tuple[int, int]]]) -> None:
        self._decisions(scan, made[DECISION])
        changed_o = self._outcomes(scan.outcomes, made[OUTCOME])
        changed_v = self._overrides(scan.overrides, made[OVERRIDE])
        for did in changed_o | changed_v:
            if did not in self.work and did in self.known:
                self.work[did] = list(self.known[did])
            if did in self.work:
                self.rejoin.add(did)
        self._histories()
        old_digests = {self.known[d][DIGEST] for d in self.rejoin if d in self.known}
        for did in self.rejoin:
            self._join(self.work[did])
        for row in self.work.values():
            if row[TAIL] is not None:
                row[REST] = default_rest(
                    row[TAIL], row[HIST], row[OUTCOME_], row[DIGEST], row[PROPENSITY]
                )
        others = self._duplicates(old_digests)
        self._write(changed_o, changed_v, others)

    # -- folding records ----------------------------------------------------------------
    def _touch(self, session: str, key: tuple[int, int]) -> None:
        old = self.touched.get(session)
        if old is None or key < old:
            self.touched[session] = key

    def _decisions(self, scan: Any, made: list[tuple[int, int]]) -> None:
        if not scan.decisions:
            return
        heads = bytes(scan.heads)
        work, known = self.work, self.known
        for rec, (ts, seq) in zip(scan.decisions, made, strict=True):
            did, _, session, chosen, start, cut, end, propensity, b = rec
            did, session, chosen = text(did), text(session), text(chosen)
            head = heads[start:end]
            cut -= start
            if propensity is not None:
                propensity = _encode(propensity).decode()
            prev = work.get(did) or known.get(did)
            if prev is None:
                row = [did, seq, seq, ts, ts, ts, 1, 0, 0, session, chosen, head, cut,
                       propensity, b, EMPTY_HISTORY, None, None, None, None, None, None,
                       None]  # fmt: skip
                self._touch(session, (ts, seq))
            else:
                same = _value(prev[PROPENSITY]) == _value(propensity) and (
                    prev[HEAD][prev[CUT] + 1 :] == head[cut + 1 :]
                )
                self._touch(prev[SESSION], (prev[TS], prev[FIRST]))
                self._touch(session, (ts, prev[FIRST]))
                if not same:
                    self.conflicts.append((seq, ts, f"decision {did}"))
                row = [did, prev[FIRST], seq, ts, min(prev[MIN_TS], ts), max(prev[MAX_TS], ts),
                       prev[N] + 1, prev[SAME] + same, prev[DIFF] + (not same), session,
                       chosen, head, cut, propensity, b, *prev[HIST:]]  # fmt: skip
            if not session:  # decisions without a session have no history, as in the reference
                row[HIST], row[HIST_MIN] = EMPTY_HISTORY, None
            work[did] = row
            self.rejoin.add(did)
            self.folded.add(did)

    def _outcomes(self, records: list[Any], made: list[tuple[int, int]]) -> set[str]:
        state = self.outcomes
        changed = set()
        for rec, (ts, seq) in zip(records, made, strict=True):
            did = text(rec[0])
            value = [text(rec[1]), text(rec[2]), rec[3], text(rec[4]), text(rec[5])]
            prev = state.get(did)
            if prev is None:
                state[did] = [did, seq, ts, ts, 1, 0, 0, *value]
            else:
                same = prev[7:] == value
                if not same:
                    self.conflicts.append((seq, ts, f"outcome {did}"))
                state[did] = [did, seq, min(prev[2], ts), max(prev[3], ts), prev[4] + 1,
                              prev[5] + same, prev[6] + (not same), *value]  # fmt: skip
            changed.add(did)
        return changed

    def _overrides(self, records: list[Any], made: list[tuple[int, int]]) -> set[str]:
        state = self.overrides
        changed = set()
        for (did, task), (ts, seq) in zip(records, made, strict=True):
            did = text(did)
            prev = state.get(did)
            if prev is None:
                state[did] = [did, seq, ts, ts, 1, text(task)]
            else:
                state[did] = [did, seq, min(prev[2], ts), max(prev[3], ts), prev[4] + 1, text(task)]
            changed.add(did)
        return changed

    # -- derived columns ----------------------------------------------------------------
    def _histories(self) -> None:
        """Recompute the history of every decision at or after a changed position in its
        session's timeline: new and moved decisions, and those an insertion or a move shifted
        (they are read from the store and written too)."""
        sessions = [(s, key) for s, key in self.touched.items() if s]
        if not sessions:
            return
        work = self.work
        in_session: dict[str, list[tuple[Any, ...]]] = {}
        for r in work.values():
            in_session.setdefault(r[SESSION], []).append((r[ID], r[CHOSEN], r[TS], r[FIRST]))
        moved: dict[str, tuple[bytes, Any]] = {}
        for i in range(0, len(sessions), _SESSION_CHUNK):
            chunk = sessions[i : i + _SESSION_CHUNK]
            before: dict[str, list[tuple[Any, ...]]] = {s: [] for s, _ in chunk}
            after: dict[str, list[tuple[Any, ...]]] = {s: [] for s, _ in chunk}
            for row in self._timelines(chunk):
                part, session, did = row[0], row[1], row[2]
                if part == 0:
                    before[session].append(row[2:])
                elif did not in work:  # a row being written is taken as it will be
                    after[session].append(row[2:])
            for session, key in chunk:
                fresh = [e for e in in_session.get(session, ()) if (e[2], e[3]) >= key]
                head = sorted(before[session], key=_position)
                rest = sorted([*after[session], *fresh], key=_position)
                timeline = [*head, *rest]
                encoded: list[bytes | None] = [None] * len(timeline)
                for j in range(len(head), len(timeline)):
                    entry = timeline[j]
                    history, oldest = encode_history(timeline, j, HISTORY, encoded)
                    row = work.get(entry[0])
                    if row is not None and len(entry) == 4:
                        row[HIST], row[HIST_MIN] = history, oldest
                    elif bytes(entry[4]) != history or entry[5] != oldest:
                        moved[entry[0]] = (history, oldest)
        if moved:
            for did, row in decision_rows(self.tx, moved).items():
                self.shifted_keys[did] = tally_key(row)
                row[HIST], row[HIST_MIN] = moved[did]
                work[did] = row

    def _timelines(self, chunk: list[tuple[str, tuple[int, int]]]) -> list[tuple[Any, ...]]:
        params: list[Any] = []
        for session, (ts, first) in chunk:
            params += (session, ts, ts, first) * 2
        return self.tx.fetchall(_timelines_sql(len(chunk)), params)

    def _join(self, row: list[Any]) -> None:
        """The outcome's part of a decision's row: tail, digest and where its override came
        from (none without an outcome; only the outcome without a chosen task)."""
        did = row[ID]
        outcome = self.outcomes.get(did)
        row[TAIL] = row[DIGEST] = row[HOW] = row[REST] = row[DUP] = None
        if outcome is None:  # no outcome yet
            row[OUTCOME_] = None
            return
        row[OUTCOME_] = outcome[8]
        chosen = row[CHOSEN]
        if not chosen:  # the reference skips rows without a chosen task
            return
        override = self.overrides.get(did)
        tail, how = joined_tail(chosen, outcome[7:12], override[5] if override else None)
        row[TAIL], row[HOW] = tail, how
        row[DIGEST] = row_digest(row[HEAD][row[CUT] + 1 :], tail, row[TS])

    def _duplicates(self, old_digests: set[bytes | None]) -> list[tuple[int, str]]:
        """Flag the rows that repeat an earlier row's digest (`dup`) in every digest group a
        changed row left or joined; returns the flags of rows not being written anyway."""
        work = self.work
        digests = {row[DIGEST] for row in work.values() if row[ID] in self.rejoin}
        digests = {d for d in digests | old_digests if d is not None}
        if not digests:
            return []
        blob = self.tx.blob
        groups: dict[bytes, list[tuple[int, int, str, Any]]] = {}
        stored: dict[str, tuple[Any, ...]] = {}
        sql = (
            "SELECT digest, ts_ms, first_seq, decision_id, dup, outcome, chosen_task, bucket,"
            " overridden FROM signals_decisions WHERE digest IN ({})"
        )
        for digest, ts, first, did, dup, *key in _in_chunks(
            self.tx, sql, [blob(d) for d in digests]
        ):
            if did not in work:
                groups.setdefault(bytes(digest), []).append((ts, first, did, dup))
                stored[did] = tuple(key)
        for row in work.values():
            if row[DIGEST] in digests:
                groups.setdefault(row[DIGEST], []).append((row[TS], row[FIRST], row[ID], None))
        # Rows with one digest share their timestamp (it is part of the digest), so the first
        # of them in export order is the same in every age window: the others are duplicates.
        others = []
        for group in groups.values():
            group.sort()
            for i, (ts, _, did, dup) in enumerate(group):
                flag = int(i > 0)
                row = work.get(did)
                if row is not None:
                    row[DUP] = flag
                elif dup != flag:
                    others.append((flag, did))
                    self.hours.add(ts // HOUR_MS)
                    outcome, chosen, b, how = stored[did]
                    self.flag_keys.append(
                        ((outcome, chosen, b, how, dup), (outcome, chosen, b, how, flag))
                    )
        return others

    def _write(self, changed_o: set[str], changed_v: set[str], others: list[Any]) -> None:
        tx = self.tx
        blob = tx.blob
        if self.work:
            rows = []
            for row in self.work.values():
                out = list(row)
                for i in _BLOBS:
                    if out[i] is not None:
                        out[i] = blob(out[i])
                rows.append(out)
            tx.executemany(_UPSERT_DECISION, rows)
        if changed_o:
            tx.executemany(_UPSERT_OUTCOME, [self.outcomes[d] for d in changed_o])
        if changed_v:
            tx.executemany(_UPSERT_OVERRIDE, [self.overrides[d] for d in changed_v])
        if others:
            tx.executemany("UPDATE signals_decisions SET dup = ? WHERE decision_id = ?", others)
        added = self._add_up(changed_o, changed_v)
        hours = self.hours
        for did, row in self.work.items():
            hours.add(row[TS] // HOUR_MS)
            before = self.known.get(did)
            if before is not None:
                hours.add(before[TS] // HOUR_MS)
        if added[-1] is not None and not hours:  # e.g. an outcome whose decision is to come
            hours.add(added[-1] // HOUR_MS)
        if hours:
            first, *rest = sorted(hours)
            zeros = [0] * len(_SUMS)
            tx.executemany(_ADD_HOURS, [(first, *added), *((h, *zeros, None) for h in rest)])
        if self.conflicts:
            tx.executemany(
                "INSERT INTO signals_conflicts (seq, ts_ms, what) VALUES (?, ?, ?)"
                " ON CONFLICT (seq) DO NOTHING",
                self.conflicts,
            )

    def _add_up(self, changed_o: set[str], changed_v: set[str]) -> list[Any]:
        """Bring `signals_tally` up to date by what this batch changed; returns what it added
        to the totals (`_SUMS` and the oldest timestamp), for `signals_hours`."""
        sums: list[Any] = [0] * len(_SUMS)
        oldest = []
        decided = [self.work[d] for d in self.work if d in self.folded]
        if decided:
            old = [self.known.get(row[ID]) for row in decided]
            sums[0:4] = _delta(decided, old, (N, SAME, DIFF))
            oldest.append(min(row[MIN_TS] for row in decided))
        if changed_o:
            new = [self.outcomes[d] for d in changed_o]
            old = [self.outcomes_before.get(d) for d in changed_o]
            sums[4:8] = _delta(new, old, (4, 5, 6))
            oldest.append(min(row[2] for row in new))
        if changed_v:
            new = [self.overrides[d] for d in changed_v]
            old = [self.overrides_before.get(d) for d in changed_v]
            sums[8:10] = _delta(new, old, (4,))
            oldest.append(min(row[2] for row in new))
        change: dict[tuple[Any, ...], int] = {}

        def move(before: tuple[Any, ...] | None, after: tuple[Any, ...] | None) -> None:
            if before != after:
                if before is not None:
                    change[before] = change.get(before, 0) - 1
                if after is not None:
                    change[after] = change.get(after, 0) + 1

        for did, row in self.work.items():
            if did in self.shifted_keys:
                before = self.shifted_keys[did]
            else:
                known = self.known.get(did)
                before = None if known is None else tally_key(known)
            move(before, tally_key(row))
        for before, after in self.flag_keys:
            move(_key(*before), _key(*after))
        deltas = [(*key, n) for key, n in change.items() if n]
        if deltas:
            self.tx.executemany(_ADD_TALLY, deltas)
            emptied = [d[:5] for d in deltas if d[5] < 0]
            if emptied:
                self.tx.executemany(_EMPTY_TALLY, emptied)
        return [*sums, min(oldest) if oldest else None]


def _delta(new: list[list[Any]], old: list[Any], sums: tuple[int, ...]) -> list[int]:
    """Ids added, and each summed column's change, from the rows `old` to `new`."""
    added = sum(1 for o in old if o is None)
    return [
        added,
        *(sum(r[i] for r in new) - sum(o[i] for o in old if o is not None) for i in sums),
    ]


def _key(outcome: Any, chosen: Any, b: Any, how: Any, dup: Any) -> tuple[Any, ...] | None:
    if outcome is None:
        return None
    return (outcome, chosen, b, -1 if how is None else how, -1 if dup is None else dup)


def tally_key(row: list[Any]) -> tuple[Any, ...] | None:
    """Where a decision row counts in `signals_tally` (None: it has no outcome)."""
    return _key(row[OUTCOME_], row[CHOSEN], row[BUCKET], row[HOW], row[DUP])


@functools.cache
def _timelines_sql(sessions: int) -> str:
    return " UNION ALL ".join(f"{_BEFORE.format(n)} UNION ALL {_AFTER}" for n in range(sessions))


def _position(entry: tuple[Any, ...]) -> tuple[int, int]:
    return entry[2], entry[3]


def encode_history(
    entries: Sequence[tuple[Any, ...]], idx: int, k: int, encoded: list[bytes | None] | None = None
) -> tuple[bytes, Any]:
    """`event_history` of the decision at `idx` in its session's timeline of (decision id,
    chosen task, ts_ms, ...) entries, and the oldest shown entry's ts_ms (None when empty).
    `encoded` (None per entry at first) keeps each entry's encoding for the next rows, which
    show it too."""
    lo = max(0, idx - k)
    if lo >= idx:
        return EMPTY_HISTORY, None
    parts = []
    for j in range(lo, idx):
        entry = None if encoded is None else encoded[j]
        if entry is None:
            entry = history_entry(*entries[j][:3])
            if encoded is not None:
                encoded[j] = entry
        parts.append(t_minus_prefix(idx - j) + entry)
    return b"[%b]" % b",".join(parts), entries[lo][2]


_DEFAULT_REWARDS = {name: _encode(value) for name, value in REWARDS.items()}
_NO_REWARD = _encode(0.0)
#: A row's line after its head, for the export's default options (`END_FORMAT` less the head).
REST_FORMAT = b',%b,"event_history":%b,"reward":%b,"dedupe_id":"%b","propensity":%b}\n'


def default_rest(
    tail: bytes, history: bytes, outcome: str, digest: bytes, propensity: Any
) -> bytes:
    """The row's JSON line after its head, for the export's default options."""
    return REST_FORMAT % (
        tail,
        history,
        _DEFAULT_REWARDS.get(outcome, _NO_REWARD),
        binascii.hexlify(digest),
        b"null" if propensity is None else propensity.encode(),
    )


#: Where a row's `manual_override_task` came from (the `overridden` column).
NOT_OVERRIDDEN, BY_OUTCOME, BY_OVERRIDE = 0, 1, 2


def joined_tail(
    chosen: str, outcome_fields: Sequence[Any], override_task: str | None
) -> tuple[bytes, int]:
    """The outcome's part of a row, and where its `manual_override_task` came from: the
    outcome, else the last override event."""
    executed, outcome, ttr, error_kind, manual = outcome_fields
    if manual:
        task, how = manual, BY_OUTCOME
    elif override_task:
        task, how = override_task, BY_OVERRIDE
    else:
        task, how = "", NOT_OVERRIDDEN
    return encode_tail(chosen, executed, outcome, ttr, error_kind, task), how
