"""Rules that turn router outcomes into transactions, and compliance reports."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from plaudit import make_event
from plaudit.errors import ValidationError
from plaudit.ledger import Ledger


def _outcome(decision: str, outcome: str, ts_ms: int | None = None):
    return make_event(
        "flow.router.outcome.v1",
        {"decision_id": decision, "outcome": outcome, "task_executed": "t"},
        ts_ms=ts_ms,
    )


def test_rules_are_idempotent(ledger: Ledger) -> None:
    ledger.p.log.append_batch(
        [_outcome("d1", "failure"), _outcome("d2", "success"), _outcome("d3", "partial")]
    )
    r = ledger.apply_rules()
    assert r["created"] == 2 and r["scanned"] == 3
    txs = {t.category: t for t in ledger.transactions(10)}
    assert txs["validation_failure"].points == -20 and txs["validation_failure"].kind == "rule"
    assert "d1" in txs["validation_failure"].action
    assert txs["successful_validation"].points == 30
    assert ledger.apply_rules()["created"] == 0  # the cursor moved past them
    ledger.p.log.append(_outcome("d4", "failure"))
    assert ledger.apply_rules()["created"] == 1
    assert ledger.score()["total_score"] == 30 - 20 - 20


def test_rules_never_double_count_without_the_cursor(ledger: Ledger) -> None:
    ledger.p.log.append(_outcome("d1", "failure"))
    ledger.apply_rules()
    # even if the cursor were lost, the derived ids make a re-run a no-op
    from plaudit.ledger.rules import build_rules

    with ledger.p.log.writer() as w:
        pendings, _, _ = build_rules(ledger.config, w.tx, 10**6)
        assert pendings == []
    assert ledger.transactions(10)[0].id.startswith("rule:router-failure:")


def test_daily_weekly_monthly_reports(ledger: Ledger) -> None:
    def ms(y: int, m: int, d: int) -> int:
        return int(datetime(y, m, d, 12, tzinfo=UTC).timestamp() * 1000)

    ledger.record("successful_validation", "mon", ts_ms=ms(2025, 10, 13))
    ledger.record("validation_failure", "tue", ts_ms=ms(2025, 10, 14))
    ledger.record("pattern_reuse", "next week", ts_ms=ms(2025, 10, 20))
    ledger.record("unused_variables", "next month", ts_ms=ms(2025, 11, 3))
    day = ledger.report("daily", date(2025, 10, 14))
    assert day["transactions"] == 1 and day["net_points"] == -20
    assert day["opening_total"] == 30 and day["closing_total"] == 10
    week = ledger.report("weekly", date(2025, 10, 15))
    assert week["transactions"] == 2 and week["start"].startswith("2025-10-13")
    month = ledger.report("monthly", date(2025, 10, 1))
    assert month["transactions"] == 3 and month["net_points"] == 30
    assert month["success_rate"] == round(200 / 3, 2)
    md = ledger.report_markdown("monthly", date(2025, 10, 31))
    assert "# Ledger monthly compliance report" in md
    assert "| pattern_reuse | reward | +20 | 1 |" in md
    with pytest.raises(ValidationError):
        ledger.report("yearly")
