"""Wiring the context bandit into an agent loop.

    python examples/agent_loop.py [--db PATH] [--runs N]

Each turn: ask the bandit which prompt components to include, build the prompt from them, call
the model, then report what the model did so the bandit learns which components earn their
tokens. The "model" here is a stand-in that uses Bash and README.md for coding tasks and the
web search tool for research tasks; swap in your own client.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path
from typing import Any

from plaudit import Plaudit

INVENTORY: list[dict[str, Any]] = [
    {"id": "section:system:instructions", "tokens": 400},
    {"id": "tool:exec:Bash", "tokens": 300},
    {"id": "tool:web:WebSearch", "tokens": 250},
    {"id": "tool:misc:Calendar", "tokens": 350},
    {"id": "skill:debugging:main", "tokens": 900},
    {"id": "file:workspace:README.md", "tokens": 1800},
    {"id": "file:workspace:CHANGELOG.md", "tokens": 2500},
    {
        "id": "memory:project:deploys",
        "tokens": 120,
        "content": "Deploys go through the canary stage and need two approvals.",
    },
]


def build_prompt(included: list[str]) -> str:
    """Assemble the system prompt from the chosen components (a placeholder here)."""
    return "\n".join(f"<component id={arm_id!r}/>" for arm_id in included)


def fake_model(task: str, included: set[str], rng: random.Random) -> dict[str, Any]:
    """A stand-in for an LLM call: returns output text, tool calls and token usage."""
    calls: list[dict[str, Any]] = []
    text = ["Done."]
    if task == "code":
        if "tool:exec:Bash" in included:
            calls.append({"name": "Bash", "arguments": {"command": "pytest -q"}})
        if "file:workspace:README.md" in included:
            text.append("Following the steps in README.md.")
        if rng.random() < 0.5 and "skill:debugging:main" in included:
            text.append("Used the debugging checklist.")
    elif "tool:web:WebSearch" in included:
        calls.append({"name": "WebSearch", "arguments": {"query": "release notes"}})
    if rng.random() < 0.2 and "memory:project:deploys" in included:
        text.append("Remember: deploys go through the canary stage and need two approvals.")
    return {"text": " ".join(text), "tool_calls": calls, "usage_tokens": 800 + 40 * len(calls)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="store (default: a temporary SQLite file)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    db = args.db or str(Path(tempfile.mkdtemp(prefix="plaudit-example-")) / "plaudit.db")
    rng = random.Random(args.seed)
    with Plaudit.open(db) as p:
        p.bandit.register(INVENTORY)
        # Never drop the instructions; learn everything else.
        p.bandit.configure(protected=["section:system:*"])
        for turn in range(args.runs):
            task = rng.choice(["code", "research"])
            sel = p.bandit.select(token_budget=8000, context=task, seed=args.seed * 100_000 + turn)
            prompt = build_prompt(sel.included)
            out = fake_model(task, set(sel.included), rng)
            p.bandit.observe(
                sel.run_id,
                output_text=out["text"],
                tool_calls=out["tool_calls"],
                usage_tokens=out["usage_tokens"] + len(prompt) // 4 + sel.used_tokens,
            )
        savings = p.bandit.savings()
        for stats in p.bandit.posteriors("code"):
            print(f"code  {stats.id:32} mean={stats.mean:.2f} pulls={stats.pulls}")
        pct, lo, hi = (
            savings[k] for k in ("prompt_savings_percent", "prompt_ci_low", "prompt_ci_high")
        )
        ci = f" (95% CI {lo:.1f}% .. {hi:.1f}%)" if lo is not None else ""
        print(
            f"token savings: {pct:.1f}%{ci} of prompt tokens, against {savings['counterfactual']}"
            if pct is not None
            else "token savings: n/a (no runs recorded)"
        )
    return savings


if __name__ == "__main__":
    main()
