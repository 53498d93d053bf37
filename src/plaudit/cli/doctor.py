"""`plaudit doctor`: check the store, the extras, PostgreSQL and the dashboard's assets."""

from __future__ import annotations

import click

from plaudit.cli._common import db_option, echo_json, json_option, resolve

MARKS = {"ok": "ok", "absent": "--", "fail": "FAIL"}


@click.command()
@db_option
@click.option(
    "--dsn",
    default=None,
    metavar="DSN",
    help="Also check this PostgreSQL server (the store's own is checked when it is one).",
)
@json_option
def doctor(db: str | None, dsn: str | None, as_json: bool) -> None:
    """Check this installation; exit 1 with the list of what is wrong, and how to fix it.

    Checks the store (without creating it), the installed extras, the PostgreSQL connection
    (when the store is PostgreSQL or --dsn is given) and the dashboard's assets."""
    from plaudit.doctor import diagnose

    report = diagnose(resolve(db), dsn)
    if as_json:
        echo_json(report)
    else:
        click.echo(f"plaudit {report.plaudit} on Python {report.python}, SQLite {report.sqlite}")
        width = max(len(c.name) for c in report.checks)
        for c in report.checks:
            click.echo(f"  {MARKS[c.status]:<4}  {c.name:<{width}}  {c.detail}")
            if c.fix and c.status == "fail":
                click.echo(f"        {'':<{width}}  fix: {c.fix}")
            elif c.fix:
                click.echo(f"        {'':<{width}}  {c.fix}")
        failed = [c.name for c in report.checks if c.status == "fail"]
        if failed:
            click.echo(
                f"{len(failed)} problem{'s' if len(failed) > 1 else ''}: {', '.join(failed)}"
            )
        else:
            click.echo("no problems found")
    if not report.ok:
        raise click.exceptions.Exit(1)


__all__ = ["doctor"]
