"""`plaudit ingest-traces FILE`: learn from exported traces, as `/v1/traces` does over HTTP."""

from __future__ import annotations

import click

from plaudit.cli._common import db_option, echo_json, json_option, open_store


@click.command("ingest-traces")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=False))
@db_option
@json_option
def ingest_traces(file: str, db: str | None, as_json: bool) -> None:
    """Read OTLP traces exported to FILE (OTLP/JSON, JSON Lines of it as the Collector's file
    exporter writes, or protobuf; gzip allowed) and record what their GenAI and OpenInference
    spans say: bandit observations and router outcomes. A malformed file records nothing."""
    from plaudit.traces import ingest_spans, read_file

    spans = read_file(file)  # checked whole before the store is opened (or made)
    with open_store(db, create=True) as p:
        report = ingest_spans(p, spans)
    if as_json:
        echo_json(report.to_dict())
        return
    r = report
    click.echo(
        f"{r.spans} spans: {len(r.runs_observed)} runs observed ({r.observed_spans} spans), "
        f"{len(r.outcomes)} router outcomes, {r.pending} kept for runs not ended yet, "
        f"{r.late} late, {r.unknown} naming unknown runs or decisions, {r.ignored} ignored"
    )
