"""`/v1/bandit` over HTTP on a minimal app: the dashboard contract, 422s, never a 5xx."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.errors import PlauditError
from plaudit.server.routes.bandit import router

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TIERS = {"none", "low", "medium", "high", "very high"}


def make_app(p: Plaudit, token: str | None = None) -> FastAPI:
    app = FastAPI()
    app.state.plaudit = p
    app.state.token = token

    @app.exception_handler(PlauditError)
    async def _err(request: Request, exc: PlauditError) -> JSONResponse:  # the real app's job
        return JSONResponse(exc.to_dict(), status_code=exc.http_status)

    app.include_router(router)
    return app


@pytest.fixture
def client(pl: Plaudit) -> Iterator[TestClient]:
    with TestClient(make_app(pl), raise_server_exceptions=False) as c:
        yield c


def test_register_select_observe_and_read(client: TestClient, arms) -> None:
    r = client.post("/v1/bandit/arms", json={"arms": arms})
    assert r.status_code == 200 and r.json()["registered"] == len(arms)
    assert {a["id"] for a in client.get("/v1/bandit/arms").json()["arms"]} == {
        a["id"] for a in arms
    }
    sel = client.post(
        "/v1/bandit/select", json={"token_budget": 5000, "context": "code", "seed": 1}
    )
    assert sel.status_code == 200
    run_id = sel.json()["run_id"]
    obs = client.post(
        "/v1/bandit/observe",
        json={
            "run_id": run_id,
            "output_text": "see README.md",
            "tool_calls": [{"name": "Bash"}],
            "usage_tokens": 1234,
            "duration_ms": 50.5,
        },
    )
    assert obs.status_code == 200
    assert obs.json()["rewards"]["file:workspace:README.md"] == 1
    assert client.get(f"/v1/bandit/runs/{run_id}").json()["observation"]["usage_tokens"] == 1234
    shown = client.get("/v1/bandit/arms/file:workspace:README.md").json()
    assert shown["global"]["pulls"] == 1 and "code" in shown["contexts"]
    assert client.get("/v1/bandit/contexts").json() == {"contexts": ["code"]}
    hist = client.get("/v1/bandit/history", params={"arm_id": "tool:exec:Bash"}).json()
    assert len(hist["arms"]["tool:exec:Bash"]) == 1


def test_posteriors_contract(client: TestClient, arms) -> None:
    client.post("/v1/bandit/arms", json={"arms": arms})
    body = client.get("/v1/bandit/posteriors", params={"context": "code"}).json()
    assert len(body["arms"]) == len(arms)
    for a in body["arms"]:
        assert isinstance(a["id"], str)
        for k in ("alpha", "beta", "mean", "variance", "ci_low", "ci_high"):
            assert isinstance(a[k], float)
        assert 0 <= a["ci_low"] <= a["mean"] <= a["ci_high"] <= 1
        assert isinstance(a["pulls"], int) and a["confidence"] in TIERS


def test_savings_contract(client: TestClient, arms) -> None:
    empty = client.get("/v1/bandit/savings").json()
    assert empty["token_savings_percent"] is None and empty["history"] == []
    for i in range(12):
        run_id = client.post("/v1/bandit/select", json={"arms": arms, "seed": i}).json()["run_id"]
        client.post("/v1/bandit/observe", json={"run_id": run_id, "usage_tokens": 100 + i})
    s = client.get("/v1/bandit/savings").json()
    assert s["baseline_runs"] + s["selected_runs"] == 12
    for k in (
        "token_savings_percent",
        "ci_low",
        "ci_high",
        "baseline_avg_tokens",
        "selected_avg_tokens",
    ):
        assert s[k] is None or isinstance(s[k], float)
    assert 0 < len(s["history"]) <= 200
    assert {"ts_ms", "run", "baseline_avg_tokens", "selected_avg_tokens"} <= set(s["history"][0])


def test_errors_are_4xx_with_a_message(client: TestClient, arms) -> None:
    r = client.post("/v1/bandit/observe", json={"run_id": "nope"})
    assert r.status_code == 404 and "no bandit run" in r.json()["message"]
    r = client.post("/v1/bandit/select", json={"arms": [{"id": "Bash", "tokens": 1}]})
    assert r.status_code == 422
    r = client.post("/v1/bandit/select", json={"arms": [{"id": "tool:exec:Bash", "tokens": -1}]})
    assert r.status_code == 422
    r = client.post("/v1/bandit/select", json={"token_budget": "8000"})
    assert r.status_code == 422
    r = client.post("/v1/bandit/select", json={})
    assert r.status_code == 422 and "none given and none registered" in r.json()["message"]
    r = client.post(
        "/v1/bandit/select", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    r = client.post("/v1/bandit/config", json={"threshold": 9})
    assert r.status_code == 422 and r.json()["field"] == "threshold"
    assert client.get("/v1/bandit/arms/tool:exec:Nope").status_code == 404
    assert client.get("/v1/bandit/runs/none").status_code == 404
    assert client.get("/v1/bandit/posteriors", params={"level": 2}).status_code == 422


def test_writes_need_the_token(pl: Plaudit, arms) -> None:
    with TestClient(make_app(pl, token="s3cret")) as c:
        assert c.post("/v1/bandit/arms", json={"arms": arms}).status_code == 401
        ok = c.post(
            "/v1/bandit/arms", json={"arms": arms}, headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 200
        assert c.get("/v1/bandit/arms").status_code == 200


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "arms": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["tool:exec:Bash", "x", "file:a:b", "tool:exec:Bash "])
                    | st.text(max_size=20),
                    "tokens": st.integers(-5, 10**8) | json_values,
                },
                optional={"content": json_values, "kind": json_values},
            ),
            max_size=4,
        ),
        "token_budget": st.integers(-5, 10**9) | json_values,
        "context": json_values,
        "seed": json_values,
        "run_id": json_values,
        "output_text": json_values,
        "tool_calls": json_values,
        "usage_tokens": json_values,
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=bodies, path=st.sampled_from(["select", "observe", "arms", "config"]))
def test_fuzzed_bodies_never_5xx(client: TestClient, body: dict[str, Any], path: str) -> None:
    r = client.post(f"/v1/bandit/{path}", json=body)
    assert r.status_code < 500, r.text
