"""Ledger configuration: categories, source kinds and rules, from the packaged defaults merged
with an optional user file. Config only shapes validation at record time; the projection never
reads it, so a rebuild gives the same state whatever the config says."""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from plaudit.errors import ConfigError

ENV_CONFIG = "PLAUDIT_LEDGER_CONFIG"
TYPES = ("reward", "penalty")
#: Categories plaudit itself writes; any sign, never recorded by hand.
SYSTEM_CATEGORIES = ("opening_balance", "audit_correction")


MISMATCH_MODES = ("halt", "warn")


@dataclass(frozen=True)
class Category:
    name: str
    type: str
    points: int
    source: str | None
    requires: dict[str, Any] = field(default_factory=dict)
    requires_min: dict[str, float] = field(default_factory=dict)
    #: field -> text: the field (a string or a list of strings) must contain the text.
    requires_match: dict[str, str] = field(default_factory=dict)
    #: at least one of these fields must be a non-empty list.
    requires_nonempty: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceKind:
    name: str
    file: str
    list: str
    declared: str | None
    recovery_category: str | None
    #: A record's own category field, mapped to a ledger category for recovery bookings.
    category_field: str | None = None
    category_map: dict[str, str] = field(default_factory=dict)
    #: The record field whose date a recovery transaction is booked at.
    date_field: str | None = None
    #: Triggers (seed 003): points owed for a record that declares none.
    trigger_observation: str | None = None  # each matching entry of `observations`
    trigger_calls: tuple[str, ...] = ()  # a non-empty list in one of these fields
    trigger_category: str | None = None


@dataclass(frozen=True)
class Schedule:
    """Automatic work, run wherever the ledger is written and by `plaudit ledger watch`."""

    reconcile_every: int = 10
    reconcile_seconds: int = 3600
    on_mismatch: str = "halt"
    sources_dir: str | None = None
    backup_dir: str | None = None
    backup_every: int = 10
    backup_keep: int = 10
    reports_dir: str | None = None
    report_periods: tuple[str, ...] = ("daily", "weekly", "monthly")
    audit_days: int = 7
    audit_dir: str | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    type: str
    match: dict[str, Any]
    category: str
    action: str
    points: int | None = None


@dataclass(frozen=True)
class LedgerConfig:
    categories: dict[str, Category]
    sources: dict[str, SourceKind]
    rules: list[Rule]
    base_autonomy: float = 100.0
    checkpoint_every: int = 250
    origin: str = "defaults"
    schedule: Schedule = field(default_factory=Schedule)

    def category(self, name: str) -> Category:
        from plaudit.errors import ValidationError

        if not isinstance(name, str) or name not in self.categories:
            known = ", ".join(sorted(self.categories))
            raise ValidationError("category", f"unknown category {name!r} (known: {known})")
        return self.categories[name]

    def source_kind(self, name: str) -> SourceKind:
        """Accept a kind (`mistake`) or its file name (`mistakes.json`)."""
        from plaudit.errors import ValidationError

        if name in self.sources:
            return self.sources[name]
        for kind in self.sources.values():
            if kind.file == name:
                return kind
        known = ", ".join(sorted(self.sources))
        raise ValidationError("source", f"unknown source kind {name!r} (known: {known})")


def _defaults() -> dict[str, Any]:
    text = resources.files("plaudit.ledger").joinpath("categories.toml").read_text("utf-8")
    return tomllib.loads(text)


def _read_user(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read ledger config {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"ledger config {path} is malformed: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"ledger config {path} must be a table/object at the top level")
    return data


def _merge(base: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in user.items():
        if key in ("categories", "sources", *_SCHEDULE_TABLES) and isinstance(value, dict):
            out[key] = {**base.get(key, {}), **value}
        else:
            out[key] = value
    return out


_SCHEDULE_TABLES = ("reconcile", "backup", "reports", "audit")


def _path_in(value: Any, base: Path | None, where: str, bad: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise bad(where, "must be a path string")
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return str(path)


def _count(raw: dict[str, Any], key: str, default: int, where: str, bad: Any, low: int = 0) -> int:
    value = raw.get(key, default)
    if type(value) is not int or value < low:
        raise bad(f"{where}.{key}", f"must be an integer >= {low}")
    return value


def _schedule(data: dict[str, Any], base: Path | None, bad: Any) -> Schedule:
    tables = {}
    for name in _SCHEDULE_TABLES:
        raw = data.get(name) or {}
        if not isinstance(raw, dict):
            raise bad(name, "must be a table")
        tables[name] = raw
    rec, bak, rep, aud = (tables[n] for n in _SCHEDULE_TABLES)
    mode = rec.get("on_mismatch", "halt")
    if mode not in MISMATCH_MODES:
        raise bad("reconcile.on_mismatch", f"must be one of {', '.join(MISMATCH_MODES)}")
    periods = rep.get("periods", ["daily", "weekly", "monthly"])
    if not isinstance(periods, list) or any(
        p not in ("daily", "weekly", "monthly") for p in periods
    ):
        raise bad("reports.periods", "must be a list of daily, weekly, monthly")
    return Schedule(
        reconcile_every=_count(rec, "every_transactions", 10, "reconcile", bad),
        reconcile_seconds=_count(rec, "every_seconds", 3600, "reconcile", bad),
        on_mismatch=mode,
        sources_dir=_path_in(rec.get("sources_dir"), base, "reconcile.sources_dir", bad),
        backup_dir=_path_in(bak.get("dir"), base, "backup.dir", bad),
        backup_every=_count(bak, "every_transactions", 10, "backup", bad, 1),
        backup_keep=_count(bak, "keep", 10, "backup", bad, 1),
        reports_dir=_path_in(rep.get("dir"), base, "reports.dir", bad),
        report_periods=tuple(periods),
        audit_days=_count(aud, "every_days", 7, "audit", bad),
        audit_dir=_path_in(aud.get("export_dir"), base, "audit.export_dir", bad),
    )


def _build(data: dict[str, Any], origin: str, base: Path | None = None) -> LedgerConfig:
    def bad(where: str, reason: str) -> ConfigError:
        return ConfigError(f"ledger config {origin}: {where}: {reason}")

    sources: dict[str, SourceKind] = {}
    for name, raw in (data.get("sources") or {}).items():
        if not isinstance(raw, dict) or not isinstance(raw.get("file"), str):
            raise bad(f"sources.{name}", "needs a `file` string")
        calls = raw.get("trigger_calls", [])
        if isinstance(calls, str):
            calls = [calls]
        cmap = raw.get("category_map") or {}
        if not isinstance(cmap, dict) or not all(isinstance(v, str) for v in cmap.values()):
            raise bad(f"sources.{name}.category_map", "must map names to category names")
        sources[name] = SourceKind(
            name=name,
            file=raw["file"],
            list=str(raw.get("list", "")),
            declared=raw.get("declared"),
            recovery_category=raw.get("recovery_category"),
            category_field=raw.get("category_field"),
            category_map=dict(cmap),
            date_field=raw.get("date_field"),
            trigger_observation=raw.get("trigger_observation"),
            trigger_calls=tuple(str(c) for c in calls),
            trigger_category=raw.get("trigger_category"),
        )
    categories: dict[str, Category] = {}
    for name, raw in (data.get("categories") or {}).items():
        where = f"categories.{name}"
        if name in SYSTEM_CATEGORIES:
            raise bad(where, "is reserved for plaudit's own transactions")
        if not isinstance(raw, dict):
            raise bad(where, "must be a table")
        kind = raw.get("type")
        points = raw.get("points")
        if kind not in TYPES:
            raise bad(f"{where}.type", f"must be one of {', '.join(TYPES)}")
        if type(points) is not int:
            raise bad(f"{where}.points", "must be an integer")
        if (kind == "reward" and points <= 0) or (kind == "penalty" and points >= 0):
            raise bad(f"{where}.points", f"{points} has the wrong sign for a {kind}")
        src = raw.get("source")
        if src is not None and src not in sources:
            raise bad(f"{where}.source", f"unknown source kind {src!r}")
        categories[name] = Category(
            name=name,
            type=kind,
            points=points,
            source=src,
            requires=dict(raw.get("requires") or {}),
            requires_min=dict(raw.get("requires_min") or {}),
            requires_match=dict(raw.get("requires_match") or {}),
            requires_nonempty=tuple(raw.get("requires_nonempty") or ()),
        )
    for kind in sources.values():
        for key in ("recovery_category", "trigger_category"):
            value = getattr(kind, key)
            if value and value not in categories:
                raise bad(f"sources.{kind.name}.{key}", f"{value!r} is not a known category")
        for src, dst in kind.category_map.items():
            if dst not in categories:
                raise bad(f"sources.{kind.name}.category_map.{src}", f"unknown category {dst!r}")
    rules: list[Rule] = []
    for i, raw in enumerate(data.get("rules") or []):
        where = f"rules[{i}]"
        if not isinstance(raw, dict):
            raise bad(where, "must be a table")
        for key in ("name", "type", "category"):
            if not isinstance(raw.get(key), str):
                raise bad(f"{where}.{key}", "is required (a string)")
        if raw["category"] not in categories:
            raise bad(f"{where}.category", f"unknown category {raw['category']!r}")
        points = raw.get("points")
        if points is not None and type(points) is not int:
            raise bad(f"{where}.points", "must be an integer")
        rules.append(
            Rule(
                name=raw["name"],
                type=raw["type"],
                match=dict(raw.get("match") or {}),
                category=raw["category"],
                action=str(raw.get("action") or raw["name"]),
                points=points,
            )
        )
    autonomy = data.get("base_autonomy", 100.0)
    every = data.get("checkpoint_every", 250)
    if not isinstance(autonomy, int | float) or not 0 <= autonomy <= 100:
        raise bad("base_autonomy", "must be a number from 0 to 100")
    if type(every) is not int or every < 1:
        raise bad("checkpoint_every", "must be a positive integer")
    schedule = _schedule(data, base, bad)
    return LedgerConfig(categories, sources, rules, float(autonomy), every, origin, schedule)


def load_config(path: str | os.PathLike[str] | None = None) -> LedgerConfig:
    """Defaults, merged with `path`, else with $PLAUDIT_LEDGER_CONFIG when set."""
    chosen = path if path is not None else os.environ.get(ENV_CONFIG) or None
    data = _defaults()
    origin = "defaults"
    base: Path | None = None
    if chosen is not None:
        data = _merge(data, _read_user(Path(chosen)))
        origin = str(chosen)
        base = Path(chosen).resolve().parent  # relative paths are relative to the file
    return _build(data, origin, base)
