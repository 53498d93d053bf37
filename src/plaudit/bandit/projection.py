"""The `bandit` projection: arms, config, runs and posteriors folded from `plaudit.bandit.*`
events inside the append transaction, so concurrent observers never lose an update.

Posterior rows hold *evidence* (success and failure counts, and the change detectors' state of
`evidence.py`), not alpha/beta: the prior is added when reading, so changing a prior applies to
past evidence too. The global row of each arm also holds the arm's hierarchy sums
(`hierarchy.py`) and its re-exploration window after a central drop; `bandit_scopes` counts
each scope's observations and holds its re-exploration window. One observation's arithmetic is
`fold.observe`, shared with the in-memory learner. Optional discounting counts time in
observations (log order) and in event-time days, never the wall clock, so a rebuild reproduces
the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

import msgspec
import numpy as np

from plaudit.bandit import config as cfgmod
from plaudit.bandit import evidence, fold, hierarchy
from plaudit.bandit.arms import coerce_arms
from plaudit.errors import ValidationError
from plaudit.events import StoredEvent
from plaudit.store.backend import Tx

PREFIX = "plaudit.bandit."
ARMS_V1 = "plaudit.bandit.arms.v1"
CONFIG_V1 = "plaudit.bandit.config.v1"
RUN_V1 = "plaudit.bandit.run.v1"
RUN_V2 = "plaudit.bandit.run.v2"
OBSERVATION_V1 = "plaudit.bandit.observation.v1"

GLOBAL = ""  # the scope of the global posterior; contexts use their label
DAY_MS = 86_400_000


def decay_factor(cfg: cfgmod.BanditConfig, d_index: float, d_ms: float) -> float:
    """How much old evidence is worth after `d_index` observations and `d_ms` of event time."""
    f = 1.0
    if cfg.half_life_runs and d_index > 0:
        f *= 0.5 ** (d_index / cfg.half_life_runs)
    if cfg.half_life_days and d_ms > 0:
        f *= 0.5 ** (d_ms / DAY_MS / cfg.half_life_days)
    return f


class _ArmRecord(msgspec.Struct):
    id: str
    tokens: int
    included: bool


class _RunPayload(msgspec.Struct):
    arms: list[_ArmRecord]
    budget: int
    used_tokens: int
    context: str | None = None
    is_baseline: bool = False
    phase: str = "active"


class _RunPayloadV2(msgspec.Struct):
    included: list[str]
    p: list[float]
    budget: int
    used_tokens: int
    inventory_tokens: int
    baseline_tokens: int
    considered: int
    context: str | None = None
    is_baseline: bool = False
    phase: str = "active"


class _ObservationPayload(msgspec.Struct):
    run_id: str
    rewards: dict[str, Literal[0, 1]]
    updates: bool = False
    #: excluded arms the output referenced: successes, like included referenced arms
    missed: list[str] = msgspec.field(default_factory=list)
    context: str | None = None
    usage_tokens: int | None = None
    duration_ms: float | None = None
    error: str | None = None


class _ConfigPayload(msgspec.Struct):
    changes: dict[str, Any]


class _ArmsPayload(msgspec.Struct):
    arms: list[Any]


def _decode(ev: StoredEvent, kind: type[Any]) -> Any:
    """Check an event's payload shape; a malformed event is refused, never half-applied."""
    try:
        return msgspec.convert(ev.payload, kind)
    except msgspec.ValidationError as exc:
        raise ValidationError("payload", f"{ev.type}: {exc}", where=ev.id) from None


class BanditProjection:
    name = "bandit"
    version = 3
    prefixes = (PREFIX,)
    tables = (
        "bandit_config",
        "bandit_arms",
        "bandit_runs",
        "bandit_posteriors",
        "bandit_history",
        "bandit_meta",
        "bandit_scopes",
    )

    def create(self, tx: Tx) -> None:
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_config (one INTEGER PRIMARY KEY, "
                "body TEXT NOT NULL, seq {bigint} NOT NULL)"
            )
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_arms (id TEXT PRIMARY KEY, tokens {bigint} "
                "NOT NULL, content TEXT, kind TEXT NOT NULL, seq {bigint} NOT NULL)"
            )
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_runs (run_id TEXT PRIMARY KEY, "
                "seq {bigint} NOT NULL, ts_ms {bigint} NOT NULL, session_id TEXT NOT NULL, "
                "context TEXT, is_baseline INTEGER NOT NULL, phase TEXT NOT NULL, "
                "budget {bigint} NOT NULL, used_tokens {bigint} NOT NULL, "
                "considered_tokens {bigint} NOT NULL, included TEXT NOT NULL, "
                "observed INTEGER NOT NULL DEFAULT 0, obs_ts_ms {bigint}, usage_tokens {bigint}, "
                "duration_ms {double}, error TEXT, updated INTEGER NOT NULL DEFAULT 0, "
                "baseline_tokens {bigint})"
            )
        )
        tx.execute("CREATE INDEX IF NOT EXISTS bandit_runs_seq ON bandit_runs (seq)")
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_posteriors (scope TEXT NOT NULL, "
                "arm_id TEXT NOT NULL, s {double} NOT NULL, f {double} NOT NULL, "
                "pulls {bigint} NOT NULL, hits {bigint} NOT NULL, last_index {bigint} NOT NULL, "
                "last_ts {bigint} NOT NULL, gu {double} NOT NULL, su {double} NOT NULL, "
                "fu {double} NOT NULL, gd {double} NOT NULL, sd {double} NOT NULL, "
                "fd {double} NOT NULL, pw {double} NOT NULL, hn {double} NOT NULL, "
                "drop_at {double} NOT NULL, hc {double} NOT NULL, hr {double} NOT NULL, "
                "hr2 {double} NOT NULL, hv {double} NOT NULL, mv_from {double} NOT NULL, "
                "mv_until {double} NOT NULL, hist {bigint} NOT NULL, "
                "PRIMARY KEY (scope, arm_id))"
            )
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_scopes (scope TEXT PRIMARY KEY, "
                "obs {bigint} NOT NULL, boost_until {bigint} NOT NULL)"
            )
        )
        tx.execute(
            "CREATE INDEX IF NOT EXISTS bandit_posteriors_changed ON bandit_posteriors (last_index)"
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_history (obs_index {bigint} NOT NULL, "
                "ts_ms {bigint} NOT NULL, scope TEXT NOT NULL, arm_id TEXT NOT NULL, "
                "s {double} NOT NULL, f {double} NOT NULL, "
                "PRIMARY KEY (scope, arm_id, obs_index))"
            )
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_meta (one INTEGER PRIMARY KEY, "
                "obs_index {bigint} NOT NULL, last_ts {bigint} NOT NULL, "
                "arms_seq {bigint} NOT NULL, config_seq {bigint} NOT NULL)"
            )
        )
        tx.execute(
            "INSERT INTO bandit_meta (one, obs_index, last_ts, arms_seq, config_seq) "
            "VALUES (1, 0, 0, 0, 0) ON CONFLICT (one) DO NOTHING"
        )

    # -- folding --------------------------------------------------------------------------
    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        cfg = load_config(tx)
        for ev in events:
            if ev.type == CONFIG_V1:
                cfg = self._config(tx, ev, cfg)
            elif ev.type == ARMS_V1:
                self._arms(tx, ev)
            elif ev.type == RUN_V1:
                self._run(tx, ev)
            elif ev.type == RUN_V2:
                self._run_v2(tx, ev)
            elif ev.type == OBSERVATION_V1:
                self._observation(tx, ev, cfg)
            # other plaudit.bandit.* types are left to future versions

    def _config(self, tx: Tx, ev: StoredEvent, cfg: cfgmod.BanditConfig) -> cfgmod.BanditConfig:
        new = cfgmod.merged(cfg, _decode(ev, _ConfigPayload).changes, replay=True)
        tx.execute(
            "INSERT INTO bandit_config (one, body, seq) VALUES (1, ?, ?) ON CONFLICT (one) "
            "DO UPDATE SET body = excluded.body, seq = excluded.seq",
            (msgspec.json.encode(new.to_dict()).decode(), ev.seq),
        )
        tx.execute("UPDATE bandit_meta SET config_seq = ? WHERE one = 1", (ev.seq,))
        return new

    def _arms(self, tx: Tx, ev: StoredEvent) -> None:
        arms = coerce_arms(_decode(ev, _ArmsPayload).arms, where=f"{ev.id}: arms")
        tx.executemany(
            "INSERT INTO bandit_arms (id, tokens, content, kind, seq) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET tokens = excluded.tokens, content = excluded.content,"
            " kind = excluded.kind, seq = excluded.seq",
            [(a.id, a.tokens, a.content, a.effective_kind, ev.seq) for a in arms],
        )
        tx.execute("UPDATE bandit_meta SET arms_seq = ? WHERE one = 1", (ev.seq,))

    def _run(self, tx: Tx, ev: StoredEvent) -> None:
        p = _decode(ev, _RunPayload)
        tx.execute(
            "INSERT INTO bandit_runs (run_id, seq, ts_ms, session_id, context, is_baseline, "
            "phase, budget, used_tokens, considered_tokens, included) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
            (
                ev.id,
                ev.seq,
                ev.ts_ms,
                ev.session_id,
                p.context,
                1 if p.is_baseline else 0,
                p.phase,
                p.budget,
                p.used_tokens,
                sum(a.tokens for a in p.arms),
                msgspec.json.encode([a.id for a in p.arms if a.included]).decode(),
            ),
        )

    def _run_v2(self, tx: Tx, ev: StoredEvent) -> None:
        p = _decode(ev, _RunPayloadV2)
        if len(p.p) != len(p.included):
            raise ValidationError("p", "must hold one propensity per included arm", where=ev.id)
        tx.execute(
            "INSERT INTO bandit_runs (run_id, seq, ts_ms, session_id, context, is_baseline, "
            "phase, budget, used_tokens, considered_tokens, included, baseline_tokens) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
            (
                ev.id,
                ev.seq,
                ev.ts_ms,
                ev.session_id,
                p.context,
                1 if p.is_baseline else 0,
                p.phase,
                p.budget,
                p.used_tokens,
                p.inventory_tokens,
                msgspec.json.encode(p.included).decode(),
                p.baseline_tokens,
            ),
        )

    def _observation(self, tx: Tx, ev: StoredEvent, cfg: cfgmod.BanditConfig) -> None:
        p = _decode(ev, _ObservationPayload)
        rewards = {**p.rewards, **dict.fromkeys(p.missed, 1)} if p.missed else p.rewards
        index, last_ts = tx.fetchone("SELECT obs_index, last_ts FROM bandit_meta WHERE one = 1")
        index, now = int(index) + 1, max(int(last_ts), ev.ts_ms)
        tx.execute("UPDATE bandit_meta SET obs_index = ?, last_ts = ? WHERE one = 1", (index, now))
        updates = p.updates and bool(rewards)
        tx.execute(
            "UPDATE bandit_runs SET observed = 1, obs_ts_ms = ?, usage_tokens = ?, "
            "duration_ms = ?, error = ?, updated = ? WHERE run_id = ?",
            (ev.ts_ms, p.usage_tokens, p.duration_ms, p.error, 1 if updates else 0, p.run_id),
        )
        if not updates:
            return
        scopes = [GLOBAL] if not p.context else [GLOBAL, p.context]
        arm_ids = sorted(rewards)
        n = len(arm_ids)
        current: dict[tuple[str, str], tuple[Any, ...]] = {}
        smarks = ",".join("?" * len(scopes))
        for chunk_start in range(0, n, 400):
            chunk = arm_ids[chunk_start : chunk_start + 400]
            marks = ",".join("?" * len(chunk))
            for row in tx.fetchall(
                f"SELECT scope, arm_id, {STATE_COLS} FROM bandit_posteriors "
                f"WHERE scope IN ({smarks}) AND arm_id IN ({marks})",
                [*scopes, *chunk],
            ):
                current[(row[0], row[1])] = tuple(row[2:])
        r = np.array([1.0 if rewards[a] else 0.0 for a in arm_ids])
        states = {
            scope: _rows(cfg, [current.get((scope, a)) for a in arm_ids], index, now)
            for scope in scopes
        }
        glob, g_decay, g_rest = states[GLOBAL]
        ctx, c_decay, _ = states[p.context] if p.context else (None, 1.0, None)
        sums = {k: g_rest[k] for k in hierarchy.SUMS}
        res = fold.observe(
            ctx, glob, sums, r, cfg, float(index), decay_context=c_decay, decay_global=g_decay
        )
        obs = _bump_scopes(tx, scopes)
        scope = p.context or GLOBAL
        mv_from, mv_until = g_rest["mv_from"].copy(), g_rest["mv_until"].copy()
        if res.central.any():
            tx.execute(
                "UPDATE bandit_scopes SET boost_until = ? WHERE scope = ?",
                (obs[scope][0] + cfg.restart_runs, scope),
            )
            start = res.central & (mv_until <= index)
            mv_from = np.where(start, float(index), mv_from)
            mv_until = np.where(res.central, float(index + cfg.moved_runs), mv_until)
        r_int = r.astype(np.int64)
        rows: list[tuple[Any, ...]] = []
        zeros = np.zeros(n)
        for scope_name, new in ((GLOBAL, res.glob), (p.context, res.ctx)):
            if scope_name is None or new is None:
                continue
            old = states[scope_name][2]
            extra = (
                [res.sums[k] for k in hierarchy.SUMS] + [mv_from, mv_until]
                if scope_name == GLOBAL
                else [zeros] * 6
            )
            rows += zip(
                [scope_name] * n,
                arm_ids,
                *(np.asarray(new[k], dtype=np.float64).tolist() for k in ("s", "f")),
                (old["pulls"] + 1).astype(np.int64).tolist(),
                (old["hits"] + r_int).astype(np.int64).tolist(),
                [index] * n,
                [now] * n,
                *(np.asarray(new[k], dtype=np.float64).tolist() for k in evidence.FIELDS[2:]),
                *(np.asarray(x, dtype=np.float64).tolist() for x in extra),
                np.asarray(new["hist"], dtype=np.int64).tolist(),
                strict=True,
            )
        _upsert(tx, rows)
        points = [
            (index, ev.ts_ms, row[0], row[1], row[2], row[3])
            for row in rows
            if row[4] <= HISTORY_DENSE or row[4] % HISTORY_EVERY == 0
        ]
        if points:
            tx.executemany(
                "INSERT INTO bandit_history (obs_index, ts_ms, scope, arm_id, s, f) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                points,
            )


#: The per-row state after (scope, arm_id), in the order `_observation` reads and writes it.
_STATE = (
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
STATE_COLS = ", ".join(_STATE)


#: Rows per multi-row upsert: one statement for many rows costs less than a step per row;
#: 36 rows x 27 parameters stay under SQLite's oldest limit on bound parameters (999).
_ROWS_PER_UPSERT = 36


@lru_cache(maxsize=8)
def _upsert_sql(n: int) -> str:
    one = "(" + ", ".join("?" * (len(_STATE) + 2)) + ")"
    return (
        f"INSERT INTO bandit_posteriors (scope, arm_id, {STATE_COLS}) VALUES "
        + ", ".join([one] * n)
        + " ON CONFLICT (scope, arm_id) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in _STATE)
    )


def _upsert(tx: Tx, rows: list[tuple[Any, ...]]) -> None:
    whole = len(rows) - len(rows) % _ROWS_PER_UPSERT
    for i in range(0, whole, _ROWS_PER_UPSERT):
        chunk = rows[i : i + _ROWS_PER_UPSERT]
        tx.execute(_upsert_sql(len(chunk)), [v for row in chunk for v in row])
    if whole < len(rows):
        tx.executemany(_upsert_sql(1), rows[whole:])


def _rows(
    cfg: cfgmod.BanditConfig, rows: list[tuple[Any, ...] | None], index: int, now: int
) -> tuple[dict[str, Any], Any, dict[str, np.ndarray]]:
    """Stored rows (None where an arm has none in the scope) as state arrays, their half-life
    decay, and the other columns."""
    n = len(rows)
    have = [i for i, row in enumerate(rows) if row is not None]
    num = np.zeros((n, len(_STATE) - 1))
    hist = np.zeros(n, dtype=np.int64)
    if have:
        got = [rows[i] for i in have]
        num[have] = np.array([row[:-1] for row in got], dtype=np.float64)
        hist[have] = np.array([row[-1] for row in got], dtype=np.int64)
    arr = {k: num[:, j] for j, k in enumerate(_STATE[:-1])}
    arr["hist"] = hist
    if len(have) < n:
        fresh = np.ones(n, dtype=bool)
        fresh[have] = False
        for k, v in _BLANK.items():
            arr[k][fresh] = v
        arr["last_index"][fresh] = index
        arr["last_ts"][fresh] = now
    if cfg.half_life_runs or cfg.half_life_days:
        decay: Any = np.array(
            [
                decay_factor(cfg, index - li, now - lt)
                for li, lt in zip(arr["last_index"].tolist(), arr["last_ts"].tolist(), strict=True)
            ]
        )
    else:
        decay = 1.0
    state = {k: arr[k] for k in (*evidence.FIELDS, "hist")}
    return state, decay, arr


#: The non-zero columns of a row that does not exist yet.
_BLANK = {"pw": 1.0, "drop_at": -1.0, "mv_from": -1.0}
#: A (scope, arm) pair gets a history point after each of its first HISTORY_DENSE updates, and
#: after every HISTORY_EVERY-th after that: the convergence chart needs the start, and a
#: point per update would be most of an observation's writes at 1,000 arms.
HISTORY_DENSE = 16
HISTORY_EVERY = 16


def _bump_scopes(tx: Tx, scopes: list[str]) -> dict[str, tuple[int, int]]:
    """Count one more observation in each scope; returns (observations, boost_until)."""
    marks = ",".join("?" * len(scopes))
    have = {
        r[0]: (int(r[1]), int(r[2]))
        for r in tx.fetchall(
            f"SELECT scope, obs, boost_until FROM bandit_scopes WHERE scope IN ({marks})", scopes
        )
    }
    out = {scope: (have.get(scope, (0, 0))[0] + 1, have.get(scope, (0, 0))[1]) for scope in scopes}
    tx.executemany(
        "INSERT INTO bandit_scopes (scope, obs, boost_until) VALUES (?, ?, ?) "
        "ON CONFLICT (scope) DO UPDATE SET obs = excluded.obs, "
        "boost_until = excluded.boost_until",
        [(scope, obs, until) for scope, (obs, until) in out.items()],
    )
    return out


def load_config(tx: Tx) -> cfgmod.BanditConfig:
    body = tx.scalar("SELECT body FROM bandit_config WHERE one = 1")
    if body is None:
        return cfgmod.BanditConfig()
    return cfgmod.from_dict(msgspec.json.decode(body))
