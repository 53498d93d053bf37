"""plaudit: a reinforcement-feedback layer for LLM agents on one tamper-evident event log.

Names are imported on first use, so `import plaudit` (and a shell hook's `plaudit signal emit`)
does not pay for modules it never touches.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing costs ~10 ms to import; shell hooks pay it on every call

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Plaudit": "plaudit.core",
    "Arm": "plaudit.bandit",
    "ArmStats": "plaudit.bandit",
    "BanditConfig": "plaudit.bandit",
    "Observation": "plaudit.bandit",
    "Selection": "plaudit.bandit",
    "BackendUnavailableError": "plaudit.errors",
    "ConfigError": "plaudit.errors",
    "ConflictError": "plaudit.errors",
    "DeadlineError": "plaudit.errors",
    "IntegrityError": "plaudit.errors",
    "ListenError": "plaudit.errors",
    "MissingExtraError": "plaudit.errors",
    "NotFoundError": "plaudit.errors",
    "PlauditError": "plaudit.errors",
    "StoreNotFoundError": "plaudit.errors",
    "ValidationError": "plaudit.errors",
    "Event": "plaudit.events",
    "StoredEvent": "plaudit.events",
    "make_event": "plaudit.events",
    "TraceContext": "plaudit.tracecontext",
    "current_trace": "plaudit.tracecontext",
    "trace_context": "plaudit.tracecontext",
    "uuid7": "plaudit.ids",
    "evaluate_policy": "plaudit.signals.evaluate",
    "LearnRefused": "plaudit.signals.learn",
    "compare_policy": "plaudit.signals.compare",
    "learn_policy": "plaudit.signals.learn",
    "recommend": "plaudit.signals.recommend",
    "Checkpoint": "plaudit.store.checkpoints",
    "ProofReport": "plaudit.store.proofs",
    "check_proof": "plaudit.store.proofs",
    "check_consistency": "plaudit.store.proofs",
    "LogView": "plaudit.store",
    "Writer": "plaudit.store",
    "AppendResult": "plaudit.store",
    "BatchResult": "plaudit.store",
    "EventLog": "plaudit.store",
    "Head": "plaudit.store",
    "Projection": "plaudit.store",
    "Tx": "plaudit.store",
    "VerifyReport": "plaudit.store",
    "register_projection": "plaudit.store",
    "unregister_projection": "plaudit.store",
}

__all__ = [
    "AppendResult",
    "Arm",
    "ArmStats",
    "BackendUnavailableError",
    "BanditConfig",
    "BatchResult",
    "Checkpoint",
    "ConfigError",
    "ConflictError",
    "DeadlineError",
    "Event",
    "EventLog",
    "Head",
    "IntegrityError",
    "LearnRefused",
    "ListenError",
    "LogView",
    "MissingExtraError",
    "NotFoundError",
    "Observation",
    "Plaudit",
    "PlauditError",
    "Projection",
    "ProofReport",
    "Selection",
    "StoreNotFoundError",
    "StoredEvent",
    "TraceContext",
    "Tx",
    "ValidationError",
    "VerifyReport",
    "Writer",
    "__version__",
    "check_consistency",
    "check_proof",
    "compare_policy",
    "current_trace",
    "evaluate_policy",
    "learn_policy",
    "make_event",
    "recommend",
    "register_projection",
    "trace_context",
    "unregister_projection",
    "uuid7",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'plaudit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from plaudit.bandit import Arm, ArmStats, BanditConfig, Observation, Selection
    from plaudit.core import Plaudit
    from plaudit.errors import (
        BackendUnavailableError,
        ConfigError,
        ConflictError,
        DeadlineError,
        IntegrityError,
        ListenError,
        MissingExtraError,
        NotFoundError,
        PlauditError,
        StoreNotFoundError,
        ValidationError,
    )
    from plaudit.events import Event, StoredEvent, make_event
    from plaudit.ids import uuid7
    from plaudit.signals.evaluate import evaluate_policy
    from plaudit.store import (
        AppendResult,
        BatchResult,
        EventLog,
        Head,
        LogView,
        Projection,
        Tx,
        VerifyReport,
        Writer,
        register_projection,
        unregister_projection,
    )
    from plaudit.store.checkpoints import Checkpoint
    from plaudit.store.proofs import ProofReport, check_consistency, check_proof
    from plaudit.tracecontext import TraceContext, current_trace, trace_context
