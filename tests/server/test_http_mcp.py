"""`/mcp` in a running `plaudit serve`: the MCP SDK's own streamable-HTTP client against a real
store on both backends, behind the server's token and host guards."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest

from plaudit import Plaudit

pytest.importorskip("mcp", reason="needs the mcp extra")

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

TOKEN = "s3cret"
HEADER_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
META_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def call(url: str, session: Any, **headers: str) -> Any:
    async def go() -> Any:
        auth = {"Authorization": f"Bearer {TOKEN}", **headers}
        async with (
            httpx2.AsyncClient(headers=auth, timeout=30) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as c,
        ):
            return await session(c)

    return anyio.run(go)


def test_tools_over_http_behind_the_token(serve_factory, db_url: str) -> None:
    served = serve_factory(db_url, "--token", TOKEN)

    async def session(c: Any) -> list[Any]:
        arms = [{"id": "tool:exec:Bash", "tokens": 300}]
        sel = await c.call_tool("choose_context", {"arms": arms, "token_budget": 1000})
        reward = await c.call_tool(
            "record_reward",
            {"category": "successful_validation", "action": "tests pass"},
            meta={"traceparent": META_TRACE},
        )
        export = await c.call_tool("export_training_set", {"output_dir": "out"})
        score = await c.call_tool("read_score", {})
        return [sel, reward, export, score]

    sel, reward, export, score = call(served.url, session, traceparent=HEADER_TRACE)
    assert not sel.is_error and not reward.is_error and not score.is_error
    assert score.structured_content["score"]["total_score"] == 30
    # files on the server only under its export root, as over the plain HTTP API
    assert export.is_error
    assert export.content[0].text.startswith("error: output_dir: server-side files are disabled")
    with Plaudit.open(db_url) as p:
        run = p.log.get(sel.structured_content["run_id"])
        assert run is not None and run.meta["traceparent"] == HEADER_TRACE  # the header's
        tx = next(e for e in p.log.tail(20) if e.type == "plaudit.ledger.transaction.v1")
        assert tx.meta["traceparent"] == META_TRACE  # the call's `_meta` wins over the header

    # no token, a wrong token, a foreign Host: refused before MCP sees the request
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert httpx2.post(f"{served.url}/mcp", json=ping).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx2.post(f"{served.url}/mcp", json=ping, headers=wrong).status_code == 401
    rebound = {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}
    assert httpx2.post(f"{served.url}/mcp", json=ping, headers=rebound).status_code == 400
    bad_trace = {"Authorization": f"Bearer {TOKEN}", "traceparent": "00-xyz"}
    r = httpx2.post(f"{served.url}/mcp", json=ping, headers=bad_trace)
    assert r.status_code == 422
    assert r.json()["message"].startswith("traceparent header: '00-xyz' is not a W3C")
