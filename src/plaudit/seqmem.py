"""seq_mem.jsonl interop: stream rows in (quarantining bad lines), write them back out.

A row is ClickHouse JSONEachRow with `ts_ms`, `dur_us`, `ok`, `session_id`, `event_id`,
`content_hash`, `name` and `subject` (a JSON-encoded string or an object). The event's type is
`name`, its id `event_id`, its payload the decoded subject. `dur_us`, `ok`, `content_hash` and
how the subject was encoded go to the event's `meta`, so an export reproduces the row.

A line that repeats an earlier line of the same file exactly (same event id, same content) is
not a new event: the log is idempotent by id. It is still part of the file, and a summary of
the file counts it, so the import keeps it as a *repeat record* (`REPEAT`) at its place in the
log: its own event, whose payload names the repeated event and carries its payload. Readers
that count lines (the `signals` projection) fold it as the line it was; `export_rows` writes
the line back. Its id is derived from the repeated event's id and how many repeats of it the
file held before it, so importing the same file again adds nothing.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import msgspec
import numpy as np

from plaudit.errors import ValidationError
from plaudit.events import Event, Prepared, encode_json, prepare
from plaudit.ids import now_ms
from plaudit.store.log import EventLog
from plaudit.store.view import QuarantinedLine

MAX_LINE_BYTES = 2 << 20
BATCH = 5000
RAW_KEEP = 4096
#: The type of a repeat record: `{"of": event id, "type": its type, "repeat": k, "payload":
#: its payload}`, with the repeated event's time, session, source and meta.
REPEAT = "plaudit.log.repeat.v1"


class SeqMemRow(msgspec.Struct):
    ts_ms: int
    name: str
    event_id: str
    session_id: str = ""
    dur_us: int | None = None
    ok: bool | None = None
    content_hash: str | None = None
    subject: str | dict[str, Any] | None = None
    # Not part of seq's format: written only for events that did not come from seq_mem.
    source: str = "seq_mem"


class ImportReport(msgspec.Struct):
    file: str
    lines: int = 0
    #: Lines now in the log, counting `repeats`.
    imported: int = 0
    #: Of those, lines that repeat an earlier line of the file exactly, kept as repeat records.
    repeats: int = 0
    duplicates: int = 0
    quarantined: int = 0
    blank: int = 0
    seconds: float = 0.0
    #: False when not one line was valid (all quarantined, or none at all): a failed import,
    #: however many lines the quarantine kept. `problem` then says which.
    ok: bool = True
    problem: str | None = None

    def judge(self) -> None:
        valid = self.imported + self.duplicates
        if valid:
            self.ok, self.problem = True, None
        elif self.quarantined:
            every = "the only line" if self.quarantined == 1 else f"all {self.quarantined} lines"
            self.ok, self.problem = False, f"no valid line: {every} went to quarantine"
        else:
            self.ok, self.problem = False, "no events: the file is empty or blank"


_decoder = msgspec.json.Decoder(SeqMemRow)
_any_decoder = msgspec.json.Decoder()


def row_to_event(row: SeqMemRow) -> Event:
    meta: dict[str, Any] = {}
    if row.dur_us is not None:
        meta["dur_us"] = row.dur_us
    if row.ok is not None:
        meta["ok"] = row.ok
    if row.content_hash is not None:
        meta["content_hash"] = row.content_hash
    subject = row.subject
    payload: dict[str, Any]
    if subject is None:
        payload, meta["subject"] = {}, "null"
    elif isinstance(subject, dict):
        payload, meta["subject"] = subject, "object"
    else:
        try:
            decoded = _any_decoder.decode(subject)
        except msgspec.DecodeError:
            decoded = None
        except RecursionError:
            raise ValidationError("subject", "is JSON nested too deeply to import") from None
        if isinstance(decoded, dict):
            payload = decoded  # the common case: a JSON-encoded object
        else:
            payload, meta["subject"] = {"text": subject}, "text"
    return Event(
        id=row.event_id,
        type=row.name,
        ts_ms=row.ts_ms,
        session_id=row.session_id,
        source=row.source,
        payload=payload,
        meta=meta,
    )


def repeat_of(e: Event, k: int) -> Event:
    """The repeat record of the `k`-th exact repeat (k >= 1) of `e` in one file."""
    digest = hashlib.sha256(f"{e.id}\x00{k}".encode()).hexdigest()[:40]
    return Event(
        id=f"rep-{digest}",
        type=REPEAT,
        ts_ms=e.ts_ms,
        session_id=e.session_id,
        source=e.source,
        payload={"of": e.id, "type": e.type, "repeat": k, "payload": e.payload},
        meta=e.meta,
    )


def repeated(e: Event) -> Event:
    """The event a repeat record repeats (itself for any other event)."""
    p = e.payload
    if e.type != REPEAT or not isinstance(p.get("payload"), dict):
        return e
    return Event(
        id=str(p.get("of")),
        type=str(p.get("type")),
        ts_ms=e.ts_ms,
        session_id=e.session_id,
        source=e.source,
        payload=p["payload"],
        meta=e.meta,
    )


def event_to_row(e: Event) -> dict[str, Any]:
    e = repeated(e)
    meta = e.meta
    kind = meta.get("subject")
    subject: Any
    if kind == "object":
        subject = e.payload
    elif kind == "text":
        subject = e.payload.get("text", "")
    elif kind == "null":
        subject = None
    else:
        subject = encode_json(e.payload)
    content_hash = meta.get("content_hash")
    if content_hash is None:
        content_hash = hashlib.sha256(encode_json(e.payload).encode()).hexdigest()
    row = {
        "ts_ms": e.ts_ms,
        "dur_us": meta.get("dur_us", 0),
        "ok": meta.get("ok", True),
        "session_id": e.session_id,
        "event_id": e.id,
        "content_hash": content_hash,
        "name": e.type,
        "subject": subject,
    }
    if e.source != "seq_mem":
        row["source"] = e.source
    return row


def iter_lines(f: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, too_long). Never reads more than `limit` bytes of one line."""
    n = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # discard the rest of the oversize line
                more = f.readline(1 << 20)
                if not more or more.endswith(b"\n"):
                    break
            yield n, line[:RAW_KEEP], True
            continue
        yield n, line, False


def _why_undecodable(line: bytes, exc: Exception) -> ValidationError:
    """The most useful reason a line did not decode: NUL, bad UTF-8, else the JSON error."""
    nul = line.find(b"\x00")
    if nul >= 0:
        return ValidationError("line", f"contains a NUL byte at byte {nul}")
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as err:
        return ValidationError("line", f"invalid UTF-8 at byte {err.start}")
    text = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        if text.startswith("Expected `object`, got ") and " - at " not in text:
            return ValidationError("line", f"is not a JSON object ({text[9:]})")
        return ValidationError("row", text)
    return ValidationError("line", f"malformed JSON: {text}")


def parse_line(line: bytes) -> Event:
    """Decode one line or raise ValidationError saying why it cannot be imported."""
    try:
        row = _decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # incl. msgspec.ValidationError
        raise _why_undecodable(line, exc) from None
    except RecursionError:
        raise ValidationError("line", "is JSON nested too deeply to import") from None
    return row_to_event(row)


class _SeenIds:
    """The event ids of a file so far, as 64-bit hashes in sorted numpy arrays (8 bytes an id,
    where a Python set of them costs about 80): a few levels, each at most half the size of
    the one before, so merging costs O(n log n) in all. A hash collision only makes a line
    be written in a run of its own; whether it repeats anything is the log's answer."""

    def __init__(self) -> None:
        self.levels: list[np.ndarray] = []

    def add(self, ids: list[str]) -> np.ndarray:
        """Whether each id occurred before: earlier in `ids`, or in an earlier call."""
        hashes = np.fromiter((hash(i) for i in ids), dtype=np.int64, count=len(ids))
        unique, first = np.unique(hashes, return_index=True)
        seen = np.ones(len(ids), dtype=bool)
        seen[first] = False
        for level in self.levels:
            pos = np.minimum(np.searchsorted(level, hashes), level.size - 1)
            seen |= level[pos] == hashes
        self.levels.append(unique)
        while len(self.levels) > 1 and 2 * self.levels[-1].size >= self.levels[-2].size:
            last = self.levels.pop()
            self.levels[-1] = np.union1d(self.levels[-1], last)
        return seen


class _Batch:
    """Lines parsed and not yet written, in file order. A line whose event id occurred earlier
    in the file may be an exact repeat: such lines are written in runs of their own, so each
    repeat record lands at the line's place in the log."""

    def __init__(self, log: EventLog, report: ImportReport) -> None:
        self.log = log
        self.report = report
        self.pending: list[tuple[int, Prepared, bool]] = []
        self.bad: list[tuple[int, str, bytes]] = []
        self.seen = _SeenIds()
        self.repeats: dict[str, int] = {}  # event id -> its repeats so far

    def add(self, line_no: int, prepared: Prepared) -> None:
        self.pending.append((line_no, prepared, False))

    def quarantine(self, line_no: int, reason: str, raw: bytes) -> None:
        self.bad.append((line_no, reason, raw))
        self.report.quarantined += 1

    def flush(self) -> None:
        if not self.pending and not self.bad:
            return
        pending = self.pending
        maybe = self.seen.add([p.event.id for _, p, _ in pending])
        pending = [(n, p, bool(m)) for (n, p, _), m in zip(pending, maybe, strict=True)]
        with self.log.writer() as w:
            start = 0
            while start < len(pending):
                end = start + 1
                while end < len(pending) and pending[end][2] == pending[start][2]:
                    end += 1
                self._write(w, pending[start:end])
                start = end
            w.quarantine_add(
                self.report.file, [(n, r, raw[:RAW_KEEP]) for n, r, raw in self.bad], now_ms()
            )
        self.pending = []
        self.bad = []

    def _write(self, w: Any, run: list[tuple[int, Prepared, bool]]) -> None:
        report = self.report
        result = w.append_prepared([p for _, p, _ in run], on_conflict="skip")
        records: list[tuple[int, Prepared]] = []
        for (line_no, p, maybe), r in zip(run, result.results, strict=True):
            if r.status == "appended":
                report.imported += 1
            elif r.status == "present" and maybe:
                records.append((line_no, self._record(line_no, p)))
            elif r.status == "present":
                report.duplicates += 1
            else:
                self.quarantine(
                    line_no,
                    f"event_id {p.event.id!r} is already committed with different content",
                    p.body(),
                )
        records = [(n, p) for n, p in records if p is not None]
        if records:
            result = w.append_prepared([p for _, p in records], on_conflict="skip")
            for r in result.results:
                if r.status == "appended":
                    report.imported += 1
                    report.repeats += 1
                else:  # recorded by an earlier import of the same lines
                    report.duplicates += 1

    def _record(self, line_no: int, p: Prepared) -> Prepared | None:
        e = p.event
        k = self.repeats[e.id] = self.repeats.get(e.id, 0) + 1
        try:
            return prepare(repeat_of(e, k), from_json=True)
        except ValidationError as exc:
            reason = f"an exact repeat of an earlier line that cannot be recorded: {exc}"
            self.quarantine(line_no, reason, p.body())
            return None


def import_file(
    log: EventLog,
    path: str | os.PathLike[str],
    *,
    progress: Callable[[int], None] | None = None,
    batch: int = BATCH,
) -> ImportReport:
    """Stream a seq_mem.jsonl file into the log. Bad lines go to quarantine; nothing aborts.
    Exact repeats of earlier lines are kept as repeat records (see the module's docstring)."""
    started = time.perf_counter()
    name = str(path)
    report = ImportReport(file=name)
    pending = _Batch(log, report)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; opened apart to report a clean error
    except OSError as exc:
        raise ValidationError("file", f"cannot read {name}: {exc.strerror or exc}") from None
    with f:
        for line_no, line, too_long in iter_lines(f):
            report.lines += 1
            if progress is not None:
                progress(len(line))
            if too_long:
                pending.quarantine(line_no, f"line exceeds {MAX_LINE_BYTES} bytes", line)
                continue
            if not line.strip():
                report.blank += 1
                continue
            try:
                pending.add(line_no, prepare(parse_line(line), from_json=True))
            except ValidationError as exc:
                pending.quarantine(line_no, str(exc), line)
            except Exception as exc:  # a line plaudit did not foresee still must not stop it
                pending.quarantine(line_no, f"cannot import: {type(exc).__name__}: {exc}", line)
            if len(pending.pending) >= batch:
                pending.flush()
        pending.flush()
    report.seconds = time.perf_counter() - started
    report.judge()
    return report


def quarantined(
    log: EventLog, *, file: str | None = None, limit: int = 100
) -> list[QuarantinedLine]:
    with log.reading() as view:
        return view.quarantined(file=file, limit=limit)


_row_encoder = msgspec.json.Encoder()


def export_rows(log: EventLog, out: IO[bytes], *, types: Sequence[str] | None = None) -> int:
    """Write events as seq_mem rows; returns how many."""
    n = 0
    buf: list[bytes] = []
    for e in log.replay(types=types):
        buf.append(_row_encoder.encode(event_to_row(e)))
        n += 1
        if len(buf) >= 10_000:
            out.write(b"\n".join(buf) + b"\n")
            buf.clear()
    if buf:
        out.write(b"\n".join(buf) + b"\n")
    return n
