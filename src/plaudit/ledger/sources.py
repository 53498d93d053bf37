"""Source records (mistakes, patterns, memory entities, MCP chains) as events, the cross-check
each transaction makes against them, and reconciliation of ledger sums with what they declare.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from plaudit.errors import NotFoundError, ValidationError
from plaudit.events import Event, encode_json, make_event
from plaudit.ledger import eventtypes as et
from plaudit.ledger.config import Category, LedgerConfig, SourceKind
from plaudit.store.backend import Tx

MAX_SOURCE_FILE_BYTES = 64 << 20
_KEY_FIELDS = ("id", "name", "pattern_id", "error_id", "key")


class SourceImport(msgspec.Struct):
    directory: str
    files: dict[str, int]
    missing: list[str]
    appended: int
    unchanged: int


def load_json_file(path: Path) -> Any:
    """Parse a JSON file, naming the file, line and column of any error."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ValidationError(
            "file", f"cannot read: {exc.strerror or exc}", where=str(path)
        ) from None
    if size > MAX_SOURCE_FILE_BYTES:
        raise ValidationError(
            "file", f"{size} bytes exceeds the {MAX_SOURCE_FILE_BYTES}-byte limit", where=str(path)
        )
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError("file", f"is not UTF-8: {exc.reason}", where=str(path)) from None
    except OSError as exc:
        raise ValidationError(
            "file", f"cannot read: {exc.strerror or exc}", where=str(path)
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "json", f"malformed at line {exc.lineno} column {exc.colno}: {exc.msg}", where=str(path)
        ) from None


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
        out.append((key, rec))
    return out


def source_event(kind: str, key: str, file: str, record: dict[str, Any], ts_ms: int) -> Event:
    digest = hashlib.sha256(encode_json(record).encode()).hexdigest()[:16]
    return make_event(
        et.SOURCE,
        {"kind": kind, "key": key, "file": file, "record": record},
        id=f"ledger-source:{kind}:{key}:{digest}"[:200],
        source="plaudit.ledger",
        ts_ms=ts_ms,
    )


def read_sources(cfg: LedgerConfig, directory: Path, ts_ms: int) -> tuple[list[Event], dict]:
    """Every source event a memory-bank folder yields, all parsed before anything is written."""
    if not directory.is_dir():
        raise ValidationError("directory", "is not a directory", where=str(directory))
    events: list[Event] = []
    files: dict[str, int] = {}
    for kind in cfg.sources.values():
        path = directory / kind.file
        if not path.exists():
            continue
        doc = load_json_file(path)
        recs = records_of(kind, doc, str(path))
        files[kind.file] = files.get(kind.file, 0) + len(recs)
        events.extend(source_event(kind.name, k, kind.file, r, ts_ms) for k, r in recs)
    return events, files


def lookup(tx: Tx, kind: str, key: str) -> dict[str, Any] | None:
    row = tx.fetchone("SELECT record FROM ledger_sources WHERE kind = ? AND key = ?", (kind, key))
    return None if row is None else msgspec.json.decode(row[0])


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
    for field, least in cat.requires_min.items():
        have = record.get(field)
        if not isinstance(have, int | float) or isinstance(have, bool) or have < least:
            raise ValidationError(
                "source",
                f"{kind}:{key} must have {field} >= {least} for category {cat.name} "
                f"(it has {json.dumps(have)})",
            )


def reconcile_rows(tx: Tx, cfg: LedgerConfig) -> dict[str, Any]:
    """Compare, per source record, what it declares with what the ledger holds for it."""
    sums: dict[tuple[str, str], tuple[int, int]] = {}
    for kind, sid, pos, neg in tx.fetchall(
        "SELECT source_kind, source_id,"
        " COALESCE(SUM(CASE WHEN points > 0 THEN points ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN points < 0 THEN points ELSE 0 END), 0)"
        " FROM ledger_tx WHERE source_kind IS NOT NULL GROUP BY source_kind, source_id"
    ):
        sums[(kind, sid)] = (int(pos), int(neg))
    records: list[dict[str, Any]] = []
    by_kind: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    for kind, key, record_text in tx.fetchall(
        "SELECT kind, key, record FROM ledger_sources ORDER BY kind, key"
    ):
        seen.add((kind, key))
        record = msgspec.json.decode(record_text)
        sk = cfg.sources.get(kind)
        declared = record.get(sk.declared) if sk is not None and sk.declared else None
        pos, neg = sums.get((kind, key), (0, 0))
        agg = by_kind.setdefault(kind, {"records": 0, "declared": 0, "ledger": 0, "mismatched": 0})
        agg["records"] += 1
        agg["ledger"] += pos + neg
        if type(declared) is not int:
            status, held, diff = "undeclared", pos + neg, None
        else:
            held = neg if declared < 0 else pos
            diff = declared - held
            agg["declared"] += declared
            if diff == 0:
                status = "ok"
            elif (declared < 0 and diff < 0) or (declared > 0 and diff > 0):
                status = "missing"
            else:
                status = "excess"
            if status != "ok":
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
    orphans = [f"{k}:{s}" for (k, s) in sums if (k, s) not in seen]
    unsourced = tx.fetchone(
        "SELECT COALESCE(SUM(points), 0), COUNT(*) FROM ledger_tx WHERE source_kind IS NULL"
    )
    assert unsourced is not None
    mismatches = [r for r in records if r["status"] in ("missing", "excess")]
    return {
        "ok": not mismatches and not orphans,
        "by_kind": by_kind,
        "mismatches": mismatches,
        "records": records,
        "orphans": orphans,
        "unsourced_points": int(unsourced[0]),
        "unsourced_transactions": int(unsourced[1]),
    }


def recovery_category(cfg: LedgerConfig, kind: str, record: Mapping[str, Any], diff: int) -> str:
    """The record's own `ledger_category` when it fits the sign, else the kind's default."""
    own = record.get("ledger_category")
    for name in (own, cfg.sources[kind].recovery_category if kind in cfg.sources else None):
        cat = cfg.categories.get(name) if isinstance(name, str) else None
        if cat is not None and (cat.type == "reward") == (diff > 0):
            return cat.name
    raise ValidationError(
        "recovery", f"no category fits a {diff:+d} recovery for {kind} records (configure one)"
    )
