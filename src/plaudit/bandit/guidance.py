"""The note a select hands back for the prompt: what was left out, and how to get it.

An arm the run left out but needed is learned from only if the agent fetches it and its
output then names it (a *miss*, see docs/bandit.md). An agent that does not know what was
left out cannot ask for it, so the selection says: the left-out tools, skills, files and
memories by the names the reference rules look for, and the request to fetch and name what
the task needs. Sections are not named: they are structure, not something to fetch.

The seed's original told the model that excluded tools were unavailable, which taught it to
give up on them; this note asks for them instead, so that the misses reach `observe`.
"""

from __future__ import annotations

import numpy as np

from plaudit.bandit.arms import ARM_TYPES

#: At most this many components are named; the note says how many more there are.
MAX_NAMED = 40
#: A longer name is cut to this many characters.
MAX_NAME = 80
#: The types named, in this order, and how each is named and fetched.
_KINDS = (
    ("tool", "tools", "call the tool"),
    ("skill", "skills", "load the skill"),
    ("file", "files", "read the file"),
    ("memory", "memories", "look up the memory"),
)
_CODE = {t: i for i, t in enumerate(ARM_TYPES)}


def _name(arm_id: str) -> str:
    """What the reference rules look for: a skill's category word, else the id's name."""
    type_, category, name = arm_id.split(":", 2)
    shown = category if type_ == "skill" else name
    return shown if len(shown) <= MAX_NAME else shown[: MAX_NAME - 1] + "…"


def note(ids: np.ndarray, excluded: np.ndarray, types: np.ndarray) -> str | None:
    """The note for a run that left out `ids[excluded]` (`types`: each arm's type code,
    `policy.type_codes`); None when it left out nothing that can be fetched. Costs a few
    array operations and up to `MAX_NAMED` names, whatever the inventory's size."""
    groups: list[tuple[str, list[str], str]] = []
    left = MAX_NAMED
    total = named = 0
    for type_, plural, how in _KINDS:
        at = np.flatnonzero(excluded & (types == _CODE[type_]))
        if not at.size:
            continue
        shown = at[: max(left, 0)]
        total += at.size
        named += shown.size
        left -= shown.size
        groups.append((plural, list(dict.fromkeys(map(_name, ids[shown].tolist()))), how))
    if not total:
        return None
    listed = "; ".join(f"{plural}: {', '.join(names)}" for plural, names, _ in groups if names)
    more = f" (and {total - named:,} more)" if total > named else ""
    hows = ", ".join(how for _, _, how in groups)
    return (
        f"To save tokens, {total:,} components were left out of this prompt: {listed}{more}. "
        f"If the task needs one of them, fetch it ({hows}) and name it in your answer, so "
        f"that later prompts include it."
    )
