"""`/v1/ledger/...` over HTTP: the dashboard contract, write protection, and 4xx for bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.errors import PlauditError
from plaudit.server.routes.ledger import router


def make_app(p: Plaudit, token: str | None = None) -> FastAPI:
    app = FastAPI()
    app.state.plaudit = p
    app.state.token = token
    app.include_router(router)

    @app.exception_handler(PlauditError)
    def _plaudit_error(request: Request, exc: PlauditError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.http_status)

    return app


@pytest.fixture
def client(pl: Plaudit) -> Iterator[TestClient]:
    with TestClient(make_app(pl), raise_server_exceptions=True) as c:
        yield c


def test_score_contract(client: TestClient) -> None:
    client.post("/v1/ledger/sessions/start", json={"session": "s1"})
    for cat in ("successful_validation", "validation_failure", "pattern_reuse"):
        r = client.post("/v1/ledger/record", json={"category": cat, "action": "did it"})
        assert r.status_code == 200, r.text
    s = client.get("/v1/ledger/score").json()
    for key, kind in {
        "total_score": int,
        "session_score": int,
        "lifetime_score": int,
        "rewards_total": int,
        "penalties_total": int,
        "learning_efficiency": float,
        "session_id": str,
        "trend": list,
        "transactions": int,
        "verified": bool,
    }.items():
        assert isinstance(s[key], kind), key
    assert s["total_score"] == 30 and s["session_id"] == "s1" and s["verified"] is True
    assert [p["total"] for p in s["trend"]] == [30, 10, 30]
    assert all(set(p) == {"ts_ms", "total"} for p in s["trend"])


def test_trend_is_capped_at_200_points(client: TestClient) -> None:
    client.post("/v1/ledger/sessions/start", json={})
    batch = [{"category": "pattern_reuse", "action": f"a{i}"} for i in range(1000)]
    assert client.post("/v1/ledger/record-batch", json={"transactions": batch}).status_code == 200
    trend = client.get("/v1/ledger/score").json()["trend"]
    assert len(trend) <= 200
    assert trend[0]["total"] == 20 and trend[-1]["total"] == 20_000
    assert [p["total"] for p in trend] == sorted(p["total"] for p in trend)


def test_transactions_contract(client: TestClient) -> None:
    for i in range(5):
        client.post("/v1/ledger/record", json={"category": "pattern_reuse", "action": f"a{i}"})
    client.post("/v1/ledger/record", json={"category": "unused_variables", "action": "lint"})
    txs = client.get("/v1/ledger/transactions", params={"limit": 3}).json()["transactions"]
    assert [t["action"] for t in txs] == ["lint", "a4", "a3"]
    keys = {"id", "timestamp", "ts_ms", "type", "category", "points", "action", "source"}
    keys |= {"session_id", "running_total", "verified"}
    assert keys <= set(txs[0])
    only = client.get("/v1/ledger/transactions", params={"category": "unused_variables"}).json()
    assert [t["points"] for t in only["transactions"]] == [-5]
    r = client.get("/v1/ledger/transactions", params={"category": "nonsense"})
    assert r.status_code == 422 and "unknown category" in r.json()["message"]


def test_other_endpoints(client: TestClient) -> None:
    client.post("/v1/ledger/record", json={"category": "pattern_reuse", "action": "a"})
    assert client.get("/v1/ledger/breakdown").json()["rewards"] == {"pattern_reuse": 20}
    assert client.get("/v1/ledger/verify").json()["ok"] is True
    assert client.get("/v1/ledger/metrics").json()["actions_total"] == 1
    assert client.post("/v1/ledger/reconcile", json={"recover": True}).json()["ok"] is True
    assert client.post("/v1/ledger/checkpoint").status_code == 200
    assert client.post("/v1/ledger/apply-rules").json()["created"] == 0
    assert client.get("/v1/ledger/report", params={"period": "weekly"}).json()["transactions"] == 1
    md = client.get("/v1/ledger/report", params={"format": "markdown"}).json()["markdown"]
    assert md.startswith("# Ledger daily")
    assert client.get("/v1/ledger/progress").json()["transaction_log"][0]["id"].startswith("tx-")
    audit = client.post("/v1/ledger/audit").json()
    assert audit["checksum_valid_after"] is True
    assert client.get("/v1/ledger/sessions").json() == {"sessions": []}
    kinds = [i["kind"] for i in client.get("/v1/ledger/incidents").json()["incidents"]]
    assert kinds == ["audit"]


@pytest.mark.parametrize(
    "body",
    [
        {"category": "nope", "action": "x"},
        {"category": "validation_failure", "action": "x", "points": 3},
        {"category": "validation_failure", "action": "x", "points": "3"},
        {"category": "validation_failure"},
        {"category": "validation_failure", "action": "x", "extra": 1},
        {"category": "validation_failure", "action": "x", "source": "mistake:none"},
        {"category": "validation_failure", "action": "x", "points": 10**12},
        [],
    ],
)
def test_bad_bodies_get_4xx_and_change_nothing(client: TestClient, pl: Plaudit, body) -> None:
    head = pl.log.head()
    r = client.post("/v1/ledger/record", json=body)
    assert 400 <= r.status_code < 500
    assert pl.log.head() == head


def test_malformed_json_and_dates(client: TestClient) -> None:
    r = client.post(
        "/v1/ledger/record", content=b'{"category": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert client.get("/v1/ledger/report", params={"date": "9999-12-31"}).status_code == 422
    assert client.get("/v1/ledger/report", params={"date": "0001-01-01"}).status_code == 422
    assert client.get("/v1/ledger/transactions", params={"limit": -1}).status_code == 422


def test_writes_need_the_token(pl: Plaudit) -> None:
    with TestClient(make_app(pl, token="s3cret")) as c:
        body = {"category": "pattern_reuse", "action": "a"}
        assert c.post("/v1/ledger/record", json=body).status_code == 401
        ok = c.post("/v1/ledger/record", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert c.get("/v1/ledger/score").status_code == 200


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    body=st.dictionaries(
        st.sampled_from(["category", "action", "points", "source", "session", "key", "x"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=30),
            st.sampled_from(["validation_failure", "pattern_reuse", "mistake:m-1", "a:b"]),
        ),
    )
)
def test_fuzzed_record_bodies_never_5xx(sqlite_url_module: str, body: dict) -> None:
    with Plaudit.open(sqlite_url_module) as p:
        before = p.log.head()
        with TestClient(make_app(p), raise_server_exceptions=False) as c:
            r = c.post("/v1/ledger/record", json=body)
        assert r.status_code < 500, (body, r.text)
        if r.status_code != 200:
            assert p.log.head() == before


def test_server_reconciles_in_the_background(pl: Plaudit, monkeypatch) -> None:
    import time

    from plaudit.server.routes import ledger as routes

    monkeypatch.setattr(routes, "RECONCILE_CHECK_S", 0.05)

    def reconciles() -> int:
        return sum(1 for _ in pl.log.replay(types=["plaudit.ledger.reconcile"]))

    with TestClient(make_app(pl)):
        pl.ledger.record("pattern_reuse", "recorded outside the HTTP API")
        deadline = time.monotonic() + 20
        while reconciles() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reconciles() == 1  # due (never reconciled), then not again until 10 more
        time.sleep(0.3)
        assert reconciles() == 1
