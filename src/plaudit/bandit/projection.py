"""The `bandit` projection: arms, config, runs and posteriors folded from `plaudit.bandit.*`
events inside the append transaction, so concurrent observers never lose an update.

Posterior rows hold *evidence* (success and failure counts, and the change detectors' state of
`evidence.py`), not alpha/beta: the prior is added when reading, so changing a prior applies to
past evidence too. The global row of each arm also holds the arm's hierarchy sums
(`hierarchy.py`) and its re-exploration window after a central drop; `bandit_scopes` counts
each scope's observations and holds its re-exploration window. One observation's arithmetic is
`fold.observe`, shared with the in-memory learner.

An observation writes O(1) rows: its run's outcome and a *pending* row (`bandit_pending`)
holding what the fold needs (`fold.Pending`). A *checkpoint* folds the pending observations
into the posterior, scope and history rows in one transaction, so no crash can leave one half
done. Where it runs depends on the backend (measured in docs/benchmarks.md):

- SQLite: the observation that makes `INLINE_EVERY` pending checkpoints in its own
  transaction. It is local work (5 to 8 ms at 40 arms under load), and on another thread it
  made in-process select and observe up to 30% slower at the median (2 of 3 interleaved
  sittings), without a served p99 at 200 req/s that runs of one tree could tell apart.
- PostgreSQL: every statement is a round trip, and the observe that completed a set of 16 took
  21 to 32 ms served (median 7), which set the served p99 at any rate. An observer that leaves
  `CHECKPOINT_EVERY` pending asks its store handle's thread for one (`trailing.py`), which runs
  it after the observe has returned; the observation that makes `CHECKPOINT_LIMIT` pending
  checkpoints itself, should that thread be slow or gone.

Where the checkpoints fall changes which observations are still pending, never what a reader
sees: `folded` applies the same arithmetic on the same rows in the same order either way, so a
rebuild reproduces every reader's state exactly, wherever the live store checkpointed.
Readers (the selection cache, `folded`) apply the pending observations on top of the rows
with `fold.apply`, the checkpoint's own arithmetic, so what they see is exact.

Optional discounting counts time in observations (log order) and in event-time days, never the
wall clock, so a rebuild reproduces the same numbers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import numpy as np

from plaudit.bandit import config as cfgmod
from plaudit.bandit import fold
from plaudit.bandit.arms import coerce_arms
from plaudit.bandit.armsets import ARMSET_V1, ArmSetPayload, check_record
from plaudit.errors import ValidationError
from plaudit.events import StoredEvent
from plaudit.store.backend import Tx

PREFIX = "plaudit.bandit."
ARMS_V1 = "plaudit.bandit.arms.v1"
CONFIG_V1 = "plaudit.bandit.config.v1"
RUN_V1 = "plaudit.bandit.run.v1"
RUN_V2 = "plaudit.bandit.run.v2"
OBSERVATION_V1 = "plaudit.bandit.observation.v1"

GLOBAL = fold.GLOBAL  # the scope of the global posterior; contexts use their label
DAY_MS = fold.DAY_MS
decay_factor = fold.decay_factor
#: SQLite: pending observations at which the observation's own transaction checkpoints: an
#: observation's posterior writes are amortised over this many.
INLINE_EVERY = 16
#: PostgreSQL: pending observations from which an observer asks for a trailing checkpoint.
#: 8 rather than 16: each holds the write lock half as long, for 2.5% more server CPU.
CHECKPOINT_EVERY = 8
#: PostgreSQL: pending observations at which the observation's own transaction checkpoints
#: (nobody asked for a trailing one: a replay, a rebuild, appends made without the bandit's
#: API; or its thread has not run). A reader applies at most this many - 1 on top of the rows.
CHECKPOINT_LIMIT = 64


#: A reward (0 or 1, as the payload's schema allows) as a character of `hits`, and back.
_BIT = {0: "0", 1: "1"}
_INT = {"0": 0, "1": 1}


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
    #: the digest of the arm set the run considered, when arms were passed with the select
    arm_set: str | None = None


class _ObservationPayload(msgspec.Struct):
    run_id: str
    #: each included arm's reward, by id: the first form, still read (see `rewards_of`)
    rewards: dict[str, Literal[0, 1]] | None = None
    #: the compact form: the included arms' ids joined by newlines, and their rewards as a
    #: string of "0" and "1" in the same order
    arms: str | None = None
    hits: str | None = None
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


def compact_rewards(arm_ids: Sequence[str], hits: str) -> dict[str, str]:
    """An observation payload's `arms` and `hits` for the included arms `arm_ids` and their
    rewards `hits` ("0" or "1" each, aligned). At 1,000 arms a dictionary entry per arm was
    most of what the log checked, hashed and stored for an observation, and the projection
    decoded and validated it entry by entry; two strings cost a fraction of that. Arm ids
    hold no control characters, so a newline separates them unambiguously."""
    return {"arms": "\n".join(arm_ids), "hits": hits}


def reward_pairs(payload: Any) -> tuple[list[str], str]:
    """(included arm ids, their rewards as "0"/"1" characters) of an observation payload in
    either form (`_ObservationPayload` or its dictionary), checked. The first form's rewards
    come in the order of its keys."""
    get = payload.get if isinstance(payload, dict) else lambda k: getattr(payload, k, None)
    rewards, arms, hits = get("rewards"), get("arms"), get("hits")
    if arms is not None or hits is not None:
        if rewards is not None:
            raise ValueError("holds both rewards and arms/hits")
        if not isinstance(arms, str) or not isinstance(hits, str):
            raise ValueError("arms and hits must both be strings")
        ids = arms.split("\n") if arms else []
        if len(ids) != len(hits) or hits.strip("01"):
            raise ValueError("hits must hold one 0 or 1 per arm of arms")
        if len(set(ids)) != len(ids):
            raise ValueError("arms holds an id twice")
        return ids, hits
    if not isinstance(rewards, dict):
        raise ValueError("needs rewards, or arms and hits")
    return list(rewards), "".join(map(_BIT.__getitem__, rewards.values()))


def rewards_of(payload: dict[str, Any]) -> dict[str, int]:
    """Each included arm's reward (0 or 1) in a stored observation payload, either form."""
    ids, hits = reward_pairs(payload)
    return dict(zip(ids, map(_INT.__getitem__, hits), strict=True))


def _decode(ev: StoredEvent, kind: type[Any]) -> Any:
    """Check an event's payload shape; a malformed event is refused, never half-applied."""
    try:
        return msgspec.convert(ev.payload, kind)
    except msgspec.ValidationError as exc:
        raise ValidationError("payload", f"{ev.type}: {exc}", where=ev.id) from None


class BanditProjection:
    name = "bandit"
    # 4: observations are pending until a checkpoint folds them (bandit_pending, and
    # bandit_meta's ckpt_index and pending). 5: recorded arm sets (bandit_armsets) and runs
    # by session. A store at an older version is migrated by the projection manager: the
    # tables are dropped and the log replayed.
    version = 5
    prefixes = (PREFIX,)
    tables = (
        "bandit_config",
        "bandit_arms",
        "bandit_runs",
        "bandit_posteriors",
        "bandit_history",
        "bandit_meta",
        "bandit_scopes",
        "bandit_pending",
        "bandit_armsets",
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
            "CREATE INDEX IF NOT EXISTS bandit_runs_session ON bandit_runs (session_id, seq)"
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_armsets (digest TEXT PRIMARY KEY, base TEXT, "
                "seq {bigint} NOT NULL)"
            )
        )
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
                "arms_seq {bigint} NOT NULL, config_seq {bigint} NOT NULL, "
                "ckpt_index {bigint} NOT NULL DEFAULT 0, pending {bigint} NOT NULL DEFAULT 0)"
            )
        )
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS bandit_pending (obs_index {bigint} PRIMARY KEY, "
                "ts_ms {bigint} NOT NULL, now {bigint} NOT NULL, context TEXT, "
                "arms TEXT NOT NULL, rewards TEXT NOT NULL)"
            )
        )
        tx.execute(
            "INSERT INTO bandit_meta (one, obs_index, last_ts, arms_seq, config_seq) "
            "VALUES (1, 0, 0, 0, 0) ON CONFLICT (one) DO NOTHING"
        )

    # -- folding --------------------------------------------------------------------------
    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        # The settings are read only when an event needs them (a config change, or the
        # observation that completes a checkpoint): most batches are one run or one
        # observation, and neither needs them, so the read is not paid per append.
        cfg: cfgmod.BanditConfig | None = None
        for ev in events:
            if ev.type == CONFIG_V1:
                cfg = self._config(tx, ev, load_config(tx) if cfg is None else cfg)
            elif ev.type == ARMS_V1:
                self._arms(tx, ev)
            elif ev.type == RUN_V1:
                self._run(tx, ev)
            elif ev.type == RUN_V2:
                self._run_v2(tx, ev)
            elif ev.type == ARMSET_V1:
                self._armset(tx, ev)
            elif ev.type == OBSERVATION_V1:
                cfg = self._observation(tx, ev, cfg)
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

    def _armset(self, tx: Tx, ev: StoredEvent) -> None:
        p = _decode(ev, ArmSetPayload)
        try:
            check_record(ev, p)
        except ValueError as exc:
            raise ValidationError("payload", f"{ev.type}: {exc}", where=ev.id) from None
        if p.base is not None and not has_armset(tx, p.base):
            raise ValidationError("base", f"no recorded arm set {p.base}", where=ev.id)
        tx.execute(
            "INSERT INTO bandit_armsets (digest, base, seq) VALUES (?, ?, ?) "
            "ON CONFLICT (digest) DO NOTHING",
            (p.digest, p.base, ev.seq),
        )

    def _run_v2(self, tx: Tx, ev: StoredEvent) -> None:
        p = _decode(ev, _RunPayloadV2)
        if len(p.p) != len(p.included):
            raise ValidationError("p", "must hold one propensity per included arm", where=ev.id)
        if p.arm_set is not None and not has_armset(tx, p.arm_set):
            raise ValidationError("arm_set", f"no recorded arm set {p.arm_set}", where=ev.id)
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

    def _observation(
        self,
        tx: Tx,
        ev: StoredEvent,
        cfg: cfgmod.BanditConfig | None,
    ) -> cfgmod.BanditConfig | None:
        """Record one observation; `cfg` is the settings in force if already read (else
        None). Returns the settings, read here if a checkpoint needed them."""
        p = _decode(ev, _ObservationPayload)
        try:
            ids, hits = reward_pairs(p)
        except ValueError as exc:
            raise ValidationError("payload", f"{ev.type}: {exc}", where=ev.id) from None
        if p.missed:  # arms the run left out that its output references fold as successes
            merged = {**dict(zip(ids, hits, strict=True)), **dict.fromkeys(p.missed, "1")}
            ids, hits = list(merged), "".join(merged.values())
        row = tx.fetchone(f"SELECT {META_COLUMNS} FROM bandit_meta WHERE one = 1")
        assert row is not None
        index, now = int(row[0]) + 1, max(int(row[1]), ev.ts_ms)
        updates = p.updates and bool(ids)
        pending = int(row[2]) + (1 if updates else 0)
        run = (ev.ts_ms, p.usage_tokens, p.duration_ms, p.error, 1 if updates else 0, p.run_id)
        queued: tuple[Any, ...] = ()
        if updates:
            arm_ids = sorted(ids)
            if arm_ids != ids:  # a registered run's arms come sorted already
                by_id = dict(zip(ids, hits, strict=True))
                hits = "".join(map(by_id.__getitem__, arm_ids))
            queued = (
                index,
                ev.ts_ms,
                now,
                p.context or None,
                msgspec.json.encode(arm_ids).decode(),
                hits,
            )
        ckpt = int(row[5])
        due = pending >= inline_limit(tx.dialect)
        if tx.writes_with and not due:
            # One statement for the three writes (PostgreSQL sends each statement on its own,
            # holding the interpreter lock): the run's outcome, the pending row, the counters.
            tx.execute(
                f"WITH r AS ({_RUN_OBSERVED} RETURNING 1)"
                + (f", q AS ({_QUEUE_PENDING} RETURNING 1) " if queued else " ")
                + _META_MOVED,
                (*run, *queued, index, now, pending),
            )
            return cfg
        tx.execute(_RUN_OBSERVED, run)
        if queued:
            tx.execute(_QUEUE_PENDING, queued)
        source = _take_offer(tx, ev.id)
        if due:
            if cfg is None:
                cfg = load_config(tx)
            given = None
            if source is not None:
                ob = None
                if updates:
                    r = np.frombuffer(hits.encode("ascii"), dtype=np.uint8) - 48.0
                    ob = fold.Pending(index, ev.ts_ms, now, p.context or None, arm_ids, r)
                given = source(cfg, ob, index, ckpt, (int(row[3]), int(row[4])))
            checkpoint(tx, cfg, given)
            ckpt = index
            tx.execute(
                "UPDATE bandit_meta SET obs_index = ?, last_ts = ?, ckpt_index = ?, pending = 0 "
                "WHERE one = 1",
                (index, now, index),
            )
        else:
            tx.execute(_META_MOVED, (index, now, pending))
        return cfg


def has_armset(tx: Tx, digest: str) -> bool:
    """Whether the log, as `tx` sees it, holds the arm set `digest` names."""
    return tx.fetchone("SELECT 1 FROM bandit_armsets WHERE digest = ?", (digest,)) is not None


_RUN_OBSERVED = (
    "UPDATE bandit_runs SET observed = 1, obs_ts_ms = ?, usage_tokens = ?, duration_ms = ?, "
    "error = ?, updated = ? WHERE run_id = ?"
)
_QUEUE_PENDING = (
    "INSERT INTO bandit_pending (obs_index, ts_ms, now, context, arms, rewards) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_META_MOVED = "UPDATE bandit_meta SET obs_index = ?, last_ts = ?, pending = ? WHERE one = 1"


#: The bandit_meta columns an observation's recording starts from, in this order.
META_COLUMNS = "obs_index, last_ts, pending, arms_seq, config_seq, ckpt_index"


def trails(dialect: str) -> bool:
    """Whether observers on this backend leave checkpoints to the trailing thread."""
    return dialect == "postgres"


def inline_limit(dialect: str) -> int:
    """Pending observations at which the observation's own transaction checkpoints."""
    return CHECKPOINT_LIMIT if trails(dialect) else INLINE_EVERY


def checkpoint_pending(tx: Tx) -> bool:
    """Checkpoint now whatever is pending, in `tx`, which must hold the log's write lock (the
    trailing checkpoint); False when nothing was. Readers see the same state before and after
    (see the module's docstring)."""
    row = tx.fetchone("SELECT obs_index, ckpt_index, pending FROM bandit_meta WHERE one = 1")
    if row is None or int(row[0]) == int(row[1]):
        return False
    if int(row[2]):
        checkpoint(tx, load_config(tx))
    tx.execute(
        "UPDATE bandit_meta SET ckpt_index = obs_index, pending = 0 WHERE one = 1",
    )
    return True


def pending_since(tx: Tx, after: int) -> list[fold.Pending]:
    """The pending observations after index `after`, in order."""
    out = []
    for index, ts_ms, now, context, arms, rewards in tx.fetchall(
        "SELECT obs_index, ts_ms, now, context, arms, rewards FROM bandit_pending "
        "WHERE obs_index > ? ORDER BY obs_index",
        (after,),
    ):
        r = np.frombuffer(rewards.encode("ascii"), dtype=np.uint8).astype(np.float64) - 48.0
        out.append(
            fold.Pending(int(index), int(ts_ms), int(now), context, msgspec.json.decode(arms), r)
        )
    return out


def read_rows(tx: Tx, scope: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """The stored rows (arm_id, *STATE) of `ids` in `scope`."""
    return [r[1:] for r in read_scopes(tx, {scope: set(ids)})]


def read_scopes(tx: Tx, touched: dict[str, set[str]]) -> list[tuple[Any, ...]]:
    """The stored rows (scope, arm_id, *STATE) of `touched` ({scope: arm ids}), every scope
    in one statement per chunk of arms (a round trip per scope cost a PostgreSQL checkpoint
    several): the rows of the scopes x the union of the arms, less those not asked for."""
    scopes = list(touched)
    arms = sorted(set().union(*touched.values())) if touched else []
    step = max(1, 400 - len(scopes))
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(arms), step):
        chunk = arms[start : start + step]
        out += tx.fetchall(
            f"SELECT scope, arm_id, {STATE_COLS} FROM bandit_posteriors "
            f"WHERE scope IN ({','.join('?' * len(scopes))}) "
            f"AND arm_id IN ({','.join('?' * len(chunk))})",
            [*scopes, *chunk],
        )
    return [r for r in out if r[1] in touched[r[0]]]


def fill(table: fold.Table, rows: list[tuple[Any, ...]]) -> None:
    """Put stored rows (arm_id, *STATE) at their arms' positions (unknown arms are skipped)."""
    pos = table.pos
    rows = [r for r in rows if r[0] in pos]
    if not rows:
        return
    at = np.fromiter((pos[r[0]] for r in rows), np.int64, len(rows))
    values = np.array([r[1:-1] for r in rows], dtype=np.float64)
    hist = np.fromiter((r[-1] for r in rows), dtype=np.int64, count=len(rows))
    table.put(at, values, hist)


def read_counts(tx: Tx, scopes: Sequence[str]) -> dict[str, list[int]]:
    """Each scope's stored [observations, boost_until] (absent scopes are left out)."""
    if not scopes:
        return {}
    marks = ",".join("?" * len(scopes))
    return {
        r[0]: [int(r[1]), int(r[2])]
        for r in tx.fetchall(
            f"SELECT scope, obs, boost_until FROM bandit_scopes WHERE scope IN ({marks})",
            list(scopes),
        )
    }


@dataclass
class Folded:
    """The rows and counts the pending observations changed, after folding them."""

    tables: dict[str, fold.Table]
    counts: dict[str, list[int]]
    points: list[tuple[Any, ...]]


def folded(tx: Tx, cfg: cfgmod.BanditConfig, *, points: bool = False) -> Folded:
    """Apply the pending observations to the stored rows they touch (read in `tx`); the rows
    of every other (scope, arm) and the counts of every other scope are as stored."""
    pend = pending_since(tx, -1)
    touched: dict[str, set[str]] = {}
    for ob in pend:
        for name in [GLOBAL] if ob.context is None else [GLOBAL, ob.context]:
            touched.setdefault(name, set()).update(ob.arms)
    tables = {name: fold.Table(sorted(ids)) for name, ids in touched.items()}
    by_scope: dict[str, list[tuple[Any, ...]]] = {name: [] for name in tables}
    for row in read_scopes(tx, touched):
        by_scope[row[0]].append(row[1:])
    for name, t in tables.items():
        fill(t, by_scope[name])
    counts = read_counts(tx, list(tables))
    out: list[tuple[Any, ...]] | None = [] if points else None
    for ob in pend:
        ctx = None if ob.context is None else tables[ob.context]
        fold.apply(cfg, tables[GLOBAL], ctx, ob, counts, out)
    return Folded(tables, counts, out or [])


@dataclass
class Checkpoint:
    """What a checkpoint writes: the rows (scope, arm_id, *STATE) the pending observations
    changed, after folding them; the counts of their scopes; their history points."""

    rows: list[tuple[Any, ...]]
    counts: dict[str, list[int]]
    points: list[tuple[Any, ...]]


#: Gives the checkpoint that the observation being recorded completes, if its observer can
#: (see `offer`): called with the settings, that observation as `fold.Pending` (None if it
#: updates nothing), its index, the last checkpoint's index and (arms_seq, config_seq).
Offer = Callable[
    [cfgmod.BanditConfig, fold.Pending | None, int, int, tuple[int, int]], Checkpoint | None
]


def offer(tx: Tx, event_id: str, source: Offer | None) -> None:
    """Let the recording of observation `event_id` in `tx` (on this thread) take the
    checkpoint it completes from `source`, the observer's cache, rather than reading and
    folding the pending observations again: at 1,000 arms that was about half of a
    checkpoint, and a checkpoint most of an observation's CPU. `source` answers only when its
    rows are exactly what `folded` would compute (see `PosteriorCache.checkpoint`); None
    withdraws the offer."""
    _offered.value = None if source is None else (tx, event_id, source)


def _take_offer(tx: Tx, event_id: str) -> Offer | None:
    got = getattr(_offered, "value", None)
    _offered.value = None
    if got is None or got[0] is not tx or got[1] != event_id:
        return None
    source: Offer = got[2]
    return source


#: Per thread: (tx, observation id, source) of `offer`.
_offered = threading.local()


def checkpoint(tx: Tx, cfg: cfgmod.BanditConfig, given: Checkpoint | None = None) -> None:
    """Fold every pending observation into the posterior, scope and history rows; `given`:
    those already computed (by the observer's cache) from the same rows and observations."""
    if given is None:
        f = folded(tx, cfg, points=True)
        rows: list[tuple[Any, ...]] = []
        for name, t in f.tables.items():
            at = np.flatnonzero(t.present)
            ids = list(t.pos)
            rows += [(name, ids[i], *row) for i, row in zip(at.tolist(), t.rows(at), strict=True)]
        given = Checkpoint(rows, f.counts, f.points)
    tx.upsert(
        "bandit_posteriors",
        _POSTERIOR_COLUMNS,
        _POSTERIOR_TYPES,
        given.rows,
        key=("scope", "arm_id"),
    )
    tx.upsert(
        "bandit_scopes",
        ("scope", "obs", "boost_until"),
        ("text", "{bigint}", "{bigint}"),
        [(name, obs, until) for name, (obs, until) in given.counts.items()],
        key=("scope",),
    )
    tx.upsert(
        "bandit_history",
        ("obs_index", "ts_ms", "scope", "arm_id", "s", "f"),
        ("{bigint}", "{bigint}", "text", "text", "{double}", "{double}"),
        given.points,
        key=("scope", "arm_id", "obs_index"),
        update=False,
    )
    tx.execute("DELETE FROM bandit_pending")


#: The per-row state after (scope, arm_id), in the order rows are read and written.
_STATE = fold.STATE
STATE_COLS = ", ".join(_STATE)


_POSTERIOR_COLUMNS = ("scope", "arm_id", *_STATE)
_WHOLE = {"pulls", "hits", "last_index", "last_ts", "hist"}
_POSTERIOR_TYPES = (
    "text",
    "text",
    *("{bigint}" if c in _WHOLE else "{double}" for c in _STATE),
)


HISTORY_DENSE = fold.HISTORY_DENSE
HISTORY_EVERY = fold.HISTORY_EVERY


def load_config(tx: Tx) -> cfgmod.BanditConfig:
    body = tx.scalar("SELECT body FROM bandit_config WHERE one = 1")
    if body is None:
        return cfgmod.BanditConfig()
    return cfgmod.from_dict(msgspec.json.decode(body))
