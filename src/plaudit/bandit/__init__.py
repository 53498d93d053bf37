"""The context bandit: learn which prompt components earn their tokens.

`Arm`, `Selection` and the other plain types import without numpy, so re-exporting them from
`plaudit` costs shell hooks nothing; `Bandit` (numpy) loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plaudit.bandit.arms import ARM_TYPES, Arm, coerce_arms, parse_arm_id
from plaudit.bandit.config import BanditConfig
from plaudit.bandit.results import ArmStats, Observation, Selection

if TYPE_CHECKING:
    from plaudit.bandit.api import Bandit


def __getattr__(name: str) -> Any:
    if name == "Bandit":
        from plaudit.bandit.api import Bandit

        return Bandit
    raise AttributeError(f"module 'plaudit.bandit' has no attribute {name!r}")


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
