"""Quality gates over an export summary: refuse to train on telemetry that is not good enough.

The six reference gates, their flag names, defaults and the audit.json layout follow
`router_signal_audit.py`; each threshold can also come from the environment
(`ROUTER_SIGNAL_MIN_DECISIONS`, ...). Three extra gates are off unless a threshold is given.
Precedence: explicit argument, then environment, then default.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from plaudit.errors import ValidationError

SCHEMA_VERSION = "flow_router_signal_audit_v1"
ENV_PREFIX = "ROUTER_SIGNAL_"

#: name -> (default, op, kind); kind is int or float, op ">=" or "<=".
GATES: dict[str, tuple[float | int, str, type]] = {
    "min_decisions": (500, ">=", int),
    "min_joined": (400, ">=", int),
    "min_link_rate": (0.80, ">=", float),
    "max_task_dominance": (0.55, "<=", float),
    "min_overrides": (20, ">=", int),
    "min_failureish": (60, ">=", int),
}
#: Extra gates, off by default.
EXTRA_GATES: dict[str, tuple[str, type]] = {
    "max_split_leakage": ("<=", float),
    "min_rows_per_task": (">=", int),
    "max_duplicate_rate": ("<=", float),
}


def env_name(gate: str) -> str:
    return ENV_PREFIX + gate.upper()


def _parse(name: str, raw: Any, kind: type, where: str) -> float | int:
    if isinstance(raw, str):
        try:
            value: Any = kind(raw.strip())
        except ValueError:
            raise ValidationError(
                name, f"{raw!r} is not a valid {kind.__name__}", where=where
            ) from None
    elif isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValidationError(name, f"must be a number, got {type(raw).__name__}", where=where)
    else:
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValidationError(name, f"must be an integer, got {raw!r}", where=where)
        value = kind(raw)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(name, f"must be finite, got {raw!r}", where=where)
    return value


def thresholds(
    overrides: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None
) -> dict[str, float | int]:
    """Effective thresholds for every enabled gate."""
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    env = os.environ if env is None else env
    unknown = set(given) - set(GATES) - set(EXTRA_GATES)
    if unknown:
        raise ValidationError(sorted(unknown)[0], "is not a gate name")
    out: dict[str, float | int] = {}
    for name, (default, _, kind) in GATES.items():
        if name in given:
            out[name] = _parse(name, given[name], kind, "argument")
        elif env.get(env_name(name), "").strip():
            out[name] = _parse(name, env[env_name(name)], kind, f"${env_name(name)}")
        else:
            out[name] = default
    for name, (_, kind) in EXTRA_GATES.items():
        if name in given:
            out[name] = _parse(name, given[name], kind, "argument")
        elif env.get(env_name(name), "").strip():
            out[name] = _parse(name, env[env_name(name)], kind, f"${env_name(name)}")
    return out


def _section(summary: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = summary.get(key)
    return value if isinstance(value, dict) else {}


def _num(section: str, key: str, value: Any, kind: type, default: Any) -> Any:
    """The reference's `int(x or 0)` / `float(x or d)` (so "12" is 12 and true is 1); where that
    would raise, or give NaN or an infinity, an error naming the field instead."""
    if not value:
        return default
    try:
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        shown = repr(value) if len(repr(value)) <= 40 else type(value).__name__
        raise ValidationError(
            f"{section}.{key}", f"must be a number, got {shown}", where="summary"
        ) from None
    if isinstance(out, float) and not math.isfinite(out):
        raise ValidationError(f"{section}.{key}", "must be finite", where="summary")
    return out


def actuals(
    summary: Mapping[str, Any], gates: Iterable[str] | None = None
) -> dict[str, float | int | None]:
    """The measured value of each gate in `gates` (default: all), read from a summary
    (plaudit's or the reference's). Only the fields those gates use are read, so a field the
    reference never looks at cannot fail an audit that does not use it either."""
    if not isinstance(summary, Mapping):
        raise ValidationError("summary", "must be a JSON object")
    counts = _section(summary, "counts")
    quality = _section(summary, "quality")
    dist = _section(summary, "distributions")

    def count(key: str) -> int:
        return _num("counts", key, counts.get(key), int, 0)

    def failureish() -> int:
        outcomes = dist.get("outcomes") if isinstance(dist.get("outcomes"), dict) else {}
        # isinstance, as the reference checks: a `true` counts as 1 there.
        return sum(
            int(v)
            for k in ("partial", "failure", "wasted")
            if isinstance(v := outcomes.get(k), int)
        )

    def split_leakage() -> float | None:
        leakage = quality.get("split_leakage_rate")
        if leakage is None:
            return None
        return float(_num("quality", "split_leakage_rate", leakage, float, 0.0))

    def rows_per_task() -> int:
        tasks = dist.get("chosen_tasks") if isinstance(dist.get("chosen_tasks"), dict) else {}
        values = [int(v) for v in tasks.values() if isinstance(v, int)]
        return min(values) if values else 0

    def duplicate_rate() -> float:
        decisions, dup_ids = count("decisions"), count("duplicate_decision_ids")
        dropped = count("dropped_duplicate_rows")
        try:
            return round((dup_ids + dropped) / max(1, decisions + dup_ids), 6)
        except OverflowError:
            raise ValidationError(
                "counts", "duplicate counts too large to divide", where="summary"
            ) from None

    readers: dict[str, Callable[[], float | int | None]] = {
        "min_decisions": lambda: count("decisions"),
        "min_joined": lambda: count("joined_rows"),
        "min_link_rate": lambda: _num(
            "quality",
            "decision_outcome_link_rate",
            quality.get("decision_outcome_link_rate"),
            float,
            0.0,
        ),
        # `or 1.0` as in the reference: no rows at all counts as total dominance.
        "max_task_dominance": lambda: _num(
            "quality", "task_dominance", quality.get("task_dominance"), float, 1.0
        ),
        "min_overrides": lambda: count("overrides"),
        "min_failureish": failureish,
        "max_split_leakage": split_leakage,
        "min_rows_per_task": rows_per_task,
        "max_duplicate_rate": duplicate_rate,
    }
    names = list(readers) if gates is None else list(gates)
    return {name: readers[name]() for name in names}


def evaluate(
    summary: Mapping[str, Any],
    limits: Mapping[str, float | int],
) -> dict[str, dict[str, Any]]:
    """{gate: {actual, threshold, pass}} in the reference's order, extra gates after."""
    measured = actuals(summary, limits)
    ops = {name: op for name, (_, op, _) in GATES.items()}
    ops.update({name: op for name, (op, _) in EXTRA_GATES.items()})
    gates: dict[str, dict[str, Any]] = {}
    for name, threshold in limits.items():
        actual = measured[name]
        if actual is None:
            passed = False  # e.g. a reference summary has no split leakage figure
        elif ops[name] == ">=":
            passed = actual >= threshold
        else:
            passed = actual <= threshold
        gates[name] = {"actual": actual, "threshold": threshold, "pass": bool(passed)}
        if actual is None:
            gates[name]["note"] = "the summary does not report this figure; re-export with plaudit"
    return gates


def gate_list(gates: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The dashboard's shape: a list with the comparison spelled out. A verdict is `pass`,
    as in the audit report; `passed` is its deprecated alias, kept for 0.1 clients."""
    ops = {name: op for name, (_, op, _) in GATES.items()}
    ops.update({name: op for name, (op, _) in EXTRA_GATES.items()})
    return [
        {
            "name": name,
            "actual": g["actual"],
            "threshold": g["threshold"],
            "op": ops[name],
            "pass": g["pass"],
            "passed": g["pass"],
        }
        for name, g in gates.items()
    ]


def load_summary(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    text_path = os.fspath(path)
    if not text_path or "\x00" in text_path:
        raise ValidationError("summary", "must be a non-empty path")
    p = Path(text_path).expanduser().resolve()
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValidationError("summary", f"cannot read {str(p)!r}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValidationError("summary", f"{str(p)!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValidationError("summary", f"{str(p)!r} is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise ValidationError("summary", f"{str(p)!r} is not a JSON object")
    return p, data


def audit(
    summary: Mapping[str, Any] | str | os.PathLike[str],
    *,
    limits: Mapping[str, Any] | None = None,
    report_out: str | os.PathLike[str] | None = None,
    write: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Audit a summary (a mapping or a summary.json path) and return the report.

    A path's report goes to `report_out`, else audit.json beside it (as the reference does);
    a mapping's report is written only when `report_out` is given.
    """
    effective = thresholds(limits, env=env)
    if isinstance(summary, Mapping):
        summary_path: Path | None = None
        data: Mapping[str, Any] = summary
    else:
        summary_path, data = load_summary(summary)
    gates = evaluate(data, effective)
    ok = all(g["pass"] for g in gates.values())
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "summary": str(summary_path) if summary_path is not None else None,
        "pass": ok,
        "gates": gates,
    }
    target: Path | None = None
    if report_out is not None:
        text = os.fspath(report_out)
        if not text or "\x00" in text:
            raise ValidationError("report_out", "must be a non-empty path")
        target = Path(text).expanduser().resolve()
    elif summary_path is not None:
        target = summary_path.parent / "audit.json"
    if write and target is not None:
        from plaudit.files import atomic_write

        body = (json.dumps(report, indent=2) + "\n").encode()
        try:
            # The audit has always made its report's directory; atomic_write makes none.
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, lambda f: f.write(body))
        except OSError as exc:
            raise ValidationError(
                "report_out", f"cannot write {str(target)!r}: {exc.strerror or exc}"
            ) from None
        report["report"] = str(target)
    return report
