"""The app's own behaviour: auth on writes, body limit, CORS, host guard, error bodies."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterator

import pytest
from fastapi import APIRouter

from plaudit import Plaudit
from plaudit.server.app import create_app, load_routers
from plaudit.server.hosts import host_name

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

EVENT = {"type": "test.thing.v1", "payload": {"n": 1}}


def test_writes_need_the_token_when_one_is_set_reads_do_not(pl: Plaudit) -> None:
    c = TestClient(create_app(pl, token="s3cret"))
    r = c.post("/v1/log/append", json=EVENT)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer" in r.json()["message"]
    wrong = c.post("/v1/log/append", json=EVENT, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert len(pl.log) == 0

    ok = c.post("/v1/log/append", json=EVENT, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert c.get("/v1/log/head").json()["length"] == 1  # reads stay open
    assert c.get("/v1/health").json()["write_auth"] is True


def test_body_limit_by_content_length(sqlite_pl: Plaudit) -> None:
    c = TestClient(create_app(sqlite_pl, max_body_bytes=200))
    big = {"type": "test.thing.v1", "payload": {"x": "y" * 500}}
    r = c.post("/v1/log/append", json=big)
    assert r.status_code == 413
    body = r.json()
    assert body["error"] == "PayloadTooLarge" and body["limit"] == 200
    assert "at most 200 bytes" in body["message"]
    assert len(sqlite_pl.log) == 0
    assert c.post("/v1/log/append", json=EVENT).status_code == 200


def test_body_limit_on_the_stream_without_content_length(sqlite_pl: Plaudit) -> None:
    """A chunked upload declares no length; the limit still holds, counted on the stream."""
    c = TestClient(create_app(sqlite_pl, max_body_bytes=1000))

    def chunks() -> Iterator[bytes]:
        yield b'{"type": "test.thing.v1", "payload": {"x": "'
        for _ in range(50):
            yield b"z" * 100
        yield b'"}}'

    r = c.post("/v1/log/append", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "at most 1000 bytes" in r.json()["message"]
    assert len(sqlite_pl.log) == 0

    def small() -> Iterator[bytes]:
        yield b'{"type": "test.thing.v1",'
        yield b' "payload": {"ok": true}}'

    r = c.post("/v1/log/append", content=small(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert sqlite_pl.log.tail(1)[0].payload == {"ok": True}


def test_cors_is_off_by_default(sqlite_pl: Plaudit) -> None:
    c = TestClient(create_app(sqlite_pl))
    r = c.get("/v1/log/head", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers
    pre = c.options(
        "/v1/log/append",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in pre.headers


def test_cors_allows_only_the_configured_origins(sqlite_pl: Plaudit) -> None:
    c = TestClient(create_app(sqlite_pl, cors_origins=["https://ui.example"]))
    r = c.get("/v1/log/head", headers={"Origin": "https://ui.example"})
    assert r.headers["access-control-allow-origin"] == "https://ui.example"
    pre = c.options(
        "/v1/log/append",
        headers={
            "Origin": "https://ui.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert pre.status_code == 200
    assert "authorization" in pre.headers["access-control-allow-headers"].lower()
    other = c.get("/v1/log/head", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_host_guard_refuses_rebound_names(sqlite_pl: Plaudit) -> None:
    app = create_app(sqlite_pl, allowed_hosts=["127.0.0.1", "localhost", "::1"])
    ok = TestClient(app, base_url="http://127.0.0.1:8377")
    assert ok.get("/v1/log/head").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8377").get("/v1/log/head").status_code == 200
    bad = TestClient(app, base_url="http://attacker.example:8377").get("/v1/log/head")
    assert bad.status_code == 400
    assert "attacker.example" in bad.json()["message"]
    assert host_name("[::1]:80") == "::1" and host_name("Example.com:1") == "example.com"


def test_unknown_paths_and_methods_say_what_was_wrong(sqlite_pl: Plaudit) -> None:
    c = TestClient(create_app(sqlite_pl))
    r = c.get("/v1/nothing/here")
    assert r.status_code == 404
    assert r.json()["message"] == "no such endpoint: GET /v1/nothing/here (see /openapi.json)"
    r = c.put("/v1/log/append", json=EVENT)
    assert r.status_code == 405
    assert r.json()["message"] == "PUT is not allowed on /v1/log/append"


def _broken_router() -> APIRouter:
    router = APIRouter(prefix="/v1/broken")

    @router.get("/boom")
    def boom() -> dict[str, str]:
        raise RuntimeError("secret internals at /srv/app.py line 3")

    @router.get("/nan")
    def nan() -> dict[str, float]:
        return {"mean": math.nan, "hi": math.inf, "ok": 0.5}

    return router


def test_a_bug_gives_a_bare_500_and_nan_renders_as_null(sqlite_pl: Plaudit, caplog) -> None:
    app = create_app(sqlite_pl)
    app.include_router(_broken_router())
    c = TestClient(app, raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="plaudit.server"):
        r = c.get("/v1/broken/boom")
    assert r.status_code == 500
    assert r.json() == {
        "error": "InternalError",
        "message": "internal server error; the server log has the details",
    }
    assert "secret" not in r.text and "Traceback" not in r.text
    assert "secret internals" in caplog.text  # the operator still gets the details
    assert c.get("/v1/broken/nan").json() == {"mean": None, "hi": None, "ok": 0.5}


def test_a_value_the_database_cannot_store_is_a_422(pl: Plaudit) -> None:
    """PostgreSQL refuses NUL bytes in text: the input's fault, not a server error. The backend
    translates the driver's error, so the server imports no driver."""
    router = APIRouter()

    @router.get("/echo")
    def echo(text: str) -> dict[str, str]:
        with pl.backend.read() as tx:
            return {"text": tx.scalar("SELECT CAST(? AS TEXT)", (text,))}

    app = create_app(pl)
    app.include_router(router)
    c = TestClient(app, raise_server_exceptions=False)
    assert c.get("/echo", params={"text": "fine"}).json() == {"text": "fine"}
    r = c.get("/echo", params={"text": "a\x00b"})
    if pl.dialect == "postgres":
        assert r.status_code == 422
        assert "cannot store it" in r.json()["message"]
        assert "NUL" in r.json()["message"]
    else:  # SQLite stores NUL bytes in text
        assert r.status_code == 200


def test_missing_or_broken_route_modules_are_skipped(sqlite_pl: Plaudit, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="plaudit.server"):
        routers, skipped = load_routers(
            ["plaudit.server.routes.log", "plaudit.server.routes.nope", "plaudit.errors"]
        )
    assert [r.prefix for r in routers] == ["/v1/log"]
    assert "ModuleNotFoundError" in skipped["plaudit.server.routes.nope"]
    assert "router" in skipped["plaudit.errors"]
    assert "plaudit.server.routes.nope" in caplog.text

    app = create_app(sqlite_pl, route_modules=["plaudit.server.routes.nope"])
    c = TestClient(app)
    assert c.get("/v1/health").json()["skipped_routes"].keys() == {"plaudit.server.routes.nope"}
    assert c.get("/openapi.json").status_code == 200


def test_security_headers_and_no_cdn_docs(sqlite_pl: Plaudit) -> None:
    c = TestClient(create_app(sqlite_pl))
    r = c.get("/")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert c.get("/docs").status_code == 404  # Swagger UI would load from a CDN
    spec = c.get("/openapi.json").json()
    assert spec["paths"]["/v1/log/append"]["post"]["security"] == [{"bearerToken": []}]
    assert "security" not in spec["paths"]["/v1/log/verify"]["get"]
    assert spec["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/v1/signals/decision",
            '{"decision_id":"\\ud800","chosen_task":"t","confidence":0.5,"user_intent":"x"}',
            "decision_id",
        ),
        (
            "/v1/signals/decision",
            '{"decision_id":"d","chosen_task":"t","confidence":0.5,"user_intent":"x","\\ud800":1}',
            "body",
        ),
        (
            "/v1/signals/outcome",
            '{"decision_id":"p","outcome":"\\ud800","task_executed":"t"}',
            "outcome",
        ),
        ("/v1/log/append", '{"type":"a.b.v1","session_id":"\\ud800"}', "session_id"),
    ],
)
def test_a_lone_surrogate_in_a_request_is_a_422_naming_the_field(
    pl: Plaudit, path: str, body: str, field: str
) -> None:
    """Echoing the bad input in the error once made the error itself unencodable: a 500."""
    c = TestClient(create_app(pl))
    r = c.post(path, content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["error"] == "ValidationError"
    assert field in err["message"]
    assert len(pl.log) == 0
    assert c.get("/v1/log/head").status_code == 200  # the app still answers


@pytest.mark.parametrize(
    "body",
    [
        b'{"type":"a.b.v1","session_id":"caf\xe9"}',  # not UTF-8
        b'{"type":"a.b.v1","payload":{"n":1' + b"0" * 5000 + b"}}",  # too many digits
        b'{"type":"a.b.v1","payload":' + b"[" * 5000 + b"]" * 5000 + b"}",  # too deep
    ],
    ids=["not-utf8", "long-integer", "deep"],
)
def test_unreadable_json_bodies_are_a_422_naming_the_body(pl: Plaudit, body: bytes) -> None:
    c = TestClient(create_app(pl))
    r = c.post("/v1/log/append", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "ValidationError"
    assert r.json()["detail"][0]["field"] == "body"
    assert len(pl.log) == 0
