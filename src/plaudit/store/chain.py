"""The chain format, defined once: genesis, separator, hashed bytes, and the SQL that rebuilds them.

Each committed event at position `seq` stores ``hash = sha256(hash[seq-1] || body)`` and
``content_digest = sha256(digest_body)``. `body` covers every column but the position (which
the chain itself fixes) and the two hashes; `digest_body` is the event's identity for
idempotency (what it says, not when or how it travelled). Verification rebuilds both from the
columns in SQL (`BODY_SQL`, `DIGEST_BODY_SQL`) and recomputes both hashes, so a change to any
stored column of any event is caught.

The Python builders, the batch append's inlined twin (`chain_new_rows`) and the SQL are kept
side by side here; `tests/test_chain_format.py` holds them equal.

This module imports only the standard library so that a SQLite verify worker
(`python -I chain.py ...`) starts in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: Hash that position 0 chains from; a constant so every empty log has the same head.
GENESIS = hashlib.sha256(b"plaudit.log.v1").digest()

#: Field separator inside hashed bytes: the unit separator, which no validated text field and
#: no canonical JSON can contain.
SEP = "\x1f"


def event_body(
    id_: str, type_: str, ts_ms: int, session_id: str, source: str, payload: str, meta: str
) -> bytes:
    """The bytes the hash chain covers for one event."""
    return (
        f"{id_}\x1f{type_}\x1f{ts_ms}\x1f{session_id}\x1f{source}\x1f{payload}\x1f{meta}".encode()
    )


def digest_body(type_: str, session_id: str, source: str, payload: bytes) -> bytes:
    """The bytes `content_digest` covers: an event's identity for idempotency."""
    return f"{type_}\x1f{session_id}\x1f{source}\x1f".encode() + payload


def content_digest(type_: str, session_id: str, source: str, payload: bytes) -> bytes:
    return hashlib.sha256(digest_body(type_, session_id, source, payload)).digest()


#: `event_body` rebuilt from a row's columns, per dialect.
BODY_SQL = {
    "sqlite": (
        "CAST(id || char(31) || type || char(31) || ts_ms || char(31) || session_id || char(31) "
        "|| source || char(31) || payload || char(31) || meta AS BLOB)"
    ),
    "postgres": (
        "convert_to(id || chr(31) || type || chr(31) || ts_ms::text || chr(31) || session_id "
        "|| chr(31) || source || chr(31) || payload || chr(31) || meta, 'UTF8')"
    ),
}

#: `digest_body` rebuilt from a row's columns, per dialect.
DIGEST_BODY_SQL = {
    "sqlite": (
        "CAST(type || char(31) || session_id || char(31) || source || char(31) || payload AS BLOB)"
    ),
    "postgres": (
        "convert_to(type || chr(31) || session_id || chr(31) || source || chr(31) || payload, "
        "'UTF8')"
    ),
}


def chain_new_rows(
    prepared: Sequence[Any], seq: int, prev: bytes, blob: Callable[[bytes], Any]
) -> tuple[list[tuple[Any, ...]], int, bytes]:
    """Number and hash a batch of new events (`Prepared`): the batch append's hot loop.

    `event_body` is inlined (a test holds the two equal). Returns the rows in
    `schema.EVENT_COLUMNS` order, the last position and the last hash.
    """
    rows: list[tuple[Any, ...]] = []
    add = rows.append
    sha = hashlib.sha256
    for p in prepared:
        e = p.event
        id_, type_, ts, session, source = e.id, e.type, e.ts_ms, e.session_id, e.source
        payload_text, meta_text = p.payload_text, p.meta_text
        seq += 1
        body = f"{id_}\x1f{type_}\x1f{ts}\x1f{session}\x1f{source}\x1f{payload_text}\x1f{meta_text}"
        prev = sha(prev + body.encode()).digest()
        add(
            (
                seq,
                id_,
                type_,
                ts,
                session,
                source,
                payload_text,
                meta_text,
                blob(p.content_digest),
                blob(prev),
            )
        )
    return rows, seq, prev


RangeResult = tuple[int | None, str | None, bytes]


def range_sql(dialect: str) -> str:
    return (
        f"SELECT seq, {BODY_SQL[dialect]}, {DIGEST_BODY_SQL[dialect]}, content_digest, hash "
        "FROM plaudit_events WHERE seq >= ? AND seq <= ? ORDER BY seq"
    )


def check_rows(
    chunks: Iterable[Sequence[tuple[Any, Any, Any, Any, Any]]], lo: int, hi: int, prev: bytes
) -> RangeResult:
    """Check rows `(seq, body, digest_body, content_digest, hash)` of positions lo..hi.

    Chains from `prev`. Returns `(first_bad, reason, last_hash)`; `first_bad` is None when the
    range is intact.
    """
    sha = hashlib.sha256
    expect = lo
    for rows in chunks:
        for seq, body, dbody, digest, stored in rows:
            if seq != expect:
                return expect, f"position {expect} is missing (deleted or renumbered)", prev
            if type(stored) is not bytes:
                stored = bytes(stored)
            if type(body) is not bytes:
                body = bytes(body)
            if sha(prev + body).digest() != stored:
                return (
                    seq,
                    f"position {seq} does not match the chain: the event was modified, "
                    "inserted or moved",
                    prev,
                )
            if type(dbody) is not bytes:
                dbody = bytes(dbody)
            if type(digest) is not bytes:
                digest = bytes(digest)
            if sha(dbody).digest() != digest:
                return (
                    seq,
                    f"position {seq}'s content_digest does not match its content: the stored "
                    "digest was modified",
                    prev,
                )
            prev = stored
            expect += 1
    if expect <= hi:
        return expect, f"position {expect} is missing (deleted from the log)", prev
    return None, None, prev


def sqlite_range(path: str, lo: int, hi: int, chunk: int = 4096) -> RangeResult:
    """Check positions lo..hi of a SQLite log file, from its own read-only connection."""
    from pathlib import Path  # here: the shell hook's import path never needs it

    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=60.0)
    try:
        if lo == 1:
            prev = GENESIS
        else:
            sql = "SELECT hash FROM plaudit_events WHERE seq = ?"
            row = conn.execute(sql, (lo - 1,)).fetchone()
            if row is None:  # the range before reports the gap; nothing to chain from here
                return lo - 1, f"position {lo - 1} is missing (deleted from the log)", b""
            prev = bytes(row[0])
        cur = conn.execute(range_sql("sqlite"), (lo, hi))
        return check_rows(iter(lambda: cur.fetchmany(chunk), []), lo, hi, prev)
    finally:
        conn.close()


def _main(argv: list[str]) -> int:
    path, lo, hi = argv[0], int(argv[1]), int(argv[2])
    first_bad, reason, last = sqlite_range(path, lo, hi)
    sys.stdout.write(json.dumps({"first_bad": first_bad, "reason": reason, "last": last.hex()}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
