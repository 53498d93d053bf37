"""`Plaudit.bandit`: select prompt components with Thompson sampling, record every run and
observation in the log, and learn from reference-detected rewards."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import numpy as np

from plaudit.bandit import armsets, fold, guidance, policy, posteriors, projection
from plaudit.bandit import config as cfgmod
from plaudit.bandit.arms import Arm, coerce_arms, parse_arm_id
from plaudit.bandit.armsets import ArmLists, Listed, changed_arms
from plaudit.bandit.detect import inventory_index, referenced_arms
from plaudit.bandit.projection import (
    ARMS_V1,
    CONFIG_V1,
    GLOBAL,
    OBSERVATION_V1,
    RUN_V1,
    RUN_V2,
    load_config,
)
from plaudit.bandit.results import ArmStats, Observation, Selection
from plaudit.bandit.savings import MAX_POINTS, _thin, summarise
from plaudit.bandit.stats import IntervalMemo, confidence_tier, mean, variance
from plaudit.bandit.trailing import Trailing
from plaudit.errors import ConflictError, NotFoundError, ValidationError
from plaudit.events import make_event
from plaudit.ids import uuid7
from plaudit.store.log import AppendResult
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit

MAX_OUTPUT_CHARS = 16 << 20
#: Selections a handle remembers for their observe (see `Bandit._selected`).
_SELECTED_KEEP = 256
#: Included arms from which observe reads references through the inventory's index (one
#: scan of the output) rather than arm by arm, when it does not search for misses anyway.
_INDEXED_FROM = 64
MAX_TOOL_CALLS = 10_000
MAX_BUDGET = 100_000_000
_LABEL_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


def _check_context(context: Any) -> str | None:
    if context is None:
        return None
    if not isinstance(context, str) or not _LABEL_RE.match(context):
        raise ValidationError(
            "context", "must be a string of 1-200 printable characters, or omitted"
        )
    return context


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValidationError(name, f"must be an integer, got {type(value).__name__}")
    if not lo <= int(value) <= hi:
        raise ValidationError(name, f"{value} is not between {lo} and {hi}")
    return int(value)


def _check_opt_int(name: str, value: Any, lo: int, hi: int) -> int | None:
    return None if value is None else _check_int(name, value, lo, hi)


def _check_tool_calls(tool_calls: Any) -> list[dict[str, Any]]:
    if tool_calls is None:
        return []
    if isinstance(tool_calls, str | bytes | Mapping) or not isinstance(tool_calls, Iterable):
        raise ValidationError("tool_calls", "must be a list of objects with a 'name'")
    out = []
    for i, call in enumerate(tool_calls):
        if type(call) is not dict:  # a plain dict is taken as it is (the usual case)
            if not isinstance(call, Mapping):
                raise ValidationError(
                    "tool_calls", f"must be an object, got {type(call).__name__}", where=f"[{i}]"
                )
            call = dict(call)
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError("tool_calls", "needs a non-empty string 'name'", where=f"[{i}]")
        out.append(call)
        if len(out) > MAX_TOOL_CALLS:
            raise ValidationError("tool_calls", f"more than {MAX_TOOL_CALLS} calls")
    return out


def _fill_share(inp: policy.PolicyInput) -> np.ndarray:
    """Inclusion chance in a random-order fill of a budget the inventory overflows: the share
    of the free arms' tokens that fits (protected arms are always in). An approximation,
    recorded for baseline runs only; estimators use the exact propensities of selected runs."""
    free = inp.tokens[~inp.protected]
    room = max(inp.budget - int(inp.tokens[inp.protected].sum()), 0)
    share = min(1.0, room / max(int(free.sum()), 1))
    return np.where(inp.protected, 1.0, max(share, 1e-6))


def _excluded(ids: list[str], included: np.ndarray, id_array: np.ndarray) -> list[str]:
    """The excluded ids (`id_array`: the same ids as an object array, for large lists)."""
    if len(ids) > 256:
        return id_array[~included].tolist()
    return [ids[i] for i in np.flatnonzero(~included)]


def _rounded(values: list[float]) -> list[float]:
    """`round(v, 6)` of each value. A run's propensities take few distinct values (1 for the
    core, the exploration chances), and Python's correctly rounded `round` costs about a
    microsecond a call, so each distinct value is rounded once."""
    seen: dict[float, float] = {}
    out = []
    for v in values:
        r = seen.get(v)
        if r is None or v == 0.0:  # 0.0 and -0.0 are one key but round to themselves
            r = seen[v] = round(v, 6)
        out.append(r)
    return out


class _Drawn(NamedTuple):
    included: np.ndarray
    probs: np.ndarray
    is_baseline: bool
    #: what the run would have sent without the bandit (see `savings`)
    counterfactual: np.ndarray
    rate: float


def _draw(
    cfg: cfgmod.BanditConfig, inp: policy.PolicyInput, rng: np.random.Generator, budget: int
) -> _Drawn:
    """One run's arms: a baseline (every arm that fits) with probability `baseline_rate`,
    else the policy's plan drawn; and each arm's propensity."""
    n = len(inp.tokens)
    rate = cfg.rate_for(n)
    fits = int(inp.tokens.sum()) <= budget
    if cfg.phase == "passive":
        included, is_baseline = policy.baseline(inp, rng), False
        probs = np.ones(n) if fits else _fill_share(inp)
    else:
        is_baseline = bool(rng.random() < rate)
        if is_baseline:
            included = policy.baseline(inp, rng)
            probs = np.ones(n) if fits else _fill_share(inp)
        else:
            plan = policy.plan(inp)
            included = policy.draw(plan, rng)
            probs = plan.propensities
    # The full inventory when it fits, else a random-order fill (policy.baseline); a
    # baseline run is its own counterfactual.
    counterfactual = included if is_baseline else policy.baseline(inp, rng)
    return _Drawn(included, probs, is_baseline, counterfactual, rate)


def _policy_record(
    cfg: cfgmod.BanditConfig, tokens: np.ndarray, budget: int, rate: float
) -> dict[str, Any]:
    """The policy parameters a run event records."""
    return {
        "threshold": cfg.threshold,
        "miss_cost": policy_miss_cost(cfg, tokens, budget),
        "core_level": cfg.core_level,
        "proof_level": cfg.proof_level,
        "explore_floor": cfg.explore_floor,
        "explore_max": cfg.explore_max,
        "min_pulls": cfg.min_pulls,
        "baseline_rate": rate,
        "context_pseudo_count": cfg.context_pseudo_count,
        "drift": cfg.drift,
    }


def policy_miss_cost(cfg: cfgmod.BanditConfig, tokens: np.ndarray, budget: int) -> float | None:
    return cfg.miss_cost(int(tokens.sum()), budget)


def _outcome(payload: Mapping[str, Any]) -> dict[str, Any]:
    """An observation payload with its rewards in one form, for comparing: a run observed by
    an older version (rewards by id) and observed again now (`compact_rewards`) with the
    same outcome is the same observation."""
    out = {k: v for k, v in payload.items() if k not in ("rewards", "arms", "hits")}
    out["rewards"] = projection.rewards_of(dict(payload))
    out["missed"] = list(out.get("missed", ()))
    return out


def _by_id(
    included: list[str], hit: np.ndarray, at: np.ndarray | None
) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """`included`, its rewards `hit` and registry positions `at` in the order of the ids, as
    an observation records them and the fold takes them. A registered run's arms come in
    registry order, which is that order; a list passed with the select comes as given, and
    the registry positions sort it without comparing strings."""
    if at is not None:
        if at.size < 2 or bool((at[1:] > at[:-1]).all()):
            return included, hit, at
        order = np.argsort(at, kind="stable")
        return [included[i] for i in order.tolist()], hit[order], at[order]
    ids = sorted(included)
    if ids == included:
        return included, hit, None
    by_id = dict(zip(included, hit.tolist(), strict=True))
    return ids, np.fromiter((by_id[a] for a in ids), dtype=bool, count=len(ids)), None


#: The most runs `Bandit.runs` returns at once.
MAX_RUNS_LISTED = 1000
_RUN_COLUMNS = (
    "run_id, seq, ts_ms, session_id, context, is_baseline, phase, budget, used_tokens, "
    "considered_tokens, baseline_tokens, included, observed, usage_tokens, duration_ms, "
    "error, updated"
)


def _run_listed(r: Sequence[Any]) -> dict[str, Any]:
    """A run as `Bandit.runs` lists it: its record, how many arms it included, and its
    outcome once observed."""
    out = {
        "run_id": r[0],
        "seq": int(r[1]),
        "ts_ms": int(r[2]),
        "session_id": r[3],
        "context": r[4],
        "is_baseline": bool(r[5]),
        "phase": r[6],
        "budget": int(r[7]),
        "used_tokens": int(r[8]),
        "inventory_tokens": int(r[9]),
        "baseline_tokens": None if r[10] is None else int(r[10]),
        "included": len(msgspec.json.decode(r[11])),
        "observed": bool(r[12]),
    }
    if out["observed"]:
        out["usage_tokens"] = None if r[13] is None else int(r[13])
        out["duration_ms"] = None if r[14] is None else float(r[14])
        out["error"] = r[15]
        out["updated"] = bool(r[16])
    return out


def _repeated(
    w: Any, res: AppendResult, oid: str, run_id: str, payload: dict[str, Any]
) -> dict[str, Any] | None:
    """The stored payload of observation `oid`, which `res` found recorded already, with
    this outcome (possibly with rewards by id, by an older version); a different outcome
    raises ConflictError."""
    stored = w.get(oid)
    if res.status == "conflict" and (
        stored is None or _outcome(stored.payload) != _outcome(payload)
    ):
        raise ConflictError(oid, f"run {run_id!r} was already observed with a different outcome")
    return None if stored is None else dict(stored.payload)


def _observation_id(run_id: str) -> str:
    oid = f"obs:{run_id}"
    return oid if len(oid) <= 200 else "obs:" + hashlib.sha256(run_id.encode()).hexdigest()


class Bandit:
    """The context bandit over one store. Thread-safe: every call is its own transaction."""

    def __init__(self, plaudit: Plaudit) -> None:
        self.p = plaudit
        self._ready = False
        self._cache = posteriors.PosteriorCache()
        #: The arm lists passed to `select` and the arm sets recorded (see `armsets.py`).
        self._lists = ArmLists()
        #: The parsed settings and the `bandit_meta.config_seq` they were read at (see
        #: `_config_at`).
        self._settings: tuple[int, cfgmod.BanditConfig] | None = None
        self._trailing: Trailing | None = None
        #: This handle's recent selections over the registry, by run id: the run row's
        #: `included` text, those ids (the registry's own strings) and their registry
        #: positions, and the registry (`Registry.arms`) they index. `observe` takes them
        #: instead of decoding the row's 880 ids at 1,000 arms and looking each up again.
        self._selected: dict[str, tuple[str, list[str], np.ndarray, Any]] = {}
        self._intervals = IntervalMemo()
        #: The last savings summary per context and the log length it was read at: it reads
        #: every active run (about 2.7 CPU-µs each), and a dashboard asks every 5 s.
        self._savings: dict[str | None, tuple[int, dict[str, Any]]] = {}

    # -- plumbing ----------------------------------------------------------------------
    def _checkpoint_soon(self) -> None:
        """Fold the pending observations after this observe, on the trailing thread."""
        if self._trailing is None:
            self._trailing = Trailing(self.p.log)
            self.p.backend.on_close.insert(0, self._trailing.close)
        self._trailing.request()

    def _ensure(self) -> None:
        if not self._ready:
            self.p.log.ensure_projection("bandit")
            self._ready = True

    def warm(self) -> None:
        """Load what a select needs first (the bandit's modules, its settings, the registry,
        the global scope's rows), so that a server's first request does not pay for it: with
        requests queued behind it, that cost sets a served run's first latencies (a first
        select took 113 ms served against 3 for the next: bench/http_first.py)."""
        self._ensure()
        cache = self._cache
        with self.p.backend.read() as tx, cache.lock:
            cache.refresh(tx)
            cache.scope(tx, GLOBAL)
        np.random.default_rng(0)  # imports numpy.random (18 ms)

    @property
    def config(self) -> cfgmod.BanditConfig:
        self._ensure()
        with self.p.backend.read() as tx:
            return load_config(tx)

    def _config_at(self, tx: Any, config_seq: int) -> cfgmod.BanditConfig:
        """The settings `tx` sees, given the `bandit_meta.config_seq` it read: parsed again
        only when that moved. Every settings event moves it (whichever process or handle
        appends it, and a rebuild replays the same events to the same positions), so a
        settings row is never taken for another; this saves reading and decoding the row
        on every observation."""
        held = self._settings
        if held is not None and held[0] == config_seq:
            return held[1]
        cfg = load_config(tx)
        self._settings = (config_seq, cfg)  # one assignment: threads see old or new, whole
        return cfg

    def configure(self, changes: Mapping[str, Any] | None = None, **kw: Any) -> cfgmod.BanditConfig:
        """Change settings (see `BanditConfig`); recorded as an event, so replay honours it."""
        all_changes = {**(changes or {}), **kw}
        cfgmod.validate_changes(all_changes)
        if all_changes:
            self.p.log.append(make_event(CONFIG_V1, {"changes": all_changes}, source="bandit"))
        return self.config

    def _registered(self, tx: Any, ids: Sequence[str] | None = None) -> dict[str, Arm]:
        if ids is None:  # in id order as Python sorts, whatever the database's collation
            rows = sorted(tx.fetchall("SELECT id, tokens, content, kind FROM bandit_arms"))
        else:
            rows = []
            for i in range(0, len(ids), 400):
                chunk = list(ids[i : i + 400])
                marks = ",".join("?" * len(chunk))
                rows += tx.fetchall(
                    f"SELECT id, tokens, content, kind FROM bandit_arms WHERE id IN ({marks})",
                    chunk,
                )
        return {r[0]: Arm(id=r[0], tokens=int(r[1]), content=r[2], kind=r[3]) for r in rows}

    def register(self, arms: Iterable[Arm | Mapping[str, Any]]) -> list[Arm]:
        """Add or update arms (token cost, content, kind). Unchanged arms write nothing."""
        arms = coerce_arms(arms)
        self._ensure()
        self.p.log.run(lambda w: self._register_in(w, arms))
        return arms

    def _register_in(self, w: Any, arms: list[Arm]) -> None:
        changed = changed_arms(arms, self._registered(w.tx, [a.id for a in arms]))
        if changed:
            w.append(make_event(ARMS_V1, {"arms": [a.to_dict() for a in changed]}, source="bandit"))

    # -- selection ---------------------------------------------------------------------
    def select(
        self,
        arms: Iterable[Arm | Mapping[str, Any]] | None = None,
        token_budget: int = 8000,
        context: str | None = None,
        seed: int | None = None,
        *,
        session_id: str = "default",
    ) -> Selection:
        """Choose the arms for one run and record the run in the log.

        `arms=None` considers every registered arm. Arms passed here that are new or changed
        are registered with the run; a list passed again costs what changed in it (see
        `armsets.py`). `seed` makes the choice reproducible.
        """
        token_budget = _check_int("token_budget", token_budget, 0, MAX_BUDGET)
        context = _check_context(context)
        seed = _check_opt_int("seed", seed, 0, 2**53 - 1)
        listed = None if arms is None else self._lists.listed(arms)
        self._ensure()
        cfg, reg, reg_seq, inp = self._policy_input(context, token_budget, listed)
        ids = reg.ids if listed is None else listed.ids
        rng = np.random.default_rng(seed)
        drawn = _draw(cfg, inp, rng, token_budget)
        included, probs = drawn.included, drawn.probs
        tokens = inp.tokens
        run_id = uuid7()
        used = int(tokens[included].sum())
        inc = np.flatnonzero(included)
        id_array = reg.id_array if listed is None else listed.id_array
        # the ids' own strings, by the faster route for the count
        included_ids = id_array[inc].tolist() if len(inc) > 64 else [ids[i] for i in inc.tolist()]
        p_inc = _rounded(probs[inc].tolist())
        payload: dict[str, Any] = {
            "context": context,
            "budget": token_budget,
            "is_baseline": drawn.is_baseline,
            "phase": cfg.phase,
            "used_tokens": used,
            "inventory_tokens": int(tokens.sum()),
            "baseline_tokens": int(tokens[drawn.counterfactual].sum()),
            "considered": len(ids),
            "seed": seed,
            "policy": _policy_record(cfg, tokens, token_budget, drawn.rate),
            "included": included_ids,
            "p": p_inc,
        }
        if listed is not None:
            payload["arm_set"] = listed.digest
        self._record_run(run_id, payload, session_id, listed, reg, reg_seq)
        at = inc if listed is None else listed.positions(reg.index, reg)[inc]
        if bool((at >= 0).all()):
            selected = self._selected
            while len(selected) >= _SELECTED_KEEP:  # runs never observed: the oldest go
                selected.pop(next(iter(selected), ""), None)
            text = msgspec.json.encode(included_ids).decode()  # as the run row holds them
            selected[run_id] = (text, included_ids, at, reg.arms)
        types = reg.types if listed is None else listed.types(reg)
        return Selection(
            run_id=run_id,
            included=included_ids,
            excluded=_excluded(ids, included, id_array),
            is_baseline=drawn.is_baseline,
            used_tokens=used,
            budget=token_budget,
            context=context,
            phase=cfg.phase,
            probabilities=dict(zip(included_ids, p_inc, strict=True)),
            guidance=guidance.note(id_array, ~included, types),
        )

    def _record_run(
        self,
        run_id: str,
        payload: dict[str, Any],
        session_id: str,
        listed: Listed | None,
        reg: Any,
        reg_seq: int | None,
    ) -> None:
        """Append the run event; with a passed list, first register what it changes and
        record its arm set if the log does not hold it yet."""
        records: list[Any] = []

        def write(w: Any) -> None:
            if listed is not None:
                self._register_listed(w, listed, reg, reg_seq)
                if not self._lists.known(listed.digest) and not projection.has_armset(
                    w.tx, listed.digest
                ):
                    records[:] = self._lists.records(listed, session_id)
                    for ev in records:
                        w.append_batch([ev], on_conflict="skip")
            w.append(make_event(RUN_V2, payload, id=run_id, session_id=session_id, source="bandit"))

        # Group-committed: a served store's concurrent selects and observes share one commit.
        # Unflushed: a run that power loss took away was never observed, so nothing learnt
        # from it is lost; its observation's flushed commit makes the run durable too (see
        # docs/bandit.md, "Durability"). A killed process keeps it at once.
        self.p.log.run(write, durable=False)
        if listed is not None:  # committed: later sets may be recorded as changes to it
            self._lists.recorded(listed, records)

    def _policy_input(
        self, context: str | None, budget: int, listed: Listed | None
    ) -> tuple[cfgmod.BanditConfig, Any, int | None, policy.PolicyInput]:
        """The settings, the registry, its arms event position and the policy's input, from
        the cache brought to the log's current state."""
        cache = self._cache

        def policy_input(tx: Any) -> tuple[Any, Any, int | None, policy.PolicyInput]:
            cfg = cache.cfg
            reg = cache.registry  # the one the policy input is over (another may replace it)
            if listed is None:
                if not reg.ids:
                    raise ValidationError("arms", "none given and none registered")
                inp = cache.policy_input(tx, context, cfg, budget)
            else:
                at = listed.positions(reg.index, reg)
                inp = cache.policy_input(
                    tx, context, cfg, budget, listed.arms, at=at, tokens=listed.tokens
                )
            return cfg, reg, cache.registry_seq, inp

        # Usually the cache is current (this process observed last): one row says so.
        with self.p.backend.read_statement() as one, cache.lock:
            if cache.settle(cache.read_meta(one), (GLOBAL, context) if context else (GLOBAL,)):
                return policy_input(one)
        with self.p.backend.read() as tx, cache.lock:
            cache.refresh(tx)
            return policy_input(tx)

    def _register_listed(self, w: Any, listed: Listed, reg: Any, reg_seq: int | None) -> None:
        """Register what `listed` changes, in the select's transaction: compared with the
        cache's registry when the log's is still that one (its arms event position has not
        moved), else with the rows as this transaction reads them."""
        seq = w.tx.scalar("SELECT arms_seq FROM bandit_meta WHERE one = 1")
        if reg_seq is not None and int(seq) == reg_seq:
            changed = listed.changes(reg, reg_seq)
            if changed:
                w.append(
                    make_event(ARMS_V1, {"arms": [a.to_dict() for a in changed]}, source="bandit")
                )
        else:
            self._register_in(w, listed.arms)

    # -- observation -------------------------------------------------------------------
    def observe(
        self,
        run_id: str,
        output_text: str = "",
        tool_calls: Iterable[Mapping[str, Any]] | None = (),
        usage_tokens: int | None = None,
        duration_ms: float | None = None,
        error: str | None = None,
    ) -> Observation:
        """Reward each included arm by whether the output referenced it, atomically.

        Observing the same run again with the same outcome is a no-op; with a different
        outcome it raises ConflictError. An unknown run raises NotFoundError.
        """
        if not isinstance(run_id, str) or not run_id:
            raise ValidationError("run_id", "must be a non-empty string")
        if not isinstance(output_text, str):
            raise ValidationError(
                "output_text", f"must be a string, got {type(output_text).__name__}"
            )
        if len(output_text) > MAX_OUTPUT_CHARS:
            raise ValidationError("output_text", f"longer than {MAX_OUTPUT_CHARS} characters")
        calls = _check_tool_calls(tool_calls)
        usage_tokens = _check_opt_int("usage_tokens", usage_tokens, 0, 2**53 - 1)
        if duration_ms is not None and (
            isinstance(duration_ms, bool)
            or not isinstance(duration_ms, int | float)
            or not 0 <= duration_ms < 1e15
        ):
            raise ValidationError("duration_ms", f"must be a number >= 0, got {duration_ms!r}")
        if error is not None and (not isinstance(error, str) or len(error) > 10_000):
            raise ValidationError("error", "must be a string of at most 10000 characters")
        digest = hashlib.sha256(
            output_text.encode("utf-8", "surrogatepass")
            + b"\x1f"
            + msgspec.json.encode(calls, order="sorted")
        ).hexdigest()
        self._ensure()

        def write(w: Any) -> tuple[dict[str, int], bool, str, list[str]]:
            # the settings' position comes with the run, in one statement
            row = w.tx.fetchone(
                "SELECT r.included, r.context, r.phase, r.session_id, m.config_seq "
                "FROM bandit_runs r JOIN bandit_meta m ON m.one = 1 WHERE r.run_id = ?",
                (run_id,),
            )
            if row is None:
                raise NotFoundError(f"no bandit run with run_id {run_id!r}")
            held = self._selected.pop(run_id, None)
            if held is not None and held[0] == row[0]:
                included, held_at, held_arms = held[1], held[2], held[3]
            else:
                included, held_at, held_arms = msgspec.json.decode(row[0]), None, None
            context, phase, session_id = row[1], row[2], row[3]
            cfg = self._config_at(w.tx, int(row[4]))
            cached = self._cache.registry.arms
            updates = phase == "active" and (error is None or cfg.update_on_error)
            seek_misses = updates and cfg.learn_from_misses and bool(output_text or calls)
            at = held_at if held_arms is cached else None
            got = self._detect(w, cached, included, at, output_text, calls, seek_misses)
            hit, at, everywhere = got
            rewards = dict(zip(included, hit.astype(np.int64).tolist(), strict=True))
            ids, bits, at = _by_id(included, hit, at)
            payload = {
                "run_id": run_id,
                "context": context,
                **projection.compact_rewards(ids, (bits.astype(np.uint8) + 48).tobytes().decode()),
                "updates": updates,
                "usage_tokens": usage_tokens,
                "duration_ms": duration_ms,
                "error": error,
                "input_digest": digest,
            }
            if everywhere is not None:
                # registered arms the run left out but its output references: the agent
                # fetched them, so the run needed them (a success; see docs/bandit.md)
                missed = everywhere - set(included)
                if missed:
                    payload["missed"] = sorted(missed)
            ev = make_event(OBSERVATION_V1, payload, id=oid, session_id=session_id, source="bandit")
            # a checkpoint this observation completes is written from this process's cache
            # when that holds exactly the rows it needs (`PosteriorCache.checkpoint`)
            projection.offer(w.tx, oid, self._cache.checkpoint)
            try:
                res = w.append_batch([ev], on_conflict="skip").results[0]
            finally:
                projection.offer(w.tx, oid, None)
            if res.status in ("conflict", "present"):  # observed before: the same outcome?
                stored = _repeated(w, res, oid, run_id, payload)
                if stored is not None:  # in the run's order, as a first observe gives them
                    got = projection.rewards_of(stored)
                    rewards = {a: got[a] for a in included if a in got} | got
                    updates = stored["updates"]
                    payload["missed"] = stored.get("missed", [])
                return rewards, bool(updates), "present", list(payload.get("missed", ()))
            meta = w.tx.fetchone(
                "SELECT obs_index, last_ts, arms_seq, config_seq, ckpt_index "
                "FROM bandit_meta WHERE one = 1"
            )
            # What the projection folds: the included arms' rewards and the misses (as
            # successes), so the cache advances exactly as a reader's fold would.
            missed_ids = payload.get("missed", ())
            known: tuple[Any, ...] = ()
            if not missed_ids:
                arm_ids, r = ids, bits.astype(np.float64)
                if at is not None:
                    known = (at, cached)  # their positions in the registry
            else:
                folded = {**rewards, **dict.fromkeys(missed_ids, 1)}
                arm_ids = sorted(folded)
                r = np.array([1.0 if folded[a] else 0.0 for a in arm_ids])
            pending = fold.Pending(
                int(meta[0]), ev.ts_ms, int(meta[1]), context or None, arm_ids, r
            )
            after.append((pending if updates and arm_ids else None, meta, *known))
            return rewards, bool(updates), res.status, list(missed_ids)

        after: list[tuple[Any, ...]] = []
        oid = _observation_id(run_id)
        rewards, updates, status, missed = self.p.log.run(write)
        if after:
            # Committed: fold it into this process's cache now, if the cache is just before it
            # (the select that follows then has nothing to fold). See `PosteriorCache.advance`.
            with self._cache.lock:
                self._cache.advance(*after[0])
            meta = after[0][1]
            if int(meta[0]) - int(meta[4]) >= projection.CHECKPOINT_EVERY and projection.trails(
                self.p.backend.dialect
            ):
                self._checkpoint_soon()
        return Observation(
            run_id=run_id,
            rewards=rewards,
            referenced=[a for a, r in rewards.items() if r],
            updated=updates,
            status=status,
            missed=missed,
        )

    def _detect(
        self,
        w: Any,
        cached: dict[str, Arm],
        included: list[str],
        at: np.ndarray | None,
        output_text: str,
        calls: list[dict[str, Any]],
        seek_misses: bool,
    ) -> tuple[np.ndarray, np.ndarray | None, set[str] | None]:
        """Which included arms the output references (booleans aligned with `included`),
        their positions in the registry `cached` (None unless every one is registered; `at`
        if the caller has them), and, with `seek_misses`, every registered arm it references.

        One scan of the output through the inventory's index answers both questions when
        the miss search runs anyway or the run included many arms; per-arm rules otherwise."""
        everywhere: set[str] | None = None
        if seek_misses or len(included) > _INDEXED_FROM:
            index = inventory_index(cached)
            # None unless every arm is registered; the index holds them in registry order
            if at is None:
                at = index.positions(included)
            if at is not None:
                everywhere, hit = index.scan(at, output_text, calls)
                return hit, at, everywhere
        registered = cached
        if any(a not in registered for a in included):
            registered = self._registered(w.tx, included)
        contents = {a: registered[a].content if a in registered else None for a in included}
        found = referenced_arms(contents, output_text, calls)
        hit = np.fromiter((found[a] for a in included), dtype=bool, count=len(included))
        if seek_misses:
            everywhere = inventory_index(cached).referenced(output_text, calls)
        if at is None:
            reg = self._cache.registry
            index_of = reg.index if reg.arms is cached else {}
            got = [index_of.get(a, -1) for a in included]
            at = np.array(got, dtype=np.int64) if got and min(got) >= 0 else None
        return hit, at, everywhere

    # -- reading -----------------------------------------------------------------------
    def posteriors(
        self,
        context: str | None = None,
        *,
        level: float = 0.95,
        arm_ids: Sequence[str] | None = None,
    ) -> list[ArmStats]:
        """Every registered arm's posterior, globally or for a context (shrunk to global), in
        arm id order (Unicode code points, as Python sorts strings, whatever the database's
        collation)."""
        context = _check_context(context)
        if not isinstance(level, float | int) or not 0 < level < 1:
            raise ValidationError("level", f"must be between 0 and 1 exclusive, got {level!r}")
        self._ensure()
        cache = self._cache
        with self.p.backend.read() as tx, cache.lock:
            cache.refresh(tx)
            cfg = cache.cfg
            reg = cache.registry
            all_a, all_b, all_gpulls, all_pulls = cache.posterior(tx, context)
        ids = reg.ids if arm_ids is None else sorted(set(arm_ids) & set(reg.index))
        sel = np.fromiter((reg.index[i] for i in ids), dtype=np.int64, count=len(ids))
        alpha, beta, spulls = all_a[sel], all_b[sel], all_pulls[sel]
        # as the policy marks them (`policy.for_scope`)
        under = all_gpulls[sel] < cfg.min_pulls
        if context is not None:
            under |= spulls < cfg.min_pulls_context
        by_id = reg.arms
        lows, highs = self._intervals(alpha, beta, float(level))
        out = []
        for i, arm_id in enumerate(ids):
            a, b = float(alpha[i]), float(beta[i])
            lo, hi = float(lows[i]), float(highs[i])
            out.append(
                ArmStats(
                    id=arm_id,
                    alpha=a,
                    beta=b,
                    mean=mean(a, b),
                    variance=variance(a, b),
                    ci_low=lo,
                    ci_high=hi,
                    pulls=int(spulls[i]),
                    confidence=confidence_tier(int(spulls[i])),
                    tokens=by_id[arm_id].tokens,
                    kind=by_id[arm_id].effective_kind,
                    protected=cfg.is_protected(arm_id),
                    context=context,
                    underexplored=bool(under[i]),
                )
            )
        return out

    def arms(self) -> list[Arm]:
        """The registered inventory."""
        self._ensure()
        with self.p.backend.read() as tx:
            return list(self._registered(tx).values())

    def arm(self, arm_id: str, *, level: float = 0.95) -> dict[str, Any]:
        """One arm: its registration, global posterior and every context's posterior."""
        parse_arm_id(arm_id)
        self._ensure()
        with self.p.backend.read() as tx:
            reg = self._registered(tx, [arm_id])
            if arm_id not in reg:
                raise NotFoundError(f"no registered arm {arm_id!r}")
            stored = tx.fetchall(
                "SELECT scope FROM bandit_posteriors WHERE arm_id = ? AND scope <> ?",
                (arm_id, GLOBAL),
            )
            pending = projection.folded(tx, load_config(tx)).tables
            contexts = sorted(
                {r[0] for r in stored}
                | {c for c, t in pending.items() if c != GLOBAL and arm_id in t.pos}
            )
        return {
            "arm": reg[arm_id].to_dict(),
            "global": self.posteriors(level=level, arm_ids=[arm_id])[0].to_dict(),
            "contexts": {
                c: self.posteriors(c, level=level, arm_ids=[arm_id])[0].to_dict() for c in contexts
            },
        }

    def runs(
        self, session_id: str | None = None, *, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Recorded runs, newest first (log order), of one session or of all: at most `limit`
        after skipping `offset`. Each is the run's record and, once observed, its outcome;
        `run` gives one run's arms and rewards."""
        if session_id is not None and (not isinstance(session_id, str) or len(session_id) > 256):
            raise ValidationError("session_id", "must be a string of at most 256 characters")
        limit = _check_int("limit", limit, 1, MAX_RUNS_LISTED)
        offset = _check_int("offset", offset, 0, 2**53 - 1)
        self._ensure()
        sql = f"SELECT {_RUN_COLUMNS} FROM bandit_runs"
        params: list[Any] = []
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params.append(session_id)
        with self.p.backend.read() as tx:
            rows = tx.fetchall(
                sql + " ORDER BY seq DESC LIMIT ? OFFSET ?", [*params, limit, offset]
            )
        return [_run_listed(r) for r in rows]

    def contexts(self) -> list[str]:
        self._ensure()
        with self.p.backend.read() as tx:
            return [
                r[0]
                for r in tx.fetchall(
                    "SELECT scope FROM bandit_posteriors WHERE scope <> ? UNION "
                    "SELECT context FROM bandit_pending WHERE context IS NOT NULL ORDER BY 1",
                    (GLOBAL,),
                )
            ]

    def _run_event(self, run_id: str) -> Any:
        ev = self.p.log.get(run_id) if isinstance(run_id, str) and run_id else None
        if ev is None or ev.type not in (RUN_V1, RUN_V2):
            raise NotFoundError(f"no bandit run with run_id {run_id!r}")
        return ev

    def considered(self, run_id: str) -> dict[str, int]:
        """Every arm the run considered, with the tokens it was given, rebuilt from the log:
        the arm set its select recorded when arms were passed, else the registry as of the
        run (the arms events before it)."""
        ev = self._run_event(run_id)
        payload = ev.payload
        if ev.type == RUN_V1:
            return {a["id"]: a["tokens"] for a in payload["arms"]}
        if payload.get("arm_set") is not None:
            return dict(sorted(armsets.resolve(self.p.log.get, payload["arm_set"]).items()))
        if "arms" in payload:  # recorded by an older version
            return {a: t for a, t in payload["arms"]}
        registry: dict[str, int] = {}
        for arms_ev in self.p.log.replay(types=[ARMS_V1], until_seq=ev.seq):
            registry.update((a["id"], a["tokens"]) for a in arms_ev.payload["arms"])
        return dict(sorted(registry.items()))

    def run(self, run_id: str) -> dict[str, Any]:
        """A recorded run and, once observed, its outcome. A run whose select was passed its
        arms lists them (`arms`, [id, tokens] pairs), rebuilt from its arm set."""
        ev = self._run_event(run_id)
        out: dict[str, Any] = {"run_id": run_id, "ts_ms": ev.ts_ms, **ev.payload}
        if ev.payload.get("arm_set") is not None:
            out["arms"] = [[a, t] for a, t in self.considered(run_id).items()]
        obs = self.p.log.get(_observation_id(run_id))
        if obs is None:
            out["observation"] = None
        else:  # rewards by id, whichever form the event holds them in
            rest = {k: v for k, v in obs.payload.items() if k not in ("arms", "hits")}
            rewards = projection.rewards_of(obs.payload)
            # in the run's own order, as observe returned them (the event holds them by id)
            order = {a: rewards[a] for a in ev.payload.get("included", ()) if a in rewards}
            out["observation"] = {**rest, "rewards": order | rewards}
        return out

    def evaluate(
        self, changes: Mapping[str, Any] | None = None, *, level: float = 0.95, **kw: Any
    ) -> dict[str, Any]:
        """Estimate, from logged runs, the savings and recall a candidate configuration would
        have (IPS, SNIPS and doubly robust, each with a bootstrap interval), beside the
        current configuration's. Nothing is written. See `plaudit.bandit.evaluate`."""
        from plaudit.bandit.evaluate import from_log

        all_changes = {**(changes or {}), **kw}
        cfgmod.validate_changes(all_changes)
        if not isinstance(level, float | int) or not 0 < level < 1:
            raise ValidationError("level", f"must be between 0 and 1 exclusive, got {level!r}")
        self._ensure()
        try:
            return from_log(self, all_changes, level=float(level))
        except ValueError as exc:
            raise ValidationError("runs", str(exc)) from None

    def savings(self, context: str | None = None) -> dict[str, Any]:
        """The prompt savings against each run's counterfactual (the headline figure every
        surface shows, `prompt_savings_percent`), the savings measured on baseline runs
        (`token_savings_percent`), each with a 95% CI, duration and error rate, and history.

        Only active-phase runs count; a run's tokens are the observed `usage_tokens` when
        given, otherwise the prompt tokens of the arms it included.
        """
        context = _check_context(context)
        self._ensure()
        sql = (
            "SELECT seq, ts_ms, is_baseline, COALESCE(usage_tokens, used_tokens), observed, "
            "duration_ms, error, used_tokens, COALESCE(baseline_tokens, considered_tokens), "
            "considered_tokens, budget FROM bandit_runs WHERE phase = 'active'"
        )
        params: list[Any] = []
        if context:
            sql += " AND context = ?"
            params.append(context)
        head = self.p.log.head().length
        memo = self._savings.get(context)
        if memo is not None and memo[0] == head:
            return copy.deepcopy(memo[1])  # nothing was appended since: the same answer
        with self.p.backend.read() as tx:
            # the head again, inside the snapshot the rows come from
            head = LogView(tx).head()[0]
            rows = tx.fetchall(sql + " ORDER BY seq", params)
        out = summarise(rows)
        self._savings[context] = (head, out)
        return copy.deepcopy(out)

    def history(
        self, arm_id: str | None = None, context: str | None = None, *, points: int = MAX_POINTS
    ) -> dict[str, list[dict[str, Any]]]:
        """Posterior mean over time, per arm: after each of an arm's first 16 updates, every
        16th after that, and at its current evidence."""
        context = _check_context(context)
        _check_int("points", points, 1, 10_000)
        if arm_id is not None:
            parse_arm_id(arm_id)
        self._ensure()
        scope = context or GLOBAL
        with self.p.backend.read() as tx:
            cfg = load_config(tx)
            reg = self._registered(tx, None if arm_id is None else [arm_id])
            sql = "SELECT arm_id, obs_index, ts_ms, s, f FROM bandit_history WHERE scope = ?"
            now = "SELECT arm_id, last_index, last_ts, s, f FROM bandit_posteriors WHERE scope = ?"
            params: list[Any] = [scope]
            if arm_id is not None:
                sql += " AND arm_id = ?"
                now += " AND arm_id = ?"
                params.append(arm_id)
            rows = tx.fetchall(sql + " ORDER BY arm_id, obs_index", params)
            latest = {r[0]: r for r in tx.fetchall(now, params)}
            # observations not yet checkpointed: their points, and the rows they changed
            pend = projection.folded(tx, cfg, points=True)
        rows += [
            (pt[3], pt[0], pt[1], pt[4], pt[5])
            for pt in pend.points
            if pt[2] == scope and (arm_id is None or pt[3] == arm_id)
        ]
        rows.sort(key=lambda r: (r[0], r[1]))
        table = pend.tables.get(scope)
        if table is not None:
            cols = table.cols
            for aid, i in table.pos.items():
                if table.present[i] and (arm_id is None or aid == arm_id):
                    latest[aid] = (
                        aid,
                        cols["last_index"][i],
                        cols["last_ts"][i],
                        cols["s"][i],
                        cols["f"][i],
                    )
        series: dict[str, list[dict[str, Any]]] = {}

        def point(aid: str, idx: Any, ts: Any, s: Any, f: Any) -> dict[str, Any]:
            kind = reg[aid].effective_kind if aid in reg else "curated"
            a0, b0 = cfg.prior(aid, kind)
            a, b = a0 + float(s), b0 + float(f)
            return {
                "obs_index": int(idx),
                "ts_ms": int(ts),
                "mean": a / (a + b),
                "alpha": a,
                "beta": b,
            }

        for aid, idx, ts, s, f in rows:
            series.setdefault(aid, []).append(point(aid, idx, ts, s, f))
        # Points are stored after an arm's first updates and then every few (see the
        # projection); the series always ends at the arm's current evidence.
        for aid, (_, idx, ts, s, f) in latest.items():
            pts = series.setdefault(aid, [])
            if not pts or pts[-1]["obs_index"] < int(idx):
                pts.append(point(aid, idx, ts, s, f))
        return {k: _thin(v, points) for k, v in series.items()}
