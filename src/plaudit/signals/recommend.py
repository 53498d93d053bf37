"""`plaudit signal recommend`: a policy's probabilities for one decision, and its pick; in
shadow mode, the recommendation recorded beside the router's own decision.

A plain function (`recommend`) over a policy file, a table, a model or any policy object, so
the CLI, the HTTP API and an MCP tool can all call it. Policies read from files are kept
while the file is unchanged (its modification time and size), so a router asking for every
decision pays for the lookup alone.

The pick is drawn from the probabilities, so the router's logs keep the exploration the
policy was built with and stay evaluable: log the recommendation's `propensity` with the
decision. With a decision id the draw is a hash of the policy and the id, so asking again for
the same decision gives the same pick. `greedy=True` takes the most probable task instead.

Shadow mode: the router keeps deciding; `record_shadow` appends the recommendation as a
`plaudit.signals.shadow.v1` event under the decision's id, so `plaudit signal compare` can
report how often the candidate agreed with the router and how the decisions turned out. Its
id is derived from the decision id and the policy's digest, so a retry is `present`.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plaudit.errors import ValidationError
from plaudit.signals.policy import DECISION_FIELDS, Policy, candidate_tasks, load_policy

if TYPE_CHECKING:
    from plaudit.core import Plaudit

SCHEMA_VERSION = "plaudit_signal_recommendation_v1"
SHADOW = "plaudit.signals.shadow.v1"
_FILES: dict[str, tuple[tuple[int, int], Policy]] = {}
_LOCK = threading.Lock()
_MAX_FILES = 64


def policy_from(policy: Any) -> Policy:
    """A checked policy from a path (kept while the file is unchanged), a table or model as a
    mapping, a callable or `module:function`, or a Policy."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str | os.PathLike) and os.fspath(policy) not in ("", "-"):
        path = os.path.abspath(os.path.expanduser(os.fspath(policy)))
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return load_policy(policy)
        stamp = (st.st_mtime_ns, st.st_size)
        with _LOCK:
            kept = _FILES.get(path)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        loaded = load_policy(policy)  # named as the caller named it
        with _LOCK:
            if len(_FILES) >= _MAX_FILES:
                _FILES.clear()
            _FILES[path] = (stamp, loaded)
        return loaded
    return load_policy(policy)


def decision_of(
    *,
    context: Mapping[str, Any] | None = None,
    candidates: Sequence[Any] | None = None,
    decision: Mapping[str, Any] | None = None,
    decision_id: str | None = None,
) -> dict[str, Any]:
    """The decision as a policy sees it: `decision`'s fields (those a policy may read), with
    `context`, `candidates` and `decision_id` put over them when given."""
    out: dict[str, Any] = {}
    if decision is not None:
        if not isinstance(decision, Mapping):
            raise ValidationError("decision", "must be a JSON object of decision fields")
        unknown = [k for k in decision if k not in DECISION_FIELDS]
        if unknown:
            fields = ", ".join(DECISION_FIELDS)
            raise ValidationError(
                "decision", f"{unknown[0]!r} is not a field a policy sees (one of: {fields})"
            )
        out.update(decision)
    if context is not None:
        if not isinstance(context, Mapping):
            raise ValidationError("context", f"must be a JSON object, got {type(context).__name__}")
        out["context"] = dict(context)
    if candidates is not None:
        if isinstance(candidates, str | bytes) or not isinstance(candidates, Sequence):
            raise ValidationError("candidates", "must be a list of tasks")
        out["candidates"] = list(candidates)
    if decision_id is not None:
        if not isinstance(decision_id, str) or not decision_id:
            raise ValidationError("decision_id", "must be a non-empty string")
        out["decision_id"] = decision_id
    return out


def _restricted(
    tasks: tuple[str, ...], probs: tuple[float, ...], candidates: Any
) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """A table's distribution limited to the decision's candidates, renormalised; the
    candidates evenly when the table gives none of them any probability."""
    named = list(dict.fromkeys(candidate_tasks(candidates)))
    if not named:
        return tasks, probs
    allowed = set(named)
    kept = [(t, p) for t, p in zip(tasks, probs, strict=True) if t in allowed]
    total = sum(p for _, p in kept)
    if total <= 0:
        return tuple(named), tuple(1.0 / len(named) for _ in named)
    return tuple(t for t, _ in kept), tuple(p / total for _, p in kept)


def _draw(digest: str | None, decision_id: str | None) -> float:
    """A number in [0, 1): a hash of the policy and the decision id when there is one (the
    same decision gets the same pick), else random."""
    if decision_id is None:
        return random.random()
    h = hashlib.sha256(f"{digest or ''}\x00{decision_id}".encode()).digest()
    return int.from_bytes(h[:7], "big") / float(1 << 56)


def recommend(
    policy: Any,
    *,
    context: Mapping[str, Any] | None = None,
    candidates: Sequence[Any] | None = None,
    decision: Mapping[str, Any] | None = None,
    decision_id: str | None = None,
    greedy: bool = False,
) -> dict[str, Any]:
    """The policy's probabilities for one decision and its pick.

    `policy`: a file (table or learned model), a mapping, a callable or a Policy. The decision
    is `decision` (any of the fields a policy sees) with `context`, `candidates` and
    `decision_id` over it. A model chooses among the candidates it knows; a table's
    distribution is limited to the candidates (renormalised) when they are given. Returns
    `{"schema_version", "decision_id", "task", "propensity", "probabilities", "greedy",
    "policy": {"name", "kind", "digest"}}`; `propensity` is the pick's probability, the one
    to log with the router's decision when it follows the recommendation.
    """
    pol = policy_from(policy)
    d = decision_of(
        context=context, candidates=candidates, decision=decision, decision_id=decision_id
    )
    tasks, probs = pol.distribution(d)
    if pol.kind != "model" and "candidates" in d:
        tasks, probs = _restricted(tasks, probs, d["candidates"])
    if greedy:
        pick = max(range(len(tasks)), key=probs.__getitem__)
    else:
        u = _draw(pol.digest, d.get("decision_id")) * sum(probs)
        pick, acc = len(tasks) - 1, 0.0
        for i, p in enumerate(probs):
            acc += p
            if u < acc:
                pick = i
                break
    return {
        "schema_version": SCHEMA_VERSION,
        "decision_id": d.get("decision_id"),
        "task": tasks[pick],
        "propensity": probs[pick],
        "probabilities": dict(zip(tasks, probs, strict=True)),
        "greedy": bool(greedy),
        "policy": {"name": pol.name, "kind": pol.kind, "digest": pol.digest},
    }


def record_shadow(
    plaudit: Plaudit, recommendation: Mapping[str, Any], *, session_id: str | None = None
) -> dict[str, Any]:
    """Record `recommendation` (from `recommend`, with a decision id) beside the router's
    decision of the same id; returns `{"id", "status", "seq"}` (a retry is `present`)."""
    from plaudit.events import make_event

    did = recommendation.get("decision_id")
    if not isinstance(did, str) or not did:
        raise ValidationError("decision_id", "shadow mode needs the decision's id")
    digest = recommendation["policy"].get("digest") or recommendation["policy"]["name"]
    event_id = "shd-" + hashlib.sha256(f"{did}\x00{digest}".encode()).hexdigest()[:40]
    payload = {
        "decision_id": did,
        "task": recommendation["task"],
        "propensity": recommendation["propensity"],
        "probabilities": dict(recommendation["probabilities"]),
        "policy": dict(recommendation["policy"]),
    }
    event = make_event(
        SHADOW,
        payload,
        id=event_id,
        session_id=session_id or "flow-router",
        source="plaudit",
    )
    result = plaudit.log.append(event)
    return {"id": event_id, "status": result.status, "seq": result.seq}


def shadow_records(plaudit: Plaudit, digest: str | None) -> dict[str, dict[str, Any]]:
    """The shadow recommendations of the policy with `digest` (every policy's when None), by
    decision id (the last recorded wins)."""
    import msgspec

    out: dict[str, dict[str, Any]] = {}
    with plaudit.log.reading() as view:
        for (payload,) in view.scan_columns(("payload",), types=[SHADOW]):
            try:
                rec = msgspec.json.decode(payload)
            except msgspec.DecodeError:
                continue
            policy = rec.get("policy") if isinstance(rec, dict) else None
            if not isinstance(policy, dict) or (
                digest is not None and policy.get("digest") != digest
            ):
                continue
            if isinstance(rec.get("decision_id"), str):
                out[rec["decision_id"]] = rec
    return out
