"""Send the log's results to OpenTelemetry: a reader of the log with its own cursor.

The exporter is not a hook inside the ledger, the bandit or the router signals: it reads
committed events of the types in `mapping.TYPES` after its cursor, hands them to the SDK, and
moves the cursor once the SDK's exporter has delivered them. So

- it sees exactly what the log holds, whichever process or surface wrote it, and catches up
  on history when first run (or starts at the head, if asked);
- a failed delivery (collector down) leaves the cursor where it was, and the next round sends
  the batch again: delivery is at least once. Every event carries `plaudit.event.id`, so a
  backend can drop the rare duplicate;
- several exporters can follow one log under different names (say, one per backend).

Configuration is the SDK's: `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_(LOGS_)PROTOCOL`
(`http/protobuf`, the default, or `grpc` with its exporter package installed),
`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME` (default `plaudit`),
`OTEL_RESOURCE_ATTRIBUTES`, and `OTEL_LOGS_EXPORTER` (`otlp`, `console` or `none`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from plaudit import __version__
from plaudit.core import Plaudit
from plaudit.errors import ConfigError
from plaudit.otel import cursor
from plaudit.otel.mapping import TYPES, records

log = logging.getLogger("plaudit.otel")

EXTRA_MESSAGE = (
    "OpenTelemetry export needs the 'otel' extra, which is not installed: "
    "pip install 'plaudit[otel]'"
)
DEFAULT_NAME = "default"
SCOPE = "plaudit"
Start = Literal["beginning", "head"]


def require_sdk() -> None:
    """Fail with one line naming the extra when the OpenTelemetry SDK is missing."""
    try:
        import opentelemetry.sdk._logs  # noqa: F401
    except ImportError:
        raise ConfigError(EXTRA_MESSAGE) from None


@dataclass(frozen=True)
class ExportReport:
    """One round: log events read, OpenTelemetry events sent, where the cursor now is."""

    events: int
    records: int
    cursor: int
    delivered: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "records": self.records,
            "cursor": self.cursor,
            "delivered": self.delivered,
        }


def _env_exporter() -> Any:
    """The SDK exporter the standard variables ask for (None for `none`)."""
    choice = os.environ.get("OTEL_LOGS_EXPORTER", "otlp").split(",")[0].strip().lower()
    if choice == "none":
        return None
    if choice == "console":
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter

        return ConsoleLogRecordExporter()
    if choice != "otlp":
        raise ConfigError(f"OTEL_LOGS_EXPORTER={choice!r} is not supported (otlp, console, none)")
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        except ImportError:
            raise ConfigError(
                "OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc: "
                "pip install opentelemetry-exporter-otlp-proto-grpc, or use http/protobuf"
            ) from None
        return OTLPLogExporter()
    if protocol != "http/protobuf":
        raise ConfigError(f"OTLP protocol {protocol!r} is not supported (http/protobuf, grpc)")
    try:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    except ImportError:
        raise ConfigError(EXTRA_MESSAGE) from None
    return OTLPLogExporter()


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    return Resource.create({} if named else {"service.name": "plaudit"})


def _span_context(record: Any) -> Any:
    """An OpenTelemetry context whose current span is the record's (None without ids): the
    SDK copies its trace and span ids, and flags, onto the log record."""
    if not record.trace_id:
        return None
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        TraceFlags,
        set_span_in_context,
    )

    span = SpanContext(
        record.trace_id, record.span_id, is_remote=True, trace_flags=TraceFlags(record.trace_flags)
    )
    return set_span_in_context(NonRecordingSpan(span))


class _Delivery:
    """Wraps the SDK exporter to learn whether each batch was delivered: the batch processor
    swallows failures, and the cursor must not move past an event that was not sent."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed = False

    def export(self, batch: Sequence[Any]) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        try:
            result = self.inner.export(batch)
        except Exception:
            log.exception("OpenTelemetry exporter raised")
            self.failed = True
            return LogRecordExportResult.FAILURE
        if result != LogRecordExportResult.SUCCESS:
            self.failed = True
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self.inner.shutdown()


class OtelExporter:
    """Follow the log's ledger, bandit and router results into OpenTelemetry.

    `exporter` is an SDK log-record exporter (default: the one the OTEL_* variables describe);
    plaudit wraps it in a batch processor and a logger provider it owns. `name` keys the cursor,
    `start` says where a cursor that does not exist yet begins.
    """

    def __init__(
        self,
        plaudit: Plaudit,
        *,
        exporter: Any = None,
        name: str = DEFAULT_NAME,
        start: Start = "beginning",
        batch_size: int = 512,
        flush_timeout: float = 30.0,
    ) -> None:
        require_sdk()
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        if not name or not name.isprintable() or len(name) > 200:
            raise ConfigError(f"exporter name {name!r} must be 1-200 printable characters")
        if start not in ("beginning", "head"):
            raise ConfigError(f"start must be 'beginning' or 'head', not {start!r}")
        if not 1 <= batch_size <= 100_000:
            raise ConfigError(f"batch_size must be 1..100000, not {batch_size!r}")
        self.plaudit = plaudit
        self.name = name
        self.start = start
        self.batch_size = batch_size
        self.flush_timeout = flush_timeout
        inner = _env_exporter() if exporter is None else exporter
        self._delivery = None if inner is None else _Delivery(inner)
        self._provider = LoggerProvider(resource=_resource(), shutdown_on_exit=False)
        if self._delivery is not None:
            self._provider.add_log_record_processor(
                BatchLogRecordProcessor(
                    self._delivery,  # type: ignore[arg-type]  # duck-typed exporter
                    max_export_batch_size=min(batch_size, 512),
                    max_queue_size=max(2048, batch_size * 4),
                    schedule_delay_millis=60_000,  # we flush ourselves, once per batch
                )
            )
        self._logger = self._provider.get_logger(SCOPE, __version__)
        self._lock = threading.Lock()

    # -- one round -------------------------------------------------------------------------

    def position(self) -> int:
        """Where this exporter's cursor is (a new one: where it will start)."""
        found = cursor.read(self.plaudit, self.name)
        if found is not None:
            return found
        return self.plaudit.log.head().length if self.start == "head" else 0

    def export_pending(self) -> ExportReport:
        """Send every result committed after the cursor, batch by batch; stop at the first
        batch that is not delivered (the cursor stays before it)."""
        from opentelemetry._logs import SeverityNumber

        with self._lock:
            after = self.position()
            until = self.plaudit.log.head().length
            if cursor.read(self.plaudit, self.name) is None:
                cursor.advance(self.plaudit, self.name, after)
            events = sent = 0
            while after < until:
                with contextlib.closing(
                    self.plaudit.log.replay(after, types=TYPES, until_seq=until)
                ) as stream:
                    batch = list(itertools.islice(stream, self.batch_size))
                last = batch[-1].seq if len(batch) == self.batch_size else until
                if self._delivery is not None:
                    self._delivery.failed = False
                    now = time.time_ns()
                    for event in batch:
                        for record in records(event):
                            self._logger.emit(
                                timestamp=record.timestamp_ns,
                                observed_timestamp=now,
                                context=_span_context(record),
                                severity_number=SeverityNumber.INFO,
                                event_name=record.name,
                                attributes=record.attributes,
                            )
                            sent += 1
                    flushed = self._provider.force_flush(int(self.flush_timeout * 1000))
                    if self._delivery.failed or not flushed:
                        log.warning(
                            "OpenTelemetry export of log positions %d..%d failed; "
                            "it will be sent again",
                            after + 1,
                            last,
                        )
                        return ExportReport(events, sent, after, delivered=False)
                events += len(batch)
                after = cursor.advance(self.plaudit, self.name, last)
            return ExportReport(events, sent, after, delivered=True)

    # -- following ---------------------------------------------------------------------------

    def follow(self, stop: threading.Event, interval: float = 2.0) -> None:
        """Export new results every `interval` seconds until `stop` is set; a failed round
        is retried after a growing pause (at most a minute)."""
        pause = interval
        while True:
            try:
                delivered = self.export_pending().delivered
            except Exception:  # the database may be briefly unreachable: keep following
                log.exception("OpenTelemetry export round failed")
                delivered = False
            pause = interval if delivered else min(max(pause * 2, interval), 60.0)
            if stop.wait(pause):
                return

    def follow_in_background(self, interval: float = 2.0) -> Follower:
        """Follow in a daemon thread; `stop()` it to end, flush and shut the SDK down."""
        return Follower(self, interval)

    def close(self) -> None:
        self._provider.shutdown()


class Follower:
    def __init__(self, exporter: OtelExporter, interval: float) -> None:
        self.exporter = exporter
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=exporter.follow, args=(self._stop, interval), name="plaudit-otel", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self.exporter.close()


__all__ = ["EXTRA_MESSAGE", "ExportReport", "Follower", "OtelExporter", "require_sdk"]
