"""`/v1/traces`: OTLP/HTTP trace export in, bandit observations and router outcomes out.

What OpenTelemetry exporters send (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://HOST:8377/v1/traces`):
protobuf or JSON, optionally gzip. The rules are `plaudit.traces`'; this route reads the body and
answers as OTLP says: 200 with an `ExportTraceServiceResponse` (empty for protobuf; for JSON,
plaudit's report of what the spans did), 400 with the reason for a malformed payload.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from plaudit.core import Plaudit
from plaudit.server.deps import get_plaudit, require_write
from plaudit.server.responses import MsgspecJSONResponse

router = APIRouter(prefix="/v1", tags=["traces"])

_BODY = {
    "required": True,
    "content": {
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": {"type": "object"}},
    },
}


@router.post(
    "/traces",
    dependencies=[Depends(require_write)],
    response_model=dict[str, Any],
    openapi_extra={"requestBody": _BODY},
)
async def traces(request: Request, p: Annotated[Plaudit, Depends(get_plaudit)]) -> Response:
    """Ingest OTLP spans (GenAI and OpenInference conventions): see docs/otel.md."""
    from plaudit.traces import ingest

    body = await request.body()
    kind = request.headers.get("content-type")
    report = await run_in_threadpool(
        ingest,
        p,
        body,
        content_type=kind,
        content_encoding=request.headers.get("content-encoding"),
    )
    if (kind or "").split(";")[0].strip().lower() == "application/json":
        return MsgspecJSONResponse(report.to_dict())
    return Response(b"", media_type="application/x-protobuf")
