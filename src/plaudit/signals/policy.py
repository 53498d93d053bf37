"""Candidate routing policies for off-policy evaluation: a JSON table or a Python callable.

A policy maps a decision, as the router saw it before choosing, to a probability for every
task. Both forms are checked before anything is estimated, and every mistake is a
`ValidationError` naming the policy and the place in it (`policy.json: table.failing`), so a
typo cannot quietly turn into an estimate of some other policy.

The table format (`plaudit_router_policy_v1`)::

    {
      "schema_version": "plaudit_router_policy_v1",      (optional)
      "key": ["context.ci_status"],                       (field paths; a string means one)
      "table": {"failing": {"ai:flow/fix-ci": 0.9, "ai:flow/test": 0.1},
                "passing": {"ai:flow/test": 1.0}},
      "default": {"ai:flow/test": 0.5, "ai:flow/review": 0.5}
    }

With two key fields the table nests two levels (`{"failing": {"main": {...}}}`). A decision
whose key values have no entry gets `default`; without one, that decision is an error. An
optional `provenance` object says where a table came from (`plaudit signal learn` writes
one); lookups never read it.

The learned model format (`plaudit_router_model_v1`, written by `plaudit signal learn` when
the logged decisions list candidates that leave tasks out) nests the same way, but its leaves
hold an estimated value per task instead of probabilities::

    {
      "schema_version": "plaudit_router_model_v1",
      "key": ["context.ci_status"],
      "tasks": ["ai:flow/test", "ai:flow/fix-ci"],          (every task it may pick)
      "explore": 0.05,
      "values": {"failing": {"ai:flow/fix-ci": 0.71, "ai:flow/test": 0.32}},
      "default": {"ai:flow/fix-ci": 0.40, "ai:flow/test": 0.45},
      "provenance": {...}
    }

A decision's distribution is epsilon-greedy over the tasks it may pick: its candidates that
the model knows (all of `tasks` when it lists none of them): `explore` spread evenly over
them, the rest on the one with the highest value (the first in `tasks` of equals). Values,
not probabilities, are what make a leaf still right when the candidates leave its best task
out.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.inputs import STDIN

SCHEMA_VERSION = "plaudit_router_policy_v1"
MODEL_VERSION = "plaudit_router_model_v1"
#: How far a distribution's sum may be from 1.
SUM_TOLERANCE = 1e-6
#: Fields of a decision a policy (and a key path) may look at: what the router knew before it
#: chose. The chosen task, its confidence and propensity, and everything from the outcome are
#: left out: a policy that looked at the logged choice would not be a policy the estimators
#: can evaluate.
DECISION_FIELDS = (
    "decision_id",
    "ts_ms",
    "source",
    "session_id",
    "project_fingerprint",
    "project_path",
    "git_branch",
    "git_commit",
    "user_hash",
    "user_intent",
    "context",
    "candidates",
    "event_history",
)
MAX_KEY_FIELDS = 8
_TABLE_FIELDS = ("schema_version", "key", "table", "default", "provenance")
_MODEL_FIELDS = ("schema_version", "key", "tasks", "explore", "values", "default", "provenance")
_INDEX = re.compile(r"^-?[0-9]{1,9}$")
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_canon = msgspec.json.Encoder(order="sorted").encode

#: A checked distribution: parallel tuples of tasks and their probabilities (zeros dropped).
Distribution = tuple[tuple[str, ...], tuple[float, ...]]
MISSING = object()


def check_distribution(value: Any, *, where: str) -> Distribution:
    """`value` as a checked distribution: an object of task -> probability, every probability
    a finite number >= 0, summing to 1 (within SUM_TOLERANCE)."""
    if not isinstance(value, Mapping):
        raise ValidationError(
            "policy",
            f"must be an object of task -> probability, got {type(value).__name__}",
            where=where,
        )
    if not value:
        raise ValidationError("policy", "names no task: give at least one", where=where)
    tasks: list[str] = []
    probs: list[float] = []
    total = 0.0
    for task, p in value.items():
        if not isinstance(task, str) or not task:
            raise ValidationError("policy", f"task {task!r} is not a non-empty string", where=where)
        if isinstance(p, bool) or not isinstance(p, int | float):
            raise ValidationError(
                "policy", f"probability of {task!r} is not a number: {p!r}", where=where
            )
        f = float(p)
        if not math.isfinite(f) or f < 0.0:
            raise ValidationError(
                "policy", f"probability of {task!r} must be a finite number >= 0, got {p!r}",
                where=where,
            )  # fmt: skip
        total += f
        if f > 0.0:
            tasks.append(task)
            probs.append(f)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValidationError(
            "policy", f"probabilities sum to {total:.9g}, not 1 (tolerance {SUM_TOLERANCE:g})",
            where=where,
        )  # fmt: skip
    return tuple(tasks), tuple(probs)


def check_key_paths(paths: Any, *, what: str, where: str | None) -> tuple[tuple[str, ...], ...]:
    """Field paths (`context.ci_status`, `git_branch`) split at dots; each must start at one of
    DECISION_FIELDS. A single string means one path."""
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list | tuple):
        raise ValidationError(
            what, f"must be a field path or a list of them, got {type(paths).__name__}", where=where
        )
    if len(paths) > MAX_KEY_FIELDS:
        raise ValidationError(what, f"more than {MAX_KEY_FIELDS} fields", where=where)
    out = []
    for path in paths:
        if not isinstance(path, str) or not path:
            raise ValidationError(what, f"{path!r} is not a field path", where=where)
        parts = tuple(path.split("."))
        if parts[0] not in DECISION_FIELDS:
            raise ValidationError(
                what,
                f"{path!r} does not start at a decision field"
                f" (one of: {', '.join(DECISION_FIELDS)})",
                where=where,
            )
        if any(not p for p in parts):
            raise ValidationError(what, f"{path!r} has an empty part", where=where)
        out.append(parts)
    return tuple(out)


def key_text(decision: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path` as a table key (see `as_key`)."""
    return walk(decision, path, 0)


def walk(value: Any, path: tuple[str, ...], start: int) -> Any:
    """`as_key` of the value at `path[start:]` inside `value`. A part that is an integer
    indexes a list, counting from the end when negative (`event_history.-1.chosen_task`)."""
    for part in path[start:]:
        if type(value) is dict or isinstance(value, Mapping):
            value = value.get(part)
        elif type(value) is list and _INDEX.match(part):
            i = int(part)
            if not -len(value) <= i < len(value):
                return MISSING
            value = value[i]
        else:
            return MISSING
        if value is None:
            return MISSING
    return as_key(value)


def candidate_tasks(candidates: Any) -> Iterator[str]:
    """Task names in a decision's `candidates`: strings, or objects' `task` (or `name`)."""
    if not isinstance(candidates, list):
        return
    for c in candidates:
        if type(c) is str:
            yield c
        elif isinstance(c, dict):
            name = c.get("task", c.get("name"))
            if isinstance(name, str):
                yield name


def as_key(value: Any) -> Any:
    """A value as a table key: a string as it is, `true`/`false`, a number or any other JSON
    value as its compact JSON text (objects with sorted keys); MISSING for null."""
    if type(value) is str:
        return value
    if value is None:
        return MISSING
    try:
        return _canon(value).decode()
    except (TypeError, msgspec.EncodeError):
        return MISSING


class Policy:
    """A checked candidate policy. `distribution(decision)` gives its Distribution;
    `tasks()` every task a table can name (None for a callable: known only per decision).
    `for_key(values, candidates)` is the fast path of a policy that reads only its key's
    values and the candidates (None: no entry, or a policy without one)."""

    kind = ""
    name = ""
    digest: str | None = None
    key: tuple[tuple[str, ...], ...] = ()
    provenance: dict[str, Any] | None = None

    def distribution(self, decision: Mapping[str, Any]) -> Distribution:
        raise NotImplementedError

    def for_key(self, values: Sequence[Any], candidates: Any) -> Distribution | None:
        return None

    def tasks(self) -> dict[str, str] | None:
        """task -> where the table names it first (for errors about unknown tasks)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "key": [".".join(k) for k in self.key]}


class TablePolicy(Policy):
    kind = "table"
    version = SCHEMA_VERSION
    fields = _TABLE_FIELDS
    entries = "table"

    def __init__(self, spec: Any, *, name: str = "policy") -> None:
        self.name = name
        if not isinstance(spec, Mapping):
            raise ValidationError(
                "policy", f"must be a JSON object, got {type(spec).__name__}", where=name
            )
        unknown = [k for k in spec if k not in self.fields]
        if unknown:
            raise ValidationError(
                "policy",
                f"unknown field {unknown[0]!r} (a {self.kind} has: {', '.join(self.fields)})",
                where=name,
            )
        version = spec.get("schema_version", self.version)
        if version != self.version:
            raise ValidationError(
                "policy", f"schema_version {version!r} is not {self.version!r}", where=name
            )
        provenance = spec.get("provenance")
        if provenance is not None and not isinstance(provenance, Mapping):
            raise ValidationError("policy", "provenance must be an object", where=name)
        self.provenance = dict(provenance) if provenance is not None else None
        try:
            self.digest = hashlib.sha256(_canon(spec)).hexdigest()
        except (TypeError, msgspec.EncodeError):
            raise ValidationError("policy", "is not JSON data", where=name) from None
        self._begin(spec)
        self.key = check_key_paths(spec.get("key", []), what="policy.key", where=name)
        table = spec.get(self.entries, {})
        if table and not self.key:
            what = "a table" if self.entries == "table" else "values"
            raise ValidationError("policy", f"has {what} but no key to look it up by", where=name)
        self._where: dict[str, str] = {}
        self.table = self._check_level(table, 0, self.entries)
        self.default: Any = None
        if spec.get("default") is not None:
            self.default = self._leaf(spec["default"], "default")
        self._end()

    def _begin(self, spec: Mapping[str, Any]) -> None:
        """Read what the format has besides key, entries and default (nothing, for a table)."""

    def _end(self) -> None:
        if not self.table and self.default is None:
            raise ValidationError("policy", "has neither a table nor a default", where=self.name)

    def _check_level(self, level: Any, depth: int, where: str) -> dict[str, Any]:
        if not isinstance(level, Mapping):
            raise ValidationError(
                "policy", f"must be an object, got {type(level).__name__}", where=self._at(where)
            )
        out: dict[str, Any] = {}
        for value, sub in level.items():
            at = f"{where}.{value}"
            if depth + 1 < len(self.key):
                out[value] = self._check_level(sub, depth + 1, at)
            else:
                out[value] = self._leaf(sub, at)
        return out

    def _leaf(self, value: Any, where: str) -> Distribution:
        dist = check_distribution(value, where=self._at(where))
        for task in dist[0]:
            self._where.setdefault(task, where)
        if isinstance(value, Mapping):  # tasks named with probability 0 are still named
            for task in value:
                self._where.setdefault(task, where)
        return dist

    def _at(self, where: str) -> str:
        return f"{self.name}: {where}"

    def tasks(self) -> dict[str, str]:
        return {task: self._at(where) for task, where in self._where.items()}

    def for_key(self, values: Sequence[Any], candidates: Any) -> Distribution | None:
        return self.lookup(values)

    def lookup(self, values: Sequence[Any]) -> Any:
        """The leaf for the key's values (one per key field), else `default`."""
        if not self.key:
            return self.default
        level: Any = self.table
        for v in values:  # the levels nest exactly len(self.key) deep (_check_level)
            if v is MISSING:
                return self.default
            level = level.get(v)
            if level is None:
                return self.default
        return level

    def distribution(self, decision: Mapping[str, Any]) -> Distribution:
        values = [key_text(decision, p) for p in self.key]
        dist = self.for_key(values, decision.get("candidates"))
        if dist is None:
            shown = ", ".join(
                f"{'.'.join(p)}={'(missing)' if v is MISSING else repr(v)}"
                for p, v in zip(self.key, values, strict=True)
            )
            raise ValidationError(
                "policy",
                f"no entry for {shown} (decision {decision.get('decision_id')!r}) and no default",
                where=self.name,
            )
        return dist


class ModelPolicy(TablePolicy):
    """A learned model (`plaudit_router_model_v1`): per key, an estimated value per task; the
    distribution is epsilon-greedy over the decision's candidates that the model knows."""

    kind = "model"
    version = MODEL_VERSION
    fields = _MODEL_FIELDS
    entries = "values"

    def _begin(self, spec: Mapping[str, Any]) -> None:
        tasks = spec.get("tasks")
        if (
            not isinstance(tasks, list)
            or not tasks
            or not all(isinstance(t, str) and t for t in tasks)
            or len(set(tasks)) != len(tasks)
        ):
            raise ValidationError(
                "policy", "tasks must be a list of distinct task names", where=self._at("tasks")
            )
        explore = spec.get("explore")
        if isinstance(explore, bool) or not isinstance(explore, int | float):
            explore = -1.0
        if not 0.0 <= explore <= 1.0:
            raise ValidationError(
                "policy", "explore must be a number in [0, 1]", where=self._at("explore")
            )
        self.task_list = tuple(tasks)
        self.explore = float(explore)
        self._known = frozenset(tasks)

    def _end(self) -> None:
        if self.default is None:
            raise ValidationError("policy", "a model needs its default values", where=self.name)
        for task in self.task_list:
            self._where.setdefault(task, "tasks")

    def _leaf(self, value: Any, where: str) -> dict[str, float]:
        at = self._at(where)
        if not isinstance(value, Mapping):
            got = type(value).__name__
            raise ValidationError(
                "policy", f"must be an object of task -> value, got {got}", where=at
            )
        out = {}
        for task in self.task_list:
            v = value.get(task)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValidationError("policy", f"value of {task!r} must be a number", where=at)
            out[task] = float(v)
        extra = [t for t in value if t not in self._known]
        if extra:
            raise ValidationError("policy", f"task {extra[0]!r} is not in tasks", where=at)
        return out

    def for_key(self, values: Sequence[Any], candidates: Any) -> Distribution | None:
        leaf = self.lookup(values)
        if leaf is None:
            return None
        return self.choose(leaf, candidates)

    def choose(self, leaf: Mapping[str, float], candidates: Any) -> Distribution:
        """Epsilon-greedy over the tasks the decision may have: its candidates the model
        knows, else every task."""
        known = self._known
        allowed = [t for t in candidate_tasks(candidates) if t in known]
        if allowed:
            allowed = [t for t in self.task_list if t in set(allowed)]
        else:
            allowed = list(self.task_list)
        best = max(allowed, key=leaf.__getitem__)  # the first of equals, in `tasks` order
        m = len(allowed)
        floor = self.explore / m
        probs = tuple(floor + (1.0 - self.explore) * (t == best) for t in allowed)
        if floor == 0.0:
            return (best,), (1.0,)
        return tuple(allowed), probs


class CallablePolicy(Policy):
    kind = "callable"

    def __init__(self, fn: Callable[[dict[str, Any]], Any], *, name: str) -> None:
        self.fn = fn
        self.name = name

    def distribution(self, decision: Mapping[str, Any]) -> Distribution:
        did = decision.get("decision_id")
        where = f"{self.name}, decision {did!r}"
        try:
            value = self.fn(dict(decision))
        except Exception as exc:
            raise ValidationError(
                "policy", f"raised {type(exc).__name__}: {exc}", where=where
            ) from None
        return check_distribution(value, where=where)


def table_or_model(spec: Any, *, name: str) -> TablePolicy:
    """A table (`plaudit_router_policy_v1`) or a learned model (`plaudit_router_model_v1`),
    by its `schema_version`."""
    if isinstance(spec, Mapping) and spec.get("schema_version") == MODEL_VERSION:
        return ModelPolicy(spec, name=name)
    return TablePolicy(spec, name=name)


def import_callable(spec: str) -> CallablePolicy:
    """`module:function`, imported from the current directory first (as uvicorn finds an app),
    then from the installed packages: the `plaudit` script's own directory is not where a
    user's policy lives."""
    module_name, _, attr = spec.partition(":")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValidationError("policy", f"cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:  # the module itself failed while loading
        raise ValidationError(
            "policy", f"importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if added:
            sys.path.remove(cwd)
    fn = getattr(module, attr, None)
    if fn is None:
        raise ValidationError("policy", f"module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise ValidationError("policy", f"{spec!r} is not callable")
    return CallablePolicy(fn, name=spec)


def load_policy(policy: Any) -> Policy:
    """A Policy from what a caller may pass: a Policy, a path to a JSON table file ("-" for
    stdin), a `module:function` string, a table as a mapping, or a Python callable.

    A string that names an existing file is read as a table; otherwise it must look like
    `module:function`."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return table_or_model(policy, name="policy")
    if isinstance(policy, str | os.PathLike):
        text = os.fspath(policy)
        if not text or "\x00" in text:
            raise ValidationError("policy", "must be a JSON file or module:function")
        path = Path(text).expanduser()
        if text == STDIN or path.is_file():
            from plaudit.inputs import parse, read_bytes

            data = read_bytes(text if text == STDIN else str(path), what="policy")
            name = "stdin" if text == STDIN else text
            spec = parse(data, what="policy", where=name, lines=False)
            return table_or_model(spec, name=name)
        if isinstance(policy, str) and _CALLABLE.match(text):
            return import_callable(text)
        if path.exists():
            raise ValidationError("policy", f"{text!r} is not a regular file")
        raise ValidationError(
            "policy",
            f"{text!r} is neither a JSON table file that exists nor module:function",
        )
    if callable(policy):
        name = getattr(policy, "__qualname__", None) or type(policy).__name__
        module = getattr(policy, "__module__", None)
        return CallablePolicy(policy, name=f"{module}:{name}" if module else name)
    raise ValidationError(
        "policy", f"must be a table, a file, module:function or a callable, not {type(policy)}"
    )


def check_tasks(
    names: Iterable[tuple[str, str]], known: Mapping[str, Any], *, limit: int = 20
) -> None:
    """Refuse a policy that routes to a task no logged decision chose or listed as a candidate:
    nothing was ever observed for it, so no estimator can say what it would earn (and it is
    most often a typo). `names` gives (task, where)."""
    for task, where in names:
        if task not in known:
            shown = sorted(known)[:limit]
            more = f", ... ({len(known)} in all)" if len(known) > limit else ""
            raise ValidationError(
                "policy",
                f"unknown task {task!r}: no logged decision chose it or listed it as a"
                f" candidate (known: {', '.join(shown) or 'none'}{more})",
                where=where,
            )
