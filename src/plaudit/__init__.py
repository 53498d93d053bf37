"""plaudit: a reinforcement-feedback layer for LLM agents on one tamper-evident event log."""

from plaudit.context import Arm, ArmStats, BanditConfig, Observation, Selection
from plaudit.core import Plaudit
from plaudit.errors import (
    BackendUnavailableError,
    ConfigError,
    ConflictError,
    IntegrityError,
    NotFoundError,
    PlauditError,
    ValidationError,
)
from plaudit.events import Event, StoredEvent, make_event
from plaudit.ids import uuid7
from plaudit.store import (
    AppendResult,
    BatchResult,
    EventLog,
    Head,
    Projection,
    Tx,
    VerifyReport,
    register_projection,
    unregister_projection,
)

__version__ = "0.1.0"

__all__ = [
    "AppendResult",
    "Arm",
    "ArmStats",
    "BanditConfig",
    "BackendUnavailableError",
    "BatchResult",
    "ConfigError",
    "ConflictError",
    "Event",
    "EventLog",
    "Head",
    "IntegrityError",
    "NotFoundError",
    "Observation",
    "Plaudit",
    "PlauditError",
    "Projection",
    "Selection",
    "StoredEvent",
    "Tx",
    "ValidationError",
    "VerifyReport",
    "__version__",
    "make_event",
    "register_projection",
    "unregister_projection",
    "uuid7",
]
