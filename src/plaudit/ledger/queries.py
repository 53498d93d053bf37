"""Read-side queries over the ledger projection: score, breakdown, metrics, transactions."""

from __future__ import annotations

import math
from typing import Any

from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.config import LedgerConfig
from plaudit.ledger.integrity import VerifyOutcome
from plaudit.ledger.models import TX_COLUMNS, Transaction, tx_from_row
from plaudit.ledger.projection import read_state
from plaudit.store.backend import Tx

TREND_POINTS = 200
MAX_LIMIT = 10_000


def _zero_state() -> dict[str, Any]:
    return {
        k: 0
        for k in (
            "total",
            "rewards",
            "penalties",
            "tx_count",
            "actions_total",
            "actions_successful",
            "actions_failed",
            "unverified",
            "carry_total",
            "carry_rewards",
            "carry_penalties",
            "carry_actions",
            "carry_successful",
            "carry_failed",
            "carry_permission_micro",
            "halted",
        )
    } | {"current_session": None, "halt_reason": None, "halt_kind": None}


def state_or_zero(tx: Tx) -> dict[str, Any]:
    return read_state(tx) or _zero_state()


def current_session(tx: Tx, state: dict[str, Any]) -> dict[str, Any] | None:
    sid = state.get("current_session")
    if sid is None:
        return None
    row = tx.fetchone(
        f"SELECT {_SESSION_COLS} FROM ledger_sessions WHERE session = ?",
        (sid,),
    )
    return None if row is None else _session(row)


_SESSION_COLS = (
    "session, label, started_ms, ended_ms, total, n, pos, neg, carry_total, carry_rewards,"
    " carry_penalties"
)


def _session(row: tuple[Any, ...]) -> dict[str, Any]:
    s, label, st, en, total, n, pos, neg, c_total, c_pos, c_neg = row
    return {
        "session_id": s,
        "label": label,
        "started_ms": st,
        "ended_ms": en,
        "open": en is None and st is not None,
        "score": int(total) + int(c_total),
        "rewards": int(pos) + int(c_pos),
        "penalties": int(neg) + int(c_neg),
        "transactions": int(n),
    }


def trend(tx: Tx, session: str | None, points: int = TREND_POINTS) -> list[dict[str, int]]:
    """The running total at up to `points` evenly spaced log positions (always the last
    transaction), oldest first. Three statements whatever the number of transactions: each
    point is one index lookup inside the last (one statement per point cost a round trip
    each on PostgreSQL, most of a score request)."""
    where, params = ("WHERE session = ?", [session]) if session is not None else ("", [])
    # One aggregate per query: SQLite answers a lone MIN or MAX from the index, both at once
    # by scanning the table.
    low = tx.scalar(f"SELECT MIN(seq) FROM ledger_tx {where}", params)
    if low is None:
        return []
    lo, hi = int(low), int(tx.scalar(f"SELECT MAX(seq) FROM ledger_tx {where}", params))
    step = max(1, math.ceil((hi - lo) / max(1, points - 1)))
    targets = sorted({*range(lo, hi, step), hi})
    cond = "session = ? AND seq <= t.target" if session is not None else "seq <= t.target"
    rows = tx.fetchall(
        f"WITH t(target) AS (VALUES {', '.join(['(?)'] * len(targets))}) "
        "SELECT DISTINCT l.seq, l.ts_ms, l.running_total FROM t JOIN ledger_tx l "
        f"ON l.seq = (SELECT MAX(seq) FROM ledger_tx WHERE {cond}) ORDER BY l.seq",
        [*targets, *params],
    )
    return [{"ts_ms": int(ts), "total": int(total)} for _, ts, total in rows]


def metrics(tx: Tx, state: dict[str, Any], cfg: LedgerConfig) -> dict[str, Any]:
    total = int(state["actions_total"]) + int(state["carry_actions"])
    ok = int(state["actions_successful"]) + int(state["carry_successful"])
    rewards, penalties = int(state["rewards"]), int(state["penalties"])
    denom = rewards - penalties
    permission = int(
        tx.scalar(
            "SELECT COUNT(*) FROM ledger_tx WHERE category = 'permission_request'"
            " AND kind IN ('record', 'rule', 'recovery', 'import')"
        )
        or 0
    )
    # An imported history carries its autonomy as permission requests' worth (millionths).
    carried = int(state["carry_permission_micro"]) / 1_000_000
    autonomy = (
        cfg.base_autonomy * (1 - (permission + carried) / total) if total else cfg.base_autonomy
    )
    return {
        "actions_total": total,
        "actions_successful": ok,
        "actions_failed": int(state["actions_failed"]) + int(state["carry_failed"]),
        "actions_unverified": int(state["unverified"]),
        "success_rate": round(100.0 * ok / total, 2) if total else 0.0,
        "learning_efficiency": round(100.0 * rewards / denom, 2) if denom else 0.0,
        "autonomy_level": round(max(0.0, min(100.0, autonomy)), 2),
        "base_autonomy": cfg.base_autonomy,
        "permission_requests": permission,
    }


def score(tx: Tx, cfg: LedgerConfig, log: VerifyOutcome) -> dict[str, Any]:
    """`log` is `log_verified`'s answer: `verified` is never true while the log fails."""
    state = state_or_zero(tx)
    chk = quick_checksum(tx, read_state(tx))
    sess = current_session(tx, state)
    m = metrics(tx, state, cfg)
    session_id = None if sess is None else sess["session_id"]
    session_rewards = 0 if sess is None else sess["rewards"]
    session_penalties = 0 if sess is None else sess["penalties"]
    total = int(state["total"])
    return {
        "total_score": total,
        "session_score": 0 if sess is None else sess["score"],
        "lifetime_score": total + int(state["carry_total"]),
        "rewards_total": int(state["rewards"]),
        "penalties_total": int(state["penalties"]),
        "session_rewards": session_rewards,
        "session_penalties": session_penalties,
        "lifetime_rewards": int(state["rewards"]) + int(state["carry_rewards"]),
        "lifetime_penalties": int(state["penalties"]) + int(state["carry_penalties"]),
        "learning_efficiency": m["learning_efficiency"],
        "session_id": session_id,
        "session_open": bool(sess and sess["open"]),
        "trend": trend(tx, session_id),
        "transactions": int(state["tx_count"]),
        "verified": bool(log.ok and chk.is_valid and not state["halted"]),
        "halted": bool(state["halted"]) or not log.ok,
        "halt_reason": state.get("halt_reason")
        or (None if log.ok else f"the log fails verification at position {log.first_bad}"),
        "next": _next_step(state, chk, log),
        "log": {"ok": log.ok, "first_bad": log.first_bad, "reason": log.reason},
        "checksum": {
            "calculated_total": chk.calculated_total,
            "stored_total": chk.stored_total,
            "is_valid": chk.is_valid,
            "reason": chk.reason,
            "last_validated": chk.last_validated,
        },
    }


def _next_step(state: dict[str, Any], chk: Any, log: VerifyOutcome) -> str | None:
    """The way forward to show beside an unverified score."""
    from plaudit.ledger.halts import log_kind, way_forward

    if not log.ok:
        return way_forward(log_kind(log))
    if state["halted"]:
        return way_forward(state.get("halt_kind"))
    if not chk.is_valid:
        return way_forward("checksum")
    return None


def breakdown(tx: Tx) -> dict[str, Any]:
    state = state_or_zero(tx)
    sess = current_session(tx, state)
    session_by: dict[str, int] = {}
    if sess is not None:
        session_by = {
            c: int(p)
            for c, p in tx.fetchall(
                "SELECT category, SUM(points + amended) FROM ledger_tx WHERE session = ?"
                " GROUP BY category",
                (sess["session_id"],),
            )
        }
    # Split by sign, so each side adds up to its total whatever a category holds (an audit
    # correction or opening balance may carry either sign).
    rewards: dict[str, int] = {}
    penalties: dict[str, int] = {}
    rows = []
    for cat, ttype, pts, pos, neg, n in tx.fetchall(
        "SELECT category, type, points, pos, neg, n FROM ledger_categories ORDER BY category"
    ):
        pts = int(pts)
        if int(pos):
            rewards[cat] = int(pos)
        if int(neg):
            penalties[cat] = int(neg)
        rows.append(
            {
                "category": cat,
                "type": ttype,
                "total": pts,
                "rewards": int(pos),
                "penalties": int(neg),
                "session": session_by.get(cat, 0),
                "lifetime": pts,
                "count": int(n),
            }
        )
    return {
        "rewards": rewards,
        "penalties": penalties,
        "categories": rows,
        "session_id": None if sess is None else sess["session_id"],
    }


def transactions(
    tx: Tx,
    *,
    limit: int = 10,
    category: str | None = None,
    session: str | None = None,
    before_seq: int | None = None,
    by: str = "time",
) -> list[Transaction]:
    """Newest first (the seed's example returned the oldest by mistake): by date, ties by log
    position (`by="time"`, what a listing shows: recovered and imported transactions carry their
    record's older date), or by log position alone (`by="position"`, the chain order the
    progress.json export writes)."""
    where: list[str] = []
    params: list[Any] = []
    if category is not None:
        where.append("category = ?")
        params.append(category)
    if session is not None:
        where.append("session = ?")
        params.append(session)
    if before_seq is not None:
        where.append("seq < ?")
        params.append(before_seq)
    cond = f"WHERE {' AND '.join(where)}" if where else ""
    limit = max(0, min(int(limit), MAX_LIMIT))
    order = "ts_ms DESC, seq DESC" if by == "time" else "seq DESC"
    rows = tx.fetchall(
        f"SELECT {TX_COLUMNS} FROM ledger_tx {cond} ORDER BY {order} LIMIT ?", [*params, limit]
    )
    return [tx_from_row(r) for r in rows]


def incidents(tx: Tx, limit: int = 20) -> list[dict[str, Any]]:
    """Halts, audits and recoveries, newest first."""
    import msgspec

    from plaudit.ledger.models import iso

    rows = tx.fetchall(
        "SELECT seq, id, ts_ms, kind, detail FROM ledger_incidents ORDER BY seq DESC LIMIT ?",
        (max(0, min(int(limit), MAX_LIMIT)),),
    )
    return [
        {
            "seq": int(seq),
            "id": id_,
            "timestamp": iso(int(ts)),
            "ts_ms": int(ts),
            "kind": kind,
            "detail": msgspec.json.decode(detail),
        }
        for seq, id_, ts, kind, detail in rows
    ]


def sessions(tx: Tx) -> list[dict[str, Any]]:
    return [
        _session(row)
        for row in tx.fetchall(
            f"SELECT {_SESSION_COLS} FROM ledger_sessions ORDER BY COALESCE(start_seq, 0), session"
        )
    ]
