"""The contextual-bandit learner behind `plaudit signal learn`, in numpy.

What it learns: a value per (context group, task), where a group is the decisions sharing the
values of a few chosen feature fields; the policy then picks the best task of the group, with
epsilon-greedy exploration. What it learns from: logged decisions with their propensities,
through doubly robust scores (Dudik, Langford and Li, 2011): for decision i and every task t,

    G_i(t) = q(x_i, t) + 1[a_i = t] / p_i * (r_i - q(x_i, a_i))

where q is a reward model (the per-(group, task) mean of `plaudit.signals.ope.RewardModel`,
cross-fitted, so a decision's own reward never sets its own q). The mean of G(t) over a group
estimates what task t would earn there, without the bias of the logging router's choices, and
with less variance than inverse propensity weights alone.

Groups nest along the chosen fields in order, and each level's estimate is shrunk towards its
parent's by `prior_weight` pseudo-decisions (the root, every decision, towards nothing): a
group seen a few times says what its parent says. Fields are chosen greedily by cross-fitted
value: the training decisions are split in two halves by session; a policy fitted on one half
is scored on the other by the mean of sum_t pi(t|x) G(t) there, and a field is added only
while it raises that score by more than one standard error of the paired difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from plaudit.signals.ope import RewardModel, deal_folds

#: Pseudo-decisions a group's estimate is shrunk by, towards its parent's (tried in turn).
PRIOR_WEIGHTS = (2.0, 10.0, 50.0)
#: Folds of the reward model inside the DR scores.
MODEL_FOLDS = 5
#: A field is added while it raises the held-out score by more than this many standard errors.
MIN_GAIN_SE = 1.0


@dataclass
class Training:
    """The training decisions as arrays. `codes[path]` holds each decision's value code for
    a feature field (0: missing; v >= 1: `vocab[path][v - 1]`); `allowed` (n x tasks, or None
    when every task was always available) which tasks each decision could have taken."""

    reward: np.ndarray
    propensity: np.ndarray
    action: np.ndarray
    session: np.ndarray
    tasks: list[str]
    codes: dict[str, np.ndarray]
    vocab: dict[str, list[str]]
    allowed: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.reward.size)

    def rows(self, keep: np.ndarray) -> Training:
        return Training(
            self.reward[keep],
            self.propensity[keep],
            self.action[keep],
            self.session[keep],
            self.tasks,
            {p: c[keep] for p, c in self.codes.items()},
            self.vocab,
            None if self.allowed is None else self.allowed[keep],
        )


def group_ids(codes: Sequence[np.ndarray], n: int) -> np.ndarray:
    """One id per distinct combination of the columns' codes (0 for no column)."""
    g = np.zeros(n, dtype=np.int64)
    for col in codes:
        g = np.unique(g * (int(col.max(initial=0)) + 1) + col, return_inverse=True)[1].ravel()
    return g


def dr_scores(data: Training, paths: Sequence[str], seed: int) -> np.ndarray:
    """G (n x tasks): the doubly robust score of every task for every decision, with the
    reward model grouped by `paths` and cross-fitted over MODEL_FOLDS folds."""
    n, k = len(data), len(data.tasks)
    group = group_ids([data.codes[p] for p in paths], n)
    fold, folds = deal_folds(n, MODEL_FOLDS, np.random.default_rng(seed))
    model = RewardModel(data.reward, data.action, group, k, fold, folds, 5.0)
    rows = np.repeat(np.arange(n), k)
    q = model.predict(rows, group[rows], np.tile(np.arange(k), n)).reshape(n, k)
    q_chosen = q[np.arange(n), data.action]
    g = q.copy()
    g[np.arange(n), data.action] += (data.reward - q_chosen) / data.propensity
    return g


@dataclass
class Tree:
    """Shrunk mean scores per group at every depth of `paths`: `keys[j]` the sorted keys of
    the depth-j groups (parent index * width + code), `values[j]` their (groups x tasks)
    estimates. Depth 0 is the root."""

    paths: list[str]
    widths: list[int]
    keys: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def fit(
        cls, data: Training, paths: Sequence[str], scores: np.ndarray, prior_weight: float
    ) -> Tree:
        cols = [data.codes[p] for p in paths]
        tree = cls(list(paths), [len(data.vocab[p]) + 1 for p in paths])
        n = len(data)
        tree.keys.append(np.zeros(1, dtype=np.int64))
        tree.values.append(scores.mean(axis=0, keepdims=True) if n else scores[:1])
        parent = np.zeros(n, dtype=np.int64)
        live = np.ones(n, dtype=bool)
        for col, width in zip(cols, tree.widths, strict=True):
            live &= col > 0
            key = parent * width + col
            keys, inverse = np.unique(key[live], return_inverse=True)
            inverse = inverse.ravel()
            kept = scores[live]
            sums = np.column_stack(
                [
                    np.bincount(inverse, weights=kept[:, t], minlength=keys.size)
                    for t in range(scores.shape[1])
                ]
            ).reshape(keys.size, scores.shape[1])
            counts = np.bincount(inverse, minlength=keys.size).astype(np.float64)
            prior = tree.values[-1][keys // width]
            tree.keys.append(keys)
            tree.values.append((sums + prior_weight * prior) / (counts + prior_weight)[:, None])
            parent = np.zeros(n, dtype=np.int64)
            parent[live] = inverse
        return tree

    def predict(self, codes: Sequence[np.ndarray]) -> np.ndarray:
        """Values (n x tasks) for decisions given by their code columns: the deepest group
        seen in training along their values, or the root when any value is missing or was
        never seen in training (as a table falls back to its default)."""
        n = codes[0].size if codes else 1
        node = np.zeros(n, dtype=np.int64)
        depth = np.zeros(n, dtype=np.int64)
        going = np.ones(n, dtype=bool)
        root = np.zeros(n, dtype=bool)
        for j, (col, width) in enumerate(zip(codes, self.widths, strict=True), start=1):
            root |= (col <= 0) | (col >= width)
            key = node * width + col
            keys = self.keys[j]
            if keys.size:
                pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
                hit = going & (keys[pos] == key)
            else:
                pos, hit = node, np.zeros(n, dtype=bool)
            node = np.where(hit, pos, node)
            depth = np.where(hit, j, depth)
            going &= hit
        out = np.empty((n, self.values[0].shape[1]))
        for j in range(len(self.values)):
            at = (depth == j) & ~root
            out[at] = self.values[j][node[at]]
        out[root] = self.values[0][0]
        return out


def greedy(values: np.ndarray, allowed: np.ndarray | None, explore: float) -> np.ndarray:
    """Epsilon-greedy probabilities (n x tasks): `explore` spread evenly over the allowed
    tasks, the rest on the best of them (the first of equals)."""
    n, k = values.shape
    mask = np.ones((n, k), dtype=bool) if allowed is None else allowed.copy()
    mask[~mask.any(axis=1)] = True  # no known candidate: every task
    best = np.where(mask, values, -np.inf).argmax(axis=1)
    probs = mask * (explore / mask.sum(axis=1, keepdims=True))
    probs[np.arange(n), best] += 1.0 - explore
    return probs


@dataclass
class Choice:
    """What the selection settled on, and the cross-fitted scores behind it."""

    paths: list[str]
    prior_weight: float
    score: float
    considered: list[str]
    steps: list[dict[str, object]]


def _halves(data: Training, seed: int) -> list[np.ndarray]:
    """Two halves of the decisions, whole sessions in each."""
    sessions = np.unique(data.session)
    first = np.random.default_rng(seed).permutation(sessions)[: sessions.size // 2]
    in_first = np.isin(data.session, first)
    return [in_first, ~in_first]


class _Scorer:
    """Cross-fitted scores of candidate configurations, their DR scores cached per fields."""

    def __init__(self, data: Training, explore: float, seed: int) -> None:
        self.data = data
        self.explore = explore
        self.seed = seed
        self.halves = [data.rows(h) for h in _halves(data, seed)]
        self._scores: dict[tuple[str, ...], list[np.ndarray]] = {}

    def scores(self, paths: tuple[str, ...]) -> list[np.ndarray]:
        if paths not in self._scores:
            self._scores[paths] = [dr_scores(h, paths, self.seed) for h in self.halves]
        return self._scores[paths]

    def keep_only(self, paths: tuple[str, ...]) -> None:
        """Drop the scores of every configuration but `paths` (the next round builds on it)."""
        self._scores = {k: v for k, v in self._scores.items() if k == paths}

    def contributions(self, paths: tuple[str, ...], prior_weight: float) -> np.ndarray:
        """Per decision of either half, sum_t pi(t|x) G(t) of the policy fitted on the other."""
        g = self.scores(paths)
        parts = []
        for fit, held in ((0, 1), (1, 0)):
            tree = Tree.fit(self.halves[fit], paths, g[fit], prior_weight)
            target = self.halves[held]
            values = tree.predict([target.codes[p] for p in paths])
            pi = greedy(values, target.allowed, self.explore)
            parts.append((pi * g[held]).sum(axis=1))
        return np.concatenate(parts)

    def best(self, paths: tuple[str, ...]) -> tuple[float, np.ndarray]:
        tried = [(self.contributions(paths, k), k) for k in PRIOR_WEIGHTS]
        values, k = max(tried, key=lambda t: float(t[0].mean()))
        return k, values


def choose(
    data: Training,
    candidates: Sequence[str],
    *,
    fixed: bool,
    max_features: int,
    explore: float,
    seed: int,
) -> Choice:
    """The fields and prior weight to learn with. `fixed`: use `candidates` as they are (the
    user chose them); else add them greedily while the cross-fitted score rises."""
    scorer = _Scorer(data, explore, seed)
    if min(len(h) for h in scorer.halves) < 2:  # too few sessions to score anything
        paths = list(candidates) if fixed else []
        return Choice(paths, PRIOR_WEIGHTS[1], float("nan"), list(candidates), [])
    if fixed:
        k, values = scorer.best(tuple(candidates))
        return Choice(list(candidates), k, float(values.mean()), list(candidates), [])
    current: tuple[str, ...] = ()
    k, now = scorer.best(current)
    steps: list[dict[str, object]] = [{"fields": [], "score": float(now.mean())}]
    while len(current) < max_features:
        options = [(scorer.best((*current, c)), c) for c in candidates if c not in current]
        if not options:
            break
        (k_new, values), pick = max(options, key=lambda o: float(o[0][1].mean()))
        diff = values - now
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("inf")
        gain = float(diff.mean())
        steps.append({"add": pick, "score": float(values.mean()), "gain": gain, "se": se})
        if not gain > MIN_GAIN_SE * se:
            break
        current, k, now = (*current, pick), k_new, values
        scorer.keep_only(current)
    return Choice(list(current), k, float(now.mean()), list(candidates), steps)
