"""The bandit's learning state in memory: what the store's projection keeps in tables, as numpy
arrays, with the same arithmetic (`fold.observe`, `hierarchy.posterior`, `policy.for_scope`).

The simulator runs plaudit on it, and `evaluate` replays a log into it, so neither needs a
store, and a test checks that it agrees with the projection to the last digit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from plaudit.bandit import evidence, fold, hierarchy, policy
from plaudit.bandit.config import BanditConfig


class MemoryLearner:
    """Evidence per scope (contexts by label, plus the global scope) for a fixed inventory."""

    def __init__(self, ids: Sequence[str], kinds: Sequence[str], cfg: BanditConfig) -> None:
        self.ids = list(ids)
        self.cfg = cfg
        n = len(self.ids)
        prior = np.array([cfg.prior(i, k) for i, k in zip(self.ids, kinds, strict=True)])
        prior = prior.reshape(-1, 2)
        self.a0, self.b0 = prior[:, 0].copy(), prior[:, 1].copy()
        self.types = policy.type_codes(self.ids)
        self.groups = policy.group_codes(self.ids)
        self._declared: dict[bytes, policy.Declared | None] = {}
        self.rows: dict[Any, int] = {None: 0}  # None is the global scope
        self.st = evidence.fresh((1, n))
        self.pulls = np.zeros((1, n))
        self.last = np.zeros((1, n))
        self.scope_obs = np.zeros(1)
        self.boost_until = np.zeros(1)
        self.sums = {k: np.zeros(n) for k in hierarchy.SUMS}
        self.moved_from = np.full(n, -1.0)
        self.moved_until = np.zeros(n)
        self.index = 0
        #: per scope label: the observation index of its latest detected change (any arm)
        self.changed_at: dict[Any, int] = {}

    @property
    def n(self) -> int:
        return len(self.ids)

    def _row(self, label: Any) -> int:
        row = self.rows.get(label)
        if row is None:
            row = len(self.rows)
            self.rows[label] = row
            one = evidence.fresh((1, self.n))
            for k in self.st:
                self.st[k] = np.concatenate([self.st[k], one[k]])
            self.pulls = np.vstack([self.pulls, np.zeros(self.n)])
            self.last = np.vstack([self.last, np.zeros(self.n)])
            self.scope_obs = np.append(self.scope_obs, 0.0)
            self.boost_until = np.append(self.boost_until, 0.0)
        return row

    def _decay(self, row: int, idx: Any) -> Any:
        hl = self.cfg.half_life_runs
        if not hl:
            return 1.0
        return 0.5 ** ((self.index - self.last[row, idx]) / hl)

    def learn(self, label: Any, idx: np.ndarray, r: np.ndarray) -> None:
        """One observation: arms `idx` were included and got rewards `r`."""
        ctx = None if label is None else self._row(label)
        self.index += 1
        g = {k: v[0, idx] for k, v in self.st.items()}
        c = None if ctx is None else {k: v[ctx, idx] for k, v in self.st.items()}
        res = fold.observe(
            c,
            g,
            {k: v[idx] for k, v in self.sums.items()},
            r,
            self.cfg,
            float(self.index),
            decay_context=1.0 if ctx is None else self._decay(ctx, idx),
            decay_global=self._decay(0, idx),
        )
        if res.ctx is not None and c is not None and (res.ctx["pw"] < c["pw"]).any():
            # a detector alarmed: the arm's evidence was reset and its prior weight scaled down
            self.changed_at[label] = self.index
        for row, new in ((0, res.glob), (ctx, res.ctx)):
            if row is None or new is None:
                continue
            for k, v in new.items():
                self.st[k][row, idx] = v
            self.pulls[row, idx] += 1
            self.last[row, idx] = self.index
            self.scope_obs[row] += 1
        for k, v in res.sums.items():
            self.sums[k][idx] = v
        scope = 0 if ctx is None else ctx
        if res.central.any():
            self.boost_until[scope] = self.scope_obs[scope] + self.cfg.restart_runs
            moved = idx[res.central]
            start = self.moved_until[moved] <= self.index
            self.moved_from[moved[start]] = self.index
            self.moved_until[moved] = self.index + self.cfg.moved_runs

    def _aged(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        d = self._decay(row, slice(None))
        return self.st["s"][row] * d, self.st["f"][row] * d

    def posterior(self, label: Any) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta) of every arm, globally (`None`) or in a context."""
        ctx = None if label is None else self._row(label)
        glob = {k: v[0] for k, v in self.st.items()}
        c = None if ctx is None else {k: v[ctx] for k, v in self.st.items()}
        gs, gf = self._aged(0)
        cs, cf = (None, None) if ctx is None else self._aged(ctx)
        return hierarchy.posterior(
            self.a0,
            self.b0,
            glob,
            c,
            self.sums,
            self.cfg.context_pseudo_count,
            decayed=(gs, gf, cs, cf),
        )

    def policy_input(
        self,
        label: Any,
        tokens: np.ndarray,
        protected: np.ndarray,
        budget: int,
        cfg: BanditConfig | None = None,
    ) -> policy.PolicyInput:
        """The policy's input for a run in `label`'s scope (under `cfg`, default the learner's)."""
        cfg = cfg or self.cfg
        row = 0 if label is None else self._row(label)
        alpha, beta = self.posterior(label)
        scope = {k: self.st[k][row] for k in ("s", "f", "pw", "drop_at")}
        scope["pulls"] = self.pulls[row]
        scope["last"] = self.last[row]
        return policy.for_scope(
            cfg,
            alpha,
            beta,
            tokens,
            protected,
            budget,
            contextual=label is not None,
            global_pulls=self.pulls[0],
            global_successes=self.st["s"][0],
            scope=scope,
            scope_obs=float(self.scope_obs[row]),
            restarting=bool(self.scope_obs[row] < self.boost_until[row]),
            moved_from=self.moved_from,
            moved_until=self.moved_until,
            index=float(self.index),
            types=self.types,
            groups=self.groups,
            decl=self.declared(cfg),
        )

    def declared(self, cfg: BanditConfig) -> policy.Declared | None:
        """`policy.declared` for this inventory under `cfg`, once per distinct declaration."""
        key = msgspec.json.encode([cfg.protected, cfg.arm_priors, cfg.type_priors, cfg.miss_costs])
        if key not in self._declared:
            self._declared[key] = policy.declared(cfg, self.ids)
        return self._declared[key]

    def need_model(self, label: Any, strength: float) -> tuple[np.ndarray, np.ndarray]:
        """Beta(strength x m + s, strength x (1 - m) + f) per arm: the scope's own evidence with
        the other scopes' mean rate m (`hierarchy.context_prior`) as a prior worth only
        `strength` observations. Off-policy evaluation predicts unobserved needs with it: the
        posterior's own prior, worth kappa observations, tilts the tiny need rates of arms a
        task type never uses upwards, and summed over many arms that bias decides recall."""
        row = 0 if label is None else self._row(label)
        s, f = self._aged(row)
        glob = {k: v[0] for k, v in self.st.items()}
        ga, gb = self.a0 * glob["pw"] + glob["s"], self.b0 * glob["pw"] + glob["f"]
        if label is None:
            m = ga / (ga + gb)
        else:
            m, _ = hierarchy.context_prior(
                self.sums,
                self.st["s"][row],
                self.st["f"][row],
                ga / (ga + gb),
                self.cfg.context_pseudo_count,
            )
        return strength * m + s, strength * (1.0 - m) + f

    def background_model(
        self, label: Any, pooled: np.ndarray, alpha: np.ndarray, beta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The need model off-policy evaluation uses in scope `label`: (alpha, beta) as given,
        except that the arms in `pooled` (those the log observes only at the exploration floor)
        all get the scope's *pooled* need rate r0 = their successes / their observations here,
        as a Beta worth one such arm's share of the observations.

        The doubly robust estimate leaves exactly these arms' needs to the model, and summed
        over them only the pool's average rate matters, which the pooled rate estimates without
        bias. The selection posterior does not: it centres an arm's prior on what the *other*
        task types need it for, so an arm that is one type's everyday tool looks needed in
        all of them, and summed over many arms that predicted a third too many misses. Each
        arm's Beta, drawn independently in the bootstrap, then gives the sum the spread of
        the pooled rate itself."""
        row = 0 if label is None else self._row(label)
        s, f = self._aged(row)
        k = int(pooled.sum())
        n = float((s + f)[pooled].sum())
        if k == 0 or n <= 0:
            return alpha, beta
        r0 = (float(s[pooled].sum()) + 0.5) / (n + 1.0)
        w = max(n / k, 1.0)
        return np.where(pooled, w * r0, alpha), np.where(pooled, w * (1.0 - r0), beta)
