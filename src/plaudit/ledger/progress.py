"""progress.json (the seed's central ledger file) in and out, validated against the seed's schema.

The seed's schema limits `transaction_log` to 1000 entries with ids `tx-<digits>`. The export
therefore holds the newest 1000 transactions, newest first, with `id = "tx-<log position>"`
(an imported transaction keeps its own) and the real id in `plaudit_id`; the log keeps
everything.

Import keeps what the file says: its categories (an opening balance per category for history
its log does not show), session, lifetime and metrics (carried over), and each entry's id,
timestamp, source file and verified flag, so that import, export, import, export gives the
same file. A file whose own numbers do not add up is refused, naming the first inconsistency.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import jsonschema

from plaudit.errors import ValidationError
from plaudit.events import encode_json, make_event
from plaudit.files import atomic_write
from plaudit.ids import now_ms
from plaudit.ledger import eventtypes as et
from plaudit.ledger.config import SYSTEM_CATEGORIES, LedgerConfig
from plaudit.ledger.jsonfile import load_json_file
from plaudit.ledger.models import iso
from plaudit.ledger.queries import breakdown, metrics, score, state_or_zero, transactions
from plaudit.ledger.spec import MAX_ACTION_LEN, MAX_POINTS
from plaudit.ledger.writing import LedgerWriter, Pending, system_spec
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit

SCHEMA_VERSION = "1.0.0"
MAX_EXPORT = 1000
#: The largest score (a total, a category's sum, a count) an imported file may hold: 10^5
#: transactions of the largest size; anything beyond is a mistake in the file, not history
#: (and the sums of such numbers must stay within the log's ±2^53).
MAX_TOTAL = 10**14


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


LEDGER = "reinforcement_learning_ledger"
_NOT_ACTIONS = ("opening", "audit")  # entry kinds (plaudit's own export) that are not actions
_IMPORTED_KEYS = (
    "id",
    "timestamp",
    "running_total",
    "source_file",
    "source_id",
    "verified",
    "session_id",
    "kind",
    "plaudit_id",
)


def build_progress(p: Plaudit, cfg: LedgerConfig) -> dict[str, Any]:
    from plaudit.ledger.integrity import log_verified

    outcome = log_verified(p)
    with p.backend.read() as tx:
        s = score(tx, cfg, outcome)
        b = breakdown(tx)
        m = metrics(tx, state_or_zero(tx), cfg)
        txs = transactions(tx, limit=MAX_EXPORT, by="position")
        origins = _imported(tx, [t.seq for t in txs])
    kinds = {k.name: k.file for k in cfg.sources.values()}
    log = []
    for t in txs:
        imp = origins.get(t.seq, {})
        entry: dict[str, Any] = {
            "id": imp.get("id", f"tx-{t.seq}"),
            "timestamp": imp.get("timestamp", t.timestamp),
            "type": t.type,
            "category": t.category,
            "points": t.points,
            "action": t.action,
            "running_total": t.running_total,
            "verified": imp.get("verified", t.verified),
            "plaudit_id": imp.get("plaudit_id", t.id),
            "kind": imp.get("kind", t.kind),
        }
        if t.source is not None:
            kind, _, sid = t.source.partition(":")
            entry["source_file"] = kinds.get(kind, kind)
            entry["source_id"] = sid
        else:
            for key in ("source_file", "source_id"):
                if key in imp:
                    entry[key] = imp[key]
        session = t.session_id or imp.get("session_id")
        if session is not None:
            entry["session_id"] = session
        log.append(entry)
    chk = s["checksum"]
    now = iso(now_ms())
    doc = {
        "schema_version": SCHEMA_VERSION,
        "last_updated": now,
        LEDGER: {
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
                "is_valid": bool(chk["is_valid"] and outcome.ok),
                "last_validated": now,
            },
        },
        "transaction_log": log,
    }
    return doc


def _imported(tx: Tx, seqs: list[int]) -> dict[int, dict[str, Any]]:
    """What imported transactions kept from their file, by position."""
    import msgspec

    out: dict[int, dict[str, Any]] = {}
    for i in range(0, len(seqs), 500):
        chunk = seqs[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for seq, text in tx.fetchall(
            f"SELECT seq, imported FROM ledger_tx WHERE imported IS NOT NULL AND seq IN ({marks})",
            chunk,
        ):
            out[int(seq)] = msgspec.json.decode(text)
    return out


def export_progress(p: Plaudit, cfg: LedgerConfig, path: str | os.PathLike[str]) -> dict:
    doc = build_progress(p, cfg)
    validate_document(doc, "export")  # never write a file the seed's tools would reject
    data = json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n"

    def write(f: IO[bytes]) -> None:
        f.write(data)

    atomic_write(path, write)
    led = doc[LEDGER]
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


class Inconsistent(Exception):
    """The file's own numbers disagree: the JSON path of the first disagreement, and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _num(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
        return None
    return int(v)


def _chain_order(entries: list[dict[str, Any]], pts: list[int]) -> tuple[list[int], Any]:
    """The entries' indexes oldest first, read from their running totals: the seed writes
    newest first, but a file listing oldest first is read as such when only that order adds
    up. Returns the order and the first break (or None)."""

    def first_break(order: list[int]) -> tuple[int, str] | None:
        for a, b in itertools.pairwise(order):
            ra, rb = entries[a]["running_total"], entries[b]["running_total"]
            if rb != ra + pts[b]:
                return b, f"running_total {rb} != {ra} (the entry before it) + points {pts[b]}"
        return None

    newest_first = list(range(len(entries) - 1, -1, -1))
    oldest_first = list(range(len(entries)))
    brk = first_break(newest_first)
    if brk is None:
        return newest_first, None
    if first_break(oldest_first) is None:
        return oldest_first, None
    return newest_first, brk


def check_consistency(
    led: dict[str, Any],
    entries: list[dict[str, Any]],
    pts: list[int],
    order: list[int],
    brk: Any,
    index: list[int],
) -> None:
    """Raise `Inconsistent` at the first number of the file that its other numbers contradict."""
    base = LEDGER
    rw, pn = led.get("rewards", {}), led.get("penalties", {})
    total = _num(led, "total_score")
    earned, incurred = _num(rw, "total_earned"), _num(pn, "total_incurred")
    if earned is not None and incurred is not None and total != earned + incurred:
        raise Inconsistent(
            f"{base}.total_score",
            f"{total} != rewards.total_earned {earned} + penalties.total_incurred {incurred}",
        )
    for side, part, key in (("rewards", rw, "total_earned"), ("penalties", pn, "total_incurred")):
        cats = part.get("by_category")
        have = _num(part, key)
        if isinstance(cats, dict) and have is not None and cats:
            summed = sum(int(v) for v in cats.values())
            if summed != have:
                raise Inconsistent(
                    f"{base}.{side}.by_category",
                    f"sums to {summed}, but {side}.{key} is {have}",
                )
    for name, a, b in (
        ("session_score", _num(rw, "session_earned"), _num(pn, "session_incurred")),
        ("lifetime_score", _num(rw, "lifetime_earned"), _num(pn, "lifetime_incurred")),
    ):
        value = _num(led, name)
        if value is not None and a is not None and b is not None and value != a + b:
            raise Inconsistent(f"{base}.{name}", f"{value} != {a} earned + {b} incurred")
    chk = led.get("checksum_validation", {})
    if chk.get("is_valid") is False:
        raise Inconsistent(
            f"{base}.checksum_validation.is_valid", "the file says its own checksum failed"
        )
    for key in ("calculated_total", "stored_total"):
        if _num(chk, key) is not None and _num(chk, key) != total:
            raise Inconsistent(
                f"{base}.checksum_validation.{key}", f"{chk[key]} != total_score {total}"
            )
    m = led.get("metrics", {})
    n, ok, bad = _num(m, "actions_total"), _num(m, "actions_successful"), _num(m, "actions_failed")
    if n is not None and ok is not None and bad is not None and ok + bad > n:
        raise Inconsistent(
            f"{base}.metrics.actions_total",
            f"{n} is less than actions_successful {ok} + actions_failed {bad}",
        )
    acts = [p for e, p in zip(entries, pts, strict=True) if e.get("kind") not in _NOT_ACTIONS]
    for key, have, logged in (
        ("actions_total", n, len(acts)),
        ("actions_successful", ok, sum(p > 0 for p in acts)),
        ("actions_failed", bad, sum(p < 0 for p in acts)),
    ):
        if have is not None and have < logged:
            raise Inconsistent(
                f"{base}.metrics.{key}",
                f"{have} is less than the {logged} its own transaction_log shows",
            )
    if brk is not None:
        i, why = brk
        raise Inconsistent(f"transaction_log[{i}].running_total", why)
    if entries:
        newest = order[-1]
        if entries[newest]["running_total"] != total:
            raise Inconsistent(
                f"transaction_log[{index[newest]}].running_total",
                f"the newest entry's running_total {entries[newest]['running_total']} != "
                f"total_score {total}",
            )
    for side, part, sign in (("rewards", rw, 1), ("penalties", pn, -1)):
        cats = part.get("by_category")
        if not isinstance(cats, dict):
            continue
        logged: dict[str, int] = {}
        for e, p in zip(entries, pts, strict=True):
            if (p > 0 and sign > 0) or (p < 0 and sign < 0):
                logged[e["category"]] = logged.get(e["category"], 0) + p
        for cat, amount in logged.items():
            listed = int(cats.get(cat, 0))
            if abs(amount) > abs(listed):
                raise Inconsistent(
                    f"{base}.{side}.by_category.{cat}",
                    f"{listed} is less than the {amount} its own transaction_log holds",
                )


def _opening_digest(doc: dict[str, Any]) -> str:
    """Stable across re-exports of the same ledger: timestamps of the export are left out."""
    led = json.loads(json.dumps(doc[LEDGER]))
    led.get("checksum_validation", {}).pop("last_validated", None)
    return hashlib.sha256(encode_json(led).encode()).hexdigest()[:16]


@dataclass
class ProgressFile:
    """A progress.json read and checked, with nothing written yet (`read_progress`)."""

    where: str
    name: str
    led: dict[str, Any]
    parsed: list[Pending]
    total: int
    digest: str
    first_ts: int | None
    duplicates: int
    inconsistency: Inconsistent | None


def _in_range(doc: dict[str, Any], where: str) -> None:
    """Every score in the file within what the ledger keeps: a transaction's points within
    ±MAX_POINTS, every other number within ±MAX_TOTAL."""
    stack: list[tuple[Any, str]] = [(doc[LEDGER], LEDGER)]
    for i, e in enumerate(doc.get("transaction_log") or []):
        stack.append((e, f"transaction_log[{i}]"))
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}") for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            limit = MAX_POINTS if path.endswith("].points") else MAX_TOTAL
            if abs(value) > limit:
                raise ValidationError(
                    path, f"{value} is out of range (at most ±{limit})", where=where
                )


def read_progress(
    cfg: LedgerConfig, path: str | os.PathLike[str], *, accept_inconsistent: bool = False
) -> ProgressFile:
    """Read, validate and check a progress.json, writing nothing: every refusal happens here,
    before a store is even opened."""
    where = str(path)
    doc = load_json_file(Path(path))
    validate_document(doc, where)
    _in_range(doc, where)
    led = doc[LEDGER]
    # An entry written twice, verbatim, counts once.
    entries: list[dict[str, Any]] = []
    index: list[int] = []  # position in the file of each kept entry
    seen: set[str] = set()
    duplicates = 0
    for i, e in enumerate(doc.get("transaction_log", [])):
        entry_digest = hashlib.sha256(encode_json(e).encode()).hexdigest()
        if entry_digest in seen:
            duplicates += 1
            continue
        seen.add(entry_digest)
        entries.append(e)
        index.append(i)
    pts: list[int] = []
    for k, e in enumerate(entries):
        at = f"transaction_log[{index[k]}]"
        name = e["category"]
        cat = cfg.categories.get(name)
        if cat is None and name not in SYSTEM_CATEGORIES:
            raise ValidationError(
                f"{at}.category",
                f"unknown category {name!r} (add it to the ledger config)",
                where=where,
            )
        if cat is not None and e["type"] != cat.type:
            raise ValidationError(
                f"{at}.type",
                f"{e['type']!r} in {cat.type} category {name}: the category decides the type",
                where=where,
            )
        pt = _integral(e["points"], f"{at}.points", where)
        if (e["type"] == "reward" and pt < 0) or (e["type"] == "penalty" and pt > 0):
            raise ValidationError(
                f"{at}.points", f"{pt} has the wrong sign for a {e['type']}", where=where
            )
        _integral(e["running_total"], f"{at}.running_total", where)
        pts.append(pt)
    for side, part, sign in (("rewards", led["rewards"], 1), ("penalties", led["penalties"], -1)):
        for name, value in (part.get("by_category") or {}).items():
            at = f"{LEDGER}.{side}.by_category.{name}"
            if name not in cfg.categories and name not in SYSTEM_CATEGORIES:
                raise ValidationError(at, f"unknown category {name!r}", where=where)
            cat = cfg.categories.get(name)
            if value and cat is not None and (cat.type == "reward") != (sign > 0):
                raise ValidationError(
                    at, f"{cat.type} category {name} cannot hold {side}", where=where
                )
            _integral(value, at, where)
    order, brk = _chain_order(entries, pts)
    if brk is not None:
        brk = (index[brk[0]], brk[1])
    inconsistency: Inconsistent | None = None
    try:
        check_consistency(led, entries, pts, order, brk, index)
    except Inconsistent as exc:
        if not accept_inconsistent:
            raise ValidationError(
                exc.path,
                f"{exc.reason} (the file is inconsistent; import it anyway with "
                "`--accept-inconsistent`, which records an incident)",
                where=where,
            ) from None
        inconsistency = exc
    # -- the entries, oldest first -----------------------------------------------------------
    parsed: list[Pending] = []
    for i in order:
        e, pt = entries[i], pts[i]
        at = f"transaction_log[{index[i]}]"
        ts = _ts(e["timestamp"], where, f"{at}.timestamp")
        action = str(e.get("action") or f"imported {e['id']}")[:MAX_ACTION_LEN]
        entry_digest = hashlib.sha256(encode_json(e).encode()).hexdigest()[:16]
        spec = system_spec(e["category"], pt, action, ts_ms=ts)
        spec = type(spec)(**{**spec.__dict__, "type": e["type"]})
        imported = {k: e[k] for k in _IMPORTED_KEYS if k in e}
        own_id = e.get("plaudit_id")
        kind = e.get("kind") if e.get("kind") in ("opening", "audit") else "import"
        parsed.append(
            Pending(
                spec,
                kind=kind,
                id=(own_id if isinstance(own_id, str) and own_id else None)
                or f"progress:{e['id']}:{entry_digest}"[:200],
                extra={"imported": imported},
                verified=False,
                loose=True,
            )
        )
    total = _integral(led["total_score"], f"{LEDGER}.total_score", where)
    digest = _opening_digest(doc)
    name = Path(path).name
    first_ts = (
        parsed[0].spec.ts_ms
        if parsed
        else _ts(doc.get("last_updated") or iso(now_ms()), where, "last_updated")
    )
    return ProgressFile(
        where, name, led, parsed, total, digest, first_ts, duplicates, inconsistency
    )


def import_progress(
    p: Plaudit,
    cfg: LedgerConfig,
    writer: LedgerWriter,
    source: str | os.PathLike[str] | ProgressFile,
    *,
    accept_inconsistent: bool = False,
) -> dict[str, Any]:
    """Bring a progress.json's history in (see the module docstring)."""
    f = (
        source
        if isinstance(source, ProgressFile)
        else read_progress(cfg, source, accept_inconsistent=accept_inconsistent)
    )
    where, name, led, parsed, total = f.where, f.name, f.led, f.parsed, f.total
    digest, first_ts, inconsistency = f.digest, f.first_ts, f.inconsistency
    info: dict[str, Any] = {}

    def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
        # The file's history before its oldest entry is already here when that entry is: this
        # ledger's own export, or a file imported before.
        covered = bool(parsed) and bool(LogView(tx).positions([parsed[0].id or ""]))
        info["covered"] = covered
        openings: list[Pending] = []
        extras: list[Any] = []
        if not covered:
            openings = _openings(cfg, led, parsed, total, digest, name, first_ts)
            carry = _carry(cfg, led, parsed, total)
            if any(carry.values()):
                # on the oldest transaction written here (a 0-point opening only if none is)
                first = (openings or parsed or [None])[0]
                if first is None:
                    first = _opening("opening_balance", 0, "carry", digest, name, first_ts)
                    openings.append(first)
                first.extra["carry"] = carry
            info["carry"] = carry
            extras = _session_events(led, digest, name, state)
        if inconsistency is not None:
            extras.append(
                make_event(
                    et.INCIDENT,
                    {
                        "kind": "inconsistent_import",
                        "file": name,
                        "path": inconsistency.path,
                        "reason": inconsistency.reason,
                    },
                    id=f"progress-inconsistent:{digest}",
                    source="plaudit.ledger",
                )
            )
        return openings + parsed, extras

    txs = writer.commit(build)
    appended = [t for t in txs if t.status == "appended"]
    out = {
        "file": where,
        "imported": sum(t.kind != "opening" for t in appended),
        "already_present": sum(t.status == "present" for t in txs),
        "duplicates_in_file": f.duplicates,
        "opening_balance": [
            {"id": t.id, "category": t.category, "points": t.points, "status": t.status}
            for t in txs
            if t.kind == "opening"
        ],
        "file_total_score": total,
        "lifetime_carry": info.get("carry", {}),
        "changed": bool(appended),
        "inconsistency": None
        if inconsistency is None
        else {"path": inconsistency.path, "reason": inconsistency.reason},
    }
    if not appended:
        out["message"] = "nothing to import: this ledger already holds everything the file says"
    return out


def _opening(
    category: str, amount: int, part: str, digest: str, name: str, ts: int | None
) -> Pending:
    spec = system_spec(
        category,
        amount,
        f"opening balance from {name}: history its transaction_log omits",
        ts_ms=ts,
    )
    if category not in SYSTEM_CATEGORIES:
        spec = type(spec)(**{**spec.__dict__, "type": "reward" if amount > 0 else "penalty"})
    return Pending(
        spec,
        kind="opening",
        id=f"progress-opening:{digest}:{part}"[:200],
        extra={"imported_from": name},
        verified=False,
    )


def _openings(
    cfg: LedgerConfig,
    led: dict[str, Any],
    parsed: list[Pending],
    total: int,
    digest: str,
    name: str,
    ts: int | None,
) -> list[Pending]:
    """One opening per category for what `by_category` holds beyond the file's own log, then
    (only for an inconsistent file) `opening_balance` for whatever still differs."""
    out: list[Pending] = []
    logged: dict[tuple[str, int], int] = {}
    for pd in parsed:
        sign = 1 if pd.spec.points > 0 else -1
        logged[(pd.spec.category, sign)] = logged.get((pd.spec.category, sign), 0) + pd.spec.points
    for side, sign in (("rewards", 1), ("penalties", -1)):
        for cat, value in sorted((led[side].get("by_category") or {}).items()):
            rest = int(value) - logged.get((cat, sign), 0)
            if rest * sign > 0:
                out.append(_opening(cat, rest, f"{side}:{cat}", digest, name, ts))
    residual = total - sum(pd.spec.points for pd in parsed) - sum(o.spec.points for o in out)
    if residual:
        out.append(_opening("opening_balance", residual, "residual", digest, name, ts))
    return out


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _carry(
    cfg: LedgerConfig, led: dict[str, Any], parsed: list[Pending], total: int
) -> dict[str, int]:
    """History before this ledger: lifetime beyond the totals, and the metrics' counts beyond
    the file's own entries (autonomy as permission requests' worth, in millionths)."""
    rw, pn, m = led["rewards"], led["penalties"], led.get("metrics", {})
    earned, incurred = _num(rw, "total_earned") or 0, _num(pn, "total_incurred") or 0
    actions = [pd for pd in parsed if pd.kind == "import"]
    carry = {
        "total": _or(_num(led, "lifetime_score"), total) - total,
        "rewards": _or(_num(rw, "lifetime_earned"), earned) - earned,
        "penalties": _or(_num(pn, "lifetime_incurred"), incurred) - incurred,
        "actions": 0,
        "successful": 0,
        "failed": 0,
        "permission_micro": 0,
    }
    n = _num(m, "actions_total")
    if n is not None:
        carry["actions"] = max(0, n - len(actions))
        carry["successful"] = max(
            0, (_num(m, "actions_successful") or 0) - sum(pd.spec.points > 0 for pd in actions)
        )
        carry["failed"] = max(
            0, (_num(m, "actions_failed") or 0) - sum(pd.spec.points < 0 for pd in actions)
        )
        autonomy = m.get("autonomy_level")
        if isinstance(autonomy, int | float) and n and cfg.base_autonomy:
            permission = sum(pd.spec.category == "permission_request" for pd in actions)
            equivalent = n * (1 - float(autonomy) / cfg.base_autonomy) - permission
            carry["permission_micro"] = round(equivalent * 1_000_000)
    return carry


def _session_events(
    led: dict[str, Any], digest: str, name: str, state: dict[str, Any]
) -> list[Any]:
    """The file's session score, as an ended session carrying it, when this ledger has no
    session of its own (one that has would see its current session replaced)."""
    rw, pn = led["rewards"], led["penalties"]
    carry = {
        "total": _num(led, "session_score") or 0,
        "rewards": _num(rw, "session_earned") or 0,
        "penalties": _num(pn, "session_incurred") or 0,
    }
    if not any(carry.values()) or state.get("current_session") is not None:
        return []
    sid = f"progress:{digest}"
    return [
        make_event(
            et.SESSION_START,
            {"session": sid, "label": f"imported from {name}", "carry": carry},
            id=f"ledger-session:{sid}:start",
            session_id=sid,
            source="plaudit.ledger",
        ),
        make_event(
            et.SESSION_END,
            {"session": sid},
            id=f"ledger-session:{sid}:end",
            session_id=sid,
            source="plaudit.ledger",
        ),
    ]
