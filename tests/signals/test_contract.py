"""Validation, redaction and idempotency of router events, on both backends."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.errors import ConflictError, ValidationError
from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE
from plaudit.signals.redact import REDACTED, is_secret_key, redact

GOOD_DECISION: dict[str, Any] = {
    "decision_id": "d1",
    "chosen_task": "ai:flow/test",
    "confidence": 0.7,
    "user_intent": "run the tests",
    "session_id": "s1",
}
GOOD_OUTCOME: dict[str, Any] = {
    "decision_id": "d1",
    "outcome": "success",
    "task_executed": "ai:flow/test",
    "time_to_resolution_ms": 1200,
    "session_id": "s1",
}
GOOD_OVERRIDE: dict[str, Any] = {
    "decision_id": "d1",
    "original_task": "ai:flow/test",
    "override_task": "ai:flow/fix-ci",
    "session_id": "s1",
}


@pytest.mark.parametrize(
    ("kind", "change", "field"),
    [
        ("decision", {"decision_id": ""}, "decision_id"),
        ("decision", {"decision_id": "x" * 201}, "decision_id"),
        ("decision", {"decision_id": "a\nb"}, "decision_id"),
        ("decision", {"chosen_task": ""}, "chosen_task"),
        ("decision", {"chosen_task": 3}, "chosen_task"),
        ("decision", {"confidence": 1.5}, "confidence"),
        ("decision", {"confidence": -0.1}, "confidence"),
        ("decision", {"confidence": float("nan")}, "confidence"),
        ("decision", {"confidence": "high"}, "confidence"),
        ("decision", {"confidence": True}, "confidence"),
        ("decision", {"user_intent": None, "decision_id": "d2"}, None),
        ("decision", {"user_intent": 5}, "user_intent"),
        ("decision", {"context": [1, 2]}, "context"),
        ("decision", {"candidates": {"a": 1}}, "candidates"),
        ("decision", {"propensity": 0.0}, "propensity"),
        ("decision", {"propensity": 2}, "propensity"),
        ("decision", {"ts_ms": -5}, "ts_ms"),
        ("decision", {"ts_ms": "now"}, "ts_ms"),
        ("decision", {"context": {"n": float("inf")}}, "payload.context.n"),
        ("decision", {"context": {"big": 2**60}}, "payload.context.big"),
        ("outcome", {"outcome": "great"}, "outcome"),
        ("outcome", {"task_executed": ""}, "task_executed"),
        ("outcome", {"time_to_resolution_ms": -1}, "time_to_resolution_ms"),
        ("outcome", {"time_to_resolution_ms": 1.5}, "time_to_resolution_ms"),
        ("outcome", {"extra": "x"}, "extra"),
        ("override", {"original_task": ""}, "original_task"),
        ("override", {"override_task": None}, "override_task"),
    ],
)
def test_invalid_event_names_field_and_writes_nothing(pl, kind, change, field) -> None:
    base = {"decision": GOOD_DECISION, "outcome": GOOD_OUTCOME, "override": GOOD_OVERRIDE}[kind]
    before = pl.log.head()
    kwargs = {**base, **change}
    if field is None:  # user_intent=None is accepted as "" (the emitter's default)
        result = getattr(pl.signals, kind)(**kwargs)
        assert result["status"] == "appended"
        return
    with pytest.raises(ValidationError) as info:
        getattr(pl.signals, kind)(**kwargs)
    assert info.value.field == field
    assert field.split(".")[-1] in str(info.value)
    assert pl.log.head() == before


def test_events_are_stored_with_reference_subject(pl) -> None:
    pl.signals.decision(**GOOD_DECISION, propensity=0.25, candidates=["a", "b"])
    pl.signals.outcome(**GOOD_OUTCOME, error_kind="none")
    pl.signals.override(**GOOD_OVERRIDE, reason="wrong task")
    events = list(pl.log.replay(types=["flow.router."]))
    assert [e.type for e in events] == [DECISION, OUTCOME, OVERRIDE]
    d = events[0]
    assert d.session_id == "s1" and d.source == "flow"
    assert set(d.payload) == {
        "schema_version", "decision_id", "source", "session_id", "user_hash",
        "project_fingerprint", "project_path", "git_branch", "git_commit", "chosen_task",
        "confidence", "user_intent", "candidates", "context", "propensity",
    }  # fmt: skip
    assert d.payload["propensity"] == 0.25
    assert d.payload["schema_version"] == "flow_router_decision_v1"
    assert events[1].payload["schema_version"] == "flow_router_outcome_v1"
    assert events[1].meta["ok"] is True
    assert events[2].payload["reason"] == "wrong task"


def test_emit_is_idempotent_per_decision_and_type(pl) -> None:
    first = pl.signals.decision(**GOOD_DECISION, ts_ms=1_000)
    retry = pl.signals.decision(**GOOD_DECISION, ts_ms=2_000)  # a retried hook: new timestamp
    assert first["status"] == "appended" and retry["status"] == "present"
    assert retry["id"] == first["id"] and retry["seq"] == first["seq"]
    assert pl.signals.outcome(**GOOD_OUTCOME)["status"] == "appended"
    assert pl.signals.outcome(**GOOD_OUTCOME)["status"] == "present"
    assert pl.log.head().length == 2
    with pytest.raises(ConflictError):
        pl.signals.decision(**{**GOOD_DECISION, "chosen_task": "other"})
    assert pl.log.head().length == 2


def test_distinct_overrides_are_kept_retries_are_not(pl) -> None:
    pl.signals.override(**GOOD_OVERRIDE)
    pl.signals.override(**GOOD_OVERRIDE)
    pl.signals.override(**{**GOOD_OVERRIDE, "override_task": "ai:flow/review"})
    assert pl.log.stats().by_type == {OVERRIDE: 2}


def test_session_resolution(pl, monkeypatch) -> None:
    monkeypatch.setenv("FLOW_ROUTER_SESSION_ID", "from-env")
    a = pl.signals.decision(**{**GOOD_DECISION, "decision_id": "a", "session_id": None})
    assert a["session_id"] == "from-env"
    monkeypatch.delenv("FLOW_ROUTER_SESSION_ID")
    b = pl.signals.decision(**{**GOOD_DECISION, "decision_id": "b", "session_id": None})
    assert b["session_id"] == "flow-router"


def test_context_secrets_redacted_before_storage(pl) -> None:
    context = {
        "token": "t0",
        "max_tokens": 4096,
        "env": {"GITHUB_TOKEN": "ghx", "PATH": "/usr/bin", "deep": [{"password": "p"}]},
        "headers": {"Authorization": "Bearer abc.def", "X-Api-Key": "k", "accept": "json"},
        "apiKey": "camel",
        "note": "Bearer sk-should-go-too",
        "client_secret": "cs",
    }
    result = pl.signals.decision(**GOOD_DECISION, context=context)
    stored = pl.log.get(result["id"]).payload["context"]
    assert stored == {
        "token": REDACTED,
        "max_tokens": 4096,
        "env": {"GITHUB_TOKEN": REDACTED, "PATH": "/usr/bin", "deep": [{"password": REDACTED}]},
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "accept": "json"},
        "apiKey": REDACTED,
        "note": REDACTED,
        "client_secret": REDACTED,
    }
    assert result["redacted"] == 8


SECRET_KEYS = (
    "token", "TOKEN", "access_token", "accessToken", "ACCESS_TOKEN", "accesstoken",
    "ACCESSTOKEN", "authtoken", "apitoken", "githubtoken", "GITHUBTOKEN", "github_token_2",
    "X-Auth-Token", "password", "PASSWORD", "passWord", "dbpassword", "DBPASSWORD", "passwords",
    "secret", "secrets", "client_secret", "clientsecret", "api_key", "apiKey", "APIKey",
    "APIkey", "API_KEY", "api-key", "x-api-key", "Authorization", "aws_secret_access_key",
    "ssh_key", "signing_key", "encryption_key", "openai_key", "auth", "session_cookie",
)  # fmt: skip
NOT_SECRET_KEYS = (
    "max_tokens", "token_count", "tokens", "num_tokens", "prompt_tokens", "tokenizer", "note",
    "count", "path", "cache_key", "sort_key", "public_key", "key", "author", "monkey",
)  # fmt: skip


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_key_spellings_are_recognised(key) -> None:
    assert is_secret_key(key)
    assert redact({"ctx": {key: "v"}}) == ({"ctx": {key: REDACTED}}, 1)


@pytest.mark.parametrize("key", NOT_SECRET_KEYS)
def test_counters_and_ordinary_keys_survive(key) -> None:
    assert not is_secret_key(key)
    assert redact({key: 7}) == ({key: 7}, 0)


def test_credentials_inside_values_are_redacted() -> None:
    value = {
        "env": ["GITHUB_TOKEN=abc123", "export PASSWORD=hunter2", "PATH=/usr/bin"],
        "DATABASE_URL": "postgresql://app:hunter2@db.internal:5432/prod",
        "cmd": "psql postgres://me:pw@host/x && echo done",
        "claims": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl",
        "homepage": "https://user@example.com/x",
    }
    once, count = redact(value)
    assert once == {
        "env": ["GITHUB_TOKEN=[REDACTED]", "export PASSWORD=[REDACTED]", "PATH=/usr/bin"],
        "DATABASE_URL": "postgresql://app:[REDACTED]@db.internal:5432/prod",
        "cmd": "psql postgres://me:[REDACTED]@host/x && echo done",
        "claims": REDACTED,
        "homepage": "https://user@example.com/x",
    }
    assert count == 5
    assert redact(once) == (once, 0)  # nothing new to redact the second time


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=8))
keys = st.one_of(
    st.sampled_from(["token", "api_key", "Password", "authToken", "note", "count", "path"]),
    st.text(string.ascii_letters + "_-", min_size=1, max_size=10),
)
json_tree = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=25,
)


def _secret_values(value: Any) -> list[Any]:
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if is_secret_key(k) and v not in (None, ""):
                found.append(v)
            found.extend(_secret_values(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(_secret_values(v))
    return found


@settings(max_examples=200, deadline=None)
@given(json_tree)
def test_redaction_leaves_no_secret_and_is_idempotent(tree) -> None:
    once, _ = redact(tree)
    assert all(v == REDACTED for v in _secret_values(once))
    twice, count = redact(once)
    assert count == len(_secret_values(once))  # already-redacted values are counted again
    assert twice == once
    # Only secret values change: keys and list lengths elsewhere are preserved.
    assert _shape(once) == _shape(tree)


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "secret" if is_secret_key(k) and v not in (None, "") else _shape(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return None
