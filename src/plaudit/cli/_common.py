"""Options and output helpers every subcommand shares."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click
import msgspec

if TYPE_CHECKING:
    from plaudit.core import Plaudit

F = TypeVar("F", bound=Callable[..., Any])


class SuggestingGroup(click.Group):
    """A group that answers a mistyped command with the commands it may have meant.

    click suggests only among commands it already holds, so a group whose commands are
    imported on demand (the top level) got none; this asks `list_commands` instead."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if (
            not ctx.resilient_parsing
            and not name.startswith("-")
            and self.get_command(ctx, name) is None
        ):
            from difflib import get_close_matches

            close = get_close_matches(name, self.list_commands(ctx), n=3)
            hint = ""
            if len(close) == 1:
                hint = f" Did you mean {close[0]!r}?"
            elif close:
                hint = f" Did you mean one of: {', '.join(map(repr, close))}?"
            raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        return super().resolve_command(ctx, args)


def db_option(f: F) -> F:
    """`--db` on every command; it overrides the group-level `plaudit --db`."""
    return click.option(
        "--db",
        "db",
        default=None,
        metavar="PATH|DSN",
        help="SQLite path or postgresql:// DSN (default: $PLAUDIT_DB, else ./.plaudit/plaudit.db).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")(f)


def resolve(db: str | None) -> str | None:
    ctx = click.get_current_context(silent=True)
    while ctx is not None and db is None:
        obj = ctx.obj if isinstance(ctx.obj, dict) else {}
        db = obj.get("db")
        ctx = ctx.parent
    return db


@contextmanager
def open_store(db: str | None, *, create: bool = False, **options: Any) -> Iterator[Plaudit]:
    """The store for a command. Only commands that write pass `create=True`; a read never
    makes a store, so a mistyped `--db` is an error (exit 2), not an empty log."""
    from plaudit.core import Plaudit  # here, so commands that never open a store skip it

    p = Plaudit.open(resolve(db), create=create, **options)
    try:
        if p.created:
            announce_created(p)
        yield p
    finally:
        p.close()


def announce_created(p: Plaudit) -> None:
    """One line on stderr when a write made a new store (stdout stays the command's own)."""
    from plaudit.config import describe_store

    click.echo(f"created a new plaudit store at {describe_store(p.backend)}", err=True)


def to_jsonable(value: Any) -> Any:
    return msgspec.to_builtins(value)


def echo_json(value: Any) -> None:
    click.echo(msgspec.json.encode(to_jsonable(value)).decode())


def fail(message: str, code: int = 1) -> click.exceptions.Exit:
    """Print an error and return an Exit to raise: `raise fail("...")`."""
    click.echo(f"error: {message}", err=True)
    return click.exceptions.Exit(code)
