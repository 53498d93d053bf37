"""Backend-independent backup: every log event with its position and chain hash, as JSON lines.

Restore re-appends the events in order and checks that each one lands at the same position with
the same hash, so a restored store is provably the same log; it runs in one transaction, so a
truncated or altered backup changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.events import Event
from plaudit.files import atomic_write
from plaudit.ids import now_ms

if TYPE_CHECKING:
    from plaudit.core import Plaudit

FORMAT = "plaudit.backup.v1"
_RECHAIN_HINT = (
    "; a backup of a damaged log goes into a new store with "
    "`plaudit --db NEW ledger restore --rechain FILE`"
)
_CHUNK = 5000


class BackupLine(msgspec.Struct, forbid_unknown_fields=True):
    seq: int
    id: str
    type: str
    ts_ms: int
    session_id: str
    source: str
    payload: dict[str, Any]
    meta: dict[str, Any]
    hash: str


class BackupHeader(msgspec.Struct):
    format: str
    length: int
    head: str
    created_ms: int = 0
    backend: str = ""


def backup(p: Plaudit, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the whole log (all areas, not only the ledger) to `path` atomically."""
    enc = msgspec.json.Encoder()

    def write(f: IO[bytes]) -> int:
        n = 0
        with p.log.reading() as view:
            seq, h = view.head()
            header = BackupHeader(FORMAT, seq, f"{seq}:{h.hex()}", now_ms(), p.dialect)
            f.write(enc.encode(header) + b"\n")
            for ev in view.scan(until=seq):
                f.write(enc.encode(ev) + b"\n")
                n += 1
        return n

    n = atomic_write(path, write)
    return {"file": str(path), "events": n, "head": p.log.head().digest}


def _read_lines(path: Path, *, strict: bool = True) -> tuple[BackupHeader, list[BackupLine]]:
    """Every line, checked. `strict=False` (rechain) accepts positions with gaps and a length
    that differs from the header: what a backup of a damaged log holds."""
    dec_header = msgspec.json.Decoder(BackupHeader)
    dec = msgspec.json.Decoder(BackupLine)
    where = str(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ValidationError("file", f"cannot read: {exc.strerror or exc}", where=where) from None
    with f:
        first = f.readline()
        try:
            header = dec_header.decode(first)
        except msgspec.DecodeError as exc:
            raise ValidationError(
                "line 1", f"not a plaudit backup header: {exc}", where=where
            ) from None
        if header.format != FORMAT:
            raise ValidationError(
                "line 1", f"format {header.format!r} is not {FORMAT}", where=where
            )
        lines: list[BackupLine] = []
        for no, raw in enumerate(f, start=2):
            if not raw.strip():
                continue
            if not raw.endswith(b"\n"):
                raise ValidationError(f"line {no}", "truncated (no line end)", where=where)
            try:
                line = dec.decode(raw)
            except msgspec.DecodeError as exc:
                raise ValidationError(
                    f"line {no}", f"malformed event: {exc}", where=where
                ) from None
            if strict and line.seq != len(lines) + 1:
                raise ValidationError(
                    f"line {no}",
                    f"position {line.seq} where {len(lines) + 1} was expected{_RECHAIN_HINT}",
                    where=where,
                )
            lines.append(line)
    if strict and len(lines) != header.length:
        raise ValidationError(
            "file",
            f"holds {len(lines)} events but its header says {header.length} (truncated, or "
            f"taken from a damaged log){_RECHAIN_HINT}",
            where=where,
        )
    return header, lines


def restore(p: Plaudit, path: str | os.PathLike[str], *, rechain: bool = False) -> dict[str, Any]:
    """Re-append a backup into an empty store, or into one whose log is a prefix of it.

    `rechain=True` is the way forward from a damaged log: its backup (which `restore` refuses,
    since its hashes do not check out) goes into an empty store as new events with a fresh
    chain; where the old chain first stopped matching is reported under `damage`."""
    if rechain:
        return _rechain(p, Path(path))
    file = Path(path)
    header, lines = _read_lines(file)
    where = str(file)
    if p.log.head().length:
        from plaudit.ledger.integrity import log_verified

        outcome = log_verified(p)
        if not outcome.ok:
            raise ValidationError(
                "store",
                f"its log fails verification at position {outcome.first_bad}, so nothing "
                "restored into it could verify; restore into a new store instead "
                "(`plaudit --db NEW ledger restore FILE`)",
                where=where,
            )
    with p.log.writer() as w:
        head_seq, _ = w.head()
        if head_seq > len(lines):
            raise ValidationError(
                "store",
                f"holds {head_seq} events, more than the backup's {len(lines)}; restore into "
                "a new store instead (`plaudit --db NEW ledger restore FILE`)",
                where=where,
            )
        if head_seq:
            for seq, h in w.hashes(1, head_seq):
                if h.hex() != lines[seq - 1].hash:
                    raise ValidationError(
                        "store",
                        f"differs from the backup at position {seq}; restore into a new store "
                        "instead (`plaudit --db NEW ledger restore FILE`)",
                        where=where,
                    )
        todo = lines[head_seq:]
        for i in range(0, len(todo), _CHUNK):
            chunk = todo[i : i + _CHUNK]
            results = w.append_batch([_event(ln) for ln in chunk]).results
            for ln, r in zip(chunk, results, strict=True):
                if r.seq != ln.seq or r.status != "appended":
                    raise ValidationError(
                        f"event {ln.id}",
                        f"landed at {r.seq} ({r.status}), not {ln.seq}",
                        where=where,
                    )
            for seq, h in w.hashes(chunk[0].seq, chunk[-1].seq):
                if h.hex() != lines[seq - 1].hash:
                    raise ValidationError(
                        f"line {seq + 1}",
                        f"event at position {seq} does not match its recorded hash "
                        "(the backup was altered; a backup of a damaged log goes into a new "
                        "store with `restore --rechain`)",
                        where=where,
                    )
        end_seq, end_hash = w.head()
        got = f"{end_seq}:{end_hash.hex()}"
        if got != header.head:
            raise ValidationError(
                "file", f"re-appended events end at head {got}, not {header.head}", where=where
            )
    return {"file": where, "events": len(lines), "restored": len(todo), "head": header.head}


def _event(ln: BackupLine) -> Event:
    return Event(
        id=ln.id,
        type=ln.type,
        ts_ms=ln.ts_ms,
        session_id=ln.session_id,
        source=ln.source,
        payload=ln.payload,
        meta=ln.meta,
    )


def _rechain(p: Plaudit, file: Path) -> dict[str, Any]:
    from plaudit.ledger.amendments import LineChecker
    from plaudit.store.chain import GENESIS

    header, lines = _read_lines(file, strict=False)
    where = str(file)
    damage: dict[str, Any] = {"header_head": header.head, "header_length": header.length}
    # Which rows were edited, moved, or follow deleted ones, at their positions here: what the
    # audit needs to attribute a forged transaction to its own category (`amendments`).
    checker = LineChecker([ln.hash for ln in lines], [ln.seq for ln in lines], GENESIS)
    with p.log.writer() as w:
        head_seq, _ = w.head()
        if head_seq:
            raise ValidationError(
                "store",
                f"holds {head_seq} events; `restore --rechain` only fills an empty store "
                "(`plaudit --db NEW ledger restore --rechain FILE`)",
                where=where,
            )
        first_changed = None
        for i in range(0, len(lines), _CHUNK):
            chunk = lines[i : i + _CHUNK]
            prepared = p.log.prepare_all([_event(ln) for ln in chunk])
            for j, pr in enumerate(prepared):
                checker.check(i + j, pr.body())
            w.append_prepared(prepared)
            if first_changed is None:
                for (seq, h), ln in zip(w.hashes(i + 1, i + len(chunk)), chunk, strict=True):
                    if seq != ln.seq or h.hex() != ln.hash:
                        first_changed = seq
                        break
        if first_changed is None and len(lines) != header.length:
            first_changed = len(lines) + 1
        end_seq, end_hash = w.head()
    damage["first_changed_position"] = first_changed
    damage.update(checker.damage())
    return {
        "file": where,
        "events": len(lines),
        "restored": len(lines),
        "head": f"{end_seq}:{end_hash.hex()}",
        "damage": damage,
    }
