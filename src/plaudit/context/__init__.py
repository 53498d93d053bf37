"""The context bandit: learn which prompt components earn their tokens."""

from plaudit.context.arms import ARM_TYPES, Arm, coerce_arms, parse_arm_id
from plaudit.context.bandit import Bandit
from plaudit.context.config import BanditConfig
from plaudit.context.results import ArmStats, Observation, Selection

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
