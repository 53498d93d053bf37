"""Shared fixtures: every store-backed test runs on SQLite and on the real PostgreSQL server.

PostgreSQL tests use their own schema and drop it afterwards. Outside CI they skip, with the
reason, when no server answers; with CI=true an unreachable server is a failure.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from plaudit import Plaudit

PG_DSN = os.environ.get("PLAUDIT_TEST_PG", "postgresql://127.0.0.1:5432/test")

# Keys and verifier state live in the user's config and state directories: the suite's go to
# a directory of its own (inherited by every process it starts), never the user's.
_TRUST_HOME = tempfile.mkdtemp(prefix="plaudit-tests-home-")
os.environ["XDG_CONFIG_HOME"] = os.path.join(_TRUST_HOME, "config")
os.environ["XDG_STATE_HOME"] = os.path.join(_TRUST_HOME, "state")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

_pg_state: dict[str, object] = {}


def pg_unavailable_reason() -> str | None:
    """None when the server answers; otherwise why not (cached for the session)."""
    if "reason" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_state["reason"] = None
        except Exception as exc:
            _pg_state["reason"] = f"PostgreSQL at {PG_DSN} is not reachable: {exc}".strip()
    return _pg_state["reason"]  # type: ignore[return-value]


def require_pg() -> None:
    reason = pg_unavailable_reason()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true requires PostgreSQL: {reason}")
    pytest.skip(reason)


def new_pg_url() -> tuple[str, str]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_DSN else "?"
    return f"{PG_DSN}{sep}schema={schema}", schema


def drop_pg_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A DSN with a fresh schema on the real server, dropped afterwards."""
    require_pg()
    url, schema = new_pg_url()
    try:
        yield url
    finally:
        drop_pg_schema(schema)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return str(tmp_path / "plaudit.db")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path) -> Iterator[str]:
    """Each test using this runs once per backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "plaudit.db")
        return
    require_pg()
    url, schema = new_pg_url()
    try:
        yield url
    finally:
        drop_pg_schema(schema)


@pytest.fixture
def pl(db_url) -> Iterator[Plaudit]:
    """An open Plaudit handle on a fresh store, for each backend."""
    p = Plaudit.open(db_url)
    try:
        yield p
    finally:
        p.close()
