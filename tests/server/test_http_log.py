"""`/v1/log/...` on both backends: append, idempotency, atomic batches, verify, head, tail."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.store.log import Head


def ev(i: int, **kw: Any) -> dict[str, Any]:
    return {"type": "test.thing.v1", "payload": {"n": i}, "id": f"e{i}", **kw}


def test_append_one_then_batch_and_read_back(client, pl: Plaudit) -> None:
    r = client.post("/v1/log/append", json=ev(1, session_id="s1", source="agent"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["appended"] == 1
    assert body["results"] == [{"id": "e1", "seq": 1, "status": "appended"}]
    assert body["head"] == pl.log.head().digest

    r = client.post("/v1/log/append", json=[ev(2), ev(3)])
    assert r.status_code == 200, r.text
    assert [x["seq"] for x in r.json()["results"]] == [2, 3]
    stored = pl.log.get("e1")
    assert stored is not None
    assert (stored.session_id, stored.source, stored.payload) == ("s1", "agent", {"n": 1})

    tail = client.get("/v1/log/tail", params={"n": 2}).json()["events"]
    assert [e["id"] for e in tail] == ["e2", "e3"]  # oldest first
    assert tail[-1]["hash"] == pl.log.head().hash


def test_retry_is_present_and_changed_content_conflicts(client, pl: Plaudit) -> None:
    assert client.post("/v1/log/append", json=ev(1)).status_code == 200
    again = client.post("/v1/log/append", json=ev(1, ts_ms=5))  # new timestamp: same event
    assert again.status_code == 200
    assert again.json()["results"][0]["status"] == "present"

    changed = {**ev(1), "payload": {"n": 99}}
    r = client.post("/v1/log/append", json=changed)
    assert r.status_code == 409
    assert r.json()["error"] == "ConflictError"
    assert "e1" in r.json()["message"]

    r = client.post("/v1/log/append", params={"on_conflict": "skip"}, json=[changed, ev(2)])
    assert r.status_code == 200
    assert r.json()["conflicts"] == ["e1"]
    assert r.json()["appended"] == 1
    assert pl.log.get("e1").payload == {"n": 1}  # type: ignore[union-attr]
    assert len(pl.log) == 2


def test_bad_event_in_a_batch_writes_nothing(client, pl: Plaudit) -> None:
    r = client.post("/v1/log/append", json=[ev(1), {"type": "not namespaced", "id": "x"}])
    assert r.status_code == 422
    body = r.json()
    assert body["where"] == "event[1]" and body["field"] == "type"
    assert "namespaced" in body["message"]
    assert len(pl.log) == 0


def test_shape_errors_name_the_field(client, pl: Plaudit) -> None:
    cases = [
        ({"payload": {}}, "body.event.type", "missing"),
        ({"type": "a.b", "colour": 1}, "body.event.colour", "extra_forbidden"),
        ([ev(1), {"type": 5}], "body.events[1].type", "string_type"),
        ({"type": "a.b", "ts_ms": "12"}, "body.event.ts_ms", "int_type"),
        ({"type": "a.b", "ts_ms": -1}, "body.event.ts_ms", "greater_than_equal"),
        ({"type": "a.b", "payload": [1]}, "body.event.payload", "dict_type"),
        ([], "body.events", "too_short"),
    ]
    for body, field, kind in cases:
        r = client.post("/v1/log/append", json=body)
        assert r.status_code == 422, (body, r.text)
        problems = r.json()["detail"]
        assert any(p["field"] == field and p["type"] == kind for p in problems), (body, problems)
        assert field in r.json()["message"]
    assert len(pl.log) == 0


def test_malformed_json_and_library_content_checks(client, pl: Plaudit) -> None:
    r = client.post(
        "/v1/log/append", content=b'{"type": "a.b",', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["message"].startswith("body: malformed JSON at character")

    nan = b'{"type": "a.b", "payload": {"x": NaN}}'
    r = client.post("/v1/log/append", content=nan, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["field"] == "payload.x"

    r = client.post("/v1/log/append", json={"type": "a.b", "payload": {"big": 2**60}})
    assert r.status_code == 422 and "2^53" in r.json()["message"]

    r = client.post("/v1/log/append", json={"type": "a.b", "source": "bad\u0007"})
    assert r.status_code == 422 and r.json()["field"] == "source"
    assert len(pl.log) == 0


def test_verify_head_and_anchor(client, pl: Plaudit) -> None:
    empty = client.get("/v1/log/verify").json()
    assert empty["ok"] is True and empty["length"] == 0

    client.post("/v1/log/append", json=[ev(i) for i in range(5)])
    head = client.get("/v1/log/head").json()
    assert head["length"] == 5 and head["digest"] == f"5:{head['hash']}"
    client.post("/v1/log/append", json=ev(9))

    v = client.get("/v1/log/verify", params={"against": head["digest"]}).json()
    assert {k: v[k] for k in ("mode", "from_checkpoint", "witnesses")} == {
        "mode": "full",
        "from_checkpoint": None,
        "witnesses": [],
    }
    assert {
        k: x
        for k, x in v.items()
        if k not in ("mode", "from_checkpoint", "witnesses", "checkpoints")
    } == {
        "ok": True,
        "length": 6,
        "checked": 6,
        "head": pl.log.head().digest,
        "first_bad": None,
        "reason": None,
        "against": head["digest"],
    }
    forged = Head(5, "0" * 64).digest
    bad = client.get("/v1/log/verify", params={"against": forged}).json()
    assert bad["ok"] is False and bad["first_bad"] == 5 and "rewritten" in bad["reason"]

    r = client.get("/v1/log/verify", params={"against": "nonsense"})
    assert r.status_code == 422 and r.json()["field"] == "against"


def _tamper(pl: Plaudit, event_id: str) -> None:
    """Edit a committed row behind plaudit's back, as an attacker with file access would."""
    with pl.backend.write() as tx:
        if pl.dialect == "sqlite":
            names = [
                r[0] for r in tx.fetchall("SELECT name FROM sqlite_master WHERE type='trigger'")
            ]
            for name in names:
                tx.execute(f'DROP TRIGGER "{name}"')
        else:
            tx.execute("ALTER TABLE plaudit_events DISABLE TRIGGER USER")
        tx.execute("UPDATE plaudit_events SET payload = ? WHERE id = ?", ('{"n":1000}', event_id))


def test_verify_reports_the_first_tampered_position(client, pl: Plaudit) -> None:
    client.post("/v1/log/append", json=[ev(i) for i in range(1, 6)])
    _tamper(pl, "e3")
    v = client.get("/v1/log/verify").json()
    assert v["ok"] is False
    assert v["first_bad"] == 3
    assert "position 3" in v["reason"]


def test_tail_filters_stats_and_get(client, pl: Plaudit) -> None:
    client.post("/v1/log/append", json=[ev(1), {"type": "other.kind.v1", "id": "o1"}, ev(2)])
    only = client.get("/v1/log/tail", params={"n": 10, "type": "other."}).json()["events"]
    assert [e["id"] for e in only] == ["o1"]
    assert client.get("/v1/log/tail", params={"n": 0}).status_code == 422
    bad_prefix = client.get("/v1/log/tail", params={"type": "a\x00b"})
    assert bad_prefix.status_code == 422 and bad_prefix.json()["detail"][0]["loc"][1] == "type"
    assert client.get("/v1/log/events/a%00b").status_code == 422
    assert client.get("/v1/log/tail", params={"n": 1001}).status_code == 422

    stats = client.get("/v1/log/stats").json()
    assert stats["length"] == 3
    assert stats["backend"] == pl.dialect
    assert stats["by_type"] == {"other.kind.v1": 1, "test.thing.v1": 2}

    assert client.get("/v1/log/events/o1").json()["type"] == "other.kind.v1"
    missing = client.get("/v1/log/events/nope")
    assert missing.status_code == 404
    assert missing.json() == {
        "error": "NotFoundError",
        "message": "no event with id 'nope' in the log",
    }


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(payload=st.dictionaries(st.text(max_size=10), json_value, max_size=5))
def test_any_json_payload_round_trips_and_the_chain_verifies(client, payload) -> None:
    """Invariant: what the API acknowledges is what it gives back, and the chain stays intact."""
    r = client.post("/v1/log/append", json={"type": "prop.payload.v1", "payload": payload})
    assert r.status_code == 200, r.text
    seq = r.json()["results"][0]["seq"]
    back = client.get("/v1/log/tail", params={"n": 1}).json()["events"][0]
    assert back["seq"] == seq
    assert back["payload"] == payload
    assert client.get("/v1/log/verify").json()["ok"] is True


def test_append_without_waiting_answers_queued_where_there_is_an_intake(
    client, pl: Plaudit
) -> None:
    """`wait=false`: on PostgreSQL the events are acknowledged once durable in the intake
    ("queued", no position yet) and get positions later; SQLite has no intake and appends."""
    r = client.post("/v1/log/append?wait=false", json=[ev(1), ev(2)])
    assert r.status_code == 200, r.text
    body = r.json()
    if pl.backend.dialect == "postgres":
        assert body["queued"] == 2 and body["appended"] == 0
        assert [x["seq"] for x in body["results"]] == [None, None]
        pl.log.sequence()
    else:
        assert body["appended"] == 2 and body["queued"] == 0
    assert [pl.log.get(f"e{i}").seq for i in (1, 2)] == [1, 2]  # type: ignore[union-attr]
