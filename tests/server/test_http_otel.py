"""`plaudit serve --otel`: the server follows new results into an OTLP collector."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

pytest.importorskip("opentelemetry.sdk._logs", reason="needs the otel extra")

import _otlp


@pytest.fixture
def collector() -> Iterator[str]:
    yield from _otlp.running_collector()


def test_serve_follows_new_results_into_the_collector(
    serve_factory, tmp_path: Path, collector: str
) -> None:
    srv = serve_factory(
        str(tmp_path / "s.db"),
        "--otel",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        },
    )
    r = httpx2.post(
        f"{srv.url}/v1/ledger/record",
        json={"category": "validation_failure", "action": "broke it over HTTP"},
    )
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not _otlp.decoded():
        time.sleep(0.2)
    got = _otlp.decoded()
    assert [a["gen_ai.evaluation.explanation"].string_value for _, _, a in got] == [
        "broke it over HTTP"
    ]
    assert "results go to OpenTelemetry" in srv.stop()
