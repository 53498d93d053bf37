"""What plaudit reads from a span: the OpenTelemetry GenAI semantic conventions, OpenInference's,
and plaudit's own attributes (docs/otel.md lists them all).

- **The model's output** (the text the bandit looks for references in), from spans of model
  calls and agents: GenAI `gen_ai.output.messages` (text parts), the older `gen_ai.completion`
  and `gen_ai.completion.N.content`, `gen_ai.choice` span events; OpenInference
  `llm.output_messages.N.message.content` (and `.contents.M.message_content.text`), else
  `output.value`. Tool results are not the model's output and are not read.
- **Tool calls**: tool-call parts of output messages (GenAI `tool_call` parts,
  `gen_ai.completion.N.tool_calls.M.name`, OpenInference `...tool_calls.M.tool_call.function
  .name`), and tool spans (GenAI `execute_tool` with `gen_ai.tool.name`, OpenInference `TOOL`
  with `tool.name`).
- **Usage**: `gen_ai.usage.input_tokens` + `output_tokens` (or `prompt_tokens` +
  `completion_tokens`); OpenInference `llm.token_count.total` (or prompt + completion).
- **plaudit's names**: `plaudit.run_id` (the bandit run the span belongs to), and
  `plaudit.decision_id` with optional `plaudit.outcome` and `plaudit.task_executed` (a router
  outcome). OpenInference's `metadata` (a JSON object) may carry them too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from plaudit.signals.contract import OUTCOMES
from plaudit.traces.otlp import Span

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
OI_MODEL = frozenset({"LLM"})
OI_AGENT = frozenset({"AGENT"})
OI_TOOL = frozenset({"TOOL"})
#: Longest text taken from one attribute (the bandit reads at most 16 MiB per run).
MAX_TEXT = 1 << 20

_COMPLETION = re.compile(
    r"^gen_ai\.completion\.(\d+)\.(content|tool_calls\.(\d+)\.(name|arguments|id))$"
)
_OI_OUTPUT = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.(?:"
    r"(content)|contents\.(\d+)\.message_content\.(text)|"
    r"tool_calls\.(\d+)\.tool_call\.(function\.name|function\.arguments|id))$"
)


@dataclass
class Extract:
    """One span, as plaudit reads it. `role` is 'model', 'agent', 'tool' or 'other' for a
    span of a convention plaudit knows, None for one it does not."""

    role: str | None
    output: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: int | None = None
    error: str | None = None
    run_id: str | None = None
    decision_id: str | None = None
    outcome: str | None = None
    task_executed: str | None = None


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value[:MAX_TEXT]
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 else None


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def _arguments(value: Any) -> Any:
    parsed = _json(value)
    return parsed if isinstance(parsed, dict | list) else value


def _call(name: Any, arguments: Any = None, call_id: Any = None) -> dict[str, Any] | None:
    if not isinstance(name, str) or not name:
        return None
    out: dict[str, Any] = {"name": name[:1000]}
    if arguments is not None:
        out["arguments"] = _arguments(arguments)
    if isinstance(call_id, str) and call_id:
        out["id"] = call_id
    return out


def _messages(value: Any, ex: Extract) -> bool:
    """GenAI structured messages (`gen_ai.output.messages`): text and tool-call parts."""
    messages = _json(value)
    if not isinstance(messages, list):
        return False
    for m in messages:
        if not isinstance(m, dict):
            continue
        parts = m.get("parts")
        if isinstance(parts, list):
            for part in parts:
                if not isinstance(part, dict):
                    continue
                kind = part.get("type")
                if kind == "text" and (t := _text(part.get("content"))):
                    ex.output.append(t)
                elif kind == "tool_call" and (
                    c := _call(part.get("name"), part.get("arguments"), part.get("id"))
                ):
                    ex.tool_calls.append(c)
        elif t := _text(m.get("content")):  # the older {"role", "content"} shape
            ex.output.append(t)
        _openai_calls(m.get("tool_calls"), ex)
    return True


def _openai_calls(calls: Any, ex: Extract) -> None:
    if not isinstance(calls, list):
        return
    for call in calls:
        if isinstance(call, dict):
            fn = call.get("function") if isinstance(call.get("function"), dict) else call
            if c := _call(fn.get("name"), fn.get("arguments"), call.get("id")):
                ex.tool_calls.append(c)


def _indexed(attrs: dict[str, Any], ex: Extract) -> None:
    """`gen_ai.completion.N...` (OpenLLMetry) and `llm.output_messages.N...` (OpenInference)
    flattened attributes, in index order."""
    texts: dict[tuple[int, int], str] = {}
    calls: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith("gen_ai.completion."):
            m = _COMPLETION.match(key)
            if m is None:
                continue
            i = int(m.group(1))
            if m.group(2) == "content":
                if t := _text(value):
                    texts[(i, -1)] = t
            else:
                calls.setdefault((i, int(m.group(3))), {})[m.group(4)] = value
        elif key.startswith("llm.output_messages."):
            m = _OI_OUTPUT.match(key)
            if m is None:
                continue
            i = int(m.group(1))
            if m.group(2) or m.group(4):
                if t := _text(value):
                    texts[(i, -1 if m.group(2) else int(m.group(3)))] = t
            else:
                part = {"function.name": "name", "function.arguments": "arguments", "id": "id"}
                calls.setdefault((i, int(m.group(5))), {})[part[m.group(6)]] = value
    ex.output += [texts[k] for k in sorted(texts)]
    for k in sorted(calls):
        c = calls[k]
        if call := _call(c.get("name"), c.get("arguments"), c.get("id")):
            ex.tool_calls.append(call)


def _role(attrs: dict[str, Any]) -> str | None:
    op = attrs.get("gen_ai.operation.name")
    oi = attrs.get("openinference.span.kind")
    if op in LLM_OPERATIONS or oi in OI_MODEL:
        return "model"
    if op in AGENT_OPERATIONS or oi in OI_AGENT:
        return "agent"
    if op in TOOL_OPERATIONS or oi in OI_TOOL:
        return "tool"
    if isinstance(op, str) or isinstance(oi, str) or "gen_ai.system" in attrs:
        return "other"
    if "gen_ai.provider.name" in attrs:
        return "model"
    return None


def _usage(attrs: dict[str, Any]) -> int | None:
    total = _int(attrs.get("llm.token_count.total"))
    if total is not None:
        return total
    pairs = (
        ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
        ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),
        ("llm.token_count.prompt", "llm.token_count.completion"),
    )
    for a, b in pairs:
        x, y = _int(attrs.get(a)), _int(attrs.get(b))
        if x is not None or y is not None:
            return (x or 0) + (y or 0)
    return None


def _plaudit_names(attrs: dict[str, Any], ex: Extract) -> None:
    meta = _json(attrs.get("metadata"))  # OpenInference `using_metadata`
    sources = [attrs, meta] if isinstance(meta, dict) else [attrs]
    for src in sources:
        ex.run_id = ex.run_id or _text(src.get("plaudit.run_id"))
        ex.decision_id = ex.decision_id or _text(src.get("plaudit.decision_id"))
        outcome = src.get("plaudit.outcome")
        if ex.outcome is None and outcome in OUTCOMES:
            ex.outcome = outcome
        ex.task_executed = ex.task_executed or _text(src.get("plaudit.task_executed"))


def _model_output(span: Span, ex: Extract) -> None:
    """Output text and requested tool calls of a model or agent span, from the first form
    present: structured messages (attribute or span event), then the flat forms."""
    attrs = span.attributes
    found = _messages(attrs.get("gen_ai.output.messages"), ex)
    for name, event_attrs in span.events:
        if "gen_ai.output.messages" in event_attrs:
            found = _messages(event_attrs["gen_ai.output.messages"], ex) or found
        elif name == "gen_ai.choice":
            body = event_attrs.get("message") or event_attrs.get("gen_ai.event.content")
            message = _json(body)
            if isinstance(message, dict):
                found = _messages([message], ex) or found
    if found:
        return
    before = len(ex.output) + len(ex.tool_calls)
    completion = attrs.get("gen_ai.completion")
    if not (isinstance(completion, str) and _messages(completion, ex)) and (t := _text(completion)):
        ex.output.append(t)
    _indexed(attrs, ex)
    if len(ex.output) + len(ex.tool_calls) == before and (t := _text(attrs.get("output.value"))):
        ex.output.append(t)


def extract(span: Span) -> Extract:
    attrs = span.attributes
    ex = Extract(role=_role(attrs))
    _plaudit_names(attrs, ex)
    if span.error is not None:
        kind = attrs.get("error.type")
        ex.error = (_text(kind) or span.error)[:10_000]
    if ex.role in ("model", "agent"):
        _model_output(span, ex)
        if ex.role == "model":
            ex.usage = _usage(attrs)
    elif ex.role == "tool":
        name = attrs.get("gen_ai.tool.name") or attrs.get("tool.name")
        arguments = attrs.get("gen_ai.tool.call.arguments") or attrs.get("tool.parameters")
        call_id = attrs.get("gen_ai.tool.call.id") or attrs.get("tool_call.id")
        if c := _call(name, arguments, call_id):
            ex.tool_calls.append(c)
    return ex


__all__ = ["Extract", "extract"]
