"""Pending observations and checkpoints: what any reader sees (rows at the last checkpoint plus
the pending observations folded on top) equals the in-memory learner and a rebuild, for any
sequence of observations, wherever a process stops and another takes over; and a store at
the previous projection version migrates."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.bandit.arms import Arm
from plaudit.bandit.config import BanditConfig
from plaudit.bandit.memory import MemoryLearner
from plaudit.bandit.projection import (
    CHECKPOINT_LIMIT,
    INLINE_EVERY,
    BanditProjection,
    compact_rewards,
)
from plaudit.events import make_event

IDS = ["file:ws:a.py", "skill:debugging:main", "tool:exec:Bash", "tool:web:Search"]
LABELS = [None, "code", "ops"]

step = st.tuples(
    st.sampled_from(LABELS),
    st.lists(st.booleans(), min_size=len(IDS), max_size=len(IDS)),  # included
    st.lists(st.booleans(), min_size=len(IDS), max_size=len(IDS)),  # referenced
    st.booleans(),  # the process stops after this step; a new one opens the store
    st.one_of(st.none(), st.permutations(range(len(IDS)))),  # rewards by id, or compact in
    # this order of the arms
)


def _observe(
    p: Plaudit,
    i: int,
    label: str | None,
    inc: list[bool],
    ref: list[bool],
    order: list[int] | None = None,
) -> None:
    """Append a run and its observation; with `order`, the observation's rewards in the
    compact form (`arms` and `hits`), its arms in that order, else by id (older versions)."""
    arms = [{"id": a, "tokens": 100, "included": bool(x)} for a, x in zip(IDS, inc, strict=True)]
    run = make_event(
        "plaudit.bandit.run.v1",
        {"arms": arms, "budget": 1000, "used_tokens": 0, "context": label},
        id=f"run-{i}",
    )
    rewards = {a: int(r) for a, r, x in zip(IDS, ref, inc, strict=True) if x}
    form: dict[str, Any] = {"rewards": rewards}
    if order is not None:
        ids = [IDS[j] for j in order if inc[j]]
        form = compact_rewards(ids, "".join(str(rewards[a]) for a in ids))
    obs = make_event(
        "plaudit.bandit.observation.v1",
        {"run_id": f"run-{i}", **form, "updates": True, "context": label},
    )
    p.log.append_batch([run, obs])


def _state(p: Plaudit) -> dict[Any, list[tuple[float, float, int]]]:
    return {
        label: [(s.alpha, s.beta, s.pulls) for s in p.bandit.posteriors(label)] for label in LABELS
    }


@given(steps=st.lists(step, min_size=1, max_size=3 * INLINE_EVERY + 3))
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_store_equals_memory_and_rebuild(steps: list[Any], posterior_table: Any) -> None:
    cfg = BanditConfig()
    kinds = [Arm(id=a, tokens=100).effective_kind for a in IDS]
    mem = MemoryLearner(IDS, kinds, cfg)
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "s.db")
        p = Plaudit.open(db)
        try:
            p.bandit.register([{"id": a, "tokens": 100} for a in IDS])
            seen = _state(p)  # a long-lived reader: its cache folds what others append
            for i, (label, inc, ref, stop, order) in enumerate(steps):
                _observe(p, i, label, inc, ref, order)
                idx = np.flatnonzero(inc)
                if len(idx):
                    mem.learn(label, idx, np.array(ref, dtype=np.float64)[idx])
                if stop:  # nothing runs after the append: a crash there is the same
                    p.close()
                    p = Plaudit.open(db)
                if i % 5 == 0:
                    seen = _state(p)
            now = _state(p)
            for label in LABELS:
                a, b = mem.posterior(label)
                got = np.array([(x[0], x[1]) for x in now[label]])
                assert np.allclose(got[:, 0], a, rtol=0, atol=1e-9), label
                assert np.allclose(got[:, 1], b, rtol=0, atol=1e-9), label
            with Plaudit.open(db) as fresh:
                assert _state(fresh) == now  # a reader that folded nothing before
            table = posterior_table(p)
            p.rebuild()
            assert posterior_table(p) == table
            assert _state(p) == now
            assert seen is not None
        finally:
            p.close()


def test_version_3_store_migrates(tmp_path: Path, posterior_table: Any) -> None:
    db = str(tmp_path / "v3.db")
    with Plaudit.open(db) as p:
        p.bandit.register([{"id": a, "tokens": 100} for a in IDS])
        for i in range(INLINE_EVERY + 5):
            _observe(p, i, LABELS[i % 3], [True] * 4, [i % 2 == 0, True, False, i % 3 == 0])
        want, table = _state(p), posterior_table(p)
        # the version 3 schema: no pending table, no checkpoint columns
        with p.backend.write() as tx:
            tx.execute("DROP TABLE bandit_pending")
            tx.execute("ALTER TABLE bandit_meta DROP COLUMN ckpt_index")
            tx.execute("ALTER TABLE bandit_meta DROP COLUMN pending")
            tx.execute("UPDATE plaudit_projections SET version = 3 WHERE name = 'bandit'")
    with Plaudit.open(db) as p:
        assert _state(p) == want
        assert posterior_table(p) == table
        with p.backend.read() as tx:
            v = tx.scalar("SELECT version FROM plaudit_projections WHERE name = 'bandit'")
            pending = tx.scalar("SELECT COUNT(*) FROM bandit_pending")
        assert v == BanditProjection.version and pending == 5


@given(
    plan=st.lists(
        st.tuples(st.booleans(), st.sampled_from(LABELS), st.integers(0, 2**16)),
        min_size=1,
        max_size=2 * INLINE_EVERY + 3,
    )
)
@settings(max_examples=15, deadline=None)
def test_an_observers_own_cache_stays_exact(plan: list[Any]) -> None:
    """`observe` folds its own committed observation into its process's cache when the cache
    is just before it. Another writer's observation between a select and its observe (a second
    store handle, with its own cache), and checkpoints, must leave both handles exactly where a
    fresh reader is."""

    def run(p: Plaudit, label: str | None, seed: int) -> tuple[Any, str, list[dict]]:
        sel = p.bandit.select(token_budget=250, context=label, seed=seed)
        return sel, "a.py" if seed % 2 else "debugging", [{"name": "Bash"}] if seed % 3 else []

    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "s.db")
        with Plaudit.open(db) as a, Plaudit.open(db) as b:
            a.bandit.register([{"id": x, "tokens": 100} for x in IDS])
            for between, label, seed in plan:
                sel, text, calls = run(a, label, seed)
                if between:
                    other, other_text, other_calls = run(b, LABELS[seed % 3], seed + 1)
                    b.bandit.observe(other.run_id, other_text, other_calls)
                a.bandit.observe(sel.run_id, text, calls)
                with Plaudit.open(db) as fresh:
                    want = _state(fresh)
                assert _state(a) == want
                assert _state(b) == want


def test_an_observer_folds_its_own_checkpoint_without_reading_it_back(monkeypatch: Any) -> None:
    """The observation that completes a checkpoint is folded into its writer's cache like any
    other (the checkpoint wrote the same values), so a lone writer never reads rows back; and
    its cache stays exactly where a fresh reader is."""
    from plaudit.bandit.posteriors import PosteriorCache

    def refuse(*_: Any) -> None:
        raise AssertionError("the cache read back rows its own checkpoint wrote")

    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "s.db")
        with Plaudit.open(db) as p:
            p.bandit.register([{"id": x, "tokens": 100} for x in IDS])
            p.bandit.posteriors()  # the cache holds the global scope from here on
            monkeypatch.setattr(PosteriorCache, "_changed_since", refuse)
            for i in range(2 * INLINE_EVERY + 3):
                label = LABELS[i % 3]
                sel = p.bandit.select(token_budget=250, context=label, seed=i)
                p.bandit.observe(sel.run_id, "a.py debugging" if i % 4 else "", [])
                with Plaudit.open(db) as fresh:
                    assert _state(p) == _state(fresh)


def test_where_checkpoints_run_and_that_readers_cannot_tell(
    db_url: str, posterior_table: Any, monkeypatch: Any
) -> None:
    """PostgreSQL: once `CHECKPOINT_EVERY` observations are pending, the observer's trailing
    thread folds them in a transaction of its own, and no observe checkpoints inside its own.
    SQLite: the observation that makes `INLINE_EVERY` pending checkpoints itself. Either way
    the pending rows stay bounded and what readers see equals a rebuild."""
    import threading

    from plaudit.bandit import projection

    where: list[str] = []
    real = projection.checkpoint

    def spy(tx: Any, cfg: Any, given: Any = None) -> None:
        where.append(threading.current_thread().name)
        real(tx, cfg, given)

    monkeypatch.setattr(projection, "checkpoint", spy)
    trails = db_url.startswith("postgresql")
    with Plaudit.open(db_url) as p:
        p.bandit.register([{"id": a, "tokens": 100} for a in IDS])
        most = 0
        for i in range(3 * INLINE_EVERY + 5):
            sel = p.bandit.select(token_budget=250, context=LABELS[i % 3], seed=i)
            p.bandit.observe(sel.run_id, "a.py debugging" if i % 4 else "Bash", [])
            with p.backend.read() as tx:
                most = max(most, int(tx.scalar("SELECT COUNT(*) FROM bandit_pending")))
        trailing = p.bandit._trailing
        if trails:
            assert trailing is not None
            deadline = time.monotonic() + 10
            while trailing.runs < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert trailing.runs >= 3
            assert where and set(where) == {"plaudit-bandit-checkpoint"}
            assert most < CHECKPOINT_LIMIT
        else:
            assert trailing is None
            assert len(where) == 3 and set(where) == {threading.current_thread().name}
            assert most == INLINE_EVERY - 1
        want = posterior_table(p)
        p.rebuild()
        assert posterior_table(p) == want


def _raw_state(p: Plaudit) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the projection keeps for posteriors, exactly (no rounding)."""
    out = {}
    with p.backend.read() as tx:
        for table, key in (
            ("bandit_posteriors", "scope, arm_id"),
            ("bandit_history", "scope, arm_id, obs_index"),
            ("bandit_scopes", "scope"),
            ("bandit_pending", "obs_index"),
            ("bandit_meta", "one"),
        ):
            out[table] = [tuple(r) for r in tx.fetchall(f"SELECT * FROM {table} ORDER BY {key}")]
    return out


MORE = [*IDS, "file:ws:b.md", "tool:exec:Read", "section:sys:rules", "skill:ops:deploy"]
OUTPUTS = [
    "",
    "a.py and b.md while debugging",
    "Bash then Read; deploy to ops",
    "nothing useful",
    "debugging a.py; ops deploy notes in b.md",
]


_CACHE_STEP = st.tuples(
    st.sampled_from(LABELS),
    st.integers(0, len(OUTPUTS) - 1),
    st.integers(0, 1),  # which of two handles selects and observes
    st.sampled_from([None, 150, 400, 100_000]),  # budget (None: explicit arms)
    st.booleans(),  # reopen that handle afterwards
)


def _cache_checkpoints(steps: list[Any]) -> list[bool]:
    """Run `steps`; check that every stored row equals a rebuild's; return, per checkpoint,
    whether it was written from the observer's cache."""
    from plaudit.bandit import projection

    given_: list[bool] = []
    real = projection.checkpoint

    def spy(tx: Any, cfg: Any, given: Any = None) -> None:
        given_.append(given is not None)
        real(tx, cfg, given)

    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "c.db")
        handles = [Plaudit.open(db), Plaudit.open(db)]
        projection.checkpoint = spy  # type: ignore[assignment]
        try:
            handles[0].bandit.register([{"id": a, "tokens": 100} for a in MORE[:-1]])
            for i, (label, out, who, budget, reopen) in enumerate(steps):
                b = handles[who].bandit
                if budget is None:  # explicit arms: the last one is registered by this run
                    sel = b.select([{"id": a, "tokens": 100} for a in MORE], 100_000, label, i)
                else:
                    sel = b.select(token_budget=budget, context=label, seed=i)
                b.observe(sel.run_id, OUTPUTS[out], [{"name": "Bash"}] if out == 2 else [])
                if reopen:
                    handles[who].close()
                    handles[who] = Plaudit.open(db)
            live, used = _raw_state(handles[0]), list(given_)
            handles[0].rebuild()  # (its checkpoints have no cache to take rows from)
            assert _raw_state(handles[0]) == live
        finally:
            projection.checkpoint = real  # type: ignore[assignment]
            for h in handles:
                h.close()
    return used


@given(steps=st.lists(_CACHE_STEP, min_size=1, max_size=3 * INLINE_EVERY + 3))
@settings(max_examples=15, deadline=None)
def test_checkpoints_written_from_the_observers_cache_equal_a_rebuild(steps: list[Any]) -> None:
    """SQLite: the observation that completes a checkpoint writes it from its own process's
    cache (`PosteriorCache.checkpoint`) when that holds exactly the rows needed. Whatever the
    sequence (two handles observing in turn, so each cache folds the other's observations;
    misses; runs with explicit arms that register a new one; handles closed and reopened),
    every stored row (evidence, detectors, sums, history, scope counts, pending) equals what
    a rebuild, which replays without any cache, writes; with no new registry between, every
    checkpoint took the cache's path."""
    given_ = _cache_checkpoints(steps)
    if all(s[3] is not None for s in steps):
        assert all(given_)


def test_a_long_run_of_observations_checkpoints_from_the_cache() -> None:
    """The same, for a fixed sequence long enough for several checkpoints."""
    steps = [
        (LABELS[i % 3], i % len(OUTPUTS), (i // 3) % 2, [150, 400, 100_000][i % 3], i % 17 == 5)
        for i in range(4 * INLINE_EVERY + 3)
    ]
    given_ = _cache_checkpoints(steps)
    assert len(given_) >= 3 and all(given_)


def test_postgres_observations_appended_directly_checkpoint_at_the_limit(
    pg_url: str, posterior_table: Any
) -> None:
    """Appends made without the bandit API ask no thread for a checkpoint: on PostgreSQL the
    observation that makes `CHECKPOINT_LIMIT` pending checkpoints itself, and a rebuild
    agrees with what readers saw."""
    with Plaudit.open(pg_url) as p:
        p.bandit.register([{"id": a, "tokens": 100} for a in IDS])
        for i in range(CHECKPOINT_LIMIT + 6):
            _observe(p, i, LABELS[i % 3], [True] * 4, [i % 2 == 0, True, False, i % 3 == 0])
        with p.backend.read() as tx:
            pending = int(tx.scalar("SELECT COUNT(*) FROM bandit_pending"))
        assert pending == 6 and p.bandit._trailing is None
        want = posterior_table(p)
        p.rebuild()
        assert posterior_table(p) == want


def test_a_select_that_reads_one_row_equals_a_fresh_readers(db_url: str) -> None:
    """Two handles select and observe in a random order. A select whose cache one row shows
    current (`PosteriorCache.settle`) reads nothing more; it must choose exactly as a handle
    opened afresh does with the same seed, and so must one whose cache another handle made
    stale. Both kinds of select happen here."""
    import random

    from plaudit.bandit import posteriors

    outcomes: list[bool] = []
    settle = posteriors.PosteriorCache.settle

    def counted(self: Any, meta: Any, scopes: Any) -> bool:
        got = settle(self, meta, scopes)
        outcomes.append(got)
        return got

    rng = random.Random(7)
    ids = [f"tool:t:n{i}" for i in range(12)]
    a, b = Plaudit.open(db_url), Plaudit.open(db_url)
    try:
        a.bandit.register([{"id": i, "tokens": 100 + 10 * k} for k, i in enumerate(ids)])
        posteriors.PosteriorCache.settle = counted  # type: ignore[method-assign]
        for step in range(60):
            me = rng.choice((a, b))
            context = rng.choice((None, "code", "ops"))
            seed = rng.randrange(10**6)
            sel = me.bandit.select(token_budget=700, context=context, seed=seed)
            with Plaudit.open(db_url) as fresh:
                again = fresh.bandit.select(token_budget=700, context=context, seed=seed)
            assert (sel.included, sel.probabilities, sel.is_baseline) == (
                again.included,
                again.probabilities,
                again.is_baseline,
            ), step
            used = [{"name": i.rsplit(":", 1)[1]} for i in sel.included if rng.random() < 0.5]
            rng.choice((a, b)).bandit.observe(sel.run_id, "done", tool_calls=used)
    finally:
        posteriors.PosteriorCache.settle = settle  # type: ignore[method-assign]
        a.close()
        b.close()
    assert True in outcomes and False in outcomes


def test_arms_and_observations_in_one_transaction_equal_a_rebuild(
    db_url: str, posterior_table: Any
) -> None:
    """Arms (which move `arms_seq`) and two observations recorded in one transaction, each
    from the bandit_meta row the one before left: every state table equals a rebuild's."""
    from plaudit.bandit import projection

    with Plaudit.open(db_url) as p:
        p.bandit.register([{"id": a, "tokens": 100} for a in IDS])
        for i in range(3):
            sel = p.bandit.select(seed=i)
            p.bandit.observe(sel.run_id, "Bash")
        runs = [p.bandit.select(seed=10 + i).run_id for i in range(2)]

        def obs(run_id: str) -> Any:
            return make_event(
                "plaudit.bandit.observation.v1",
                {"run_id": run_id, "rewards": {IDS[2]: 1}, "updates": True, "context": None},
                id=f"obs:{run_id}",
            )

        def fn(w: Any) -> None:
            w.append(
                make_event("plaudit.bandit.arms.v1", {"arms": [{"id": "tool:x:New", "tokens": 5}]})
            )
            w.append(obs(runs[0]))
            w.append(obs(runs[1]))

        p.log.run(fn)
        meta = p.backend.read
        with meta() as tx:
            before = tx.fetchone(f"SELECT {projection.META_COLUMNS} FROM bandit_meta")
        table = posterior_table(p)
        p.rebuild()
        with meta() as tx:
            assert tx.fetchone(f"SELECT {projection.META_COLUMNS} FROM bandit_meta") == before
        assert posterior_table(p) == table
        assert before[0] == 5  # five observations recorded, each counted once


def test_a_cache_stops_tracing_when_nothing_checkpoints(monkeypatch: Any) -> None:
    """With no checkpoint for a long while, the cache stops keeping what each fold changed
    (its memory stays bounded); the next checkpoint then reads and folds the pending rows,
    the one after that is written from the cache again, and a rebuild agrees throughout."""
    from plaudit.bandit import posteriors, projection

    given_: list[bool] = []
    real = projection.checkpoint

    def spy(tx: Any, cfg: Any, given: Any = None) -> None:
        given_.append(given is not None)
        real(tx, cfg, given)

    monkeypatch.setattr(projection, "checkpoint", spy)
    monkeypatch.setattr(posteriors, "_TRACED_MAX", 24)
    monkeypatch.setattr(projection, "INLINE_EVERY", 15)
    with tempfile.TemporaryDirectory() as d, Plaudit.open(str(Path(d) / "t.db")) as p:
        p.bandit.register([{"id": a, "tokens": 100} for a in MORE[:-1]])
        for i in range(2 * 15):
            # labelled observations trace two scopes each, unlabelled ones one
            label = LABELS[1 + i % 2] if i < 15 else None
            sel = p.bandit.select(token_budget=100_000, context=label, seed=i)
            p.bandit.observe(sel.run_id, OUTPUTS[i % len(OUTPUTS)], [])
            if i == 13:  # 14 labelled observations: 28 traced folds, over the bound
                assert p.bandit._cache.since is None
        assert given_ == [False, True]
        live = _raw_state(p)
        p.rebuild()
        assert _raw_state(p) == live


def test_a_checkpoint_between_select_and_observe_keeps_the_cache_current(db_url: str) -> None:
    """Another writer checkpoints what this handle has folded while it waits between a select
    and its observe (on PostgreSQL that is the trailing thread's usual timing). The observe
    still folds itself into the cache (so the next select reads one row), and the cache stays
    exact: the next select equals a fresh handle's with the same seed."""
    from plaudit.bandit import projection

    ids = [f"tool:t:n{i}" for i in range(8)]
    with Plaudit.open(db_url) as a, Plaudit.open(db_url) as other:
        a.bandit.register([{"id": i, "tokens": 100} for i in ids])
        for k in range(12):
            sel = a.bandit.select(token_budget=500, context="code", seed=k)
            if k % 3 == 2:
                with other.log.writer() as w:
                    assert projection.checkpoint_pending(w.tx)
            used = [{"name": i.rsplit(":", 1)[1]} for i in sel.included[: k % 4]]
            a.bandit.observe(sel.run_id, "done", tool_calls=used)
            cache = a.bandit._cache
            with a.backend.read() as tx:
                meta = cache.read_meta(tx)
            assert cache.folded == int(meta[0]), k  # folded by the observe itself
            nxt = a.bandit.select(token_budget=500, context="code", seed=100 + k)
            with Plaudit.open(db_url) as fresh:
                again = fresh.bandit.select(token_budget=500, context="code", seed=100 + k)
            assert (nxt.included, nxt.probabilities) == (again.included, again.probabilities)
            a.bandit.observe(nxt.run_id, "done")
