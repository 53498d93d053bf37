"""Hardening that every embedding of `create_app` gets: credentials of any bytes, the serve-time
guards (public address, CORS, remote peers), the body deadline, and no server path in errors."""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import ConfigError, Plaudit
from plaudit.server.app import create_app
from plaudit.server.paths import SERVER_PATH, PathHider

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

EVENT = {"type": "test.thing.v1", "payload": {"n": 1}}


# -- credentials ------------------------------------------------------------------------------


def http_scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8377),
    }


def asgi_call(
    app, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request straight into the ASGI app, header bytes exactly as given (a test client
    would re-encode them)."""
    sent: list[dict] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)
        raise AssertionError

    async def send(message: dict) -> None:
        sent.append(message)

    scope = http_scope(method, path, headers)
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    start = next(m for m in sent if m["type"] == "http.response.start")
    out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], start["headers"], out


def post_event(app, authorization: bytes | None) -> int:
    headers = [(b"content-type", b"application/json")]
    if authorization is not None:
        headers.append((b"authorization", authorization))
    status, _, _ = asgi_call(app, "POST", "/v1/log/append", headers, json.dumps(EVENT).encode())
    return status


@pytest.mark.parametrize(
    "header",
    [
        "Bearer s3crét".encode(),
        "Bearer s3crét".encode("latin-1"),
        b"Bearer \xff\xfe\x00",
        "Bäarer s3cret".encode(),
        b"\xe2\x98\x83",
    ],
)
def test_non_ascii_authorization_is_a_401(sqlite_pl: Plaudit, header: bytes) -> None:
    assert post_event(create_app(sqlite_pl, token="s3cret"), header) == 401
    assert len(sqlite_pl.log) == 0


def test_a_non_ascii_token_refuses_with_401_and_accepts_its_utf8_bytes(
    sqlite_pl: Plaudit,
) -> None:
    app = create_app(sqlite_pl, token="pässwört")
    for header in (b"Bearer nope", b"Bearer p\xe4ssw\xf6rt", b"Bearer passwort", None):
        assert post_event(app, header) == 401, header
    assert len(sqlite_pl.log) == 0
    assert post_event(app, "Bearer pässwört".encode()) == 200
    assert len(sqlite_pl.log) == 1


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    token=st.text(min_size=1, max_size=20).filter(lambda t: t.strip() != ""),
    sent=st.binary(max_size=40),
)
def test_no_token_or_header_bytes_reach_a_500(sqlite_url: str, token: str, sent: bytes) -> None:
    with Plaudit.open(sqlite_url) as p:
        status = post_event(create_app(p, token=token), b"Bearer " + sent)
        right = sent.strip() == token.strip().encode("utf-8", "surrogateescape")
        assert status == (200 if right else 401)


# -- serve-time guards, now in create_app ------------------------------------------------------


def test_create_app_refuses_a_public_host_without_a_token(sqlite_pl: Plaudit) -> None:
    for host in ("0.0.0.0", "::", "192.168.1.5", "myhost.example"):
        with pytest.raises(ConfigError, match="without a token"):
            create_app(sqlite_pl, host=host)
        with pytest.raises(ConfigError, match="without a token"):
            create_app(sqlite_pl, host=host, token="   ")  # blank is no token
    app = create_app(sqlite_pl, host="0.0.0.0", token="t")
    assert app.state.token == "t"


@pytest.mark.parametrize(
    "origin", ["ui.example", "https://ui.example/", "https://ui.example/app", "javascript:x"]
)
def test_create_app_refuses_a_malformed_cors_origin(sqlite_pl: Plaudit, origin: str) -> None:
    with pytest.raises(ConfigError, match="must look like"):
        create_app(sqlite_pl, cors_origins=[origin])


def test_cors_wildcard_needs_a_token(sqlite_pl: Plaudit) -> None:
    with pytest.raises(ConfigError, match="any web page"):
        create_app(sqlite_pl, cors_origins=iter(["*"]))
    c = TestClient(create_app(sqlite_pl, token="t", cors_origins=iter(["*"])))
    r = c.get("/v1/log/head", headers={"Origin": "https://any.example"})
    assert r.headers["access-control-allow-origin"] == "*"


def test_without_a_token_other_machines_are_refused(sqlite_pl: Plaudit) -> None:
    """An embedder serving `create_app(p)` on a public address still exposes nothing."""
    app = create_app(sqlite_pl)
    remote = TestClient(app, base_url="http://10.0.0.2:8377", client=("203.0.113.9", 5000))
    r = remote.post("/v1/log/append", json=EVENT)
    assert r.status_code == 403
    assert r.json()["error"] == "NotLocal" and "token" in r.json()["message"]
    assert remote.get("/v1/log/head").status_code == 403  # reads too: as if not listening
    assert len(sqlite_pl.log) == 0

    for peer in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        local = TestClient(app, base_url="http://127.0.0.1:8377", client=(peer, 5000))
        assert local.post("/v1/log/append", json=EVENT).status_code == 200, peer
    # A local peer that names another host is a rebinding page: refused.
    rebound = TestClient(app, base_url="http://evil.example:8377", client=("127.0.0.1", 5000))
    assert rebound.get("/v1/log/head").status_code == 400

    # With a token, other machines may connect (and writes need the token).
    guarded = create_app(sqlite_pl, token="t")
    far = TestClient(guarded, base_url="http://plaudit.example", client=("203.0.113.9", 5000))
    assert far.get("/v1/log/head").status_code == 200
    assert far.post("/v1/log/append", json=EVENT).status_code == 401


def test_a_loopback_host_answers_only_to_loopback_names(sqlite_pl: Plaudit) -> None:
    app = create_app(sqlite_pl, host="127.0.0.1", token="t")
    assert TestClient(app, base_url="http://localhost:1").get("/v1/log/head").status_code == 200
    bad = TestClient(app, base_url="http://attacker.example").get("/v1/log/head")
    assert bad.status_code == 400 and "attacker.example" in bad.json()["message"]


# -- the body deadline -----------------------------------------------------------------------


def test_a_body_that_does_not_arrive_in_time_is_a_408(sqlite_pl: Plaudit) -> None:
    app = create_app(sqlite_pl, body_timeout=0.2)
    sent: list[dict] = []

    async def receive() -> dict:
        if not sent:
            sent.append({})
            return {"type": "http.request", "body": b'{"type": "test.', "more_body": True}
        await asyncio.sleep(3600)  # the rest never comes
        raise AssertionError

    async def send(message: dict) -> None:
        sent.append(message)

    scope = http_scope("POST", "/v1/log/append", [(b"content-type", b"application/json")])

    async def run() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(app(scope, receive, send), 5)
        return loop.time() - started

    took = asyncio.run(run())
    assert 0.15 < took < 2
    start = next(m for m in sent if m.get("type") == "http.response.start")
    assert start["status"] == 408
    assert (b"connection", b"close") in start["headers"]
    body = b"".join(m.get("body", b"") for m in sent if m.get("type") == "http.response.body")
    assert b"RequestTimeout" in body and b"0.2 s" in body
    assert len(sqlite_pl.log) == 0


def test_body_timeout_must_be_positive(sqlite_pl: Plaudit) -> None:
    with pytest.raises(ValueError, match="positive"):
        TestClient(create_app(sqlite_pl, body_timeout=0)).get("/v1/log/head")


# -- no server path in an error ----------------------------------------------------------------


def test_errors_never_show_the_export_root(sqlite_pl: Plaudit, tmp_path: Path) -> None:
    root = tmp_path / "exports"
    root.mkdir()
    c = TestClient(create_app(sqlite_pl, export_root=root))
    cases = [
        ("export", {"output_dir": "../outside"}),
        ("export", {"output_dir": "/etc"}),
        ("audit", {"summary_path": "missing/summary.json"}),
        ("audit", {"summary_path": "../../etc/passwd"}),
        ("audit", {"report_out": "../evil.json"}),
    ]
    (root / "notjson.json").write_text("{not json")
    cases.append(("audit", {"summary_path": "notjson.json"}))
    for path, body in cases:
        r = c.post(f"/v1/signals/{path}", json=body)
        assert 400 <= r.status_code < 500, r.text
        assert str(tmp_path) not in r.text, r.text
        assert str(root.resolve()) not in r.text, r.text
        assert "/tmp" not in r.text and os.sep + "pytest" not in r.text, r.text
    r = c.post("/v1/signals/audit", json={"summary_path": "missing/summary.json"})
    assert "missing/summary.json" in r.text  # the client still sees the path it gave


def test_path_hider_keeps_what_is_not_a_server_path(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    hide = PathHider(str(exports), [str(tmp_path / "x.db")])
    assert hide(f"cannot read {exports / 'a' / 'b.json'}") == "cannot read a/b.json"
    assert hide(f"{exports} is full") == "<export root> is full"
    assert hide(f"store {tmp_path}/x.db is locked") == "store <store> is locked"
    assert hide("task ai:flow/test at /payload/items/0") == "task ai:flow/test at /payload/items/0"
    assert hide("see /etc/plaudit.toml") == f"see {SERVER_PATH}"
    assert hide("GET /v1/log/head?x=1") == "GET /v1/log/head?x=1"
    assert hide("http://host/usr/x") == "http://host/usr/x"
    assert hide({"m": ["C:\\Users\\me", 3]}) == {"m": [SERVER_PATH, 3]}


def test_run_server_refuses_a_public_host_for_an_app_without_a_token(sqlite_pl: Plaudit) -> None:
    """The embedder's other path: an app built without `host`, then run on a public address."""
    from plaudit.server.run import run_server
    from plaudit.server.timeouts import Timeouts

    with pytest.raises(ConfigError, match="without a token"):
        run_server(create_app(sqlite_pl), host="0.0.0.0", port=1)
    for bad in (0, -1, float("nan"), float("inf"), True, "5", 100_000):
        with pytest.raises(ConfigError, match="seconds"):
            Timeouts(idle=bad)  # type: ignore[arg-type]


def test_export_and_audit_answers_name_files_below_the_export_root(
    sqlite_pl: Plaudit, tmp_path: Path
) -> None:
    root = tmp_path / "exports"
    root.mkdir()
    sqlite_pl.signals.decision(
        decision_id="d1", chosen_task="ai:flow/t", confidence=0.8, user_intent="x", session_id="s"
    )
    sqlite_pl.signals.outcome(decision_id="d1", outcome="success", task_executed="ai:flow/t")
    c = TestClient(create_app(sqlite_pl, export_root=root))
    r = c.post("/v1/signals/export", json={"output_dir": "out", "max_age_hours": 10**6})
    assert r.status_code == 200, r.text
    assert str(tmp_path) not in r.text
    assert "out/summary.json" in r.text and (root / "out" / "summary.json").exists()
    r = c.post("/v1/signals/audit", json={"summary_path": "out/summary.json"})
    assert r.status_code == 200, r.text
    assert str(tmp_path) not in r.text and "out/audit.json" in r.text
