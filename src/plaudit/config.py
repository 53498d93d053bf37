"""Where the database is: `--db`, else `$PLAUDIT_DB`, else `./.plaudit/plaudit.db`."""

from __future__ import annotations

import os

from plaudit.errors import ConfigError

#: `typing` (and the store's modules) cost a shell hook's emit milliseconds it may not need.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from plaudit.store.backend import Backend

DEFAULT_DB = os.path.join(".plaudit", "plaudit.db")
ENV_DB = "PLAUDIT_DB"


def resolve_db(db: str | os.PathLike[str] | None) -> str:
    if db is None or str(db) == "":
        db = os.environ.get(ENV_DB) or DEFAULT_DB
    return str(db)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def split_schema(dsn: str) -> tuple[str, str | None]:
    """plaudit accepts `?schema=NAME` on a DSN; libpq does not, so take it off."""
    # Imported here: urllib.parse (with pathlib) cost a shell hook's SQLite emit ~3 ms.
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = [(k, v) for k, v in query if k != "schema"]
    return urlunsplit(parts._replace(query=urlencode(rest))), schema


def redact_dsn(dsn: str) -> str:
    """The DSN with its password (in the URL or a `password=` parameter) masked, for messages."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(dsn)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, True)]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="*")))


def describe_store(backend: Backend) -> str:
    """Where a store is, for people: a SQLite path, or a schema of a DSN without its password."""
    dsn = getattr(backend, "dsn", None)
    if dsn is None:
        return backend.describe()
    schema = getattr(backend, "schema", None)
    return redact_dsn(dsn) if schema is None else f"schema {schema} of {redact_dsn(dsn)}"


def make_backend(
    db: str | os.PathLike[str] | None = None,
    *,
    schema: str | None = None,
    durability: str = "full",
    create: bool = True,
    deadline_s: float | None = None,
) -> Backend:
    """The backend for `db`. `create=False` opens only an existing store: a missing one
    raises `StoreNotFoundError` and nothing (file, directory, schema, table) is created."""
    url = resolve_db(db)
    if durability not in ("full", "normal"):
        raise ConfigError(f"durability must be 'full' or 'normal', not {durability!r}")
    if is_postgres(url):
        from plaudit.extras import need
        from plaudit.store.postgres import PostgresBackend

        need("psycopg", extra="postgres", feature="a postgresql:// store")
        dsn, dsn_schema = split_schema(url)
        return PostgresBackend(
            dsn, schema=schema or dsn_schema, create=create, deadline_s=deadline_s
        )
    from plaudit.store.sqlite import SqliteBackend

    return SqliteBackend(
        url,
        durability=durability,  # type: ignore[arg-type]
        create=create,
        deadline_s=deadline_s,
    )
