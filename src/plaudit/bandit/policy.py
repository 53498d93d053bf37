"""The selection policy as pure numpy: no store, no clock, so it is fast, seedable and shared by
the library, the simulator and the benchmarks.

It thinks in expected cost. Leaving out an arm that the run needs costs `miss_cost` tokens (a
retry, a worse answer); including it costs its own tokens. So an arm earns its place when its
usefulness theta reaches its bar, `tokens / miss_cost` (capped by `threshold`). Arms the user
declared critical (`Declared`) have bars of their own and are held until their own evidence
rules them out; every other arm is judged by expected cost alone.

A run is drawn in two parts, which keeps every inclusion probability exact and cheap:

* the **core**, a deterministic function of the posteriors, in this order of priority:
  protected arms; underexplored arms (when the inventory fits the budget); arms that clear
  their bar (`kept`: by posterior mean in a scope with runs enough of its own, by
  P(theta >= bar) >= `core_level` in a younger one); critical arms whose *own* evidence in
  this scope cannot yet rule them out (`proof`); and, under a binding budget, arms this scope
  has seen needed while its own evidence keeps P(theta >= bar) >= `core_level`. When the
  budget binds, the core is filled in that order and then by what an arm surely saves per
  token, leaving `explore_share` of the budget free;
* **exploration**: every other arm is drawn with probability e = max(explore_floor,
  explore_min), at most explore_max. `explore_min` carries the re-exploration that follows a
  detected change (`exploration_minimum`). When everything fits the budget the draws are
  independent coins, so P(in) = e exactly, and a settled scope retries an arm by its own
  evidence (`explore_evidence`). When the budget binds, e also carries the search
  (`search.discovery`), and the budget the core left is shared by slots, grouped by size
  class (`_slots`); each slot of a group picks one of the group's arms with a fixed
  probability q, and each group has one more slot with a known probability, so P(in) is
  exact.

Every arm that can be included therefore has a logged propensity above zero, which is what
inverse-propensity estimators need, and nothing is estimated by Monte Carlo.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from plaudit.bandit.search import BoolArr, FloatArr, IntArr, discovery
from plaudit.bandit.search import group_codes as group_codes  # the learner's and the cache's
from plaudit.bandit.search import type_codes as type_codes
from plaudit.bandit.search import type_weight as type_weight
from plaudit.bandit.stats import beta_sf_array, tail_at_least

if TYPE_CHECKING:
    from plaudit.bandit.config import BanditConfig

#: Sort-key offsets: protected before underexplored before the rest (whose key is mu / bar).
_PROTECTED = 1e12
_UNDEREXPLORED = 1e9


@dataclass(frozen=True)
class PolicyInput:
    """Everything the policy needs, as aligned arrays (one entry per considered arm)."""

    alpha: FloatArr
    beta: FloatArr
    tokens: IntArr
    protected: BoolArr
    underexplored: BoolArr
    budget: int
    bar: FloatArr  # per arm: min(threshold, tokens / miss_cost)
    explore_floor: float = 0.005
    explore_max: float = 0.5
    explore_share: float = 0.1
    explore_slots: int = 8
    #: the core takes arms with P(theta >= bar) >= core_level
    core_level: float = 0.3
    #: arms whose own evidence must rule them out before they leave the core, and that
    #: evidence (successes, failures) in the selecting scope
    proof: BoolArr | None = None
    proof_s: FloatArr | None = None
    proof_f: FloatArr | None = None
    proof_bar: float = 0.05
    proof_level: float = 0.02
    #: a per-arm lower bound on the exploration probability (re-exploration after a change)
    explore_min: FloatArr | None = None
    #: arms no run in any scope has referenced: nothing but the configured prior speaks for them
    unseen: BoolArr | None = None
    #: per arm, its type's index in `arms.ARM_TYPES` (tool, skill, file, memory, section), and
    #: whether any run has tried it: the search weighs an untried arm by how often the tried
    #: arms of its type were found needed (see `discovery`)
    types: IntArr | None = None
    tried: BoolArr | None = None
    #: per arm, its module (`search.group_codes`), for the search to share what it found
    groups: IntArr | None = None
    #: arms the user declared critical (see `BanditConfig.is_critical`)
    critical: BoolArr | None = None
    #: retry arms outside the core with probability explore_evidence x P(theta >= bar) under
    #: this scope's own evidence (0: off), that evidence first multiplied by `stale`
    explore_evidence: float = 0.0
    stale: FloatArr | None = None


@dataclass(frozen=True)
class Slots:
    """`count` exploration slots of at most `tokens` each (binding budget only), and one more
    with probability `extra` (drawn jointly with the other groups' by `draw`); each picks arm
    `idx[j]` with probability `q[j]`, or nothing with probability 1 - sum(q)."""

    idx: IntArr
    q: FloatArr
    count: int
    tokens: int
    extra: float = 0.0


@dataclass(frozen=True)
class Plan:
    """The deterministic half of a selection, and the exact inclusion probabilities."""

    core: BoolArr
    explore: FloatArr  # per-arm exploration probability e (0 for core arms)
    binding: bool
    #: the exploration slots when the budget binds: one group per size class, and one for
    #: what the classes leave of the budget
    slots: tuple[Slots, ...] = ()

    @property
    def slot_q(self) -> FloatArr:
        """Per arm, the probability that one slot of its group picks it (binding only)."""
        q = np.zeros(self.core.shape[0])
        for g in self.slots:
            q[g.idx] = np.maximum(q[g.idx], g.q)
        return q

    @property
    def propensities(self) -> FloatArr:
        """P(arm is included) for every arm: 1 in the core, else its exploration chance."""
        if not self.binding:
            return np.where(self.core, 1.0, self.explore)
        miss = np.ones(self.core.shape[0])
        for g in self.slots:
            miss[g.idx] *= (1.0 - g.q) ** g.count * (1.0 - g.extra * g.q)
        return np.where(self.core, 1.0, 1.0 - miss)


def bars(tokens: IntArr, miss_cost: float | None, threshold: float) -> FloatArr:
    """Per-arm bars: the usefulness at which an arm's expected miss cost equals its tokens."""
    t = np.asarray(tokens, dtype=np.float64)
    if not miss_cost:
        return np.full(t.shape, threshold)
    return np.minimum(threshold, t / float(miss_cost))


def _fill(order: IntArr, tokens: IntArr, budget: int) -> BoolArr:
    """Arms in `order` greedily into `budget`, skipping any that no longer fit (smaller ones
    after it may still fit)."""
    chosen = np.zeros(tokens.shape[0], dtype=bool)
    if order.size == 0:
        return chosen
    costs = tokens[order]
    remaining = int(budget)
    cand = order
    while cand.size:
        csum = np.cumsum(costs)
        k = int(np.searchsorted(csum, remaining, side="right"))
        chosen[cand[:k]] = True
        if k:
            remaining -= int(csum[k - 1])
        cand, costs = cand[k + 1 :], costs[k + 1 :]  # cand[k] does not fit
        keep = costs <= remaining
        cand, costs = cand[keep], costs[keep]
    return chosen


def kept(inp: PolicyInput, *, binding: bool = False) -> BoolArr:
    """Arms the posteriors keep in the core.

    A scope with enough runs of its own (`proof` is set) judges an arm by expected cost: its
    posterior mean reaches its bar. A younger scope's posteriors lean on the other task
    types' evidence, whose mean is a poor guess for an arm only some types need, so there an
    arm needs P(theta >= bar) >= core_level. Critical arms (`proof`) stay until their own
    evidence rules them out; and, when the budget binds, arms this scope has seen needed stay
    while its own evidence gives P(theta >= bar) >= core_level."""
    if inp.proof is not None:
        keep = inp.alpha / (inp.alpha + inp.beta) >= inp.bar
    else:
        keep = tail_at_least(inp.bar, inp.alpha, inp.beta, inp.core_level)
    s, f = inp.proof_s, inp.proof_f
    if s is None or f is None:
        return keep
    if inp.proof is not None:
        todo = np.flatnonzero(inp.proof & ~keep)
        if todo.size:
            keep[todo] = tail_at_least(
                np.maximum(inp.bar[todo], inp.proof_bar),
                0.5 + s[todo],
                0.5 + f[todo],
                inp.proof_level,
            )
    if binding:
        # The shared prior comes from the other task types, and at thousands of arms most arms
        # a type needs are its own: the others' evidence says "never", and would shut out an
        # arm this type has seen needed. Its own runs decide instead.
        todo = np.flatnonzero((s > 0) & ~keep)
        if todo.size:
            keep[todo] = tail_at_least(inp.bar[todo], 0.5 + s[todo], 0.5 + f[todo], inp.core_level)
    return keep


def _evidence_floor(inp: PolicyInput, out: IntArr) -> FloatArr:
    """explore_evidence x P(theta >= bar) for the arms `out`, under their own evidence in
    this scope (Jeffreys prior), faded by `stale`: the chance an arm left out deserves a look,
    which falls as its runs here rule it out, and rises again as that evidence ages."""
    s, f = inp.proof_s, inp.proof_f
    assert s is not None and f is not None
    d = 1.0 if inp.stale is None else inp.stale[out]
    return inp.explore_evidence * beta_sf_array(inp.bar[out], 0.5 + s[out] * d, 0.5 + f[out] * d)


def _fill_best(cand: IntArr, key: FloatArr, tokens: IntArr, room: int) -> BoolArr:
    """`_fill` of `cand` by decreasing key (ties in index order). With many candidates only
    the head that can matter is sorted: at most room / (smallest cost) arms fit; the tail is
    sorted and filled only if the head leaves room for one of its arms."""
    k = cand.size
    costs = tokens[cand]
    positive = costs[costs > 0]
    head = k if positive.size == 0 else min(k, room // int(positive.min()) + 1)
    if head >= k or k < 2048:
        return _fill(cand[np.argsort(-key[cand], kind="stable")], tokens, room)
    part = np.argpartition(-key[cand], head)
    top, rest = cand[part[:head]], cand[part[head:]]
    chosen = _fill(top[np.lexsort((top, -key[top]))], tokens, room)
    left = room - int(tokens[chosen].sum())
    if rest.size and left >= int(tokens[rest].min()):
        chosen |= _fill(rest[np.lexsort((rest, -key[rest]))], tokens, left)
    return chosen


def plan(inp: PolicyInput) -> Plan:
    """The core and the exploration probabilities for one run."""
    a, b = inp.alpha, inp.beta
    n = a.shape[0]
    mu = a / (a + b)
    tokens = inp.tokens
    binding = int(tokens.sum()) > inp.budget
    # Trying every arm min_pulls times is a sensible start only when the inventory fits; a
    # binding budget explores through the slots instead.
    fresh = inp.underexplored & (not binding)
    keep = kept(inp, binding=binding)
    if binding and inp.unseen is not None:
        # Under a binding budget an arm that no run has ever referenced would hold a core place
        # on the configured prior's word alone (a curated arm's prior mean is 0.75, and a few
        # misses do not bring a cheap arm below its bar), and at thousands of arms those
        # guesses fill the core. They compete in the search instead (`discovery`), until a
        # run references them; unless the user declared them critical.
        unseen = inp.unseen if inp.critical is None else inp.unseen & ~inp.critical
        keep = keep & ~unseen
    want = inp.protected | fresh | keep
    want_tokens = int(tokens[want].sum())
    # When the inventory overflows the budget, `explore_share` of it is kept for exploration.
    room = int(inp.budget * (1.0 - inp.explore_share)) if binding else inp.budget
    if want_tokens <= room:
        core = want
    else:
        # protected always, then underexplored, then by what the arm surely saves per token:
        # the posterior's lower bound (mean - 2 sd) over the bar, so an arm known to be needed
        # goes before one the prior merely hopes for
        sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
        key = (mu - 2.0 * sd) / np.maximum(inp.bar, 1e-12)
        key = key + _UNDEREXPLORED * fresh + _PROTECTED * inp.protected
        prot = inp.protected
        left = max(room - int(tokens[prot].sum()), 0)
        cand = np.flatnonzero(want & ~prot).astype(np.int64)
        core = prot | _fill_best(cand, key, tokens, left)
    e = np.full(n, inp.explore_floor)
    if inp.explore_min is not None:
        e = np.maximum(e, inp.explore_min)
    if binding:
        # arms the posteriors keep but the budget left out go first, then the search
        e[keep] = 1.0
        out = np.flatnonzero(~keep)
        if out.size:
            e[out] = np.maximum(e[out], inp.explore_max * discovery(inp, out))
    elif inp.explore_evidence > 0.0 and inp.proof_s is not None:
        out = np.flatnonzero(~core)
        if out.size:
            e[out] = np.maximum(e[out], _evidence_floor(inp, out))
    e = np.where(core, 0.0, np.minimum(e, inp.explore_max))
    if not binding:
        return Plan(core, e, False)
    remaining = max(inp.budget - int(tokens[core].sum()), 0)
    return Plan(core, e, True, _slots(e, tokens, (~core) & (e > 0), remaining, inp.explore_slots))


#: Size classes per doubling of an arm's tokens: a class's slots are as large as its largest
#: arm, so a slot wastes at most 1 - 2^(-1/CLASSES) of its tokens.
CLASSES = 4


def _slots(e: FloatArr, tokens: IntArr, cand: BoolArr, remaining: int, cap: int) -> tuple:
    """The exploration slots for the budget the core left (`remaining`).

    Candidates are grouped by size class (tokens in [2^(k/CLASSES), 2^((k+1)/CLASSES))),
    each class's slots as large as its largest arm. The budget is shared in proportion to the
    classes' search weight (equal tokens per unit of weight: a cheap arm is tried as often as
    its cost allows, not only as often as an expensive one), class by class at most `cap`
    slots (what a capped class cannot use goes to the others). Class k's share, of the budget
    less one slot of the largest class, buys c_k slots: floor(c_k), and one more with
    probability frac(c_k), the classes rounded up jointly by systematic sampling in order of
    size, so that the slots drawn never overrun the budget (the round-ups cost at most their
    expected tokens plus one slot of the largest class). A slot of class k picks its arm i
    with probability e_i / (sum of e in k): the weights order the search, and the budget sets
    its size. So P(in) = 1 - (1 - q_i)^floor(c_k) (1 - frac(c_k) q_i), exactly."""
    cand = cand & (tokens <= remaining)
    ci = np.flatnonzero(cand).astype(np.int64)
    if ci.size == 0:
        return ()
    cost = tokens[ci]
    # arms cost at most 10,000,000 tokens, so there are at most 24 doublings
    inv = np.floor(CLASSES * np.log2(np.maximum(cost, 1))).astype(np.int64)
    w = np.bincount(inv, weights=e[ci], minlength=24 * CLASSES + 1)
    size = np.zeros(w.shape[0], dtype=np.int64)
    np.maximum.at(size, inv, cost)
    size = np.maximum(size, 1)
    if float(w.sum()) <= 0.0:
        return ()
    c = _fitted_shares(w, size, remaining, cap)
    count = np.floor(c).astype(np.int64)
    frac = c - count
    per_arm = e[ci] / np.maximum(w, 1e-300)[inv]
    groups = []
    for k in np.flatnonzero((count > 0) | (frac > 0)):  # ascending size: `draw` relies on it
        sel = inv == k
        groups.append(Slots(ci[sel], per_arm[sel], int(count[k]), int(size[k]), float(frac[k])))
    return tuple(groups)


def _fitted_shares(w: FloatArr, size: IntArr, remaining: int, cap: int) -> FloatArr:
    """`_shares` of the largest budget whose slots, rounded up however `draw` may round them,
    fit into `remaining` (at most a few shrinking steps; one slot of the largest class is
    always enough room)."""
    budget = remaining
    for _ in range(6):
        c = _shares(w, size, budget, cap)
        over = _worst_case(c, size) - remaining
        if over <= 0:
            return c
        budget -= int(over)
    return _shares(w, size, remaining - int(size[w > 0].max()), cap)


def _worst_case(c: FloatArr, size: IntArr) -> int:
    """The most tokens the slots `c` can take: the whole slots, and the largest sum of the
    slot sizes systematic sampling of the fractions can round up (checked at every offset
    where the rounded-up set changes)."""
    count = np.floor(c)
    frac = c - count
    on = np.flatnonzero(frac > 0)
    whole = int((count * size).sum())
    if on.size == 0:
        return whole
    f, sz = frac[on], size[on]
    upper = np.cumsum(f)
    offsets = np.concatenate([[0.0], np.mod(upper, 1.0)])[:, None]
    up = np.floor(upper[None, :] - offsets) > np.floor(upper[None, :] - f[None, :] - offsets)
    return whole + int((up * sz[None, :]).sum(axis=1).max())


def _shares(w: FloatArr, size: IntArr, budget: int, cap: int) -> FloatArr:
    """Slots per class: `budget` tokens shared in proportion to the weights `w`, no class more
    than `cap` slots (water-filling: a capped class's surplus goes to the others)."""
    c = np.zeros(w.shape[0])
    if budget <= 0:
        return c
    free = w > 0
    left = float(budget)
    while free.any():
        c[free] = left * (w[free] / float(w[free].sum())) / size[free]
        over = free & (c > cap)
        if not over.any():
            break
        c[over] = cap
        free &= ~over
        left = float(budget) - float((c[~free] * size[~free]).sum())
        if left <= 0:
            c[free] = 0.0
            break
    return c


def draw(p: Plan, rng: np.random.Generator) -> BoolArr:
    """One selection from a plan."""
    chosen = p.core.copy()
    if not p.binding:
        chosen |= rng.random(chosen.shape[0]) < p.explore
        return chosen
    # systematic sampling of the extra slots: points u, u + 1, ... on the groups' cumulative
    # fractions; a group gets one more slot when a point falls in its interval
    fracs = np.fromiter((g.extra for g in p.slots), dtype=np.float64, count=len(p.slots))
    upper = np.cumsum(fracs)
    u = rng.random()
    more = np.floor(upper - u) > np.floor(upper - fracs - u)
    for g, plus in zip(p.slots, more.tolist(), strict=True):
        count = g.count + int(plus)
        if count == 0 or g.idx.shape[0] == 0:
            continue
        # Each slot: arm j with probability q_j, or nothing with probability 1 - sum(q) (a
        # uniform draw past the cumulative sum). One draw per slot, no per-call validation.
        picks = np.searchsorted(np.cumsum(g.q), rng.random(count), side="right")
        chosen[g.idx[picks[picks < g.idx.shape[0]]]] = True
    return chosen


def select(inp: PolicyInput, rng: np.random.Generator) -> tuple[BoolArr, FloatArr]:
    """One selection; returns (included mask, each arm's exact inclusion probability)."""
    p = plan(inp)
    return draw(p, rng), p.propensities


def baseline(inp: PolicyInput, rng: np.random.Generator | None = None) -> BoolArr:
    """The counterfactual full prompt: every arm when the inventory fits the budget. When it
    does not, protected arms and then the others in a random order (inventory order without
    an `rng`), each added if it still fits: an unbiased stand-in for "everything" that
    favours no arm."""
    n = inp.tokens.shape[0]
    if int(inp.tokens.sum()) <= inp.budget:
        return np.ones(n, dtype=bool)
    free = np.flatnonzero(~inp.protected).astype(np.int64)
    if rng is not None:
        free = rng.permutation(free)
    room = inp.budget - int(inp.tokens[inp.protected].sum())
    return inp.protected | _fill(free, inp.tokens, max(room, 0))


def exploration_minimum(
    cfg: BanditConfig,
    restarting: bool,
    moved_from: FloatArr,
    moved_until: FloatArr,
    drop_at: FloatArr,
    index: float,
) -> FloatArr:
    """Re-exploration after a detected change, per arm.

    When an arm that a task type relied on stops being used there (a *central drop*), that
    type's workflow has changed: for `restart_runs` of its observations (`restarting`) every arm
    it had ruled out is explored at `restart_explore`, so an arm that has become central is
    found in tens of runs rather than the hundreds the floor would take. And the arm that
    dropped may have moved to another task type: for `moved_runs` observations it is explored
    at `moved_explore` in every scope where it has not itself dropped since."""
    e = np.full(moved_until.shape, cfg.restart_explore if restarting else 0.0)
    moved = (moved_until > index) & (drop_at < moved_from)
    return np.where(moved, np.maximum(e, cfg.moved_explore), e)


@dataclass(frozen=True)
class Declared:
    """What the user declared about each arm: critical (protected, or with a prior or a miss
    cost of its own) and its own miss cost (nan where none)."""

    critical: BoolArr
    miss: FloatArr


def declared(cfg: BanditConfig, ids: Iterable[str]) -> Declared | None:
    """The declarations `cfg` makes about `ids`, or None when it makes none (the usual case,
    and the fast one: nothing per arm to match)."""
    if not (cfg.protected or cfg.arm_priors or cfg.type_priors or cfg.miss_costs):
        return None
    ids = list(ids)
    miss = np.array(
        [np.nan if (c := cfg.declared_miss_cost(i)) is None else c for i in ids], dtype=np.float64
    )
    critical = np.fromiter((cfg.is_critical(i) for i in ids), dtype=bool, count=len(ids))
    return Declared(critical, miss)


def from_config(
    cfg: BanditConfig,
    alpha: FloatArr,
    beta: FloatArr,
    tokens: IntArr,
    protected: BoolArr,
    underexplored: BoolArr,
    budget: int,
    *,
    proof: BoolArr | None = None,
    proof_s: FloatArr | None = None,
    proof_f: FloatArr | None = None,
    explore_min: FloatArr | None = None,
    unseen: BoolArr | None = None,
    types: IntArr | None = None,
    tried: BoolArr | None = None,
    groups: IntArr | None = None,
    decl: Declared | None = None,
    explore_evidence: float = 0.0,
    stale: FloatArr | None = None,
) -> PolicyInput:
    """The policy input for one run under `cfg` (the miss cost depends on the inventory).

    `proof` marks the arms whose own evidence must rule them out (the scope's evidence is
    recent enough); only critical arms (`decl`) are held by it. Arms with a miss cost of their
    own have bars by it; critical arms without one a bar of at most `proof_bar`."""
    miss = cfg.miss_cost(int(tokens.sum()), budget)
    bar = bars(tokens, miss, cfg.threshold)
    critical = None
    if decl is not None:
        critical = decl.critical
        own = ~np.isnan(decl.miss)
        bar = np.where(own, np.minimum(cfg.threshold, tokens / np.where(own, decl.miss, 1.0)), bar)
        bar = np.where(critical & ~own, np.minimum(bar, cfg.proof_bar), bar)
    return PolicyInput(
        alpha=alpha,
        beta=beta,
        tokens=tokens,
        protected=protected,
        underexplored=underexplored,
        budget=budget,
        bar=bar,
        explore_floor=cfg.explore_floor,
        explore_max=cfg.explore_max,
        explore_share=cfg.explore_share,
        explore_slots=cfg.explore_slots,
        core_level=cfg.core_level,
        proof=None if proof is None else proof & (critical if critical is not None else False),
        proof_s=proof_s,
        proof_f=proof_f,
        proof_bar=cfg.proof_bar,
        proof_level=cfg.proof_level,
        explore_min=explore_min,
        unseen=unseen,
        types=types if cfg.explore_by_type else None,
        tried=tried,
        groups=groups if cfg.share_by_prefix else None,
        critical=critical,
        explore_evidence=explore_evidence,
        stale=stale,
    )


def for_scope(
    cfg: BanditConfig,
    alpha: FloatArr,
    beta: FloatArr,
    tokens: IntArr,
    protected: BoolArr,
    budget: int,
    *,
    contextual: bool,
    global_pulls: FloatArr,
    scope: dict[str, FloatArr],
    global_successes: FloatArr | None = None,
    scope_obs: float,
    restarting: bool,
    moved_from: FloatArr,
    moved_until: FloatArr,
    index: float,
    types: IntArr | None = None,
    groups: IntArr | None = None,
    decl: Declared | None = None,
) -> PolicyInput:
    """The policy input for a run in one scope (a context, or the global scope).

    `scope` holds that scope's per-arm evidence columns (s, f, pw, drop_at, pulls, last: the
    observation index that last observed the arm here); the store's cache and the in-memory
    learner both call this, so they decide alike."""
    under = global_pulls < cfg.min_pulls
    if contextual:
        under = under | (scope["pulls"] < cfg.min_pulls_context)
    settled = scope_obs >= cfg.proof_after
    return from_config(
        cfg,
        alpha,
        beta,
        tokens,
        protected,
        under,
        budget,
        proof=scope["pw"] >= 1.0 if settled else None,
        proof_s=scope["s"],
        proof_f=scope["f"],
        explore_min=exploration_minimum(
            cfg, restarting, moved_from, moved_until, scope["drop_at"], index
        ),
        unseen=None if global_successes is None else global_successes <= 0,
        types=types,
        tried=global_pulls > 0,
        groups=groups,
        decl=decl,
        explore_evidence=cfg.explore_evidence if settled else 0.0,
        stale=staleness(cfg, scope["last"], scope_obs, index) if settled else None,
    )


def staleness(cfg: BanditConfig, last: FloatArr, scope_obs: float, index: float) -> FloatArr | None:
    """How much of each arm's evidence in a scope still counts for exploration: halved per
    `explore_half_life` of the scope's runs since it last observed the arm. `last` is that
    observation's index in the whole log; the scope's runs since are estimated from its share
    of all observations (`scope_obs` of `index`)."""
    if not cfg.explore_half_life or index <= 0:
        return None
    runs = np.maximum(index - last, 0.0) * (scope_obs / index)
    return 0.5 ** (runs / cfg.explore_half_life)
