"""How appends scale with writer processes, against plain inserts on the same server, same run.

For 1, 2, 4 and 8 writer processes, each process appends single router decisions through the
public API (`Plaudit.open(...).log.append`) for `--seconds`; in the same run the same number of
processes do plain one-commit INSERTs of rows of the same size into a plain table of the same
database. Runs are interleaved (plaudit, plain, plaudit, plain, ...) so both see the same load.

Reported per backend and writer count, as medians over `--runs`: events/s, p50, p99 and max
latency, each writer's share (max/min), CPU seconds of the writers, and plaudit's ratio to the
plain inserts. Targets (issue 11): PostgreSQL, 8 writers: >= 0.5 of plain, p99 <= 20 ms;
SQLite, 4 writers: no append over 250 ms, no writer's share more than twice another's.

    .venv/bin/python bench/log_scale.py --runs 5 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, percentile, router_events, table

PG_DSN = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")

CHILD = r"""
import json, os, resource, sys, time
mode, url, name, gate = sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[5]
seconds = float(sys.argv[3])
events = json.loads(sys.stdin.read())
lat = []
if mode in ("plaudit", "enqueue", "solo"):
    if mode in ("solo", "enqueue"):  # every writer on its own, as on hosts of its own
        os.environ["PLAUDIT_HOST_GROUP"] = "0"
    from plaudit import Plaudit
    p = Plaudit.open(url)
    op = p.log.enqueue if mode == "enqueue" else p.log.append
    def once(ev):
        op(ev)
else:
    import msgspec
    enc = msgspec.json.Encoder(order="sorted")
    if url.startswith("postgresql"):
        import psycopg
        dsn, _, schema = url.partition("?schema=")
        conn = psycopg.connect(dsn, autocommit=True)
        conn.execute(f'SET search_path TO "{schema}"')
        sql = ("INSERT INTO plain_events (id, type, ts_ms, session_id, source, payload, meta, "
               "content_digest, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")
    else:
        import sqlite3
        conn = sqlite3.connect(url, isolation_level=None, timeout=60)
        conn.execute("PRAGMA journal_mode=WAL"); conn.execute("PRAGMA synchronous=FULL")
        sql = ("INSERT INTO plain_events (id, type, ts_ms, session_id, source, payload, meta, "
               "content_digest, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
    import hashlib
    def once(ev):
        payload = enc.encode(ev["payload"]).decode()
        d = hashlib.sha256(payload.encode()).digest()
        args = (ev["id"], ev["type"], ev["ts_ms"], ev["session_id"], ev["source"], payload,
                "{}", d, d)
        if url.startswith("postgresql"):
            conn.execute(sql, args)
        else:
            conn.execute("BEGIN IMMEDIATE"); conn.execute(sql, args); conn.execute("COMMIT")
print("ready", flush=True)
while not os.path.exists(gate):
    time.sleep(0.001)
start = time.perf_counter()
r0 = resource.getrusage(resource.RUSAGE_SELF)
i = 0
while True:
    ev = dict(events[i % len(events)], id=f"{name}-{i}")
    t = time.perf_counter()
    once(ev)
    lat.append(time.perf_counter() - t)
    i += 1
    if t - start > seconds:
        break
wall = time.perf_counter() - start
stopped = time.time()
if mode in ("plaudit", "enqueue", "solo"):
    p.close()  # an enqueuing writer gives its queued events positions here (if none did yet)
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"n": len(lat), "wall": wall, "cpu": cpu, "lat": lat, "stopped": stopped}))
"""


def fresh_store(backend: str, tmp: Path, mode: str) -> str:
    """A new store (plaudit) or a plain table with the log's columns (plain)."""
    if backend == "postgres":
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            if mode == "plain":
                conn.execute(
                    f'CREATE TABLE "{schema}".plain_events (seq BIGSERIAL PRIMARY KEY, '
                    "id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, ts_ms BIGINT NOT NULL, "
                    "session_id TEXT NOT NULL, source TEXT NOT NULL, payload TEXT NOT NULL, "
                    "meta TEXT NOT NULL, content_digest BYTEA NOT NULL, hash BYTEA NOT NULL)"
                )
        return f"{PG_DSN}?schema={schema}"
    path = tmp / f"{mode}-{uuid.uuid4().hex[:8]}.db"
    if mode == "plain":
        import sqlite3

        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE plain_events (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
            "type TEXT NOT NULL, ts_ms INTEGER NOT NULL, session_id TEXT NOT NULL, "
            "source TEXT NOT NULL, payload TEXT NOT NULL, meta TEXT NOT NULL, "
            "content_digest BLOB NOT NULL, hash BLOB NOT NULL)"
        )
        conn.close()
    else:
        from plaudit import Plaudit

        Plaudit.open(path).close()
    return str(path)


def drop(backend: str, url: str) -> None:
    if backend == "postgres":
        import psycopg

        schema = url.partition("?schema=")[2]
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def server_cpu() -> float:
    """CPU seconds the local `postgres` processes alive now have used (0 where /proc is
    absent): the server's share of a run, which a wall-clock rate on a shared machine hides.
    Processes that ended are not counted, so read it while the writers are connected."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def one_run(backend: str, mode: str, writers: int, seconds: float, tmp: Path) -> dict[str, Any]:
    url = fresh_store(backend, tmp, mode)
    gate = tmp / f"gate-{uuid.uuid4().hex[:8]}"
    events = json.dumps(router_events(200))
    procs = []
    try:
        for w in range(writers):
            proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, mode, url, str(seconds), f"w{w}", str(gate)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdin is not None
            proc.stdin.write(events)
            proc.stdin.close()
            procs.append(proc)
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        load = os.getloadavg()[0]
        server0 = server_cpu() if backend == "postgres" else 0.0
        t0 = time.perf_counter()
        gate.touch()
        server = 0.0
        if backend == "postgres":
            # The writers' server processes end with them: read them while they still work.
            time.sleep(seconds * 0.9)
            server = (server_cpu() - server0) / (seconds * 0.9)  # CPU s per s of the run
        results = []
        for proc in procs:
            assert proc.stdout is not None
            out = proc.stdout.read()
            proc.wait()
            results.append(json.loads(out.strip().splitlines()[-1]))
            if proc.returncode:
                raise RuntimeError(f"a {mode} writer failed")
        total = sum(r["n"] for r in results)
        sequenced_after = None
        settled = None
        if mode == "enqueue":
            # Every acknowledged event must end up in the log; how long that took counts, and
            # so does how long after the last writer stopped the last one got its position.
            from plaudit import Plaudit

            with Plaudit.open(url) as p:
                while len(p.log) < total:
                    if time.perf_counter() - t0 > seconds + 120:
                        raise RuntimeError(f"only {len(p.log)} of {total} events sequenced")
                    time.sleep(0.01)
                if len(p.log) != total:
                    raise RuntimeError(f"{len(p.log)} events in the log, {total} acknowledged")
            sequenced_after = time.perf_counter() - t0
            settled = max(0.0, time.time() - max(r["stopped"] for r in results))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        drop(backend, url)
    lat = [x for r in results for x in r["lat"]]
    counts = [r["n"] for r in results]
    wall = max(r["wall"] for r in results)
    return {
        "rate": sum(counts) / wall,
        # Events/s through to positions: acknowledged events over the time until the last of
        # them was sequenced (for `append` that is when it returned).
        "sequenced": sum(counts) / max(wall, sequenced_after or 0.0),
        "p50": percentile(lat, 50) * 1000,
        "p99": percentile(lat, 99) * 1000,
        "max": max(lat) * 1000,
        "share": max(counts) / max(min(counts), 1),
        "cpu": sum(r["cpu"] for r in results),
        # CPU per event, in ms: the writers' processes (pump included) and the server's.
        "client_ms": sum(r["cpu"] for r in results) / max(sum(counts), 1) * 1000,
        "server_ms": server / (sum(counts) / wall) * 1000 if counts and sum(counts) else 0.0,
        "load": load,
        # enqueue: seconds from the last writer's stop until every event had a position (an
        # upper bound: the poll above and the writers' own close are included).
        "settled_s": settled,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--writers", default="1,2,4,8")
    ap.add_argument("--backends", default="postgres,sqlite")
    ap.add_argument(
        "--modes",
        default="append,enqueue,solo",
        help="plaudit's ways to append (PostgreSQL only has the last two): append waits for "
        "the event's position; enqueue returns once it is durable (in the intake, or "
        "written by the host leader); solo is append with PLAUDIT_HOST_GROUP=0, every writer "
        "on its own as if each were on a host of its own",
    )
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    args = ap.parse_args()
    counts = [int(x) for x in args.writers.split(",")]
    backends = args.backends.split(",")
    runs: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        for r in range(args.runs):
            for backend in backends:
                for w in counts:
                    modes = ["plaudit", "plain"]
                    if backend == "postgres":
                        for extra in ("solo", "enqueue"):
                            if extra in args.modes.split(","):
                                modes.insert(1, extra)
                    for mode in modes:
                        res = one_run(backend, mode, w, args.seconds, tmp)
                        runs.setdefault((backend, w, mode), []).append(res)
                        print(
                            f"run {r + 1} {backend} {w} writers {mode}: {res['rate']:.0f}/s "
                            f"(sequenced {res['sequenced']:.0f}/s) "
                            f"cpu/event {res['client_ms']:.3f}+{res['server_ms']:.3f} ms "
                            f"p99 {res['p99']:.1f} ms max {res['max']:.1f} ms "
                            f"share {res['share']:.2f} load {res['load']:.2f}"
                            + (f" settled {res['settled_s']:.2f} s" if res["settled_s"] else ""),
                            file=sys.stderr,
                        )
    rows = []
    for backend in backends:
        for w in counts:
            plain = runs[(backend, w, "plain")]
            for mode in ("plaudit", "enqueue", "solo"):
                pl = runs.get((backend, w, mode))
                if not pl:
                    continue

                def m(rs: list[dict[str, Any]], k: str) -> float:
                    return median([x[k] for x in rs])

                ratio = median([a["rate"] / b["rate"] for a, b in zip(pl, plain, strict=True)])
                seq_ratio = median(
                    [a["sequenced"] / b["rate"] for a, b in zip(pl, plain, strict=True)]
                )
                rows.append(
                    [
                        backend,
                        {"plaudit": "append", "solo": "append, each alone"}.get(mode, mode),
                        w,
                        f"{m(pl, 'rate'):,.0f}",
                        f"{m(pl, 'sequenced'):,.0f}",
                        f"{m(pl, 'p50'):.2f}",
                        f"{m(pl, 'p99'):.1f}",
                        f"{m(pl, 'max'):.0f}",
                        f"{m(pl, 'share'):.2f}",
                        f"{m(pl, 'cpu'):.1f}",
                        f"{m(plain, 'rate'):,.0f}",
                        f"{m(plain, 'p99'):.1f}",
                        f"{m(plain, 'cpu'):.1f}",
                        f"{ratio:.2f}",
                        f"{seq_ratio:.2f}",
                        f"{m(pl, 'client_ms'):.3f} / {m(plain, 'client_ms'):.3f}",
                        f"{m(pl, 'server_ms'):.3f} / {m(plain, 'server_ms'):.3f}"
                        if backend == "postgres"
                        else "-",
                        f"{m(pl, 'load'):.1f}",
                        f"{m(pl, 'settled_s'):.2f}" if mode == "enqueue" else "-",
                    ]
                )
    print(
        table(
            [
                "backend",
                "call",
                "writers",
                "acknowledged/s",
                "sequenced/s",
                "p50 ms",
                "p99 ms",
                "max ms",
                "share max/min",
                "writers' CPU s",
                "plain rows/s",
                "plain p99 ms",
                "plain CPU s",
                "ratio",
                "sequenced ratio",
                "client CPU ms/event (plaudit / plain)",
                "server CPU ms/event (plaudit / plain)",
                "load",
                "all sequenced s after stop",
            ],
            rows,
        )
    )
    if args.json:
        args.json.write_text(json.dumps({f"{k[0]}/{k[1]}/{k[2]}": v for k, v in runs.items()}))


if __name__ == "__main__":
    main()
