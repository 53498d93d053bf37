"""One observation's effect on the learning state, shared by the store's projection and the
in-memory learner (`memory.py`), so both apply identical arithmetic.

A labelled observation updates its context's evidence (with change detection) and the global
evidence (without: the global mix of task types moves whenever the policy changes what it
includes), and the arm's hierarchy sums by the change of its context's terms. An unlabelled
observation updates the global evidence only, with detection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plaudit.bandit import evidence, hierarchy
from plaudit.bandit.config import BanditConfig


@dataclass
class Folded:
    ctx: dict[str, Any] | None
    glob: dict[str, Any]
    sums: dict[str, Any]
    #: per arm: a central drop was detected in the observation's scope
    central: np.ndarray


def observe(
    ctx: dict[str, Any] | None,
    glob: dict[str, Any],
    sums: dict[str, Any],
    r: Any,
    cfg: BanditConfig,
    index: float,
    *,
    decay_context: Any = 1.0,
    decay_global: Any = 1.0,
) -> Folded:
    """The new states of the included arms (aligned arrays) after rewards `r`."""
    ds = cfg.drift_settings()
    if ctx is None:
        g = evidence.update(glob, r, ds, decay_global, detect=True, index=index)
        return Folded(None, g.state, dict(sums), g.central_drop)
    c = evidence.update(ctx, r, ds, decay_context, detect=True, index=index)
    new_sums = hierarchy.shift(sums, (ctx["s"], ctx["f"]), (c.state["s"], c.state["f"]))
    g = evidence.update(glob, r, ds, decay_global, detect=False, index=index)
    return Folded(c.state, g.state, new_sums, c.central_drop)


# -- deferred folding: state rows as arrays, and observations applied to them ---------------

#: One (scope, arm) state row after its key: the projection's posterior columns, in this order.
STATE = (
    "s",
    "f",
    "pulls",
    "hits",
    "last_index",
    "last_ts",
    *evidence.FIELDS[2:],
    *hierarchy.SUMS,
    "mv_from",
    "mv_until",
    "hist",
)
#: The non-zero columns of a row that does not exist yet.
BLANK = {"pw": 1.0, "drop_at": -1.0, "mv_from": -1.0}
GLOBAL = ""  # the scope of the global posterior; contexts use their label
DAY_MS = 86_400_000
#: A (scope, arm) pair gets a history point after each of its first HISTORY_DENSE updates, and
#: after every HISTORY_EVERY-th after that: the convergence chart needs the start, and a
#: point per update would be most of an observation's writes at 1,000 arms.
HISTORY_DENSE = 16
HISTORY_EVERY = 16


def decay_factor(cfg: BanditConfig, d_index: float, d_ms: float) -> float:
    """How much old evidence is worth after `d_index` observations and `d_ms` of event time."""
    f = 1.0
    if cfg.half_life_runs and d_index > 0:
        f *= 0.5 ** (d_index / cfg.half_life_runs)
    if cfg.half_life_days and d_ms > 0:
        f *= 0.5 ** (d_ms / DAY_MS / cfg.half_life_days)
    return f


@dataclass
class Pending:
    """An observation that updates posteriors, as the projection records it until the next
    checkpoint folds it into the rows: everything `apply` needs, nothing else."""

    index: int
    ts_ms: int
    now: int
    context: str | None
    arms: list[str]  # sorted
    r: np.ndarray  # rewards (0.0 or 1.0), aligned with `arms`


class Table:
    """One scope's state rows for a set of arms, as growable column arrays; `present` marks
    the arms that have a row (the others hold a blank state)."""

    def __init__(self, ids: list[str] | None = None) -> None:
        self.pos: dict[str, int] = {}
        self.cols: dict[str, np.ndarray] = {k: np.zeros(0) for k in STATE}
        self.cols["hist"] = np.zeros(0, dtype=np.int64)
        self.present = np.zeros(0, dtype=bool)
        if ids:
            self.grow(ids)

    def __len__(self) -> int:
        return len(self.present)

    def grow(self, ids: list[str]) -> None:
        """Add blank positions for `ids` (none of which may be here already)."""
        n, k = len(self.present), len(ids)
        for j, a in enumerate(ids):
            self.pos[a] = n + j
        for c, v in self.cols.items():
            self.cols[c] = np.concatenate([v, np.full(k, BLANK.get(c, 0), dtype=v.dtype)])
        self.present = np.concatenate([self.present, np.zeros(k, dtype=bool)])

    def copy(self) -> Table:
        """A copy to fold into without changing this table (the arms' positions are shared:
        folding never adds arms)."""
        out = Table()
        out.pos = self.pos
        out.cols = {c: v.copy() for c, v in self.cols.items()}
        out.present = self.present.copy()
        return out

    def ids(self) -> list[str]:
        """The arm ids by position."""
        return list(self.pos)

    def positions(self, ids: list[str]) -> np.ndarray | None:
        """The positions of `ids`, or None if one has none here."""
        try:
            return np.fromiter(map(self.pos.__getitem__, ids), np.int64, len(ids))
        except KeyError:
            return None

    def put(self, at: np.ndarray, values: np.ndarray, hist: np.ndarray) -> None:
        """Store rows (STATE order without hist, as a float matrix) at positions `at`."""
        for j, c in enumerate(STATE[:-1]):
            self.cols[c][at] = values[:, j]
        self.cols["hist"][at] = hist
        self.present[at] = True

    def rows(self, at: np.ndarray) -> list[tuple[Any, ...]]:
        """The rows at positions `at` as tuples in STATE order (ints where the columns are)."""
        cols = []
        for c in STATE:
            v = self.cols[c][at]
            cols.append(v.astype(np.int64).tolist() if c in _INTS else v.tolist())
        return list(zip(*cols, strict=True))


_INTS = frozenset({"pulls", "hits", "last_index", "last_ts", "hist"})


_EV = (*evidence.FIELDS, "hist")
#: The columns `evidence.update` reads and writes when it does not detect changes.
_UNDETECTED = ("s", "f", "hn", "hist")
_CTX_ZERO = (*hierarchy.SUMS, "mv_from", "mv_until")


def _decays(cfg: BanditConfig, t: Table, at: np.ndarray, index: int, now: int) -> Any:
    if not (cfg.half_life_runs or cfg.half_life_days):
        return 1.0
    fresh = ~t.present[at]
    li = np.where(fresh, index, t.cols["last_index"][at])
    lt = np.where(fresh, now, t.cols["last_ts"][at])
    return np.array(
        [
            decay_factor(cfg, index - a, now - b)
            for a, b in zip(li.tolist(), lt.tolist(), strict=True)
        ]
    )


def apply(
    cfg: BanditConfig,
    glob: Table,
    ctx: Table | None,
    ob: Pending,
    counts: dict[str, list[int]],
    points: list[tuple[Any, ...]] | None = None,
    *,
    at: Sequence[np.ndarray] | None = None,
    trace: list[Traced] | None = None,
) -> None:
    """Fold one observation into the state rows of its scopes (every arm of `ob.arms` must
    have a position in them), and into `counts` (scope: [observations, boost_until]). With
    `points`, the history points it adds are appended there. The projection's checkpoint and
    every reader (the selection cache, statistics) apply pending observations with this, so
    all reach identical numbers. A select folds one of these per observation it has not seen,
    so only the columns that change are gathered and written back. `at`: the arms'
    positions in `glob` (and `ctx`) if the caller has them already. With `trace`, what a
    checkpoint needs to write for it is appended there (see `Traced`)."""
    index, now, r = ob.index, ob.now, ob.r
    # map() over the dict's lookup: the positions without a Python-level loop
    gi = at[0] if at else np.fromiter(map(glob.pos.__getitem__, ob.arms), np.int64, len(ob.arms))
    gcols = glob.cols
    # A labelled observation updates the global evidence without detection, which reads (and
    # changes) only these columns: gathering the detectors' columns too would be wasted.
    g = {k: gcols[k][gi] for k in (_EV if ctx is None else _UNDETECTED)}
    sums = {k: gcols[k][gi] for k in hierarchy.SUMS}
    c: dict[str, Any] | None = None
    ci = gi
    if ctx is not None:
        ci = (
            at[1]
            if at and len(at) > 1
            else np.fromiter(map(ctx.pos.__getitem__, ob.arms), np.int64, len(ob.arms))
        )
        c = {k: ctx.cols[k][ci] for k in _EV}
        res = observe(
            c,
            g,
            sums,
            r,
            cfg,
            float(index),
            decay_context=_decays(cfg, ctx, ci, index, now),
            decay_global=_decays(cfg, glob, gi, index, now),
        )
    else:
        res = observe(
            None, g, sums, r, cfg, float(index), decay_global=_decays(cfg, glob, gi, index, now)
        )
    for name in [GLOBAL] if ob.context is None else [GLOBAL, ob.context]:
        counts.setdefault(name, [0, 0])[0] += 1
    if res.central.any():
        scope = counts[ob.context or GLOBAL]
        scope[1] = scope[0] + cfg.restart_runs
        mv_from, mv_until = gcols["mv_from"][gi], gcols["mv_until"][gi]
        start = res.central & (mv_until <= index)
        gcols["mv_from"][gi] = np.where(start, float(index), mv_from)
        gcols["mv_until"][gi] = np.where(res.central, float(index + cfg.moved_runs), mv_until)
    for k in hierarchy.SUMS:
        gcols[k][gi] = res.sums[k]
    tables: list[tuple[str, Table, np.ndarray, dict[str, Any], dict[str, Any]]] = [
        (GLOBAL, glob, gi, g, res.glob)
    ]
    if ctx is not None and c is not None and res.ctx is not None:
        tables.append((ob.context or GLOBAL, ctx, ci, c, res.ctx))
        fresh = ~ctx.present[ci]
        if fresh.any():  # a context's row keeps no sums and no re-exploration window
            for k in _CTX_ZERO:
                ctx.cols[k][ci[fresh]] = 0.0
    for name, table, at, old, new in tables:
        cols = table.cols
        for k, v in new.items():
            if v is not old[k]:  # evidence.update returns the fields it left as they were
                cols[k][at] = v
        pulls = cols["pulls"][at] + 1.0
        cols["pulls"][at] = pulls
        cols["hits"][at] += r
        cols["last_index"][at] = index
        cols["last_ts"][at] = now
        table.present[at] = True
        if points is not None:
            points += Traced(name, at, ob, pulls, new["s"], new["f"]).points()
        if trace is not None:  # the arrays are this fold's own results: kept, not copied
            trace.append(Traced(name, at, ob, pulls, new["s"], new["f"]))


@dataclass
class Traced:
    """One observation folded into one scope's table, as a checkpoint of that table needs
    it: the rows it changed (`at`, positions in the table, aligned with `ob.arms`) and what
    its history points are made of (each arm's pulls and evidence after it). A cache that
    keeps these for the observations it folded since the last checkpoint can write the next
    one from its own rows."""

    scope: str
    at: np.ndarray
    ob: Pending
    pulls: np.ndarray
    s: np.ndarray
    f: np.ndarray

    def points(self) -> list[tuple[Any, ...]]:
        """The history points (obs_index, ts_ms, scope, arm_id, s, f): after each of an arm's
        first HISTORY_DENSE updates in the scope, and after every HISTORY_EVERY-th."""
        pulls, ob, name = self.pulls, self.ob, self.scope
        js = np.flatnonzero((pulls <= HISTORY_DENSE) | (pulls % HISTORY_EVERY == 0))
        arms = ob.arms
        return [
            (ob.index, ob.ts_ms, name, arms[j], s, f)
            for j, s, f in zip(js.tolist(), self.s[js].tolist(), self.f[js].tolist(), strict=True)
        ]
