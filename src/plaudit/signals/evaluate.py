"""Off-policy evaluation of a router: what a candidate policy would have earned on the logged
decisions, estimated from their logged propensities (`plaudit signal evaluate`).

The decisions are the export's joined rows, read exactly as `signal export` reads them (from
the `signals` projection, the log, or a seq_mem file), and a decision's reward is the row's
`reward`, the one the RL format carries: one definition of reward for training and for
evaluation. The action is the task the router chose (`chosen_task`), since that is what the
propensity is the probability of; what happened after, overrides included, is the reward's
business.

A decision is evaluated when its propensity is a number in (0, 1]. One without a propensity
is counted and left out, or given `default_propensity` when the caller supplies one; one with
an invalid propensity (<= 0, > 1, not finite, not a number) is counted, sampled in the result
and always left out: it is a logging bug, and no default should paper over it. The estimators
are in `plaudit.signals.ope`; the policies in `plaudit.signals.policy`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from plaudit.errors import ValidationError
from plaudit.signals import ope
from plaudit.signals.contract import DECISION
from plaudit.signals.policy import (
    DECISION_FIELDS,
    Distribution,
    Policy,
    candidate_tasks,
    check_key_paths,
    check_tasks,
    load_policy,
    walk,
)
from plaudit.signals.scan import Scanner, _s

if TYPE_CHECKING:
    from pathlib import Path

    from plaudit.core import Plaudit
    from plaudit.signals.join import Progress

SCHEMA_VERSION = "plaudit_signal_evaluate_v1"
MAX_SAMPLES = 20


class ExportRow(msgspec.Struct):
    """What the evaluation reads of an export row, decoded once: a table policy reads its key
    fields straight from it, without a dict built per row (only a callable gets one)."""

    id: str
    chosen_task: str
    reward: Any = None
    propensity: Any = None
    ts_ms: Any = None
    source: Any = None
    session_id: Any = None
    project_fingerprint: Any = None
    project_path: Any = None
    git_branch: Any = None
    git_commit: Any = None
    user_hash: Any = None
    user_intent: Any = None
    context: Any = None
    candidates: Any = None
    event_history: Any = None


decode_row = msgspec.json.Decoder(ExportRow).decode


def _decision(row: ExportRow) -> dict[str, Any]:
    """The decision as a policy sees it: DECISION_FIELDS only (see `plaudit.signals.policy`)."""
    out = {name: getattr(row, name, None) for name in DECISION_FIELDS[1:]}
    return {"decision_id": row.id, **out}


def propensity_problem(value: Any) -> str | None:
    """Why a logged propensity cannot be used (None when it can)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "not a number"
    if not math.isfinite(value):
        return "not finite"
    if value <= 0:
        return "<= 0"
    if value > 1:
        return "> 1"
    return None


def check_evaluate_options(
    *,
    default_propensity: Any,
    min_propensity_coverage: Any,
    bootstrap: Any,
    seed: Any,
    level: Any,
    folds: Any,
    max_age_hours: Any,
    rewards: Mapping[str, Any] | None,
    reward_key: Any,
) -> tuple[dict[str, float], tuple[tuple[str, ...], ...] | None]:
    """Validate the options (before a store is opened or a file read); returns the reward map
    and the reward model's key paths (None: the policy's own key)."""
    from plaudit.signals.export import check_options

    reward_map = check_options(
        split_by="decision",
        formats=("jsonl",),
        rewards=rewards,
        history_size=3,
        max_age_hours=max_age_hours,
        seed=42,
    )
    if default_propensity is not None and propensity_problem(default_propensity):
        raise ValidationError(
            "default_propensity", f"must be a number in (0, 1], got {default_propensity!r}"
        )
    if min_propensity_coverage is not None and (
        isinstance(min_propensity_coverage, bool)
        or not isinstance(min_propensity_coverage, int | float)
        or not 0 <= min_propensity_coverage <= 1
    ):
        raise ValidationError(
            "min_propensity_coverage",
            f"must be a number in [0, 1], got {min_propensity_coverage!r}",
        )
    for name, value, low in (("bootstrap", bootstrap, 0), ("seed", seed, 0), ("folds", folds, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValidationError(name, f"must be an integer >= {low}, got {value!r}")
    if bootstrap == 1:
        raise ValidationError("bootstrap", "one resample makes no interval: give 0 or >= 2")
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.5 <= level < 1:
        raise ValidationError("level", f"must be a number in [0.5, 1), got {level!r}")
    paths = None
    if reward_key is not None:
        paths = check_key_paths(list(reward_key), what="reward_key", where=None)
    return reward_map, paths


class _RawPropensities(Scanner):
    """Reads decisions only, keeping the raw `propensity` of the wanted ids (the last one seen
    in the window, as the export keeps the last decision). The export turns a propensity that
    is not a number into null; this tells those apart from propensities never logged."""

    def __init__(self, wanted: set[str], *, now_ms: int, max_age_ms: int) -> None:
        super().__init__(now_ms=now_ms, max_age_ms=max_age_ms, seed=0)
        self._pending = {DECISION: ([], [])}  # other event types are not even decoded
        self.wanted = wanted
        self.raw: dict[str, Any] = {}

    def _decisions(self, meta: list[tuple[int, str, int]], decoded: list[Any]) -> None:
        wanted = self.wanted
        for d in decoded:
            did = d.decision_id
            if type(did) is not str:
                did = _s(did)
            if did in wanted:
                self.raw[did] = d.propensity


def _unreadable(path: Path, exc: OSError) -> ValidationError:
    return ValidationError("seq_mem", f"cannot read {str(path)!r}: {exc.strerror or exc}")


def _raw_propensities(
    wanted: set[str],
    *,
    plaudit: Plaudit | None,
    seq_path: Path | None,
    size: int,
    until: int | None,
    now_ms: int,
    max_age_hours: int,
) -> dict[str, Any]:
    scanner = _RawPropensities(wanted, now_ms=now_ms, max_age_ms=max(1, max_age_hours) * 3_600_000)
    if seq_path is not None:
        try:
            scanner.read_range(str(seq_path), 0, size)
        except OSError as exc:
            raise _unreadable(seq_path, exc) from None
    else:
        assert plaudit is not None
        with plaudit.log.reading() as view:
            columns = ("seq", "type", "ts_ms", "session_id", "payload")
            for seq, name, ts, session, payload in view.scan_columns(
                columns, types=[DECISION], until=until
            ):
                scanner.event(name, ts, session, payload, seq)
        scanner.finish()
    return scanner.raw


class Evaluated:
    """Per joined row, what the estimators need, in flat lists."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.tasks: list[str] = []
        self.rewards: list[float] = []
        self.propensities: list[float] = []
        self.groups: list[tuple[Any, ...]] = []
        self.dists: list[Distribution] = []
        self.pending: list[int] = []  # positions whose propensity was null (defaulted)
        self.known: dict[str, None] = {}
        self.returned: dict[str, str] = {}  # task -> where a callable first returned it
        self.missing = 0
        self.invalid = 0
        self.skipped = 0
        self.invalid_samples: list[dict[str, Any]] = []
        self.null_ids: set[str] = set()

    def note_invalid(self, did: str, value: Any, reason: str) -> None:
        self.invalid += 1
        if len(self.invalid_samples) < MAX_SAMPLES:
            self.invalid_samples.append(
                {"decision_id": did, "propensity": _shown(value), "reason": reason}
            )


def _shown(value: Any) -> Any:
    """A logged value as the result can hold it: NaN and infinities (which JSON cannot) and
    objects as their JSON-style text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, str | int | float):
        return value
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def row_key(row: ExportRow, path: tuple[str, ...]) -> Any:
    """`key_text` read straight from the decoded row, without building the decision dict."""
    head = path[0]
    return walk(row.id if head == "decision_id" else getattr(row, head), path, 1)


#: Which decisions an evaluation leaves out: (decision id, session id, ts_ms) -> True to skip.
Skip = Callable[[str, str, Any], bool]


def collect_rows(
    rows: Iterator[tuple[str, str, str, str, int, bytes | None]],
    policy: Policy,
    group_paths: tuple[tuple[str, ...], ...],
    default_propensity: float | None,
    skip: Skip | None = None,
) -> Evaluated:
    col = Evaluated()
    known = col.known
    key_paths = policy.key
    fast: Callable[..., Distribution | None] | None = (
        policy.for_key if policy.kind in ("table", "model") else None
    )
    same_key = group_paths == key_paths
    for _, _, _, _, _, line in rows:
        if line is None:
            continue
        row = decode_row(line)
        if skip is not None and skip(row.id, row.session_id or "", row.ts_ms):
            col.skipped += 1
            continue
        known[row.chosen_task] = None
        for task in candidate_tasks(row.candidates):
            known[task] = None
        p = row.propensity
        if p is None:
            col.null_ids.add(row.id)
            if default_propensity is None:
                col.missing += 1
                continue
            col.pending.append(len(col.ids))
            p = default_propensity
        elif type(p) is not float or not 0.0 < p <= 1.0:
            problem = propensity_problem(p)
            if problem is not None:
                col.note_invalid(row.id, p, problem)
                continue
        if fast is not None:
            values = tuple([row_key(row, k) for k in key_paths])
            dist = fast(values, row.candidates)
            if dist is None:
                dist = policy.distribution(_decision(row))  # raises, naming the key values
        else:
            values = ()
            dist = policy.distribution(_decision(row))
            for task in dist[0]:
                if task not in col.returned:
                    col.returned[task] = f"{policy.name}, decision {row.id!r}"
        col.ids.append(row.id)
        col.tasks.append(row.chosen_task)
        reward = row.reward
        col.rewards.append(float(reward) if isinstance(reward, int | float) else 0.0)
        col.propensities.append(float(p))
        col.groups.append(values if same_key else tuple([row_key(row, k) for k in group_paths]))
        col.dists.append(dist)
    return col


def _drop(col: Evaluated, positions: set[int]) -> None:
    """Remove evaluated rows at `positions` (defaulted rows found to be invalid after all)."""
    keep = [i for i in range(len(col.ids)) if i not in positions]
    for name in ("ids", "tasks", "rewards", "propensities", "groups", "dists"):
        values = getattr(col, name)
        setattr(col, name, [values[i] for i in keep])


def as_logged(col: Evaluated, tasks: list[str]) -> ope.Logged:
    index = {t: i for i, t in enumerate(tasks)}
    groups: dict[tuple[Any, ...], int] = {}
    group = np.fromiter(
        (groups.setdefault(g, len(groups)) for g in col.groups), dtype=np.int64, count=len(col.ids)
    )
    rows: list[int] = []
    pi_tasks: list[int] = []
    pi_probs: list[float] = []
    for i, (names, probs) in enumerate(col.dists):
        rows.extend([i] * len(names))
        pi_tasks.extend(index[t] for t in names)
        pi_probs.extend(probs)
    return ope.Logged(
        reward=np.array(col.rewards, dtype=np.float64),
        propensity=np.array(col.propensities, dtype=np.float64),
        action=np.array([index[t] for t in col.tasks], dtype=np.int64),
        group=group,
        pi_rows=np.array(rows, dtype=np.int64),
        pi_tasks=np.array(pi_tasks, dtype=np.int64),
        pi_probs=np.array(pi_probs, dtype=np.float64),
        n_tasks=len(tasks),
    )


def evaluate_policy(
    policy: Any,
    *,
    plaudit: Plaudit | None = None,
    seq_mem: str | os.PathLike[str] | None = None,
    default_propensity: float | None = None,
    min_propensity_coverage: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    folds: int = ope.FOLDS,
    max_age_hours: int = 168,
    rewards: Mapping[str, float] | None = None,
    reward_key: Sequence[str] | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
    skip: Skip | None = None,
) -> dict[str, Any]:
    """Estimate what `policy` would have earned per decision on the logged decisions of the
    store (`plaudit`) or of a seq_mem file (`seq_mem`, which wins when both are given).
    `skip(decision_id, session_id, ts_ms)`: True for a decision to leave out (counted in
    `counts.skipped`; `plaudit signal compare` leaves out those a policy learned from).

    `policy`: a JSON table file's path, `module:function`, a table as a mapping, a Python
    callable (decision dict -> {task: probability}) or a `plaudit.signals.policy.Policy`.
    `reward_key`: the field paths the reward model groups decisions by (default: the table
    policy's key; none for a callable, i.e. a per-task mean). The window and rewards are the
    export's (`max_age_hours`, `rewards`). Returns the result; `result["pass"]` is False when
    nothing could be evaluated or the coverage gate fails.
    """
    reward_map, group_paths = check_evaluate_options(
        default_propensity=default_propensity,
        min_propensity_coverage=min_propensity_coverage,
        bootstrap=bootstrap,
        seed=seed,
        level=level,
        folds=folds,
        max_age_hours=max_age_hours,
        rewards=rewards,
        reward_key=reward_key,
    )
    pol = load_policy(policy)
    if group_paths is None:
        group_paths = pol.key
    from plaudit.signals.export import _check_path, joined_lines

    seq_path = _check_path("seq_mem", seq_mem) if seq_mem is not None else None
    if seq_path is None and plaudit is None:
        raise ValidationError("seq_mem", "give a seq_mem file or an open store to evaluate")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    size = 0
    until = None
    if seq_path is not None:
        try:
            size = seq_path.stat().st_size
        except OSError as exc:
            raise _unreadable(seq_path, exc) from None
    else:
        assert plaudit is not None
        until = plaudit.log.head().length
    with joined_lines(
        plaudit,
        seq_path,
        now=now,
        max_age_hours=max_age_hours,
        rewards=reward_map,
        progress=progress,
    ) as (source, rows):
        col = collect_rows(rows, pol, group_paths, default_propensity, skip)
        counts = source.counts
    if col.null_ids:
        raw = _raw_propensities(
            col.null_ids,
            plaudit=plaudit,
            seq_path=seq_path,
            size=size,
            until=until,
            now_ms=now,
            max_age_hours=max_age_hours,
        )
        _classify_nulls(col, raw, defaulted=default_propensity is not None)
    tasks = sorted(col.known)
    table_tasks = pol.tasks()
    if col.known:  # with no decision at all, there is nothing to estimate (said below)
        named = table_tasks.items() if table_tasks is not None else col.returned.items()
        check_tasks(named, col.known)
    n = len(col.ids)
    joined = counts.joined_rows - col.skipped
    logged = n - len(col.pending)
    coverage = logged / joined if joined else 0.0
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generated_at_ms": now,
        "input": {
            "source": "seq_mem" if seq_path is not None else "log",
            "seq_mem": str(seq_path) if seq_path is not None else None,
            "db": None if seq_path is not None or plaudit is None else plaudit.backend.describe(),
            "max_age_hours": max_age_hours,
            "rewards": reward_map,
            "default_propensity": default_propensity,
            "bootstrap": bootstrap,
            "seed": seed,
            "level": level,
            "folds": folds,
            "reward_key": [".".join(p) for p in group_paths],
        },
        "policy": pol.describe(),
        "counts": {
            "decisions": counts.decisions,
            "joined_rows": joined,
            "missing_outcome": counts.missing_outcome,
            "evaluated": n,
            "missing_propensity": col.missing,
            "invalid_propensity": col.invalid,
            "defaulted_propensity": len(col.pending),
            "skipped": col.skipped,
        },
        "propensity": {
            "coverage": round(coverage, 6),
            "invalid_samples": col.invalid_samples,
        },
    }
    if n:
        est = ope.estimate(
            as_logged(col, tasks), bootstrap=bootstrap, seed=seed, level=level, folds=folds
        )
        result["logging"] = est.pop("logging")
        result["estimates"] = {name: est.pop(name) for name in ope.ESTIMATORS}
        for name in ("decisions", "level", "bootstrap"):  # already in `counts` and `input`
            est.pop(name)
        result["effective_sample_size"] = est.pop("effective_sample_size")
        result["diagnostics"] = est
        result["note"] = None
    else:
        result["logging"] = None
        result["estimates"] = dict.fromkeys(ope.ESTIMATORS)
        result["effective_sample_size"] = 0.0
        result["diagnostics"] = None
        result["note"] = _nothing_to_estimate(joined, col)
    gates: dict[str, Any] = {}
    if min_propensity_coverage is not None:
        gates["min_propensity_coverage"] = {
            "actual": round(coverage, 6),
            "threshold": min_propensity_coverage,
            "pass": coverage >= min_propensity_coverage,
        }
    result["gates"] = gates
    result["pass"] = bool(n) and all(g["pass"] for g in gates.values())
    return result


def _classify_nulls(col: Evaluated, raw: Mapping[str, Any], *, defaulted: bool) -> None:
    """Null propensities in the rows were either never logged (missing) or not numbers
    (invalid); a defaulted row that turns out invalid is taken back out."""
    pending = {col.ids[i]: i for i in col.pending}
    wrong: set[int] = set()
    for did in sorted(col.null_ids):
        value = raw.get(did)
        if value is None:
            continue
        col.note_invalid(did, value, propensity_problem(value) or "not a number")
        if defaulted:
            wrong.add(pending[did])
        else:
            col.missing -= 1
    if wrong:
        still = {did for did, i in pending.items() if i not in wrong}
        _drop(col, wrong)
        col.pending = [i for i, did in enumerate(col.ids) if did in still]


def _nothing_to_estimate(joined: int, col: Evaluated) -> str:
    if not joined:
        return "no decision with an outcome in the window: nothing to estimate"
    return (
        f"none of the {joined} decisions with an outcome has a usable propensity"
        f" ({col.missing} missing, {col.invalid} invalid); log propensities with each decision,"
        " or give a default propensity if the router chose uniformly at random"
    )
