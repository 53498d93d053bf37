"""Checking a stretch of the hash chain, with nothing but the standard library.

`verify` splits a large log into position ranges and checks them in parallel. A range is
self-contained: it starts from the *stored* hash of the position before it, and the range
before checks that stored hash, so the ranges together prove exactly what one pass would.
This module imports only stdlib so that a SQLite worker process (`python -I chain.py ...`)
starts in milliseconds; it is also what the in-process pass runs.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from typing import Any

#: Hash that position 0 chains from; a constant so every empty log has the same head.
GENESIS = hashlib.sha256(b"plaudit.log.v1").digest()

#: The hashed body of an event, rebuilt from its columns (see `plaudit.events.Prepared.body`).
SQLITE_BODY = (
    "CAST(id || char(31) || type || char(31) || ts_ms || char(31) || session_id || char(31) || "
    "source || char(31) || payload || char(31) || meta AS BLOB)"
)

RangeResult = tuple[int | None, str | None, bytes]


def range_sql(body_sql: str) -> str:
    return (
        f"SELECT seq, {body_sql}, hash FROM plaudit_events WHERE seq >= ? AND seq <= ? ORDER BY seq"
    )


def check_rows(
    chunks: Iterable[Sequence[tuple[Any, Any, Any]]], lo: int, hi: int, prev: bytes
) -> RangeResult:
    """Check rows `(seq, body, hash)` of positions lo..hi, chaining from `prev`.

    Returns `(first_bad, reason, last_hash)`; `first_bad` is None when the range is intact.
    """
    sha = hashlib.sha256
    expect = lo
    for rows in chunks:
        for seq, body, stored in rows:
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
        cur = conn.execute(range_sql(SQLITE_BODY), (lo, hi))
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
