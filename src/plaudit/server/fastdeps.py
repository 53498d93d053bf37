"""Coroutine twins of the shared dependencies, installed as overrides by the app.

(Module without `from __future__ import annotations`: FastAPI re-reads an override's
signature on every request, and string annotations would be evaluated each time.)

FastAPI runs a plain `def` dependency in its thread pool, so a write endpoint paid two thread
hand-offs (handle, token check) before its own work. Both checks are a few attribute reads, so
the app runs them on the event loop instead; route modules keep using `plaudit.server.deps`.
"""

import inspect

from fastapi import FastAPI, Request

from plaudit.core import Plaudit
from plaudit.server import deps


async def get_plaudit(request: Request) -> Plaudit:
    return deps.get_plaudit(request)


async def require_write(request: Request) -> None:
    deps.require_write(request)


def install(app: FastAPI) -> None:
    """Override only what is still a plain function (no-op once deps.py is async itself)."""
    for original, twin in ((deps.get_plaudit, get_plaudit), (deps.require_write, require_write)):
        if not inspect.iscoroutinefunction(original):
            app.dependency_overrides[original] = twin


__all__ = ["get_plaudit", "install", "require_write"]
