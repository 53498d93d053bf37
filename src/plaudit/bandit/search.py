"""The search for needed arms under a binding budget: how much each arm left out of the core is
worth trying in this scope (`discovery`), and what the arms' types and ids say about it.

An inventory of thousands cannot be tried arm by arm in every task type's runs, so exploration
is a search, ordered by three kinds of evidence:

* the arm's own runs here: an arm never tried weighs 1, halved by each run here that did not
  reference it (the odds that an arm needed in about half of this task type's runs would have
  missed them all); an arm referenced here weighs the probability, under this scope's own
  evidence (Jeffreys prior), that it clears its bar, so an arm this task type needs but the
  other types' evidence keeps out of the core is retried rather than forgotten;
* its *type* (`type_weight`), for arms no run anywhere has referenced: how often the tried
  arms of that type (tool, skill, file, memory, section) were found needed;
* its *module* (`module_weights`): the category of a tool, skill or memory, the directory of a
  file. Ids carry structure (`file:workspace:src/auth/login.py` beside `.../auth/session.py`,
  `tool:billing:Refund` beside `memory:billing:...`), and one needed arm makes its siblings
  likelier to be needed. Modules weigh in only while, leaving one arm out at a time, they have
  predicted which tried arms were found needed better than the scope's average rate: on ids
  that say nothing (random names) they predict worse, and change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from plaudit.bandit.arms import ARM_TYPES
from plaudit.bandit.stats import beta_sf_array

if TYPE_CHECKING:
    from plaudit.bandit.policy import PolicyInput

FloatArr = NDArray[np.float64]
BoolArr = NDArray[np.bool_]
IntArr = NDArray[np.int64]

#: A module's weight is its shrunk found rate over the scope's, kept within [1/CLIP, CLIP]: a
#: module can at most quadruple or quarter its arms' chance, so the ladder of the arms' own
#: evidence (halved by each run that did not need them) still orders the search.
CLIP = 4.0
#: Modules weigh in once their leave-one-out log-likelihood gain over the scope's rate exceeds
#: this (log units): a margin against structure read into noise.
MODULE_GAIN = 3.0
#: The least prior strength (in arms) of the scope's rate in a module's shrunk rate.
MODULE_KAPPA = 1.0


def discovery(inp: PolicyInput, among: IntArr | None = None) -> FloatArr:
    """How much each arm of `among` (default: all) is worth trying in this scope when the
    budget binds (see the module's docstring); 0 for arms the posterior alone decides. The
    policy asks only about the arms its posteriors leave out of the core, which spares the
    incomplete beta function for the rest."""
    n = inp.alpha.shape[0]
    idx = np.arange(n) if among is None else among
    if inp.proof_s is None or inp.proof_f is None:
        return np.zeros(idx.shape[0])
    s, f = inp.proof_s, inp.proof_f
    sa, fa = s[idx], f[idx]
    w = 0.5**fa
    seen = np.flatnonzero(sa > 0)
    if seen.size:
        w[seen] = beta_sf_array(inp.bar[idx[seen]], 0.5 + sa[seen], 0.5 + fa[seen])
    if inp.unseen is not None and inp.types is not None and inp.tried is not None:
        kinds = type_weight(inp.types, inp.tried, ~inp.unseen)
        w = np.where(inp.unseen[idx], w * kinds[inp.types[idx]], w)
    if inp.groups is not None:
        w = w * module_weights(inp.groups, s, f)[idx]
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


def module_of(arm_id: str) -> str:
    """An arm's module: a file's directory (its last one: `src/auth/login.py` is in `auth`),
    else its category (`tool:billing:Refund` is in `billing`). A tool, a memory and a file of
    one module therefore share it."""
    _, category, name = arm_id.split(":", 2)
    parts = name.split("/")
    return parts[-2] if len(parts) > 1 else category


def group_codes(ids: Iterable[str]) -> IntArr:
    """Each arm's module as a small integer (`module_of`)."""
    codes: dict[str, int] = {}
    return np.fromiter((codes.setdefault(module_of(i), len(codes)) for i in ids), dtype=np.int64)


def module_weights(groups: IntArr, s: FloatArr, f: FloatArr) -> FloatArr:
    """Per arm, its module's found rate in this scope over the scope's, shrunk by empirical
    Bayes (the spread of the modules' rates beyond binomial noise sets how far a module may
    stray from the scope's rate) and kept within [1/CLIP, CLIP]; all 1 unless the modules
    predict, one arm left out at a time, which tried arms were found better than the scope's
    rate by MODULE_GAIN."""
    ones = np.ones(groups.shape[0])
    tried = (s + f) > 0
    found = s > 0
    k = int(groups.max()) + 1 if groups.size else 1
    n_g = np.bincount(groups, weights=tried, minlength=k)
    h_g = np.bincount(groups, weights=found, minlength=k)
    n, h = float(n_g.sum()), float(h_g.sum())
    if n < 2 or h <= 0 or h >= n:
        return ones
    r0 = h / n
    use = n_g > 0
    share = n_g[use] / n
    spread = float((share * (h_g[use] / n_g[use] - r0) ** 2).sum())
    noise = float((share * r0 * (1.0 - r0) / n_g[use]).sum())
    if spread <= noise:
        return ones
    kappa = max(r0 * (1.0 - r0) / (spread - noise) - 1.0, MODULE_KAPPA)
    if _loo_gain(groups, n_g, h_g, n, h, kappa) <= MODULE_GAIN:
        return ones
    r0s = (h + 1.0) / (n + 2.0)
    rate = (h_g + kappa * r0s) / (n_g + kappa)
    return np.clip(rate / r0s, 1.0 / CLIP, CLIP)[groups]


def _loo_gain(
    groups: IntArr, n_g: FloatArr, h_g: FloatArr, n: float, h: float, kappa: float
) -> float:
    """How much better, in log-likelihood, each module's shrunk rate (computed without the arm)
    predicts whether a tried arm was found than the scope's rate does, summed over the tried
    arms of modules with arms still untried (a module wholly tried, such as the sections,
    has nothing left to find)."""
    size = np.bincount(groups, minlength=n_g.shape[0])
    open_ = (n_g > 0) & (n_g < size)
    hg, ng = h_g[open_], n_g[open_]
    r_hit = (h - 0.5) / n  # the scope's rate without one found arm (smoothed)
    r_miss = (h + 0.5) / n  # ... without one arm not found
    g_hit = (hg - 1.0 + kappa * r_hit) / (ng - 1.0 + kappa)
    g_miss = (hg + kappa * r_miss) / (ng - 1.0 + kappa)
    gain = np.where(hg > 0, hg * np.log(np.maximum(g_hit, 1e-12) / r_hit), 0.0)
    gain = gain + (ng - hg) * np.log(np.maximum(1.0 - g_miss, 1e-12) / (1.0 - r_miss))
    return float(gain.sum())
