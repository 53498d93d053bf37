"""Optional features and the extras that install them, and the one way to ask for one.

`pip install plaudit` brings what the log, the bandit, the ledger and the CLI need. The HTTP
server, PostgreSQL and Parquet each pull in large packages that serve only them, so they are
extras; code that needs one imports it through :func:`need`, so that a missing extra is one
line naming it, the same everywhere, instead of a ModuleNotFoundError from deep inside.
"""

from __future__ import annotations

import importlib

from plaudit.errors import MissingExtraError

TYPE_CHECKING = False  # typing costs a shell hook ~10 ms to import
if TYPE_CHECKING:
    from types import ModuleType

#: extra -> the top-level modules it provides (the first is the one to check for)
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn"),
    "postgres": ("psycopg",),
    "parquet": ("pyarrow",),
    "otel": ("opentelemetry.sdk",),
    "mcp": ("mcp",),
}


def need(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import `module` for `feature`, or raise MissingExtraError naming `extra`.

    Only the module itself (or its package) being absent counts: an ImportError from inside
    an installed package is a broken install, and is raised as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != module.partition(".")[0]:
            raise
        raise MissingExtraError(extra, feature) from None


def require(extra: str, feature: str) -> None:
    """Fail now, before any work, if `extra` is not installed."""
    for module in EXTRAS[extra]:
        need(module, extra=extra, feature=feature)


def installed(extra: str) -> tuple[bool, str | None]:
    """(whether every module of `extra` imports, the first missing one)."""
    for module in EXTRAS[extra]:
        try:
            need(module, extra=extra, feature=extra)
        except MissingExtraError:
            return False, module
    return True, None


__all__ = ["EXTRAS", "installed", "need", "require"]
