"""Learning from the traces agents already emit (OpenTelemetry GenAI and OpenInference spans).

`plaudit serve` takes OTLP/HTTP traces at `/v1/traces`, and `plaudit ingest-traces FILE` reads
exported ones; both call :func:`ingest` / :func:`ingest_file` here, so every rule lives in this
package: `otlp` decodes payloads, `conventions` reads spans, `ingest` turns them into bandit
observations and router outcomes, `projection` remembers which traces belong to which runs.
"""

from __future__ import annotations

from plaudit.traces.ingest import IngestReport, ingest, ingest_file, ingest_spans, read_file
from plaudit.traces.otlp import Span, TracePayloadError

__all__ = [
    "IngestReport",
    "Span",
    "TracePayloadError",
    "ingest",
    "ingest_file",
    "ingest_spans",
    "read_file",
]
