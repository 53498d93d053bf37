"""Storage: the event log, its backends and the projection mechanism.

Names are resolved on first use: `plaudit.events` imports the chain format from
`plaudit.store.chain`, and an eager import of the log here would import `events` back.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_WHERE = {
    "AppendResult": "plaudit.store.idempotency",
    "BatchResult": "plaudit.store.idempotency",
    "EventLog": "plaudit.store.log",
    "Head": "plaudit.store.verify",
    "LogStats": "plaudit.store.log",
    "VerifyReport": "plaudit.store.verify",
    "Writer": "plaudit.store.sequencing",
    "LogView": "plaudit.store.view",
    "Backend": "plaudit.store.backend",
    "Tx": "plaudit.store.backend",
    "Projection": "plaudit.store.projections",
    "register_projection": "plaudit.store.projections",
    "unregister_projection": "plaudit.store.projections",
}

__all__ = [
    "AppendResult",
    "Backend",
    "BatchResult",
    "EventLog",
    "Head",
    "LogStats",
    "LogView",
    "Projection",
    "Tx",
    "VerifyReport",
    "Writer",
    "register_projection",
    "unregister_projection",
]

if TYPE_CHECKING:
    from plaudit.store.backend import Backend, Tx
    from plaudit.store.idempotency import AppendResult, BatchResult
    from plaudit.store.log import EventLog, LogStats
    from plaudit.store.projections import Projection, register_projection, unregister_projection
    from plaudit.store.sequencing import Writer
    from plaudit.store.verify import Head, VerifyReport
    from plaudit.store.view import LogView


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'plaudit.store' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
