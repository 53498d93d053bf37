"""Reading posteriors: prior + discounted evidence, with contexts shrunk towards global.

For an arm with prior Beta(a0, b0), global evidence (Sg, Fg) and context evidence (Sc, Fc),
all discounted to the latest observation:

    global:   Beta(a0 + Sg,             b0 + Fg)
    context:  Beta(a0 + Sc + w * Sg,    b0 + Fc + w * Fg),   w = min(1, m / (Sg + Fg))

so a context borrows at most m (`context_pseudo_count`, default 10) pseudo-observations of the
global posterior: it starts where the global posterior is, not cold, and its own data wins once
it has more than m observations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plaudit.bandit.config import BanditConfig
from plaudit.bandit.projection import GLOBAL, decay_factor
from plaudit.store.backend import Tx

_CHUNK = 400


def _evidence(
    tx: Tx, scope: str, arm_ids: Sequence[str], cfg: BanditConfig, index: int, now: int
) -> dict[str, tuple[float, float, int]]:
    out: dict[str, tuple[float, float, int]] = {}
    for i in range(0, len(arm_ids), _CHUNK):
        chunk = list(arm_ids[i : i + _CHUNK])
        marks = ",".join("?" * len(chunk))
        for arm_id, s, f, pulls, li, lt in tx.fetchall(
            "SELECT arm_id, s, f, pulls, last_index, last_ts FROM bandit_posteriors "
            f"WHERE scope = ? AND arm_id IN ({marks})",
            [scope, *chunk],
        ):
            d = decay_factor(cfg, index - int(li), now - int(lt))
            out[arm_id] = (float(s) * d, float(f) * d, int(pulls))
    return out


def load(
    tx: Tx,
    arm_ids: Sequence[str],
    kinds: Sequence[str],
    cfg: BanditConfig,
    context: str | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(alpha, beta, global pulls, scope pulls) aligned with `arm_ids`."""
    index, now = tx.fetchone("SELECT obs_index, last_ts FROM bandit_meta WHERE one = 1")
    index, now = int(index), int(now)
    glob = _evidence(tx, GLOBAL, arm_ids, cfg, index, now)
    ctx = _evidence(tx, context, arm_ids, cfg, index, now) if context else {}
    n = len(arm_ids)
    alpha, beta = np.empty(n), np.empty(n)
    gpulls, spulls = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    m = cfg.context_pseudo_count
    for i, (arm_id, kind) in enumerate(zip(arm_ids, kinds, strict=True)):
        a0, b0 = cfg.prior(arm_id, kind)
        sg, fg, pg = glob.get(arm_id, (0.0, 0.0, 0))
        gpulls[i] = pg
        if context:
            sc, fc, pc = ctx.get(arm_id, (0.0, 0.0, 0))
            total = sg + fg
            w = min(1.0, m / total) if total > 0 else 0.0
            alpha[i], beta[i] = a0 + sc + w * sg, b0 + fc + w * fg
            spulls[i] = pc
        else:
            alpha[i], beta[i] = a0 + sg, b0 + fg
            spulls[i] = pg
    return alpha, beta, gpulls, spulls
