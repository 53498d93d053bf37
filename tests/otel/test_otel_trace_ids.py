"""The OpenTelemetry export attaches each evaluation to the span it judges: the trace and span
ids of the event's W3C trace context arrive at an OTLP collector as they were sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from plaudit import Plaudit
from plaudit.cli import main
from plaudit.tracecontext import trace_context

pytest.importorskip("opentelemetry.sdk._logs", reason="needs the otel extra")

import _otlp

LEDGER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BANDIT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
ROUTER = "00-11111111111111111111111111111111-2222222222222222-00"


@pytest.fixture
def collector(monkeypatch) -> Iterator[str]:
    for url in _otlp.running_collector():
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        monkeypatch.delenv("OTEL_LOGS_EXPORTER", raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
        yield url


def test_each_evaluation_carries_the_ids_of_its_events_trace(db_url: str, collector: str) -> None:
    with Plaudit.open(db_url) as p:
        with trace_context(LEDGER):
            p.ledger.record("successful_validation", "tests pass")
        with trace_context(BANDIT):
            sel = p.bandit.select([{"id": "tool:exec:Bash", "tokens": 1}], token_budget=10)
            p.bandit.observe(sel.run_id, "ran Bash")
        p.signals.decision("d-1", "ai:flow/test", 0.8, "test it", session_id="s")
        with trace_context(ROUTER):
            p.signals.outcome("d-1", "success", "ai:flow/test")
        p.ledger.record("validation_failure", "no trace here")
    assert main(["--db", db_url, "otel", "export"]) == 0
    got = {
        attrs["gen_ai.evaluation.name"].string_value: (attrs["trace_id"], attrs["span_id"])
        for _, _, attrs in _otlp.decoded()
    }

    def ids(traceparent: str) -> tuple[str, str]:
        return traceparent[3:35], traceparent[36:52]

    assert got == {
        "plaudit.ledger.successful_validation": ids(LEDGER),
        "plaudit.bandit.arm_referenced": ids(BANDIT),
        "plaudit.router.outcome": ids(ROUTER),
        "plaudit.ledger.validation_failure": ("", ""),
    }
