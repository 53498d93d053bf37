"""What the seed's original learning layer offered (issue 29, item 8), on every surface: a note
for the prompt about what was left out, a per-arm under-explored flag, run listings by session
with limit and offset, and posteriors listed in a documented order."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator

import pytest

from plaudit import Plaudit
from plaudit.bandit import guidance
from plaudit.cli import main
from plaudit.errors import ValidationError
from plaudit.server.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

ARMS = [
    {"id": "section:system:rules", "tokens": 50},
    {"id": "tool:exec:Bash", "tokens": 300},
    {"id": "tool:web:WebSearch", "tokens": 2500},
    {"id": "skill:debugging:main", "tokens": 2000},
    {"id": "file:ws:docs/guide.md", "tokens": 3000},
    {"id": "memory:project:deploys", "tokens": 900, "content": "Deploys need two approvals."},
]


@pytest.fixture
def client(pl: Plaudit) -> Iterator[TestClient]:
    with TestClient(create_app(pl)) as c:
        yield c


def test_the_selection_names_what_was_left_out_and_how_to_get_it(pl: Plaudit) -> None:
    sel = pl.bandit.select(ARMS, token_budget=400, seed=1)
    left_out = set(sel.excluded) - {"section:system:rules"}
    assert left_out and sel.guidance is not None
    note = sel.guidance
    assert f"{len(left_out)} components were left out" in note
    for arm_id in left_out:  # by the names the reference rules look for
        type_, category, name = arm_id.split(":", 2)
        assert (category if type_ == "skill" else name) in note, arm_id
    assert "rules" not in note  # sections are structure, nothing to fetch
    assert "fetch it" in note and "name it in your answer" in note
    # everything included: nothing to say
    assert pl.bandit.select(ARMS, token_budget=100_000, seed=2).guidance is None


def test_an_agent_that_follows_the_note_reports_the_miss(pl: Plaudit) -> None:
    """The note names a left-out file as the reference rules look for it; an agent that
    reads it and says so is seen to have needed it (a miss, learned as a success)."""
    pl.bandit.register(ARMS)
    sel = pl.bandit.select(token_budget=400, seed=1)
    assert "file:ws:docs/guide.md" in sel.excluded
    assert "docs/guide.md" in (sel.guidance or "")
    obs = pl.bandit.observe(sel.run_id, "I read docs/guide.md as the note asked.")
    assert obs.missed == ["file:ws:docs/guide.md"]


def test_a_long_list_is_named_in_part(pl: Plaudit) -> None:
    arms = [{"id": f"file:ws:f{i:04d}.md", "tokens": 500} for i in range(500)]
    sel = pl.bandit.select(arms, token_budget=1000, seed=3)
    left = len(sel.excluded)
    note = sel.guidance or ""
    assert f"{left:,} components were left out" in note
    assert sum(f"f{i:04d}.md" in note for i in range(500)) == guidance.MAX_NAMED
    assert f"(and {left - guidance.MAX_NAMED:,} more)" in note


def test_the_guidance_on_the_cli_and_over_http(
    pl: Plaudit, client: TestClient, db_url: str, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = client.post("/v1/bandit/select", json={"arms": ARMS, "token_budget": 400}).json()
    assert "components were left out" in body["guidance"]
    arms = tmp_path / "arms.json"
    arms.write_text(json.dumps(ARMS))
    assert main(["--db", db_url, "select", "--arms", str(arms), "--budget", "400"]) == 0
    out = capsys.readouterr().out
    assert "for the prompt: To save tokens," in out
    assert main(["--db", db_url, "select", "--arms", str(arms), "--budget", "400", "--json"]) == 0
    assert "components were left out" in json.loads(capsys.readouterr().out)["guidance"]


def test_under_explored_arms_are_flagged_on_every_surface(
    pl: Plaudit, client: TestClient, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pl.bandit.configure(min_pulls=3, min_pulls_context=2)
    pl.bandit.register(ARMS)
    for i in range(3):
        sel = pl.bandit.select(token_budget=100_000, context="code" if i < 2 else None, seed=i)
        pl.bandit.observe(sel.run_id, "ran Bash")
    pl.bandit.register([{"id": "tool:exec:New", "tokens": 10}])
    flags = {s.id: s.underexplored for s in pl.bandit.posteriors()}
    assert flags == {a["id"]: False for a in ARMS} | {"tool:exec:New": True}
    # in a context, also fewer than min_pulls_context pulls there
    pl.bandit.configure(min_pulls_context=3)
    in_code = {s.id: s.underexplored for s in pl.bandit.posteriors("code")}
    assert all(in_code.values())
    got = client.get("/v1/bandit/posteriors").json()["arms"]
    assert {a["id"]: a["underexplored"] for a in got} == flags
    assert main(["--db", db_url, "posteriors"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines if "(under-explored)" in line] == ["tool:exec:New"]
    assert any(line.startswith("under-explored: fewer pulls than min_pulls") for line in lines)
    assert main(["--db", db_url, "arms", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["arms"]
    assert {a["id"]: a["underexplored"] for a in listed} == flags


def test_posteriors_are_listed_in_arm_id_order(pl: Plaudit) -> None:
    ids = ["tool:a:b", "tool:a:B", "tool:a-b:a", "tool:ab:a", "file:x:Z.md", "file:x:a.md"]
    pl.bandit.register([{"id": i, "tokens": 1} for i in ids])
    assert [s.id for s in pl.bandit.posteriors()] == sorted(ids)
    assert [a.id for a in pl.bandit.arms()] == sorted(ids)


def test_runs_are_listed_by_session_newest_first_with_limit_and_offset(
    pl: Plaudit, client: TestClient, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    made: dict[str, list[str]] = {"a": [], "b": []}
    every: list[str] = []
    for i in range(7):
        session = "a" if i % 3 else "b"
        sel = pl.bandit.select(ARMS, token_budget=3000, seed=i, session_id=session)
        made[session].append(sel.run_id)
        every.append(sel.run_id)
        if i % 2:
            pl.bandit.observe(sel.run_id, "ran Bash", [{"name": "Bash"}], usage_tokens=900)
    newest_a = made["a"][::-1]
    assert [r["run_id"] for r in pl.bandit.runs("a")] == newest_a
    assert [r["run_id"] for r in pl.bandit.runs("a", limit=2, offset=1)] == newest_a[1:3]
    assert [r["run_id"] for r in pl.bandit.runs(limit=3)] == every[::-1][:3]
    assert pl.bandit.runs("nobody") == []
    first = pl.bandit.runs("a", limit=1)[0]
    run = pl.bandit.run(first["run_id"])
    assert first["session_id"] == "a" and first["included"] == len(run["included"])
    assert first["used_tokens"] == run["used_tokens"]
    assert first["observed"] == (run["observation"] is not None)
    if first["observed"]:
        assert first["usage_tokens"] == 900
    with pytest.raises(ValidationError, match="limit"):
        pl.bandit.runs(limit=0)

    page = client.get("/v1/bandit/runs", params={"session_id": "a", "limit": 2, "offset": 1})
    assert [r["run_id"] for r in page.json()["runs"]] == newest_a[1:3]
    assert client.get("/v1/bandit/runs", params={"limit": 0}).status_code == 422

    assert main(["--db", db_url, "bandit", "runs", "--session", "b", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["runs"]
    assert [r["run_id"] for r in listed] == made["b"][::-1]
    assert main(["--db", db_url, "bandit", "runs", "--session", "b", "--limit", "1"]) == 0
    assert capsys.readouterr().out.startswith(made["b"][-1])
    assert main(["--db", db_url, "bandit", "runs", "--limit", "0"]) == 2
