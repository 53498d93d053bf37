"""`POST /v1/signals/evaluate`: JSON table policies only, confined files, capped work."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from plaudit.signals import simulate

from .conftest import BIG_AGE
from .test_routes import _app

T0 = 1_780_000_000_000


@pytest.fixture
def client(pl, tmp_path) -> Iterator[TestClient]:
    with TestClient(_app(pl, export_root=str(tmp_path))) as c:
        yield c


def _emit(client: TestClient, n: int) -> None:
    for i in range(n):
        task, p = ("a", 0.75) if i % 4 else ("b", 0.25)
        r = client.post(
            "/v1/signals/decision",
            json={
                "decision_id": f"h-{i}",
                "chosen_task": task,
                "confidence": p,
                "user_intent": "route",
                "context": {"kind": "x" if i % 2 else "y"},
                "candidates": ["a", "b"],
                "propensity": p,
                "ts_ms": T0 + i,
            },
        )
        assert r.status_code == 200, r.text
        outcome = "success" if task == "b" else "failure"
        r = client.post(
            "/v1/signals/outcome",
            json={"decision_id": f"h-{i}", "outcome": outcome, "task_executed": task},
        )
        assert r.status_code == 200, r.text


ALWAYS_B = {"schema_version": "plaudit_router_policy_v1", "default": {"b": 1.0}}


def test_a_table_policy_is_evaluated_on_the_log(client, tmp_path) -> None:
    _emit(client, 40)
    r = client.post(
        "/v1/signals/evaluate",
        json={"policy": ALWAYS_B, "max_age_hours": BIG_AGE, "bootstrap": 200},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["counts"]["evaluated"] == 40 and body["pass"] is True
    # b was chosen 10 times with propensity 0.25 and always succeeded: IPS = 10 * 4 / 40
    assert body["estimates"]["ips"]["value"] == pytest.approx(1.0)
    assert body["estimates"]["snips"]["value"] == pytest.approx(1.0)
    assert body["logging"]["value"] == pytest.approx(10 / 40)
    assert str(tmp_path) not in r.text  # the server's paths are not shown


def test_the_gate_verdict_is_in_the_result(client) -> None:
    _emit(client, 4)
    r = client.post(
        "/v1/signals/evaluate",
        json={"policy": ALWAYS_B, "max_age_hours": BIG_AGE, "min_propensity_coverage": 1},
    )
    assert r.status_code == 200, r.text
    assert r.json()["gates"]["min_propensity_coverage"]["pass"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"policy": "os:system"}, "policy"),  # code is never taken over HTTP
        ({"policy": ["b"]}, "policy"),
        ({"policy": ALWAYS_B, "bootstrap": 10_001}, "bootstrap"),
        ({"policy": ALWAYS_B, "default_propensity": 0}, "default_propensity"),
        ({"policy": ALWAYS_B, "min_propensity_coverage": 1.5}, "min_propensity_coverage"),
        ({"policy": ALWAYS_B, "surprise": 1}, "surprise"),
        ({"policy": ALWAYS_B, "rewards": {"great": 1.0}}, "rewards"),
        ({"policy": ALWAYS_B, "reward_key": ["x"] * 9}, "reward_key"),
    ],
)
def test_malformed_bodies_are_422_naming_the_field(client, body, field) -> None:
    r = client.post("/v1/signals/evaluate", json=body)
    assert r.status_code == 422, r.text
    assert field in r.text


def test_a_bad_table_is_422_naming_where_in_the_body(client) -> None:
    _emit(client, 2)
    bad = {"key": "context.kind", "table": {"x": {"a": 0.5, "b": 0.6}}}
    r = client.post("/v1/signals/evaluate", json={"policy": bad, "max_age_hours": BIG_AGE})
    assert r.status_code == 422
    assert r.json()["message"].startswith("body.policy: table.x: policy: probabilities sum to 1.1")
    unknown = {"default": {"zzz": 1.0}}
    r = client.post("/v1/signals/evaluate", json={"policy": unknown, "max_age_hours": BIG_AGE})
    assert r.status_code == 422 and "unknown task 'zzz'" in r.json()["message"]


def test_seq_mem_is_read_only_inside_the_export_root(client, tmp_path) -> None:
    sim = simulate.router()
    with open(tmp_path / "s.jsonl", "w") as f:
        sim.write(f, 50, seed=3, start_ms=T0)
    body = {"policy": sim.table(simulate.CANDIDATE), "max_age_hours": BIG_AGE, "bootstrap": 0}
    r = client.post("/v1/signals/evaluate", json={**body, "seq_mem": "s.jsonl"})
    assert r.status_code == 200, r.text
    assert r.json()["counts"]["evaluated"] == 50
    assert r.json()["input"]["seq_mem"] == "s.jsonl"  # the client's words, not the server path
    r = client.post("/v1/signals/evaluate", json={**body, "seq_mem": "../outside.jsonl"})
    assert r.status_code == 422 and "export root" in r.text


def test_without_an_export_root_no_file_is_read(pl, tmp_path) -> None:
    with TestClient(_app(pl, export_root=None)) as c:
        r = c.post("/v1/signals/evaluate", json={"policy": ALWAYS_B, "seq_mem": "s.jsonl"})
    assert r.status_code == 400 and "PLAUDIT_EXPORT_ROOT" in r.text


def test_it_takes_the_write_token(pl) -> None:
    app = _app(pl)
    app.state.token = "secret"
    with TestClient(app) as c:
        assert c.post("/v1/signals/evaluate", json={"policy": ALWAYS_B}).status_code == 401
        r = c.post(
            "/v1/signals/evaluate",
            json={"policy": ALWAYS_B},
            headers={"Authorization": "Bearer secret"},
        )
    assert r.status_code == 200, r.text
    assert json.loads(r.text)["pass"] is False  # an empty log: nothing to estimate
