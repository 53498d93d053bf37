"""One observation's effect on the learning state, shared by the store's projection and the
in-memory learner (`memory.py`), so both apply identical arithmetic.

A labelled observation updates its context's evidence (with change detection) and the global
evidence (without: the global mix of task types moves whenever the policy changes what it
includes), and the arm's hierarchy sums by the change of its context's terms. An unlabelled
observation updates the global evidence only, with detection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plaudit.bandit import evidence, hierarchy
from plaudit.bandit.config import BanditConfig


@dataclass
class Folded:
    ctx: dict[str, Any] | None
    glob: dict[str, Any]
    sums: dict[str, Any]
    #: per arm: a central drop was detected in the observation's scope
    central: np.ndarray


def observe(
    ctx: dict[str, Any] | None,
    glob: dict[str, Any],
    sums: dict[str, Any],
    r: Any,
    cfg: BanditConfig,
    index: float,
    *,
    decay_context: Any = 1.0,
    decay_global: Any = 1.0,
) -> Folded:
    """The new states of the included arms (aligned arrays) after rewards `r`."""
    ds = cfg.drift_settings()
    if ctx is None:
        g = evidence.update(glob, r, ds, decay_global, detect=True, index=index)
        return Folded(None, g.state, dict(sums), g.central_drop)
    c = evidence.update(ctx, r, ds, decay_context, detect=True, index=index)
    new_sums = hierarchy.shift(sums, (ctx["s"], ctx["f"]), (c.state["s"], c.state["f"]))
    g = evidence.update(glob, r, ds, decay_global, detect=False, index=index)
    return Folded(c.state, g.state, new_sums, c.central_drop)
