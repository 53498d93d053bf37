"""A transaction edited behind plaudit's back, then the documented recovery (audit, backup,
`restore --rechain` into a new store, audit): every figure the ledger derives must come back to
what a ledger that never saw the forgery shows, not only the total (issue 31, item 2)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_helpers import payload_set, raw_sql

from plaudit import Plaudit
from plaudit.ledger import Ledger
from plaudit.ledger.config import SYSTEM_CATEGORIES

CATEGORIES = [
    "successful_validation",
    "validation_failure",
    "pattern_reuse",
    "unused_variables",
    "permission_request",
    "zero_duplication",
]


def figures(lg: Ledger) -> dict[str, Any]:
    """Everything the ledger derives from its transactions, as every surface shows it.

    An audit leaves its own 0-point `audit_correction` entry (its record in the transaction
    list); a category that holds nothing but such entries is not a figure."""
    s = lg.score()
    b = lg.breakdown()
    return {
        "score": {
            k: s[k]
            for k in (
                "total_score",
                "session_score",
                "lifetime_score",
                "rewards_total",
                "penalties_total",
                "session_rewards",
                "session_penalties",
                "lifetime_rewards",
                "lifetime_penalties",
                "learning_efficiency",
                "session_id",
            )
        },
        "metrics": lg.metrics(),
        "rewards": b["rewards"],
        "penalties": b["penalties"],
        "categories": [
            c
            for c in b["categories"]
            if not (c["category"] in SYSTEM_CATEGORIES and c["total"] == 0 == c["session"])
        ],
        "sessions": [
            {k: v for k, v in x.items() if k not in ("started_ms", "ended_ms")}
            for x in lg.sessions()
        ],
    }


def _fill(lg: Ledger, items: list[tuple[str, str | None]]) -> list:
    lg.start_session("a")
    lg.start_session("b", label="later")
    txs = lg.record_batch(
        [
            {"category": c, "action": f"step {i}", **({"session": s} if s else {})}
            for i, (c, s) in enumerate(items)
        ]
    )
    lg.end_session("a")
    return txs


def _recover(damaged: Plaudit, tmp: Path, *, audit_first: bool) -> Plaudit:
    """The documented way forward from a damaged log, as docs/ledger.md gives it."""
    if audit_first:  # the seed's audit workflow, run where the damage is found
        assert damaged.ledger.audit()["halted"]
    damaged.ledger.backup(tmp / "damaged.jsonl")
    new = Plaudit.open(tmp / "new.db")
    restored = new.ledger.restore(tmp / "damaged.jsonl", rechain=True)
    assert restored["damage"]["first_changed_position"] is not None
    audit = new.ledger.audit()
    assert not audit["halted"] and audit["log_ok_after"]
    return new


items_st = st.lists(
    st.tuples(st.sampled_from(CATEGORIES), st.sampled_from([None, "a", "b"])),
    min_size=2,
    max_size=12,
)


@st.composite
def tamperings(draw: Any, n: int) -> dict[int, dict[str, int]]:
    """Points edited on one to three transactions (neighbours too, any sign); sometimes a
    running total edited as well, on a transaction the next of which is left alone."""
    forged = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    edits: dict[int, dict[str, int]] = {
        i: {"points": draw(st.integers(-5000, 5000))} for i in forged
    }
    spare = [i for i in range(n - 1) if i not in edits and i + 1 not in edits]
    if spare and draw(st.booleans()):
        i = draw(st.sampled_from(spare))
        edits[i] = {"running_total": draw(st.integers(-10_000, 10_000))}
    return edits


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(items=items_st, data=st.data(), audit_first=st.booleans())
def test_recovery_from_forged_transactions_restores_every_figure(
    items: list[tuple[str, str | None]], data: Any, audit_first: bool
) -> None:
    edits = data.draw(tamperings(len(items)))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with Plaudit.open(tmp / "reference.db") as ref, Plaudit.open(tmp / "damaged.db") as bad:
            _fill(ref.ledger, items)
            txs = _fill(bad.ledger, items)
            changed = False
            for i, fields in edits.items():
                for field, value in fields.items():
                    if getattr(txs[i], field) != value:
                        changed = True
                        sql = f"UPDATE plaudit_events SET {payload_set(bad, field, value)}"
                        raw_sql(bad, f"{sql} WHERE seq = {txs[i].seq}")
            if not changed:
                return
            new = _recover(bad, tmp, audit_first=audit_first)
            with new:
                assert figures(new.ledger) == figures(ref.ledger)
                # ... and carries on as the untampered ledger does
                t = new.ledger.record("successful_validation", "carried on")
                assert (
                    t.running_total == ref.ledger.record("successful_validation", "x").running_total
                )
                assert figures(new.ledger) == figures(ref.ledger)
                assert new.ledger.verify(full=True)["ok"]


def test_the_issue_reproduction_on_the_command_line(tmp_path: Path, capsys) -> None:
    """Issue 31's steps: edit one +30 successful_validation to +3000, then `ledger audit`,
    `backup`, `restore --rechain` into a new store, `audit`, and record +30. The total was
    right, but the breakdown kept the forged points (successful_validation +3,810 where the
    untampered ledger has +840), and so did the session, rewards, penalties and efficiency."""
    from plaudit.cli import main

    def run(db: Path, *args: str) -> dict[str, Any]:
        code = main(["--db", str(db), "ledger", *args])
        out = capsys.readouterr().out
        assert code in (0, 5), out
        return json.loads(out) if "--json" in args else {}

    plan = [("successful_validation", 28), ("validation_failure", 6), ("pattern_reuse", 10)]
    old, new, ref = tmp_path / "old.db", tmp_path / "new.db", tmp_path / "ref.db"
    for db in (old, ref):
        run(db, "sessions", "start", "--session", "s1")
        for category, times in plan:
            for i in range(times):
                run(db, "record", "-c", category, "-a", f"{category} {i}", "--json")
    with Plaudit.open(old) as p:
        forged = p.ledger.transactions(1000, category="successful_validation")[5]
        raw_sql(
            p,
            f"UPDATE plaudit_events SET {payload_set(p, 'points', 3000)} WHERE seq = {forged.seq}",
        )
    run(old, "audit")
    run(old, "backup", str(tmp_path / "b.jsonl"))
    run(new, "restore", "--rechain", str(tmp_path / "b.jsonl"))
    run(new, "audit")
    for db in (new, ref):
        run(db, "record", "-c", "successful_validation", "-a", "after", "--json")
    got = {k: run(new, k, "--json") for k in ("score", "breakdown", "metrics")}
    want = {k: run(ref, k, "--json") for k in ("score", "breakdown", "metrics")}
    assert (
        got["breakdown"]["rewards"]
        == want["breakdown"]["rewards"]
        == {
            "successful_validation": 29 * 30,
            "pattern_reuse": 10 * 20,
        }
    )
    assert got["breakdown"]["penalties"] == want["breakdown"]["penalties"]
    for key in ("total_score", "session_score", "rewards_total", "penalties_total"):
        assert got["score"][key] == want["score"][key], key
    assert got["metrics"] == want["metrics"]
    assert got["metrics"]["learning_efficiency"] == pytest.approx(
        100 * 1070 / (1070 + 120), abs=0.01
    )


@pytest.mark.parametrize("audit_first", [False, True])
def test_rows_moved_but_not_edited_are_not_amended(tmp_path: Path, audit_first: bool) -> None:
    """Two transactions swapped in the log: their running totals disagree with their new
    places, but each is the event that was acknowledged; nothing is attributed to either."""
    items = [(c, None) for c in CATEGORIES]
    with Plaudit.open(tmp_path / "ref.db") as ref, Plaudit.open(tmp_path / "bad.db") as bad:
        _fill(ref.ledger, items)
        txs = _fill(bad.ledger, items)
        a, b = txs[2].seq, txs[3].seq
        raw_sql(
            bad,
            f"UPDATE plaudit_events SET seq = -1 WHERE seq = {a}",
            f"UPDATE plaudit_events SET seq = {a} WHERE seq = {b}",
            f"UPDATE plaudit_events SET seq = {b} WHERE seq = -1",
        )
        with _recover(bad, tmp_path, audit_first=audit_first) as new:
            assert figures(new.ledger) == figures(ref.ledger)
            assert not any(
                t.action.startswith("audit") and "amends" in t.action
                for t in new.ledger.transactions(100)
            )
