"""The `signals` projection: router decisions, outcomes and overrides joined as they arrive.

Each decision id has one row in `signals_decisions`, holding what the export writes for it:
the row's first half as JSON (up to `confidence`), its split bucket, its `event_history` for
the default history size, and, once it has an outcome, the outcome's part of the row and its
`dedupe_id` digest. The log appends call `apply` in their own transaction, so an export reads
finished rows and pays for the rows it writes, not for the log's history.

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
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from plaudit.events import StoredEvent
from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE, PREFIX
from plaudit.signals.join import (
    END_FORMAT,
    REWARDS,
    encode_tail,
    history_entry,
    row_digest,
    t_minus_prefix,
)
from plaudit.signals.scan import Scanner
from plaudit.store.backend import Tx

NAME = "signals"
VERSION = 1
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
)
_ID_CHUNK = 500
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
        line {blob},
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
)

_DECISION_COLS = (
    "decision_id, first_seq, seq, ts_ms, min_ts, max_ts, n, identical, conflicting,"
    " session_id, chosen_task, head, cut, propensity, bucket"
)
_UPSERT_DECISION = (
    f"INSERT INTO signals_decisions ({_DECISION_COLS}, history)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (decision_id) DO UPDATE SET seq = excluded.seq, ts_ms = excluded.ts_ms,"
    " min_ts = excluded.min_ts, max_ts = excluded.max_ts, n = excluded.n,"
    " identical = excluded.identical, conflicting = excluded.conflicting,"
    " session_id = excluded.session_id, chosen_task = excluded.chosen_task,"
    " head = excluded.head, cut = excluded.cut, propensity = excluded.propensity"
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
_UPSERT_OVERRIDE = (
    "INSERT INTO signals_overrides (decision_id, seq, min_ts, max_ts, n, override_task)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (decision_id) DO UPDATE SET seq = excluded.seq,"
    " min_ts = excluded.min_ts, max_ts = excluded.max_ts, n = excluded.n,"
    " override_task = excluded.override_task"
)

_encode = msgspec.json.Encoder().encode


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
        for m, d in zip(meta, got, strict=True):
            before = len(records)
            make([m], [d])
            if len(records) > before:
                self.made[name].append((m[0], m[2]))
            else:
                self.missing.append((m[2], m[0], "no_id", ""))

    def _decisions(self, meta: list[Any], decoded: list[Any]) -> None:
        self._track(DECISION, self.out.decisions, super()._decisions, meta, decoded)

    def _outcomes(self, meta: list[Any], decoded: list[Any]) -> None:
        self._track(OUTCOME, self.out.outcomes, super()._outcomes, meta, decoded)

    def _overrides(self, meta: list[Any], decoded: list[Any]) -> None:
        self._track(OVERRIDE, self.out.overrides, super()._overrides, meta, decoded)

    def error(self, line_no: int, reason: str) -> None:
        self.missing.append((line_no, self.ts_of.get(line_no, 0), "error", reason))


def _fetch(tx: Tx, table: str, cols: str, ids: Iterable[str]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    wanted = list(ids)
    for i in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[i : i + _ID_CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in tx.fetchall(f"SELECT {cols} FROM {table} WHERE decision_id IN ({marks})", chunk):
            found[row[0]] = list(row)
    return found


class SignalsProjection:
    name = NAME
    version = VERSION
    prefixes = (PREFIX,)
    tables = TABLES

    def create(self, tx: Tx) -> None:
        for sql in _DDL:
            tx.execute(tx.ddl(sql))

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        scanner = _Tracked()
        other: list[tuple[int, int, str, str]] = []
        for ev in events:
            if ev.ts_ms <= 0:  # outside every age window, as in the reference
                other.append((ev.seq, ev.ts_ms, "old", ""))
            elif ev.type in (DECISION, OUTCOME, OVERRIDE):
                scanner.ts_of[ev.seq] = ev.ts_ms
                scanner.event(ev.type, ev.ts_ms, ev.session_id, _encode(ev.payload), ev.seq)
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
        conflicts: list[tuple[int, int, str]] = []
        touched: dict[str, tuple[int, int]] = {}
        changed = self._decisions(tx, scan, scanner.made[DECISION], touched, conflicts)
        changed |= self._outcomes(tx, scan.outcomes, scanner.made[OUTCOME], conflicts)
        changed |= self._overrides(tx, scan.overrides, scanner.made[OVERRIDE])
        if conflicts:
            tx.executemany(
                "INSERT INTO signals_conflicts (seq, ts_ms, what) VALUES (?, ?, ?)"
                " ON CONFLICT (seq) DO NOTHING",
                conflicts,
            )
        moved: set[str] = set()
        for session, key in touched.items():
            if session:
                moved |= _rebuild_history(tx, session, key)
        if "" in touched:  # decisions without a session have no history, as in the reference
            moved |= _clear_history(tx, changed)
        _rebuild_rows(tx, changed, moved)

    # -- folding records ----------------------------------------------------------------
    @staticmethod
    def _decisions(
        tx: Tx,
        scan: Any,
        made: list[tuple[int, int]],
        touched: dict[str, tuple[int, int]],
        conflicts: list[tuple[int, int, str]],
    ) -> set[str]:
        if not scan.decisions:
            return set()
        heads = bytes(scan.heads)
        state = _fetch(
            tx, "signals_decisions", _DECISION_COLS, {text(r[0]) for r in scan.decisions}
        )

        def touch(session: str, key: tuple[int, int]) -> None:
            old = touched.get(session)
            if old is None or key < old:
                touched[session] = key

        for rec, (ts, seq) in zip(scan.decisions, made, strict=True):
            did, _, session, chosen, start, cut, end, propensity, b = rec
            did, session, chosen = text(did), text(session), text(chosen)
            head = heads[start:end]
            cut -= start
            if propensity is not None:
                propensity = _encode(propensity).decode()
            prev = state.get(did)
            if prev is None:
                state[did] = [did, seq, seq, ts, ts, ts, 1, 0, 0, session, chosen, head, cut,
                              propensity, b]  # fmt: skip
                touch(session, (ts, seq))
                continue
            same = _value(prev[13]) == _value(propensity) and (
                bytes(prev[11])[prev[12] + 1 :] == head[cut + 1 :]
            )
            touch(prev[9], (prev[3], prev[1]))
            touch(session, (ts, prev[1]))
            if not same:
                conflicts.append((seq, ts, f"decision {did}"))
            state[did] = [did, prev[1], seq, ts, min(prev[4], ts), max(prev[5], ts), prev[6] + 1,
                          prev[7] + same, prev[8] + (not same), session, chosen, head, cut,
                          propensity, b]  # fmt: skip
        blob = tx.blob
        tx.executemany(
            _UPSERT_DECISION,
            [(*r[:11], blob(bytes(r[11])), *r[12:], blob(b"[]")) for r in state.values()],
        )
        return set(state)

    @staticmethod
    def _outcomes(
        tx: Tx,
        records: list[Any],
        made: list[tuple[int, int]],
        conflicts: list[tuple[int, int, str]],
    ) -> set[str]:
        if not records:
            return set()
        state = _fetch(tx, "signals_outcomes", _OUTCOME_COLS, {text(r[0]) for r in records})
        for rec, (ts, seq) in zip(records, made, strict=True):
            did = text(rec[0])
            value = [text(rec[1]), text(rec[2]), rec[3], text(rec[4]), text(rec[5])]
            prev = state.get(did)
            if prev is None:
                state[did] = [did, seq, ts, ts, 1, 0, 0, *value]
                continue
            same = prev[7:] == value
            if not same:
                conflicts.append((seq, ts, f"outcome {did}"))
            state[did] = [did, seq, min(prev[2], ts), max(prev[3], ts), prev[4] + 1,
                          prev[5] + same, prev[6] + (not same), *value]  # fmt: skip
        tx.executemany(_UPSERT_OUTCOME, list(state.values()))
        return set(state)

    @staticmethod
    def _overrides(tx: Tx, records: list[Any], made: list[tuple[int, int]]) -> set[str]:
        if not records:
            return set()
        state = _fetch(
            tx,
            "signals_overrides",
            "decision_id, seq, min_ts, max_ts, n, override_task",
            {text(r[0]) for r in records},
        )
        for (did, task), (ts, seq) in zip(records, made, strict=True):
            did = text(did)
            prev = state.get(did)
            if prev is None:
                state[did] = [did, seq, ts, ts, 1, text(task)]
            else:
                state[did] = [did, seq, min(prev[2], ts), max(prev[3], ts), prev[4] + 1, text(task)]
        tx.executemany(_UPSERT_OVERRIDE, list(state.values()))
        return set(state)


# -- derived columns ----------------------------------------------------------------------
def encode_history(entries: Sequence[tuple[Any, ...]], idx: int, k: int) -> tuple[bytes, Any]:
    """`event_history` of the decision at `idx` in its session's timeline of (decision id,
    chosen task, ts_ms) entries, and the oldest shown entry's ts_ms (None when empty)."""
    lo = max(0, idx - k)
    if lo >= idx:
        return b"[]", None
    parts = [t_minus_prefix(idx - j) + history_entry(*entries[j][:3]) for j in range(lo, idx)]
    return b"[%b]" % b",".join(parts), entries[lo][2]


def _rebuild_history(tx: Tx, session: str, key: tuple[int, int]) -> set[str]:
    """Recompute the stored history of the session's decisions from `key` (ts, first seq) on:
    an insertion, a move or a changed task there changes what they show. Returns the ids
    whose history changed."""
    ts, first = key
    before = tx.fetchall(
        "SELECT decision_id, chosen_task, ts_ms FROM signals_decisions WHERE session_id = ?"
        " AND (ts_ms < ? OR (ts_ms = ? AND first_seq < ?))"
        f" ORDER BY ts_ms DESC, first_seq DESC LIMIT {HISTORY}",
        (session, ts, ts, first),
    )
    after = tx.fetchall(
        "SELECT decision_id, chosen_task, ts_ms, history, hist_min_ts FROM signals_decisions"
        " WHERE session_id = ? AND (ts_ms > ? OR (ts_ms = ? AND first_seq >= ?))"
        " ORDER BY ts_ms, first_seq",
        (session, ts, ts, first),
    )
    timeline = [*reversed(before), *after]
    updates = []
    for i in range(len(before), len(timeline)):
        history, oldest = encode_history(timeline, i, HISTORY)
        row = timeline[i]
        if bytes(row[3]) != history or row[4] != oldest:
            updates.append((tx.blob(history), oldest, row[0]))
    if updates:
        tx.executemany(
            "UPDATE signals_decisions SET history = ?, hist_min_ts = ? WHERE decision_id = ?",
            updates,
        )
    return {u[2] for u in updates}


def _clear_history(tx: Tx, ids: set[str]) -> set[str]:
    """Empty the history of those of `ids` that now have no session (one may have moved there
    from a session); returns them."""
    cleared = set()
    for did in sorted(ids):
        row = tx.fetchone(
            "SELECT session_id, hist_min_ts FROM signals_decisions WHERE decision_id = ?", (did,)
        )
        if row is not None and row[0] == "" and row[1] is not None:
            cleared.add(did)
    tx.executemany(
        "UPDATE signals_decisions SET history = ?, hist_min_ts = NULL WHERE decision_id = ?",
        [(tx.blob(b"[]"), did) for did in cleared],
    )
    return cleared


_JOINED = (
    "SELECT d.decision_id, d.digest, d.ts_ms, d.chosen_task, d.head, d.cut, d.history,"
    " d.propensity,"
    " o.task_executed, o.outcome, o.ttr, o.error_kind, o.manual_override_task, v.override_task"
    " FROM signals_decisions d"
    " LEFT JOIN signals_outcomes o ON o.decision_id = d.decision_id"
    " LEFT JOIN signals_overrides v ON v.decision_id = d.decision_id"
)
_DEFAULT_REWARDS = {name: _encode(value) for name, value in REWARDS.items()}
_NO_REWARD = _encode(0.0)


def default_line(
    head: bytes, tail: bytes, history: bytes, outcome: str, digest: bytes, propensity: Any
) -> bytes:
    """The row's JSON line for the export's default options."""
    return END_FORMAT % (
        head,
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


def _rebuild_rows(tx: Tx, changed: set[str], moved: set[str]) -> None:
    """Recompute the joined part (outcome, tail, digest) of the changed decisions' rows, the
    default line of those and of the ones whose history moved, and which rows repeat an
    earlier row's digest (`dup`)."""
    wanted = sorted(changed | moved)
    if not wanted:
        return
    updates = []
    digests: set[bytes] = set()
    blob = tx.blob
    for i in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[i : i + _ID_CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in tx.fetchall(f"{_JOINED} WHERE d.decision_id IN ({marks})", chunk):
            did, old, ts, chosen, head, cut, history, propensity, *fields, override_task = row
            if old is not None:
                digests.add(bytes(old))
            outcome = fields[1]
            if outcome is None:  # no outcome yet
                updates.append((None, None, None, None, None, did))
            elif not chosen:  # the reference skips rows without a chosen task
                updates.append((outcome, None, None, None, None, did))
            else:
                head = bytes(head)
                tail, how = joined_tail(chosen, fields, override_task)
                digest = row_digest(head[cut + 1 :], tail, ts)
                digests.add(digest)
                line = default_line(head, tail, bytes(history), outcome, digest, propensity)
                updates.append((outcome, blob(tail), blob(digest), how, blob(line), did))
    tx.executemany(
        "UPDATE signals_decisions SET outcome = ?, tail = ?, digest = ?, overridden = ?,"
        " line = ?, dup = NULL WHERE decision_id = ?",
        updates,
    )
    # Rows with one digest share their timestamp (it is part of the digest), so the first of
    # them in export order is the same in every age window: the others are duplicates.
    flags = []
    for digest in digests:
        group = tx.fetchall(
            "SELECT decision_id FROM signals_decisions WHERE digest = ? ORDER BY ts_ms, first_seq",
            (blob(digest),),
        )
        flags.extend((int(i > 0), did) for i, (did,) in enumerate(group))
    tx.executemany("UPDATE signals_decisions SET dup = ? WHERE decision_id = ?", flags)
