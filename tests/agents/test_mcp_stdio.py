"""`plaudit mcp` over stdio, driven by the official MCP SDK's own client, on both backends: the
tools an agent calls in its loop, the resources, and errors that are the CLI's own lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from plaudit import Plaudit

pytest.importorskip("mcp", reason="needs the mcp extra")

from mcp import Client, StdioServerParameters

ENTRY = "import sys; from plaudit.cli import main; sys.exit(main())"
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
ARMS = [
    {"id": "tool:exec:Bash", "tokens": 300},
    {"id": "file:workspace:README.md", "tokens": 1800},
]


def stdio(db: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-c", ENTRY, "mcp", "--db", db])


def run(db: str, session: Any) -> Any:
    async def go() -> Any:
        async with Client(stdio(db)) as client:
            return await session(client)

    return anyio.run(go)


def cli(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "--db", db, *args], capture_output=True, text=True
    )


def test_an_agent_loop_over_stdio(db_url: str, tmp_path: Path) -> None:
    async def session(c: Any) -> dict[str, Any]:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        sel = await c.call_tool(
            "choose_context", {"arms": ARMS, "token_budget": 10_000, "traceparent": TRACE}
        )
        obs = await c.call_tool(
            "report_run",
            {
                "run_id": sel.structured_content["run_id"],
                "output_text": "Followed README.md.",
                "tool_calls": [{"name": "Bash"}],
                "traceparent": TRACE,
            },
        )
        reward = await c.call_tool(
            "record_reward", {"category": "successful_validation", "action": "tests pass"}
        )
        decision = {"decision_id": "d-1", "chosen_task": "ai:flow/test", "confidence": 0.8}
        await c.call_tool("router_decision", {**decision, "user_intent": "run the tests"})
        outcome = {"decision_id": "d-1", "outcome": "success", "task_executed": "ai:flow/test"}
        await c.call_tool("router_outcome", outcome)
        export = await c.call_tool("export_training_set", {"output_dir": str(tmp_path)})
        score = await c.read_resource("plaudit://ledger/score")
        head = await c.read_resource("plaudit://log/head")
        posteriors = await c.read_resource("plaudit://bandit/posteriors")
        return {
            "tools": tools,
            "sel": sel,
            "obs": obs,
            "reward": reward,
            "export": export,
            "score": json.loads(score.contents[0].text),
            "head": json.loads(head.contents[0].text),
            "posteriors": json.loads(posteriors.contents[0].text),
        }

    got = run(db_url, session)
    tools = got["tools"]
    assert {"choose_context", "report_run", "record_reward", "read_score"} <= set(tools)
    assert {"router_decision", "router_outcome", "router_override"} <= set(tools)
    assert "export_training_set" in tools
    for tool in tools.values():
        assert tool.description and "\n" not in tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    assert not got["sel"].is_error
    assert sorted(got["sel"].structured_content["included"]) == sorted(a["id"] for a in ARMS)
    assert got["obs"].structured_content["rewards"] == {
        "file:workspace:README.md": 1,
        "tool:exec:Bash": 1,
    }
    assert got["reward"].structured_content["points"] == 30
    assert got["score"]["score"]["total_score"] == 30
    assert got["export"].structured_content["distributions"]["outcomes"] == {"success": 1}
    assert (tmp_path / "summary.json").exists()
    means = {a["id"]: a["mean"] for a in got["posteriors"]["arms"]}
    assert means["tool:exec:Bash"] > 0.5
    with Plaudit.open(db_url) as p:
        assert got["head"]["length"] <= p.log.head().length
        run_event = p.log.get(got["sel"].structured_content["run_id"])
        assert run_event is not None and run_event.meta["traceparent"] == TRACE
        traced = [e for e in p.log.tail(50) if e.type == "plaudit.bandit.observation.v1"]
        assert traced[0].meta["traceparent"] == TRACE


def test_a_router_recommendation_in_shadow_mode(db_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "schema_version": "plaudit_router_policy_v1",
                "key": ["context.ci_status"],
                "table": {"failing": {"ai:flow/fix-ci": 1.0}},
                "default": {"ai:flow/test": 1.0},
            }
        )
    )

    async def session(c: Any) -> Any:
        decision = {"decision_id": "d-9", "chosen_task": "ai:flow/test", "confidence": 0.8}
        await c.call_tool("router_decision", {**decision, "user_intent": "fix the build"})
        return await c.call_tool(
            "router_recommend",
            {
                "policy": str(policy),
                "context": {"ci_status": "failing"},
                "decision_id": "d-9",
                "shadow": True,
            },
        )

    got = run(db_url, session)
    assert not got.is_error, got
    assert got.structured_content["task"] == "ai:flow/fix-ci"
    assert got.structured_content["probabilities"] == {"ai:flow/fix-ci": 1.0}
    with Plaudit.open(db_url) as p:
        shadows = [e for e in p.log.replay(types=["plaudit.signals.shadow."])]
        assert [e.id for e in shadows] and shadows[0].payload["task"] == "ai:flow/fix-ci"


def test_errors_are_the_clis_one_line_messages(db_url: str) -> None:
    bad_trace = {"category": "x", "action": "y", "traceparent": "1"}

    async def session(c: Any) -> list[Any]:
        return [
            await c.call_tool("record_reward", {"category": "made_up", "action": "x"}),
            await c.call_tool("choose_context", {"token_budget": "lots"}),
            await c.call_tool("choose_context", {"budget": 5}),
            await c.call_tool("report_run", {"run_id": "no-such-run"}),
            await c.call_tool("record_reward", bad_trace),
        ]

    results = run(db_url, session)
    assert all(r.is_error for r in results)
    texts = [r.content[0].text for r in results]
    assert all("\n" not in t and "Traceback" not in t for t in texts)
    made_up = cli(db_url, "ledger", "record", "--category", "made_up", "--action", "x")
    assert made_up.returncode == 2
    assert texts[0] == made_up.stderr.strip()
    unknown_run = cli(db_url, "observe", "--run-id", "no-such-run", "--response", "-")
    assert texts[3] == unknown_run.stderr.strip()
    assert texts[1] == "error: token_budget: must be integer, got str"
    assert texts[2].startswith("error: budget: unknown argument (allowed: arms, context, ")
    assert texts[4].startswith("error: traceparent: '1' is not a W3C traceparent")
    bad = cli(db_url, "--traceparent", "1", "ledger", "record", "--category", "x", "--action", "y")
    assert bad.stderr.strip().startswith("error: --traceparent: '1' is not a W3C traceparent")


def test_without_the_extra_mcp_is_one_line_and_serve_runs_without_it(
    monkeypatch, tmp_path: Path, capsys
) -> None:
    from plaudit.cli import main

    for name in list(sys.modules):
        if name.partition(".")[0] in ("mcp", "mcp_types"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)
    db = str(tmp_path / "x.db")
    assert main(["mcp", "--db", db]) == 2
    assert capsys.readouterr().err == (
        "error: plaudit mcp needs the mcp extra: pip install 'plaudit[mcp]'\n"
    )
    assert not Path(db).exists()
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plaudit.server.app import create_app

    with Plaudit.open(db) as p, TestClient(create_app(p)) as client:
        health = client.get("/v1/health").json()
        assert health["skipped_routes"]["plaudit.mcp"] == (
            "plaudit mcp needs the mcp extra: pip install 'plaudit[mcp]'"
        )
        assert client.post("/mcp", json={}).status_code == 404
