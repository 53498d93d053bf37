"""The MCP tools and resources: their schemas, descriptions and what each one calls.

Every tool is one call of the public library (`Plaudit`'s bandit, ledger and signals), so MCP
adds no rules of its own: arguments are checked against the tool's JSON schema (one line naming
the argument when they do not fit), then the library checks meaning and raises the same
`PlauditError` the CLI prints. Nothing here imports the MCP SDK; `plaudit.mcp.server` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import NotFoundError, ValidationError
from plaudit.files import confine
from plaudit.signals.contract import OUTCOMES
from plaudit.signals.formats import FORMATS

if TYPE_CHECKING:
    from plaudit.core import Plaudit

Json = dict[str, Any]

#: Where the server's files may go: `None` for a local (stdio) server, which may write where
#: its user points it; the export root (or nothing allowed) for one reached over HTTP.
LOCAL = "local"


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: Json
    call: Callable[[Plaudit, Json, str | None], Any]
    writes: bool = True


def _obj(properties: Json, required: tuple[str, ...] = ()) -> Json:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _text(description: str, *, max_length: int = 10_000, min_length: int = 0) -> Json:
    out: Json = {"type": "string", "description": description, "maxLength": max_length}
    if min_length:
        out["minLength"] = min_length
    return out


TRACEPARENT: Json = {
    "type": "string",
    "description": "W3C traceparent of the span this call belongs to, so tracing backends can "
    "attach the result to it (e.g. 00-<trace id>-<span id>-01).",
    "maxLength": 512,
}
SESSION = _text("Session or conversation id the call belongs to.", max_length=256)
INT53 = 2**53 - 1

ARM: Json = _obj(
    {
        "id": _text(
            "type:group:name, e.g. tool:exec:Bash or file:workspace:README.md", max_length=512
        ),
        "tokens": {"type": "integer", "minimum": 0, "maximum": 10_000_000},
        "content": _text("Text whose use in the output counts as a reference.", max_length=1 << 18),
        "kind": {"type": "string", "enum": ["curated", "learned"]},
    },
    ("id", "tokens"),
)


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


# -- bandit ------------------------------------------------------------------------------------


def _choose_context(p: Plaudit, a: Json, _root: str | None) -> Any:
    sel = p.bandit.select(
        a.get("arms"),
        token_budget=a.get("token_budget", 8000),
        context=a.get("context"),
        seed=a.get("seed"),
        session_id=a.get("session_id", "default"),
    )
    return sel.to_dict()


def _report_run(p: Plaudit, a: Json, _root: str | None) -> Any:
    obs = p.bandit.observe(
        a["run_id"],
        a.get("output_text", ""),
        a.get("tool_calls", ()),
        usage_tokens=a.get("usage_tokens"),
        duration_ms=a.get("duration_ms"),
        error=a.get("error"),
    )
    return obs.to_dict()


def _posteriors(p: Plaudit, a: Json, _root: str | None) -> Any:
    context = a.get("context")
    return {"context": context, "arms": [s.to_dict() for s in p.bandit.posteriors(context)]}


# -- ledger ------------------------------------------------------------------------------------


def _record_reward(p: Plaudit, a: Json, _root: str | None) -> Any:
    keys = ("points", "source", "session", "key")
    return _plain(p.ledger.record(a["category"], a["action"], **{k: a[k] for k in keys if k in a}))


def _read_score(p: Plaudit, a: Json, _root: str | None) -> Any:
    return {"score": p.ledger.score(), "breakdown": p.ledger.breakdown()}


# -- router signals ----------------------------------------------------------------------------


def _pick(a: Json, *keys: str) -> Json:
    return {k: a[k] for k in keys if k in a}


def _decision(p: Plaudit, a: Json, _root: str | None) -> Any:
    return p.signals.decision(
        a["decision_id"],
        a["chosen_task"],
        a["confidence"],
        a.get("user_intent", ""),
        **_pick(a, "session_id", "candidates", "context", "propensity"),
    )


def _outcome(p: Plaudit, a: Json, _root: str | None) -> Any:
    return p.signals.outcome(
        a["decision_id"],
        a["outcome"],
        a["task_executed"],
        a.get("time_to_resolution_ms", 0),
        **_pick(a, "manual_override_task", "error_kind", "session_id"),
    )


def _override(p: Plaudit, a: Json, _root: str | None) -> Any:
    return p.signals.override(
        a["decision_id"],
        a["original_task"],
        a["override_task"],
        **_pick(a, "reason", "session_id"),
    )


def _export(p: Plaudit, a: Json, root: str | None) -> Any:
    output_dir = a["output_dir"] if root == LOCAL else confine(root, "output_dir", a["output_dir"])
    return p.signals.export(
        output_dir, **_pick(a, "split_by", "formats", "seed", "val_percent", "test_percent")
    )


def _recommend(p: Plaudit, a: Json, root: str | None) -> Any:
    policy = a["policy"] if root == LOCAL else confine(root, "policy", a["policy"])
    return p.signals.recommend(
        policy,
        **_pick(a, "context", "candidates", "decision_id", "session_id", "greedy", "shadow"),
    )


DECISION_ID = _text("The router decision's id.", max_length=200, min_length=1)
TASK = _text("A task name, e.g. ai:flow/dev-check.", max_length=1000, min_length=1)

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "choose_context",
            "Choose which prompt components (tools, skills, files, memories) to include within "
            "a token budget; returns run_id and the ids to include. Report the run afterwards.",
            _obj(
                {
                    "arms": {
                        "type": "array",
                        "items": ARM,
                        "maxItems": 20_000,
                        "description": "Candidate components; omit to consider every "
                        "registered one.",
                    },
                    "token_budget": {"type": "integer", "minimum": 0, "maximum": 100_000_000},
                    "context": _text("Task type, e.g. coding.", max_length=200, min_length=1),
                    "seed": {"type": "integer", "minimum": 0, "maximum": INT53},
                    "session_id": SESSION,
                    "traceparent": TRACEPARENT,
                }
            ),
            _choose_context,
        ),
        Tool(
            "report_run",
            "Report what a chosen run's model produced (output text and tool calls); plaudit "
            "rewards each included component by whether the output used it.",
            _obj(
                {
                    "run_id": _text("From choose_context.", max_length=200, min_length=1),
                    "output_text": _text("The model's output.", max_length=16 << 20),
                    "tool_calls": {
                        "type": "array",
                        "maxItems": 10_000,
                        "items": {
                            "type": "object",
                            "properties": {"name": _text("Tool name.", min_length=1)},
                            "required": ["name"],
                        },
                    },
                    "usage_tokens": {"type": "integer", "minimum": 0, "maximum": INT53},
                    "duration_ms": {"type": "number", "minimum": 0},
                    "error": _text("The run's error, if it failed."),
                    "traceparent": TRACEPARENT,
                },
                ("run_id",),
            ),
            _report_run,
        ),
        Tool(
            "record_reward",
            "Record a reward or penalty in the ledger under a category (points default to the "
            "category's; some categories need a source {kind, id}). key makes retries safe.",
            _obj(
                {
                    "category": _text(
                        "Ledger category, e.g. successful_validation.", max_length=100
                    ),
                    "action": _text("What was done, in a sentence.", max_length=2000, min_length=1),
                    "points": {"type": "integer", "minimum": -1_000_000, "maximum": 1_000_000},
                    "source": {
                        "type": "object",
                        "properties": {"kind": {"type": "string"}, "id": {"type": "string"}},
                        "required": ["kind", "id"],
                        "additionalProperties": False,
                    },
                    "session": SESSION,
                    "key": _text("Idempotency key.", max_length=200, min_length=1),
                    "traceparent": TRACEPARENT,
                },
                ("category", "action"),
            ),
            _record_reward,
        ),
        Tool(
            "read_score",
            "Read the ledger's score (total, session, lifetime, verified) and its breakdown by "
            "category.",
            _obj({}),
            _read_score,
            writes=False,
        ),
        Tool(
            "read_posteriors",
            "Read what the bandit has learnt: each component's posterior usefulness, globally "
            "or for one task type.",
            _obj({"context": _text("Task type.", max_length=200, min_length=1)}),
            _posteriors,
            writes=False,
        ),
        Tool(
            "router_decision",
            "Record a task router's decision: which task it chose for a user intent, and how "
            "confident it was.",
            _obj(
                {
                    "decision_id": DECISION_ID,
                    "chosen_task": TASK,
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "user_intent": _text("What the user asked for.", max_length=8000),
                    "candidates": {"type": "array", "maxItems": 1000},
                    "context": {"type": "object"},
                    "propensity": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                    "session_id": SESSION,
                    "traceparent": TRACEPARENT,
                },
                ("decision_id", "chosen_task", "confidence"),
            ),
            _decision,
        ),
        Tool(
            "router_outcome",
            "Record how a routed task ended: success, partial, failure or wasted.",
            _obj(
                {
                    "decision_id": DECISION_ID,
                    "outcome": {"type": "string", "enum": list(OUTCOMES)},
                    "task_executed": TASK,
                    "time_to_resolution_ms": {"type": "integer", "minimum": 0, "maximum": INT53},
                    "manual_override_task": _text("Task the user switched to.", max_length=1000),
                    "error_kind": _text("Kind of error, if it failed.", max_length=1000),
                    "session_id": SESSION,
                    "traceparent": TRACEPARENT,
                },
                ("decision_id", "outcome", "task_executed"),
            ),
            _outcome,
        ),
        Tool(
            "router_override",
            "Record that the user overrode a router decision with another task.",
            _obj(
                {
                    "decision_id": DECISION_ID,
                    "original_task": TASK,
                    "override_task": TASK,
                    "reason": _text("Why.", max_length=8000),
                    "session_id": SESSION,
                    "traceparent": TRACEPARENT,
                },
                ("decision_id", "original_task", "override_task"),
            ),
            _override,
        ),
        Tool(
            "export_training_set",
            "Export the router's joined, deduplicated training set (train/val/test files and "
            "summary.json) to a directory; returns the summary.",
            _obj(
                {
                    "output_dir": _text(
                        "Directory to write (on a server: under its export root).",
                        max_length=4096,
                        min_length=1,
                    ),
                    "split_by": {"type": "string", "enum": ["decision", "session"]},
                    "formats": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "string", "enum": list(FORMATS)},
                    },
                    "seed": {"type": "integer", "minimum": -INT53, "maximum": INT53},
                    "val_percent": {"type": "integer", "minimum": 0, "maximum": 100},
                    "test_percent": {"type": "integer", "minimum": 0, "maximum": 100},
                },
                ("output_dir",),
            ),
            _export,
        ),
        Tool(
            "router_recommend",
            "A learned routing policy's recommendation for one decision: the task to pick and "
            "each candidate's probability; with shadow=true it is recorded beside the router's "
            "own decision of the same id.",
            _obj(
                {
                    "policy": _text(
                        "The policy file `plaudit signal learn` wrote (on a server: under its "
                        "export root).",
                        max_length=4096,
                        min_length=1,
                    ),
                    "context": {"type": "object", "description": "The decision's context."},
                    "candidates": {"type": "array", "items": TASK, "maxItems": 1000},
                    "decision_id": DECISION_ID,
                    "session_id": SESSION,
                    "greedy": {"type": "boolean", "description": "Take the most probable task."},
                    "shadow": {"type": "boolean", "description": "Record it (needs decision_id)."},
                    "traceparent": TRACEPARENT,
                },
                ("policy",),
            ),
            _recommend,
        ),
    )
}


# -- argument checking -------------------------------------------------------------------------


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(TOOLS[name].schema)


def _where(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def check_arguments(name: str, arguments: Any) -> Json:
    """The arguments, or ValidationError naming the first that does not fit the schema."""
    if name not in TOOLS:
        raise NotFoundError(f"no tool named {name!r} (tools: {', '.join(sorted(TOOLS))})")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ValidationError("arguments", "must be an object")
    arguments = dict(arguments)
    errors = sorted(_validator(name).iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return arguments
    err = errors[0]
    field = _where(err.absolute_path)
    if err.validator == "required":
        missing = next(k for k in err.validator_value if k not in err.instance)
        raise ValidationError(_join(field, missing), "is required")
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        raise ValidationError(
            _join(field, extra[0]), f"unknown argument (allowed: {', '.join(allowed)})"
        )
    if err.validator == "type":
        got = type(err.instance).__name__
        raise ValidationError(field or "arguments", f"must be {err.validator_value}, got {got}")
    message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    raise ValidationError(field or "arguments", message)


def _join(base: str, key: str) -> str:
    return f"{base}.{key}" if base else key


def call_tool(p: Plaudit, name: str, arguments: Any, *, root: str | None = LOCAL) -> Any:
    """Run tool `name` (in the caller's trace context); raises PlauditError on bad input."""
    args = check_arguments(name, arguments)
    args.pop("traceparent", None)
    return TOOLS[name].call(p, args, root)


# -- resources ---------------------------------------------------------------------------------

SCORE_URI = "plaudit://ledger/score"
HEAD_URI = "plaudit://log/head"
POSTERIORS_URI = "plaudit://bandit/posteriors"
POSTERIORS_TEMPLATE = "plaudit://bandit/posteriors/{context}"

RESOURCES: dict[str, tuple[str, str]] = {
    SCORE_URI: ("ledger score", "The ledger's score and its breakdown by category."),
    HEAD_URI: ("log head", "The event log's length and head digest (keep it to verify later)."),
    POSTERIORS_URI: ("posteriors", "Every component's posterior usefulness, across task types."),
}


def read_resource(p: Plaudit, uri: str) -> Any:
    if uri == SCORE_URI:
        return _read_score(p, {}, None)
    if uri == HEAD_URI:
        head = p.log.head()
        return {"length": head.length, "head": head.digest}
    if uri == POSTERIORS_URI:
        return _posteriors(p, {}, None)
    prefix = POSTERIORS_URI + "/"
    if uri.startswith(prefix) and len(uri) > len(prefix):
        from urllib.parse import unquote

        return _posteriors(p, {"context": unquote(uri[len(prefix) :])}, None)
    raise NotFoundError(
        f"no resource {uri!r} (resources: {', '.join(RESOURCES)}, {POSTERIORS_TEMPLATE})"
    )


__all__ = [
    "HEAD_URI",
    "LOCAL",
    "POSTERIORS_TEMPLATE",
    "POSTERIORS_URI",
    "RESOURCES",
    "SCORE_URI",
    "TOOLS",
    "Tool",
    "call_tool",
    "check_arguments",
    "read_resource",
]
