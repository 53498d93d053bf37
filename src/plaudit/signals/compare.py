"""`plaudit signal compare`: the promotion gate for a candidate routing policy.

The candidate is evaluated off-policy against the router it would replace, on the logged
decisions it did not learn from: a policy written by `plaudit signal learn` says in its
provenance which sessions it trained on, and up to which timestamp, and those decisions are
left out (a hand-written policy learned from nothing, so every decision counts). Where the
candidate ran in shadow, its recorded recommendations are matched to the router's decisions
by id: how often it agreed, how the decisions turned out when it did and when it did not, and
the estimate of the recommendations exactly as they were made.

The gate passes when the lower bound of the doubly robust estimate's paired difference from
the logging router is above `threshold` (default 0) and the estimate's effective sample size
is at least `min_ess`. Passing changes nothing: the result names the policy the router should
load, and the router's owner loads it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plaudit.errors import ValidationError
from plaudit.signals.evaluate import Skip, evaluate_policy
from plaudit.signals.policy import CallablePolicy, Policy
from plaudit.signals.recommend import policy_from, shadow_records
from plaudit.signals.split import bucket

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.signals.join import Progress

SCHEMA_VERSION = "plaudit_signal_compare_v1"
MIN_ESS = 100.0


def trained_on(policy: Policy) -> Skip | None:
    """Which decisions the policy learned from, by its provenance (None: none recorded)."""
    prov = policy.provenance or {}
    split, window = prov.get("split"), prov.get("window")
    if not isinstance(split, dict) or not isinstance(window, dict):
        return None
    try:
        seed, held = int(split["seed"]), int(split["holdout_percent"])
        start, newest = int(window["start_ms"]), int(window["newest_ts_ms"])
    except (KeyError, TypeError, ValueError):
        raise ValidationError(
            "policy",
            "provenance.split and provenance.window are not as learn writes them",
            where=policy.name,
        ) from None
    cache: dict[str, bool] = {}

    def skip(decision_id: str, session_id: str, ts_ms: Any) -> bool:
        if not isinstance(ts_ms, int) or not start <= ts_ms <= newest:
            return False
        key = session_id or decision_id
        trained = cache.get(key)
        if trained is None:
            trained = cache[key] = bucket(key, seed) >= held
        return trained

    return skip


def check_compare_options(*, threshold: Any, min_ess: Any) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValidationError("threshold", f"must be a number, got {threshold!r}")
    if isinstance(min_ess, bool) or not isinstance(min_ess, int | float) or min_ess < 0:
        raise ValidationError("min_ess", f"must be a number >= 0, got {min_ess!r}")


def _shadow(
    plaudit: Plaudit, pol: Policy, options: dict[str, Any], skip: Skip | None
) -> dict[str, Any] | None:
    """The candidate as it ran in shadow: agreement, outcomes, and the estimate of the
    recommendations as recorded."""
    records = shadow_records(plaudit, pol.digest)
    if not records:
        return None

    def recorded(decision: Mapping[str, Any]) -> dict[str, float]:
        return dict(records[decision["decision_id"]]["probabilities"])

    def only_shadowed(decision_id: str, session_id: str, ts_ms: Any) -> bool:
        if decision_id not in records:
            return True
        return skip is not None and skip(decision_id, session_id, ts_ms)

    result = evaluate_policy(
        CallablePolicy(recorded, name=f"{pol.name} (shadow)"),
        plaudit=plaudit,
        skip=only_shadowed,
        reward_key=[".".join(k) for k in pol.key],
        **options,
    )
    agreed = _agreement(plaudit, records, result["input"], options["now_ms"])
    return {
        "records": len(records),
        "with_outcome": agreed["n"],
        "agreement": agreed["rate"],
        "reward_when_agreed": agreed["agreed"],
        "reward_when_disagreed": agreed["disagreed"],
        "estimate": _brief(result),
    }


def _agreement(
    plaudit: Plaudit,
    records: Mapping[str, Mapping[str, Any]],
    window: Mapping[str, Any],
    now_ms: int | None,
) -> dict[str, Any]:
    """How often the recommendation was the router's choice, and the mean reward either way,
    over the shadowed decisions with an outcome in the window."""
    from plaudit.signals.evaluate import decode_row
    from plaudit.signals.export import joined_lines

    sums = {True: [0.0, 0], False: [0.0, 0]}
    now = int(time.time() * 1000) if now_ms is None else now_ms
    with joined_lines(
        plaudit,
        None,
        now=now,
        max_age_hours=window["max_age_hours"],
        rewards=window["rewards"],
        progress=None,
    ) as (_, rows):
        for did, _, chosen, _, _, line in rows:
            rec = records.get(did)
            if rec is None or line is None:
                continue
            reward = decode_row(line).reward
            same = rec.get("task") == chosen
            sums[same][0] += float(reward) if isinstance(reward, int | float) else 0.0
            sums[same][1] += 1
    n = sums[True][1] + sums[False][1]
    return {
        "n": n,
        "rate": sums[True][1] / n if n else None,
        "agreed": sums[True][0] / sums[True][1] if sums[True][1] else None,
        "disagreed": sums[False][0] / sums[False][1] if sums[False][1] else None,
    }


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    dr = (result.get("estimates") or {}).get("dr")
    return {
        "decisions": result["counts"]["joined_rows"],
        "evaluated": result["counts"]["evaluated"],
        "skipped": result["counts"]["skipped"],
        "logging": result["logging"],
        "dr": dr,
        "effective_sample_size": result["effective_sample_size"],
        "note": result["note"],
    }


def compare_policy(
    policy: Any,
    *,
    plaudit: Plaudit | None = None,
    seq_mem: str | os.PathLike[str] | None = None,
    threshold: float = 0.0,
    min_ess: float = MIN_ESS,
    default_propensity: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    max_age_hours: int = 168,
    rewards: Mapping[str, float] | None = None,
    reward_key: Sequence[str] | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compare `policy` with the logging router on the decisions it did not learn from, and
    with its shadow records (from a store); `result["promote"]` says whether the gate passed.
    """
    check_compare_options(threshold=threshold, min_ess=min_ess)
    pol = policy_from(policy)
    skip = trained_on(pol)
    options: dict[str, Any] = {
        "default_propensity": default_propensity,
        "bootstrap": bootstrap,
        "seed": seed,
        "level": level,
        "max_age_hours": max_age_hours,
        "rewards": rewards,
        "now_ms": now_ms,
    }
    offline = evaluate_policy(
        pol,
        plaudit=plaudit,
        seq_mem=seq_mem,
        skip=skip,
        reward_key=reward_key,
        progress=progress,
        **options,
    )
    shadow = None
    if plaudit is not None and seq_mem is None:
        shadow = _shadow(plaudit, pol, options, skip)
    dr = offline["estimates"]["dr"]
    ess = float(offline["effective_sample_size"])
    lower = None if dr is None or dr["difference_ci"] is None else dr["difference_ci"][0]
    if lower is None:
        reason = offline["note"] or "no interval (bootstrap 0): nothing to compare"
        ok = False
    elif lower <= threshold:
        reason = f"the lower bound of the difference, {lower:+.4f}, is not above {threshold:g}"
        ok = False
    elif ess < min_ess:
        reason = f"the effective sample size, {ess:.1f}, is below {min_ess:g}"
        ok = False
    else:
        reason = (
            f"the lower bound of the difference, {lower:+.4f}, is above {threshold:g}"
            f" with an effective sample size of {ess:.1f} >= {min_ess:g}"
        )
        ok = True
    return {
        "schema_version": SCHEMA_VERSION,
        "policy": {"name": pol.name, "kind": pol.kind, "digest": pol.digest},
        "input": offline["input"],
        "offline": _brief(offline),
        "shadow": shadow,
        "gate": {
            "threshold": threshold,
            "min_ess": min_ess,
            "difference_lower": lower,
            "effective_sample_size": ess,
            "pass": ok,
            "reason": reason,
        },
        "promote": ok,
        "load": {"policy": pol.name, "digest": pol.digest} if ok else None,
    }
