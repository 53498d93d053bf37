"""Sharing strength across task types: each context's prior comes from the other contexts.

For one arm, every context c with evidence (s_c, f_c), n_c = s_c + f_c > 0, has a rate
r_c = s_c / n_c. Across contexts the rates have a mean m and a spread; if they were drawn from
Beta(kappa m, kappa (1 - m)), their variance would be m (1 - m) / (kappa + 1) plus the binomial
noise m (1 - m) / n_c of each estimate. So, by the method of moments (empirical Bayes):

    m       = mean of the other contexts' rates
    tau^2   = (sum of (r_c - m)^2 - m (1 - m) sum of 1 / n_c) / (C - 1), at least 0
    kappa   = m (1 - m) / tau^2 - 1

and a context's posterior is Beta(kappa m + s_c, kappa (1 - m) + f_c). An arm that every task
type needs alike (a shell tool, a dead file) gets a large kappa: a new task type starts from
what the others know. An arm that one type needs and the others never do gets a small kappa:
each type learns it from its own runs. This is what lets 60 sparse task types learn from about
30 runs each, and what keeps the rarely needed arm of two task types from being shut out by
the three that never need it.

Other contexts that have tried an arm (ZERO_RATE_RUNS times each or more) and never seen it
needed do not put its rate at 0: n runs without a success bound it near ZERO_RATE / n, and
that bound is the least m they give. Otherwise an arm that two or three task types need in a
few percent of their runs, and that the types which found it first have not yet seen needed,
starts every other type from a mean of 0.

The prior of context c is built from the *other* contexts (leave-one-out), so a context never
counts its own runs twice. tau^2 is shrunk towards m (1 - m) / (k0 + 1) (a prior worth `W0`
contexts), so two or three contexts cannot claim a precise spread. With no other context, the
prior is the global posterior's mean at strength k0.

Only four sums per arm are needed (C, sum r, sum r^2, sum 1/n), so an observation updates them
by the change of its own context's terms, and a selection over 10,000 arms reads them from one
row per arm instead of one per arm and context.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The per-arm sums, in this order (also the projection's columns).
SUMS = ("hc", "hr", "hr2", "hv")
#: The prior on the spread is worth this many contexts.
W0 = 2.0
KAPPA_MIN, KAPPA_MAX = 0.3, 1e4
#: The pseudo-count behind the rate of a context that never saw an arm needed: its n runs
#: without a success put the rate near ZERO_RATE / n rather than at 0 (`context_prior`),
#: where the other contexts tried the arm ZERO_RATE_RUNS times each or more.
ZERO_RATE = 0.25
ZERO_RATE_RUNS = 10.0


def terms(s: Any, f: Any) -> tuple[Any, Any, Any, Any]:
    """One context's contribution to the sums: (has data, rate, rate^2, 1/n)."""
    s = np.asarray(s, dtype=np.float64)
    n = s + np.asarray(f, dtype=np.float64)
    has = n > 0.0
    if n.ndim and has.all():  # every arm has data here (the usual case): no selections
        r = s / n
        return np.ones(n.shape), r, r * r, 1.0 / n
    safe = np.where(has, n, 1.0)
    r = np.where(has, s / safe, 0.0)
    return has.astype(np.float64), r, r * r, np.where(has, 1.0 / safe, 0.0)


def shift(sums: dict[str, Any], old: tuple[Any, Any], new: tuple[Any, Any]) -> dict[str, Any]:
    """The sums after one context's evidence went from `old` (s, f) to `new` (s, f)."""
    before, after = terms(*old), terms(*new)
    return {k: np.asarray(sums[k]) + a - b for k, a, b in zip(SUMS, after, before, strict=True)}


def context_prior(
    sums: dict[str, Any], own_s: Any, own_f: Any, mu_global: Any, k0: float
) -> tuple[np.ndarray, np.ndarray]:
    """(m, kappa) of each arm's prior in a context with evidence (own_s, own_f)."""
    c0, r0, r20, v0 = terms(own_s, own_f)
    c = np.asarray(sums["hc"], dtype=np.float64) - c0
    r = np.asarray(sums["hr"], dtype=np.float64) - r0
    r2 = np.asarray(sums["hr2"], dtype=np.float64) - r20
    v = np.maximum(np.asarray(sums["hv"], dtype=np.float64) - v0, 0.0)
    # incremental sums may carry rounding: a count is a whole number
    c = np.rint(np.maximum(c, 0.0))
    others = c >= 1.0
    cs = np.maximum(c, 1.0)
    # np.minimum/np.maximum rather than np.clip: the same values, half the call overhead
    m = np.minimum(np.maximum(r / cs, 1e-6), 1.0 - 1e-6)
    spread = m * (1.0 - m)
    dev = np.maximum(r2 - cs * m * m, 0.0)
    tau_hat = np.maximum(dev - spread * v, 0.0) / np.maximum(c - 1.0, 1.0)
    extra = np.maximum(c - 1.0, 0.0)
    tau2 = (W0 * spread / (k0 + 1.0) + extra * tau_hat) / (W0 + extra)
    kappa = np.minimum(np.maximum(spread / np.maximum(tau2, 1e-300) - 1.0, KAPPA_MIN), KAPPA_MAX)
    # Other task types that never saw the arm needed only bound its rate there: n runs
    # without a success put it near ZERO_RATE / n, not at 0. A mean of exactly 0 (kept
    # above only by the 1e-6 clamp) shuts out, in this type, an arm that two or three types
    # need in a few percent of their runs, until one of its rare retries is needed. The
    # bound stands in for the mean only where the others tried the arm ZERO_RATE_RUNS times
    # each or more: below that it is loose (0.05 at five tries), and under a binding budget
    # it filled the core with arms seldom tried (10,000 random-id arms: recall at 3,000 runs
    # 0.709 against 0.740).
    inv_n = v / cs  # the mean of 1 / n over the other contexts
    bounded = others & (r <= 1e-12) & (inv_n <= 1.0 / ZERO_RATE_RUNS)
    m = np.where(bounded, np.maximum(m, ZERO_RATE * inv_n), m)
    return np.where(others, m, mu_global), np.where(others, kappa, k0)


def posterior(
    a0: np.ndarray,
    b0: np.ndarray,
    glob: dict[str, Any],
    ctx: dict[str, Any] | None,
    sums: dict[str, Any],
    k0: float,
    decayed: tuple[Any, Any, Any, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, beta) of every arm, globally (`ctx=None`) or in a context.

    `decayed` optionally gives (global s, global f, context s, context f) after a half-life
    discount; otherwise the stored evidence is used."""
    gs, gf, cs, cf = decayed or (
        glob["s"],
        glob["f"],
        None if ctx is None else ctx["s"],
        None if ctx is None else ctx["f"],
    )
    ga = a0 * glob["pw"] + gs
    gb = b0 * glob["pw"] + gf
    if ctx is None:
        return ga, gb
    m, kappa = context_prior(sums, ctx["s"], ctx["f"], ga / (ga + gb), k0)
    k = kappa * ctx["pw"]
    return k * m + cs, k * (1.0 - m) + cf
