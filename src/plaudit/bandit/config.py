"""The bandit's settings. They are events in the log (`plaudit.bandit.config.v1`), so a rebuild
replays every update with the settings that were in force when it happened."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

import msgspec

from plaudit.bandit.arms import ARM_TYPES, parse_arm_id
from plaudit.errors import ValidationError

#: Beta(alpha, beta) priors by kind; curated components start optimistic (mean 0.75).
KIND_PRIORS: dict[str, tuple[float, float]] = {"curated": (0.75, 0.25), "learned": (0.5, 0.5)}


class BanditConfig(msgspec.Struct, kw_only=True):
    """Every knob of the policy and of the update rule, with the documented defaults."""

    #: Arms (ids or fnmatch globs such as "tool:*:WebSearch") never excluded.
    protected: list[str] = msgspec.field(default_factory=list)
    #: The highest bar an arm's posterior mean usefulness must reach to be in the core.
    threshold: float = 0.2
    #: What leaving out a needed arm costs, in tokens. An arm is in the core when its mean
    #: usefulness x miss_cost >= its own tokens. "auto": a retry with the full prompt, i.e. the
    #: considered inventory's tokens (at most the budget). None: the flat `threshold` for all.
    miss_cost_tokens: float | str | None = "auto"
    #: Miss costs of their own, by arm id, glob or arm type ({"tool:web:*": 50000}): what
    #: leaving out such an arm costs. Declaring one makes the arm *critical* (see `proof_*`).
    miss_costs: dict[str, float] = msgspec.field(default_factory=dict)
    #: The core takes an arm when the posterior probability that it clears its bar is at least
    #: this: arms near their bar stay in (and keep being observed) until the evidence clears
    #: them.
    core_level: float = 0.3
    #: Critical arms (protected, or with a prior or a miss cost of their own in `arm_priors`,
    #: `type_priors` or `miss_costs`): where a scope has had `proof_after` runs, such an arm
    #: stays in the core until its own runs there show, at level `proof_level`, that it is
    #: needed less often than max(its bar, `proof_bar`) (Jeffreys prior on that scope's
    #: evidence alone). A critical arm without a miss cost of its own has a bar of at most
    #: `proof_bar`, whatever its size. Every other arm is judged by expected cost alone.
    proof_level: float = 0.02
    proof_bar: float = 0.02
    proof_after: int = 40
    #: Every arm outside the core is explored with at least this probability (so every
    #: propensity is above 0, and a dead arm that comes alive is found again), at most
    #: explore_max.
    explore_floor: float = 0.005
    explore_max: float = 0.5
    #: Once a scope has had `proof_after` runs, an arm outside its core (the inventory fitting
    #: the budget) is retried with probability at least `explore_evidence` x P(theta >= bar)
    #: under that scope's own evidence for it (Jeffreys prior): a rate that falls with the
    #: evidence against the arm, not with time. The evidence counts half after
    #: `explore_half_life` of the scope's runs without observing the arm (0: never fades), so
    #: an arm left out long ago is looked at again: rediscovery never stalls.
    explore_evidence: float = 0.05
    explore_half_life: float = 160.0
    #: Under a binding budget, whether the search for needed arms shares what it found between
    #: arms of one module (a tool's or memory's category, a file's directory): siblings of a
    #: needed arm are tried sooner, once the modules have predicted what was found better
    #: than the inventory's average (so ids that say nothing change nothing).
    share_by_prefix: bool = True
    #: When the budget binds, this share of it is kept for `explore_slots` exploration slots.
    explore_share: float = 0.1
    explore_slots: int = 16
    #: Whether the search under a binding budget weighs an arm no run has referenced by how
    #: often the tried arms of its type (tool, skill, file, memory, section) were found needed.
    explore_by_type: bool = True
    #: Change detection ("detect", CUSUM per scope and arm) or "off" (nothing is forgotten
    #: unless a half-life is set).
    drift: str = "detect"
    #: CUSUM alarm levels (log-likelihood ratios) for a rise and for a drop of an arm's
    #: usefulness; a false drop costs more (nothing corrects an arm that is left out), so it
    #: needs more evidence.
    drift_threshold: float = 12.0
    drift_drop_threshold: float = 18.0
    #: After a detected change, the prior counts are scaled by this, so new data leads.
    drift_reset_prior_weight: float = 0.2
    #: A drop of an arm needed at least this often is a *central* drop: the task type's
    #: workflow changed, so it re-explores (`restart_*`), and the arm may have moved to
    #: another task type (`moved_*`).
    drift_central: float = 0.25
    restart_explore: float = 0.2
    restart_runs: int = 30
    moved_explore: float = 0.3
    moved_runs: int = 300
    #: Arms with fewer global pulls are always included (still subject to the budget).
    min_pulls: int = 5
    #: ... and, with a context, arms with fewer pulls in that context (a new task type tries
    #: its arms a few times before the shared prior may leave them out).
    min_pulls_context: int = 5
    #: Probability of a baseline (full-prompt) run; "auto" picks by inventory size. Learning
    #: does not need them (exploration does that), and savings are measured against each run's
    #: counterfactual without them; they measure the full prompt's observed usage, duration
    #: and errors, and each costs what the full prompt costs.
    baseline_rate: float | str = 0.0
    #: "active" selects and learns; "passive" includes everything and learns nothing.
    phase: str = "active"
    #: Evidence halves every this many observations (log order); None = no discount.
    half_life_runs: float | None = None
    #: Evidence halves every this many days of event time; None = no discount.
    half_life_days: float | None = None
    #: Whether a run observed with an error updates posteriors.
    update_on_error: bool = False
    #: Whether a registered arm the run left out but its output referenced (the agent fetched
    #: it) counts as a success: evidence that the run needed it.
    learn_from_misses: bool = True
    #: k0: the strength of a context's prior when no other context has evidence, and of the
    #: prior on the spread between contexts (see `hierarchy.py`).
    context_pseudo_count: float = 2.0
    #: Priors by arm type, e.g. {"file": [1, 1]}, overriding the kind default.
    type_priors: dict[str, list[float]] = msgspec.field(default_factory=dict)
    #: Priors by arm id or glob, the most specific override.
    arm_priors: dict[str, list[float]] = msgspec.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    def is_protected(self, arm_id: str) -> bool:
        return any(arm_id == p or fnmatch.fnmatchcase(arm_id, p) for p in self.protected)

    def declared_miss_cost(self, arm_id: str) -> float | None:
        """The arm's own miss cost (`miss_costs` by id, then glob, then arm type), if any."""
        costs = self.miss_costs
        if not costs:
            return None
        if arm_id in costs:
            return float(costs[arm_id])
        for pattern, cost in costs.items():
            if any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(arm_id, pattern):
                return float(cost)
        type_ = arm_id.split(":", 1)[0]
        return float(costs[type_]) if type_ in costs else None

    def is_critical(self, arm_id: str) -> bool:
        """Whether the user declared the arm critical: protected, or with a prior or a miss
        cost of its own."""
        if self.is_protected(arm_id) or self.declared_miss_cost(arm_id) is not None:
            return True
        if arm_id in self.arm_priors or arm_id.split(":", 1)[0] in self.type_priors:
            return True
        return any(fnmatch.fnmatchcase(arm_id, p) for p in self.arm_priors)

    def prior(self, arm_id: str, kind: str) -> tuple[float, float]:
        if arm_id in self.arm_priors:
            a, b = self.arm_priors[arm_id]
            return float(a), float(b)
        for pattern, (a, b) in self.arm_priors.items():
            if fnmatch.fnmatchcase(arm_id, pattern):
                return float(a), float(b)
        type_ = arm_id.split(":", 1)[0]
        if type_ in self.type_priors:
            a, b = self.type_priors[type_]
            return float(a), float(b)
        return KIND_PRIORS[kind]

    def miss_cost(self, inventory_tokens: int, budget: int) -> float | None:
        """The token cost of missing a needed arm for one run ("auto": a full-prompt retry)."""
        if self.miss_cost_tokens == "auto":
            return float(max(1, min(inventory_tokens, budget)))
        return None if self.miss_cost_tokens is None else float(self.miss_cost_tokens)

    def drift_settings(self) -> Any:
        from plaudit.bandit.evidence import DriftSettings

        return DriftSettings(
            enabled=self.drift == "detect",
            rise_threshold=self.drift_threshold,
            drop_threshold=self.drift_drop_threshold,
            reset_prior_weight=self.drift_reset_prior_weight,
            central=self.drift_central,
        )

    def rate_for(self, n_arms: int) -> float:
        """The baseline probability; "auto" follows the seed: 20% / 10% / 5% by inventory."""
        if self.baseline_rate == "auto":
            return 0.20 if n_arms <= 10 else 0.10 if n_arms <= 50 else 0.05
        return float(self.baseline_rate)


_FIELDS = set(BanditConfig.__struct_fields__)
#: Settings of earlier versions: accepted (and ignored) when an old log replays, refused with a
#: pointer to their replacement when set now.
LEGACY = {
    "optimism": "replaced by core_level",
    "propensity_samples": "unused since propensities are exact",
}


def _number(name: str, value: Any, lo: float, hi: float, *, integer: bool = False) -> float:
    ok = type(value) is int or (type(value) is float and not integer)
    if not ok or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise ValidationError(name, f"must be {kind} between {lo} and {hi}, got {value!r}")
    return value


def _prior_map(name: str, value: Any, *, keys_are_types: bool) -> dict[str, list[float]]:
    if not isinstance(value, Mapping):
        raise ValidationError(name, f"must be an object, got {type(value).__name__}")
    out: dict[str, list[float]] = {}
    for key, pair in value.items():
        if not isinstance(key, str) or not key:
            raise ValidationError(name, f"key {key!r} must be a non-empty string")
        if keys_are_types and key not in ARM_TYPES:
            raise ValidationError(
                f"{name}.{key}", f"unknown arm type (one of {', '.join(ARM_TYPES)})"
            )
        if not keys_are_types and not any(ch in key for ch in "*?["):
            parse_arm_id(key, where=name)
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(type(x) in (int, float) and 0 < x <= 1e6 for x in pair)
        ):
            raise ValidationError(
                f"{name}.{key}", f"must be [alpha, beta] with both in (0, 1e6], got {pair!r}"
            )
        out[key] = [float(pair[0]), float(pair[1])]
    return out


def _miss_cost_map(name: str, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ValidationError(name, f"must be an object, got {type(value).__name__}")
    out: dict[str, float] = {}
    for key, cost in value.items():
        if not isinstance(key, str) or not key:
            raise ValidationError(name, f"key {key!r} must be a non-empty string")
        if key not in ARM_TYPES and not any(ch in key for ch in "*?["):
            parse_arm_id(key, where=name)
        out[key] = float(_number(f"{name}.{key}", cost, 1.0, 1e12))
    return out


def validate_changes(changes: Mapping[str, Any], *, replay: bool = False) -> dict[str, Any]:
    """Check a partial update; returns it normalised. Unknown keys are an error; settings of
    earlier versions are dropped when `replay`ing an old log, and an error otherwise."""
    if not isinstance(changes, Mapping):
        raise ValidationError("config", f"must be an object, got {type(changes).__name__}")
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if key in LEGACY:
            if replay:
                continue
            raise ValidationError(str(key), f"is no longer a setting ({LEGACY[key]})")
        if key not in _FIELDS:
            raise ValidationError(
                str(key), f"unknown setting (one of {', '.join(sorted(_FIELDS))})"
            )
        if key == "protected":
            if not isinstance(value, list | tuple) or not all(
                isinstance(p, str) and p for p in value
            ):
                raise ValidationError(key, "must be a list of arm ids or glob patterns")
            for p in value:
                if not any(ch in p for ch in "*?["):
                    parse_arm_id(p, where="protected")
            out[key] = list(value)
        elif key == "threshold":
            out[key] = float(_number(key, value, 0.0, 1.0))
        elif key in ("min_pulls", "min_pulls_context", "proof_after"):
            out[key] = int(_number(key, value, 0, 1_000_000, integer=True))
        elif key in ("restart_runs", "moved_runs"):
            out[key] = int(_number(key, value, 0, 1_000_000_000, integer=True))
        elif key in (
            "core_level",
            "proof_level",
            "proof_bar",
            "drift_central",
            "restart_explore",
            "moved_explore",
        ):
            out[key] = float(_number(key, value, 0.0, 1.0))
        elif key == "baseline_rate":
            out[key] = value if value == "auto" else float(_number(key, value, 0.0, 1.0))
        elif key == "phase":
            if value not in ("active", "passive"):
                raise ValidationError(key, f"must be 'active' or 'passive', got {value!r}")
            out[key] = value
        elif key in ("half_life_runs", "half_life_days"):
            out[key] = None if value is None else float(_number(key, value, 1e-6, 1e12))
        elif key in ("update_on_error", "learn_from_misses", "explore_by_type", "share_by_prefix"):
            if type(value) is not bool:
                raise ValidationError(key, f"must be true or false, got {value!r}")
            out[key] = value
        elif key == "miss_cost_tokens":
            out[key] = value if value in (None, "auto") else float(_number(key, value, 1.0, 1e12))
        elif key == "miss_costs":
            out[key] = _miss_cost_map(key, value)
        elif key == "explore_evidence":
            out[key] = float(_number(key, value, 0.0, 1.0))
        elif key == "explore_half_life":
            out[key] = float(_number(key, value, 0.0, 1e12))
        elif key in ("explore_floor", "explore_max"):
            out[key] = float(_number(key, value, 1e-6, 1.0))
        elif key == "explore_share":
            out[key] = float(_number(key, value, 0.0, 0.9))
        elif key == "explore_slots":
            out[key] = int(_number(key, value, 1, 1000, integer=True))
        elif key == "drift":
            if value not in ("detect", "off"):
                raise ValidationError(key, f"must be 'detect' or 'off', got {value!r}")
            out[key] = value
        elif key in ("drift_threshold", "drift_drop_threshold"):
            out[key] = float(_number(key, value, 0.5, 1000.0))
        elif key == "drift_reset_prior_weight":
            out[key] = float(_number(key, value, 0.0, 1.0))
        elif key == "context_pseudo_count":
            out[key] = float(_number(key, value, 0.0, 1e9))
        elif key == "type_priors":
            out[key] = _prior_map(key, value, keys_are_types=True)
        elif key == "arm_priors":
            out[key] = _prior_map(key, value, keys_are_types=False)
    return out


def merged(base: BanditConfig, changes: Mapping[str, Any], *, replay: bool = False) -> BanditConfig:
    new = msgspec.convert(
        {**base.to_dict(), **validate_changes(changes, replay=replay)}, BanditConfig
    )
    if new.explore_floor > new.explore_max:
        raise ValidationError(
            "explore_floor", f"{new.explore_floor} is above explore_max {new.explore_max}"
        )
    return new


def from_dict(data: Mapping[str, Any]) -> BanditConfig:
    known = {k: v for k, v in data.items() if k in _FIELDS}
    return msgspec.convert(known, BanditConfig)
