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
whose key values have no entry gets `default`; without one, that decision is an error.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.inputs import STDIN

SCHEMA_VERSION = "plaudit_router_policy_v1"
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
_TABLE_FIELDS = ("schema_version", "key", "table", "default")
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
    """`as_key` of the value at `path[start:]` inside `value`."""
    for part in path[start:]:
        if type(value) is not dict and not isinstance(value, Mapping):
            return MISSING
        value = value.get(part)
        if value is None:
            return MISSING
    return as_key(value)


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
    `tasks()` every task a table can name (None for a callable: known only per decision)."""

    kind = ""
    name = ""
    key: tuple[tuple[str, ...], ...] = ()

    def distribution(self, decision: Mapping[str, Any]) -> Distribution:
        raise NotImplementedError

    def tasks(self) -> dict[str, str] | None:
        """task -> where the table names it first (for errors about unknown tasks)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "key": [".".join(k) for k in self.key]}


class TablePolicy(Policy):
    kind = "table"

    def __init__(self, spec: Any, *, name: str = "policy") -> None:
        self.name = name
        if not isinstance(spec, Mapping):
            raise ValidationError(
                "policy", f"must be a JSON object, got {type(spec).__name__}", where=name
            )
        unknown = [k for k in spec if k not in _TABLE_FIELDS]
        if unknown:
            raise ValidationError(
                "policy",
                f"unknown field {unknown[0]!r} (a table has: {', '.join(_TABLE_FIELDS)})",
                where=name,
            )
        version = spec.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ValidationError(
                "policy", f"schema_version {version!r} is not {SCHEMA_VERSION!r}", where=name
            )
        self.key = check_key_paths(spec.get("key", []), what="policy.key", where=name)
        table = spec.get("table", {})
        if table and not self.key:
            raise ValidationError("policy", "has a table but no key to look it up by", where=name)
        self._where: dict[str, str] = {}
        self.table = self._check_level(table, 0, "table")
        self.default: Distribution | None = None
        if spec.get("default") is not None:
            self.default = self._leaf(spec["default"], "default")
        if not self.table and self.default is None:
            raise ValidationError("policy", "has neither a table nor a default", where=name)

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

    def lookup(self, values: Sequence[Any]) -> Distribution | None:
        level: Any = self.table
        for v in values:
            if v is MISSING or not isinstance(level, dict):
                return self.default
            level = level.get(v)
            if level is None:
                return self.default
        return level if isinstance(level, tuple) else self.default

    def distribution(self, decision: Mapping[str, Any]) -> Distribution:
        values = [key_text(decision, p) for p in self.key]
        dist = self.lookup(values)
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
        return TablePolicy(policy, name="policy")
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
            return TablePolicy(spec, name=name)
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
