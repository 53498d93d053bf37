"""Statements a bandit select+observe pair sends to PostgreSQL, in process.

    .venv/bin/python bench/bandit_statements.py
    PYTHONPATH=<other tree>/src .venv/bin/python bench/bandit_statements.py

psycopg sends every statement on its own and holds the interpreter lock while it does, so in a
served process each one holds up the other requests' Python; statements whose answer is read
also wait for a round trip. This counts both per pair (waited: every statement outside
pipeline mode, and a SELECT or COMMIT inside it) (psycopg's `Cursor.execute` and
`executemany` wrapped), over `--pairs` pairs after `--warm` pairs, on the load benchmark's
arms. Checkpoints run on their own thread and are counted too (their share per pair).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

from http_mix import ARMS
from http_serve import drop_pg_schema

#: In pipeline mode, the statements whose answers are waited for; outside it, every one is.
_WAITED_IN_PIPELINE = ("SELECT", "COMMIT")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="postgresql://127.0.0.1:5432/test")
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--warm", type=int, default=50)
    args = ap.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    waited = [0]
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted(self: Any, query: Any, *a: Any, **k: Any) -> Any:
        kind = str(query).split(None, 1)[0].upper().rstrip(";")
        counts[kind] += 1
        if self.connection._pipeline is None or kind in _WAITED_IN_PIPELINE:
            waited[0] += 1
        return execute(self, query, *a, **k)

    def counted_many(self: Any, query: Any, *a: Any, **k: Any) -> Any:
        counts["MANY " + str(query).split(None, 1)[0].upper()] += 1
        return executemany(self, query, *a, **k)

    from plaudit import Plaudit

    db = f"{args.db}?schema=bench_stmts_{uuid.uuid4().hex[:8]}"
    p = Plaudit.open(db)
    try:
        p.bandit.register(ARMS)

        def pair(i: int) -> None:
            sel = p.bandit.select(context=f"c{i % 4}")
            p.bandit.observe(sel.run_id, "Bash and Read", tool_calls=[{"name": "Grep"}])

        for i in range(args.warm):
            pair(i)
        psycopg.Cursor.execute, psycopg.Cursor.executemany = counted, counted_many  # type: ignore[method-assign]
        try:
            for i in range(args.pairs):
                pair(i)
        finally:
            psycopg.Cursor.execute, psycopg.Cursor.executemany = execute, executemany  # type: ignore[method-assign]
    finally:
        p.close()
        drop_pg_schema(db)
    sent = sum(counts.values())
    print(
        json.dumps(
            {
                "pairs": args.pairs,
                "statements_per_pair": round(sent / args.pairs, 2),
                "waited_per_pair": round(waited[0] / args.pairs, 2),
                "by_kind": {k: round(n / args.pairs, 2) for k, n in counts.most_common()},
            }
        )
    )


if __name__ == "__main__":
    main()
