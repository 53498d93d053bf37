"""The first requests of a freshly started `plaudit serve`: what a server pays before it is warm.

    .venv/bin/python bench/http_first.py --backend postgres --runs 5
    PYTHONPATH=<other tree>/src .venv/bin/python bench/http_first.py --backend postgres --runs 1

Per run: a store is given the load benchmark's arms and `--pairs` select+observe pairs by one
server, which is then stopped; a new server is started on the same store and timed over its
first `--pairs` pairs, sent one after another on one kept-alive connection. Reported: the
median over runs of the first select, the first observe, and the median of the pairs after
the first (a warm request), in milliseconds. The script runs against older trees too: it only
speaks HTTP to `plaudit serve`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_mix import ARMS
from http_serve import PG_DEFAULT, Serve, drop_pg_schema


def post(conn: http.client.HTTPConnection, path: str, body: dict[str, Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    if resp.status != 200:
        raise SystemExit(f"{path}: HTTP {resp.status}: {data}")
    return data, 1000 * (time.perf_counter() - t0)


def pairs(url: str, n: int) -> list[tuple[float, float]]:
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=30)
    out = []
    for i in range(n):
        sel, t_sel = post(conn, "/v1/bandit/select", {"context": f"c{i % 4}"})
        _, t_obs = post(
            conn, "/v1/bandit/observe", {"run_id": sel["run_id"], "output_text": "Bash"}
        )
        out.append((t_sel, t_obs))
    conn.close()
    return out


def one_run(backend: str, n: int) -> list[tuple[float, float]]:
    tmp = tempfile.TemporaryDirectory()
    db = os.path.join(tmp.name, "first.db") if backend == "sqlite" else PG_DEFAULT
    if backend == "postgres":
        drop_pg_schema(db)
    try:
        srv = Serve(db)
        try:
            conn = http.client.HTTPConnection(srv.url.removeprefix("http://"), timeout=30)
            post(conn, "/v1/bandit/arms", {"arms": ARMS})
            conn.close()
            pairs(srv.url, n)
        finally:
            srv.stop()
        srv = Serve(db)
        try:
            return pairs(srv.url, n)
        finally:
            srv.stop()
    finally:
        if backend == "postgres":
            drop_pg_schema(db)
        tmp.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="postgres")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=20)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    runs = [one_run(args.backend, args.pairs) for _ in range(args.runs)]
    first_sel = statistics.median(r[0][0] for r in runs)
    first_obs = statistics.median(r[0][1] for r in runs)
    warm = statistics.median(t for r in runs for p in r[1:] for t in p)
    print(
        json.dumps(
            {
                "backend": args.backend,
                "runs": args.runs,
                "first_select_ms": round(first_sel, 1),
                "first_observe_ms": round(first_obs, 1),
                "warm_request_ms": round(warm, 2),
                "first_selects_ms": [round(r[0][0], 1) for r in runs],
                "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
            }
        )
    )


if __name__ == "__main__":
    main()
