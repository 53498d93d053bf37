"""`plaudit signal learn`: a routing policy learned from the log, checked on decisions it never
saw.

The decisions are the export's joined rows, read as `signal export` and `signal evaluate` read
them (the `signals` projection, the log, or a seq_mem file; the same window and rewards). The
summary of those rows goes through the audit's quality gates first: as seed 004's trainer
does, nothing is learned from telemetry that fails them, and the error names each failed gate.

Sessions are then dealt into a training part and a held-out part by a hash of the session id
and the seed, so a session's decisions (and the history each shows of the others) are all on
one side. The learner (`plaudit.signals.learner`) sees the training part only: the feature
fields it may use, their values, the tasks, the rewards. The held-out part is read once the
policy is written, through the same code as `plaudit signal evaluate`, for its doubly robust
value and its paired difference from the logging router.

The policy is a `plaudit_router_policy_v1` table when it fits (no logged decision listed
candidates that leave a known task out), else a `plaudit_router_model_v1` model (values per
task, epsilon-greedy over each decision's candidates); both carry `provenance`: the source
and the log's head, the window, the rows used and held out, the fields, the seed, the
evaluation.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from plaudit.errors import PlauditError, ValidationError
from plaudit.signals import learner, ope
from plaudit.signals.evaluate import (
    ExportRow,
    as_logged,
    check_evaluate_options,
    collect_rows,
    decode_row,
    propensity_problem,
    row_key,
)
from plaudit.signals.policy import (
    MISSING,
    MODEL_VERSION,
    TablePolicy,
    as_key,
    candidate_tasks,
    check_key_paths,
    table_or_model,
)
from plaudit.signals.policy import (
    SCHEMA_VERSION as TABLE_VERSION,
)
from plaudit.signals.split import bucket

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.signals.join import Progress

SCHEMA_VERSION = "plaudit_signal_learn_v1"
#: Fields a learner may group decisions by when none are named: these, every scalar field of
#: `context`, and the task of the session's previous decision.
FIXED_FIELDS = ("source", "project_fingerprint", "project_path", "git_branch", "user_intent")
HISTORY_FIELD = "event_history.-1.chosen_task"
_HISTORY_PATH = ("event_history", "-1", "chosen_task")
#: A field found on its own is left out when it takes more values than this in training.
MAX_VALUES = 32
#: A table (or model) holds at most this many entries.
MAX_LEAVES = 100_000
FORMATS = ("auto", "table", "model")
#: The export's default split, for the summary the gates read.
_SPLIT_OF = [2] * 10 + [1] * 10 + [0] * 80


class LearnRefused(PlauditError):
    """The telemetry failed the audit's quality gates: nothing was learned or written."""

    exit_code = 1
    http_status = 409

    def __init__(self, failed: list[dict[str, Any]], report: dict[str, Any]) -> None:
        self.failed = failed
        self.report = report
        shown = "; ".join(
            f"{g['name']}: actual={g['actual']} threshold={g['threshold']}" for g in failed
        )
        super().__init__(
            f"refusing to learn: the audit's quality gates failed ({shown}); fix the telemetry"
            " first, or set the thresholds you accept (e.g. --min-overrides 0)"
        )

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out["gates"] = self.failed
        return out


def check_learn_options(
    *,
    features: Sequence[str] | None,
    max_features: Any,
    explore: Any,
    holdout_percent: Any,
    seed: Any,
    format: Any,
    default_propensity: Any,
    bootstrap: Any,
    level: Any,
    max_age_hours: Any,
    rewards: Mapping[str, Any] | None,
    gates: Mapping[str, Any] | None,
) -> tuple[dict[str, float], tuple[tuple[str, ...], ...] | None]:
    """Validate the options before any store is opened or file read; returns the reward map
    and the named feature paths (None: found in the data)."""
    from plaudit.signals.audit import thresholds

    reward_map, _ = check_evaluate_options(
        default_propensity=default_propensity,
        min_propensity_coverage=None,
        bootstrap=bootstrap,
        seed=seed,
        level=level,
        folds=ope.FOLDS,
        max_age_hours=max_age_hours,
        rewards=rewards,
        reward_key=None,
    )
    for name, value, low, high in (
        ("max_features", max_features, 0, 8),
        ("holdout_percent", holdout_percent, 5, 95),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValidationError(name, f"must be an integer in [{low}, {high}], got {value!r}")
    if isinstance(explore, bool) or not isinstance(explore, int | float) or not 0 < explore < 1:
        raise ValidationError("explore", f"must be a number in (0, 1), got {explore!r}")
    if format not in FORMATS:
        raise ValidationError("format", f"must be one of {', '.join(FORMATS)}, got {format!r}")
    thresholds(gates or {})  # unknown gate names and bad values, now
    paths = None
    if features is not None:
        paths = check_key_paths(list(features), what="features", where=None)
        if not paths:
            raise ValidationError("features", "name at least one field, or leave it out")
    return reward_map, paths


class _Column:
    """One feature field's value codes, one per training decision (0: missing)."""

    def __init__(self, rows_before: int) -> None:
        self.vocab: dict[str, int] = {}
        self.codes = array("i", bytes(4 * rows_before))


class _Lines:
    """Rows' lines kept for later, compressed a megabyte at a time (JSON rows shrink about
    tenfold): the held-out third of 200,000 rows would otherwise hold 60 MB."""

    CHUNK = 1 << 20

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.buffer = bytearray()
        self.count = 0

    def append(self, line: bytes) -> None:
        self.buffer += line if line.endswith(b"\n") else line + b"\n"
        self.count += 1
        if len(self.buffer) >= self.CHUNK:
            self.chunks.append(zlib.compress(self.buffer, 1))
            self.buffer = bytearray()

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[bytes]:
        for chunk in [*self.chunks, None]:
            data = bytes(self.buffer) if chunk is None else zlib.decompress(chunk)
            yield from data.split(b"\n")[:-1]  # every line ends with one


class _Reader:
    """Reads the joined rows once: the summary's tallies, the training decisions as columns,
    the held-out rows as they are (their lines)."""

    def __init__(
        self,
        paths: tuple[tuple[str, ...], ...] | None,
        *,
        seed: int,
        holdout_percent: int,
        default_propensity: float | None,
    ) -> None:
        from plaudit.signals.export import RowTally

        self.paths = paths
        self.seed = seed
        self.holdout_percent = holdout_percent
        self.default_propensity = default_propensity
        self.tally = RowTally()
        self.columns: dict[str, _Column] = {}
        self.too_many: set[str] = set()
        self.held_out = _Lines()
        self.held_sessions: set[str] = set()
        self.sessions: dict[str, int] = {}
        self.session: array[int] = array("i")
        self.tasks: dict[str, int] = {}
        self.action: array[int] = array("i")
        self.reward: array[float] = array("d")
        self.propensity: array[float] = array("d")
        self.candidates: dict[tuple[str, ...], int] = {}
        self.candidate_set: array[int] = array("i")
        self._by_raw: dict[Any, int] = {}
        self._context_paths: dict[str, str] = {}
        self._named = [(".".join(p), p) for p in paths or ()]
        self.missing = self.invalid = 0
        self.newest_ts = 0
        self._split: dict[str, bool] = {}

    def read(self, rows: Iterator[tuple[Any, ...]]) -> None:
        tally = self.tally
        for _, session, chosen, outcome, row_bucket, line in rows:
            tally.sessions.append(session)
            tally.tasks.append(chosen)
            tally.outcomes.append(outcome)
            tally.splits.append(_SPLIT_OF[row_bucket])
            if line is None:
                continue
            row = decode_row(line)
            if isinstance(row.ts_ms, int) and row.ts_ms > self.newest_ts:
                self.newest_ts = row.ts_ms
            key = session or row.id
            held = self._split.get(key)
            if held is None:
                held = self._split[key] = bucket(key, self.seed) < self.holdout_percent
            if held:
                self.held_out.append(line)
                self.held_sessions.add(key)
            else:
                self._train(row, key)

    def _train(self, row: ExportRow, session: str) -> None:
        p = row.propensity
        if p is None:
            if self.default_propensity is None:
                self.missing += 1
                return
            p = self.default_propensity
        elif propensity_problem(p) is not None:
            self.invalid += 1
            return
        n = len(self.action)
        self.action.append(self.tasks.setdefault(row.chosen_task, len(self.tasks)))
        reward = row.reward
        self.reward.append(float(reward) if isinstance(reward, int | float) else 0.0)
        self.propensity.append(float(p))
        self.session.append(self.sessions.setdefault(session, len(self.sessions)))
        self.candidate_set.append(self._candidates(row.candidates))
        columns = self.columns
        for path, value in self._values(row):
            column = columns.get(path)
            if column is None:
                if path in self.too_many:
                    continue
                column = columns[path] = _Column(n)
            if value is MISSING:
                column.codes.append(0)
                continue
            vocab = column.vocab
            code = vocab.get(value)
            if code is None:
                code = vocab[value] = len(vocab) + 1
                if self.paths is None and code > MAX_VALUES:
                    self.too_many.add(path)
                    del columns[path]
                    continue
            column.codes.append(code)
        n += 1
        for column in columns.values():  # fields this row does not have: missing
            if len(column.codes) < n:
                column.codes.append(0)

    def _candidates(self, candidates: Any) -> int:
        """The code of a decision's candidate set (the task names it lists, in order)."""
        try:
            key: Any = tuple(candidates) if type(candidates) is list else ()
            return self._by_raw[key]
        except KeyError:
            named = tuple(dict.fromkeys(candidate_tasks(candidates)))
            code = self.candidates.setdefault(named, len(self.candidates))
            self._by_raw[key] = code
            return code
        except TypeError:  # objects in the list: not hashable as they are
            named = tuple(dict.fromkeys(candidate_tasks(candidates)))
            return self.candidates.setdefault(named, len(self.candidates))

    def _values(self, row: ExportRow) -> list[tuple[str, Any]]:
        if self.paths is not None:
            return [(name, row_key(row, path)) for name, path in self._named]
        out = [(name, as_key(getattr(row, name))) for name in FIXED_FIELDS]
        context = row.context
        if type(context) is dict:
            for name, value in context.items():
                path = self._context_paths.get(name)
                if path is None:
                    ok = name and "." not in name
                    path = self._context_paths[name] = f"context.{name}" if ok else ""
                if path and isinstance(value, str | int | float | bool):
                    out.append((path, value if type(value) is str else as_key(value)))
        out.append((HISTORY_FIELD, row_key(row, _HISTORY_PATH)))
        return out

    def counts(self, joined: int) -> dict[str, Any]:
        """The rows and sessions read, as the provenance records them."""
        return {
            "rows": {
                "joined": joined,
                "used": len(self.action),
                "held_out": len(self.held_out),
                "missing_propensity": self.missing,
                "invalid_propensity": self.invalid,
            },
            "sessions": {"used": len(self.sessions), "held_out": len(self.held_sessions)},
        }

    def training(self) -> learner.Training:
        tasks = list(self.tasks)
        codes: dict[str, np.ndarray] = {}
        vocab: dict[str, list[str]] = {}
        for path, column in self.columns.items():
            if self.paths is None and len(column.vocab) < 2:
                continue  # one value (or none) cannot tell decisions apart
            codes[path] = np.frombuffer(column.codes, dtype=np.int32).astype(np.int64)
            vocab[path] = list(column.vocab)
        allowed = None
        index = {t: i for i, t in enumerate(tasks)}
        masks = np.ones((max(1, len(self.candidates)), len(tasks)), dtype=bool)
        for named, code in self.candidates.items():
            known = [index[t] for t in named if t in index]
            if known:
                masks[code] = False
                masks[code, known] = True
        if not masks.all():
            allowed = masks[np.frombuffer(self.candidate_set, dtype=np.int32)]
        return learner.Training(
            reward=np.frombuffer(self.reward, dtype=np.float64),
            propensity=np.frombuffer(self.propensity, dtype=np.float64),
            action=np.frombuffer(self.action, dtype=np.int32).astype(np.int64),
            session=np.frombuffer(self.session, dtype=np.int32).astype(np.int64),
            tasks=tasks,
            codes=codes,
            vocab=vocab,
            allowed=allowed,
        )


def _leaves(data: learner.Training, paths: list[str]) -> np.ndarray:
    """The code combinations the policy lists: every combination of the values seen in
    training when there are at most MAX_LEAVES of them, else those seen together."""
    widths = [len(data.vocab[p]) for p in paths]
    if int(np.prod(widths, dtype=np.float64)) <= MAX_LEAVES:
        grids = np.meshgrid(*[np.arange(1, w + 1) for w in widths], indexing="ij")
        return np.column_stack([g.ravel() for g in grids])
    cols = np.column_stack([data.codes[p] for p in paths])
    seen = np.unique(cols[(cols > 0).all(axis=1)], axis=0)
    if len(seen) > MAX_LEAVES:
        raise ValidationError(
            "features",
            f"{', '.join(paths)} take {len(seen)} combinations of values in training, more"
            f" than a policy may list ({MAX_LEAVES}); name fewer or coarser fields",
        )
    return seen


def _nest(keys: list[list[str]], leaves: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, leaf in zip(keys, leaves, strict=True):
        level = out
        for part in key[:-1]:
            level = level.setdefault(part, {})
        level[key[-1]] = leaf
    return out


def _spec(
    data: learner.Training,
    choice: learner.Choice,
    tree: learner.Tree,
    *,
    explore: float,
    model: bool,
) -> dict[str, Any]:
    """The policy file's content, without its provenance."""
    paths = choice.paths
    tasks = data.tasks
    root = tree.values[0][0]
    keys: list[list[str]] = []
    values = np.empty((0, len(tasks)))
    if paths:
        combos = _leaves(data, paths)
        keys = [
            [data.vocab[p][c - 1] for p, c in zip(paths, combo, strict=True)]
            for combo in combos.tolist()
        ]
        values = tree.predict([combos[:, j] for j in range(len(paths))])
    if model:

        def leaf(v: np.ndarray) -> dict[str, float]:
            return {t: round(float(x), 6) for t, x in zip(tasks, v, strict=True)}

        return {
            "schema_version": MODEL_VERSION,
            "key": paths,
            "tasks": tasks,
            "explore": explore,
            "values": _nest(keys, [leaf(v) for v in values]),
            "default": leaf(root),
        }
    probs = learner.greedy(np.vstack([root[None, :], values]), None, explore)

    def dist(p: np.ndarray) -> dict[str, float]:
        return {t: float(x) for t, x in zip(tasks, p, strict=True)}

    spec: dict[str, Any] = {"schema_version": TABLE_VERSION, "key": paths}
    if paths:
        spec["table"] = _nest(keys, [dist(p) for p in probs[1:]])
    spec["default"] = dist(probs[0])
    return spec


def _evaluate(
    policy: TablePolicy,
    lines: _Lines,
    *,
    default_propensity: float | None,
    bootstrap: int,
    seed: int,
    level: float,
) -> dict[str, Any]:
    """The held-out decisions' estimates, as `signal evaluate` computes them."""
    rows = ((None, None, None, None, None, line) for line in lines)
    col = collect_rows(rows, policy, policy.key, default_propensity)
    tasks = sorted({*col.known, *(policy.tasks() or {})})
    out: dict[str, Any] = {
        "decisions": len(lines),
        "evaluated": len(col.ids),
        "missing_propensity": col.missing,
        "invalid_propensity": col.invalid,
        "level": level,
        "bootstrap": bootstrap,
    }
    if not col.ids:
        out.update(logging=None, estimates=None, effective_sample_size=0.0)
        out["note"] = "no held-out decision with a usable propensity: nothing to estimate"
        return out
    est = ope.estimate(as_logged(col, tasks), bootstrap=bootstrap, seed=seed, level=level)
    out["logging"] = est["logging"]
    out["estimates"] = {name: est[name] for name in ope.ESTIMATORS}
    out["effective_sample_size"] = est["effective_sample_size"]
    out["note"] = None
    return out


def _source_of(
    plaudit: Plaudit | None, seq_path: Path | None, size: int, head: Any
) -> dict[str, Any]:
    if seq_path is not None:
        h = hashlib.sha256()
        with open(seq_path, "rb") as f:
            left = size
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
        return {"kind": "seq_mem", "seq_mem": str(seq_path), "bytes": size, "sha256": h.hexdigest()}
    assert plaudit is not None
    return {
        "kind": "log",
        "db": plaudit.backend.describe(),
        "head": {"length": head.length, "digest": head.digest},
    }


def learn_policy(
    out: str | os.PathLike[str] | None,
    *,
    plaudit: Plaudit | None = None,
    seq_mem: str | os.PathLike[str] | None = None,
    features: Sequence[str] | None = None,
    max_features: int = 4,
    explore: float = 0.05,
    holdout_percent: int = 30,
    seed: int = 0,
    format: str = "auto",
    default_propensity: float | None = None,
    bootstrap: int = 1000,
    level: float = 0.95,
    max_age_hours: int = 168,
    rewards: Mapping[str, float] | None = None,
    gates: Mapping[str, Any] | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Learn a routing policy from the store (`plaudit`) or a seq_mem file (`seq_mem`, which
    wins when both are given) and write it to `out` (None: nothing is written).

    `features`: the decision fields to group by (default: chosen from the data, at most
    `max_features`); `explore`: the probability spread over the tasks a decision may have;
    `holdout_percent`: the share of sessions held out for the evaluation; `gates`: audit
    thresholds by gate name (as `signal audit` takes them). Raises `LearnRefused` when a gate
    fails. Returns the result: the policy written, its provenance and the held-out estimates.
    """
    reward_map, paths = check_learn_options(
        features=features,
        max_features=max_features,
        explore=explore,
        holdout_percent=holdout_percent,
        seed=seed,
        format=format,
        default_propensity=default_propensity,
        bootstrap=bootstrap,
        level=level,
        max_age_hours=max_age_hours,
        rewards=rewards,
        gates=gates,
    )
    from plaudit.signals.export import _check_path

    target = _check_path("out", out) if out is not None else None
    if target is not None and not target.parent.is_dir():
        raise ValidationError("out", f"its directory {str(target.parent)!r} does not exist")
    if target is not None and target.exists() and not target.is_file():
        raise ValidationError("out", f"{str(target)!r} exists and is not a regular file")
    seq_path = _check_path("seq_mem", seq_mem) if seq_mem is not None else None
    if seq_path is None and plaudit is None:
        raise ValidationError("seq_mem", "give a seq_mem file or an open store to learn from")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    size, head = _start(plaudit, seq_path)
    reader = _Reader(
        paths, seed=seed, holdout_percent=holdout_percent, default_propensity=default_propensity
    )
    summary = _read(reader, plaudit, seq_path, now, max_age_hours, reward_map, progress)
    gate_results = _check_gates(summary, gates)
    data = reader.training()
    if not len(data):
        raise ValidationError(
            "decisions",
            "no training decision has a usable propensity: log one with each decision"
            " (or give a default propensity if the router chose uniformly at random)",
        )
    if progress is not None:
        progress("learning", 0, None)
    named = [".".join(p) for p in paths] if paths is not None else sorted(data.codes)
    choice = learner.choose(
        data,
        named,
        fixed=paths is not None,
        max_features=max_features,
        explore=explore,
        seed=seed,
    )
    scores = learner.dr_scores(data, choice.paths, seed)
    tree = learner.Tree.fit(data, choice.paths, scores, choice.prior_weight)
    model = format == "model" or (format == "auto" and data.allowed is not None)
    spec = _spec(data, choice, tree, explore=explore, model=model)
    policy = table_or_model(spec, name=str(target) if target is not None else "learned")
    evaluation = _evaluate(
        policy,
        reader.held_out,
        default_propensity=default_propensity,
        bootstrap=bootstrap,
        seed=seed,
        level=level,
    )
    evaluation["sessions"] = len(reader.held_sessions)
    spec["provenance"] = provenance = {
        "learner": "plaudit signal learn",
        "created_at_ms": now,
        "source": _source_of(plaudit, seq_path, size, head),
        "window": {
            "max_age_hours": max_age_hours,
            "start_ms": max(1, now - max(1, max_age_hours) * 3_600_000),
            "newest_ts_ms": reader.newest_ts,
        },
        "rewards": reward_map,
        **reader.counts(summary["counts"]["joined_rows"]),
        "split": {"by": "session", "seed": seed, "holdout_percent": holdout_percent},
        "features": {"selected": choice.paths, "considered": choice.considered},
        "seed": seed,
        "explore": explore,
        "prior_weight": choice.prior_weight,
        "evaluation": _brief(evaluation),
    }
    if target is not None:
        _write(target, spec)
    return {
        "schema_version": SCHEMA_VERSION,
        "policy": str(target) if target is not None else None,
        "format": "model" if model else "table",
        "digest": table_or_model(spec, name="learned").digest,
        "provenance": provenance,
        "selection": {"score": choice.score, "steps": choice.steps},
        "evaluation": evaluation,
        "gates": gate_results,
        "spec": spec,
    }


def _read(
    reader: _Reader,
    plaudit: Plaudit | None,
    seq_path: Path | None,
    now: int,
    max_age_hours: int,
    rewards: dict[str, float],
    progress: Progress | None,
) -> dict[str, Any]:
    """Feed the joined rows to `reader`; returns their summary (what the gates read)."""
    from plaudit.signals.export import joined_lines

    with joined_lines(
        plaudit,
        seq_path,
        now=now,
        max_age_hours=max_age_hours,
        rewards=rewards,
        progress=progress,
    ) as (source, rows):
        reader.read(rows)
        return reader.tally.summary(source)


def _start(plaudit: Plaudit | None, seq_path: Path | None) -> tuple[int, Any]:
    """The file's size (what the read covers) or the log's head, as the read begins."""
    if seq_path is not None:
        try:
            return seq_path.stat().st_size, None
        except OSError as exc:
            raise ValidationError(
                "seq_mem", f"cannot read {str(seq_path)!r}: {exc.strerror or exc}"
            ) from None
    assert plaudit is not None
    return 0, plaudit.log.head()


def _check_gates(summary: dict[str, Any], gates: Mapping[str, Any] | None) -> list[Any]:
    """The audit's gates over the rows' summary; raises LearnRefused when one fails."""
    from plaudit.signals.audit import audit, gate_list

    report = audit(summary, limits=dict(gates or {}), write=False)
    listed = gate_list(report["gates"])
    if not report["pass"]:
        raise LearnRefused([g for g in listed if not g["pass"]], report)
    return listed


def _brief(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The held-out evaluation as the policy's provenance keeps it."""
    dr = (evaluation.get("estimates") or {}).get("dr")
    return {
        "decisions": evaluation["decisions"],
        "evaluated": evaluation["evaluated"],
        "sessions": evaluation.get("sessions"),
        "level": evaluation["level"],
        "logging": evaluation["logging"],
        "dr": None if dr is None else {"value": dr["value"], "ci": dr["ci"]},
        "difference": None
        if dr is None
        else {"value": dr["difference"], "ci": dr["difference_ci"]},
        "effective_sample_size": evaluation["effective_sample_size"],
    }


def _write(target: Path, spec: dict[str, Any]) -> None:
    import json

    from plaudit.files import atomic_write

    data = (json.dumps(spec, indent=1, ensure_ascii=False) + "\n").encode()
    atomic_write(target, lambda f: f.write(data), what="out")
