"""Source records (mistakes, patterns, memory entities, MCP chains) as events, the cross-check
each transaction makes against them, and reconciliation of ledger sums with what they declare.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from plaudit.errors import NotFoundError, ValidationError
from plaudit.events import Event, encode_json, make_event
from plaudit.ledger import eventtypes as et
from plaudit.ledger.config import Category, LedgerConfig, SourceKind
from plaudit.ledger.jsonfile import load_json_file
from plaudit.ledger.spec import MAX_POINTS
from plaudit.store.backend import Tx

_KEY_FIELDS = ("id", "name", "pattern_id", "error_id", "key")


class SourceImport(msgspec.Struct):
    directory: str
    files: dict[str, int]
    missing: list[str]
    appended: int
    unchanged: int
    removed: int = 0
    #: Transactions booked for the records' triggers, and their points.
    booked: int = 0
    booked_points: int = 0
    #: Records whose trigger could not be booked, each with why (reconcile shows them missing).
    not_booked: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Why nothing was booked at all (recording halted, `book=False`), else None.
    booking: str | None = None


@dataclass(frozen=True)
class SourceFiles:
    """A memory-bank folder read and checked, with nothing written yet (`read_source_files`):
    the source events it yields and, per kind whose file was found, the keys it holds."""

    directory: Path
    events: list[Event]
    files: dict[str, int]
    held: dict[str, dict[str, set[str]]]
    missing: list[str]
    ts_ms: int


def read_source_files(cfg: LedgerConfig, directory: str | os.PathLike[str]) -> SourceFiles:
    """Every file parsed and every record checked before anything is written, so a refused
    file changes nothing, and creates nothing."""
    from plaudit.ids import now_ms

    d = Path(directory)
    ts = now_ms()
    events, files, held = read_sources(cfg, d, ts)
    missing = sorted({k.file for k in cfg.sources.values()} - set(files))
    return SourceFiles(d, events, files, held, missing, ts)


def record_date(record: Mapping[str, Any], field: str | None) -> int | None:
    """A record's own date (e.g. a mistake's `occurred_at`) in ms, when it has a valid one."""
    from datetime import datetime

    value = record.get(field) if field else None
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None
    return int(dt.timestamp() * 1000)


def _dig(doc: Any, dotted: str) -> Any:
    cur = doc
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def records_of(kind: SourceKind, doc: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """The (key, record) pairs a memory-bank file holds for one source kind."""
    if not isinstance(doc, dict):
        raise ValidationError(
            kind.list or "document", "the top level must be an object", where=where
        )
    items = _dig(doc, kind.list) if kind.list else None
    if items is None and kind.name == "mcp_chain":
        mcp = doc.get("mcp_integration")
        if isinstance(mcp, dict) and "calls_made" in mcp:
            # A file with one unnamed chain: the calls of the current context.
            items = [{"id": str(mcp.get("chain_id") or "current"), **mcp}]
    if items is None:
        return []
    if not isinstance(items, list):
        raise ValidationError(
            kind.list, f"must be an array, got {type(items).__name__}", where=where
        )
    out: list[tuple[str, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(items):
        path = f"{kind.list}[{i}]"
        if not isinstance(rec, dict):
            raise ValidationError(path, f"must be an object, got {type(rec).__name__}", where=where)
        key = next((rec[k] for k in _KEY_FIELDS if isinstance(rec.get(k), str | int)), None)
        key = str(i) if key is None or isinstance(key, bool) else str(key)
        if not key.strip() or len(key) > 200:
            raise ValidationError(f"{path}.id", "must be 1 to 200 characters", where=where)
        if key in seen:
            raise ValidationError(
                f"{path}.id", f"{key!r} repeats {kind.list}[{seen[key]}]", where=where
            )
        seen[key] = i
        declared = rec.get(kind.declared) if kind.declared else None
        if type(declared) is int and abs(declared) > MAX_POINTS:
            raise ValidationError(
                f"{path}.{kind.declared}",
                f"{declared} is out of range (a record declares at most ±{MAX_POINTS} points)",
                where=where,
            )
        out.append((key, rec))
    return out


def source_event(
    kind: str, key: str, file: str, record: dict[str, Any], ts_ms: int, after: int | None = None
) -> Event:
    """The id holds a digest of the content (an unchanged record is one event) and, for a
    record that returns after its deletion, the position of that deletion."""
    digest = hashlib.sha256(encode_json(record).encode()).hexdigest()[:16]
    again = "" if after is None else f":{after}"
    return make_event(
        et.SOURCE,
        {"kind": kind, "key": key, "file": file, "record": record},
        id=f"ledger-source:{kind}:{key}:{digest}{again}"[:200],
        source="plaudit.ledger",
        ts_ms=ts_ms,
    )


def read_sources(
    cfg: LedgerConfig, directory: Path, ts_ms: int
) -> tuple[list[Event], dict[str, int], dict[str, dict[str, set[str]]]]:
    """Every source event a memory-bank folder yields, all parsed before anything is written,
    with the keys each kind's file holds now (to find deleted records)."""
    if not directory.is_dir():
        raise ValidationError("directory", "is not a directory", where=str(directory))
    events: list[Event] = []
    files: dict[str, int] = {}
    held: dict[str, dict[str, set[str]]] = {}
    for kind in cfg.sources.values():
        path = directory / kind.file
        if not path.exists():
            continue
        doc = load_json_file(path)
        recs = records_of(kind, doc, str(path))
        files[kind.file] = files.get(kind.file, 0) + len(recs)
        held[kind.name] = {"keys": {k for k, _ in recs}}
        events.extend(source_event(kind.name, k, kind.file, r, ts_ms) for k, r in recs)
    return events, files, held


def lookup(tx: Tx, kind: str, key: str) -> dict[str, Any] | None:
    """The current version of a source record; None when absent or deleted from its file."""
    row = tx.fetchone(
        "SELECT record FROM ledger_sources WHERE kind = ? AND key = ? AND deleted = 0", (kind, key)
    )
    return None if row is None else msgspec.json.decode(row[0])


def removal_events(tx: Tx, files: dict[str, dict[str, set[str]]], ts_ms: int) -> list[Event]:
    """Records the ledger knows that a re-read file no longer holds: deleted from it.

    `files` maps each kind whose file was read to the keys it now holds; a file that was not
    found deletes nothing (it may simply live elsewhere)."""
    out: list[Event] = []
    for kind, info in files.items():
        for key, file, seq in tx.fetchall(
            "SELECT key, file, seq FROM ledger_sources WHERE kind = ? AND deleted = 0", (kind,)
        ):
            if key not in info["keys"]:
                out.append(
                    make_event(
                        et.SOURCE_REMOVED,
                        {"kind": kind, "key": key, "file": file},
                        id=f"ledger-source-removed:{kind}:{key}:{seq}"[:200],
                        source="plaudit.ledger",
                        ts_ms=ts_ms,
                    )
                )
    return out


def cross_reference(cat: Category, kind: str, key: str, record: dict[str, Any] | None) -> None:
    """Step 3: the source must exist and satisfy the category's rule from the cross-file table."""
    if record is None:
        raise NotFoundError(
            f"source {kind}:{key} does not exist (import it with `plaudit ledger import-sources`)"
        )
    for field, want in cat.requires.items():
        if record.get(field) != want:
            raise ValidationError(
                "source",
                f"{kind}:{key} must have {field} = {json.dumps(want)} for category {cat.name} "
                f"(it has {json.dumps(record.get(field))})",
            )
    for field, text in cat.requires_match.items():
        if not _mentions(record.get(field), text):
            raise ValidationError(
                "source",
                f"{kind}:{key} has no {field} containing {json.dumps(text)}, which category "
                f"{cat.name} needs",
            )
    if cat.requires_nonempty and not any(
        _nonempty_list(record.get(f)) for f in cat.requires_nonempty
    ):
        fields = " or ".join(cat.requires_nonempty)
        raise ValidationError(
            "source",
            f"{kind}:{key} must have a non-empty {fields} for category {cat.name} "
            "(an MCP chain with no calls earns nothing)",
        )
    for field, least in cat.requires_min.items():
        have = record.get(field)
        if not isinstance(have, int | float) or isinstance(have, bool) or have < least:
            raise ValidationError(
                "source",
                f"{kind}:{key} must have {field} >= {least} for category {cat.name} "
                f"(it has {json.dumps(have)})",
            )


def _mentions(value: Any, text: str) -> bool:
    if isinstance(value, str):
        return text in value
    return isinstance(value, list) and any(isinstance(v, str) and text in v for v in value)


def _nonempty_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0


def declared_points(cfg: LedgerConfig, kind: str, record: Mapping[str, Any]) -> int | None:
    """What a source record says the ledger should hold for it: its declared field, else what
    its trigger owes (seed 003: "Pattern successfully applied" observations, MCP calls made),
    else None (it declares nothing)."""
    sk = cfg.sources.get(kind)
    if sk is None:
        return None
    if sk.declared:
        value = record.get(sk.declared)
        if type(value) is int:
            return value
    cat = cfg.categories.get(sk.trigger_category or "")
    if cat is None:
        return None
    if sk.trigger_observation:
        obs = record.get("observations")
        hits = (
            sum(isinstance(o, str) and sk.trigger_observation in o for o in obs)
            if isinstance(obs, list)
            else 0
        )
        return hits * cat.points
    if sk.trigger_calls:
        return cat.points if any(_nonempty_list(record.get(f)) for f in sk.trigger_calls) else 0
    return None


def kind_sign(cfg: LedgerConfig, kind: str) -> int:
    """The sign of what a kind's records declare: penalties for mistakes, rewards otherwise."""
    sk = cfg.sources.get(kind)
    name = sk.trigger_category or sk.recovery_category if sk is not None else None
    cat = cfg.categories.get(name or "")
    return -1 if cat is not None and cat.type == "penalty" else 1


def reconcile_rows(tx: Tx, cfg: LedgerConfig) -> dict[str, Any]:
    """Compare, per source record, what it declares with what the ledger holds for it.

    Reads the per-record sums the projection keeps, so its cost grows with the number of source
    records, not of transactions. A record deleted from its file (found by `import_sources`)
    declares nothing any more: what the ledger holds for it is a mismatch."""
    sums: dict[tuple[str, str], tuple[int, int, int]] = {
        (k, i): (int(pos), int(neg), int(corr))
        for k, i, pos, neg, corr in tx.fetchall(
            "SELECT kind, key, pos, neg, corr FROM ledger_source_sums"
        )
    }
    records: list[dict[str, Any]] = []
    by_kind: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    for kind, key, record_text, deleted in tx.fetchall(
        "SELECT kind, key, record, deleted FROM ledger_sources ORDER BY kind, key"
    ):
        seen.add((kind, key))
        record = msgspec.json.decode(record_text)
        pos, neg, corr = sums.get((kind, key), (0, 0, 0))
        agg = by_kind.setdefault(
            kind, {"records": 0, "declared": 0, "ledger": 0, "mismatched": 0, "deleted": 0}
        )
        if deleted:
            held = pos + neg + corr
            agg["deleted"] += 1
            if held == 0:
                continue
            status, declared, diff = "deleted", 0, -held
        else:
            agg["records"] += 1
            declared = declared_points(cfg, kind, record)
            sign = -1 if declared is not None and declared < 0 else kind_sign(cfg, kind)
            held = (neg if sign < 0 else pos) + corr
            if declared is None:
                status, diff = "undeclared", None
            else:
                diff = declared - held
                agg["declared"] += declared
                if diff == 0:
                    status = "ok"
                elif (diff < 0) == (sign < 0):
                    status = "missing"
                else:
                    status = "excess"
        agg["ledger"] += held
        if status not in ("ok", "undeclared"):
            agg["mismatched"] += 1
        records.append(
            {
                "kind": kind,
                "key": key,
                "declared": declared,
                "ledger": held,
                "difference": diff,
                "status": status,
            }
        )
    orphans = [f"{k}:{i}" for (k, i), v in sums.items() if (k, i) not in seen and any(v)]
    state = tx.fetchone("SELECT unsourced_points, unsourced_count FROM ledger_state WHERE one = 1")
    mismatches = [r for r in records if r["status"] in ("missing", "excess", "deleted")]
    return {
        "ok": not mismatches and not orphans,
        "by_kind": by_kind,
        "mismatches": mismatches,
        "records": records,
        "orphans": orphans,
        "unsourced_points": int(state[0]) if state else 0,
        "unsourced_transactions": int(state[1]) if state else 0,
    }


def recovery_category(cfg: LedgerConfig, kind: str, record: Mapping[str, Any], diff: int) -> str:
    """The category a recovery is booked under: the record's own `ledger_category`, else its
    category field (mapped through `category_map`, or a category of the same name), else the
    trigger's or the kind's default; the first that fits the sign of `diff`."""
    sk = cfg.sources.get(kind)
    own_field = record.get(sk.category_field) if sk is not None and sk.category_field else None
    mapped = sk.category_map.get(own_field, own_field) if isinstance(own_field, str) else None
    for name in (
        record.get("ledger_category"),
        mapped,
        sk.trigger_category if sk is not None else None,
        sk.recovery_category if sk is not None else None,
    ):
        cat = cfg.categories.get(name) if isinstance(name, str) else None
        if cat is not None and (cat.type == "reward") == (diff > 0):
            return cat.name
    raise ValidationError(
        "recovery", f"no category fits a {diff:+d} recovery for {kind} records (configure one)"
    )
