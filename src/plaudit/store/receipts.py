"""Receipts: the log's signed promise that queued events will be sequenced as they were sent.

An `enqueue` that is acknowledged before its events have positions (PostgreSQL's intake)
returns a receipt signed with the log's key: which ids, with which content digests, were taken
in, and when. It is the promise Certificate Transparency's signed certificate timestamps make.
Later, `plaudit log check-receipt` (`EventLog.check_receipt`) proves that each event was
sequenced with that content, or shows that it was dropped or changed: a database user who
deletes or edits a queued event can no longer do so without trace.

A receipt is a C2SP signed note (https://c2sp.org/signed-note), signed by the log's key name:

    plaudit-receipt v1
    plaudit/<log fingerprint>
    time-ms <when the intake took the events in>
    <content digest, 64 hex digits> <event id>     one line per event, in call order
    <empty line>
    — plaudit/<fingerprint> <base64(key ID || signature)>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from plaudit.errors import ValidationError

if TYPE_CHECKING:
    from plaudit.events import Prepared
    from plaudit.store.keys import LogKey
    from plaudit.store.view import LogView

HEADER = "plaudit-receipt v1"


class Receipt(msgspec.Struct, frozen=True):
    log: str
    time_ms: int
    events: list[tuple[str, str]]  # (id, content digest hex)
    note: str


class ReceiptEvent(msgspec.Struct, frozen=True):
    id: str
    status: Literal["sequenced", "pending", "changed", "dropped"]
    seq: int | None = None


class ReceiptReport(msgspec.Struct):
    ok: bool
    message: str
    events: list[ReceiptEvent] = msgspec.field(default_factory=list)


def sign_receipt(key: LogKey, prepared: Sequence[Prepared], time_ms: int) -> str:
    """The signed note for `prepared`, taken in at `time_ms`."""
    from plaudit.store.checkpoints import origin_of
    from plaudit.store.signed_note import ED25519, Signature, format_note, key_id

    origin = origin_of(key.fingerprint)
    lines = [HEADER, origin, f"time-ms {time_ms}"]
    lines += [f"{p.content_digest.hex()} {p.event.id}" for p in prepared]
    text = "".join(f"{line}\n" for line in lines)
    sig = Signature(origin, key_id(origin, ED25519, key.public_key), key.sign(text.encode()))
    return format_note(text, [sig]).decode()


def open_receipt(note: str | bytes, public_key: bytes) -> Receipt:
    """A receipt checked against the log's key: ValidationError if malformed, IntegrityError
    if not signed by that key."""
    from plaudit.store.checkpoints import verifier_key
    from plaudit.store.keys import fingerprint
    from plaudit.store.signed_note import open_note

    text_in = note.decode("utf-8", "replace") if isinstance(note, bytes) else note
    opened = open_note(text_in, verifier_key(public_key), where="receipt")
    lines = opened.text.splitlines()
    if len(lines) < 4 or lines[0] != HEADER or lines[1] != f"plaudit/{fingerprint(public_key)}":
        raise ValidationError("receipt", "is not a plaudit receipt of this log")
    if not lines[2].startswith("time-ms ") or not lines[2][8:].isdigit():
        raise ValidationError("receipt", "line 3 should be 'time-ms <decimal>'")
    events = []
    for i, line in enumerate(lines[3:], 4):
        digest, sep, id_ = line.partition(" ")
        if not sep or len(digest) != 64 or not id_:
            raise ValidationError("receipt", f"line {i} should be '<digest> <id>'")
        events.append((id_, digest))
    return Receipt(fingerprint(public_key), int(lines[2][8:]), events, text_in)


def check_receipt(
    view: LogView, receipt: Receipt, pending: set[str] | None = None
) -> ReceiptReport:
    """What became of each event of a receipt: sequenced with its content (ok), still pending
    in the intake, changed (another content under its id: tampering) or dropped."""
    found = view.existing(id_ for id_, _ in receipt.events)
    out: list[ReceiptEvent] = []
    for id_, digest in receipt.events:
        hit = found.get(id_)
        if hit is not None:
            status: Literal["sequenced", "changed"] = (
                "sequenced" if hit[0].hex() == digest else "changed"
            )
            out.append(ReceiptEvent(id_, status, hit[1]))
        elif pending is not None and id_ in pending:
            out.append(ReceiptEvent(id_, "pending"))
        else:
            out.append(ReceiptEvent(id_, "dropped"))
    bad = [e for e in out if e.status in ("changed", "dropped")]
    waiting = [e for e in out if e.status == "pending"]
    if bad:
        first = bad[0]
        message = (
            f"{len(bad)} of {len(out)} events were not sequenced as received: {first.id!r} was "
            f"{first.status}" + (" (tampering)" if first.status == "changed" else "")
        )
    elif waiting:
        message = f"{len(waiting)} of {len(out)} events are still waiting to be sequenced"
    else:
        message = f"all {len(out)} events were sequenced as received"
    return ReceiptReport(not bad and not waiting, message, out)


__all__ = [
    "Receipt",
    "ReceiptEvent",
    "ReceiptReport",
    "check_receipt",
    "open_receipt",
    "sign_receipt",
]
