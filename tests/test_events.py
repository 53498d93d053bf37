"""Event validation: every rejection names the field, and a rejected append writes nothing."""

from __future__ import annotations

import enum
import math
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _logtools import ev
from plaudit import ConflictError, Plaudit, ValidationError, make_event
from plaudit.events import (
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    MAX_SAFE_INT,
    _check_json,
    _encode_object,
    encode_json,
    prepare,
)


def good(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "x1",
        "type": "test.thing.v1",
        "ts_ms": 1_700_000_000_000,
        "session_id": "s",
        "source": "t",
        "payload": {"a": 1},
    }
    base.update(over)
    return base


def nested(depth: int) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for _ in range(depth):
        obj = {"k": obj}
    return obj


class Color(enum.Enum):
    RED = "red"


BAD = [
    # (override, field named in the error, words in the reason)
    ({"id": ""}, "id", "must not be empty"),
    ({"id": 5}, "id", "must be a string"),
    ({"id": "a\nb"}, "id", "control character"),
    ({"id": "x" * 201}, "id", "longer than 200"),
    ({"id": "bad\ud800"}, "id", "not valid Unicode"),
    ({"type": "nodots"}, "type", "namespaced"),
    ({"type": "has space.v1"}, "type", "namespaced"),
    ({"type": ""}, "type", "must not be empty"),
    ({"type": 3}, "type", "must be a string"),
    ({"ts_ms": "now"}, "ts_ms", "must be an integer"),
    ({"ts_ms": 1.5}, "ts_ms", "must be an integer"),
    ({"ts_ms": True}, "ts_ms", "must be an integer"),
    ({"ts_ms": -1}, "ts_ms", "between 0"),
    ({"ts_ms": 2**60}, "ts_ms", "between 0"),
    ({"session_id": None}, "session_id", "must be a string"),
    ({"session_id": "tab\there"}, "session_id", "control character"),
    ({"source": ["x"]}, "source", "must be a string"),
    ({"payload": [1, 2]}, "payload", "must be an object"),
    ({"payload": "text"}, "payload", "must be an object"),
    ({"payload": {"x": math.nan}}, "payload.x", "not valid JSON"),
    ({"payload": {"x": [1, math.inf]}}, "payload.x[1]", "not valid JSON"),
    ({"payload": {"x": {1: "a"}}}, "payload.x", "must be a string"),
    ({"payload": {"x": {1, 2}}}, "payload.x", "not a JSON value"),
    ({"payload": {"x": b"raw"}}, "payload.x", "not a JSON value"),
    ({"payload": {"x": Color.RED}}, "payload.x", "not a JSON value"),
    ({"payload": {"x": 2**53}}, "payload.x", "JSON-safe range"),
    ({"payload": {"x": -(2**60)}}, "payload.x", "JSON-safe range"),
    ({"payload": nested(MAX_DEPTH + 2)}, "payload", "nested deeper"),
    ({"payload": nested(100_000)}, "payload", "nested deeper"),
    ({"payload": {"x": "y" * MAX_PAYLOAD_BYTES}}, "payload", "byte limit"),
    ({"meta": {"x": math.nan}}, "meta.x", "not valid JSON"),
    ({"payload": {"x": "caf\udce9"}}, "payload.x", "lone surrogate"),
    ({"payload": {"x": ["ok", "\ud800"]}}, "payload.x[1]", "lone surrogate"),
    ({"payload": {"x": {"k\udfff": 1}}}, "payload.x", "lone surrogate"),
    ({"meta": {"x": "\udc80"}}, "meta.x", "lone surrogate"),
    ({"meta": "m"}, "meta", "must be an object"),
    ({"colour": "red"}, "colour", "unknown field"),
]


@pytest.mark.parametrize(("override", "field", "words"), BAD, ids=[b[1] for b in BAD])
def test_validation_names_field_and_reason(override, field, words) -> None:
    with pytest.raises(ValidationError) as info:
        prepare(good(**override), where="event[0]")
    err = info.value
    assert err.field.startswith(field), (err.field, field)
    assert words in err.reason
    assert str(err).startswith("event[0]: ")
    assert err.to_dict()["field"] == err.field


def test_missing_type_is_named() -> None:
    raw = good()
    del raw["type"]
    with pytest.raises(ValidationError, match="type: is required"):
        prepare(raw)


def test_defaults_fill_id_and_time() -> None:
    p = prepare({"type": "test.thing.v1"})
    assert len(p.event.id) == 36 and p.event.id[14] == "7"  # a UUIDv7
    assert p.event.ts_ms > 1_700_000_000_000
    assert p.payload_text == "{}" and p.event.session_id == "default"


def test_canonical_json_is_sorted_and_compact() -> None:
    p = prepare(good(payload={"b": [1, {"z": 1, "a": 2}], "a": "é"}))
    assert p.payload_text == '{"a":"é","b":[1,{"a":2,"z":1}]}'
    assert b"\x1f" not in p.body().split(b"\x1f", 6)[-1]  # separators only between columns


def test_content_digest_ignores_time_and_meta() -> None:
    a = prepare(good(ts_ms=1, meta={"dur_us": 1}))
    b = prepare(good(ts_ms=2, meta={"dur_us": 9}))
    c = prepare(good(payload={"a": 2}))
    assert a.content_digest == b.content_digest != c.content_digest


def test_subclasses_of_json_scalars_are_accepted() -> None:
    class Level(enum.IntEnum):
        HIGH = 3

    class Name(enum.StrEnum):
        A = "a"

    p = prepare(good(payload={"level": Level.HIGH, "name": Name.A, "t": (1, 2)}))
    assert msgspec.json.decode(p.payload_text) == {"level": 3, "name": "a", "t": [1, 2]}


def test_exactly_max_depth_is_accepted_and_one_more_is_not() -> None:
    prepare(good(payload=nested(MAX_DEPTH)))
    with pytest.raises(ValidationError, match="nested deeper"):
        prepare(good(payload=nested(MAX_DEPTH + 1)))


def test_largest_safe_integer_is_accepted() -> None:
    p = prepare(good(payload={"n": MAX_SAFE_INT, "m": -MAX_SAFE_INT}))
    assert str(MAX_SAFE_INT) in p.payload_text


# What a JSON decoder can produce, with integers past 2^53 and deep nesting mixed in.
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**60), max_value=2**60),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=5),
    st.integers(0, 80),
)
def test_import_fast_path_agrees_with_the_full_check(payload: dict[str, Any], depth: int) -> None:
    """For JSON-decoded payloads the byte scan accepts exactly what the recursive walk does."""
    payload = {**payload, "deep": nested(depth)}
    payload = msgspec.json.decode(msgspec.json.encode(payload))  # as the import sees it
    try:
        _check_json(payload, "payload", 0, None)
        expected_ok = True
    except ValidationError:
        expected_ok = False
    try:
        data = _encode_object("payload", payload, None, from_json=True)
    except ValidationError:
        assert not expected_ok
    else:
        assert expected_ok
        assert data.decode() == encode_json(payload)


def test_bad_event_writes_nothing(pl: Plaudit) -> None:
    with pytest.raises(ValidationError):
        pl.log.append(good(payload={"x": math.nan}))
    assert len(pl.log) == 0 and list(pl.log.replay()) == []


def test_append_is_idempotent_by_id(pl: Plaudit) -> None:
    first = pl.log.append(ev(1))
    assert (first.status, first.seq) == ("appended", 1)
    again = pl.log.append(make_event("test.thing.v1", {"i": 1}, id="e1", session_id="s1"))
    assert (again.status, again.seq) == ("present", 1)
    with pytest.raises(ConflictError) as info:
        pl.log.append(ev(1, extra=True))
    assert info.value.event_id == "e1"
    assert len(pl.log) == 1
    assert pl.log.get("e1").payload == {"i": 1}


def test_one_bad_event_in_a_batch_writes_none(pl: Plaudit) -> None:
    batch: list[Any] = [ev(i) for i in range(5)]
    batch[3] = good(id="bad", ts_ms="yesterday")
    with pytest.raises(ValidationError, match=r"event\[3\]: ts_ms"):
        pl.log.append_batch(batch)
    assert len(pl.log) == 0


def test_conflict_in_a_batch_writes_none(pl: Plaudit) -> None:
    pl.log.append(ev(2))
    with pytest.raises(ConflictError):
        pl.log.append_batch([ev(1), ev(2, changed=1), ev(3)])
    assert [e.id for e in pl.log.replay()] == ["e2"]
    result = pl.log.append_batch([ev(1), ev(2, changed=1), ev(3)], on_conflict="skip")
    assert [r.status for r in result.results] == ["appended", "conflict", "appended"]
    assert result.conflicts == ["e2"] and result.appended == 2
    assert [e.id for e in pl.log.replay()] == ["e2", "e1", "e3"]


def test_duplicate_ids_inside_one_batch(pl: Plaudit) -> None:
    result = pl.log.append_batch([ev(1), ev(2), ev(1)])
    assert [(r.status, r.seq) for r in result.results] == [
        ("appended", 1),
        ("appended", 2),
        ("present", 1),
    ]
    with pytest.raises(ConflictError):
        pl.log.append_batch([ev(7), ev(7, other=1)])
    assert len(pl.log) == 2 and pl.log.verify().ok


def test_empty_batch_is_a_no_op(pl: Plaudit) -> None:
    assert pl.log.append_batch([]).results == []
    assert pl.log.head().length == 0


def test_uuid7_ids_are_time_ordered_and_unique() -> None:
    import time
    import uuid

    from plaudit import uuid7

    before = time.time_ns() // 1_000_000
    ids = [uuid7() for _ in range(5000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # monotonic even within one millisecond
    for s in (ids[0], ids[-1]):
        u = uuid.UUID(s)
        assert u.version == 7 and u.variant == uuid.RFC_4122
        assert before <= u.int >> 80 <= after + 2  # the counter may borrow a ms or two
