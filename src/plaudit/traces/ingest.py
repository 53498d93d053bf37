"""Learning from traces: spans in, bandit observations and router outcomes out.

Which run a span belongs to:

1. the `plaudit.run_id` it carries, or the nearest ancestor in the same payload carries;
2. else its trace: a run selected under a W3C trace context (`plaudit.traces.projection`)
   owns the spans of that trace (of several, the latest selected before the span started).

When a run is observed: once, when its *end* arrives. For a run selected inside the trace, the
end is the span the select was made in (the `traceparent`'s span), or that span's parent when it
is a client span (an instrumented HTTP or MCP client's span for the select request itself).
Spans of such a run that come in earlier exports are kept in the log
(`plaudit.trace.span.v1`: only what plaudit reads of them) and added then. For a run named by
`plaudit.run_id`, the end is its outermost span in the export that holds one: tag the run's
outermost span, and the spans under it that arrive with it belong to it.

The observation is made under the end span's trace context, so the OpenTelemetry export
attaches the evaluation to the run's span. A span naming `plaudit.decision_id` records the
decision's outcome: `plaudit.outcome`, else failure when the span's status is ERROR and success
otherwise; `plaudit.task_executed`, else the decision's chosen task.

Nothing is half-recorded: the payload is decoded and checked whole before anything is
written, and every write is idempotent (ids derived from the spans), so an exporter's retry
records nothing twice.
"""

from __future__ import annotations

import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plaudit.errors import ConflictError, NotFoundError, ValidationError
from plaudit.events import make_event
from plaudit.tracecontext import TraceContext, trace_context
from plaudit.traces.conventions import Extract, extract
from plaudit.traces.otlp import SPAN_KIND_CLIENT, Span, TracePayloadError, decode, inflate
from plaudit.traces.projection import NAME, SPAN_V1

if TYPE_CHECKING:
    from plaudit.core import Plaudit

MAX_OUTPUT_CHARS = 16 << 20
MAX_TOOL_CALLS = 10_000
#: Threads observing one payload's runs at once (their observations share group commits).
OBSERVERS = 8
_DEPTH = 256


@dataclass
class IngestReport:
    """What one payload did. Every span is counted once: in `observed_spans` (part of a run
    observed now), `pending` (kept for a run whose end has not arrived), `late` (of a run
    already observed), `unknown` (naming a run or decision plaudit does not have), `outcomes`
    (recording a router outcome), or `ignored` (naming nothing plaudit knows)."""

    spans: int = 0
    observed_spans: int = 0
    pending: int = 0
    late: int = 0
    unknown: int = 0
    ignored: int = 0
    runs_observed: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "observed_spans": self.observed_spans,
            "pending": self.pending,
            "late": self.late,
            "unknown": self.unknown,
            "ignored": self.ignored,
            "runs_observed": list(self.runs_observed),
            "outcomes": list(self.outcomes),
        }


@dataclass
class _Link:
    """A trace_links row: a select (`kind='select'`) or a kept span (`kind='span'`)."""

    kind: str
    run_id: str
    span_id: str
    parent_id: str
    span_kind: int
    ts_ms: int
    event_id: str


@dataclass
class _Run:
    run_id: str
    spans: list[int] = field(default_factory=list)
    by_attribute: bool = False


def _links(p: Plaudit, traces: set[str]) -> dict[str, list[_Link]]:
    p.log.ensure_projection(NAME)
    out: dict[str, list[_Link]] = defaultdict(list)
    ids = sorted(traces)
    with p.backend.read() as tx:
        if not tx.table_exists("trace_links"):
            return out
        for i in range(0, len(ids), 400):
            chunk = ids[i : i + 400]
            rows = tx.fetchall(
                "SELECT trace_id, kind, run_id, span_id, parent_id, span_kind, ts_ms, event_id "
                f"FROM trace_links WHERE trace_id IN ({','.join('?' * len(chunk))}) ORDER BY seq",
                chunk,
            )
            for r in rows:
                out[r[0]].append(_Link(r[1], r[2], r[3], r[4], int(r[5]), int(r[6]), r[7]))
    return out


def _attribute_run(i: int, spans: list[Span], exs: list[Extract], index: dict) -> str | None:
    """The `plaudit.run_id` of span i or its nearest ancestor in the payload."""
    for _ in range(_DEPTH):
        if exs[i].run_id:
            return exs[i].run_id
        s = spans[i]
        parent = index.get((s.trace_id, s.parent_id)) if s.parent_id else None
        if parent is None:
            return None
        i = parent
    return None


def _trace_run(span: Span, links: list[_Link]) -> str | None:
    """The run selected in the span's trace most recently before the span started."""
    selects = [lk for lk in links if lk.kind == "select"]
    if not selects:
        return None
    before = [lk for lk in selects if lk.ts_ms <= span.start_ms]
    return (before[-1] if before else selects[0]).run_id


def _ends(spans: list[Span], links: dict[str, list[_Link]]) -> dict[tuple[str, str], str]:
    """(trace, span id) -> run, for the spans that end runs selected in their trace: the
    select's span, or its parent when the select's span is a client span (here or kept)."""
    ends: dict[tuple[str, str], str] = {}
    clients: dict[tuple[str, str], str] = {
        (s.trace_id, s.span_id): s.parent_id for s in spans if s.kind == SPAN_KIND_CLIENT
    }
    for trace, rows in links.items():
        for lk in rows:
            if lk.kind == "span" and lk.span_kind == SPAN_KIND_CLIENT:
                clients.setdefault((trace, lk.span_id), lk.parent_id)
    for trace, rows in links.items():
        for lk in rows:
            if lk.kind == "select":
                parent = clients.get((trace, lk.span_id))
                ends[(trace, lk.span_id if parent is None else parent)] = lk.run_id
    return ends


def _assign(
    spans: list[Span], exs: list[Extract], links: dict[str, list[_Link]]
) -> tuple[dict[str, _Run], list[int], dict[tuple[str, str], str]]:
    """Runs and their spans; the spans naming a decision; the spans that end runs."""
    index = {(s.trace_id, s.span_id): i for i, s in enumerate(spans)}
    ends = _ends(spans, links)
    runs: dict[str, _Run] = {}
    decisions = []
    for i, s in enumerate(spans):
        if exs[i].decision_id:
            decisions.append(i)
            continue
        run_id = _attribute_run(i, spans, exs, index)
        by_attribute = run_id is not None
        if run_id is None:
            run_id = ends.get((s.trace_id, s.span_id)) or _trace_run(s, links.get(s.trace_id, []))
        if run_id is None:
            continue
        run = runs.setdefault(run_id, _Run(run_id))
        run.spans.append(i)
        run.by_attribute = run.by_attribute or by_attribute
    return runs, decisions, ends


def _end(
    run: _Run, spans: list[Span], exs: list[Extract], links: list[_Link], ends: dict
) -> int | None:
    """The index of the run's end span in this payload, or None when it has not arrived."""
    mine = set(run.spans)
    select = any(lk.kind == "select" and lk.run_id == run.run_id for lk in links)
    if not select or run.by_attribute:
        tagged = [
            i
            for i in run.spans
            if exs[i].run_id == run.run_id
            and not any(spans[j].span_id == spans[i].parent_id for j in mine if j != i)
        ]
        return min(tagged, key=lambda i: spans[i].start_ns) if tagged else None
    return next(
        (i for i in run.spans if ends.get((spans[i].trace_id, spans[i].span_id)) == run.run_id),
        None,
    )


def _contribution(span: Span, ex: Extract) -> dict[str, Any]:
    return {
        "start_us": span.start_ns // 1000,  # ns since the epoch exceed JSON's safe integers
        "role": ex.role,
        "output": ex.output,
        "tool_calls": ex.tool_calls,
        "usage": ex.usage,
    }


def _kept_event(run_id: str, span: Span, ex: Extract) -> Any:
    payload = {
        "run_id": run_id,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_id": span.parent_id,
        "span_kind": span.kind,
        "end_us": span.end_ns // 1000,
        **_contribution(span, ex),
    }
    return make_event(
        SPAN_V1,
        payload,
        id=f"trace-span:{span.trace_id}:{span.span_id}",
        source="plaudit.traces",
        ts_ms=span.end_ns // 1_000_000 or None,
    )


def _observation(parts: list[dict[str, Any]], end: Span, end_ex: Extract) -> dict[str, Any]:
    parts = sorted(parts, key=lambda c: c["start_us"])
    text = "\n".join(t for c in parts for t in c["output"])[:MAX_OUTPUT_CHARS]
    calls: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for c in parts:
        for call in c["tool_calls"]:
            key = call.get("id") or (call["name"], repr(call.get("arguments")))
            if key not in seen:
                seen.add(key)
                calls.append(call)
    usages = [c["usage"] for c in parts if c["role"] == "model" and c["usage"] is not None]
    return {
        "output_text": text,
        "tool_calls": calls[:MAX_TOOL_CALLS],
        "usage_tokens": sum(usages) if usages else None,
        "duration_ms": end.duration_ms,
        "error": end_ex.error,
    }


def _run_state(p: Plaudit, run_id: str) -> str:
    """'open', 'observed' or 'unknown'."""
    try:
        run = p.bandit.run(run_id)
    except (NotFoundError, ValidationError):
        return "unknown"
    return "open" if run.get("observation") is None else "observed"


def _plan_outcomes(p: Plaudit, spans: list[Span], exs: list[Extract], idx: list[int]) -> list:
    """(span index, outcome arguments) per span naming a known decision, checked now."""
    from plaudit.signals import contract

    out = []
    for i in idx:
        ex, s = exs[i], spans[i]
        decision = p.log.get(contract.event_id(contract.DECISION, ex.decision_id or ""))
        if decision is None:
            continue
        args = {
            "decision_id": ex.decision_id,
            "outcome": ex.outcome or ("failure" if s.error is not None else "success"),
            "task_executed": ex.task_executed or decision.payload.get("chosen_task", ""),
            "time_to_resolution_ms": int(s.duration_ms),
            "error_kind": ex.error or "",
            "session_id": decision.session_id,
        }
        try:
            contract.build_outcome(**args, where=f"span {s.span_id}")
        except ValidationError as exc:
            raise TracePayloadError(exc.field, exc.reason, where=exc.where) from None
        out.append((i, args))
    return out


def ingest_spans(p: Plaudit, spans: list[Span]) -> IngestReport:
    """Record what `spans` (one payload, already decoded and checked) teach plaudit."""
    report = IngestReport(spans=len(spans))
    exs = [extract(s) for s in spans]
    traces = {s.trace_id for s in spans}
    links = _links(p, traces) if traces else {}
    runs, decision_spans, ends = _assign(spans, exs, links)
    outcomes = _plan_outcomes(p, spans, exs, decision_spans)
    report.unknown += len(decision_spans) - len(outcomes)
    kept: list[Any] = []
    to_observe: list[tuple[_Run, int]] = []
    for run in runs.values():
        state = _run_state(p, run.run_id)
        if state == "observed":
            report.late += len(run.spans)
            continue
        if state == "unknown":
            report.unknown += len(run.spans)
            continue
        trace_links = links.get(spans[run.spans[0]].trace_id, [])
        end = _end(run, spans, exs, trace_links, ends)
        if end is not None:
            to_observe.append((run, end))
            continue
        select = next(
            (lk for lk in trace_links if lk.kind == "select" and lk.run_id == run.run_id), None
        )
        for i in run.spans:
            if exs[i].role is not None or (select and spans[i].span_id == select.span_id):
                kept.append(_kept_event(run.run_id, spans[i], exs[i]))
        report.pending += len(run.spans)
    report.ignored = len(spans) - sum(len(r.spans) for r in runs.values()) - len(decision_spans)
    # -- writes: everything above only read -------------------------------------------------
    if kept:
        p.log.append_batch(kept, on_conflict="skip")
    for run, observed in _observe_all(p, to_observe, spans, exs, links):
        if observed:
            report.runs_observed.append(run.run_id)
            report.observed_spans += len(run.spans)
        else:
            report.late += len(run.spans)
    for i, args in outcomes:
        s = spans[i]
        with trace_context(TraceContext(s.trace_id, s.span_id)):
            try:
                p.signals.outcome(**args)
            except ConflictError:  # the decision kept its first outcome
                report.late += 1
                continue
        report.outcomes.append(args["decision_id"])
    return report


def _observe_all(
    p: Plaudit,
    to_observe: list[tuple[_Run, int]],
    spans: list[Span],
    exs: list[Extract],
    links: dict[str, list[_Link]],
) -> list[tuple[_Run, bool]]:
    """Observe each run; whether it was observed now (False: it was already, differently).

    From several threads at once, so the log's group commit writes a payload's observations
    in a few transactions (and fsyncs) rather than one each."""

    def one(item: tuple[_Run, int]) -> tuple[_Run, bool]:
        return item[0], _observe(p, item[0], item[1], spans, exs, links)

    if len(to_observe) < 2:
        return [one(item) for item in to_observe]
    with ThreadPoolExecutor(max_workers=min(OBSERVERS, len(to_observe))) as pool:
        return list(pool.map(one, to_observe))


def _observe(
    p: Plaudit,
    run: _Run,
    end: int,
    spans: list[Span],
    exs: list[Extract],
    links: dict[str, list[_Link]],
) -> bool:
    trace = spans[end].trace_id
    parts = [_contribution(spans[i], exs[i]) for i in run.spans if exs[i].role is not None]
    here = {spans[i].span_id for i in run.spans}
    for lk in links.get(trace, []):
        if lk.kind == "span" and lk.run_id == run.run_id and lk.span_id not in here:
            ev = p.log.get(lk.event_id)
            if ev is not None and ev.payload.get("role") is not None:
                parts.append(ev.payload)
    obs = _observation(parts, spans[end], exs[end])
    with trace_context(TraceContext(trace, spans[end].span_id)):
        try:
            p.bandit.observe(run.run_id, **obs)
        except ConflictError:  # observed meanwhile (another export, another host)
            return False
    return True


def ingest(
    p: Plaudit,
    body: bytes,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
) -> IngestReport:
    """One OTLP/HTTP trace request body (protobuf or JSON, optionally gzip)."""
    return ingest_spans(p, decode(inflate(body, content_encoding), content_type))


def read_file(path: str | os.PathLike[str]) -> list[Span]:
    """The spans of an exported trace file (see `plaudit.traces.otlp.decode_file`), checked
    whole; errors name the file and where in it."""
    from plaudit.traces.otlp import decode_file

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValidationError("FILE", f"cannot read {os.fspath(path)}: {exc.strerror}") from None
    try:
        spans = decode_file(data)
    except TracePayloadError as exc:
        where = f"{os.fspath(path)}" + (f" {exc.where}" if exc.where else "")
        raise ValidationError(exc.field, exc.reason, where=where) from None
    return spans


def ingest_file(p: Plaudit, path: str | os.PathLike[str]) -> IngestReport:
    """An exported trace file: `read_file`, then `ingest_spans`."""
    return ingest_spans(p, read_file(path))


__all__ = ["IngestReport", "ingest", "ingest_file", "ingest_spans", "read_file"]
