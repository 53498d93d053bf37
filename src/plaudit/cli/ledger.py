"""`plaudit ledger ...`: the reward ledger from the shell, a thin layer over `plaudit.ledger`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import click

from plaudit.cli._common import SuggestingGroup, db_option, echo_json, json_option, open_store


def _config() -> str | None:
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if isinstance(ctx.obj, dict) and ctx.obj.get("ledger_config"):
            return ctx.obj["ledger_config"]
        ctx = ctx.parent
    return None


@contextmanager
def open_ledger(db: str | None, *, create: bool = False, config: Any = None) -> Iterator[Any]:
    from plaudit.ledger import Ledger

    with open_store(db, create=create) as p:
        yield Ledger(p, config if config is not None else _config())


def _loaded_config() -> Any:
    """The ledger config, for commands that check their input before opening a store."""
    from plaudit.ledger import load_config

    return load_config(_config())


@click.group(cls=SuggestingGroup)
@click.option(
    "--config",
    "config",
    default=None,
    metavar="FILE",
    envvar="PLAUDIT_LEDGER_CONFIG",
    help="Ledger config (TOML or JSON) merged over the defaults.",
)
@click.pass_context
def ledger(ctx: click.Context, config: str | None) -> None:
    """The reward ledger: an honest, tamper-evident score of agent behaviour."""
    ctx.ensure_object(dict)
    ctx.obj["ledger_config"] = config


sources_option = click.option(
    "--sources",
    "sources_dir",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="Memory-bank folder to re-read first (default: the configured reconcile.sources_dir).",
)


def _tx_line(t: Any) -> str:
    """One transaction: its date, points, log position (`#seq`, the order running totals
    follow), running total, whether it was cross-checked, category, source and action."""
    src = t.source or "-"
    mark = "✓" if t.verified else "?"
    return (
        f"{t.timestamp}  {t.points:+6d}  #{t.seq:<6} {t.running_total:>8}  {mark} "
        f"{t.category:<26} {src:<22} {t.action}"
    )


@ledger.command()
@db_option
@click.option("--category", "-c", required=True, help="A configured category.")
@click.option("--action", "-a", required=True, help="What the agent did.")
@click.option("--points", type=int, default=None, help="Default: the category's points.")
@click.option("--source", default=None, metavar="KIND:ID", help="e.g. mistake:m-12")
@click.option("--session", default=None, help="Default: the open session, if any.")
@click.option("--key", default=None, help="Idempotency key: a retry with it records once.")
@json_option
def record(
    db: str | None,
    category: str,
    action: str,
    points: int | None,
    source: str | None,
    session: str | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Record one reward or penalty (validated, cross-referenced, checksummed)."""
    with open_ledger(db, create=True) as lg:
        t = lg.record(category, action, points=points, source=source, session=session, key=key)
    if as_json:
        echo_json(t)
    else:
        click.echo(f"{t.status} {t.id}: {t.points:+d} {t.category}, total {t.running_total}")


@ledger.command("record-batch")
@db_option
@click.argument("file", default="-")
@json_option
def record_batch(db: str | None, file: str, as_json: bool) -> None:
    """Record transactions from FILE (default: stdin) as JSON lines or a JSON array, all or none.

    Each item has category and action, optionally points, source, session, key."""
    from plaudit.inputs import as_list, load
    from plaudit.ledger.spec import parse_spec

    items = as_list(load(file, what="input"))
    config = _loaded_config()
    for i, raw in enumerate(items):  # a refused file creates no store
        parse_spec(config, raw, where=f"[{i}]")
    with open_ledger(db, create=True, config=config) as lg:
        txs = lg.record_batch(items)
    if as_json:
        echo_json({"recorded": len(txs), "transactions": txs})
    else:
        total = txs[-1].running_total if txs else None
        click.echo(f"recorded {len(txs)} transactions; total {total}")


@ledger.command()
@db_option
@json_option
def score(db: str | None, as_json: bool) -> None:
    """Current, session and lifetime score."""
    with open_ledger(db) as lg:
        s = lg.score()
    if as_json:
        echo_json(s)
        return
    click.echo(f"total score     {s['total_score']:+d}")
    sess = s["session_id"] or "-"
    click.echo(f"session score   {s['session_score']:+d}  (session {sess})")
    click.echo(f"lifetime score  {s['lifetime_score']:+d}")
    click.echo(f"rewards         {s['rewards_total']:+d}")
    click.echo(f"penalties       {s['penalties_total']:+d}")
    click.echo(f"efficiency      {s['learning_efficiency']}%")
    if s["halted"]:
        state = f"HALTED: {s['halt_reason']}"
    else:
        state = "verified" if s["verified"] else "checksum mismatch"
    click.echo(f"transactions    {s['transactions']}  ({state})")
    if s["next"]:
        click.echo(f"next: {s['next']}")


@ledger.command()
@db_option
@json_option
def breakdown(db: str | None, as_json: bool) -> None:
    """Points by category: total, current session, lifetime."""
    with open_ledger(db) as lg:
        b = lg.breakdown()
    if as_json:
        echo_json(b)
        return
    click.echo(f"{'category':<28} {'type':<8} {'total':>8} {'session':>8} {'count':>6}")
    for c in b["categories"]:
        click.echo(
            f"{c['category']:<28} {c['type']:<8} {c['total']:>+8d} {c['session']:>+8d} "
            f"{c['count']:>6}"
        )


@ledger.command()
@db_option
@json_option
def metrics(db: str | None, as_json: bool) -> None:
    """Actions, success rate, learning efficiency, autonomy level."""
    with open_ledger(db) as lg:
        m = lg.metrics()
    if as_json:
        echo_json(m)
    else:
        for k, v in m.items():
            click.echo(f"{k:<22} {v}")


@ledger.command()
@db_option
@click.option("--limit", "-n", type=click.IntRange(0, 10_000), default=10, show_default=True)
@click.option("--category", "-c", default=None)
@click.option("--session", default=None)
@json_option
def transactions(
    db: str | None, limit: int, category: str | None, session: str | None, as_json: bool
) -> None:
    """Transactions, newest first by date (ties by log position). A transaction recovered or
    imported for an older record carries the record's date; `#N` is its log position, the
    order its running total follows."""
    with open_ledger(db) as lg:
        txs = lg.transactions(limit, category=category, session=session)
    if as_json:
        echo_json({"transactions": txs})
    else:
        for t in txs:
            click.echo(_tx_line(t))


@ledger.command()
@db_option
@click.option("--limit", "-n", type=click.IntRange(0, 10_000), default=20, show_default=True)
@json_option
def incidents(db: str | None, limit: int, as_json: bool) -> None:
    """Halts, audits and recoveries, newest first."""
    with open_ledger(db) as lg:
        found = lg.incidents(limit)
    if as_json:
        echo_json({"incidents": found})
    else:
        for i in found:
            click.echo(f"{i['timestamp']}  {i['kind']:<20} {i['id']}")


@ledger.command()
@db_option
@click.option(
    "--full",
    is_flag=True,
    help="Recalculate from the first transaction, not the newest checkpoint.",
)
@json_option
def verify(db: str | None, full: bool, as_json: bool) -> None:
    """Recalculate the totals from the log and verify the log's hash chain."""
    with open_ledger(db) as lg:
        r = lg.verify(full=full)
    if as_json:
        echo_json(r)
    else:
        c = r["checksum_validation"]
        click.echo(
            f"checksum: calculated {c['calculated_total']}, stored {c['stored_total']}: "
            f"{'valid' if c['is_valid'] else 'MISMATCH'}"
        )
        for reason in c["reasons"]:
            click.echo(f"  {reason}")
        log = r["log"]
        click.echo(f"log: {'ok' if log['ok'] else 'BROKEN'} ({log['checked']}/{log['length']})")
        if log["reason"]:
            click.echo(f"  {log['reason']}")
        d = r["first_discrepancy"] or {}
        for side in ("log", "projection"):
            if d.get(side):
                x = d[side]
                click.echo(
                    f"first discrepancy ({side}): position {x['seq']} {x['id']}: {x['reason']}"
                )
        if r.get("next"):
            click.echo(f"next: {r['next']}")
    if not r["ok"]:
        raise click.exceptions.Exit(5)


@ledger.command()
@db_option
@click.option(
    "--export-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Write the audit export (a backup of the log, and the source files) here.",
)
@sources_option
@json_option
def audit(db: str | None, export_dir: str | None, sources_dir: str | None, as_json: bool) -> None:
    """Freeze, export, recalculate, find the first discrepancy (in the log and against the
    source files), correct, resume. Exits 5 when something still keeps recording halted."""
    with open_ledger(db) as lg:
        r = lg.audit(export_dir, sources_dir=sources_dir)
    if as_json:
        echo_json(r)
        return
    s = r["steps"]
    click.echo(f"audit {r['audit']}")
    click.echo(f"  1 freeze      was halted: {s['freeze']['was_halted']}")
    click.echo(f"  2 export      {s['export']['file'] or 'head ' + s['export']['head']}")
    rc = s["recalculate"]
    click.echo(
        f"  3 recalculate log sum {rc['calculated_total']}, stored {rc['stored_total']}, "
        f"acknowledged {rc['acknowledged_total']}, log {'ok' if rc['log_ok'] else 'BROKEN'}"
    )
    idf = s["identify"]
    first = idf.get("projection") or idf.get("log") or idf.get("log_first_bad")
    click.echo(f"  4 identify    {first or 'no discrepancy'}")
    amended = s["correct"].get("amended", 0)
    click.echo(
        f"  5 correct     correction {s['correct']['correction']:+d}"
        f"{f', {amended} forged transactions amended' if amended else ''}"
        f"{', projection rebuilt' if s['recover']['projection_rebuilt'] else ''}"
    )
    for f in idf.get("forged", [])[:20]:
        click.echo(
            f"    amended     {f['id']} ({f['category']}): the log holds {f['log_points']:+d}, "
            f"acknowledged {f['acknowledged']:+d}"
        )
    src = idf.get("sources") or {}
    if src and not src["ok"]:
        click.echo(f"    sources     {len(src['mismatches']) + len(src['orphans'])} mismatched")
    click.echo(f"  6 resume      total {r['total_score']}{', HALTED' if r['halted'] else ''}")
    _remaining(r["remaining"])
    if r["halted"]:
        raise click.exceptions.Exit(5)


def _remaining(items: list[dict[str, str]]) -> None:
    for item in items:
        click.echo(f"remaining ({item['kind']}): {item['reason']}")
        click.echo(f"  next: {item['next']}")


@ledger.command()
@db_option
@click.option(
    "--recover",
    "do_recover",
    is_flag=True,
    help="Book what the ledger is missing, under each record's own category and date.",
)
@click.option(
    "--correct",
    "do_correct",
    is_flag=True,
    help="Reverse what it holds in excess, or for deleted records, with audit corrections.",
)
@sources_option
@json_option
def reconcile(
    db: str | None, do_recover: bool, do_correct: bool, sources_dir: str | None, as_json: bool
) -> None:
    """Compare ledger sums per source record with what the records declare (exit 1 on a
    mismatch; in the default `halt` mode it also halts recording until a clean run)."""
    with open_ledger(db) as lg:
        r = lg.reconcile(sources_dir=sources_dir)
        found = dict(r)
        if do_recover:
            r["recovery"] = lg.recover_missing()
            r.update(r["recovery"]["reconcile"])
        if do_correct:
            r["correction"] = lg.correct()
            r.update(r["correction"]["reconcile"])
    if do_recover or do_correct:
        r["found"] = {k: found[k] for k in ("ok", "mismatches", "orphans")}
        if r["ok"]:
            r.pop("next", None)
    if as_json:
        echo_json(r)
    else:
        fixing = (do_recover or do_correct) and not found["ok"]
        if fixing:  # what was found, then what was done about it, then where that leaves it
            click.echo(f"found {len(found['mismatches']) + len(found['orphans'])} mismatches")
            _reconciliation(found)
            if do_recover:
                click.echo(f"recovered {r['recovery']['recovered']} transactions")
            if do_correct:
                click.echo(f"corrected {r['correction']['corrected']} records")
        click.echo("reconciled: " + ("ok" if r["ok"] else f"{len(r['mismatches'])} mismatches"))
        _reconciliation(r)
        if not r["ok"]:
            click.echo(("recording HALTED. " if r["halted"] else "") + "next: " + r["next"])
    if not r["ok"]:
        raise click.exceptions.Exit(1)


def _reconciliation(r: dict[str, Any]) -> None:
    for kind, agg in sorted(r["by_kind"].items()):
        click.echo(
            f"  {kind:<10} {agg['records']:>5} records, declared {agg['declared']:+d}, "
            f"ledger {agg['ledger']:+d}, {agg['mismatched']} mismatched"
        )
    for m in r["mismatches"][:20]:
        click.echo(
            f"  {m['status']:<8} {m['kind']}:{m['key']} declares {m['declared']}, "
            f"ledger {m['ledger']}"
        )
    for o in r["orphans"][:20]:
        click.echo(f"  orphan   {o}: transactions reference a record no file holds")


@ledger.command()
@db_option
@json_option
def recover(db: str | None, as_json: bool) -> None:
    """Repair the stored totals from the log and lift the halt once the ledger is whole;
    otherwise say what remains (exit 5)."""
    with open_ledger(db) as lg:
        r = lg.recover()
    if as_json:
        echo_json(r)
    else:
        click.echo(
            f"replayed {r['replayed_transactions']} transactions from checkpoint "
            f"{r['checkpoint_seq']}: total {r['replayed_total']}"
            f"{', stored totals rebuilt' if r['projection_rebuilt'] else ', nothing to repair'}"
        )
        if r["resumed"]:
            click.echo("the ledger is whole again: recording resumed")
        elif r["whole"]:
            click.echo("the ledger is whole")
        _remaining(r["remaining"])
    if not r["whole"]:
        raise click.exceptions.Exit(5)


@ledger.command()
@db_option
@json_option
def checkpoint(db: str | None, as_json: bool) -> None:
    """Write a hashed checkpoint (totals and log head) now."""
    with open_ledger(db) as lg:
        r = lg.checkpoint()
    if as_json:
        echo_json(r)
    else:
        click.echo(f"checkpoint written; total {r['checksum'].calculated_total}")


@ledger.command()
@db_option
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
def backup(db: str | None, file: str, as_json: bool) -> None:
    """Write every log event with its hash to FILE (JSON lines), atomically."""
    with open_ledger(db) as lg:
        r = lg.backup(file)
    if as_json:
        echo_json(r)
    else:
        click.echo(f"{file}: {r['events']} events, head {r['head']}")


@ledger.command()
@db_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--rechain",
    is_flag=True,
    help="Take a backup of a damaged log into an empty store with a fresh chain.",
)
@json_option
def restore(db: str | None, file: str, rechain: bool, as_json: bool) -> None:
    """Restore a backup into an empty store (or one holding a prefix of it)."""
    with open_ledger(db, create=True) as lg:
        r = lg.restore(file, rechain=rechain)
    if as_json:
        echo_json(r)
    else:
        click.echo(f"restored {r['restored']} of {r['events']} events; head {r['head']}")
        if rechain:
            d = r["damage"]
            click.echo(f"the old chain first differs at position {d['first_changed_position']}")
        if r.get("lifted_halt"):
            click.echo(
                f"the backup's halt ({r['lifted_halt']}) was about the store it came from: this "
                "store's log verifies and its totals add up, so recording resumes here"
            )
        if r.get("next"):
            click.echo(f"next: {r['next']}")


@ledger.command("import-sources")
@db_option
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--book/--no-book",
    default=True,
    show_default=True,
    help="Book the records' triggers (seed 003's cross-file table) as transactions; "
    "--no-book imports the records only.",
)
@json_option
def import_sources(db: str | None, directory: str, book: bool, as_json: bool) -> None:
    """Import mistakes.json, systemPatterns.json, memory.json, activeContext.json, and book
    what their records trigger (each version once; what the ledger already holds for a
    record is not booked again). Every file is checked first: a refused one creates nothing."""
    from plaudit.ledger.sources import read_source_files

    config = _loaded_config()
    files = read_source_files(config, directory)
    with open_ledger(db, create=True, config=config) as lg:
        r = lg.import_sources(files, book=book)
    if as_json:
        echo_json(r)
    else:
        for f, n in sorted(r.files.items()):
            click.echo(f"{f}: {n} records")
        if r.missing:
            click.echo(f"not found: {', '.join(r.missing)}")
        click.echo(
            f"{r.appended} new or changed, {r.unchanged} unchanged, {r.removed} deleted from "
            "their file"
        )
        if book and r.booking is None:
            click.echo(f"booked {r.booked} transactions ({r.booked_points:+d}) for their triggers")
        for nb in r.not_booked[:20]:
            click.echo(f"  not booked {nb['source']} ({nb['points']:+d}): {nb['reason']}")
    if book and r.booking is not None:
        click.echo(f"error: nothing was booked: {r.booking}", err=True)
        raise click.exceptions.Exit(5)


@ledger.command("import-progress")
@db_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--accept-inconsistent",
    is_flag=True,
    help="Import a file whose own numbers disagree, and record an incident.",
)
@json_option
def import_progress_cmd(
    db: str | None, file: str, accept_inconsistent: bool, as_json: bool
) -> None:
    """Import a progress.json; an opening balance per category covers what its log does not.
    Idempotent: re-importing a file, or this ledger's own export, changes nothing. The file is
    checked first: a refused one creates nothing."""
    from plaudit.ledger.progress import read_progress

    config = _loaded_config()
    checked = read_progress(config, file, accept_inconsistent=accept_inconsistent)
    with open_ledger(db, create=True, config=config) as lg:
        r = lg.import_progress(checked)
    if as_json:
        echo_json(r)
        return
    click.echo(f"{file}: {r['imported']} imported, {r['already_present']} already present")
    for o in r["opening_balance"]:
        if o["status"] == "appended":
            click.echo(
                f"opening balance {o['points']:+d} {o['category']}: history the file's log omits"
            )
    if r.get("message"):
        click.echo(r["message"])
    if r["inconsistency"]:
        i = r["inconsistency"]
        click.echo(f"imported although inconsistent at {i['path']}: {i['reason']} (incident)")


@ledger.command("export-progress")
@db_option
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
def export_progress_cmd(db: str | None, file: str, as_json: bool) -> None:
    """Write progress.json (the seed's schema, validated), newest 1000 transactions."""
    with open_ledger(db) as lg:
        r = lg.export_progress(file)
    if as_json:
        echo_json(r)
    else:
        click.echo(f"{file}: total {r['total_score']}, {r['transactions']} transactions")


@ledger.command()
@db_option
@click.option(
    "--period",
    type=click.Choice(["daily", "weekly", "monthly"]),
    default="daily",
    show_default=True,
)
@click.option(
    "--date",
    "day",
    type=click.DateTime(["%Y-%m-%d"]),
    default=None,
    help="A day in the period (UTC; default today).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
@json_option
def report(db: str | None, period: str, day: Any, fmt: str, as_json: bool) -> None:
    """Compliance report for a day, an ISO week or a month."""
    d: date | None = None if day is None else day.date()
    with open_ledger(db) as lg:
        r = lg.report(period, d)
    if as_json or fmt == "json":
        echo_json(r)
    else:
        from plaudit.ledger.reports import to_markdown

        click.echo(to_markdown(r), nl=False)


@ledger.command("apply-rules")
@db_option
@json_option
def apply_rules(db: str | None, as_json: bool) -> None:
    """Turn matching events (e.g. router failures) into transactions; safe to re-run."""
    with open_ledger(db) as lg:
        r = lg.apply_rules()
    if as_json:
        echo_json(r)
    else:
        click.echo(
            f"scanned {r['scanned']} events, created {r['created']} transactions "
            f"({r['already_present']} already present)"
        )


@ledger.command()
@db_option
@click.option(
    "--interval",
    type=click.FloatRange(1, 86_400),
    default=60.0,
    show_default=True,
    help="Seconds between checks.",
)
@click.option(
    "--once",
    is_flag=True,
    help="Run what is due now, then exit: 1 when a reconciliation found mismatches or a job "
    "failed, 5 when the audit left recording halted.",
)
@json_option
def watch(db: str | None, interval: float, once: bool, as_json: bool) -> None:
    """Run the ledger's scheduled work: hourly reconciliation, backups, the daily, weekly
    and monthly reports and the weekly audit (what `plaudit serve` also runs)."""
    import time

    with open_ledger(db) as lg:
        while True:
            done = lg.run_scheduled()
            if done or once:
                echo_json(done) if as_json else click.echo(_summary(done))
            if once:
                code = _watch_exit(done)
                if code:
                    raise click.exceptions.Exit(code)
                return
            time.sleep(interval)


def _summary(done: dict[str, Any]) -> str:
    if not done:
        return "nothing was due"
    return "; ".join(f"{k}: {v}" for k, v in done.items())


def _watch_exit(done: dict[str, Any]) -> int:
    """The exit status of one pass, as the commands it stands for would give it: `ledger
    audit` exits 5 when recording stays halted, `ledger reconcile` 1 on a mismatch."""
    if done.get("audit", {}).get("halted"):
        return 5
    if "error" in done or not done.get("reconcile", {}).get("ok", True):
        return 1
    return 0


@ledger.group(cls=SuggestingGroup)
def sessions() -> None:
    """Explicit scoring sessions: start, end, list."""


@sessions.command("start")
@db_option
@click.option("--session", "session_id", default=None, help="Default: a new UUIDv7.")
@click.option("--label", default=None)
@json_option
def session_start(db: str | None, session_id: str | None, label: str | None, as_json: bool) -> None:
    """Start a session; transactions go to it until it ends."""
    with open_ledger(db, create=True) as lg:
        s = lg.start_session(session_id, label=label)
    echo_json(s) if as_json else click.echo(f"started {s['session_id']}")


@sessions.command("end")
@db_option
@click.option("--session", "session_id", default=None, help="Default: the open session.")
@json_option
def session_end(db: str | None, session_id: str | None, as_json: bool) -> None:
    """End a session (the open one by default)."""
    with open_ledger(db) as lg:
        s = lg.end_session(session_id)
    echo_json(s) if as_json else click.echo(f"ended {s['session_id']}: score {s['score']:+d}")


@sessions.command("list")
@db_option
@json_option
def session_list(db: str | None, as_json: bool) -> None:
    """Every session with its score."""
    with open_ledger(db) as lg:
        ss = lg.sessions()
    if as_json:
        echo_json({"sessions": ss})
        return
    for s in ss:
        state = "open" if s["open"] else "ended"
        click.echo(f"{s['session_id']:<40} {state:<6} {s['score']:>+8d} {s['transactions']:>6} tx")
