"""How one observation changes an arm's evidence in one scope, with change detection.

Evidence is a pair of success and failure counts (s, f). Drift is handled by two CUSUM
detectors per scope and arm, one for a rise and one for a drop of the arm's usefulness against
its current estimate p0 = (s + 0.5) / (s + f + 1):

    rise:  log-likelihood ratio of p_up = min(0.95, max(2 p0, p0 + 0.2)) against p0
    drop:  log-likelihood ratio of p_dn = p0 / 4 against p0

Each statistic accumulates the ratio and restarts at 0 whenever it would go negative. A rise
alarms at `rise_threshold`, a drop only at the higher `drop_threshold`: a false rise costs a
few tokens (the arm is included and observed again), a false drop can leave a useful arm out,
where nothing is observed to correct it.

On an alarm the arm's evidence is replaced by the observations since the estimated change
point and its prior counts are scaled by `reset_prior_weight`, so the posterior follows the new
regime at once. The change point is estimated from the last `HISTORY` outcomes, kept as bits:
the suffix that best supports the change by likelihood ratio (at least `MIN_EVIDENCE` long),
or the trailing run of failures (a drop) or successes (a rise) when that run alone carries
`rise_threshold` of evidence, so that a success just before a tool was retired does not keep
it alive. With no change, nothing is forgotten, so a stationary arm's estimate keeps
sharpening.

A drop of an arm whose estimate was at least `central` marks a *central drop*: the caller uses
it to re-explore (see `policy.exploration_minimum`).

The same function updates one row (the store's projection) or a whole array (the simulator and
`evaluate`), so all apply identical arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Float state per scope and arm (also the projection's columns), in this order.
FIELDS = ("s", "f", "gu", "su", "fu", "gd", "sd", "fd", "pw", "hn", "drop_at")
#: Outcomes kept as bits (newest in bit 0) for estimating change points: an int64 column.
HISTORY = 62
_MASK = (1 << HISTORY) - 1
_KS = np.arange(1, HISTORY + 1, dtype=np.int64)
#: Observations needed before the detectors run: a handful of pulls says nothing reliable.
MIN_EVIDENCE = 8.0


@dataclass(frozen=True)
class DriftSettings:
    """The detectors' knobs (from `BanditConfig`)."""

    enabled: bool = True
    rise_threshold: float = 12.0
    drop_threshold: float = 18.0
    reset_prior_weight: float = 0.2
    central: float = 0.25


@dataclass
class Step:
    """One update's result: the new state and which arms changed regime."""

    state: dict[str, Any]
    changed: np.ndarray
    central_drop: np.ndarray


def fresh(shape: Any = ()) -> dict[str, Any]:
    """The state of an arm that has never been observed in a scope."""
    z = np.zeros(shape)
    st: dict[str, Any] = {k: z.copy() for k in FIELDS}
    st["pw"] = np.ones(shape)
    st["drop_at"] = np.full(shape, -1.0)
    st["hist"] = np.zeros(shape, dtype=np.int64)
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


def change_segment(
    hist: np.ndarray, hn: np.ndarray, p0: np.ndarray, up: np.ndarray, run_evidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(successes, failures, found) of the estimated post-change segment of each arm.

    The segment is the suffix of the recorded outcomes (k >= MIN_EVIDENCE) whose own rate
    departs from p0 in the alarm's direction with the largest log-likelihood ratio; or the
    trailing run of outcomes of that direction when the run alone carries `run_evidence`."""
    n = hist.shape[0]
    bits = ((hist[:, None] >> (_KS - 1)[None, :]) & 1).astype(np.float64)  # newest first
    wins = np.cumsum(bits, axis=1)
    k = _KS[None, :].astype(np.float64)
    q = np.clip(wins / k, 1e-12, 1.0 - 1e-12)
    p = p0[:, None]
    ratio = wins * np.log(q / p) + (k - wins) * np.log((1.0 - q) / (1.0 - p))
    usable = (k <= hn[:, None]) & (k >= MIN_EVIDENCE) & np.where(up[:, None], q > p, q < p)
    ratio = np.where(usable, ratio, -np.inf)
    best = np.argmax(ratio, axis=1)
    found = np.isfinite(ratio[np.arange(n), best])
    size = best + 1.0
    succ = wins[np.arange(n), best]
    same = np.where(up[:, None], bits == 1.0, bits == 0.0) & (k <= hn[:, None])
    run = np.argmin(np.concatenate([same, np.zeros((n, 1), dtype=bool)], axis=1), axis=1)
    run = run.astype(np.float64)
    per = np.where(up, -np.log(p0), -np.log1p(-p0))
    by_run = (run >= MIN_EVIDENCE) & (run * per >= run_evidence)
    size = np.where(by_run, run, size)
    succ = np.where(by_run, np.where(up, run, 0.0), succ)
    return succ, size - succ, found | by_run


def update(
    st: dict[str, Any],
    r: Any,
    ds: DriftSettings,
    decay: Any = 1.0,
    *,
    detect: bool = True,
    index: float = 0.0,
) -> Step:
    """The state after observing reward `r` (0 or 1, scalar or array), with old evidence first
    multiplied by `decay` (the optional half-life discount; 1 means none). `detect=False`
    skips the detectors (the global scope of a labelled observation: its mix of task types
    shifts whenever the policy changes what it includes, which is not a change of the world).
    `index` is the observation's position, recorded as `drop_at` on a central drop."""
    r = np.asarray(r, dtype=np.float64)
    s = np.asarray(st["s"], dtype=np.float64) * decay
    f = np.asarray(st["f"], dtype=np.float64) * decay
    hist = ((np.asarray(st["hist"], dtype=np.int64) << 1) | r.astype(np.int64)) & _MASK
    hn = np.minimum(np.asarray(st["hn"], dtype=np.float64) + 1.0, HISTORY)
    out = dict(st)
    out["hist"], out["hn"] = hist, hn
    none = np.zeros(s.shape, dtype=bool)
    if not (ds.enabled and detect):
        out["s"], out["f"] = s + r, f + (1.0 - r)
        return Step(out, none, none)
    # np.minimum/np.maximum rather than np.clip: the same values, half the call overhead
    p0 = np.minimum(np.maximum((s + 0.5) / (s + f + 1.0), 0.005), 0.995)
    p_up = np.minimum(0.95, np.maximum(2.0 * p0, p0 + 0.2))
    p_dn = p0 / 4.0
    active = (s + f) >= MIN_EVIDENCE
    gu, su, fu = _cusum(st["gu"], st["su"], st["fu"], _llr(r, p0, p_up), r)
    gd, sd, fd = _cusum(st["gd"], st["sd"], st["fd"], _llr(r, p0, p_dn), r)
    all_active = bool(active.all())
    if not all_active:
        gu, gd = np.where(active, gu, 0.0), np.where(active, gd, 0.0)
    up, dn = gu > ds.rise_threshold, gd > ds.drop_threshold
    changed = up | dn
    if s.ndim and not changed.any():
        # The usual case: no alarm. The same values as the general path below, without the
        # selections that an alarm would make (a dozen small array operations per call,
        # which at tens of arms cost more than the arithmetic).
        if not all_active:
            idle = ~active
            su, fu = np.where(idle, 0.0, su), np.where(idle, 0.0, fu)
            sd, fd = np.where(idle, 0.0, sd), np.where(idle, 0.0, fd)
        out.update(gu=gu, su=su, fu=fu, gd=gd, sd=sd, fd=fd)
        out["s"], out["f"] = s + r, f + (1.0 - r)
        return Step(out, changed, changed.copy())
    # the CUSUM segment (it already holds this observation), refined from the outcome bits
    seg_s = np.where(up, su, sd)
    seg_f = np.where(up, fu, fd)
    if changed.any():
        at = np.flatnonzero(np.atleast_1d(changed))
        cs, cf, found = change_segment(
            np.atleast_1d(hist)[at],
            np.atleast_1d(hn)[at],
            np.atleast_1d(p0)[at],
            np.atleast_1d(up)[at],
            ds.rise_threshold,
        )
        seg_s = np.array(np.atleast_1d(seg_s), dtype=np.float64)
        seg_f = np.array(np.atleast_1d(seg_f), dtype=np.float64)
        seg_s[at] = np.where(found, cs, seg_s[at])
        seg_f[at] = np.where(found, cf, seg_f[at])
        if np.ndim(s) == 0:
            seg_s, seg_f = seg_s[0], seg_f[0]
    s = np.where(changed, seg_s, s + r)
    f = np.where(changed, seg_f, f + (1.0 - r))
    pw = np.where(changed, ds.reset_prior_weight, st["pw"])
    central = dn & (p0 >= ds.central)
    zero = np.zeros_like(s)
    out.update(
        gu=np.where(changed, zero, gu),
        su=np.where(changed | ~active, zero, su),
        fu=np.where(changed | ~active, zero, fu),
        gd=np.where(changed, zero, gd),
        sd=np.where(changed | ~active, zero, sd),
        fd=np.where(changed | ~active, zero, fd),
        pw=pw,
        drop_at=np.where(central, float(index), st["drop_at"]),
    )
    out["s"], out["f"] = s, f
    return Step(out, np.asarray(changed, dtype=bool), np.asarray(central, dtype=bool))
