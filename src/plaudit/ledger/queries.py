"""Read-side queries over the ledger projection: score, breakdown, metrics, transactions."""

from __future__ import annotations

import math
from typing import Any

from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.config import LedgerConfig
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
            "halted",
        )
    } | {"current_session": None, "halt_reason": None}


def state_or_zero(tx: Tx) -> dict[str, Any]:
    return read_state(tx) or _zero_state()


def current_session(tx: Tx, state: dict[str, Any]) -> dict[str, Any] | None:
    sid = state.get("current_session")
    if sid is None:
        return None
    row = tx.fetchone(
        "SELECT session, label, started_ms, ended_ms, total, n FROM ledger_sessions"
        " WHERE session = ?",
        (sid,),
    )
    if row is None:
        return None
    return {
        "session_id": row[0],
        "label": row[1],
        "started_ms": row[2],
        "ended_ms": row[3],
        "open": row[3] is None,
        "score": int(row[4]),
        "transactions": int(row[5]),
    }


def trend(tx: Tx, session: str | None, points: int = TREND_POINTS) -> list[dict[str, int]]:
    """The running total at evenly spaced transactions (always the last), oldest first."""
    where, params = ("WHERE session = ?", [session]) if session is not None else ("", [])
    n = int(tx.scalar(f"SELECT COUNT(*) FROM ledger_tx {where}", params) or 0)
    if n == 0:
        return []
    step = max(1, math.ceil(n / (points - 1)))
    rows = tx.fetchall(
        "SELECT ts_ms, running_total FROM (SELECT ts_ms, running_total, seq,"
        f" ROW_NUMBER() OVER (ORDER BY seq) AS rn FROM ledger_tx {where}) t"
        " WHERE (rn - 1) % ? = 0 OR rn = ? ORDER BY seq",
        [*params, step, n],
    )
    return [{"ts_ms": int(ts), "total": int(rt)} for ts, rt in rows]


def metrics(tx: Tx, state: dict[str, Any], cfg: LedgerConfig) -> dict[str, Any]:
    total = int(state["actions_total"])
    ok = int(state["actions_successful"])
    rewards, penalties = int(state["rewards"]), int(state["penalties"])
    denom = rewards - penalties
    permission = int(
        tx.scalar("SELECT n FROM ledger_categories WHERE category = 'permission_request'") or 0
    )
    autonomy = cfg.base_autonomy * (1 - permission / total) if total else cfg.base_autonomy
    return {
        "actions_total": total,
        "actions_successful": ok,
        "actions_failed": int(state["actions_failed"]),
        "actions_unverified": int(state["unverified"]),
        "success_rate": round(100.0 * ok / total, 2) if total else 0.0,
        "learning_efficiency": round(100.0 * rewards / denom, 2) if denom else 0.0,
        "autonomy_level": round(max(0.0, min(100.0, autonomy)), 2),
        "base_autonomy": cfg.base_autonomy,
        "permission_requests": permission,
    }


def score(tx: Tx, cfg: LedgerConfig) -> dict[str, Any]:
    state = state_or_zero(tx)
    chk = quick_checksum(tx, read_state(tx))
    sess = current_session(tx, state)
    m = metrics(tx, state, cfg)
    session_id = None if sess is None else sess["session_id"]
    session_rewards = session_penalties = 0
    if session_id is not None:
        row = tx.fetchone(
            "SELECT COALESCE(SUM(CASE WHEN points > 0 THEN points ELSE 0 END), 0),"
            " COALESCE(SUM(CASE WHEN points < 0 THEN points ELSE 0 END), 0)"
            " FROM ledger_tx WHERE session = ?",
            (session_id,),
        )
        assert row is not None
        session_rewards, session_penalties = int(row[0]), int(row[1])
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
        "verified": bool(chk.is_valid and not state["halted"]),
        "halted": bool(state["halted"]),
        "halt_reason": state.get("halt_reason"),
        "checksum": {
            "calculated_total": chk.calculated_total,
            "stored_total": chk.stored_total,
            "is_valid": chk.is_valid,
            "reason": chk.reason,
            "last_validated": chk.last_validated,
        },
    }


def breakdown(tx: Tx) -> dict[str, Any]:
    state = state_or_zero(tx)
    sess = current_session(tx, state)
    session_by: dict[str, int] = {}
    if sess is not None:
        session_by = {
            c: int(p)
            for c, p in tx.fetchall(
                "SELECT category, SUM(points) FROM ledger_tx WHERE session = ? GROUP BY category",
                (sess["session_id"],),
            )
        }
    rewards: dict[str, int] = {}
    penalties: dict[str, int] = {}
    rows = []
    for cat, ttype, pts, n in tx.fetchall(
        "SELECT category, type, points, n FROM ledger_categories ORDER BY category"
    ):
        pts = int(pts)
        (rewards if pts >= 0 else penalties)[cat] = pts
        rows.append(
            {
                "category": cat,
                "type": ttype,
                "total": pts,
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
) -> list[Transaction]:
    """Newest first (the seed's example returned the oldest by mistake)."""
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
    rows = tx.fetchall(
        f"SELECT {TX_COLUMNS} FROM ledger_tx {cond} ORDER BY seq DESC LIMIT ?", [*params, limit]
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
        {
            "session_id": s,
            "label": label,
            "started_ms": st,
            "ended_ms": en,
            "open": en is None and st is not None,
            "score": int(total),
            "transactions": int(n),
        }
        for s, label, st, en, total, n in tx.fetchall(
            "SELECT session, label, started_ms, ended_ms, total, n FROM ledger_sessions"
            " ORDER BY COALESCE(start_seq, 0), session"
        )
    ]
