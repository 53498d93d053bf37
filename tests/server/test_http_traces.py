"""`/v1/traces`: spans made by the real OpenTelemetry SDK (and OpenInference's tracer), sent by
its OTLP/HTTP exporter to a running `plaudit serve`, become bandit observations and router
outcomes; malformed payloads are refused whole."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from plaudit import Plaudit

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

ARMS = [
    {"id": "tool:exec:Bash", "tokens": 300},
    {"id": "file:workspace:README.md", "tokens": 1800},
    {"id": "skill:web:search", "tokens": 500},
]
TOKEN = "t0k"


@pytest.fixture
def served(serve_factory, db_url: str) -> Any:
    return serve_factory(db_url, "--token", TOKEN)


@pytest.fixture
def tracer(served: Any) -> Iterator[Any]:
    """A tracer whose every span is exported to the server as it ends (one export each)."""
    exporter = OTLPSpanExporter(
        endpoint=f"{served.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("agent")
    provider.shutdown()


def chat(tracer: Any, text: str, calls: list[str] = ()) -> None:
    """A model call as the GenAI conventions record it."""
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}]
    parts += [{"type": "tool_call", "name": c, "id": f"call-{c}"} for c in calls]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
    }
    with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes=attrs):
        pass


def observation(p: Plaudit, run_id: str) -> dict[str, Any]:
    obs = p.bandit.run(run_id)["observation"]
    assert obs is not None, "the run was not observed"
    return obs


def test_a_run_selected_in_its_trace_is_observed_when_its_span_ends(
    served: Any, tracer: Any, db_url: str
) -> None:
    with Plaudit.open(db_url) as p:
        with tracer.start_as_current_span("agent run") as run_span:
            sel = p.bandit.select(ARMS, token_budget=100_000, context="coding", seed=1)
            chat(tracer, "The README.md says to run the tests.", ["Bash"])  # export 1
            assert p.bandit.run(sel.run_id)["observation"] is None  # kept, not observed yet
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash"}
            with tracer.start_as_current_span("execute_tool Bash", attributes=attrs):
                pass  # export 2
        # export 3: the run's span ends it
        ctx = run_span.get_span_context()
        obs = observation(p, sel.run_id)
        assert obs["rewards"] == {
            "file:workspace:README.md": 1,
            "skill:web:search": 0,
            "tool:exec:Bash": 1,
        }
        assert obs["usage_tokens"] == 120
        # the observation is attached to the run's span, for the OpenTelemetry export
        event = next(e for e in p.log.tail(20) if e.type == "plaudit.bandit.observation.v1")
        assert event.meta["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01"
        assert event.session_id == "default"


def test_a_tagged_run_span_observes_the_spans_under_it_and_a_retry_changes_nothing(
    served: Any, db_url: str
) -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = OTLPSpanExporter(
        endpoint=f"{served.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    with Plaudit.open(db_url) as p:
        sel = p.bandit.select(ARMS, token_budget=100_000, seed=2)  # no trace: named by id
        with tracer.start_as_current_span("agent", attributes={"plaudit.run_id": sel.run_id}):
            chat(tracer, "I searched the web (skill:web:search).")
        with tracer.start_as_current_span("unrelated work"):
            pass
        provider.force_flush()
        obs = observation(p, sel.run_id)
        assert obs["rewards"]["skill:web:search"] == 1
        assert obs["rewards"]["tool:exec:Bash"] == 0
        length = p.log.head().length
    provider.shutdown()
    # the same spans again, in OTLP/JSON: nothing new is written
    body = otlp_json(
        [
            span("a" * 32, "1" * 16, "", "agent", {"plaudit.run_id": sel.run_id}),
            span("a" * 32, "2" * 16, "1" * 16, "chat", {"gen_ai.operation.name": "chat"}),
        ]
    )
    r = post(served, body)
    assert r.status_code == 200, r.text
    assert r.json()["late"] == 2
    with Plaudit.open(db_url) as p:
        assert p.log.head().length == length


def test_openinference_spans_with_the_run_in_their_metadata(served: Any, db_url: str) -> None:
    from openinference.instrumentation import (
        OITracer,
        TraceConfig,
        get_llm_output_message_attributes,
        get_tool_attributes,
        using_metadata,
    )

    exporter = OTLPSpanExporter(
        endpoint=f"{served.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OITracer(provider.get_tracer("oi-agent"), config=TraceConfig())
    with Plaudit.open(db_url) as p:
        sel = p.bandit.select(ARMS, token_budget=100_000, seed=3)
        message = {
            "role": "assistant",
            "content": "Per README.md, run the suite.",
            "tool_calls": [{"function": {"name": "Bash", "arguments": {"c": "x"}}}],
        }
        with (
            using_metadata({"plaudit.run_id": sel.run_id}),
            tracer.start_as_current_span("agent", openinference_span_kind="agent"),
        ):
            with tracer.start_as_current_span("llm", openinference_span_kind="llm") as llm:
                llm.set_attributes(get_llm_output_message_attributes([message]))
            with tracer.start_as_current_span("tool", openinference_span_kind="tool") as t:
                t.set_attributes(get_tool_attributes(name="Bash", parameters={"c": "x"}))
        # every span carries the run id (using_metadata): the first export ends the run, so
        # an OpenInference agent should tag its outermost span, or select inside the trace
        obs = observation(p, sel.run_id)
        assert obs["rewards"]["file:workspace:README.md"] == 1
        assert obs["rewards"]["tool:exec:Bash"] == 1
    provider.shutdown()


def test_a_span_naming_a_decision_records_its_outcome(
    served: Any, tracer: Any, db_url: str
) -> None:
    with Plaudit.open(db_url) as p:
        p.signals.decision("d-1", "ai:flow/dev-check", 0.7, "fix the test", session_id="s1")
        p.signals.decision("d-2", "ai:flow/deploy", 0.9, "ship it", session_id="s1")
    with tracer.start_as_current_span("route", attributes={"plaudit.decision_id": "d-1"}) as s:
        s.set_status(Status(StatusCode.ERROR, "tests still fail"))
    attrs = {"plaudit.decision_id": "d-2", "plaudit.outcome": "partial"}
    with tracer.start_as_current_span("route", attributes=attrs):
        pass
    with tracer.start_as_current_span("route", attributes={"plaudit.decision_id": "nope"}):
        pass
    with Plaudit.open(db_url) as p:
        rows = {r["decision_id"]: r for r in outcomes(p)}
    assert rows["d-1"]["outcome"] == "failure"
    assert rows["d-1"]["task_executed"] == "ai:flow/dev-check"
    assert rows["d-2"]["outcome"] == "partial"
    assert "nope" not in rows


def outcomes(p: Plaudit) -> list[dict[str, Any]]:
    return [e.payload for e in p.log.replay(types=["flow.router.outcome.v1"])]


# -- OTLP/JSON and refusals --------------------------------------------------------------------


def span(trace_id: str, span_id: str, parent: str, name: str, attrs: dict[str, Any]) -> dict:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def otlp_json(spans: list[dict[str, Any]]) -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(request).encode()


def post(served: Any, body: bytes, **headers: str) -> httpx2.Response:
    return httpx2.post(
        f"{served.url}/v1/traces",
        content=body,
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            **headers,
        },
    )


MALFORMED = [
    (b"{not json", "application/json", "malformed JSON"),
    (b'{"resourceSpans": 5}', "application/json", "not an OTLP trace request"),
    (b"\x0a\xff\xff\xff", "application/x-protobuf", "not an OTLP protobuf trace request"),
    (b"{}", "text/plain", "Content-Type"),
]


def test_json_payloads_are_counted_and_bad_ones_refused_whole(served: Any, db_url: str) -> None:
    assert httpx2.post(f"{served.url}/v1/traces", content=otlp_json([])).status_code == 401
    body = otlp_json(
        [
            span("b" * 32, "1" * 16, "", "GET /", {"http.method": "GET"}),
            span("b" * 32, "2" * 16, "", "chat", {"gen_ai.operation.name": "chat"}),
            span("b" * 32, "3" * 16, "", "x", {"plaudit.run_id": "no-such-run"}),
        ]
    )
    r = post(served, gzip.compress(body), **{"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "spans": 3,
        "observed_spans": 0,
        "pending": 0,
        "late": 0,
        "unknown": 1,
        "ignored": 2,
        "runs_observed": [],
        "outcomes": [],
    }
    for bad_body, content_type, reason in MALFORMED:
        r = post(served, bad_body, **{"Content-Type": content_type})
        assert r.status_code == 400, bad_body
        assert reason in r.json()["message"]
    # one bad span refuses the whole payload: the good one's run stays unobserved
    with Plaudit.open(db_url) as p:
        sel = p.bandit.select(ARMS, token_budget=100_000, seed=4)
        length = p.log.head().length
    good = span("c" * 32, "1" * 16, "", "agent", {"plaudit.run_id": sel.run_id})
    bad = span("c" * 32, "xyz", "", "chat", {})
    r = post(served, otlp_json([good, bad]))
    assert r.status_code == 400
    assert r.json()["message"].startswith("resourceSpans[0].scopeSpans[0].spans[1].spanId:")
    with Plaudit.open(db_url) as p:
        assert p.log.head().length == length
