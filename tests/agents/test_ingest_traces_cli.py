"""`plaudit ingest-traces FILE`: exported traces (OTLP/JSON Lines as the Collector's file
exporter writes them, or protobuf as the SDK encodes them) become observations; a malformed file
is refused with its place and records nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.cli import main

ARMS = [{"id": "tool:exec:Bash", "tokens": 300}, {"id": "file:workspace:NOTES.md", "tokens": 900}]


def request(trace_id: str, spans: list[tuple[str, str, dict[str, str]]]) -> dict:
    return {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": span_id,
                                "parentSpanId": parent,
                                "name": "s",
                                "startTimeUnixNano": 1_700_000_000_000_000_000,
                                "endTimeUnixNano": 1_700_000_000_500_000_000,
                                "attributes": [
                                    {"key": k, "value": {"stringValue": v}}
                                    for k, v in attrs.items()
                                ],
                            }
                            for span_id, parent, attrs in spans
                        ]
                    }
                ]
            }
        ]
    }


def test_json_lines_from_a_collector_file_teach_the_bandit(sqlite_url: str, tmp_path, capsys):
    with Plaudit.open(sqlite_url) as p:
        sel = p.bandit.select(ARMS, token_budget=10_000, seed=1)
    messages = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}])
    lines = [
        request("d" * 32, [("1" * 16, "", {"plaudit.run_id": sel.run_id})]),
        request("e" * 32, [("2" * 16, "", {"http.route": "/"})]),
    ]
    agent = lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    agent.append(
        {
            **agent[0],
            "spanId": "3" * 16,
            "parentSpanId": "1" * 16,
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": messages}},
                {"key": "gen_ai.completion", "value": {"stringValue": "see NOTES.md"}},
            ],
        }
    )
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["--db", sqlite_url, "ingest-traces", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs_observed"] == [sel.run_id]
    assert (report["observed_spans"], report["ignored"]) == (2, 1)
    with Plaudit.open(sqlite_url) as p:
        rewards = p.bandit.run(sel.run_id)["observation"]["rewards"]
    # structured messages win over the older gen_ai.completion: "ok" references nothing
    assert rewards == {"file:workspace:NOTES.md": 0, "tool:exec:Bash": 0}


def test_a_protobuf_file_of_sdk_spans(sqlite_url: str, tmp_path: Path, capsys) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    with Plaudit.open(sqlite_url) as p:
        sel = p.bandit.select(ARMS, token_budget=10_000, seed=2)
    with tracer.start_as_current_span("agent", attributes={"plaudit.run_id": sel.run_id}):
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash"}
        with tracer.start_as_current_span("execute_tool Bash", attributes=attrs):
            pass
    path = tmp_path / "traces.pb"
    path.write_bytes(encode_spans(memory.get_finished_spans()).SerializeToString())
    assert main(["--db", sqlite_url, "ingest-traces", str(path)]) == 0
    assert capsys.readouterr().out.startswith("2 spans: 1 runs observed (2 spans)")
    with Plaudit.open(sqlite_url) as p:
        assert p.bandit.run(sel.run_id)["observation"]["rewards"]["tool:exec:Bash"] == 1


def test_a_malformed_file_names_the_line_and_creates_nothing(tmp_path: Path, capsys) -> None:
    db = tmp_path / "new.db"
    good = json.dumps(request("d" * 32, [("1" * 16, "", {})]))
    bad = json.dumps(request("d" * 32, [("1" * 15, "", {})]))
    path = tmp_path / "traces.jsonl"
    path.write_text(f"{good}\n{bad}\n")
    assert main(["--db", str(db), "ingest-traces", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {path} line 2: resourceSpans[0].scopeSpans[0].spans[0].spanId: "
        "'111111111111111' is not 16 hex digits (nonzero)"
    )
    assert not db.exists()
