"""HTTP routes under /v1/signals, on a minimal app, on both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from plaudit.errors import PlauditError
from plaudit.server.routes.signals import router

from .conftest import BIG_AGE


def _app(pl, export_root=None) -> FastAPI:
    app = FastAPI()
    app.state.plaudit = pl
    app.state.token = None
    app.state.export_root = export_root

    @app.exception_handler(PlauditError)
    def _plaudit_error(request: Request, exc: PlauditError) -> JSONResponse:
        # What the real app does (owned elsewhere): map library errors to 4xx JSON.
        return JSONResponse(exc.to_dict(), status_code=exc.http_status)

    app.include_router(router)
    return app


@pytest.fixture
def client(pl, tmp_path) -> Iterator[TestClient]:
    with TestClient(_app(pl, export_root=str(tmp_path))) as c:
        yield c


DECISION = {
    "decision_id": "h-1",
    "chosen_task": "ai:flow/test",
    "confidence": 0.8,
    "user_intent": "run tests",
    "session_id": "web",
    "context": {"ci": "red", "password": "hunter2"},
    "propensity": 0.4,
}


def test_emit_roundtrip_and_idempotency(client, pl) -> None:
    r = client.post("/v1/signals/decision", json=DECISION)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "appended" and body["redacted"] == 1
    assert client.post("/v1/signals/decision", json=DECISION).json()["status"] == "present"
    r = client.post(
        "/v1/signals/outcome",
        json={"decision_id": "h-1", "outcome": "failure", "task_executed": "ai:flow/test"},
    )
    assert r.status_code == 200, r.text
    r = client.post(
        "/v1/signals/override",
        json={"decision_id": "h-1", "original_task": "ai:flow/test", "override_task": "ai:fix"},
    )
    assert r.status_code == 200, r.text
    assert pl.log.head().length == 3
    stored = pl.log.get(body["id"]).payload
    assert stored["context"]["password"] == "[REDACTED]" and stored["propensity"] == 0.4


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("decision", {**DECISION, "confidence": 2}, "confidence"),
        ("decision", {**DECISION, "confidence": "high"}, "confidence"),
        ("decision", {k: v for k, v in DECISION.items() if k != "chosen_task"}, "chosen_task"),
        ("decision", {**DECISION, "context": [1]}, "context"),
        ("decision", {**DECISION, "surprise": 1}, "surprise"),
        ("decision", {**DECISION, "decision_id": "x" * 500}, "decision_id"),
        ("outcome", {"decision_id": "a", "outcome": "meh", "task_executed": "t"}, "outcome"),
        (
            "outcome",
            {"decision_id": "a", "outcome": "success", "task_executed": "t",
             "time_to_resolution_ms": -1},
            "time_to_resolution_ms",
        ),
        ("override", {"decision_id": "a", "original_task": "t"}, "override_task"),
        ("export", {"output_dir": "x", "formats": ["csv"]}, "formats"),
        ("export", {"output_dir": "x", "val_percent": 101}, "val_percent"),
        ("export", {"output_dir": "x", "rewards": {"great": 1}}, "rewards"),
        ("audit", {"min_decisions": "many"}, "min_decisions"),
        # As strict as the library: a number given as text or as a boolean is refused.
        ("decision", {**DECISION, "confidence": "0.25"}, "confidence"),
        ("decision", {**DECISION, "confidence": False}, "confidence"),
        ("decision", {**DECISION, "propensity": True}, "propensity"),
        ("export", {"output_dir": "x", "rewards": {"success": "2"}}, "rewards"),
        ("export", {"output_dir": "x", "rewards": {"success": True}}, "rewards"),
        ("audit", {"summary": {}, "min_link_rate": True}, "min_link_rate"),
    ],
)  # fmt: skip
def test_bad_bodies_get_422_naming_the_field(client, pl, path, body, field) -> None:
    r = client.post(f"/v1/signals/{path}", json=body)
    assert r.status_code == 422, r.text
    assert field in r.text
    assert pl.log.head().length == 0


def test_library_validation_is_a_422_too(client, pl) -> None:
    r = client.post("/v1/signals/decision", json={**DECISION, "decision_id": "bad\nid"})
    assert r.status_code == 422
    assert r.json()["field"] == "decision_id"
    r = client.post("/v1/signals/decision", json={**DECISION, "context": {"n": 2**60}})
    assert r.status_code == 422 and "context.n" in r.json()["field"]
    assert pl.log.head().length == 0


def test_malformed_json_body(client) -> None:
    r = client.post(
        "/v1/signals/decision", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422


def _fill(client, n: int = 30) -> None:
    for i in range(n):
        d = {**DECISION, "decision_id": f"d{i}", "chosen_task": f"t{i % 3}", "ts_ms": None}
        assert client.post("/v1/signals/decision", json=d).status_code == 200
        o = {"decision_id": f"d{i}", "outcome": ("success", "failure")[i % 2],
             "task_executed": f"t{i % 3}", "time_to_resolution_ms": i}  # fmt: skip
        assert client.post("/v1/signals/outcome", json=o).status_code == 200


def test_gates_contract(client, monkeypatch) -> None:
    _fill(client)
    body = client.get("/v1/signals/gates").json()
    assert body["pass"] is False and body["passed"] is False  # the 0.1 alias agrees
    names = [g["name"] for g in body["gates"]]
    assert names == [
        "min_decisions",
        "min_joined",
        "min_link_rate",
        "max_task_dominance",
        "min_overrides",
        "min_failureish",
    ]
    for g in body["gates"]:
        assert set(g) == {"name", "actual", "threshold", "op", "pass", "passed"}
        assert g["pass"] is g["passed"]
        assert g["op"] in (">=", "<=")
    by_name = {g["name"]: g for g in body["gates"]}
    assert by_name["min_decisions"]["actual"] == 30
    assert by_name["min_link_rate"] == {
        "name": "min_link_rate", "actual": 1.0, "threshold": 0.8, "op": ">=", "pass": True,
        "passed": True,
    }  # fmt: skip
    monkeypatch.setenv("ROUTER_SIGNAL_MIN_DECISIONS", "30")
    by_name = {g["name"]: g for g in client.get("/v1/signals/gates").json()["gates"]}
    assert by_name["min_decisions"]["threshold"] == 30 and by_name["min_decisions"]["passed"]


def test_export_audit_and_summary(client, tmp_path) -> None:
    _fill(client)
    out = tmp_path / "export"
    r = client.post(
        "/v1/signals/export",
        json={"output_dir": "export", "split_by": "session", "formats": ["jsonl", "chat"]},
    )
    assert r.status_code == 200, r.text
    summary = r.json()
    assert summary["counts"]["joined_rows"] == 30
    assert json.loads((out / "summary.json").read_text())["counts"] == summary["counts"]
    r = client.post("/v1/signals/audit", json={"summary": summary, "min_decisions": 10})
    report = r.json()
    assert r.status_code == 200 and report["gates"]["min_decisions"]["pass"] is True
    assert report["schema_version"] == "flow_router_signal_audit_v1"
    r = client.post(
        "/v1/signals/audit",
        json={"summary_path": "export/summary.json", "report_out": str(tmp_path / "a.json")},
    )
    assert r.status_code == 200 and (tmp_path / "a.json").exists()
    assert not (out / "audit.json").exists()
    r = client.post("/v1/signals/audit", json={"summary_path": "export/summary.json"})
    assert r.status_code == 200
    beside = json.loads((out / "audit.json").read_text())  # as the CLI writes it
    assert beside["gates"] == r.json()["gates"]
    assert client.post("/v1/signals/audit", json={}).json()["pass"] is False
    s = client.get("/v1/signals/summary", params={"max_age_hours": BIG_AGE}).json()
    assert s["counts"]["decisions"] == 30 and s["outputs"] == {}


def test_export_to_unusable_dir_is_4xx(client, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = client.post("/v1/signals/export", json={"output_dir": "file/sub"})
    assert r.status_code == 422 and r.json()["field"] == "output_dir"
    r = client.post("/v1/signals/export", json={"output_dir": "a\u0000b"})
    assert r.status_code == 422
    r = client.post("/v1/signals/audit", json={"summary_path": "nope.json"})
    assert r.status_code == 422 and r.json()["field"] == "summary"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("export", {"output_dir": "../outside"}, "output_dir"),
        ("export", {"output_dir": "/etc"}, "output_dir"),
        ("export", {"output_dir": "ok", "seq_mem": "/etc/passwd"}, "seq_mem"),
        ("audit", {"summary_path": "../../summary.json"}, "summary_path"),
        ("audit", {"report_out": "../evil.json"}, "report_out"),
    ],
)
def test_paths_are_confined_to_the_export_root(client, tmp_path, path, body, field) -> None:
    r = client.post(f"/v1/signals/{path}", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert not (tmp_path.parent / "outside").exists()


def test_server_side_files_disabled_without_export_root(pl, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("PLAUDIT_EXPORT_ROOT", raising=False)
    with TestClient(_app(pl)) as c:
        r = c.post("/v1/signals/export", json={"output_dir": str(tmp_path / "x")})
        assert r.status_code == 400 and "PLAUDIT_EXPORT_ROOT" in r.json()["message"]
        assert not (tmp_path / "x").exists()
        assert c.post("/v1/signals/audit", json={}).status_code == 200  # the log needs no file
    monkeypatch.setenv("PLAUDIT_EXPORT_ROOT", str(tmp_path))
    with TestClient(_app(pl)) as c:
        r = c.post("/v1/signals/export", json={"output_dir": "x"})
        assert r.status_code == 200 and (tmp_path / "x" / "summary.json").exists()


def test_gates_follow_new_events_immediately(client) -> None:
    _fill(client, 4)
    first = client.get("/v1/signals/gates").json()["gates"][0]
    assert client.get("/v1/signals/gates").json()["gates"][0] == first  # unchanged log: reused
    client.post("/v1/signals/decision", json={**DECISION, "decision_id": "late"})
    after = client.get("/v1/signals/gates").json()["gates"][0]
    assert after["actual"] == first["actual"] + 1


def test_export_reuse_from_an_earlier_export_under_the_root(client, tmp_path) -> None:
    import time

    hour = 3_600_000
    now = int(time.time() * 1000)

    def emit(i: int, ts: int) -> None:
        d = {**DECISION, "decision_id": f"r{i}", "session_id": f"s{i}", "ts_ms": ts}
        assert client.post("/v1/signals/decision", json=d).status_code == 200
        o = {"decision_id": f"r{i}", "outcome": "success", "task_executed": "ai:flow/test",
             "ts_ms": ts + 1}  # fmt: skip
        assert client.post("/v1/signals/outcome", json=o).status_code == 200

    for i in range(4):
        emit(i, now - (10 - i) * hour)
    assert client.post("/v1/signals/export", json={"output_dir": "first"}).status_code == 200
    before = {f.name: f.read_bytes() for f in (tmp_path / "first").iterdir()}
    emit(9, now - hour)
    r = client.post("/v1/signals/export", json={"output_dir": "second", "reuse_from": "first"})
    assert r.status_code == 200, r.text
    reuse = r.json()["input"]["reuse"]
    assert reuse["copied_hours"] == 4 and reuse["built_hours"] == 1
    assert str(tmp_path) not in reuse["from"]  # the server's layout stays hidden
    assert {f.name: f.read_bytes() for f in (tmp_path / "first").iterdir()} == before
    assert r.json()["counts"]["joined_rows"] == 5
    for bad in ("../outside", "/etc"):
        r = client.post("/v1/signals/export", json={"output_dir": "third", "reuse_from": bad})
        assert r.status_code == 422 and r.json()["field"] == "reuse_from", r.text
    r = client.post("/v1/signals/export", json={"output_dir": "third", "reuse_from": "nope"})
    assert r.status_code == 422 and r.json()["field"] == "reuse_from"
    assert not (tmp_path / "third").exists()
