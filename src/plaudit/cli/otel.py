"""`plaudit otel`: send the log's results to OpenTelemetry (`plaudit.otel`)."""

from __future__ import annotations

import click

from plaudit.cli._common import db_option, echo_json, fail, json_option, open_store

NAME_HELP = "Cursor name: exporters with different names each send everything (default: default)."


@click.group()
def otel() -> None:
    """Ledger, bandit and router results as OpenTelemetry GenAI evaluation events.

    Configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, ...).
    Needs the otel extra: pip install 'plaudit[otel]'.
    """


@otel.command("export")
@db_option
@click.option("--name", default="default", show_default=True, help=NAME_HELP)
@click.option(
    "--from",
    "start",
    type=click.Choice(["beginning", "head"]),
    default="beginning",
    show_default=True,
    help="Where a cursor used for the first time starts.",
)
@click.option("--follow", is_flag=True, help="Keep sending new results until interrupted.")
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 3600),
    default=2.0,
    show_default=True,
    help="Seconds between rounds with --follow.",
)
@json_option
def export(
    db: str | None, name: str, start: str, follow: bool, interval: float, as_json: bool
) -> None:
    """Send every result committed since the last export (at least once; each carries its
    plaudit.event.id), then move the cursor."""
    import threading

    from plaudit.otel import OtelExporter, require_sdk

    require_sdk()
    with open_store(db) as p:
        exporter = OtelExporter(p, name=name, start=start)  # type: ignore[arg-type]
        try:
            if follow:
                click.echo(
                    f"following the log into OpenTelemetry as {name!r}; Ctrl-C stops", err=True
                )
                exporter.follow(threading.Event(), interval)
                return
            report = exporter.export_pending()
        finally:
            exporter.close()
    if as_json:
        echo_json(report.to_dict())
    elif report.delivered:
        click.echo(
            f"sent {report.records} OpenTelemetry events for {report.events} log events; "
            f"cursor {name!r} at {report.cursor}"
        )
    if not report.delivered:
        raise fail(
            f"the OpenTelemetry exporter did not deliver the results after log position "
            f"{report.cursor}; cursor {name!r} stays there and the next export sends them again"
        )


@otel.command("status")
@db_option
@click.option("--name", default="default", show_default=True, help=NAME_HELP)
@json_option
def status(db: str | None, name: str, as_json: bool) -> None:
    """Where the cursor is and how many results wait to be sent."""
    from plaudit.otel import cursor
    from plaudit.otel.mapping import TYPES

    with open_store(db) as p:
        position = cursor.read(p, name)
        head = p.log.head().length
        after = position or 0
        waiting = sum(1 for _ in p.log.replay(after, types=TYPES, until_seq=head))
    out = {"name": name, "cursor": position, "head": head, "waiting": waiting}
    if as_json:
        echo_json(out)
    else:
        where = "never exported" if position is None else f"at {position} of {head}"
        click.echo(f"cursor {name!r}: {where}; {waiting} results waiting")
