"""What the bandit hands back: plain msgspec structs that serialise straight to JSON."""

from __future__ import annotations

from typing import Any

import msgspec


class Selection(msgspec.Struct, kw_only=True):
    """One recorded run: what to put in the prompt (`included`) and what was left out."""

    run_id: str
    included: list[str]
    excluded: list[str]
    is_baseline: bool
    used_tokens: int
    budget: int
    context: str | None = None
    phase: str = "active"
    #: Each included arm's probability of inclusion under the policy (its propensity).
    probabilities: dict[str, float] = msgspec.field(default_factory=dict)
    #: A note for the prompt naming what was left out and how to get it (`guidance.py`);
    #: None when nothing that can be fetched was left out.
    guidance: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


class Observation(msgspec.Struct, kw_only=True):
    """The outcome of a run and the reward each included arm received (1 referenced, 0 not)."""

    run_id: str
    rewards: dict[str, int]
    referenced: list[str]
    updated: bool
    status: str  # "appended", or "present" when the same observation was already recorded
    #: registered arms the run left out that the output referenced all the same (the agent
    #: fetched them): learned from as successes when `learn_from_misses` is on
    missed: list[str] = msgspec.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


class ArmStats(msgspec.Struct, kw_only=True):
    """An arm's posterior in one scope (global, or a context shrunk towards global)."""

    id: str
    alpha: float
    beta: float
    mean: float
    variance: float
    ci_low: float
    ci_high: float
    pulls: int
    confidence: str
    tokens: int | None = None
    kind: str | None = None
    protected: bool = False
    context: str | None = None
    #: fewer pulls than the policy wants before it trusts the posterior (`min_pulls`
    #: overall, `min_pulls_context` in the context): while the inventory fits the budget,
    #: such an arm is always included
    underexplored: bool = False

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)
