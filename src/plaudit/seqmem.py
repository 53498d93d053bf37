"""seq_mem.jsonl interop: stream rows in (quarantining bad lines), write them back out.

A row is ClickHouse JSONEachRow with `ts_ms`, `dur_us`, `ok`, `session_id`, `event_id`,
`content_hash`, `name` and `subject` (a JSON-encoded string or an object). The event's type is
`name`, its id `event_id`, its payload the decoded subject. `dur_us`, `ok`, `content_hash` and
how the subject was encoded go to the event's `meta`, so an export reproduces the row.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.events import Event, Prepared, encode_json, prepare
from plaudit.ids import now_ms
from plaudit.store.log import EventLog
from plaudit.store.view import QuarantinedLine

MAX_LINE_BYTES = 2 << 20
BATCH = 5000
RAW_KEEP = 4096


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
    imported: int = 0
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


def event_to_row(e: Event) -> dict[str, Any]:
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


def import_file(
    log: EventLog,
    path: str | os.PathLike[str],
    *,
    progress: Callable[[int], None] | None = None,
    batch: int = BATCH,
) -> ImportReport:
    """Stream a seq_mem.jsonl file into the log. Bad lines go to quarantine; nothing aborts."""
    started = time.perf_counter()
    name = str(path)
    report = ImportReport(file=name)
    pending: list[tuple[int, Prepared]] = []
    bad: list[tuple[int, str, bytes]] = []

    def flush() -> None:
        if not pending and not bad:
            return
        with log.writer() as w:
            if pending:
                result = w.append_prepared([p for _, p in pending], on_conflict="skip")
                for (line_no, p), r in zip(pending, result.results, strict=True):
                    if r.status == "appended":
                        report.imported += 1
                    elif r.status == "present":
                        report.duplicates += 1
                    else:
                        report.quarantined += 1
                        bad.append(
                            (
                                line_no,
                                f"event_id {p.event.id!r} is already committed "
                                "with different content",
                                p.body(),
                            )
                        )
            w.quarantine_add(name, [(n, r, raw[:RAW_KEEP]) for n, r, raw in bad], now_ms())
        pending.clear()
        bad.clear()

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
                bad.append((line_no, f"line exceeds {MAX_LINE_BYTES} bytes", line))
                report.quarantined += 1
                continue
            if not line.strip():
                report.blank += 1
                continue
            try:
                pending.append((line_no, prepare(parse_line(line), from_json=True)))
            except ValidationError as exc:
                bad.append((line_no, str(exc), line))
                report.quarantined += 1
            except Exception as exc:  # a line plaudit did not foresee still must not stop it
                bad.append((line_no, f"cannot import: {type(exc).__name__}: {exc}", line))
                report.quarantined += 1
            if len(pending) >= batch:
                flush()
        flush()
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
