"""Reading posteriors: prior + evidence, with contexts shrunk towards global, from a cache.

For an arm with prior Beta(a0, b0), global evidence (Sg, Fg) and context evidence (Sc, Fc):

    global:   Beta(a0 + Sg, b0 + Fg),                          mean mu_g
    context:  Beta(k * mu_g + Sc, k * (1 - mu_g) + Fc),        k = context_pseudo_count

so a context starts from the global estimate as a prior worth k observations (empirical Bayes:
task types share strength) and its own data leads once it has more than k. After a detected
change the prior counts are scaled down (`pw`, see `evidence.py`) so new data leads at once.

Selecting at 10,000 arms cannot afford to read 20,000 rows per run, so each `Bandit` keeps the
registry and the evidence of the scopes it has used as numpy arrays, and refreshes them
incrementally: every posterior row records the observation index that last changed it, so a
read transaction fetches only the rows changed since the cached index. The registry and the
settings are reloaded when their last event's position moves. All of it is read inside the
caller's transaction, so what the cache returns is exactly the snapshot that transaction sees.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plaudit.bandit import evidence
from plaudit.bandit.arms import Arm
from plaudit.bandit.config import BanditConfig, from_dict
from plaudit.bandit.projection import DAY_MS, GLOBAL
from plaudit.store.backend import Tx

#: The evidence columns the cache holds per scope, in the order the queries return them.
_COLS = ("s", "f", "pulls", "last_index", "last_ts", *evidence.FIELDS[2:])
_SQL_COLS = ", ".join(_COLS)


@dataclass
class Registry:
    """The registered arms as aligned arrays, sorted by id."""

    arms: dict[str, Arm]
    ids: list[str]
    index: dict[str, int]
    tokens: np.ndarray
    kinds: list[str]
    id_array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))


@dataclass
class _Scope:
    cols: dict[str, np.ndarray] = field(default_factory=dict)


def _empty(n: int) -> dict[str, np.ndarray]:
    cols = {k: np.zeros(n) for k in _COLS}
    cols["pw"] = np.ones(n)
    return cols


class PosteriorCache:
    """The registry, the settings and per-scope evidence arrays, refreshed incrementally."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._marks: tuple[int, int] | None = None
        self.obs_index = -1
        self.now = 0
        self.cfg = BanditConfig()
        self.registry = Registry({}, [], {}, np.zeros(0, dtype=np.int64), [])
        self.a0 = np.zeros(0)
        self.b0 = np.zeros(0)
        self.protected = np.zeros(0, dtype=bool)
        self.scopes: dict[str, _Scope] = {}

    # -- refreshing ---------------------------------------------------------------------
    def refresh(self, tx: Tx) -> None:
        """Bring the cache to the snapshot `tx` sees. Call with `lock` held."""
        row = tx.fetchone(
            "SELECT obs_index, last_ts, arms_seq, config_seq FROM bandit_meta WHERE one = 1"
        )
        assert row is not None
        index, now, marks = int(row[0]), int(row[1]), (int(row[2]), int(row[3]))
        if marks != self._marks or index < self.obs_index:
            self._reload(tx)
            self._marks = marks
            self.scopes.clear()
        elif index > self.obs_index and self.scopes:
            self._changed_since(tx, self.obs_index)
        self.obs_index, self.now = index, now

    def _reload(self, tx: Tx) -> None:
        body = tx.scalar("SELECT body FROM bandit_config WHERE one = 1")
        import msgspec

        self.cfg = BanditConfig() if body is None else from_dict(msgspec.json.decode(body))
        rows = tx.fetchall("SELECT id, tokens, content, kind FROM bandit_arms ORDER BY id")
        arms = {r[0]: Arm(id=r[0], tokens=int(r[1]), content=r[2], kind=r[3]) for r in rows}
        ids = list(arms)
        kinds = [arms[i].effective_kind for i in ids]
        self.registry = Registry(
            arms=arms,
            ids=ids,
            index={a: i for i, a in enumerate(ids)},
            tokens=np.fromiter((arms[i].tokens for i in ids), dtype=np.int64, count=len(ids)),
            kinds=kinds,
            id_array=np.array(ids, dtype=object),
        )
        self.a0, self.b0 = self.priors(ids, kinds)
        self.protected = np.fromiter(
            (self.cfg.is_protected(i) for i in ids), dtype=bool, count=len(ids)
        )

    def priors(self, ids: Sequence[str], kinds: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.cfg
        if not cfg.arm_priors and not cfg.type_priors:
            from plaudit.bandit.config import KIND_PRIORS

            a = np.array([KIND_PRIORS[k][0] for k in kinds], dtype=np.float64)
            b = np.array([KIND_PRIORS[k][1] for k in kinds], dtype=np.float64)
            return a, b
        pri = np.array([cfg.prior(i, k) for i, k in zip(ids, kinds, strict=True)]).reshape(-1, 2)
        return pri[:, 0].copy(), pri[:, 1].copy()

    def _changed_since(self, tx: Tx, index: int) -> None:
        # by the last_index index alone: "scope IN (...)" would lead SQLite to the primary key
        rows = tx.fetchall(
            f"SELECT scope, arm_id, {_SQL_COLS} FROM bandit_posteriors WHERE last_index > ?",
            (index,),
        )
        self._assign([r for r in rows if r[0] in self.scopes])

    def _assign(self, rows: list[tuple[Any, ...]]) -> None:
        """Write fetched rows (scope, arm_id, *_COLS) into the scope arrays, column-wise."""
        if not rows:
            return
        pos = self.registry.index
        by_scope: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            by_scope.setdefault(row[0], []).append(row)
        for name, group in by_scope.items():
            idx = np.fromiter((pos.get(r[1], -1) for r in group), dtype=np.int64, count=len(group))
            keep = idx >= 0
            if not keep.any():
                continue
            values = np.array([r[2:] for r in group], dtype=np.float64)[keep]
            cols = self.scopes[name].cols
            at = idx[keep]
            for j, k in enumerate(_COLS):
                cols[k][at] = values[:, j]

    def scope(self, tx: Tx, name: str) -> dict[str, np.ndarray]:
        """One scope's evidence arrays, loaded in full the first time it is used."""
        sc = self.scopes.get(name)
        if sc is None:
            sc = _Scope(_empty(len(self.registry.ids)))
            self.scopes[name] = sc
            self._assign(
                [
                    (name, *r)
                    for r in tx.fetchall(
                        f"SELECT arm_id, {_SQL_COLS} FROM bandit_posteriors WHERE scope = ?",
                        (name,),
                    )
                ]
            )
        return sc.cols

    # -- posteriors ---------------------------------------------------------------------
    def _decayed(self, cols: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.cfg
        s, f = cols["s"], cols["f"]
        if not (cfg.half_life_runs or cfg.half_life_days):
            return s, f
        d = np.ones_like(s)
        if cfg.half_life_runs:
            d *= 0.5 ** (np.maximum(self.obs_index - cols["last_index"], 0) / cfg.half_life_runs)
        if cfg.half_life_days:
            age = np.maximum(self.now - cols["last_ts"], 0) / DAY_MS
            d *= 0.5 ** (age / cfg.half_life_days)
        return s * d, f * d

    def posterior(
        self, tx: Tx, context: str | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(alpha, beta, global pulls, scope pulls) for every registered arm."""
        g = self.scope(tx, GLOBAL)
        gs, gf = self._decayed(g)
        ga, gb = self.a0 * g["pw"] + gs, self.b0 * g["pw"] + gf
        gpulls = g["pulls"].astype(np.int64)
        if not context:
            return ga, gb, gpulls, gpulls
        c = self.scope(tx, context)
        cs, cf = self._decayed(c)
        mu_g = ga / (ga + gb)
        k = self.cfg.context_pseudo_count * c["pw"]
        return k * mu_g + cs, k * (1.0 - mu_g) + cf, gpulls, c["pulls"].astype(np.int64)


def for_arms(
    cache: PosteriorCache, tx: Tx, arms: Sequence[Arm], context: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Posteriors aligned with `arms` (registered or not: unknown arms start from their prior)."""
    alpha, beta, gpulls, spulls = cache.posterior(tx, context)
    ids = [a.id for a in arms]
    kinds = [a.effective_kind for a in arms]
    pos = cache.registry.index
    idx = np.fromiter((pos.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
    known = idx >= 0
    if known.all():
        return alpha[idx], beta[idx], gpulls[idx], spulls[idx]
    a0, b0 = cache.priors(ids, kinds)
    if context:  # no evidence anywhere: the context prior is the global prior's mean
        k = cache.cfg.context_pseudo_count
        a0, b0 = k * a0 / (a0 + b0), k * b0 / (a0 + b0)
    alpha_out, beta_out = a0.copy(), b0.copy()
    gp, sp = np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=np.int64)
    at = idx[known]
    alpha_out[known], beta_out[known] = alpha[at], beta[at]
    gp[known], sp[known] = gpulls[at], spulls[at]
    return alpha_out, beta_out, gp, sp
