"""Router signals: the decision -> outcome -> override contract, export and quality gates.

Importing this package is cheap on purpose: `plaudit signal emit` runs once per routing event
from shell hooks, so `Signals` and the export and audit machinery load on first use.
"""

from __future__ import annotations

from plaudit.signals.contract import DECISION, EVENT_TYPES, OUTCOME, OUTCOMES, OVERRIDE

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from plaudit.signals.api import Signals

__all__ = ["DECISION", "EVENT_TYPES", "OUTCOME", "OUTCOMES", "OVERRIDE", "Signals"]


def __getattr__(name: str) -> Any:
    if name == "Signals":
        from plaudit.signals.api import Signals

        return Signals
    raise AttributeError(f"module 'plaudit.signals' has no attribute {name!r}")
