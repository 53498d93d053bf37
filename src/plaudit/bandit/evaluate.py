"""Off-policy evaluation: what a candidate configuration would save and recall, estimated from
runs the current policy logged, with no new runs.

The candidate's inclusion probability pi for every arm comes from its own plan on the current
posteriors (a deterministic function, so its prompt tokens are known exactly). What cannot be
known directly is which arms each logged run *needed*: a need is seen only when the logged run
included the arm, which happened with the logged propensity p > 0. Per run and arm, with l the
inclusion indicator and y the reward (referenced or not):

* IPS:    needed ~ l y / p                  (unbiased; variance grows with 1/p)
* SNIPS:  per context and arm, the need rate sum(l y / p) / sum(l / p), the same for each run
          (self-normalised: bounded, slightly biased)
* DR:     needed ~ m + l (y - m) / p        (m: the posterior mean as a model; unbiased when
          either p or m is right, and lower variance when m is good), with the *switch* of
          Wang, Agarwal and Dudik (2017): below p < SWITCH (0.01), i.e. at the exploration
          floor, no observation is weighted up (a weight of 200 lets one observation swing
          the estimate): the run that included the arm counts its need as seen (y), the runs
          that did not are left to the model; the model's uncertainty enters the interval
          instead (each resample draws the need rates from their Beta posteriors, and the
          needs of the runs the model stands in for as a binomial count at those rates).
          Arms retried by evidence (p from 0.01 to 0.05) are weighted up: a candidate that
          keeps less misses mostly those, and the model alone predicted too few of their
          needs (the switch at 0.05 covered the truth in 3 of 8 seeds on the critical
          workload)

Recall = sum of pi x needed / sum of needed over runs; misses per run follow, and net savings
charge each miss a retry. Intervals come from a Poisson bootstrap over runs (each run weighted
by a Poisson(1) draw), which applies to all three estimators alike, including the ratio and
SNIPS's normalisation.

IPS and SNIPS need no model, and cannot see what the log never observed: where a
configuration's misses fall on arms logged at the exploration floor, a need turns up there
once or not at all, and a bootstrap cannot show the spread of an event it never saw. Each
observation counts with weight pi / p; `weight_diagnostics` reports their effective sample
size and weight range, and flags them untrusted when one observation weighs more than
MAX_WEIGHT or the effective sample size is small.

What the doubly robust interval cannot see: the need model's error. The model is fitted on
the same runs (`from_log`), and for the arms left to it, those the current policy keeps at the
floor, it gives their pooled rate, chosen after the fact: the policy keeps at the floor the
arms whose own runs happened to need them least, so the pool's rate runs low. Checked in
simulation (`evalcheck.evaluation_check`), the interval covers the on-policy truth in 19 or
20 of 20 seeds on the critical, stationary and drift workloads, for the current configuration
and a candidate, on recall and on net savings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ESTIMATORS = ("ips", "snips", "dr")
#: Doubly robust corrects the model only with observations logged at propensity >= SWITCH.
SWITCH = 0.01


@dataclass(frozen=True)
class LoggedRun:
    """One logged run: its context key, included arm indices, rewards and propensities."""

    context: Any
    included: np.ndarray  # int indices into the inventory
    reward: np.ndarray  # 0/1, aligned with `included`
    propensity: np.ndarray  # > 0, aligned with `included`
    inventory_tokens: int


class _Prepared:
    """Everything the estimators need as flat arrays, so each bootstrap resample is a handful
    of weighted sums instead of a loop over runs."""

    def __init__(
        self,
        runs: Sequence[LoggedRun],
        pi: Mapping[Any, np.ndarray],
        model: Mapping[Any, np.ndarray],
    ) -> None:
        contexts = list(dict.fromkeys(r.context for r in runs))
        offset, start = {}, 0
        for c in contexts:
            offset[c] = start
            start += pi[c].size
        self.pi_flat = np.concatenate([pi[c] for c in contexts])
        self.ctx_of_key = np.concatenate(
            [np.full(pi[c].size, i, dtype=np.int64) for i, c in enumerate(contexts)]
        )
        self.ctx_of_run = np.array([contexts.index(r.context) for r in runs], dtype=np.int64)
        self.n_ctx = len(contexts)
        n = len(runs)
        self.ips = np.zeros((n, 2))
        self.dr = np.zeros((n, 2))
        dm = {c: (float(np.dot(pi[c], model[c])), float(model[c].sum())) for c in contexts}
        run_idx, key_idx, yv, yr, iv, sw = [], [], [], [], [], []
        for r, run in enumerate(runs):
            p_c, m_c = pi[run.context], model[run.context]
            inv = 1.0 / run.propensity
            y = run.reward.astype(np.float64)
            pic = p_c[run.included]
            self.ips[r] = (float(np.dot(pic, y * inv)), float(np.dot(y, inv)))
            # the switch: below SWITCH the model alone speaks for the runs that did not include
            # the arm (a weight of 1/p > 20 would let one observation decide the estimate),
            # but a need this run did include is known, and counts as itself, unweighted
            mi = m_c[run.included]
            resid = np.where(run.propensity >= SWITCH, (y - mi) * inv, y - mi)
            hit0, need0 = dm[run.context]
            self.dr[r] = (hit0 + float(np.dot(pic, resid)), need0 + float(resid.sum()))
            run_idx.append(np.full(run.included.size, r, dtype=np.int64))
            key_idx.append(offset[run.context] + run.included)
            yv.append(y * inv)
            yr.append(y)
            iv.append(inv)
            sw.append(run.propensity >= SWITCH)
        self.run_idx = np.concatenate(run_idx) if run_idx else np.zeros(0, dtype=np.int64)
        self.key_idx = np.concatenate(key_idx) if key_idx else np.zeros(0, dtype=np.int64)
        self.yv = np.concatenate(yv) if yv else np.zeros(0)
        self.yr = np.concatenate(yr) if yr else np.zeros(0)
        self.iv = np.concatenate(iv) if iv else np.zeros(0)
        self.sw = np.concatenate(sw) if sw else np.zeros(0, dtype=bool)
        self.n_keys = self.pi_flat.size

    def dr_with(
        self, w: np.ndarray, m_flat: np.ndarray, rng: np.random.Generator | None = None
    ) -> tuple[float, float]:
        """Doubly robust (sum of pi x needed, sum of needed) with run weights `w` and the model
        `m_flat` (one need rate per context and arm, flattened like `pi_flat`). With `rng`,
        the needs the model stands in for (runs where the arm was not observed at p >= SWITCH)
        also vary as Bernoulli draws would: the truth is what these runs needed, not its
        expectation."""
        k = self.n_keys
        n_c = np.bincount(self.ctx_of_run, weights=w, minlength=self.n_ctx)
        a_c = np.bincount(self.ctx_of_key, weights=self.pi_flat * m_flat, minlength=self.n_ctx)
        b_c = np.bincount(self.ctx_of_key, weights=m_flat, minlength=self.n_ctx)
        m_obs = m_flat[self.key_idx]
        resid = w[self.run_idx] * np.where(self.sw, self.yv - m_obs * self.iv, self.yr - m_obs)
        by_key = np.bincount(self.key_idx, weights=resid, minlength=k)
        hit = float(n_c @ a_c + self.pi_flat @ by_key)
        need = float(n_c @ b_c + by_key.sum())
        if rng is not None:
            # every included arm's need is known, at any propensity
            seen = np.bincount(self.key_idx, weights=w[self.run_idx], minlength=k)
            unseen = np.maximum(n_c[self.ctx_of_key] - seen, 0.0)
            # the realised count itself, not a normal approximation: the model stands in for
            # arms needed a few times in hundreds of runs, a count with a long upper tail that
            # a symmetric noise of the same variance cuts short (Poisson bootstrap weights are
            # whole numbers, so `unseen` is a whole number of runs)
            p = np.clip(m_flat, 0.0, 1.0)
            noise = rng.binomial(np.rint(unseen).astype(np.int64), p) - unseen * p
            hit += float(self.pi_flat @ noise)
            need += float(noise.sum())
        return hit, need

    def point(self, w: np.ndarray) -> dict[str, tuple[float, float]]:
        """(sum of pi x needed, sum of needed) per estimator, with run weights `w`."""
        k = self.pi_flat.size
        wt = w[self.run_idx]
        num = np.bincount(self.key_idx, weights=wt * self.yv, minlength=k)
        den = np.bincount(self.key_idx, weights=wt * self.iv, minlength=k)
        rate = np.divide(num, den, out=np.zeros(k), where=den > 0)
        n_c = np.bincount(self.ctx_of_run, weights=w, minlength=self.n_ctx)[self.ctx_of_key]
        ips, dr = w @ self.ips, w @ self.dr
        return {
            "ips": (float(ips[0]), float(ips[1])),
            "snips": (float(np.dot(n_c * self.pi_flat, rate)), float(np.dot(n_c, rate))),
            "dr": (float(dr[0]), float(dr[1])),
        }


def since_change(
    labels: Sequence[Any], index: Sequence[int], changed_at: Mapping[Any, int]
) -> np.ndarray:
    """Which runs to evaluate: in each context, those from its latest detected change on.

    A need model fitted on every run describes the regime after the last change (the change
    detectors reset an arm's evidence when they alarm), so runs before it would be judged by
    needs they did not have: a file that became central at run 1,000 would count as needed,
    and missed, in the runs before. The estimate then describes the current regime, which is
    what a candidate would run in. `index` is each run's observation index (1 = the first)."""
    return np.array(
        [i >= changed_at.get(c, 0) for c, i in zip(labels, index, strict=True)], dtype=bool
    )


def estimate(
    runs: Sequence[LoggedRun],
    pi: Mapping[Any, np.ndarray],
    model: Mapping[Any, np.ndarray],
    tokens: Mapping[Any, np.ndarray],
    *,
    miss_cost: float | None = None,
    level: float = 0.95,
    resamples: int = 300,
    seed: int = 0,
    model_ab: Mapping[Any, tuple[np.ndarray, np.ndarray]] | None = None,
) -> dict[str, Any]:
    """Savings and recall of the candidate `pi` over `runs`, by each estimator, with intervals.

    `pi`, `model` and `tokens` map each context key to per-arm arrays of the inventory.
    `model_ab`, the model's Beta posteriors (alpha, beta), makes the doubly robust interval
    carry the model's own uncertainty: each resample draws the need rates from them. Where
    the logged runs hold no observation of an arm the candidate leaves out (the logging policy
    explored it at its floor, or never), only the model speaks for it, and an interval that
    resamples runs alone is as sure of the model's guess as of an observation."""
    n = len(runs)
    if n == 0:
        raise ValueError("no logged runs to evaluate")
    inv_run = np.array([float(r.inventory_tokens) for r in runs])
    tok_run = np.array([float(np.dot(pi[r.context], tokens[r.context])) for r in runs])
    inv_tokens, cand_tokens = float(inv_run.sum()), float(tok_run.sum())
    prep = _Prepared(runs, pi, model)
    point = prep.point(np.ones(n))
    rng = np.random.default_rng(seed)
    boots: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
    boot_miss: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
    boot_net: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
    keys = list(dict.fromkeys(r.context for r in runs))
    ab = None
    if model_ab is not None:
        ab = (
            np.concatenate([model_ab[c][0] for c in keys]),
            np.concatenate([model_ab[c][1] for c in keys]),
        )
    for _ in range(resamples):
        w = rng.poisson(1.0, n).astype(np.float64)
        if w.sum() == 0:
            continue
        res = prep.point(w)
        if ab is not None:
            res["dr"] = prep.dr_with(w, rng.beta(ab[0], ab[1]), rng)
        runs_w, inv_w, tok_w = float(w.sum()), float(w @ inv_run), float(w @ tok_run)
        for k, (hit, need) in res.items():
            if need > 0:
                boots[k].append(hit / need)
            boot_miss[k].append((need - hit) / runs_w)
            if miss_cost and inv_w > 0:
                missed = max(need - hit, 0.0)
                boot_net[k].append((1.0 - (tok_w + miss_cost * missed) / inv_w) * 100.0)
    trust = weight_diagnostics(runs, pi)
    out: dict[str, Any] = {
        "runs": n,
        "level": level,
        "prompt_tokens_per_run": cand_tokens / n,
        "savings_percent": (1.0 - cand_tokens / inv_tokens) * 100.0 if inv_tokens else None,
    }
    for k in ESTIMATORS:
        hit, need = point[k]
        entry = _entry(hit, need, n, boots[k], boot_miss[k], level)
        if miss_cost:
            # net of what the misses cost: each one a retry of miss_cost tokens
            misses = max(need - hit, 0.0) / n
            net = 1.0 - (cand_tokens / n + miss_cost * misses) / (inv_tokens / n)
            entry["net_savings_percent"] = net * 100.0
            entry["net_savings_ci"] = _interval(boot_net[k], level)
        if k != "dr":
            entry.update(trust)
        out[k] = entry
    return out


def _interval(samples: list[float], level: float) -> list[float | None]:
    """The central `level` interval of bootstrap samples (None with fewer than 20)."""
    if len(samples) < 20:
        return [None, None]
    tail = (1.0 - level) / 2.0
    return [float(np.quantile(samples, tail)), float(np.quantile(samples, 1.0 - tail))]


def _clip(x: float | None, top: float = 1.0) -> float | None:
    # DR can step outside the range a recall or a count can take; report it inside
    return None if x is None else min(max(x, 0.0), top)


def _entry(
    hit: float, need: float, n: int, recalls: list[float], misses: list[float], level: float
) -> dict[str, Any]:
    """One estimator's recall and misses per run, with their intervals."""
    lo, hi = _interval(recalls, level)
    mlo, mhi = _interval(misses, level)
    inf = float("inf")
    return {
        "recall": _clip(hit / need if need > 0 else None),
        "recall_ci": [_clip(lo), _clip(hi)],
        "misses_per_run": _clip((need - hit) / n, inf),
        "misses_per_run_ci": [_clip(mlo, inf), _clip(mhi, inf)],
    }


#: IPS and SNIPS are flagged untrusted when an observation weighs more than this (one
#: observation then stands for more than 20 runs), or ...
MAX_WEIGHT = 20.0
#: ... when their effective sample size is below this share of the observations.
MIN_ESS_SHARE = 0.1


def weight_diagnostics(runs: Sequence[LoggedRun], pi: Mapping[Any, np.ndarray]) -> dict[str, Any]:
    """How far IPS and SNIPS can be trusted: each logged observation of an arm counts, for the
    candidate, with weight pi / p (its inclusion probability under the candidate over the one
    it was logged with). Their effective sample size (sum w)^2 / sum w^2 and the largest
    weight say how few observations carry the estimate; `trusted` is False, with the reason,
    when one observation weighs more than MAX_WEIGHT or the effective sample size is below
    MIN_ESS_SHARE of the observations."""
    w = np.concatenate([pi[r.context][r.included] / r.propensity for r in runs] or [np.zeros(0)])
    w = w[w > 0]
    if w.size == 0:
        return {"trusted": False, "why": "no logged observation of an arm the candidate uses"}
    ess = float(w.sum() ** 2 / (w * w).sum())
    top = float(w.max())
    why = []
    if top > MAX_WEIGHT:
        why.append(f"an observation weighs {top:,.0f} (more than {MAX_WEIGHT:.0f})")
    if ess < MIN_ESS_SHARE * w.size:
        why.append(f"effective sample size {ess:,.0f} of {w.size:,} observations")
    return {
        "observations": int(w.size),
        "effective_sample_size": ess,
        "weight_range": [float(w.min()), top],
        "trusted": not why,
        "why": "; ".join(why) or None,
    }


def from_log(bandit: Any, changes: Mapping[str, Any], *, level: float = 0.95) -> dict[str, Any]:
    """Evaluate the settings `changes` (merged into the current ones) on the store's log.

    The log is split in two halves by run order. Posteriors are replayed in memory from the
    first half's observations (the same arithmetic as the projection); the candidate and the
    current policy are both planned on them, and both are estimated on the second half's
    selected runs, whose outcomes those posteriors have not seen. Reusing the outcomes a
    candidate learned from would bias every estimator upwards. The doubly robust estimator's
    need model is the posterior after every observed run: it stands in only for needs that no
    run observed at a usable propensity, and more runs make it better calibrated."""
    from plaudit.bandit import config as cfgmod
    from plaudit.bandit import policy
    from plaudit.bandit.memory import MemoryLearner
    from plaudit.bandit.projection import OBSERVATION_V1, RUN_V2, rewards_of

    cfg = bandit.config
    candidate = cfgmod.merged(cfg, changes)
    arms = bandit.arms()
    ids = [a.id for a in arms]
    pos = {a: i for i, a in enumerate(ids)}
    tokens = np.array([a.tokens for a in arms], dtype=np.float64)
    runs: dict[str, Any] = {}
    observations: list[Any] = []
    for ev in bandit.p.log.replay(types=[RUN_V2, OBSERVATION_V1]):
        if ev.type == RUN_V2:
            runs[ev.id] = ev.payload
        elif ev.payload.get("updates"):
            observations.append(ev)
    observations = [o for o in observations if o.payload["run_id"] in runs]
    if len(observations) < 20:
        raise ValueError(f"only {len(observations)} observed runs: evaluation needs at least 20")
    half = len(observations) // 2
    kinds = [a.effective_kind for a in arms]
    learner = MemoryLearner(ids, kinds, cfg)  # what the candidate is planned on
    world = MemoryLearner(ids, kinds, cfg)  # the need model: every observed run
    for i, ev in enumerate(observations):
        rewards = rewards_of(ev.payload)
        if ev.payload.get("missed"):  # as the projection learns them
            rewards = {**rewards, **dict.fromkeys(ev.payload["missed"], 1)}
        idx = np.array([pos[a] for a in rewards if a in pos], dtype=np.int64)
        r = np.array([rewards[a] for a in rewards if a in pos], dtype=np.float64)
        label = ev.payload.get("context") or None
        world.learn(label, idx, r)
        if i < half:
            learner.learn(label, idx, r)
    protected = np.array([candidate.is_protected(i) for i in ids], dtype=bool)
    pi: dict[Any, np.ndarray] = {}
    current: dict[Any, np.ndarray] = {}
    model: dict[Any, np.ndarray] = {}
    model_ab: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    logged: list[LoggedRun] = []
    t = tokens.astype(np.int64)
    for j, ev in enumerate(observations[half:], start=half + 1):
        run = runs[ev.payload["run_id"]]
        if run.get("is_baseline") and run["inventory_tokens"] > run["budget"]:
            continue  # a random-order fill of a binding budget has no exact propensity
        label = ev.payload.get("context") or None
        if j < world.changed_at.get(label, 0):
            continue  # before the context's latest detected change (`since_change`)
        key = (run.get("context"), run["budget"])
        if key not in pi:
            a, b = world.posterior(key[0] or None)
            low = policy.plan(world.policy_input(key[0] or None, t, protected, key[1], cfg))
            a, b = world.background_model(key[0] or None, low.propensities < SWITCH, a, b)
            model[key] = a / (a + b)
            model_ab[key] = (a, b)
            for c, target in ((candidate, pi), (cfg, current)):
                inp = learner.policy_input(key[0] or None, t, protected, key[1], c)
                target[key] = policy.plan(inp).propensities
        inc = [(pos[a], p) for a, p in zip(run["included"], run["p"], strict=True) if a in pos]
        idx = np.array([i for i, _ in inc], dtype=np.int64)
        rewards = rewards_of(ev.payload)
        y = np.array([rewards.get(ids[i], 0) for i in idx], dtype=np.int64)
        prop = np.array([p for _, p in inc], dtype=np.float64)
        logged.append(LoggedRun(key, idx, y, prop, int(run["inventory_tokens"])))
    if not logged:
        raise ValueError(
            "no observed run in the evaluated half since the latest detected change: "
            "evaluation needs more runs in the current regime"
        )
    toks = {k: tokens for k in pi}
    miss = candidate.miss_cost(int(tokens.sum()), max(k[1] for k in pi))
    return {
        "changes": dict(changes),
        "train_runs": half,
        "candidate": estimate(
            logged, pi, model, toks, miss_cost=miss, level=level, model_ab=model_ab
        ),
        "current": estimate(
            logged, current, model, toks, miss_cost=miss, level=level, model_ab=model_ab
        ),
    }
