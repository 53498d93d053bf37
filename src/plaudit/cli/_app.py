"""The click application: lazy command loading and one place that turns errors into messages."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from plaudit.cli._common import SuggestingGroup
from plaudit.errors import PlauditError


class LazyGroup(SuggestingGroup):
    """A group whose subcommands are imported on first use (see `COMMANDS`)."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:  # an import error is a bug to show, not "no such command"
            module, _, attr = self.lazy[name].partition(":")
            return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
        return super().get_command(ctx, name)


def _build() -> click.Group:
    from plaudit import __version__
    from plaudit.cli import COMMANDS

    @click.group(
        cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
    )
    @click.version_option(__version__, prog_name="plaudit")
    @click.option(
        "--db",
        envvar="PLAUDIT_DB",
        default=None,
        metavar="PATH|DSN",
        help="SQLite path or postgresql:// DSN (default: $PLAUDIT_DB, else ./.plaudit/plaudit.db).",
    )
    @click.option(
        "--traceparent",
        envvar="TRACEPARENT",
        default=None,
        metavar="W3C",
        help="W3C trace context the events written get, so tracing backends can attach them "
        "to the span (default: $TRACEPARENT).",
    )
    @click.pass_context
    def cli(ctx: click.Context, db: str | None, traceparent: str | None) -> None:
        """plaudit: reinforcement feedback for LLM agents on one tamper-evident event log."""
        ctx.ensure_object(dict)
        ctx.obj["db"] = db
        if traceparent:
            from plaudit.tracecontext import trace_context

            source = ctx.get_parameter_source("traceparent")
            field = "$TRACEPARENT" if source == click.core.ParameterSource.ENVIRONMENT else None
            ctx.with_resource(trace_context(traceparent, field=field or "--traceparent"))

    return cli


def run(args: Sequence[str]) -> int:
    cli = _build()
    try:
        rv = cli.main(args=list(args), prog_name="plaudit", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except PlauditError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("PLAUDIT_DEBUG"):
            raise
        click.echo(
            f"internal error: {type(exc).__name__}: {exc} (set PLAUDIT_DEBUG=1 for a traceback)",
            err=True,
        )
        return 70
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run(sys.argv[1:]))
