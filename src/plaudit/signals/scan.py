"""Turning router events into compact, pre-encoded records: the export's hot loop.

Each event is decoded once, with typed msgspec decoders that read only the fields the export
uses (one decoder per event type for the subject), and a decision is encoded right away into
the bytes of its output row's first half (in one buffer per stretch of input). What the join
keeps per decision is then one small tuple of interned strings and offsets into that buffer,
instead of a dict of decoded values to re-encode.

msgspec reads strict JSON. A line or subject it refuses is read again as the reference reads
it (bytes that are not UTF-8 replaced, lines split as `str.splitlines` splits them, then
Python's `json`, which also takes NaN, Infinity and lone surrogates), so the same input gives
the same counts; only what that refuses too is a parse error. Values JSON cannot hold are
written as `null` (NaN, Infinity) or as escape text (a lone surrogate), so every output row
stays valid JSON.

A large seq_mem file can be read in two byte ranges, the second one in a forked worker process,
so two cores decode at once; the records are then folded in file order, as if read by one
reader. It costs some extra CPU (handing the worker's records over) and only pays off when a
core is idle, so by default it is used only when the load average says one is;
PLAUDIT_EXPORT_JOBS=1 or 2 (or `parallel=False`/`True`) decides it outright.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from math import isfinite
from sys import intern
from typing import Any

import msgspec

from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE

MAX_LINE_BYTES = 8 << 20
CHUNK_BYTES = 4 << 20
#: Files smaller than this are read in one process: a worker's start-up would not pay off.
PARALLEL_MIN_BYTES = 32 << 20
MAX_SAMPLES = 20
#: What ends a line for `str.splitlines` besides LF, as UTF-8 bytes.
_SEPARATORS = re.compile(rb"\r\n?|\n|[\x0b\x0c\x1c\x1d\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")
SCHEMA_ROW = "flow_router_train_row_v1"


class _Row(msgspec.Struct):
    name: Any = None
    ts_ms: Any = None
    session_id: Any = None
    # seq writes the subject as a JSON-encoded string; an object is accepted too.
    subject: Any = None


_NULL = msgspec.Raw(b"null")


class _Decision(msgspec.Struct):
    """The decision fields the export uses; `context` and `candidates` stay raw JSON text,
    copied to the output as they are."""

    decision_id: Any = None
    session_id: Any = None
    chosen_task: Any = None
    source: Any = None
    # Copied to the output as they are (any JSON value, as in the reference): never decoded.
    project_fingerprint: msgspec.Raw = _NULL
    project_path: msgspec.Raw = _NULL
    git_branch: msgspec.Raw = _NULL
    git_commit: msgspec.Raw = _NULL
    user_hash: msgspec.Raw = _NULL
    user_intent: msgspec.Raw = _NULL
    confidence: Any = None
    propensity: Any = None
    context: msgspec.Raw = _NULL
    candidates: msgspec.Raw = _NULL


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
    project_fingerprint: msgspec.Raw
    project_path: msgspec.Raw
    git_branch: msgspec.Raw
    git_commit: msgspec.Raw
    user_hash: msgspec.Raw
    user_intent: msgspec.Raw
    context: msgspec.Raw
    candidates: msgspec.Raw
    chosen_task: str
    confidence: float


_decode_row = msgspec.json.Decoder(_Row).decode
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


class Scan:
    """Records and tallies of one stretch of input, each kind of record in input order.

    A decision's record holds offsets into `heads`, where its output row's first half is
    encoded: one buffer per stretch is far cheaper to keep, and to hand over from a worker
    process, than a bytes object per decision. (A plain class: `dataclasses` would cost every
    shell-hook emit its import, now that appends fold router events into the projection.)
    """

    def __init__(self) -> None:
        self.decisions: list[tuple[Any, ...]] = []
        self.outcomes: list[tuple[Any, ...]] = []
        self.overrides: list[tuple[str, str]] = []
        self.heads = bytearray()
        self.lines = 0  # lines read, blank ones included (for numbering errors)
        self.events = 0  # lines that decoded as events
        self.parse_errors = 0
        self.oversize_lines = 0
        self.skipped_old = 0
        self.skipped_no_decision_id = 0
        self.other_events = 0
        # (line number within this stretch, reason), the first few only
        self.errors: list[tuple[int, str]] = []


_encode_into = msgspec.json.Encoder().encode_into
PENDING = 8192


class Scanner:
    """Makes records from events; `now_ms`/`max_age_ms` filter as the reference does.

    Records: decisions (id, ts_ms, session, chosen_task, head start, content start, head end,
    propensity, bucket), where `heads[head start:head end]` is the row's JSON up to
    `confidence` (no closing brace) and its content (from `source` on) begins after the comma
    at `content start`; outcomes (id, task_executed, outcome, time_to_resolution_ms,
    error_kind, manual_override_task); overrides (id, override_task). Repeated short strings
    (sessions, tasks, outcomes) are interned, so each is stored once.

    Events wait in small per-type batches, so each batch is turned into records by one tight
    loop with its own typed decoder.
    """

    def __init__(self, *, now_ms: int, max_age_ms: int, seed: int) -> None:
        self.now_ms = now_ms
        self.max_age_ms = max_age_ms
        self.seed = seed
        self.out = Scan()
        self._pending: dict[str, tuple[list[tuple[int, str, int]], list[Any]]] = {
            DECISION: ([], []),
            OUTCOME: ([], []),
            OVERRIDE: ([], []),
        }

    def error(self, line_no: int, reason: str) -> None:
        out = self.out
        out.parse_errors += 1
        if len(out.errors) < MAX_SAMPLES:
            out.errors.append((line_no, reason))

    def event(
        self, name: str, ts_ms: int, row_session: str, subject: Any, line_no: int = 0
    ) -> None:
        """One event; `subject` is its JSON object text (an object or other value from a
        seq_mem row is accepted too). Call `finish` after the last one."""
        if ts_ms <= 0 or (self.now_ms - ts_ms) > self.max_age_ms:
            self.out.skipped_old += 1
            return
        pending = self._pending.get(name)
        if pending is None:
            self.out.other_events += 1
            return
        if type(subject) is not str and type(subject) is not dict:
            subject = _subject_text(subject)
        meta, texts = pending
        meta.append((ts_ms, row_session, line_no))
        texts.append(subject)
        if len(texts) >= PENDING:
            self._flush(name)

    def finish(self) -> Scan:
        for name in self._pending:
            self._flush(name)
        return self.out

    def _flush(self, name: str) -> None:
        pending_meta, texts = self._pending[name]
        if not texts:
            return
        meta = pending_meta
        # One decode per subject: decoding a batch as one JSON array would be a little faster,
        # but crafted bad subjects could then pair up into valid-looking ones.
        one = _SUBJECT_DECODERS[name]
        heads: list[Any] = []
        append = heads.append
        broken = False
        for text in texts:
            try:
                decoded = one(text)
                # msgspec skips fields it was not asked for; Python's json refuses integers of
                # more than 4300 digits anywhere, and the reference drops such events.
                lenient = len(text) > _INT_DIGITS_LIMIT and bool(_LONG_INT_RE.search(text))
            except (msgspec.DecodeError, UnicodeError, TypeError, RecursionError):
                lenient = True
            if lenient:
                decoded = _lenient_subject(name, text)
                broken = broken or type(decoded) is _Unreadable
            append(decoded)
        if broken:
            meta, heads = self._drop_unreadable(meta, heads)
        if name == DECISION:
            self._decisions(meta, heads)
        elif name == OUTCOME:
            self._outcomes(meta, heads)
        else:
            self._overrides(meta, heads)
        pending_meta.clear()
        texts.clear()

    def _drop_unreadable(
        self, meta: list[tuple[int, str, int]], decoded: list[Any]
    ) -> tuple[list[tuple[int, str, int]], list[Any]]:
        """Subjects the reference could not read either (too deep, an integer too long):
        parse errors there, as here."""
        kept_meta, kept = [], []
        for m, d in zip(meta, decoded, strict=True):
            if type(d) is _Unreadable:
                self.error(m[2], f"subject: {d.reason}")
            else:
                kept_meta.append(m)
                kept.append(d)
        return kept_meta, kept

    def _decisions(self, meta: list[tuple[int, str, int]], decoded: list[_Decision]) -> None:
        out = self.out
        records = out.decisions
        heads = out.heads
        seed = self.seed
        skipped = 0
        for (ts_ms, row_session, _), d in zip(meta, decoded, strict=True):
            did = d.decision_id
            if type(did) is not str:
                did = _s(did)
            if not did:
                skipped += 1
                continue
            session = d.session_id
            if type(session) is not str:
                session = _s(session)
            session = intern(session or row_session)
            chosen = d.chosen_task
            chosen = intern(chosen) if type(chosen) is str else _s(chosen)
            context = d.context
            if not _starts(context, 123):  # "{": the reference keeps only an object ...
                context = _EMPTY_OBJECT
            candidates = d.candidates
            if not _starts(candidates, 91):  # "[": ... and only a list
                candidates = _EMPTY_LIST
            source = d.source
            if type(source) is not str:
                source = _s(source)
            start = len(heads)
            _encode_into(
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
                ),
                heads,
                -1,
            )
            propensity = d.propensity
            records.append(
                (
                    did,
                    ts_ms,
                    session,
                    chosen,
                    start,
                    heads.find(_SOURCE_KEY, start),
                    len(heads) - 1,
                    propensity if type(propensity) in (int, float) else None,
                    bucket(did, seed),
                )
            )
        out.skipped_no_decision_id += skipped

    def _outcomes(self, meta: list[tuple[int, str, int]], decoded: list[_Outcome]) -> None:
        out = self.out
        records = out.outcomes
        for o in decoded:
            did = o.decision_id
            if type(did) is not str:
                did = _s(did)
            if not did:
                out.skipped_no_decision_id += 1
                continue
            executed = o.task_executed
            outcome = o.outcome
            error_kind = o.error_kind
            manual = o.manual_override_task
            records.append(
                (
                    did,
                    intern(executed) if type(executed) is str else _s(executed),
                    intern(outcome) if type(outcome) is str else _s(outcome),
                    _int(o.time_to_resolution_ms),
                    intern(error_kind) if type(error_kind) is str else _s(error_kind),
                    intern(manual) if type(manual) is str else _s(manual),
                )
            )

    def _overrides(self, meta: list[tuple[int, str, int]], decoded: list[_Override]) -> None:
        out = self.out
        for v in decoded:
            did = _s(v.decision_id)
            if not did:
                out.skipped_no_decision_id += 1
                continue
            out.overrides.append((did, _s(v.override_task)))

    # -- seq_mem lines ------------------------------------------------------------------
    def lines(self, lines: list[bytes], base: int) -> None:
        """Consecutive seq_mem lines (without newlines), the first one numbered `base + 1`.
        A bad line is counted in `parse_errors` and skipped, never raised."""
        # One decode per line, so a bad line can only ever spoil itself. `event`, inlined.
        decode = _decode_row
        pending = self._pending
        now_ms = self.now_ms
        max_age_ms = self.max_age_ms
        out = self.out
        events = old = other = 0
        for i, line in enumerate(lines, base + 1):
            try:
                row = decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                if line.strip():
                    self._lenient_line(i, line, exc)
                continue
            ts = row.ts_ms
            if type(ts) is not int:
                try:
                    ts = _ts(ts)
                except (ValueError, TypeError, OverflowError) as exc:
                    self.error(i, str(exc) or type(exc).__name__)
                    continue
            events += 1
            if ts <= 0 or (now_ms - ts) > max_age_ms:
                old += 1
                continue
            name = row.name
            batch = pending.get(name) if type(name) is str else None
            if batch is None:
                other += 1
                continue
            subject = row.subject
            if type(subject) is not str and type(subject) is not dict:
                subject = _subject_text(subject)
            session = row.session_id
            meta, texts = batch
            meta.append((ts, session if type(session) is str else _s(session), i))
            texts.append(subject)
            if len(texts) >= PENDING:
                self._flush(name)
        out.skipped_old += old
        out.other_events += other
        self.out.events += events

    def _lenient_line(self, line_no: int, line: bytes, exc: Exception) -> None:
        """A line msgspec refused, read as the reference reads it: bytes that are not UTF-8
        replaced, split where `str.splitlines` splits (a CR, U+2028, ...), blank pieces
        skipped, each piece through Python's json. What fails there too is a parse error."""
        text = line.decode("utf-8", "replace")
        pieces = text.splitlines()
        for piece in pieces:
            if piece.strip():
                self._lenient_piece(line_no, piece, str(exc) if len(pieces) == 1 else None)

    def _lenient_piece(self, line_no: int, text: str, reason: str | None) -> None:
        try:
            row = json.loads(text.strip())
        except (ValueError, RecursionError) as exc:
            self.error(line_no, reason or str(exc) or type(exc).__name__)
            return
        if type(row) is not dict:
            self.error(line_no, reason or "not a JSON object")
            return
        try:
            ts = _ts(row.get("ts_ms"))
        except (ValueError, TypeError, OverflowError) as ts_exc:
            self.error(line_no, str(ts_exc) or type(ts_exc).__name__)
            return
        self.out.events += 1
        name = row.get("name")
        session = row.get("session_id")
        # str() of what is not a string, as the reference does: NaN is "nan" there.
        session = _json_safe(session if type(session) is str else _s(session))
        subject = row.get("subject")
        if type(subject) is str:
            subject = _json_safe(subject)
        elif type(subject) is not dict:  # a dict goes as it is: `_lenient_subject` reads it
            subject = "{}"
        self.event(name if type(name) is str else "", ts, session, subject, line_no)

    def read_range(
        self, path: str, start: int, end: int, progress: Any = None, scale: float = 1.0
    ) -> Scan:
        """Read lines from byte `start` (a line start) up to byte `end`, in big chunks."""
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
                    end_of_line = _SEPARATORS.search(chunk)
                    if end_of_line is None:
                        continue
                    chunk = chunk[end_of_line.end() :]
                    oversize = False
                lines = (carry + chunk if carry else chunk).split(b"\n")
                carry = lines.pop()
                if max(map(len, lines), default=0) > MAX_LINE_BYTES:
                    for line in lines:
                        line_no += 1
                        self._long_line(line, line_no)
                else:
                    self.lines(lines, line_no)
                    line_no += len(lines)
                if len(carry) > MAX_LINE_BYTES:
                    # Other line ends (a file written with CR only) end lines too, as
                    # `str.splitlines` ends them: only the unfinished last piece is carried.
                    pieces = _SEPARATORS.split(carry)
                    carry = pieces.pop()
                    for piece in pieces:
                        self._long_line(piece, line_no + 1)
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
            self.lines([carry], line_no - 1)
        self.out.lines = line_no
        return self.finish()

    def _long_line(self, line: bytes, line_no: int) -> None:
        """A line over the size limit when split at `\n` alone: the pieces other line ends
        (CR, U+2028, ...) make of it are read as lines, as the reference reads them; a piece
        still over the limit is a parse error."""
        if len(line) <= MAX_LINE_BYTES:
            self.lines([line], line_no - 1)
            return
        for piece in _SEPARATORS.split(line):
            if len(piece) > MAX_LINE_BYTES:
                self._oversize(line_no)
            else:
                self.lines([piece], line_no - 1)

    def _oversize(self, line_no: int) -> None:
        self.out.oversize_lines += 1
        self.error(line_no, f"line longer than {MAX_LINE_BYTES} bytes")


def _subject_text(subject: Any) -> str:
    """A subject that is neither text nor an object (which `_lenient_subject` reads as it is)
    is `{}`, as in the reference; bytes are taken as text."""
    if type(subject) is bytes:
        return subject.decode("utf-8", "replace")
    return "{}"


def _json_safe(value: Any) -> Any:
    """`value` with what JSON text cannot hold replaced: NaN and infinities by None, a lone
    surrogate (which Python's json lets through from a `\\ud800` escape) by that escape's six
    characters, so two different ids never become one."""
    kind = type(value)
    if kind is str:
        if value.isascii():
            return value
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if kind is float:
        return value if isfinite(value) else None
    if kind is dict:
        return {_json_safe(k): _json_safe(v) for k, v in value.items()}
    if kind is list:
        return [_json_safe(v) for v in value]
    return value


def _raw_fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in msgspec.structs.fields(cls) if f.type is msgspec.Raw)


_RAW_FIELDS = {name: _raw_fields(type(empty)) for name, empty in _EMPTY.items()}


class _Unreadable:
    """A subject the reference's reading fails on with something other than a JSON syntax
    error, which it counts as a parse error (a syntax error only makes the subject `{}`)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


# Python's json refuses integers longer than this (4300 digits by default; 0 means no limit).
_INT_DIGITS_LIMIT = sys.get_int_max_str_digits() or 10**9
_LONG_INT_RE = re.compile(rf"\d{{{_INT_DIGITS_LIMIT + 1}}}")


def _lenient_subject(name: str, subject: Any) -> Any:
    """A subject msgspec refused, read as the reference reads it: Python's json, and `{}`
    when that fails on the syntax or gives something other than an object.

    Fields kept as raw JSON are re-encoded from the decoded value, made JSON-safe; the others
    keep their Python value, so a NaN decision id becomes "nan" as `str()` makes it there.
    """
    empty = _EMPTY[name]
    if type(subject) is not dict:
        try:
            subject = json.loads(subject)
        except json.JSONDecodeError:
            return empty
        except RecursionError:
            return _Unreadable("nested too deeply")
        except (ValueError, TypeError) as exc:  # e.g. an integer of more than 4300 digits
            return _Unreadable(str(exc) or type(exc).__name__)
        if type(subject) is not dict:
            return empty
    raw = _RAW_FIELDS[name]
    values: dict[str, Any] = {}
    for key in empty.__struct_fields__:
        if key not in subject:
            continue
        value = subject[key]
        if key in raw:
            try:
                value = msgspec.Raw(_encode(_json_safe(value)))
            except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
                value = _NULL
        elif type(value) is str:
            value = _json_safe(value)
        values[key] = value
    return type(empty)(**values)


def _read(path: str, start: int, end: int, now_ms: int, max_age_ms: int, seed: int) -> Scan:
    return Scanner(now_ms=now_ms, max_age_ms=max_age_ms, seed=seed).read_range(path, start, end)


def _scan_worker(path: str, start: int, end: int, now_ms: int, max_age_ms: int, seed: int) -> Scan:
    """What the worker process runs (its own name, so tests can make it die)."""
    return _read(path, start, end, now_ms, max_age_ms, seed)


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
        (os.cpu_count() or 1) > 1 and threading.active_count() == 1 and "fork" in _start_methods()
    )


def jobs_from_env() -> int | None:
    """PLAUDIT_EXPORT_JOBS: 2 reads a large file with a worker process, 1 in one process;
    unset, empty or `auto` gives None (decide by `idle_core`). Anything else counts as 1."""
    raw = os.environ.get("PLAUDIT_EXPORT_JOBS", "").strip().lower()
    if raw in ("", "auto"):
        return None
    try:
        return 2 if int(raw) >= 2 else 1
    except ValueError:
        return 1


def idle_core() -> bool:
    """Whether a second core looks free: the 1-minute load average leaves at least half a core
    unused. A worker on a busy machine only adds the cost of handing its records over."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average (e.g. Windows): stay in one process
        return False
    return load < (os.cpu_count() or 1) - 0.5


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
    if parallel is None:
        jobs = jobs_from_env()
        use_pool = (
            size >= PARALLEL_MIN_BYTES
            and (jobs == 2 or (jobs is None and idle_core()))
            and can_fork()
        )
    else:
        use_pool = parallel and "fork" in _start_methods()
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
        except (BrokenProcessPool, Exception):
            # The worker died (killed, out of memory) or failed: read its half here instead,
            # where a real error surfaces as it would without a worker.
            second = _read(path, mid, size, now_ms, max_age_ms, seed)
    return [first, second]
