"""`plaudit doctor`: is this installation able to do its jobs, and if not, what to do about it.

Each check says ok, absent (an optional extra that is not installed: fine unless something
here needs it) or fail, with the fix. Nothing is created or changed: the store is opened the
way commands that only read open it.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from importlib import metadata, resources
from importlib.abc import Traversable
from typing import Literal

import msgspec

from plaudit.config import is_postgres, redact_dsn, resolve_db, split_schema
from plaudit.errors import MissingExtraError, PlauditError
from plaudit.extras import EXTRAS, installed

Status = Literal["ok", "absent", "fail"]

#: What each extra is for, in the words a user would look for; one entry per extra in
#: `plaudit.extras.EXTRAS` (a test holds the two equal, so a new extra cannot crash doctor).
USES = {
    "server": "plaudit serve, the HTTP API and the dashboard",
    "postgres": "a postgresql:// store",
    "parquet": "signal export --format parquet",
    "otel": "plaudit otel export and plaudit serve --otel",
    "mcp": "plaudit mcp and the /mcp endpoint of plaudit serve",
}


class Check(msgspec.Struct):
    name: str
    status: Status
    detail: str
    fix: str | None = None


class Report(msgspec.Struct):
    ok: bool
    plaudit: str
    python: str
    sqlite: str
    checks: list[Check]


def check_store(db: str | None) -> Check:
    from plaudit.core import Plaudit

    url = resolve_db(db)
    try:
        with Plaudit.open(url, create=False) as p:
            from plaudit.config import describe_store

            where = describe_store(p.backend)
            stats = p.log.stats()
    except PlauditError as exc:  # a missing store's message already says how to make one
        fix = exc.install if isinstance(exc, MissingExtraError) else None
        return Check("store", "fail", str(exc), fix)
    detail = f"{where}: {stats.length} events, head {stats.head}"
    if stats.quarantined:
        detail += f", {stats.quarantined} quarantined import lines (plaudit log quarantine)"
    return Check("store", "ok", detail)


def check_extras() -> list[Check]:
    checks = []
    for extra, modules in EXTRAS.items():
        present, missing = installed(extra)
        if present:
            versions = ", ".join(f"{m} {_version(m)}" for m in modules)
            checks.append(Check(f"extra {extra}", "ok", f"installed ({versions})"))
        else:
            use = USES.get(extra, f"what the {extra} extra adds")
            checks.append(
                Check(
                    f"extra {extra}",
                    "absent",
                    f"not installed ({missing} is missing); needed for {use}",
                    MissingExtraError(extra, use).install,
                )
            )
    return checks


def _version(module: str) -> str:
    """The installed version of the distribution a module comes from (`opentelemetry.sdk`
    is the distribution `opentelemetry-sdk`)."""
    for name in dict.fromkeys((module, module.replace(".", "-"))):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "?"


def check_postgres(dsn: str) -> Check:
    """Connect (without creating anything) and report the server, or why not."""
    shown = redact_dsn(dsn)
    try:
        from plaudit.extras import need

        psycopg = need("psycopg", extra="postgres", feature="a postgresql:// store")
    except MissingExtraError as exc:
        return Check("postgresql", "fail", str(exc), exc.install)
    base, _ = split_schema(dsn)
    try:
        with psycopg.connect(base, connect_timeout=5) as conn:
            version = conn.execute("SELECT current_setting('server_version')").fetchone()[0]
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return Check(
            "postgresql",
            "fail",
            f"cannot connect to {shown}: {first}",
            "check that the server runs and the DSN's host, port, user and database",
        )
    return Check("postgresql", "ok", f"{shown}: PostgreSQL {version} answers")


_ASSET = re.compile(r"""(?:href|src)=["']/static/([^"'?#]+)""")


def check_dashboard(static: Traversable | None = None) -> Check:
    """The page and every asset it links under /static/ are in the package and not empty."""
    static = static if static is not None else resources.files("plaudit") / "server" / "static"
    index = static / "index.html"
    if not index.is_file():
        return Check("dashboard", "fail", f"{index} is missing", "reinstall plaudit")
    names = sorted(set(_ASSET.findall(index.read_text("utf-8"))))
    bad = [n for n in names if not (static / n).is_file() or not (static / n).read_bytes()]
    if bad:
        return Check(
            "dashboard",
            "fail",
            f"index.html links assets that are missing or empty: {', '.join(bad)}",
            "reinstall plaudit",
        )
    served = "" if installed("server")[0] else "; serving it needs the server extra"
    return Check("dashboard", "ok", f"index.html and {len(names)} assets present{served}")


def diagnose(db: str | None = None, dsn: str | None = None) -> Report:
    url = resolve_db(db)
    checks = [check_store(url), *check_extras()]
    targets = [d for d in (url if is_postgres(url) else None, dsn) if d]
    for target in dict.fromkeys(targets):  # the store's server, and/or the one given
        checks.append(check_postgres(target))
    checks.append(check_dashboard())
    from plaudit import __version__

    return Report(
        ok=all(c.status != "fail" for c in checks),
        plaudit=__version__,
        python=sys.version.split()[0],
        sqlite=sqlite3.sqlite_version,
        checks=checks,
    )


__all__ = ["Check", "Report", "check_dashboard", "check_postgres", "check_store", "diagnose"]
