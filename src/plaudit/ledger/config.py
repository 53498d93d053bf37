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


@dataclass(frozen=True)
class Category:
    name: str
    type: str
    points: int
    source: str | None
    requires: dict[str, Any] = field(default_factory=dict)
    requires_min: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceKind:
    name: str
    file: str
    list: str
    declared: str | None
    recovery_category: str | None


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
        if key in ("categories", "sources") and isinstance(value, dict):
            out[key] = {**base.get(key, {}), **value}
        else:
            out[key] = value
    return out


def _build(data: dict[str, Any], origin: str) -> LedgerConfig:
    def bad(where: str, reason: str) -> ConfigError:
        return ConfigError(f"ledger config {origin}: {where}: {reason}")

    sources: dict[str, SourceKind] = {}
    for name, raw in (data.get("sources") or {}).items():
        if not isinstance(raw, dict) or not isinstance(raw.get("file"), str):
            raise bad(f"sources.{name}", "needs a `file` string")
        sources[name] = SourceKind(
            name=name,
            file=raw["file"],
            list=str(raw.get("list", "")),
            declared=raw.get("declared"),
            recovery_category=raw.get("recovery_category"),
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
        )
    for kind in sources.values():
        if kind.recovery_category and kind.recovery_category not in categories:
            raise bad(f"sources.{kind.name}.recovery_category", "is not a known category")
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
    base = data.get("base_autonomy", 100.0)
    every = data.get("checkpoint_every", 250)
    if not isinstance(base, int | float) or not 0 <= base <= 100:
        raise bad("base_autonomy", "must be a number from 0 to 100")
    if type(every) is not int or every < 1:
        raise bad("checkpoint_every", "must be a positive integer")
    return LedgerConfig(categories, sources, rules, float(base), every, origin)


def load_config(path: str | os.PathLike[str] | None = None) -> LedgerConfig:
    """Defaults, merged with `path`, else with $PLAUDIT_LEDGER_CONFIG when set."""
    chosen = path if path is not None else os.environ.get(ENV_CONFIG) or None
    data = _defaults()
    origin = "defaults"
    if chosen is not None:
        data = _merge(data, _read_user(Path(chosen)))
        origin = str(chosen)
    return _build(data, origin)
