"""progress.json (the seed's central ledger file) in and out, validated against the seed's schema.

The seed's schema limits `transaction_log` to 1000 entries with ids `tx-<digits>`. The export
therefore holds the newest 1000 transactions, newest first, with `id = "tx-<log position>"`
(unique, numeric, stable) and the real id in `plaudit_id`; the log keeps everything.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import jsonschema

from plaudit.errors import ValidationError
from plaudit.events import encode_json
from plaudit.files import atomic_write
from plaudit.ids import now_ms
from plaudit.ledger.config import SYSTEM_CATEGORIES, LedgerConfig
from plaudit.ledger.models import iso
from plaudit.ledger.queries import breakdown, metrics, score, state_or_zero, transactions
from plaudit.ledger.sources import load_json_file
from plaudit.ledger.spec import MAX_ACTION_LEN
from plaudit.ledger.writing import LedgerWriter, Pending, system_spec
from plaudit.store.backend import Tx

if TYPE_CHECKING:
    from plaudit.core import Plaudit

SCHEMA_VERSION = "1.0.0"
MAX_EXPORT = 1000


@cache
def schema() -> dict[str, Any]:
    text = resources.files("plaudit.ledger").joinpath("progress.schema.json").read_text("utf-8")
    return json.loads(text)


def validate_document(doc: Any, where: str) -> None:
    validator = jsonschema.Draft7Validator(schema(), format_checker=jsonschema.FormatChecker())
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        raise ValidationError(path.lstrip(".") or "document", error.message, where=where)


def build_progress(p: Plaudit, cfg: LedgerConfig) -> dict[str, Any]:
    with p.backend.read() as tx:
        s = score(tx, cfg)
        b = breakdown(tx)
        m = metrics(tx, state_or_zero(tx), cfg)
        txs = transactions(tx, limit=MAX_EXPORT)
    kinds = {k.name: k.file for k in cfg.sources.values()}
    log = []
    for t in txs:
        entry: dict[str, Any] = {
            "id": f"tx-{t.seq}",
            "timestamp": t.timestamp,
            "type": t.type,
            "category": t.category,
            "points": t.points,
            "action": t.action,
            "running_total": t.running_total,
            "verified": t.verified,
            "plaudit_id": t.id,
        }
        if t.source is not None:
            kind, _, sid = t.source.partition(":")
            entry["source_file"] = kinds.get(kind, kind)
            entry["source_id"] = sid
        if t.session_id is not None:
            entry["session_id"] = t.session_id
        log.append(entry)
    chk = s["checksum"]
    doc = {
        "schema_version": SCHEMA_VERSION,
        "last_updated": iso(now_ms()),
        "reinforcement_learning_ledger": {
            "total_score": s["total_score"],
            "session_score": s["session_score"],
            "lifetime_score": s["lifetime_score"],
            "rewards": {
                "total_earned": s["rewards_total"],
                "session_earned": s["session_rewards"],
                "lifetime_earned": s["lifetime_rewards"],
                "by_category": b["rewards"],
            },
            "penalties": {
                "total_incurred": s["penalties_total"],
                "session_incurred": s["session_penalties"],
                "lifetime_incurred": s["lifetime_penalties"],
                "by_category": b["penalties"],
            },
            "metrics": {
                k: m[k]
                for k in (
                    "learning_efficiency",
                    "actions_total",
                    "actions_successful",
                    "actions_failed",
                    "success_rate",
                    "autonomy_level",
                )
            },
            "checksum_validation": {
                "calculated_total": chk["calculated_total"],
                "stored_total": chk["stored_total"] if chk["stored_total"] is not None else 0,
                "is_valid": chk["is_valid"],
                "last_validated": chk["last_validated"],
            },
        },
        "transaction_log": log,
    }
    return doc


def export_progress(p: Plaudit, cfg: LedgerConfig, path: str | os.PathLike[str]) -> dict:
    doc = build_progress(p, cfg)
    validate_document(doc, "export")  # never write a file the seed's tools would reject
    data = json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n"

    def write(f: IO[bytes]) -> None:
        f.write(data)

    atomic_write(path, write)
    led = doc["reinforcement_learning_ledger"]
    return {
        "file": str(path),
        "total_score": led["total_score"],
        "transactions": len(doc["transaction_log"]),
    }


def _ts(value: Any, where: str, field: str) -> int:
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(
            field, f"{value!r} is not an ISO 8601 date-time", where=where
        ) from None
    if dt.tzinfo is None:
        raise ValidationError(field, f"{value!r} has no time zone", where=where)
    return int(dt.timestamp() * 1000)


def _integral(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValidationError(field, f"{value!r} must be a whole number of points", where=where)
    return int(value)


def import_progress(
    p: Plaudit, cfg: LedgerConfig, writer: LedgerWriter, path: str | os.PathLike[str]
) -> dict[str, Any]:
    """Bring a progress.json's history in; an opening balance covers what its log omits."""
    where = str(path)
    doc = load_json_file(Path(path))
    validate_document(doc, where)
    led = doc["reinforcement_learning_ledger"]
    entries = doc.get("transaction_log", [])
    digest = hashlib.sha256(encode_json(doc).encode()).hexdigest()[:16]
    parsed: list[tuple[int, int, Pending]] = []
    seen: set[str] = set()
    duplicates = 0
    for i, e in enumerate(entries):
        at = f"transaction_log[{i}]"
        name = e["category"]
        if name not in cfg.categories and name not in SYSTEM_CATEGORIES:
            raise ValidationError(
                f"{at}.category",
                f"unknown category {name!r} (add it to the ledger config)",
                where=where,
            )
        pts = _integral(e["points"], f"{at}.points", where)
        if (e["type"] == "reward" and pts < 0) or (e["type"] == "penalty" and pts > 0):
            raise ValidationError(
                f"{at}.points", f"{pts} has the wrong sign for a {e['type']}", where=where
            )
        ts = _ts(e["timestamp"], where, f"{at}.timestamp")
        action = str(e.get("action") or f"imported {e['id']}")[:MAX_ACTION_LEN]
        entry_digest = hashlib.sha256(encode_json(e).encode()).hexdigest()[:16]
        if entry_digest in seen:  # the very same entry written twice counts once
            duplicates += 1
            continue
        seen.add(entry_digest)
        spec = system_spec(name, pts, action, ts_ms=ts)
        spec = type(spec)(**{**spec.__dict__, "type": e["type"]})
        imported = {k: e[k] for k in ("id", "running_total", "source_file", "verified") if k in e}
        pend = Pending(
            spec,
            kind="import",
            id=f"progress:{e['id']}:{entry_digest}"[:200],
            extra={"imported": imported},
            verified=False,
        )
        parsed.append((ts, -i, pend))
    parsed.sort(key=lambda x: (x[0], x[1]))  # oldest first; the file lists newest first
    total = _integral(led["total_score"], "reinforcement_learning_ledger.total_score", where)
    logged = sum(pd.spec.points for _, _, pd in parsed)
    logged_pos = sum(pd.spec.points for _, _, pd in parsed if pd.spec.points > 0)
    logged_neg = logged - logged_pos
    rewards, penalties = led.get("rewards", {}), led.get("penalties", {})
    openings: list[tuple[str, int]] = []
    file_r, file_p = rewards.get("total_earned"), penalties.get("total_incurred")
    if (
        isinstance(file_r, int | float)
        and isinstance(file_p, int | float)
        and file_r + file_p == total
        and file_r - logged_pos >= 0
        and file_p - logged_neg <= 0
    ):
        openings = [("rewards", int(file_r) - logged_pos), ("penalties", int(file_p) - logged_neg)]
    else:
        openings = [("total", total - logged)]
    carry = {
        "total": int(led.get("lifetime_score", total)) - total,
        "rewards": int(rewards.get("lifetime_earned", file_r or 0)) - int(file_r or 0),
        "penalties": int(penalties.get("lifetime_incurred", file_p or 0)) - int(file_p or 0),
    }
    first_ts = parsed[0][0] if parsed else _ts(doc.get("last_updated", iso(now_ms())), where, "ts")
    name = Path(path).name
    opening_pendings = [
        Pending(
            system_spec(
                "opening_balance",
                amount,
                f"opening balance ({part}) from {name}: not covered by its transaction_log",
                ts_ms=first_ts,
            ),
            kind="opening",
            id=f"progress-opening:{digest}:{part}",
            extra={"imported_from": name},
            verified=False,
        )
        for part, amount in openings
        if amount != 0
    ]
    if any(carry.values()):
        if not opening_pendings:
            opening_pendings.append(
                Pending(
                    system_spec(
                        "opening_balance", 0, f"lifetime carried over from {name}", ts_ms=first_ts
                    ),
                    kind="opening",
                    id=f"progress-opening:{digest}:carry",
                    extra={"imported_from": name},
                    verified=False,
                )
            )
        opening_pendings[0].extra["carry"] = carry
    pendings = opening_pendings + [pd for _, _, pd in parsed]

    def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
        return pendings, []

    txs = writer.commit(build)
    return {
        "file": where,
        "imported": sum(t.status == "appended" and t.kind == "import" for t in txs),
        "already_present": sum(t.status == "present" for t in txs),
        "duplicates_in_file": duplicates,
        "opening_balance": [
            {"id": t.id, "points": t.points, "status": t.status} for t in txs if t.kind == "opening"
        ],
        "file_total_score": total,
        "lifetime_carry": carry,
    }
