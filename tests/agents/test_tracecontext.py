"""W3C trace context on events: set from the Python API, the current OpenTelemetry span, the
CLI, HTTP headers; kept outside the content digest; exported as the ids of each OpenTelemetry
evaluation record."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plaudit import Plaudit, ValidationError, make_event
from plaudit.cli import main
from plaudit.tracecontext import current_trace, parse_traceparent, trace_context

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
ENTRY = "import sys; from plaudit.cli import main; sys.exit(main())"
hexes = st.text("0123456789abcdef", min_size=1, max_size=1)


@given(
    st.text("0123456789abcdef", min_size=32, max_size=32).filter(lambda s: s.strip("0")),
    st.text("0123456789abcdef", min_size=16, max_size=16).filter(lambda s: s.strip("0")),
    st.sampled_from(["00", "01", "03", "ff"]),
)
def test_any_valid_traceparent_round_trips(trace_id: str, span_id: str, flags: str) -> None:
    value = f"00-{trace_id}-{span_id}-{flags}"
    tc = parse_traceparent(value)
    assert (tc.trace_id, tc.span_id, tc.traceparent) == (trace_id, span_id, value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # uppercase
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # no trace
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # no span
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # forbidden version
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",  # 31 digits
    ],
)
def test_malformed_traceparents_are_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_traceparent(value, field="--traceparent")
    assert err.value.field == "--traceparent"
    assert str(err.value).startswith("--traceparent: ")


def test_a_later_version_is_read_as_version_00() -> None:
    tc = parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more")
    assert tc.traceparent == TRACE


def test_events_carry_the_context_but_a_retry_under_another_is_the_same_event(
    pl: Plaudit,
) -> None:
    with trace_context(TRACE):
        first = pl.log.append(make_event("test.retry.v1", {"n": 1}, id="e-1"))
        assert make_event("test.kept.v1", meta={"traceparent": OTHER}).meta["traceparent"] == OTHER
    with trace_context(OTHER):
        again = pl.log.append(make_event("test.retry.v1", {"n": 1}, id="e-1"))
    assert (first.status, again.status) == ("appended", "present")
    assert pl.log.get("e-1").meta == {"traceparent": TRACE}
    assert make_event("test.plain.v1").meta == {}


def test_concurrent_writers_each_get_their_own_trace(sqlite_url: str) -> None:
    """The log group-commits: one thread's write function may run in another's; the events
    it makes still carry the trace of the thread that asked."""
    traces = [f"00-{i + 1:032x}-{i + 1:016x}-01" for i in range(6)]
    arms = [{"id": "tool:exec:Bash", "tokens": 1}]
    runs: dict[str, list[str]] = {t: [] for t in traces}
    start = threading.Barrier(len(traces))
    with Plaudit.open(sqlite_url, durability="normal") as p:
        p.bandit.register(arms)

        def work(tp: str) -> None:
            start.wait()
            with trace_context(tp):
                for _ in range(25):
                    runs[tp].append(p.bandit.select(token_budget=10).run_id)

        threads = [threading.Thread(target=work, args=(t,)) for t in traces]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for tp, ids in runs.items():
            assert {p.log.get(i).meta["traceparent"] for i in ids} == {tp}


def test_the_current_opentelemetry_span_is_used_when_none_is_set(pl: Plaudit) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    tracer = sdk.TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("judge me") as span:
        ctx = span.get_span_context()
        tx = pl.ledger.record("successful_validation", "tests pass")
        with trace_context(TRACE):  # an explicit context wins
            assert current_trace().traceparent == TRACE
    assert current_trace() is None
    event = pl.log.get(tx.id)
    flags = f"{int(ctx.trace_flags):02x}"
    assert event.meta["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{flags}"


# -- the CLI ------------------------------------------------------------------------------------


def test_the_cli_takes_traceparent_from_the_option_or_the_environment(
    sqlite_url: str, monkeypatch, capsys
) -> None:
    record = ["ledger", "record", "--category", "successful_validation", "--action"]
    assert main(["--db", sqlite_url, "--traceparent", TRACE, *record, "one"]) == 0
    monkeypatch.setenv("TRACEPARENT", OTHER)
    assert main(["--db", sqlite_url, *record, "two"]) == 0
    emit = ["signal", "emit", "decision", "--decision-id", "d1", "--chosen-task", "t"]
    assert main(["--db", sqlite_url, *emit, "--confidence", "0.5", "--traceparent", TRACE]) == 0
    with Plaudit.open(sqlite_url) as p:
        by_action = {
            e.payload.get("action"): e.meta.get("traceparent")
            for e in p.log.replay(types=["plaudit.ledger.transaction.v1"])
        }
        decision = next(p.log.replay(types=["flow.router.decision.v1"]))
    assert by_action == {"one": TRACE, "two": OTHER}
    assert decision.meta["traceparent"] == TRACE


def test_a_bad_traceparent_stops_the_command_before_anything_is_created(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    env = {**os.environ, "TRACEPARENT": "not-a-trace"}
    args = ["--db", str(db), "ledger", "record", "--category", "x", "--action", "y"]
    for extra in ([], ["signal", "emit", "outcome"]):
        argv = args if not extra else ["--db", str(db), *extra, "--decision-id", "d"]
        argv += ["--outcome", "success", "--task-executed", "t"] if extra else []
        r = subprocess.run([sys.executable, "-c", ENTRY, *argv], env=env, capture_output=True)
        assert r.returncode == 2, r.stderr
        assert (
            r.stderr.decode()
            .strip()
            .startswith("error: $TRACEPARENT: 'not-a-trace' is not a W3C traceparent")
        )
    assert not db.exists()


# -- HTTP ---------------------------------------------------------------------------------------


@pytest.fixture
def client(pl: Plaudit) -> Iterator[object]:
    pytest.importorskip("fastapi")
    from plaudit.server.app import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    yield TestClient(create_app(pl))


def test_http_writes_carry_the_traceparent_header(client, pl: Plaudit) -> None:
    body = {"category": "successful_validation", "action": "tests pass"}
    r = client.post("/v1/ledger/record", json=body, headers={"traceparent": TRACE})
    assert r.status_code == 200, r.text
    assert pl.log.get(r.json()["id"]).meta["traceparent"] == TRACE
    length = pl.log.head().length
    r = client.post("/v1/ledger/record", json=body, headers={"traceparent": "00-nope"})
    assert r.status_code == 422
    assert r.json()["field"] == "traceparent header"
    assert pl.log.head().length == length
