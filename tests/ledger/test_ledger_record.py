"""Recording: the five steps, idempotency, sessions and the score definitions."""

from __future__ import annotations

import pytest

from plaudit.errors import ConflictError, NotFoundError, ValidationError
from plaudit.ledger import Ledger


def test_record_uses_category_points_and_running_total(ledger: Ledger) -> None:
    a = ledger.record("successful_validation", "suite passed")
    b = ledger.record("validation_failure", "suite failed")
    c = ledger.record("zero_duplication", "reused helper", points=7)
    assert (a.points, b.points, c.points) == (30, -20, 7)
    assert (a.running_total, b.running_total, c.running_total) == (30, 10, 17)
    assert (a.type, b.type) == ("reward", "penalty")
    assert a.id != b.id and len({a.id, b.id, c.id}) == 3
    s = ledger.score()
    assert s["total_score"] == 17
    assert s["rewards_total"] == 37 and s["penalties_total"] == -20
    assert s["verified"] is True


def test_ids_are_collision_free_within_one_millisecond(ledger: Ledger) -> None:
    txs = ledger.record_batch(
        [{"category": "pattern_reuse", "action": f"a{i}"} for i in range(300)]
    )
    assert len({t.id for t in txs}) == 300
    assert not any(t.id.startswith("tx-") for t in txs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"category": "no_such_thing", "action": "x"}, "category"),
        ({"category": "successful_validation", "action": "x", "points": -5}, "points"),
        ({"category": "validation_failure", "action": "x", "points": 5}, "points"),
        ({"category": "validation_failure", "action": "x", "points": 0}, "points"),
        ({"category": "validation_failure", "action": ""}, "action"),
        ({"category": "validation_failure", "action": "x", "source": "nokind"}, "source"),
        ({"category": "validation_failure", "action": "x", "source": "planet:1"}, "source"),
        ({"category": "pattern_reuse", "action": "x", "source": "mistake:m-001"}, "source"),
    ],
)
def test_bad_transactions_are_refused_and_change_nothing(
    ledger: Ledger, kwargs: dict, field: str
) -> None:
    ledger.record("successful_validation", "before")
    head = ledger.p.log.head()
    with pytest.raises(ValidationError) as err:
        ledger.record(**kwargs)
    assert err.value.field == field
    assert ledger.p.log.head() == head
    assert ledger.score()["total_score"] == 30


def test_source_cross_reference(sourced: Ledger) -> None:
    t = sourced.record("validation_failure", "pagination broke", source="mistake:m-002")
    assert t.verified is True and t.source == "mistake:m-002"
    # file names are accepted as kinds
    t2 = sourced.record("pattern_reuse", "cursor fix", source="memory.json:pagination-cursor-fix")
    assert t2.source == "entity:pagination-cursor-fix" and t2.verified
    unsourced = sourced.record("validation_failure", "no source given")
    assert unsourced.verified is False
    assert sourced.metrics()["actions_unverified"] == 1
    head = sourced.p.log.head()
    with pytest.raises(NotFoundError, match="mistake:m-999 does not exist"):
        sourced.record("validation_failure", "x", source="mistake:m-999")
    # the cross-file table's rules: recovery needs resolved, file creation needs the category
    with pytest.raises(ValidationError, match="resolved"):
        sourced.record("autonomous_recovery", "x", source="mistake:m-002")
    with pytest.raises(ValidationError, match="constitutional_violation"):
        sourced.record("file_creation_violation", "x", source="mistake:m-003")
    with pytest.raises(ValidationError, match="success_count"):
        sourced.record("constitutional_compliance", "x", source="pattern:p-draft")
    assert sourced.p.log.head() == head
    ok = sourced.record("autonomous_recovery", "recovered", source="mistake:m-001")
    assert ok.verified


def test_idempotent_key(ledger: Ledger) -> None:
    a = ledger.record("pattern_reuse", "reused", key="job-42")
    ledger.record("validation_failure", "something else")
    again = ledger.record("pattern_reuse", "reused", key="job-42")
    assert again.status == "present" and again.id == "job-42" and again.seq == a.seq
    assert ledger.score()["total_score"] == 0
    with pytest.raises(ConflictError):
        ledger.record("pattern_reuse", "a different action", key="job-42")


def test_batch_is_all_or_nothing(ledger: Ledger) -> None:
    ledger.record("pattern_reuse", "first")
    head = ledger.p.log.head()
    with pytest.raises(ValidationError) as err:
        ledger.record_batch(
            [
                {"category": "pattern_reuse", "action": "ok"},
                {"category": "pattern_reuse", "action": "ok", "points": "20"},
            ]
        )
    assert err.value.where == "[1]" and err.value.field == "points"
    assert ledger.p.log.head() == head
    with pytest.raises(ValidationError, match="repeats"):
        ledger.record_batch(
            [
                {"category": "pattern_reuse", "action": "a", "key": "k"},
                {"category": "pattern_reuse", "action": "a", "key": "k"},
            ]
        )
    assert ledger.p.log.head() == head


def test_sessions_and_scores(ledger: Ledger) -> None:
    ledger.record("successful_validation", "before any session")  # lifetime only
    s1 = ledger.start_session("s1", label="morning")
    assert s1["open"] and s1["session_id"] == "s1"
    ledger.record("successful_validation", "in s1")
    ledger.record("validation_failure", "in s1")
    assert ledger.score()["session_score"] == 10
    ended = ledger.end_session()
    assert ended["open"] is False and ended["score"] == 10
    # after the end, new transactions belong to no session; the last session stays "current"
    ledger.record("pattern_reuse", "between sessions")
    score = ledger.score()
    assert score["session_id"] == "s1" and score["session_open"] is False
    assert score["session_score"] == 10
    ledger.start_session("s2")
    ledger.record("unused_variables", "lint")
    ledger.start_session("s3")  # s2 stays open: it can still be named explicitly
    ledger.record("pattern_reuse", "explicit", session="s2")
    with pytest.raises(ValidationError, match="has ended"):
        ledger.record("pattern_reuse", "too late", session="s1")
    with pytest.raises(ValidationError, match="never started"):
        ledger.record("pattern_reuse", "unknown", session="s9")
    score = ledger.score()
    assert score["session_id"] == "s3" and score["session_score"] == 0
    assert score["total_score"] == 30 + 30 - 20 + 20 - 5 + 20
    assert score["lifetime_score"] == score["total_score"]  # nothing carried over
    assert score["trend"] == []
    scores = {s["session_id"]: s["score"] for s in ledger.sessions()}
    assert scores == {"s1": 10, "s2": 15, "s3": 0}
    with pytest.raises(ValidationError, match="already ended"):
        ledger.end_session("s1")
    assert ledger.start_session("s1", label="morning")["open"] is False  # never restarts
    with pytest.raises(ConflictError):
        ledger.start_session("s1", label="another label")


def test_metrics_definitions(ledger: Ledger) -> None:
    assert ledger.metrics()["autonomy_level"] == 100.0
    for cat in ("successful_validation", "successful_validation", "validation_failure"):
        ledger.record(cat, "x")
    ledger.record("permission_request", "asked for permission")
    m = ledger.metrics()
    assert m["actions_total"] == 4
    assert m["actions_successful"] == 2 and m["actions_failed"] == 2
    assert m["success_rate"] == 50.0
    assert m["learning_efficiency"] == round(100 * 60 / (60 + 45), 2)
    assert m["autonomy_level"] == 75.0  # base 100 x (1 - 1 permission request / 4 actions)


def test_user_config_overrides_defaults(pl, tmp_path) -> None:
    cfg = tmp_path / "ledger.toml"
    cfg.write_text(
        'base_autonomy = 80.0\n[categories.code_review]\ntype = "reward"\npoints = 12\n'
        '[categories.validation_failure]\ntype = "penalty"\npoints = -3\nsource = "mistake"\n'
    )
    lg = Ledger(pl, cfg)
    assert lg.record("code_review", "reviewed").points == 12
    assert lg.record("validation_failure", "x").points == -3
    assert lg.record("pattern_reuse", "default categories remain").points == 20
    assert lg.metrics()["base_autonomy"] == 80.0
