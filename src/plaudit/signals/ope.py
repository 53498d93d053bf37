"""Off-policy estimators for a router: what a candidate policy would have earned on logged
decisions, from the logged propensities alone.

Per decision i the log holds the context x_i, the task a_i the router chose, the probability
p_i it had of choosing it (the propensity), and the reward r_i that followed. The candidate
gives a probability pi_i(a) to every task; w_i = pi_i(a_i) / p_i is the importance weight.

* IPS (inverse propensity scoring): mean of w_i r_i. Unbiased when every p_i is right and
  the logger gave a chance to every task the candidate picks; its variance grows with 1/p.
* SNIPS (self-normalised IPS): sum of w_i r_i / sum of w_i. Slightly biased, but bounded by
  the rewards and far steadier when weights are large or the propensities a little off.
* DR (doubly robust): mean of sum_a pi_i(a) q(x_i, a) + w_i (r_i - q(x_i, a_i)), with q a
  reward model. Unbiased when either the propensities or the model are right, and with less
  variance than IPS when the model is any good.

The reward model is deliberately simple: the mean reward per (context group, task), shrunk
towards the task's mean, itself shrunk towards the overall mean (each by `prior_weight`
pseudo-decisions), so a group seen twice says little and a group never seen says what the task
does overall. It is cross-fitted: decisions are dealt into folds, and each decision's q comes
from a model fitted on the other folds, so a decision's own reward never flatters its own
correction term.

Intervals: the nonparametric bootstrap over decisions (resampled with replacement, each
estimator recomputed on the same resample, the reward model held fixed), percentile
intervals. Because every estimator and the logging policy's own mean are computed on the same
resamples, the interval of a difference (candidate minus logging) is paired and narrower
than the two intervals side by side suggest.

The effective sample size of the weights, (sum w)^2 / sum w^2, says how many decisions the
estimate is really worth: n when the candidate is the logging policy, much less when it
leans on a few rarely logged choices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ESTIMATORS = ("ips", "snips", "dr")
FOLDS = 5
PRIOR_WEIGHT = 5.0
#: Resamples per block: bounded memory (block x n counts) whatever the bootstrap size.
_BLOCK = 64


class Logged:
    """Evaluated decisions as arrays: reward, propensity, chosen task index and context group
    per decision; the candidate's distribution as (decision, task, probability) triples."""

    def __init__(
        self,
        reward: np.ndarray,
        propensity: np.ndarray,
        action: np.ndarray,
        group: np.ndarray,
        pi_rows: np.ndarray,
        pi_tasks: np.ndarray,
        pi_probs: np.ndarray,
        n_tasks: int,
    ) -> None:
        self.reward = np.asarray(reward, dtype=np.float64)
        self.propensity = np.asarray(propensity, dtype=np.float64)
        self.action = np.asarray(action, dtype=np.int64)
        self.group = np.asarray(group, dtype=np.int64)
        self.pi_rows = np.asarray(pi_rows, dtype=np.int64)
        self.pi_tasks = np.asarray(pi_tasks, dtype=np.int64)
        self.pi_probs = np.asarray(pi_probs, dtype=np.float64)
        self.n_tasks = int(n_tasks)
        n = self.reward.size
        for name in ("propensity", "action", "group"):
            if getattr(self, name).size != n:
                raise ValueError(f"{name} has {getattr(self, name).size} entries, not {n}")
        if not (self.pi_rows.size == self.pi_tasks.size == self.pi_probs.size):
            raise ValueError("pi_rows, pi_tasks and pi_probs differ in length")
        if n and not np.all((self.propensity > 0) & (self.propensity <= 1)):
            raise ValueError("propensities must be in (0, 1]")

    def __len__(self) -> int:
        return int(self.reward.size)


class RewardModel:
    """Shrunk per-(group, task) mean rewards, cross-fitted over `folds` folds.

    Sums are kept per fold for the (group, task) cells that occur, so the model fitted on
    every fold but one is the totals minus that fold: no refitting per fold, and memory grows
    with the cells seen, not with groups x tasks."""

    def __init__(
        self,
        reward: np.ndarray,
        action: np.ndarray,
        group: np.ndarray,
        n_tasks: int,
        fold: np.ndarray,
        folds: int,
        prior_weight: float,
    ) -> None:
        self.n_tasks = n_tasks
        self.fold = fold
        self.folds = folds
        self.k = float(prior_weight)
        codes = group * n_tasks + action
        self.cells, cell = np.unique(codes, return_inverse=True)
        u = self.cells.size
        idx = fold * u + cell
        self.cell_sum = np.bincount(idx, weights=reward, minlength=folds * u).reshape(folds, u)
        self.cell_n = np.bincount(idx, minlength=folds * u).reshape(folds, u).astype(np.float64)
        tidx = fold * n_tasks + action
        m = folds * n_tasks
        self.task_sum = np.bincount(tidx, weights=reward, minlength=m).reshape(folds, n_tasks)
        self.task_n = np.bincount(tidx, minlength=m).reshape(folds, n_tasks).astype(np.float64)

    def _out_of_fold(self, per_fold: np.ndarray, f: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Sums over every fold but `f` (over all of them when there is only one fold)."""
        total = per_fold.sum(axis=0)[cols]
        return total if self.folds == 1 else total - per_fold[f, cols]

    def predict(self, rows: np.ndarray, group: np.ndarray, task: np.ndarray) -> np.ndarray:
        """q(group, task) for each query, from the model fitted without the fold of the query's
        decision (`rows` index decisions)."""
        f = self.fold[rows]
        k = self.k
        everything = np.zeros(rows.size, dtype=np.int64)
        grand_sum = self._out_of_fold(self.task_sum.sum(axis=1)[:, None], f, everything)
        grand_n = self._out_of_fold(self.task_n.sum(axis=1)[:, None], f, everything)
        grand = np.divide(grand_sum, grand_n, out=np.zeros(rows.size), where=grand_n > 0)
        t_sum = self._out_of_fold(self.task_sum, f, task)
        t_n = self._out_of_fold(self.task_n, f, task)
        task_mean = (t_sum + k * grand) / (t_n + k)
        c_sum = np.zeros(rows.size)
        c_n = np.zeros(rows.size)
        if self.cells.size:
            codes = group * self.n_tasks + task
            pos = np.minimum(np.searchsorted(self.cells, codes), self.cells.size - 1)
            hit = np.flatnonzero(self.cells[pos] == codes)
            c_sum[hit] = self._out_of_fold(self.cell_sum, f[hit], pos[hit])
            c_n[hit] = self._out_of_fold(self.cell_n, f[hit], pos[hit])
        return (c_sum + k * task_mean) / (c_n + k)

    def logged(self, group: np.ndarray, task: np.ndarray) -> np.ndarray:
        """Whether each (group, task) cell has any logged decision at all."""
        if not self.cells.size:
            return np.zeros(group.size, dtype=bool)
        codes = group * self.n_tasks + task
        pos = np.minimum(np.searchsorted(self.cells, codes), self.cells.size - 1)
        return self.cells[pos] == codes


def deal_folds(n: int, folds: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Each decision's fold, dealt at random in equal shares; (folds, 1) below two decisions,
    where the only model is the one fitted on everything."""
    k = max(1, min(int(folds), n))
    if k < 2:
        return np.zeros(n, dtype=np.int64), 1
    return rng.permutation(n) % k, k


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    values = values[np.isfinite(values)]
    if values.size < 2:
        return None
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(values, [tail, 1.0 - tail])
    return [float(lo), float(hi)]


def _resampled_sums(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Column sums of `x` (n x c) over `resamples` bootstrap resamples of its rows."""
    n = x.shape[0]
    out = np.empty((resamples, x.shape[1]))
    for start in range(0, resamples, _BLOCK):
        m = min(_BLOCK, resamples - start)
        draws = rng.integers(0, n, (m, n))
        draws += (np.arange(m, dtype=np.int64) * n)[:, None]
        counts = np.bincount(draws.ravel(), minlength=m * n).reshape(m, n)
        out[start : start + m] = counts @ x
    return out


def effective_sample_size(w: np.ndarray) -> float:
    """(sum w)^2 / sum w^2: n for equal weights, 0 when every weight is 0."""
    sq = float(np.dot(w, w))
    return float(w.sum()) ** 2 / sq if sq > 0 else 0.0


def estimate(
    logged: Logged,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    folds: int = FOLDS,
    prior_weight: float = PRIOR_WEIGHT,
) -> dict[str, Any]:
    """IPS, SNIPS and DR estimates of the candidate's mean reward per decision, the logging
    policy's own mean, intervals from `bootstrap` resamples (none when 0) and diagnostics."""
    n = len(logged)
    if n == 0:
        raise ValueError("no decisions to estimate from")
    rng = np.random.default_rng(seed)
    r, p, a, g = logged.reward, logged.propensity, logged.action, logged.group
    rows, tasks, probs = logged.pi_rows, logged.pi_tasks, logged.pi_probs
    # pi_i(a_i): the candidate's probability of the task the router chose.
    chosen = tasks == a[rows]
    pi_logged = np.bincount(rows[chosen], weights=probs[chosen], minlength=n)
    w = pi_logged / p
    fold, k = deal_folds(n, folds, rng)
    model = RewardModel(r, a, g, logged.n_tasks, fold, k, prior_weight)
    q_chosen = model.predict(np.arange(n), g, a)
    q_pi = model.predict(rows, g[rows], tasks)
    direct = np.bincount(rows, weights=probs * q_pi, minlength=n)
    dr = direct + w * (r - q_chosen)
    unlogged = ~model.logged(g[rows], tasks)
    unlogged_mass = float(probs[unlogged].sum()) / n

    wsum = float(w.sum())
    point = {
        "ips": float(np.dot(w, r)) / n,
        "snips": float(np.dot(w, r)) / wsum if wsum > 0 else None,
        "dr": float(dr.mean()),
    }
    logging_value = float(r.mean())
    ess = effective_sample_size(w)

    boots: dict[str, np.ndarray] = {}
    if bootstrap > 0:
        sums = _resampled_sums(np.column_stack([w * r, w, dr, r]), bootstrap, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            boots = {
                "ips": sums[:, 0] / n,
                "snips": np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.nan),
                "dr": sums[:, 2] / n,
            }
        boot_logging = sums[:, 3] / n

    out: dict[str, Any] = {
        "decisions": n,
        "level": level,
        "bootstrap": int(bootstrap),
        "logging": {
            "value": logging_value,
            "ci": _interval(boot_logging, level) if boots else None,
        },
    }
    for name in ESTIMATORS:
        value = point[name]
        entry: dict[str, Any] = {
            "value": value,
            "ci": _interval(boots[name], level) if boots else None,
            "ess": ess,
            "difference": None if value is None else value - logging_value,
            "difference_ci": _interval(boots[name] - boot_logging, level) if boots else None,
        }
        out[name] = entry
    out["effective_sample_size"] = ess
    out["weights"] = {
        "mean": wsum / n,
        "max": float(w.max()),
        "zero_share": float(np.count_nonzero(w == 0)) / n,
    }
    out["unlogged_mass"] = unlogged_mass
    out["reward_model"] = {
        "folds": k,
        "prior_weight": float(prior_weight),
        "groups": int(np.unique(g).size),
    }
    return out
