"""Turning router events into compact, pre-encoded records: the export's hot loop.

Each event is decoded once, with typed msgspec decoders that read only the fields the export
uses (one decoder per event type for the subject), and a decision is encoded right away into
the bytes of its output row's first half. What the join keeps per decision is then one small
tuple of a few strings and two byte strings, instead of a dict of decoded values to re-encode.

A large seq_mem file is read in two byte ranges, the second one in a forked worker process, so
both cores decode at once; the records are then folded in file order, as if read by one reader.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

import msgspec

from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE

MAX_LINE_BYTES = 8 << 20
CHUNK_BYTES = 4 << 20
#: Files smaller than this are read in one process: a worker's start-up would not pay off.
PARALLEL_MIN_BYTES = 32 << 20
MAX_SAMPLES = 20
SCHEMA_ROW = "flow_router_train_row_v1"

# Record kinds, the first item of every record tuple.
KIND_DECISION = 0
KIND_OUTCOME = 1
KIND_OVERRIDE = 2


class _Row(msgspec.Struct):
    name: Any = None
    ts_ms: Any = None
    session_id: Any = None
    # seq writes the subject as a JSON-encoded string; an object is accepted too.
    subject: msgspec.Raw = msgspec.Raw(b"null")


class _Decision(msgspec.Struct):
    """The decision fields the export uses; `context` and `candidates` stay raw JSON text,
    copied to the output as they are."""

    decision_id: Any = None
    session_id: Any = None
    chosen_task: Any = None
    source: Any = None
    project_fingerprint: Any = None
    project_path: Any = None
    git_branch: Any = None
    git_commit: Any = None
    user_hash: Any = None
    user_intent: Any = None
    confidence: Any = None
    propensity: Any = None
    context: msgspec.Raw = msgspec.Raw(b"null")
    candidates: msgspec.Raw = msgspec.Raw(b"null")


class _Outcome(msgspec.Struct):
    decision_id: Any = None
    outcome: Any = None
    task_executed: Any = None
    time_to_resolution_ms: Any = None
    manual_override_task: Any = None
    error_kind: Any = None


class _Override(msgspec.Struct):
    decision_id: Any = None
    override_task: Any = None


class _RowHead(msgspec.Struct):
    """An output row's first half, up to `confidence`; encoded once per decision."""

    schema_version: str
    id: str
    ts_ms: int
    source: str
    session_id: str
    project_fingerprint: Any
    project_path: Any
    git_branch: Any
    git_commit: Any
    user_hash: Any
    user_intent: Any
    context: msgspec.Raw
    candidates: msgspec.Raw
    chosen_task: str
    confidence: float


_decode_row = msgspec.json.Decoder(_Row).decode
_decode_str = msgspec.json.Decoder(str).decode
_SUBJECT_DECODERS: dict[str, Any] = {
    DECISION: msgspec.json.Decoder(_Decision).decode,
    OUTCOME: msgspec.json.Decoder(_Outcome).decode,
    OVERRIDE: msgspec.json.Decoder(_Override).decode,
}
_EMPTY = {DECISION: _Decision(), OUTCOME: _Outcome(), OVERRIDE: _Override()}
_encode = msgspec.json.Encoder().encode
_EMPTY_OBJECT = msgspec.Raw(b"{}")
_EMPTY_LIST = msgspec.Raw(b"[]")
_SOURCE_KEY = b',"source":'


def _s(value: Any) -> str:
    """`str(value or "")`, as the reference coerces fields."""
    if not value:
        return ""
    return value if type(value) is str else str(value)


def _ts(value: Any) -> int:
    """`int(value or 0)`; raises on what the reference cannot convert either."""
    if not value:
        return 0
    if type(value) is int:
        return value
    return int(value)


def _float(value: Any) -> float:
    if type(value) is float and isfinite(value):
        return value
    try:
        f = float(value or 0.0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return f if isfinite(f) else 0.0


def _int(value: Any) -> int:
    if type(value) is int:
        return value
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def _starts(raw: msgspec.Raw, byte: int) -> bool:
    view = memoryview(raw)
    return len(view) > 0 and view[0] == byte


def bucket(key: str, seed: int) -> int:
    """The reference's split bucket: sha256 of "seed:key", first 8 hex digits, mod 100."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:4], "big") % 100


@dataclass
class Scan:
    """Records and tallies of one stretch of input, in input order."""

    records: list[tuple[Any, ...]] = field(default_factory=list)
    lines: int = 0  # lines read, blank ones included (for numbering errors)
    events: int = 0  # lines that decoded as events
    parse_errors: int = 0
    oversize_lines: int = 0
    skipped_old: int = 0
    skipped_no_decision_id: int = 0
    other_events: int = 0
    # (line number within this stretch, reason), the first few only
    errors: list[tuple[int, str]] = field(default_factory=list)


class Scanner:
    """Makes records from events; `now_ms`/`max_age_ms` filter as the reference does."""

    def __init__(self, *, now_ms: int, max_age_ms: int, seed: int) -> None:
        self.now_ms = now_ms
        self.max_age_ms = max_age_ms
        self.seed = seed
        self.out = Scan()
        self._buckets: dict[str, int] = {}

    def error(self, line_no: int, reason: str) -> None:
        out = self.out
        out.parse_errors += 1
        if len(out.errors) < MAX_SAMPLES:
            out.errors.append((line_no, reason))

    def event(self, name: str, ts_ms: int, row_session: str, subject: bytes | str) -> None:
        """One event; `subject` is its JSON object text."""
        out = self.out
        if ts_ms <= 0 or (self.now_ms - ts_ms) > self.max_age_ms:
            out.skipped_old += 1
            return
        decode = _SUBJECT_DECODERS.get(name)
        if decode is None:
            out.other_events += 1
            return
        try:
            head = decode(subject)
        except msgspec.DecodeError:
            head = _EMPTY[name]  # like the reference, an unreadable subject is {}
        did = head.decision_id
        if type(did) is not str:
            did = _s(did)
        if not did:
            out.skipped_no_decision_id += 1
            return
        if name == DECISION:
            out.records.append(self._decision(did, ts_ms, row_session, head))
        elif name == OUTCOME:
            out.records.append(
                (
                    KIND_OUTCOME,
                    did,
                    _s(head.task_executed),
                    _s(head.outcome),
                    _int(head.time_to_resolution_ms),
                    _s(head.error_kind),
                    _s(head.manual_override_task),
                )
            )
        else:
            out.records.append((KIND_OVERRIDE, did, _s(head.override_task)))

    def _decision(self, did: str, ts_ms: int, row_session: str, d: _Decision) -> tuple[Any, ...]:
        session = d.session_id
        if type(session) is not str:
            session = _s(session)
        session = session or row_session
        chosen = d.chosen_task
        if type(chosen) is not str:
            chosen = _s(chosen)
        context = d.context
        if not _starts(context, 123):  # "{": the reference keeps only an object ...
            context = _EMPTY_OBJECT
        candidates = d.candidates
        if not _starts(candidates, 91):  # "[": ... and only a list
            candidates = _EMPTY_LIST
        source = d.source
        if type(source) is not str:
            source = _s(source)
        head = _encode(
            _RowHead(
                SCHEMA_ROW,
                did,
                ts_ms,
                source or "flow",
                session,
                d.project_fingerprint,
                d.project_path,
                d.git_branch,
                d.git_commit,
                d.user_hash,
                d.user_intent,
                context,
                candidates,
                chosen,
                _float(d.confidence),
            )
        )
        # The part after id and ts_ms is the decision's content: it feeds `dedupe_id` and tells
        # an identical repeat from a conflicting one.
        cut = head.find(_SOURCE_KEY)
        propensity = d.propensity
        return (
            KIND_DECISION,
            did,
            ts_ms,
            session,
            chosen,
            head[:cut],
            head[cut + 1 : -1],
            propensity if type(propensity) in (int, float) else None,
            bucket(did, self.seed),
        )

    # -- seq_mem lines ------------------------------------------------------------------
    def line(self, line: bytes, line_no: int) -> None:
        """One seq_mem line (without its newline). A bad line is counted, never raised."""
        try:
            row = _decode_row(line)
            ts = row.ts_ms
            if type(ts) is not int:
                ts = _ts(ts)
            raw = row.subject
            if _starts(raw, 34):  # a JSON string holding the subject's JSON text
                subject: bytes | str = _decode_str(raw)
            elif _starts(raw, 123):  # the subject as an object
                subject = bytes(raw)
            else:
                subject = b"{}"
        except (msgspec.DecodeError, ValueError, TypeError, OverflowError) as exc:
            if not line.strip():
                return
            self.error(line_no, str(exc) or type(exc).__name__)
            return
        self.out.events += 1
        name = row.name
        session = row.session_id
        self.event(
            name if type(name) is str else _s(name),
            ts,
            session if type(session) is str else _s(session),
            subject,
        )

    def read_range(
        self, path: str, start: int, end: int, progress: Any = None, scale: float = 1.0
    ) -> Scan:
        """Read lines from byte `start` (a line start) up to byte `end`, in big chunks."""
        out = self.out
        line_no = 0
        carry = b""
        oversize = False  # inside a line already counted as too long
        done = 0
        next_report = 0
        with open(path, "rb") as f:
            f.seek(start)
            remaining = end - start
            while remaining > 0:
                chunk = f.read(min(CHUNK_BYTES, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
                done += len(chunk)
                if oversize:
                    nl = chunk.find(b"\n")
                    if nl < 0:
                        continue
                    chunk = chunk[nl + 1 :]
                    oversize = False
                lines = (carry + chunk if carry else chunk).split(b"\n")
                carry = lines.pop()
                for line in lines:
                    line_no += 1
                    if len(line) > MAX_LINE_BYTES:
                        self._oversize(line_no)
                    else:
                        self.line(line, line_no)
                if len(carry) > MAX_LINE_BYTES:
                    line_no += 1
                    self._oversize(line_no)
                    carry = b""
                    oversize = True
                if progress is not None and done >= next_report:
                    progress("reading", int(done * scale), None)
                    next_report = done + (32 << 20)
        if carry:
            line_no += 1
            self.line(carry, line_no)
        out.lines = line_no
        return out

    def _oversize(self, line_no: int) -> None:
        self.out.oversize_lines += 1
        self.error(line_no, f"line longer than {MAX_LINE_BYTES} bytes")


def _scan_worker(
    path: str, start: int, end: int, now_ms: int, max_age_ms: int, seed: int
) -> Scan:
    return Scanner(now_ms=now_ms, max_age_ms=max_age_ms, seed=seed).read_range(path, start, end)


def _split_point(path: str, size: int) -> int:
    """The start of the first line at or after the middle of the file (size if none)."""
    with open(path, "rb") as f:
        f.seek(size // 2)
        while True:
            block = f.read(1 << 16)
            if not block:
                return size
            nl = block.find(b"\n")
            if nl >= 0:
                return min(size, f.tell() - len(block) + nl + 1)


def can_fork() -> bool:
    """Forking is safe (and cheap) only from a single-threaded process on a multi-core box."""
    return (
        (os.cpu_count() or 1) > 1
        and threading.active_count() == 1
        and "fork" in _start_methods()
        and os.environ.get("PLAUDIT_EXPORT_JOBS", "") != "1"
    )


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()


def scan_file(
    path: str,
    size: int,
    *,
    now_ms: int,
    max_age_ms: int,
    seed: int,
    progress: Any = None,
    parallel: bool | None = None,
) -> list[Scan]:
    """Scan `path` up to `size` bytes (what it held when the export started); one Scan per
    stretch, in file order. Lines appended meanwhile are left for the next export."""
    use_pool = can_fork() and size >= PARALLEL_MIN_BYTES if parallel is None else parallel
    mid = _split_point(path, size) if use_pool else size
    scanner = Scanner(now_ms=now_ms, max_age_ms=max_age_ms, seed=seed)
    if mid >= size:
        return [scanner.read_range(path, 0, size, progress, 1.0)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        future = pool.submit(_scan_worker, path, mid, size, now_ms, max_age_ms, seed)
        first = scanner.read_range(path, 0, mid, progress, size / max(1, mid))
        try:
            second = future.result()
        except (BrokenProcessPool, OSError):
            # The worker died (killed, out of memory): read its half here instead.
            second = _scan_worker(path, mid, size, now_ms, max_age_ms, seed)
    return [first, second]
