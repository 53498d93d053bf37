"""`plaudit log ...` and `plaudit rebuild`."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click
import msgspec

from plaudit.cli._common import (
    SuggestingGroup,
    db_option,
    echo_json,
    fail,
    json_option,
    open_store,
)
from plaudit.cli._progress import counting, progress_bar
from plaudit.errors import ValidationError


@click.group(cls=SuggestingGroup)
def log() -> None:
    """The append-only, hash-chained event log."""


@log.command()
@db_option
@click.argument("event_json", required=False)
@click.option(
    "--queue",
    is_flag=True,
    help="Return once the events are durable in the intake, before they have positions "
    "(PostgreSQL; the same as a plain append on SQLite).",
)
@json_option
def append(db: str | None, event_json: str | None, queue: bool, as_json: bool) -> None:
    """Append events given as JSON: one object, an array, or JSON lines on stdin.

    Each event has `type` and `payload`, and optionally `id`, `ts_ms`, `session_id`, `source`.
    """
    from plaudit.inputs import STDIN, as_list, load, parse

    if event_json is not None:
        events = as_list(parse(event_json, what="input"))
    else:
        events = as_list(load(STDIN, what="input"))
    with open_store(db, create=True) as p:
        result = p.log.enqueue_batch(events) if queue else p.log.append_batch(events)
    if as_json:
        echo_json(
            {
                "appended": result.appended,
                "present": result.present,
                "queued": result.queued,
                "results": result.results,
            }
        )
    else:
        for r in result.results:
            click.echo(f"{r.status:9} {'-' if r.seq is None else r.seq:>8}  {r.id}")


@log.command("import")
@db_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@json_option
def import_(db: str | None, file: str, as_json: bool) -> None:
    """Stream a seq_mem.jsonl file into the log; bad lines go to quarantine."""
    from plaudit.seqmem import import_file

    with open_store(db, create=True) as p, progress_bar("bytes") as update:
        advance = counting(update, "importing", os.path.getsize(file))
        report = import_file(p.log, file, progress=advance)
    if as_json:
        echo_json(report)
    else:
        repeats = f" ({report.repeats} exact repeats of earlier lines)" if report.repeats else ""
        click.echo(
            f"{file}: {report.imported} imported{repeats}, {report.duplicates} duplicate, "
            f"{report.quarantined} quarantined ({report.lines} lines, {report.seconds:.2f}s)"
        )
    if not report.ok:
        click.echo(f"error: {file}: {report.problem}; nothing was imported", err=True)
    if report.quarantined:
        click.echo("see `plaudit log quarantine` for the reasons", err=True)
    if not report.ok:
        raise click.exceptions.Exit(1)


@log.command("export")
@db_option
@click.option(
    "--format", "fmt", type=click.Choice(["seq-mem", "jsonl"]), default="seq-mem", show_default=True
)
@click.option("--type", "types", multiple=True, help="Only event types with this prefix.")
@click.option("-o", "--output", default="-", help="File to write atomically, or - for stdout.")
def export(db: str | None, fmt: str, types: tuple[str, ...], output: str) -> None:
    """Write the log out as seq_mem rows (default) or as full events."""
    from plaudit.files import atomic_write
    from plaudit.seqmem import export_rows

    with open_store(db) as p:

        def write(f: Any) -> int:
            if fmt == "seq-mem":
                return export_rows(p.log, f, types=types or None)
            n = 0
            enc = msgspec.json.Encoder()
            for e in p.log.replay(types=types or None):
                f.write(enc.encode(e) + b"\n")
                n += 1
            return n

        if output == "-":
            n = write(sys.stdout.buffer)
            sys.stdout.flush()
        else:
            try:
                n = atomic_write(output, write, what="output")
            except OSError as exc:
                raise ValidationError(
                    "output", f"cannot write {output}: {exc.strerror or exc}"
                ) from None
            click.echo(f"wrote {n} events to {output}", err=True)


def witness_option(f: Any) -> Any:
    return click.option(
        "--witness",
        "witness",
        multiple=True,
        metavar="DIR",
        help="A witness directory (repeatable; $PLAUDIT_WITNESS adds more).",
    )(f)


@log.command()
@db_option
@click.option("--against", metavar="DIGEST", help="An earlier `plaudit log head` digest.")
@click.option("--full", is_flag=True, help="Re-check everything, not only what is new.")
@witness_option
@json_option
def verify(
    db: str | None, against: str | None, full: bool, witness: tuple[str, ...], as_json: bool
) -> None:
    """Check the chain, the Merkle tree, the signed checkpoints and the witnesses.

    By default the check starts at the newest checkpoint an earlier verify confirmed, so it
    costs what is new; --full re-checks everything. Exit 1 naming the first bad position.
    """
    with open_store(db) as p:
        started = time.perf_counter()
        report = p.log.verify(against=against, full=full, witness=witness)
        seconds = time.perf_counter() - started
    if as_json:
        echo_json({**msgspec.to_builtins(report), "seconds": round(seconds, 3)})
    elif report.ok:
        extra = f", extends {report.against}" if report.against else ""
        start = report.from_checkpoint
        if start is None:
            scope = f"{report.checked} events verified"
        elif start == report.length:
            scope = f"nothing new since the checkpoint of {start} events verified earlier"
        else:
            scope = (
                f"events {start + 1}..{report.length} checked, from the checkpoint of {start} "
                "verified earlier (--full re-checks everything)"
            )
        witnesses = [w for w in report.witnesses if w.get("size") is not None]
        seen = f", consistent with {len(witnesses)} witness(es)" if witnesses else ""
        click.echo(f"OK: {scope}{extra}{seen} (head {report.head})")
    else:
        click.echo(f"FAILED at position {report.first_bad}: {report.reason}")
    if not report.ok:
        raise click.exceptions.Exit(1)


@log.command()
@db_option
@json_option
def key(db: str | None, as_json: bool) -> None:
    """Print the public key that signs this log's checkpoints, and its fingerprint."""
    with open_store(db) as p:
        info = p.log.key_info()
    if as_json:
        echo_json(info)
    else:
        click.echo(f"fingerprint {info.fingerprint}\npublic_key {info.public_key}")
        click.echo(info.public_pem.rstrip("\n"))


@log.command()
@db_option
@witness_option
@json_option
def checkpoint(db: str | None, witness: tuple[str, ...], as_json: bool) -> None:
    """Sign a checkpoint of the log now, and copy it to every witness."""
    from plaudit.cli._common import resolve
    from plaudit.core import Plaudit

    with Plaudit.open(resolve(db), witness=witness) as p:
        ck = p.log.checkpoint()
    if as_json:
        echo_json({"size": ck.size, "root": ck.root.hex(), "time_ms": ck.time_ms, "log": ck.log})
    else:
        click.echo(ck.to_text(), nl=False)


@log.command()
@db_option
@click.argument("event_id")
@click.option("--out", "out", default="-", metavar="FILE", help="Where the bundle goes (- stdout).")
def prove(db: str | None, event_id: str, out: str) -> None:
    """Write a self-contained proof that EVENT_ID is in the signed log.

    Anyone can check it with `plaudit log check-proof FILE`, with no store, or by hand
    (docs/proofs.md gives the steps).
    """
    with open_store(db) as p:
        data = p.log.prove(event_id)
    _write_out(out, data)


@log.command()
@db_option
@click.argument("old_checkpoint", metavar="OLD_CHECKPOINT_FILE")
@click.option("--out", "out", default=None, metavar="FILE", help="Also write the proof bundle.")
@json_option
def consistency(db: str | None, old_checkpoint: str, out: str | None, as_json: bool) -> None:
    """Prove that the log now extends an old checkpoint (a witness copy, say): exit 1 if it
    does not, naming why."""
    from plaudit.store.proving import consistency_with_file

    with open_store(db) as p:
        data, report = consistency_with_file(p.log, old_checkpoint)
    if out is not None:
        _write_out(out, data)
    if as_json:
        echo_json(report)
    elif report["ok"]:
        click.echo(f"OK: {report['message']}")
    else:
        click.echo(f"FAILED ({report['failed']}): {report['message']}")
    if not report["ok"]:
        raise click.exceptions.Exit(1)


def _write_out(out: str, data: bytes) -> None:
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    from pathlib import Path

    from plaudit.store.atomic import fsync_dir, write_temp

    target = Path(out)
    try:
        tmp = write_temp(target.parent, target.name, data)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}", 2) from None
    click.echo(f"wrote {out}", err=True)


@log.command()
@db_option
@json_option
def head(db: str | None, as_json: bool) -> None:
    """Print the digest of the log at its current length."""
    with open_store(db) as p:
        h = p.log.head()
    if as_json:
        echo_json({"length": h.length, "hash": h.hash, "digest": h.digest})
    else:
        click.echo(h.digest)


@log.command()
@db_option
@click.option("-n", "count", default=10, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--type", "types", multiple=True, help="Only event types with this prefix.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events.")
@json_option
def tail(db: str | None, count: int, types: tuple[str, ...], follow: bool, as_json: bool) -> None:
    """Show the newest events; one whose payload does not decode is shown as CORRUPTED.

    Exits 5 when it showed a corrupted event (`plaudit log verify` checks the whole chain)."""
    from plaudit.logview import CorruptEvent, read
    from plaudit.logview import tail as tail_events

    enc = msgspec.json.Encoder()
    corrupted = 0

    def show(e: Any) -> None:
        nonlocal corrupted
        if isinstance(e, CorruptEvent):
            corrupted += 1
        if as_json:
            click.echo(enc.encode(e).decode())
        elif isinstance(e, CorruptEvent):
            click.echo(f"{e.seq:>8} CORRUPTED {e.reason}")
        else:
            payload = msgspec.json.encode(e.payload).decode()
            if len(payload) > 100:
                payload = payload[:97] + "..."
            click.echo(f"{e.seq:>8} {e.ts_ms} {e.type} {e.session_id} {payload}")

    with open_store(db) as p:
        events = tail_events(p.log, count, types=types or None)
        for e in events:
            show(e)
        last = events[-1].seq if events else p.log.head().length
        while follow:
            time.sleep(0.5)
            for e in read(p.log, last, types=types or None):
                show(e)
                last = e.seq
    if corrupted:
        click.echo(
            f"error: {corrupted} event{'s' if corrupted > 1 else ''} shown as CORRUPTED: the "
            "stored payload does not decode; run `plaudit log verify`",
            err=True,
        )
        raise click.exceptions.Exit(5)


@log.command()
@db_option
@json_option
def stats(db: str | None, as_json: bool) -> None:
    """Length, head, sessions, time range and counts by event type."""
    with open_store(db) as p:
        s = p.log.stats()
    if as_json:
        echo_json(s)
        return
    click.echo(f"backend     {s.backend}")
    click.echo(f"events      {s.length}")
    click.echo(f"head        {s.head}")
    click.echo(f"sessions    {s.sessions}")
    if s.first_ts_ms is not None:
        fmt = "%Y-%m-%d %H:%M:%S"
        first = time.strftime(fmt, time.gmtime(s.first_ts_ms / 1000))
        last = time.strftime(fmt, time.gmtime((s.last_ts_ms or 0) / 1000))
        click.echo(f"time range  {first} .. {last} UTC")
    click.echo(f"quarantined {s.quarantined}")
    if s.by_type:
        click.echo("by type:")
        width = max(len(t) for t in s.by_type)
        for t, n in s.by_type.items():
            click.echo(f"  {t:<{width}}  {n}")


@log.command()
@db_option
@click.option("--file", "file", default=None, help="Only lines from this file.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 1_000_000))
@json_option
def quarantine(db: str | None, file: str | None, limit: int, as_json: bool) -> None:
    """List imported lines that were rejected, with file, line number and reason."""
    from plaudit.seqmem import quarantined

    with open_store(db) as p:
        rows = quarantined(p.log, file=file, limit=limit)
    if as_json:
        echo_json({"quarantine": rows})
        return
    if not rows:
        click.echo("quarantine is empty")
    for q in rows:
        click.echo(f"{q.file}:{q.line_no}: {q.reason}")


@log.command("check-proof")
@click.argument("file", metavar="FILE")
@click.option("--key", "key", metavar="PUBKEY", help="Trusted public key file (PEM or hex).")
@json_option
def check_proof(file: str, key: str | None, as_json: bool) -> None:
    """Check a proof bundle from `plaudit log prove`, without any store.

    Exits 0 when the event is in the signed log, 1 otherwise, saying what failed: the leaf,
    the path, the root or the signature. Without --key the bundle's own key is used; pin the
    log's key (from `plaudit log key`) to know who signed.
    """
    from plaudit.errors import PlauditError
    from plaudit.store.proofs import check_proof_file

    try:
        report = check_proof_file(file, key_path=key)
    except PlauditError as exc:  # an unreadable bundle or key: the check failed
        raise fail(str(exc)) from None
    if as_json:
        echo_json(report)
    elif report.ok:
        click.echo(f"OK: {report.message}")
        if not report.key_pinned:
            click.echo(
                f"note: key {report.fingerprint} was taken from the bundle; pass --key to pin "
                "the log's key",
                err=True,
            )
    else:
        click.echo(f"FAILED ({report.failed}): {file}: {report.message}")
    if not report.ok:
        raise click.exceptions.Exit(1)


@click.command()
@db_option
@json_option
def init(db: str | None, as_json: bool) -> None:
    """Create an empty store at --db (a SQLite file, or a PostgreSQL schema), or confirm one.

    Commands that write create their store on first use; this does it up front, so that
    every command that only reads can be pointed at it."""
    from plaudit.config import describe_store

    with open_store(db, create=True) as p:
        where = describe_store(p.backend)
        length = p.log.head().length
    if as_json:
        echo_json({"store": where, "created": p.created, "events": length})
    elif not p.created:
        click.echo(f"a plaudit store already exists at {where} ({length} events); left as it was")


@click.command()
@db_option
@click.argument("names", nargs=-1, metavar="[PROJECTION]...")
@json_option
def rebuild(db: str | None, names: tuple[str, ...], as_json: bool) -> None:
    """Drop every projection (or the ones named) and rebuild it by replaying the log."""
    with open_store(db) as p:
        counts = p.log.rebuild(names or None)
    if as_json:
        echo_json(counts)
    elif not counts:
        click.echo("no projections registered")
    else:
        for name, n in counts.items():
            click.echo(f"rebuilt {name} from {n} events")


__all__ = ["init", "log", "rebuild"]
