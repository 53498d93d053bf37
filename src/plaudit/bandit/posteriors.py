"""Reading posteriors: prior + evidence, with contexts' priors from the other contexts, from a
cache.

For an arm with prior Beta(a0, b0) and global evidence (Sg, Fg), the global posterior is
Beta(a0 + Sg, b0 + Fg); a context's is Beta(kappa m + Sc, kappa (1 - m) + Fc), with (m, kappa)
from the other contexts' evidence (`hierarchy.py`). After a detected change the prior counts
are scaled down (`pw`, see `evidence.py`) so new data leads at once.

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

from plaudit.bandit import hierarchy, policy
from plaudit.bandit.arms import Arm
from plaudit.bandit.config import BanditConfig, from_dict
from plaudit.bandit.projection import DAY_MS, GLOBAL
from plaudit.store.backend import Tx

#: The columns the cache holds per scope, in the order the queries return them.
_COLS = (
    "s",
    "f",
    "pulls",
    "last_index",
    "last_ts",
    "pw",
    "drop_at",
    *hierarchy.SUMS,
    "mv_from",
    "mv_until",
)
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
    cols["drop_at"] = np.full(n, -1.0)
    cols["mv_from"] = np.full(n, -1.0)
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
        by_scope: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            by_scope.setdefault(row[0], []).append(i)
        width = len(_COLS)
        values = np.fromiter(
            (v for row in rows for v in row[2:]), dtype=np.float64, count=len(rows) * width
        ).reshape(len(rows), width)
        arm_at = np.fromiter((pos.get(row[1], -1) for row in rows), np.int64, len(rows))
        for name, members in by_scope.items():
            sel = np.array(members, dtype=np.int64)
            at = arm_at[sel]
            keep = at >= 0
            if not keep.all():
                sel, at = sel[keep], at[keep]
            cols = self.scopes[name].cols
            block = values[sel]
            for j, k in enumerate(_COLS):
                cols[k][at] = block[:, j]

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
        c = self.scope(tx, context) if context else None
        gs, gf = self._decayed(g)
        cs, cf = (None, None) if c is None else self._decayed(c)
        alpha, beta = hierarchy.posterior(
            self.a0,
            self.b0,
            g,
            c,
            {k: g[k] for k in hierarchy.SUMS},
            self.cfg.context_pseudo_count,
            decayed=(gs, gf, cs, cf),
        )
        gpulls = g["pulls"].astype(np.int64)
        return alpha, beta, gpulls, gpulls if c is None else c["pulls"].astype(np.int64)

    def policy_input(
        self,
        tx: Tx,
        context: str | None,
        cfg: BanditConfig,
        budget: int,
        arms: Sequence[Arm] | None = None,
    ) -> policy.PolicyInput:
        """The policy's input for a run in `context` over the registered inventory, or over
        `arms` (registered or not: unknown arms start from their prior, as if never seen)."""
        alpha, beta, _, _ = self.posterior(tx, context)
        g = self.scope(tx, GLOBAL)
        c = self.scope(tx, context) if context else g
        name = context or GLOBAL
        row = tx.fetchone("SELECT obs, boost_until FROM bandit_scopes WHERE scope = ?", (name,))
        obs, until = (0, 0) if row is None else (int(row[0]), int(row[1]))
        cols = {
            "alpha": alpha,
            "beta": beta,
            "gpulls": g["pulls"],
            "gs": g["s"],
            "s": c["s"],
            "f": c["f"],
            "pw": c["pw"],
            "drop_at": c["drop_at"],
            "pulls": c["pulls"],
            "mv_from": g["mv_from"],
            "mv_until": g["mv_until"],
        }
        if arms is None:
            tokens, protected = self.registry.tokens, self.protected
        else:
            cols = _aligned(self, cols, arms, context)
            tokens = np.fromiter((a.tokens for a in arms), dtype=np.int64, count=len(arms))
            protected = np.fromiter(
                (cfg.is_protected(a.id) for a in arms), dtype=bool, count=len(arms)
            )
        return policy.for_scope(
            cfg,
            cols["alpha"],
            cols["beta"],
            tokens,
            protected,
            budget,
            contextual=context is not None,
            global_pulls=cols["gpulls"],
            global_successes=cols["gs"],
            scope={k: cols[k] for k in ("s", "f", "pw", "drop_at", "pulls")},
            scope_obs=float(obs),
            restarting=obs < until,
            moved_from=cols["mv_from"],
            moved_until=cols["mv_until"],
            index=float(self.obs_index),
        )


def _aligned(
    cache: PosteriorCache, cols: dict[str, np.ndarray], arms: Sequence[Arm], context: str | None
) -> dict[str, np.ndarray]:
    """`cols` (registry order) for `arms`: unknown arms get their prior and a fresh state."""
    ids = [a.id for a in arms]
    pos = cache.registry.index
    idx = np.fromiter((pos.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
    known = idx >= 0
    if known.all():
        return {k: v[idx] for k, v in cols.items()}
    a0, b0 = cache.priors(ids, [a.effective_kind for a in arms])
    if context:  # no evidence anywhere: the context prior is the global prior's mean
        k = cache.cfg.context_pseudo_count
        a0, b0 = k * a0 / (a0 + b0), k * b0 / (a0 + b0)
    blank = _empty(len(ids))
    out = {
        "alpha": a0,
        "beta": b0,
        "gpulls": blank["pulls"],
        "gs": blank["s"],
        "mv_from": blank["mv_from"],
        "mv_until": blank["mv_until"],
        **{k: blank[k].copy() for k in ("s", "f", "pw", "drop_at", "pulls")},
    }
    out = {k: np.array(v, dtype=np.float64) for k, v in out.items()}
    at = idx[known]
    for k in out:
        out[k][known] = cols[k][at]
    return out
