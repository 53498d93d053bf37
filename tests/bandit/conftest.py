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
    """The projection's evidence rows with the pending observations folded in (what every
    reader sees), rounded, for comparing states."""
    from plaudit.bandit import projection

    with p.backend.read() as tx:
        rows = {
            (r[0], r[1]): r[2:]
            for r in tx.fetchall(
                "SELECT scope, arm_id, s, f, pulls, hits, last_index, last_ts "
                "FROM bandit_posteriors"
            )
        }
        pend = projection.folded(tx, projection.load_config(tx))
    for scope, t in pend.tables.items():
        for aid, i in t.pos.items():
            if t.present[i]:
                rows[(scope, aid)] = tuple(
                    t.cols[k][i] for k in ("s", "f", "pulls", "hits", "last_index", "last_ts")
                )
    return [
        (k[0], k[1], round(float(r[0]), 9), round(float(r[1]), 9), *map(int, r[2:]))
        for k, r in sorted(rows.items())
    ]


@pytest.fixture
def posterior_table() -> Any:
    return _posterior_table
