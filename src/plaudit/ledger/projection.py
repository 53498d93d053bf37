"""The `ledger` projection: balances, per-category and per-session sums, sources, checkpoints and
the halt flag, folded from ledger events inside the append transaction.

`apply` reads only the events, its own tables and the log's id index, so `plaudit rebuild`
reproduces it exactly.

An audit's *amendment* (an `audit_correction` whose payload names the transaction it
`amends`) is folded into that transaction's figures: its category, session, source record,
reward/penalty split and success count follow the amended points, as if the transaction had
been recorded with them; the amendment itself is a row of `ledger_tx` (category
`audit_correction`, `amends` set) that counts in the total only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plaudit.events import StoredEvent, encode_json
from plaudit.ledger import eventtypes as et
from plaudit.store.backend import Tx

TABLES = (
    "ledger_tx",
    "ledger_state",
    "ledger_categories",
    "ledger_sessions",
    "ledger_sources",
    "ledger_checkpoints",
    "ledger_incidents",
    "ledger_source_sums",
    "ledger_jobs",
)

_DDL = (
    """CREATE TABLE IF NOT EXISTS ledger_tx (
        seq {bigint} PRIMARY KEY,
        id TEXT NOT NULL,
        ts_ms {bigint} NOT NULL,
        category TEXT NOT NULL,
        type TEXT NOT NULL,
        points {bigint} NOT NULL,
        running_total {bigint} NOT NULL,
        verified INTEGER NOT NULL,
        source_kind TEXT,
        source_id TEXT,
        action TEXT NOT NULL,
        session TEXT,
        kind TEXT NOT NULL,
        imported TEXT,
        amended {bigint} NOT NULL DEFAULT 0,
        amends TEXT
    )""",
    # `transactions()` lists newest first by date (ties by position), whole or by category.
    "CREATE INDEX IF NOT EXISTS ledger_tx_time ON ledger_tx (ts_ms, seq)",
    "CREATE INDEX IF NOT EXISTS ledger_tx_category ON ledger_tx (category, ts_ms, seq)",
    "CREATE INDEX IF NOT EXISTS ledger_tx_session ON ledger_tx (session, seq)",
    """CREATE TABLE IF NOT EXISTS ledger_state (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        total {bigint} NOT NULL,
        rewards {bigint} NOT NULL,
        penalties {bigint} NOT NULL,
        tx_count {bigint} NOT NULL,
        actions_total {bigint} NOT NULL,
        actions_successful {bigint} NOT NULL,
        actions_failed {bigint} NOT NULL,
        unverified {bigint} NOT NULL,
        last_running_total {bigint} NOT NULL,
        carry_total {bigint} NOT NULL,
        carry_rewards {bigint} NOT NULL,
        carry_penalties {bigint} NOT NULL,
        current_session TEXT,
        halted INTEGER NOT NULL,
        halt_reason TEXT,
        halt_kind TEXT,
        halted_ms {bigint},
        last_reconcile_ms {bigint},
        last_reconcile_count {bigint} NOT NULL,
        last_checkpoint_count {bigint} NOT NULL,
        unsourced_points {bigint} NOT NULL,
        unsourced_count {bigint} NOT NULL,
        carry_actions {bigint} NOT NULL,
        carry_successful {bigint} NOT NULL,
        carry_failed {bigint} NOT NULL,
        carry_permission_micro {bigint} NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_categories (
        category TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        points {bigint} NOT NULL,
        pos {bigint} NOT NULL,
        neg {bigint} NOT NULL,
        n {bigint} NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_sessions (
        session TEXT PRIMARY KEY,
        label TEXT,
        started_ms {bigint},
        ended_ms {bigint},
        start_seq {bigint},
        total {bigint} NOT NULL,
        pos {bigint} NOT NULL,
        neg {bigint} NOT NULL,
        n {bigint} NOT NULL,
        carry_total {bigint} NOT NULL,
        carry_rewards {bigint} NOT NULL,
        carry_penalties {bigint} NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_sources (
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        file TEXT NOT NULL,
        record TEXT NOT NULL,
        seq {bigint} NOT NULL,
        deleted INTEGER NOT NULL,
        PRIMARY KEY (kind, key)
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_source_sums (
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        pos {bigint} NOT NULL,
        neg {bigint} NOT NULL,
        corr {bigint} NOT NULL,
        n {bigint} NOT NULL,
        PRIMARY KEY (kind, key)
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_jobs (
        job TEXT PRIMARY KEY,
        last_ms {bigint} NOT NULL,
        last_count {bigint} NOT NULL,
        last_key TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_checkpoints (
        seq {bigint} PRIMARY KEY,
        through_seq {bigint} NOT NULL,
        head_hash TEXT NOT NULL,
        total {bigint} NOT NULL,
        tx_count {bigint} NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS ledger_incidents (
        seq {bigint} PRIMARY KEY,
        id TEXT NOT NULL,
        ts_ms {bigint} NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL
    )""",
)

_STATE_COLS = (
    "total",
    "rewards",
    "penalties",
    "tx_count",
    "actions_total",
    "actions_successful",
    "actions_failed",
    "unverified",
    "last_running_total",
    "carry_total",
    "carry_rewards",
    "carry_penalties",
    "current_session",
    "halted",
    "halt_reason",
    "halt_kind",
    "halted_ms",
    "last_reconcile_ms",
    "last_reconcile_count",
    "last_checkpoint_count",
    "unsourced_points",
    "unsourced_count",
    "carry_actions",
    "carry_successful",
    "carry_failed",
    "carry_permission_micro",
)
_NULLABLE = ("current_session", "halt_reason", "halt_kind", "halted_ms", "last_reconcile_ms")
#: Carried-over history a progress.json import brings (payload `carry` -> state column).
_CARRY = {
    "total": "carry_total",
    "rewards": "carry_rewards",
    "penalties": "carry_penalties",
    "actions": "carry_actions",
    "successful": "carry_successful",
    "failed": "carry_failed",
    "permission_micro": "carry_permission_micro",
}
_STATE_SELECT = f"SELECT {', '.join(_STATE_COLS)} FROM ledger_state WHERE one = 1"


def read_state(tx: Tx) -> dict[str, Any] | None:
    row = tx.fetchone(_STATE_SELECT)
    return None if row is None else dict(zip(_STATE_COLS, row, strict=True))


def _int(value: Any) -> int:
    return int(value) if type(value) is int else 0


def _pos(points: int) -> int:
    return points if points > 0 else 0


def _amended_row(tx: Tx, amends: Any) -> tuple[Any, ...] | None:
    """The transaction an amendment names, as the projection holds it (None: not found)."""
    from plaudit.store.view import LogView

    target = amends.get("id") if isinstance(amends, dict) else None
    if not isinstance(target, str):
        return None
    seq = LogView(tx).positions([target]).get(target)
    if seq is None:
        return None
    return tx.fetchone(
        "SELECT seq, category, type, points, amended, session, source_kind, source_id, kind"
        " FROM ledger_tx WHERE seq = ? AND id = ?",
        (seq, target),
    )


class LedgerProjection:
    name = "ledger"
    version = 4
    prefixes = (et.PREFIX,)
    tables = TABLES

    def create(self, tx: Tx) -> None:
        for stmt in _DDL:
            tx.execute(tx.ddl(stmt))
        zeros = ", ".join("?" for _ in _STATE_COLS)
        values: list[Any] = [0] * len(_STATE_COLS)
        for i, col in enumerate(_STATE_COLS):
            if col in _NULLABLE:
                values[i] = None
        tx.execute(
            f"INSERT INTO ledger_state (one, {', '.join(_STATE_COLS)}) VALUES (1, {zeros}) "
            "ON CONFLICT (one) DO NOTHING",
            values,
        )

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        state = read_state(tx)
        if state is None:  # the row was deleted behind plaudit's back: start from zero again
            self.create(tx)
            state = read_state(tx)
            assert state is not None
        acc = _Pending()
        # The hot path (transactions) keeps its counters in locals, written back at the end.
        total, rewards, penalties = state["total"], state["rewards"], state["penalties"]
        count, last_running = state["tx_count"], state["last_running_total"]
        actions, successes = state["actions_total"], state["actions_successful"]
        failures, unverified = state["actions_failed"], state["unverified"]
        uns_points, uns_count = state["unsourced_points"], state["unsourced_count"]
        tx_rows, cats, sessions, src_sums = acc.tx_rows, acc.cats, acc.sessions, acc.src_sums
        for ev in events:
            p = ev.payload
            t = ev.type
            if t == et.TRANSACTION:
                points = _int(p.get("points"))
                kind = p.get("kind", "record")
                src = p.get("source")
                session = p.get("session")
                if not isinstance(session, str):
                    session = None
                category = str(p.get("category", ""))
                ttype = str(p.get("type", "reward"))
                verified = bool(p.get("verified"))
                running = _int(p.get("running_total"))
                has_src = isinstance(src, dict)
                skind = str(src.get("kind")) if has_src else None
                sid = str(src.get("id")) if has_src else None
                target = None
                if kind == "audit" and "amends" in p:
                    acc.flush(tx)  # the amended row and its sums, in the tables
                    target = _amended_row(tx, p["amends"])
                tx_rows.append(
                    (
                        ev.seq,
                        ev.id,
                        ev.ts_ms,
                        category,
                        ttype,
                        points,
                        running,
                        int(verified),
                        skind,
                        sid,
                        str(p.get("action", "")),
                        session,
                        str(kind),
                        encode_json(p["imported"]) if isinstance(p.get("imported"), dict) else None,
                        None if target is None else p["amends"]["id"],
                    )
                )
                if target is not None:  # folded into the amended transaction's figures
                    d_pos, d_neg, d_ok, d_failed = acc.fold_amendment(tx, target, points)
                    total += points
                    rewards += d_pos
                    penalties += d_neg
                    count += 1
                    last_running = running
                    successes += d_ok
                    failures += d_failed
                    if target[6] is None:  # the amended transaction had no source record
                        uns_points += points
                    continue
                total += points
                pos = points if points > 0 else 0
                neg = points - pos
                rewards += pos
                penalties += neg
                count += 1
                last_running = running
                if kind in et.ACTION_KINDS:
                    actions += 1
                    if points > 0:
                        successes += 1
                    elif points < 0:
                        failures += 1
                    if not verified:
                        unverified += 1
                carry = p.get("carry")
                if isinstance(carry, dict):
                    for field, col in _CARRY.items():
                        state[col] += _int(carry.get(field))
                c = cats.get(category)
                if c is None:
                    c = cats[category] = [ttype, 0, 0, 0]
                c[1] += pos
                c[2] += neg
                c[3] += 1
                if session is not None:
                    ss = sessions.get(session)
                    if ss is None:
                        ss = sessions[session] = [0, 0, 0]
                    ss[0] += pos
                    ss[1] += neg
                    ss[2] += 1
                if has_src:
                    key = (skind, sid)
                    sums = src_sums.get(key)
                    if sums is None:
                        sums = src_sums[key] = [0, 0, 0, 0]
                    if kind == "audit":  # a correction counts whatever its sign
                        sums[2] += points
                    else:
                        sums[0] += pos
                        sums[1] += neg
                    sums[3] += 1
                else:
                    uns_points += points
                    uns_count += 1
            elif t == et.SESSION_START:
                acc.flush(tx)
                sid = str(p.get("session", ev.session_id))
                carry = p.get("carry") if isinstance(p.get("carry"), dict) else {}
                tx.execute(
                    "INSERT INTO ledger_sessions (session, label, started_ms, ended_ms, start_seq,"
                    " total, pos, neg, n, carry_total, carry_rewards, carry_penalties)"
                    " VALUES (?, ?, ?, NULL, ?, 0, 0, 0, 0, ?, ?, ?) ON CONFLICT (session)"
                    " DO UPDATE SET label = excluded.label, started_ms = excluded.started_ms,"
                    " start_seq = excluded.start_seq, carry_total = excluded.carry_total,"
                    " carry_rewards = excluded.carry_rewards,"
                    " carry_penalties = excluded.carry_penalties",
                    (
                        sid,
                        p.get("label"),
                        ev.ts_ms,
                        ev.seq,
                        _int(carry.get("total")),
                        _int(carry.get("rewards")),
                        _int(carry.get("penalties")),
                    ),
                )
                state["current_session"] = sid
            elif t == et.SESSION_END:
                acc.flush(tx)
                sid = str(p.get("session", ev.session_id))
                tx.execute(
                    "UPDATE ledger_sessions SET ended_ms = ? WHERE session = ?", (ev.ts_ms, sid)
                )
            elif t == et.SOURCE:
                tx.execute(
                    "INSERT INTO ledger_sources (kind, key, file, record, seq, deleted)"
                    " VALUES (?,?,?,?,?,0) ON CONFLICT (kind, key) DO UPDATE SET"
                    " file = excluded.file, record = excluded.record, seq = excluded.seq,"
                    " deleted = 0",
                    (
                        str(p.get("kind")),
                        str(p.get("key")),
                        str(p.get("file", "")),
                        encode_json(p.get("record", {})),
                        ev.seq,
                    ),
                )
            elif t == et.SOURCE_REMOVED:
                tx.execute(
                    "UPDATE ledger_sources SET deleted = 1, seq = ? WHERE kind = ? AND key = ?",
                    (ev.seq, str(p.get("kind")), str(p.get("key"))),
                )
            elif t == et.CHECKPOINT:
                tx.execute(
                    "INSERT INTO ledger_checkpoints (seq, through_seq, head_hash, total, tx_count)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (seq) DO NOTHING",
                    (
                        ev.seq,
                        _int(p.get("through_seq")),
                        str(p.get("head_hash", "")),
                        _int(p.get("total")),
                        _int(p.get("tx_count")),
                    ),
                )
                state["last_checkpoint_count"] = _int(p.get("tx_count"))
            elif t == et.HALT:
                state["halted"] = 1
                state["halt_reason"] = str(p.get("reason", ""))
                state["halt_kind"] = str(p.get("kind", "checksum"))
                state["halted_ms"] = ev.ts_ms
            elif t == et.RESUME:
                state["halted"] = 0
                state["halt_reason"] = None
                state["halt_kind"] = None
                state["halted_ms"] = None
            elif t == et.RECONCILE:
                state["last_reconcile_ms"] = ev.ts_ms
                state["last_reconcile_count"] = _int(p.get("tx_count"))
            elif t == et.JOB:
                tx.execute(
                    "INSERT INTO ledger_jobs (job, last_ms, last_count, last_key) VALUES"
                    " (?, ?, ?, ?) ON CONFLICT (job) DO UPDATE SET last_ms = excluded.last_ms,"
                    " last_count = excluded.last_count, last_key = excluded.last_key",
                    (str(p.get("job", "")), ev.ts_ms, _int(p.get("tx_count")), p.get("key")),
                )
            elif t == et.INCIDENT:
                tx.execute(
                    "INSERT INTO ledger_incidents (seq, id, ts_ms, kind, detail) VALUES (?,?,?,?,?)"
                    " ON CONFLICT (seq) DO NOTHING",
                    (ev.seq, ev.id, ev.ts_ms, str(p.get("kind", "")), encode_json(p)),
                )
        acc.flush(tx)
        state.update(
            total=total,
            rewards=rewards,
            penalties=penalties,
            tx_count=count,
            last_running_total=last_running,
            actions_total=actions,
            actions_successful=successes,
            actions_failed=failures,
            unverified=unverified,
            unsourced_points=uns_points,
            unsourced_count=uns_count,
        )
        sets = ", ".join(f"{c} = ?" for c in _STATE_COLS)
        tx.execute(f"UPDATE ledger_state SET {sets} WHERE one = 1", [state[c] for c in _STATE_COLS])


class _Pending:
    """Rows and sums folded from a run of transactions, written in a few statements."""

    __slots__ = ("cats", "sessions", "src_sums", "tx_rows")

    def __init__(self) -> None:
        self.tx_rows: list[tuple[Any, ...]] = []
        self.cats: dict[str, list[Any]] = {}
        self.sessions: dict[str, list[int]] = {}
        self.src_sums: dict[tuple[Any, Any], list[int]] = {}

    def fold_amendment(
        self, tx: Tx, target: tuple[Any, ...], points: int
    ) -> tuple[int, int, int, int]:
        """Move an amended transaction's category, session and source sums to its new points;
        returns the changes to rewards, penalties, successes and failures."""
        seq, cat, ttype, t_points, amended, session, skind, sid, kind = target
        before = int(t_points) + int(amended)
        after = before + points
        d_pos = _pos(after) - _pos(before)
        d_neg = points - d_pos
        tx.execute("UPDATE ledger_tx SET amended = amended + ? WHERE seq = ?", (points, seq))
        c = self.cats.setdefault(cat, [ttype, 0, 0, 0])
        c[1] += d_pos
        c[2] += d_neg
        if session is not None:
            ss = self.sessions.setdefault(session, [0, 0, 0])
            ss[0] += d_pos
            ss[1] += d_neg
        if skind is not None:
            sums = self.src_sums.setdefault((skind, sid), [0, 0, 0, 0])
            sums[0] += d_pos
            sums[1] += d_neg
        if kind not in et.ACTION_KINDS:
            return d_pos, d_neg, 0, 0
        return d_pos, d_neg, (after > 0) - (before > 0), (after < 0) - (before < 0)

    def flush(self, tx: Tx) -> None:
        if self.tx_rows:
            tx.executemany(
                "INSERT INTO ledger_tx (seq, id, ts_ms, category, type, points, running_total,"
                " verified, source_kind, source_id, action, session, kind, imported, amends)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                self.tx_rows,
            )
            self.tx_rows.clear()
        if self.cats:
            tx.executemany(
                "INSERT INTO ledger_categories (category, type, points, pos, neg, n)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (category) DO UPDATE SET"
                " points = ledger_categories.points + excluded.points,"
                " pos = ledger_categories.pos + excluded.pos,"
                " neg = ledger_categories.neg + excluded.neg, n = ledger_categories.n + excluded.n",
                [(c, t, pos + neg, pos, neg, n) for c, (t, pos, neg, n) in self.cats.items()],
            )
            self.cats.clear()
        if self.sessions:
            tx.executemany(
                "INSERT INTO ledger_sessions (session, label, started_ms, ended_ms, start_seq,"
                " total, pos, neg, n, carry_total, carry_rewards, carry_penalties)"
                " VALUES (?, NULL, NULL, NULL, NULL, ?, ?, ?, ?, 0, 0, 0) ON CONFLICT (session)"
                " DO UPDATE SET total = ledger_sessions.total + excluded.total,"
                " pos = ledger_sessions.pos + excluded.pos,"
                " neg = ledger_sessions.neg + excluded.neg, n = ledger_sessions.n + excluded.n",
                [(s, pos + neg, pos, neg, n) for s, (pos, neg, n) in self.sessions.items()],
            )
            self.sessions.clear()
        if self.src_sums:
            tx.executemany(
                "INSERT INTO ledger_source_sums (kind, key, pos, neg, corr, n)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE SET"
                " pos = ledger_source_sums.pos + excluded.pos,"
                " neg = ledger_source_sums.neg + excluded.neg,"
                " corr = ledger_source_sums.corr + excluded.corr,"
                " n = ledger_source_sums.n + excluded.n",
                [(k, i, *v) for (k, i), v in self.src_sums.items()],
            )
            self.src_sums.clear()
