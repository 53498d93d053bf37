"""Which traces belong to which bandit runs: a projection of the log (table `trace_links`).

Two kinds of rows, both keyed by trace id:

- `select`: a bandit run selected under a W3C trace context (its event's meta carries a
  `traceparent`): spans of that trace are the run's, and the span it names ends the run;
- `span`: a span of a run that arrived before the run's end (a `plaudit.trace.span.v1` event,
  what plaudit kept of it), to be added to the run's observation when the end arrives.

Trailing (off the write path): a select pays nothing for it; trace ingest brings it up to date
before reading it (`EventLog.ensure_projection`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plaudit.events import StoredEvent
from plaudit.tracecontext import trace_of

NAME = "traces"
SPAN_V1 = "plaudit.trace.span.v1"
RUN_PREFIX = "plaudit.bandit.run."
_DDL = (
    "CREATE TABLE IF NOT EXISTS trace_links (seq {bigint} PRIMARY KEY, trace_id TEXT NOT NULL, "
    "kind TEXT NOT NULL, run_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_id TEXT NOT NULL, "
    "span_kind INTEGER NOT NULL, ts_ms {bigint} NOT NULL, event_id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS trace_links_trace ON trace_links (trace_id)",
    "CREATE INDEX IF NOT EXISTS trace_links_run ON trace_links (run_id)",
)


class TracesProjection:
    name = NAME
    version = 1
    trailing = True
    prefixes = (RUN_PREFIX, "plaudit.trace.")
    tables = ("trace_links",)

    def create(self, tx: Any) -> None:
        for sql in _DDL:
            tx.execute(tx.ddl(sql))

    def apply(self, tx: Any, events: Sequence[StoredEvent]) -> None:
        rows = []
        for ev in events:
            if ev.type.startswith(RUN_PREFIX):
                tc = trace_of(ev.meta)
                run_id = ev.payload.get("run_id", ev.id) if isinstance(ev.payload, dict) else None
                if tc is not None and isinstance(run_id, str):
                    rows.append(
                        (ev.seq, tc.trace_id, "select", run_id, tc.span_id, "", 0, ev.ts_ms, ev.id)
                    )
            elif ev.type == SPAN_V1:
                p = ev.payload
                try:
                    rows.append(
                        (
                            ev.seq,
                            str(p["trace_id"]),
                            "span",
                            str(p["run_id"]),
                            str(p["span_id"]),
                            str(p.get("parent_id", "")),
                            int(p.get("span_kind", 0)),
                            ev.ts_ms,
                            ev.id,
                        )
                    )
                except (KeyError, TypeError, ValueError):  # written by someone else: skip it
                    continue
        if rows:
            tx.executemany(
                "INSERT INTO trace_links (seq, trace_id, kind, run_id, span_id, parent_id, "
                "span_kind, ts_ms, event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (seq) DO NOTHING",
                rows,
            )


__all__ = ["NAME", "SPAN_V1", "TracesProjection"]
