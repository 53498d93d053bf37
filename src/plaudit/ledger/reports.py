"""Compliance reports: daily, weekly (ISO week) and monthly summaries, in JSON and Markdown.

Periods are UTC calendar periods containing the given date."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from plaudit.errors import ValidationError
from plaudit.ledger.models import iso
from plaudit.store.backend import Tx

PERIODS = ("daily", "weekly", "monthly")


def period_bounds(period: str, day: date) -> tuple[datetime, datetime]:
    if not 1970 <= day.year <= 9998:
        raise ValidationError("date", f"{day.isoformat()} is outside 1970 to 9998")
    if period == "daily":
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        return start, start + timedelta(days=1)
    if period == "weekly":
        monday = day - timedelta(days=day.weekday())
        start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
        return start, start + timedelta(days=7)
    if period == "monthly":
        start = datetime(day.year, day.month, 1, tzinfo=UTC)
        nxt = datetime(day.year + (day.month == 12), day.month % 12 + 1, 1, tzinfo=UTC)
        return start, nxt
    raise ValidationError("period", f"{period!r} is not one of {', '.join(PERIODS)}")


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def build_report(tx: Tx, period: str, day: date) -> dict[str, Any]:
    start, end = period_bounds(period, day)
    lo, hi = _ms(start), _ms(end)
    # A transaction counts with its amended points (an audit's amendment folds into it, as
    # the projection's totals do); the amendment rows themselves are not counted again.
    eff = "(points + amended)"
    rows = "FROM ledger_tx WHERE ts_ms >= ? AND ts_ms < ? AND amends IS NULL"
    actions_sql = "kind IN ('record','rule','recovery','import')"
    agg = tx.fetchone(
        f"SELECT COUNT(*), COALESCE(SUM({eff}), 0),"
        f" COALESCE(SUM(CASE WHEN {eff} > 0 THEN {eff} ELSE 0 END), 0),"
        f" COALESCE(SUM(CASE WHEN {eff} < 0 THEN {eff} ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN verified = 0 THEN 1 ELSE 0 END), 0),"
        f" COALESCE(SUM(CASE WHEN {actions_sql} THEN 1 ELSE 0 END), 0),"
        f" COALESCE(SUM(CASE WHEN {actions_sql} AND {eff} > 0 THEN 1 ELSE 0 END), 0)"
        f" {rows}",
        (lo, hi),
    )
    assert agg is not None
    n, net, rewards, penalties, unverified, actions, ok = (int(v) for v in agg)
    cats = [
        {"category": c, "type": t, "points": int(p), "count": int(k)}
        for c, t, p, k in tx.fetchall(
            f"SELECT category, type, SUM({eff}), COUNT(*) {rows}"
            f" GROUP BY category, type ORDER BY SUM({eff}) DESC, category",
            (lo, hi),
        )
    ]
    opening = tx.scalar(
        "SELECT running_total FROM ledger_tx WHERE ts_ms < ? ORDER BY seq DESC LIMIT 1", (lo,)
    )
    closing = tx.scalar(
        "SELECT running_total FROM ledger_tx WHERE ts_ms < ? ORDER BY seq DESC LIMIT 1", (hi,)
    )
    incidents = [
        {"id": i, "timestamp": iso(int(ts)), "kind": k}
        for i, ts, k in tx.fetchall(
            "SELECT id, ts_ms, kind FROM ledger_incidents WHERE ts_ms >= ? AND ts_ms < ?"
            " ORDER BY seq",
            (lo, hi),
        )
    ]
    denom = rewards - penalties
    return {
        "period": period,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "transactions": n,
        "net_points": net,
        "rewards": rewards,
        "penalties": penalties,
        "unverified": unverified,
        "actions_total": actions,
        "success_rate": round(100.0 * ok / actions, 2) if actions else 0.0,
        "learning_efficiency": round(100.0 * rewards / denom, 2) if denom else 0.0,
        "opening_total": int(opening or 0),
        "closing_total": int(closing or 0),
        "by_category": cats,
        "incidents": incidents,
    }


def to_markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Ledger {r['period']} compliance report",
        "",
        f"Period: {r['start']} to {r['end']} (UTC)",
        "",
        "| measure | value |",
        "|---|---|",
        f"| opening total | {r['opening_total']} |",
        f"| closing total | {r['closing_total']} |",
        f"| net points | {r['net_points']:+d} |",
        f"| rewards | {r['rewards']:+d} |",
        f"| penalties | {r['penalties']:+d} |",
        f"| transactions | {r['transactions']} |",
        f"| unverified transactions | {r['unverified']} |",
        f"| success rate | {r['success_rate']}% |",
        f"| learning efficiency | {r['learning_efficiency']}% |",
        "",
        "## By category",
        "",
    ]
    if r["by_category"]:
        lines += ["| category | type | points | count |", "|---|---|---|---|"]
        lines += [
            f"| {c['category']} | {c['type']} | {c['points']:+d} | {c['count']} |"
            for c in r["by_category"]
        ]
    else:
        lines.append("No transactions in this period.")
    lines += ["", "## Incidents", ""]
    if r["incidents"]:
        lines += [f"- {i['timestamp']} {i['kind']} ({i['id']})" for i in r["incidents"]]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"
