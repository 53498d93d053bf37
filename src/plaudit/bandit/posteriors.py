"""Reading posteriors: prior + evidence, with contexts' priors from the other contexts, from a
cache.

For an arm with prior Beta(a0, b0) and global evidence (Sg, Fg), the global posterior is
Beta(a0 + Sg, b0 + Fg); a context's is Beta(kappa m + Sc, kappa (1 - m) + Fc), with (m, kappa)
from the other contexts' evidence (`hierarchy.py`). After a detected change the prior counts
are scaled down (`pw`, see `evidence.py`) so new data leads at once.

Selecting at 10,000 arms cannot afford to read 20,000 rows per run, so each `Bandit` keeps the
registry and the state rows of the scopes it has used as numpy arrays (`fold.Table`), and keeps
them current incrementally. Observations not yet checkpointed (see `projection.py`) are folded
into the arrays with `fold.apply`, the checkpoint's own arithmetic, each once: a select after
an observe folds that one observation, not the rows it changed. When a checkpoint has folded
observations the cache has not seen, the cache reads the rows it changed: every posterior row
records the observation index that last changed it. Rows an observation the cache has already
folded changed hold what the cache computed itself. The registry and the settings are reloaded
when their last event's position moves. All of it is read inside the caller's transaction, so
what the cache returns is exactly the snapshot that transaction sees.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plaudit.bandit import fold, hierarchy, policy
from plaudit.bandit import projection as proj
from plaudit.bandit.arms import Arm
from plaudit.bandit.config import BanditConfig, from_dict
from plaudit.bandit.projection import DAY_MS, GLOBAL
from plaudit.bandit.search import module_of
from plaudit.store.backend import Tx

#: Traced folds (one per observation and scope) a cache keeps at most: a checkpoint comes
#: every `INLINE_EVERY` (SQLite) or at most `CHECKPOINT_LIMIT` (PostgreSQL) observations.
_TRACED_MAX = 4 * proj.CHECKPOINT_LIMIT

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


@dataclass
class Registry:
    """The registered arms as aligned arrays, sorted by id."""

    arms: dict[str, Arm]
    ids: list[str]
    index: dict[str, int]
    tokens: np.ndarray
    kinds: list[str]
    id_array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    #: each arm's type (`policy.type_codes`)
    types: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: each arm's module, as a code of `modules` (`search.module_of`)
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: the code of every module an arm of the registry is in
    modules: dict[str, int] = field(default_factory=dict)


def _empty(n: int) -> dict[str, np.ndarray]:
    cols = {k: np.zeros(n) for k in _COLS}
    cols["pw"] = np.ones(n)
    cols["drop_at"] = np.full(n, -1.0)
    cols["mv_from"] = np.full(n, -1.0)
    return cols


class PosteriorCache:
    """The registry, the settings and per-scope state rows, kept current incrementally."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._marks: tuple[int, int] | None = None
        self.obs_index = -1
        #: The observation index the tables reflect (every observation up to it is folded).
        self.folded = -1
        self.ckpt = -1
        self.now = 0
        self.cfg = BanditConfig()
        self.registry = Registry({}, [], {}, np.zeros(0, dtype=np.int64), [])
        self.a0 = np.zeros(0)
        self.b0 = np.zeros(0)
        self.protected = np.zeros(0, dtype=bool)
        #: What the settings declare about the registered arms (`policy.declared`).
        self.declared: policy.Declared | None = None
        #: Per loaded scope: its rows, registry order first, then unregistered arms met in
        #: observations.
        self.tables: dict[str, fold.Table] = {}
        #: Per loaded scope: [observations, boost_until].
        self.counts: dict[str, list[int]] = {}
        #: What each observation folded since checkpoint `ckpt` changed (`fold.Traced`; every
        #: fold is traced), so the next checkpoint can be written from these tables; None
        #: once more than `_TRACED_MAX` wait (nothing checkpoints), until the next checkpoint.
        self.since: list[fold.Traced] | None = []

    # -- refreshing ---------------------------------------------------------------------
    @staticmethod
    def read_meta(tx: Tx) -> tuple[Any, ...]:
        row = tx.fetchone(
            "SELECT obs_index, last_ts, arms_seq, config_seq, ckpt_index FROM bandit_meta "
            "WHERE one = 1"
        )
        assert row is not None
        return row

    @property
    def registry_seq(self) -> int | None:
        """The position of the arms event the registry reflects (None: not loaded yet)."""
        return None if self._marks is None else self._marks[0]

    def settle(self, meta: Sequence[Any], scopes: Sequence[str]) -> bool:
        """Take the state `meta` (a `read_meta` row) describes if the cache needs nothing more
        to reflect it: the same registry and settings, every observation up to it folded,
        `scopes` loaded. False (the cache unchanged): `refresh` in a snapshot. This lets a
        select that follows this process's own observe read one row, in one statement, where
        a snapshot would cost two round trips more on PostgreSQL. Call with `lock` held."""
        index, now, ckpt = int(meta[0]), int(meta[1]), int(meta[4])
        if (
            (int(meta[2]), int(meta[3])) != self._marks
            or index != self.folded
            or index < self.obs_index
            or not self.ckpt <= ckpt <= self.folded
            or any(s not in self.tables for s in scopes)
        ):
            return False
        self._checkpointed(ckpt)
        self.ckpt, self.obs_index, self.now = ckpt, index, now
        return True

    def _checkpointed(self, ckpt: int) -> None:
        """Another checkpoint, `ckpt`, of observations this cache has folded: what they changed
        is stored now, so the trace keeps only the observations after it."""
        if ckpt > self.ckpt and self.since is not None:
            self.since = [t for t in self.since if t.ob.index > ckpt]

    def refresh(self, tx: Tx) -> None:
        """Bring the cache to the snapshot `tx` sees. Call with `lock` held."""
        row = self.read_meta(tx)
        index, now, marks, ckpt = int(row[0]), int(row[1]), (int(row[2]), int(row[3])), int(row[4])
        reloaded = False
        if marks != self._marks or index < self.obs_index or ckpt < self.ckpt:
            held = self._marks
            only_arms = held is not None and marks[1] == held[1]
            if only_arms and index >= self.obs_index and ckpt >= self.ckpt:
                self._remap(tx)  # arms were registered, nothing else: the rows stay good
                self._marks = marks
            else:
                self._reload(tx)
                self._marks = marks
                self.tables.clear()
                self.counts.clear()
                self.folded = ckpt  # a scope's table is loaded as the last checkpoint left it
                self.since = []
                reloaded = True
        if not reloaded and ckpt > self.folded:
            # A checkpoint folded observations this cache has not: take the rows it changed.
            if self.tables:
                self._changed_since(tx, self.folded)
                self.counts.update(proj.read_counts(tx, list(self.tables)))
            self.folded = ckpt
            self.since = []
        elif not reloaded:
            self._checkpointed(ckpt)
        self.ckpt = ckpt
        if index > self.folded:
            for ob in proj.pending_since(tx, self.folded):
                self._apply(tx, ob)
            self.folded = index
            self._bound_trace()
        self.obs_index, self.now = index, now

    def advance(
        self,
        ob: fold.Pending | None,
        meta: Sequence[Any],
        at: np.ndarray | None = None,
        arms: Any = None,
    ) -> None:
        """Fold one committed observation that this process wrote (`ob`, None when it
        updates nothing), with `meta` the bandit_meta row its transaction left, if the cache
        reflects exactly the state before it and holds every row it changes. Otherwise leave
        it to the next `refresh`, which reads what it needs in its own snapshot. Call with
        `lock` held.

        When `ob` itself completed a checkpoint (`ckpt == index`), the cache folds it too: the
        checkpoint folded the same observations into the same stored rows with the same
        arithmetic (`fold.apply`), so the rows it wrote are the values the cache then holds,
        and the next `refresh` need not read them back (at 1,000 arms, thousands of rows
        every `CHECKPOINT_EVERY` observations).

        `at`: the positions of `ob.arms` in the registry `arms` (`Registry.arms`), if the
        caller has them: a table holds the registry's arms first, in its order."""
        index, now, marks, ckpt = (
            int(meta[0]),
            int(meta[1]),
            (int(meta[2]), int(meta[3])),
            int(meta[4]),
        )
        if (
            marks != self._marks
            or not (ckpt == index or self.ckpt <= ckpt <= self.folded)
            or self.folded != index - 1
            or self.ckpt >= index
        ):
            return  # another writer, a checkpoint or a new registry came between
        if ckpt != index:
            # A checkpoint of observations the cache has folded may have come between (on
            # PostgreSQL, the trailing thread's): it changes no value the cache holds.
            self._checkpointed(ckpt)
        if ob is not None:
            names = [GLOBAL] if ob.context is None else [GLOBAL, ob.context]
            where: list[np.ndarray] = []
            for name in names:
                t = self.tables.get(name)
                got = None
                if t is not None:
                    known = at is not None and arms is self.registry.arms
                    got = at if known else t.positions(ob.arms)
                if got is None:
                    return  # a row the cache has not loaded: only a snapshot read may load it
                where.append(got)
            glob = self.tables[GLOBAL]
            ctx = self.tables[ob.context] if ob.context is not None else None
            fold.apply(self.cfg, glob, ctx, ob, self.counts, at=where, trace=self.since)
        if ckpt == index:  # this observation completed a checkpoint
            self.since = []
        self._bound_trace()
        self.folded = self.obs_index = index
        self.now = now
        self.ckpt = ckpt

    def _bound_trace(self) -> None:
        if self.since is not None and len(self.since) > _TRACED_MAX:
            self.since = None

    def checkpoint(
        self,
        cfg: BanditConfig,
        ob: fold.Pending | None,
        index: int,
        ckpt: int,
        marks: tuple[int, int],
    ) -> proj.Checkpoint | None:
        """The checkpoint that observation `index` (`ob`, None if it updates nothing)
        completes, from these tables, if they hold exactly the rows checkpoint `ckpt` left
        with every observation after it folded (and traced in `since`), up to `index` - 1;
        else None (the projection then reads and folds the pending rows itself).

        `folded` computes the same values: the same arithmetic (`fold.apply`) on the same
        rows, in the same order. The tables are not changed: the observation is folded into
        copies of its scopes' tables, and into the cache only by `advance` once it has
        committed. Called inside the observation's write transaction, so it only tries the
        lock: a select holding it is never waited for."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if (
                marks != self._marks
                or ckpt != self.ckpt
                or self.folded != index - 1
                or self.since is None
            ):
                return None
            trace = list(self.since)
            counts = {name: list(c) for name, c in self.counts.items()}
            copies: dict[str, fold.Table] = {}
            if ob is not None:
                names = [GLOBAL] if ob.context is None else [GLOBAL, ob.context]
                at: list[np.ndarray] = []
                for name in names:
                    t = self.tables.get(name)
                    where = None if t is None else t.positions(ob.arms)
                    if where is None:
                        return None
                    copies[name] = t.copy()
                    at.append(where)
                ctx = copies[ob.context] if ob.context is not None else None
                fold.apply(cfg, copies[GLOBAL], ctx, ob, counts, at=at, trace=trace)
            touched: dict[str, list[np.ndarray]] = {}
            for t_ in trace:
                touched.setdefault(t_.scope, []).append(t_.at)
            rows: list[tuple[Any, ...]] = []
            for name, ats in touched.items():
                table = copies[name] if name in copies else self.tables[name]
                where = np.unique(np.concatenate(ats))
                ids = table.ids()
                rows += [
                    (name, ids[i], *row)
                    for i, row in zip(where.tolist(), table.rows(where), strict=True)
                ]
            points = [p for t_ in trace for p in t_.points()]
            return proj.Checkpoint(rows, {name: counts[name] for name in touched}, points)
        finally:
            self.lock.release()

    def _apply(self, tx: Tx, ob: fold.Pending) -> None:
        glob = self._table(tx, GLOBAL)
        ctx = None if ob.context is None else self._table(tx, ob.context)
        for name, t in ((GLOBAL, glob), (ob.context, ctx)):
            if t is None or name is None:
                continue
            missing = [a for a in ob.arms if a not in t.pos]
            if missing:  # arms no longer (or never) registered: kept after the registry's
                t.grow(missing)
                proj.fill(t, proj.read_rows(tx, name, missing))
        fold.apply(self.cfg, glob, ctx, ob, self.counts, trace=self.since)

    def _remap(self, tx: Tx) -> None:
        """Reload the registry after registrations (the settings are as they were) and move
        each loaded scope's rows to the new registry's positions; only the rows of arms a
        table did not hold are read. The folded state is the same, so it is kept: a list
        passed with each select that brings a new arm would otherwise read every scope's
        rows again (60,000 rows at 10,000 arms and 5 contexts). What observations folded
        since the last checkpoint changed is no longer traced by position (`since`): the
        next checkpoint reads its rows, as when nothing was traced."""
        before = self.registry
        self._reload(tx)
        ids, index = self.registry.ids, self.registry.index
        # a table holds the registry's arms first, in its order, then the others it met
        was_reg = np.fromiter((before.index.get(a, -1) for a in ids), np.int64, len(ids))
        fresh_reg = np.flatnonzero(was_reg < 0)
        for name, old in list(self.tables.items()):
            was = was_reg.copy()
            for i in fresh_reg.tolist():  # registered now, perhaps met before as another arm
                was[i] = old.pos.get(ids[i], -1)
            rest = [a for a in list(old.pos)[len(before.ids) :] if a not in index]
            was = np.concatenate([was, np.fromiter(map(old.pos.__getitem__, rest), np.int64)])
            new = fold.Table()
            new.pos = {**index, **{a: len(ids) + j for j, a in enumerate(rest)}}
            kept = np.flatnonzero(was >= 0)
            for c, v in old.cols.items():
                col = np.full(len(was), fold.BLANK.get(c, 0), dtype=v.dtype)
                col[kept] = v[was[kept]]
                new.cols[c] = col
            new.present = np.zeros(len(was), dtype=bool)
            new.present[kept] = old.present[was[kept]]
            missing = [ids[i] for i in np.flatnonzero(was[: len(ids)] < 0).tolist()]
            if missing:
                proj.fill(new, proj.read_rows(tx, name, missing))
            self.tables[name] = new
        self.since = None

    def _reload(self, tx: Tx) -> None:
        body = tx.scalar("SELECT body FROM bandit_config WHERE one = 1")
        import msgspec

        prev_cfg, prev = self.cfg, self.registry
        self.cfg = BanditConfig() if body is None else from_dict(msgspec.json.decode(body))
        # sorted here, not by the database: its collation may differ from Python's order
        rows = sorted(tx.fetchall("SELECT id, tokens, content, kind FROM bandit_arms"))
        # An arm registered as before keeps its (checked) Arm, type and protection: a list
        # passed with each select that brings a new arm reloads the registry, and checking
        # 10,000 ids again cost most of that select.
        old = prev.arms
        arms: dict[str, Arm] = {}
        for arm_id, tokens, content, kind in rows:
            a = old.get(arm_id)
            if a is None or (a.tokens, a.content, a.kind) != (tokens, content, kind):
                a = Arm(id=arm_id, tokens=int(tokens), content=content, kind=kind)
            arms[arm_id] = a
        ids = list(arms)
        kinds = [arms[i].effective_kind for i in ids]
        was = np.fromiter((prev.index.get(i, -1) for i in ids), np.int64, len(ids))
        new = np.flatnonzero(was < 0)
        types = np.zeros(len(ids), dtype=np.int64)
        types[was >= 0] = prev.types[was[was >= 0]]
        types[new] = policy.type_codes(ids[i] for i in new.tolist())
        # module codes are labels: an arm keeps its code, a new module takes the next one
        modules = dict(prev.modules)
        groups = np.zeros(len(ids), dtype=np.int64)
        groups[was >= 0] = prev.groups[was[was >= 0]]
        for i in new.tolist():
            groups[i] = modules.setdefault(module_of(ids[i]), len(modules))
        self.registry = Registry(
            arms=arms,
            ids=ids,
            index={a: i for i, a in enumerate(ids)},
            tokens=np.fromiter((arms[i].tokens for i in ids), dtype=np.int64, count=len(ids)),
            kinds=kinds,
            id_array=np.array(ids, dtype=object),
            types=types,
            groups=groups,
            modules=modules,
        )
        self.a0, self.b0 = self.priors(ids, kinds)
        if self.cfg.protected == prev_cfg.protected:
            protected = np.zeros(len(ids), dtype=bool)
            protected[was >= 0] = self.protected[was[was >= 0]]
            protected[new] = [self.cfg.is_protected(ids[i]) for i in new.tolist()]
            self.protected = protected
        else:
            self.protected = np.fromiter(
                (self.cfg.is_protected(i) for i in ids), dtype=bool, count=len(ids)
            )
        self.declared = policy.declared(self.cfg, ids)

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
            f"SELECT scope, arm_id, {proj.STATE_COLS} FROM bandit_posteriors WHERE last_index > ?",
            (index,),
        )
        by_scope: dict[str, list[tuple[Any, ...]]] = {}
        for r in rows:
            if r[0] in self.tables:
                by_scope.setdefault(r[0], []).append(r[1:])
        for name, got in by_scope.items():
            proj.fill(self.tables[name], got)

    def _table(self, tx: Tx, name: str) -> fold.Table:
        """One scope's table, loaded in full (as the last checkpoint left it) when first used:
        a scope is loaded before the cache folds any observation into it."""
        t = self.tables.get(name)
        if t is None:
            t = fold.Table(self.registry.ids)
            proj.fill(
                t,
                tx.fetchall(
                    f"SELECT arm_id, {proj.STATE_COLS} FROM bandit_posteriors WHERE scope = ?",
                    (name,),
                ),
            )
            self.tables[name] = t
            self.counts[name] = proj.read_counts(tx, [name]).get(name, [0, 0])
        return t

    def scope(self, tx: Tx, name: str) -> dict[str, np.ndarray]:
        """One scope's state columns over the registry (views, registry order)."""
        t = self._table(tx, name)
        n = len(self.registry.ids)
        return {k: v[:n] for k, v in t.cols.items()}

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
        *,
        at: np.ndarray | None = None,
        tokens: np.ndarray | None = None,
    ) -> policy.PolicyInput:
        """The policy's input for a run in `context` over the registered inventory, or over
        `arms` (registered or not: unknown arms start from their prior, as if never seen).
        `at`, `tokens`: the arms' registry positions (-1: unregistered) and costs, if the
        caller keeps them for a list it passes again (`armsets.Listed`)."""
        alpha, beta, _, _ = self.posterior(tx, context)
        g = self.scope(tx, GLOBAL)
        c = self.scope(tx, context) if context else g
        name = context or GLOBAL
        self._table(tx, name)
        obs, until = self.counts[name]
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
            "last": c["last_index"],
            "mv_from": g["mv_from"],
            "mv_until": g["mv_until"],
        }
        if arms is None:
            tokens, protected = self.registry.tokens, self.protected
            types, groups = self.registry.types, self.registry.groups
            decl = self.declared if cfg is self.cfg else policy.declared(cfg, self.registry.ids)
        else:
            if at is None:
                pos = self.registry.index
                at = np.fromiter((pos.get(a.id, -1) for a in arms), np.int64, len(arms))
            if cfg is self.cfg and self.registry.ids:  # registered arms: the registry's
                types, protected = self.registry.types[at], self.protected[at]
                for i in np.flatnonzero(at < 0).tolist():
                    types[i] = policy.type_codes([arms[i].id])[0]
                    protected[i] = cfg.is_protected(arms[i].id)
            else:
                types = policy.type_codes(a.id for a in arms)
                protected = np.fromiter(
                    (cfg.is_protected(a.id) for a in arms), dtype=bool, count=len(arms)
                )
            cols = _aligned(self, cols, arms, context, at)
            if tokens is None:
                tokens = np.fromiter((a.tokens for a in arms), dtype=np.int64, count=len(arms))
            # modules matter only to the search under a binding budget
            binding = int(tokens.sum()) > budget
            groups = _modules(self.registry, arms, at) if binding else None
            decl = policy.declared(cfg, (a.id for a in arms))
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
            scope={k: cols[k] for k in ("s", "f", "pw", "drop_at", "pulls", "last")},
            scope_obs=float(obs),
            restarting=obs < until,
            moved_from=cols["mv_from"],
            moved_until=cols["mv_until"],
            index=float(self.obs_index),
            types=types,
            groups=groups,
            decl=decl,
        )


def _modules(registry: Registry, arms: Sequence[Arm], at: np.ndarray) -> np.ndarray:
    """Each arm's module code: the registry's for registered arms (at registry positions
    `at`, -1 for the others), numbered on from the registry's modules for the others."""
    known = at >= 0
    if known.all():
        return registry.groups[at]
    out = np.zeros(len(arms), dtype=np.int64)
    out[known] = registry.groups[at[known]]
    codes = dict(registry.modules)
    for i in np.flatnonzero(~known).tolist():
        out[i] = codes.setdefault(module_of(arms[i].id), len(codes))
    return out


def _aligned(
    cache: PosteriorCache,
    cols: dict[str, np.ndarray],
    arms: Sequence[Arm],
    context: str | None,
    idx: np.ndarray,
) -> dict[str, np.ndarray]:
    """`cols` (registry order) for `arms`, at registry positions `idx` (-1: unregistered):
    unknown arms get their prior and a fresh state."""
    known = idx >= 0
    if known.all():
        return {k: v[idx] for k, v in cols.items()}
    unknown = np.flatnonzero(~known).tolist()
    a0, b0 = np.zeros(len(arms)), np.zeros(len(arms))
    a0[unknown], b0[unknown] = cache.priors(
        [arms[i].id for i in unknown], [arms[i].effective_kind for i in unknown]
    )
    if context:  # no evidence anywhere: the context prior is the global prior's mean
        k = cache.cfg.context_pseudo_count
        a0[unknown], b0[unknown] = (
            k * a0[unknown] / (a0[unknown] + b0[unknown]),
            k * b0[unknown] / (a0[unknown] + b0[unknown]),
        )
    blank = _empty(len(arms))
    out = {
        "alpha": a0,
        "beta": b0,
        "gpulls": blank["pulls"],
        "gs": blank["s"],
        "mv_from": blank["mv_from"],
        "mv_until": blank["mv_until"],
        **{k: blank[k].copy() for k in ("s", "f", "pw", "drop_at", "pulls")},
        "last": blank["last_index"].copy(),
    }
    out = {k: np.array(v, dtype=np.float64) for k, v in out.items()}
    at = idx[known]
    for k in out:
        out[k][known] = cols[k][at]
    return out
