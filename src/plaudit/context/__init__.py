"""The context bandit: learn which prompt components earn their tokens.

`Arm`, `Selection` and the other plain types import without numpy, so re-exporting them from
`plaudit` costs shell hooks nothing; `Bandit` (numpy) loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plaudit.context.arms import ARM_TYPES, Arm, coerce_arms, parse_arm_id
from plaudit.context.config import BanditConfig
from plaudit.context.results import ArmStats, Observation, Selection

if TYPE_CHECKING:
    from plaudit.context.bandit import Bandit


def __getattr__(name: str) -> Any:
    if name == "Bandit":
        from plaudit.context.bandit import Bandit

        return Bandit
    raise AttributeError(f"module 'plaudit.context' has no attribute {name!r}")


__all__ = [
    "ARM_TYPES",
    "Arm",
    "ArmStats",
    "Bandit",
    "BanditConfig",
    "Observation",
    "Selection",
    "coerce_arms",
    "parse_arm_id",
]
