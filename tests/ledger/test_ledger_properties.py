"""Invariants under generated input: bad transactions change nothing; totals always add up."""

from __future__ import annotations

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
