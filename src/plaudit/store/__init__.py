"""Storage: the event log, its backends and the projection mechanism."""

from plaudit.store.backend import Backend, Tx
from plaudit.store.log import (
    AppendResult,
    BatchResult,
    EventLog,
    Head,
    LogStats,
    VerifyReport,
    Writer,
)
from plaudit.store.projections import Projection, register_projection, unregister_projection

__all__ = [
    "AppendResult",
    "Backend",
    "BatchResult",
    "EventLog",
    "Head",
    "LogStats",
    "Projection",
    "Tx",
    "VerifyReport",
    "Writer",
    "register_projection",
    "unregister_projection",
]
