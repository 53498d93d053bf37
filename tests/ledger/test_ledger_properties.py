"""Invariants under generated input: bad transactions change nothing; totals always add up."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.errors import PlauditError
from plaudit.ledger.config import load_config

CFG = load_config()
CATEGORIES = sorted(CFG.categories)

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=40),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
item = st.fixed_dictionaries(
    {},
    optional={
        "category": st.one_of(st.sampled_from(CATEGORIES), junk),
        "action": st.one_of(st.text(min_size=1, max_size=30), junk),
        "points": junk,
        "source": st.one_of(st.sampled_from(["mistake:m-001", "pattern:nope", "x"]), junk),
        "session": junk,
        "key": junk,
        "ts_ms": junk,
        "color": junk,
    },
)
valid = st.builds(
    lambda cat, n: {
        "category": cat,
        "action": f"act {n}",
        "points": CFG.categories[cat].points * (1 + n % 3),
    },
    st.sampled_from(CATEGORIES),
    st.integers(min_value=0, max_value=100),
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(batch=st.lists(st.one_of(item, valid), min_size=1, max_size=5))
def test_rejected_input_never_changes_the_ledger(sqlite_url_module: str, batch: list) -> None:
    with Plaudit.open(sqlite_url_module) as p:
        before = p.log.head()
        score_before = p.ledger.score()["total_score"]
        try:
            txs = p.ledger.record_batch(batch)
        except PlauditError:
            assert p.log.head() == before
            assert p.ledger.score()["total_score"] == score_before
        else:
            assert len(txs) == len(batch)
            assert p.ledger.score()["total_score"] == score_before + sum(t.points for t in txs)


@SETTINGS
@given(batches=st.lists(st.lists(valid, min_size=1, max_size=20), min_size=1, max_size=5))
def test_totals_always_add_up(tmp_path_factory, batches: list) -> None:
    path = tmp_path_factory.mktemp("prop") / "p.db"
    with Plaudit.open(path) as p:
        expected = 0
        for b in batches:
            txs = p.ledger.record_batch(b)
            for t in txs:
                expected += t.points
                assert t.running_total == expected  # exact, in order
        s = p.ledger.score()
        assert s["total_score"] == expected
        assert s["rewards_total"] + s["penalties_total"] == expected
        assert p.ledger.verify()["ok"]


REWARDS = sorted(n for n, c in CFG.categories.items() if c.type == "reward")
PENALTIES = sorted(n for n, c in CFG.categories.items() if c.type == "penalty")
entry = st.one_of(
    st.tuples(st.just("reward"), st.sampled_from(REWARDS), st.integers(0, 500)),
    st.tuples(st.just("penalty"), st.sampled_from(PENALTIES), st.integers(-500, 0)),
)


@SETTINGS
@given(
    entries=st.lists(entry, max_size=8),
    total=st.integers(-5000, 5000),
    earned=st.one_of(st.none(), st.integers(0, 5000)),
)
def test_import_always_lands_on_the_file_total(
    tmp_path_factory, entries: list, total: int, earned: int | None
) -> None:
    import json

    d = tmp_path_factory.mktemp("imp")
    rewards: dict = {} if earned is None else {"total_earned": earned}
    penalties: dict = {} if earned is None else {"total_incurred": min(0, total - earned)}
    doc = {
        "schema_version": "1.0.0",
        "reinforcement_learning_ledger": {
            "total_score": total,
            "rewards": rewards,
            "penalties": penalties,
            "metrics": {},
            "checksum_validation": {
                "calculated_total": total,
                "stored_total": total,
                "is_valid": True,
            },
        },
        "transaction_log": [
            {
                "id": f"tx-{i}",
                "timestamp": f"2025-10-13T12:{i:02d}:00+00:00",
                "type": t,
                "category": c,
                "points": pts,
                "running_total": 0,
            }
            for i, (t, c, pts) in enumerate(entries)
        ],
    }
    path = d / "progress.json"
    path.write_text(json.dumps(doc))
    with Plaudit.open(d / "p.db") as p:
        # the running totals are all 0, so the file is inconsistent unless accepted
        p.ledger.import_progress(path, accept_inconsistent=True)
        s = p.ledger.score()
        assert s["total_score"] == total
        assert s["rewards_total"] + s["penalties_total"] == total
        b = p.ledger.breakdown()
        assert sum(b["rewards"].values()) == s["rewards_total"]
        assert sum(b["penalties"].values()) == s["penalties_total"]
        assert p.ledger.verify()["ok"]
        again = p.ledger.import_progress(path, accept_inconsistent=True)  # idempotent
        assert again["changed"] is False
        assert p.ledger.score()["total_score"] == total


@st.composite
def consistent_progress(draw: st.DrawFn) -> dict:
    """Any valid progress.json whose numbers add up: a log of typed entries, categories that
    hold at least what the log shows, totals, session, lifetime and metrics that agree."""
    log = draw(st.lists(entry, max_size=8))
    rewards = {c: draw(st.integers(0, 300)) for c in draw(st.sets(st.sampled_from(REWARDS)))}
    penalties = {c: draw(st.integers(-300, 0)) for c in draw(st.sets(st.sampled_from(PENALTIES)))}
    for t, c, pts in log:
        side = rewards if t == "reward" else penalties
        side[c] = side.get(c, 0) + pts
    earned, incurred = sum(rewards.values()), sum(penalties.values())
    total = earned + incurred
    s_earned, s_incurred = draw(st.integers(0, 500)), draw(st.integers(-500, 0))
    l_earned = earned + draw(st.integers(0, 5000))
    l_incurred = incurred - draw(st.integers(0, 5000))
    wins = sum(p > 0 for _, _, p in log)
    losses = sum(p < 0 for _, _, p in log)
    actions = len(log) + draw(st.integers(0, 50))
    ok = wins + draw(st.integers(0, actions - len(log)))
    failed = losses + draw(st.integers(0, actions - len(log) - (ok - wins)))
    running = total - sum(p for _, _, p in log)
    entries = []
    for i, (t, c, pts) in enumerate(log):  # oldest first, then listed newest first
        running += pts
        entries.append(
            {
                "id": f"tx-{1000 + i}",
                "timestamp": f"2025-10-13T12:{i:02d}:00+05:30",
                "type": t,
                "category": c,
                "points": pts,
                "action": f"entry {i}",
                "source_file": "mistakes.json",
                "running_total": running,
                "verified": draw(st.booleans()),
            }
        )
    return {
        "schema_version": "1.0.0",
        "last_updated": "2025-10-13T12:30:00+05:30",
        "reinforcement_learning_ledger": {
            "total_score": total,
            "session_score": s_earned + s_incurred,
            "lifetime_score": l_earned + l_incurred,
            "rewards": {
                "total_earned": earned,
                "session_earned": s_earned,
                "lifetime_earned": l_earned,
                "by_category": rewards,
            },
            "penalties": {
                "total_incurred": incurred,
                "session_incurred": s_incurred,
                "lifetime_incurred": l_incurred,
                "by_category": penalties,
            },
            "metrics": {
                "learning_efficiency": 0,
                "actions_total": actions,
                "actions_successful": ok,
                "actions_failed": failed,
                "success_rate": 0,
                "autonomy_level": draw(st.integers(0, 100)),
            },
            "checksum_validation": {
                "calculated_total": total,
                "stored_total": total,
                "is_valid": True,
            },
        },
        "transaction_log": entries[::-1],
    }


def _no_clock(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.pop("last_updated", None)
    doc["reinforcement_learning_ledger"]["checksum_validation"].pop("last_validated", None)
    return doc


@SETTINGS
@given(doc=consistent_progress())
def test_progress_round_trip(tmp_path_factory, doc: dict) -> None:
    """Import then export keeps the totals and categories; a second import is a no-op; and a
    second store importing that export exports the same file."""
    d = tmp_path_factory.mktemp("rt")
    path = d / "progress.json"
    path.write_text(json.dumps(doc))
    want = doc["reinforcement_learning_ledger"]
    with Plaudit.open(d / "a.db") as p:
        p.ledger.import_progress(path)
        out = p.ledger.progress()
        led = out["reinforcement_learning_ledger"]
        for key in ("total_score", "session_score", "lifetime_score"):
            assert led[key] == want[key]
        for side in ("rewards", "penalties"):
            nonzero = {c: v for c, v in want[side]["by_category"].items() if v}
            assert led[side]["by_category"] == nonzero
            assert (
                sum(led[side]["by_category"].values())
                == (led[side]["total_earned" if side == "rewards" else "total_incurred"])
            )
        m = led["metrics"]
        for key in ("actions_total", "actions_successful", "actions_failed"):
            assert m[key] == want["metrics"][key]
        head = p.log.head()
        assert p.ledger.import_progress(path)["changed"] is False
        assert p.log.head() == head
        first = d / "first.json"
        p.ledger.export_progress(first)
    with Plaudit.open(d / "b.db") as q:
        q.ledger.import_progress(first)
        second = d / "second.json"
        q.ledger.export_progress(second)
    assert _no_clock(json.loads(first.read_text())) == _no_clock(json.loads(second.read_text()))
