"""Arm lists passed with every select (issue 29): an unchanged list is recognised and costs
nothing more, a changed one registers and records only what changed, and every run still
knows exactly which arms and tokens it considered, through any rebuild."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.bandit import armsets
from plaudit.bandit.armsets import ARMSET_V1, REBASE_DEPTH, set_digest
from plaudit.bandit.projection import ARMS_V1, RUN_V2
from plaudit.errors import ValidationError
from plaudit.events import make_event


def _list(n: int, start: int = 0) -> list[dict[str, Any]]:
    kinds = ("tool", "file", "skill", "memory")
    return [
        {"id": f"{kinds[i % 4]}:c{i % 7}:a{i}", "tokens": 100 + (i * 37) % 900}
        for i in range(start, start + n)
    ]


def _count(p: Plaudit, event_type: str) -> int:
    return p.log.stats().by_type.get(event_type, 0)


def _chain(p: Plaudit, digest: str) -> list[dict[str, Any]]:
    out = []
    at: str | None = digest
    while at is not None:
        ev = p.log.get(armsets.event_id(at))
        assert ev is not None
        out.append(ev.payload)
        at = ev.payload["base"]
    return out


def test_an_unchanged_list_is_recorded_once(pl: Plaudit) -> None:
    arms = _list(30)
    runs = [pl.bandit.select([dict(a) for a in arms], token_budget=4000, seed=i) for i in range(5)]
    assert _count(pl, ARMSET_V1) == 1 and _count(pl, ARMS_V1) == 1
    digests = {pl.log.get(s.run_id).payload["arm_set"] for s in runs}  # type: ignore[union-attr]
    assert digests == {set_digest([a["id"] for a in arms], [a["tokens"] for a in arms])}
    for s in runs:
        assert pl.bandit.considered(s.run_id) == {a["id"]: a["tokens"] for a in arms}
    # a list in another order is the same set
    pl.bandit.select(list(reversed(arms)), token_budget=4000)
    assert _count(pl, ARMSET_V1) == 1 and _count(pl, ARMS_V1) == 1


def test_a_changed_list_registers_and_records_what_changed(pl: Plaudit) -> None:
    arms = _list(40)
    first = pl.bandit.select(arms, token_budget=4000, seed=1)
    changed = [dict(a) for a in arms]
    changed[3]["tokens"] += 1  # a file grew
    del changed[10]  # one left the workspace
    changed.append({"id": "file:new:notes.md", "tokens": 77})  # one appeared
    second = pl.bandit.select(changed, token_budget=4000, seed=2)
    base = pl.log.get(first.run_id).payload["arm_set"]  # type: ignore[union-attr]
    got = pl.log.get(second.run_id).payload["arm_set"]  # type: ignore[union-attr]
    record = pl.log.get(armsets.event_id(got))
    assert record is not None and record.payload["base"] == base
    assert sorted(zip(record.payload["ids"], record.payload["tokens"], strict=True)) == sorted(
        [(changed[3]["id"], changed[3]["tokens"]), ("file:new:notes.md", 77)]
    )
    assert record.payload["drop"] == [arms[10]["id"]]
    registered = [a["id"] for ev in pl.log.replay(types=[ARMS_V1]) for a in ev.payload["arms"]]
    assert sorted(registered[40:]) == sorted([changed[3]["id"], "file:new:notes.md"])
    assert pl.bandit.considered(second.run_id) == {a["id"]: a["tokens"] for a in changed}
    assert pl.bandit.considered(first.run_id) == {a["id"]: a["tokens"] for a in arms}


def test_chains_of_changes_stay_short(pl: Plaudit) -> None:
    arms = _list(12)
    runs = []
    for i in range(2 * REBASE_DEPTH + 5):
        arms[i % 12] = {"id": arms[i % 12]["id"], "tokens": 1000 + i}
        runs.append((pl.bandit.select(arms, token_budget=50_000).run_id, {**_as_dict(arms)}))
    for run_id, want in runs:
        digest = pl.log.get(run_id).payload["arm_set"]  # type: ignore[union-attr]
        assert len(_chain(pl, digest)) <= REBASE_DEPTH + 1
        assert pl.bandit.considered(run_id) == want


def test_a_large_set_is_recorded_in_chunks(pl: Plaudit, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(armsets, "CHUNK_BYTES", 400)
    arms = _list(60)
    sel = pl.bandit.select(arms, token_budget=5000)
    digest = pl.log.get(sel.run_id).payload["arm_set"]  # type: ignore[union-attr]
    chain = _chain(pl, digest)
    assert len(chain) > 3 and all(len(c["ids"]) < 60 for c in chain)
    assert pl.bandit.considered(sel.run_id) == _as_dict(arms)
    assert pl.bandit.run(sel.run_id)["arms"] == sorted([a["id"], a["tokens"]] for a in arms)


def test_a_list_naming_arms_another_handle_changed_registers_its_own(db_url: str) -> None:
    """The select compares the list with its cached registry only while the log's registry
    is that one; another writer's registration in between is read from the log."""
    arms = _list(8)
    with Plaudit.open(db_url) as a, Plaudit.open(db_url) as b:
        a.bandit.select(arms, token_budget=5000)
        b.bandit.register([{"id": arms[2]["id"], "tokens": 5}])
        a.bandit.select(arms, token_budget=5000)
        assert {x.id: x.tokens for x in b.bandit.arms()}[arms[2]["id"]] == arms[2]["tokens"]


def test_bad_arms_in_a_changed_list_are_named_and_nothing_is_written(pl: Plaudit) -> None:
    arms = _list(10)
    pl.bandit.select(arms, token_budget=4000)
    length = pl.log.stats().length
    cases = [
        (3, {"tokens": -1}, "arms[3]"),
        (4, {"id": "tool:bad category:x"}, "arms[4]"),
        (5, {"tokens": True}, "arms[5]"),
        (6, {"colour": "red"}, "arms[6]"),
        (7, {"id": arms[2]["id"]}, "arms[7]"),
    ]
    for i, change, where in cases:
        bad = [dict(a) for a in arms]
        bad[i].update(change)
        with pytest.raises(ValidationError) as exc:
            pl.bandit.select(bad, token_budget=4000)
        assert where in str(exc.value)
    with pytest.raises(ValidationError, match="is empty"):
        pl.bandit.select([], token_budget=4000)
    assert pl.log.stats().length == length


def _armset(digest: str, ids: list[str], tokens: list[int], base: str | None = None) -> Any:
    payload = {"digest": digest, "base": base, "ids": ids, "tokens": tokens, "drop": []}
    return make_event(ARMSET_V1, payload, id=armsets.event_id(digest))


def test_malformed_arm_sets_and_runs_naming_unknown_ones_are_refused(pl: Plaudit) -> None:
    ids, tokens = ["tool:exec:Bash", "file:ws:a.md"], [10, 20]
    good = set_digest(ids, tokens)
    bad = [
        _armset("0" * 64, ids, tokens),  # not the digest of the set
        _armset(good, ["tool:exec:Bash", "nope"], tokens),  # a malformed id
        _armset(good, ids, [10]),  # not aligned
        _armset(good, ids, tokens, base="1" * 64),  # an unknown base
        make_event(ARMSET_V1, {"digest": good, "ids": ids, "tokens": tokens}, id="armset:x"),
    ]
    for ev in bad:
        with pytest.raises(ValidationError):
            pl.log.append(ev)
    sel = pl.bandit.select([{"id": i, "tokens": t} for i, t in zip(ids, tokens, strict=True)])
    payload = {**pl.log.get(sel.run_id).payload, "arm_set": "2" * 64}  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="no recorded arm set"):
        pl.log.append(make_event(RUN_V2, payload, id="run-x"))
    assert _count(pl, ARMSET_V1) == 1


def test_considered_for_registered_runs_is_the_registry_as_of_the_run(pl: Plaudit) -> None:
    pl.bandit.register(_list(5))
    first = pl.bandit.select(token_budget=4000)
    pl.bandit.register([{"id": "tool:c0:a0", "tokens": 999}, *_list(1, start=9)])
    second = pl.bandit.select(token_budget=4000)
    assert pl.bandit.considered(first.run_id) == _as_dict(_list(5))
    assert pl.bandit.considered(second.run_id) == {
        **_as_dict(_list(5)),
        "tool:c0:a0": 999,
        **_as_dict(_list(1, start=9)),
    }


def _as_dict(arms: list[dict[str, Any]]) -> dict[str, int]:
    return {a["id"]: a["tokens"] for a in arms}


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["same", "tokens", "add", "drop", "shuffle", "reopen"]),
            st.integers(0, 999),
        ),
        min_size=1,
        max_size=14,
    )
)
def test_every_run_knows_its_arms_through_any_changes_and_a_rebuild(
    tmp_path: Path, posterior_table: Any, steps: list[tuple[str, int]]
) -> None:
    """Any sequence of lists (the same, a cost changed, an arm added or dropped, another
    order), from handles that come and go: each run's considered arms are the list it was
    passed, and a rebuild reproduces every run's arms and the posteriors."""
    db = str(tmp_path / f"lists-{random.getrandbits(40)}.db")
    arms = _list(6)
    p = Plaudit.open(db)
    want: dict[str, dict[str, int]] = {}
    try:
        for i, (step, k) in enumerate(steps):
            if step == "tokens":
                j = k % len(arms)
                arms[j] = {**arms[j], "tokens": k}
            elif step == "add":
                arms.append({"id": f"file:new:f{k}-{i}.md", "tokens": k})
            elif step == "drop" and len(arms) > 1:
                del arms[k % len(arms)]
            elif step == "shuffle":
                random.Random(k).shuffle(arms)
            elif step == "reopen":
                p.close()
                p = Plaudit.open(db)
            ctx = "code" if k % 2 else None
            sel = p.bandit.select([dict(a) for a in arms], token_budget=1500, context=ctx, seed=k)
            p.bandit.observe(sel.run_id, " ".join(a.split(":")[-1] for a in sel.included[::2]))
            want[sel.run_id] = _as_dict(arms)
        before = posterior_table(p)
        # the long-lived handle's cache (remapped whenever a list registered new arms) reads
        # what a fresh handle reads
        with Plaudit.open(db) as fresh:
            for ctx in (None, "code"):
                assert p.bandit.posteriors(ctx) == fresh.bandit.posteriors(ctx)
        assert {r: p.bandit.considered(r) for r in want} == want
        p.rebuild()
        assert {r: p.bandit.considered(r) for r in want} == want
        assert posterior_table(p) == before
        assert p.log.verify().ok
    finally:
        p.close()
