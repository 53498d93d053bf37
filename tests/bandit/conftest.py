"""Helpers shared by the bandit tests."""

from __future__ import annotations

from typing import Any

import pytest

ARMS: list[dict[str, Any]] = [
    {"id": "section:system:instructions", "tokens": 400},
    {"id": "tool:exec:Bash", "tokens": 300},
    {"id": "tool:web:WebSearch", "tokens": 250},
    {"id": "skill:debugging:main", "tokens": 900},
    {"id": "file:workspace:README.md", "tokens": 1800},
    {
        "id": "memory:project:deploys",
        "tokens": 120,
        "content": "Deploys go through the canary stage and need two approvals.",
    },
]


@pytest.fixture
def arms() -> list[dict[str, Any]]:
    return [dict(a) for a in ARMS]


def _posterior_table(p: Any) -> list[tuple[Any, ...]]:
    """The projection's evidence rows, rounded, for comparing states."""
    with p.backend.read() as tx:
        rows = tx.fetchall(
            "SELECT scope, arm_id, s, f, pulls, hits, last_index, last_ts FROM bandit_posteriors "
            "ORDER BY scope, arm_id"
        )
    return [
        (r[0], r[1], round(float(r[2]), 9), round(float(r[3]), 9), *map(int, r[4:])) for r in rows
    ]


@pytest.fixture
def posterior_table() -> Any:
    return _posterior_table
