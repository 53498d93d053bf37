"""How one observation changes an arm's evidence in one scope, with change detection.

Evidence is a pair of success and failure counts (s, f). Drift is handled by two CUSUM
detectors per scope and arm, one for a rise and one for a drop of the arm's usefulness against
its current estimate p0 = (s + 0.5) / (s + f + 1):

    rise:  log-likelihood ratio of p_up = min(0.95, max(2 p0, p0 + 0.2)) against p0
    drop:  log-likelihood ratio of p_dn = p0 / 2 against p0

Each statistic g accumulates the ratio and restarts at 0 whenever it would go negative; the
observations since that restart are kept as (s, f) of the segment. When g passes `h`, a change
is declared: the arm's evidence is replaced by that segment (the data since the estimated
change point) and its prior counts are scaled by `reset_prior_weight`, so the posterior follows
the new regime at once instead of outvoting it with old evidence. With no change, nothing is
forgotten, so a stationary arm's estimate keeps sharpening.

The same function updates one row (the store's projection) or a whole array (the simulator), so
both apply identical arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Column order of the state arrays (also the projection's columns).
FIELDS = ("s", "f", "gu", "su", "fu", "gd", "sd", "fd", "pw")
#: Observations needed before the detectors run: a handful of pulls says nothing reliable.
MIN_EVIDENCE = 8.0


@dataclass(frozen=True)
class DriftSettings:
    """The detector's knobs (from `BanditConfig`)."""

    enabled: bool = True
    threshold: float = 6.0
    reset_prior_weight: float = 0.2


def fresh(shape: Any = ()) -> dict[str, Any]:
    """The state of an arm that has never been observed in a scope."""
    z = np.zeros(shape)
    st = {k: z.copy() for k in FIELDS}
    st["pw"] = np.ones(shape)
    return st


def _llr(r: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    return np.where(r > 0, np.log(p1 / p0), np.log((1.0 - p1) / (1.0 - p0)))


def _cusum(g: Any, s: Any, f: Any, step: Any, r: Any) -> tuple[Any, Any, Any]:
    g = g + step
    restart = g <= 0.0
    g = np.where(restart, 0.0, g)
    s = np.where(restart, 0.0, s + r)
    f = np.where(restart, 0.0, f + (1.0 - r))
    return g, s, f


def update(st: dict[str, Any], r: Any, ds: DriftSettings, decay: Any = 1.0) -> dict[str, Any]:
    """The state after observing reward `r` (0 or 1, scalar or array), with old evidence first
    multiplied by `decay` (the optional half-life discount; 1 means none)."""
    r = np.asarray(r, dtype=np.float64)
    s = np.asarray(st["s"], dtype=np.float64) * decay
    f = np.asarray(st["f"], dtype=np.float64) * decay
    out = dict(st)
    if ds.enabled:
        p0 = np.clip((s + 0.5) / (s + f + 1.0), 0.005, 0.995)
        p_up = np.minimum(0.95, np.maximum(2.0 * p0, p0 + 0.2))
        p_dn = p0 / 4.0
        active = (s + f) >= MIN_EVIDENCE
        gu, su, fu = _cusum(st["gu"], st["su"], st["fu"], _llr(r, p0, p_up), r)
        gd, sd, fd = _cusum(st["gd"], st["sd"], st["fd"], _llr(r, p0, p_dn), r)
        gu, gd = np.where(active, gu, 0.0), np.where(active, gd, 0.0)
        up, dn = gu > ds.threshold, gd > ds.threshold
        changed = up | dn
        # the segment already holds this observation
        seg_s = np.where(up, su, sd)
        seg_f = np.where(up, fu, fd)
        s = np.where(changed, seg_s, s + r)
        f = np.where(changed, seg_f, f + (1.0 - r))
        pw = np.where(changed, ds.reset_prior_weight, st["pw"])
        zero = np.zeros_like(s)
        out.update(
            gu=np.where(changed, zero, gu),
            su=np.where(changed | ~active, zero, su),
            fu=np.where(changed | ~active, zero, fu),
            gd=np.where(changed, zero, gd),
            sd=np.where(changed | ~active, zero, sd),
            fd=np.where(changed | ~active, zero, fd),
            pw=pw,
        )
    else:
        s, f = s + r, f + (1.0 - r)
    out["s"], out["f"] = s, f
    return out
