"""The selection policy as pure numpy: no store, no clock, so it is fast, seedable and shared by
the library, the simulator and the benchmarks.

It thinks in expected cost. Leaving out an arm that the run needs costs `miss_cost` tokens (a
retry, a worse answer); including it costs its own tokens. So an arm earns its place when its
usefulness theta reaches its bar, `tokens / miss_cost` (capped by `threshold`).

A run is drawn in two parts, which keeps every inclusion probability exact and cheap:

* the **core**, a deterministic function of the posteriors, in this order of priority:
  protected arms; underexplored arms (when the inventory fits the budget); arms whose posterior
  probability of clearing their bar, P(theta >= bar), is at least `core_level`; and arms whose
  *own* evidence in this scope cannot yet rule them out (`proof`): P(theta >= max(bar,
  proof_bar)) >= proof_level under a Jeffreys prior on this scope's runs alone. The last rule
  is what holds a rarely needed but critical arm through an early run of bad luck that the
  shared prior would believe; it applies only to scopes with enough runs to afford it (see
  `BanditConfig.proof_after`). When the budget binds, the core is filled in that order and then
  by mean / bar (expected saving per token), leaving `explore_share` of the budget free;
* **exploration**: every other arm is drawn with probability e = max(explore_floor,
  explore_min), at most explore_max. `explore_min` carries the re-exploration that follows a
  detected change (`exploration_minimum`). When everything fits the budget the draws are
  independent coins, so P(in) = e exactly. When the budget binds, e also carries the search
  (`discovery`), and the budget the core left is shared by slots, grouped by size class
  (`_slots`); each slot of a group picks one of the group's arms with a fixed probability q,
  so P(in) = 1 - prod over groups (1 - q)^slots exactly.

Every arm that can be included therefore has a logged propensity above zero, which is what
inverse-propensity estimators need, and nothing is estimated by Monte Carlo.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from plaudit.bandit.arms import ARM_TYPES
from plaudit.bandit.stats import tail_at_least

if TYPE_CHECKING:
    from plaudit.bandit.config import BanditConfig

FloatArr = NDArray[np.float64]
BoolArr = NDArray[np.bool_]
IntArr = NDArray[np.int64]

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


@dataclass(frozen=True)
class Slots:
    """`count` exploration slots of at most `tokens` each (binding budget only); each picks
    arm `idx[j]` with probability `q[j]`, or nothing with probability 1 - sum(q)."""

    idx: IntArr
    q: FloatArr
    count: int
    tokens: int


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
            miss[g.idx] *= (1.0 - g.q) ** g.count
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


def kept(inp: PolicyInput, *, proof: bool = True) -> BoolArr:
    """Arms the posteriors keep in the core: P(theta >= bar) >= core_level, or (where proof is
    required, and `proof`) their own evidence cannot yet rule them out."""
    keep = tail_at_least(inp.bar, inp.alpha, inp.beta, inp.core_level)
    if proof and inp.proof is not None and inp.proof_s is not None and inp.proof_f is not None:
        todo = np.flatnonzero(inp.proof & ~keep)
        if todo.size:
            keep[todo] = tail_at_least(
                np.maximum(inp.bar[todo], inp.proof_bar),
                0.5 + inp.proof_s[todo],
                0.5 + inp.proof_f[todo],
                inp.proof_level,
            )
    return keep


def discovery(inp: PolicyInput) -> FloatArr:
    """When the budget binds, how much an arm is worth trying in this scope: 1 for an arm never
    tried here, halved by each run here that did not reference it (the odds that an arm needed
    in about half of this task type's runs would have missed them all), 0 once referenced
    here (then the posterior decides). A large inventory is searched this way, untried arms
    first, instead of trusting that an arm useless to other task types is useless to this
    one."""
    if inp.proof_s is None or inp.proof_f is None:
        return np.zeros(inp.alpha.shape[0])
    w = np.where(inp.proof_s > 0, 0.0, 0.5**inp.proof_f)
    if inp.unseen is None:
        return w
    if inp.types is not None and inp.tried is not None:
        w = np.where(inp.unseen, w * type_weight(inp.types, inp.tried, ~inp.unseen)[inp.types], w)
    return w


def type_weight(types: IntArr, tried: BoolArr, found: BoolArr) -> FloatArr:
    """Per arm type, how promising an arm of that type that no run has referenced is: the
    posterior mean, under a uniform prior, of the share of the type's tried arms that some run
    referenced, relative to the most promising type among the inventory's. An inventory's
    sections are all needed (a section is referenced whenever it is included), and its dead
    weight may be mostly of a few types: one found section makes the others worth trying
    next."""
    t = np.bincount(types, weights=tried, minlength=len(ARM_TYPES))
    h = np.bincount(types, weights=found & tried, minlength=len(ARM_TYPES))
    rate = (h + 1.0) / (t + 2.0)
    # relative to the best type that still has arms to find, so that the weights order the
    # search rather than shrink it once a type (the sections) is wholly found
    open_ = np.bincount(types, weights=~found, minlength=len(ARM_TYPES)) > 0
    top = float(rate[open_].max()) if open_.any() else 1.0
    return np.minimum(rate / top, 1.0)


def type_codes(ids: Iterable[str]) -> IntArr:
    """Each arm id's type as its index in `arms.ARM_TYPES`."""
    code = {t: i for i, t in enumerate(ARM_TYPES)}
    return np.fromiter((code[i.split(":", 1)[0]] for i in ids), dtype=np.int64)


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
    # With a binding budget an arm cannot wait in the core for its own runs to rule it out:
    # the search for arms that matter (`discovery`) takes their place in the exploration slots.
    keep = kept(inp, proof=not binding)
    if binding and inp.unseen is not None:
        # Under a binding budget an arm that no run has ever referenced would hold a core place
        # on the configured prior's word alone (a curated arm's prior mean is 0.75, and a few
        # misses do not bring a cheap arm below its bar), and at thousands of arms those
        # guesses fill the core. They compete in the search instead (`discovery`), until a
        # run references them.
        keep = keep & ~inp.unseen
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
        e = np.maximum(e, np.where(keep, 1.0, inp.explore_max * discovery(inp)))
    e = np.where(core, 0.0, np.minimum(e, inp.explore_max))
    if not binding:
        return Plan(core, e, False)
    remaining = max(inp.budget - int(tokens[core].sum()), 0)
    return Plan(core, e, True, _slots(e, tokens, (~core) & (e > 0), remaining, inp.explore_slots))


def _slots(e: FloatArr, tokens: IntArr, cand: BoolArr, remaining: int, cap: int) -> tuple:
    """The exploration slots for the budget the core left (`remaining`).

    Candidates are grouped by size class (tokens in [2^k, 2^(k+1))), each class's slots as
    large as its largest arm, so that a slot wastes at most half its tokens. The budget is
    shared in proportion to the classes' search weight (equal tokens per unit of weight: a
    cheap arm is tried as often as its cost allows, not only as often as an expensive one).
    Class k's share (of the budget less one slot of the largest class) buys c_k = share / size
    slots: floor(c_k) whole slots (at most `cap`), and what is left buys *lottery* slots (as
    many as the largest class they may pick fits into, at least one), each of which picks class
    k with probability proportional to its shortfall, in tokens, from its share of the whole
    budget, so every class can be drawn. A slot of class k picks its arm i with probability
    e_i / (sum of e in k): the weights order the search, and the budget sets its size. So
    P(in) = 1 - prod over groups (1 - q_i)^count, exactly."""
    cand = cand & (tokens <= remaining)
    ci = np.flatnonzero(cand).astype(np.int64)
    if ci.size == 0:
        return ()
    cost = tokens[ci]
    # size classes [2^k, 2^(k+1)); arms cost at most 10,000,000 tokens, so k < 24
    inv = np.floor(np.log2(np.maximum(cost, 1))).astype(np.int64)
    w = np.bincount(inv, weights=e[ci], minlength=24)
    size = np.zeros(w.shape[0], dtype=np.int64)
    np.maximum.at(size, inv, cost)
    size = np.maximum(size, 1)
    total = float(w.sum())
    if total <= 0.0:
        return ()
    # the whole slots share what is left after room for one slot of the largest class, so
    # that the lottery can always reach every class (the expensive arms are tried too)
    ideal = remaining * (w / total) / size
    c = (remaining - int(size[w > 0].max())) * (w / total) / size
    count = np.minimum(np.floor(c), cap).astype(np.int64)
    left = int(remaining) - int((count * size).sum())
    per_arm = e[ci] / np.maximum(w, 1e-300)[inv]
    groups = []
    for k in np.flatnonzero(count > 0):
        sel = inv == k
        groups.append(Slots(ci[sel], per_arm[sel], int(count[k]), int(size[k])))
    # each class's shortfall from its ideal share, in tokens
    fits = (count < cap) & (size <= left)
    deficit = np.where(fits, np.maximum(c - count, 0.0) * size, 0.0)
    if float(deficit.sum()) <= 0.0:
        deficit = np.where(fits, np.maximum(ideal - count, 0.0) * size, 0.0)
    if float(deficit.sum()) > 0.0:
        # as many lottery slots as the largest class they may pick fits into what is left
        lottery = max(1, left // int(size[deficit > 0].max()))
        pick = deficit / float(deficit.sum())
        q = pick[inv] * per_arm
        on = q > 0
        groups.append(Slots(ci[on], q[on], lottery, left // lottery))
    return tuple(groups)


def draw(p: Plan, rng: np.random.Generator) -> BoolArr:
    """One selection from a plan."""
    chosen = p.core.copy()
    if not p.binding:
        chosen |= rng.random(chosen.shape[0]) < p.explore
        return chosen
    for g in p.slots:
        if g.count == 0 or g.idx.shape[0] == 0:
            continue
        # Each slot: arm j with probability q_j, or nothing with probability 1 - sum(q) (a
        # uniform draw past the cumulative sum). One draw per slot, no per-call validation.
        picks = np.searchsorted(np.cumsum(g.q), rng.random(g.count), side="right")
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
) -> PolicyInput:
    """The policy input for one run under `cfg` (the miss cost depends on the inventory)."""
    miss = cfg.miss_cost(int(tokens.sum()), budget)
    return PolicyInput(
        alpha=alpha,
        beta=beta,
        tokens=tokens,
        protected=protected,
        underexplored=underexplored,
        budget=budget,
        bar=bars(tokens, miss, cfg.threshold),
        explore_floor=cfg.explore_floor,
        explore_max=cfg.explore_max,
        explore_share=cfg.explore_share,
        explore_slots=cfg.explore_slots,
        core_level=cfg.core_level,
        proof=proof,
        proof_s=proof_s,
        proof_f=proof_f,
        proof_bar=cfg.proof_bar,
        proof_level=cfg.proof_level,
        explore_min=explore_min,
        unseen=unseen,
        types=types if cfg.explore_by_type else None,
        tried=tried,
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
) -> PolicyInput:
    """The policy input for a run in one scope (a context, or the global scope).

    `scope` holds that scope's per-arm evidence columns (s, f, pw, drop_at, pulls); the store's
    cache and the in-memory learner both call this, so they decide alike."""
    under = global_pulls < cfg.min_pulls
    if contextual:
        under = under | (scope["pulls"] < cfg.min_pulls_context)
    proof = scope["pw"] >= 1.0 if scope_obs >= cfg.proof_after else None
    return from_config(
        cfg,
        alpha,
        beta,
        tokens,
        protected,
        under,
        budget,
        proof=proof,
        proof_s=scope["s"],
        proof_f=scope["f"],
        explore_min=exploration_minimum(
            cfg, restarting, moved_from, moved_until, scope["drop_at"], index
        ),
        unseen=None if global_successes is None else global_successes <= 0,
        types=types,
        tried=global_pulls > 0,
    )
