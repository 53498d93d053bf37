"""A minimal OTLP/HTTP collector for tests: records what the SDK's exporter posts and decodes
it with the OTLP protobuf definitions (installed with the exporter)."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar


class Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        Collector.received.append(self.path.encode() + b"\n" + body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def running_collector() -> Iterator[str]:
    """Yields the collector's URL (use it as a fixture body: `yield from`)."""
    Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def decoded() -> list[tuple[str, str, dict[str, Any]]]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    out = []
    for raw in Collector.received:
        path, _, body = raw.partition(b"\n")
        request = ExportLogsServiceRequest.FromString(body)
        for resource_logs in request.resource_logs:
            service = next(
                a.value.string_value
                for a in resource_logs.resource.attributes
                if a.key == "service.name"
            )
            for scope_logs in resource_logs.scope_logs:
                for rec in scope_logs.log_records:
                    attrs = {a.key: a.value for a in rec.attributes}
                    ids = {"trace_id": rec.trace_id.hex(), "span_id": rec.span_id.hex()}
                    out.append((path.decode(), service, {"event": rec.event_name, **ids, **attrs}))
    return out
