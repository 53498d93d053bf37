"""What a stopped peer costs the others: SIGSTOP a writer, the lease holder, the host leader and
the pump in turn, on both backends, at the store's default deadline (5 s).

    .venv/bin/python bench/log_stall.py --runs 3
    .venv/bin/python bench/log_stall.py --deadline 2 --cases sqlite-writer,pg-leader

For each case a child process takes the role (holds the SQLite write lock inside `writer()`,
holds PostgreSQL's sequencer lease inside `writer()`, leads the host's group commit, or holds
the pump's lock) and is stopped with SIGSTOP once it holds it. This process then makes
`--calls` appends (or enqueues, for the pump) one after another and reports how long the
first one waited, the longest of the rest, what it got (its status, or the error's first
words) and whether the error names the stopped process. The child is resumed and must exit
cleanly; afterwards the log must verify and hold every acknowledged event.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, table

PG_DSN = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")

HOLDERS = {
    "writer": r"""
import sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1])
with p.log.writer() as w:
    w.append({"id": "held", "type": "bench.stall.v1", "payload": {}})
    print("holding", flush=True)
    sys.stdin.readline()
""",
    "leader": r"""
import sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1])
p.log.append({"id": "leader", "type": "bench.stall.v1", "payload": {}})
print("holding", flush=True)
sys.stdin.readline()
""",
    "pump": r"""
import sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1])
conn = p.backend.claim_pump()
print("holding" if conn is not None else "not holding", flush=True)
sys.stdin.readline()
""",
}

CASES = {
    # name: (backend, holder, what this process does, host group on)
    "sqlite-writer": ("sqlite", "writer", "append", False),
    "pg-lease": ("postgres", "writer", "append", False),
    "pg-lease-writer": ("postgres", "writer", "writer", False),
    "pg-leader": ("postgres", "leader", "append", True),
    "pg-pump": ("postgres", "pump", "enqueue", False),
}


def fresh(backend: str, tmp: Path) -> str:
    if backend == "sqlite":
        return str(tmp / f"stall-{uuid.uuid4().hex[:8]}.db")
    return f"{PG_DSN}?schema=bench_stall_{uuid.uuid4().hex[:8]}"


def drop(url: str) -> None:
    if url.startswith("postgresql"):
        import psycopg

        schema = url.partition("?schema=")[2]
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def one(case: str, calls: int, tmp: Path) -> dict[str, Any]:
    from plaudit import Plaudit

    backend, role, action, grouped = CASES[case]
    url = fresh(backend, tmp)
    env = {**os.environ, "PLAUDIT_HOST_GROUP": "1" if grouped else "0"}
    os.environ["PLAUDIT_HOST_GROUP"] = env["PLAUDIT_HOST_GROUP"]
    Plaudit.open(url).close()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDERS[role], url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    out: dict[str, Any] = {"case": case}
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        os.kill(child.pid, signal.SIGSTOP)
        waits, got = [], []
        with Plaudit.open(url) as p:
            for i in range(calls):
                t = time.perf_counter()
                try:
                    if action == "writer":
                        with p.log.writer() as w:
                            got.append(w.append({"id": f"c{i}", "type": "bench.stall.v1"}).status)
                    elif action == "enqueue":
                        got.append(p.log.enqueue({"id": f"c{i}", "type": "bench.stall.v1"}).status)
                    else:
                        got.append(p.log.append({"id": f"c{i}", "type": "bench.stall.v1"}).status)
                except Exception as exc:
                    text = str(exc)
                    named = f"pid {child.pid}" in text
                    got.append(
                        f"{type(exc).__name__} ({'names' if named else 'does not name'} the holder)"
                    )
                waits.append(time.perf_counter() - t)
            if action == "enqueue":  # until the queued events have positions
                t = time.perf_counter()
                while len(p.log) < calls and time.perf_counter() - t < 60:
                    time.sleep(0.01)
                out["sequenced_s"] = time.perf_counter() - t
        out.update(first=waits[0], rest=max(waits[1:]) if len(waits) > 1 else 0.0, got=got[0])
        out["others"] = sorted(set(got[1:]))
    finally:
        os.kill(child.pid, signal.SIGCONT)
        if child.stdin is not None:
            child.stdin.write("\n")
            child.stdin.close()
        try:
            out["child_exit"] = child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
            out["child_exit"] = "hung"
    with Plaudit.open(url) as p:
        p.log.sequence()
        out["verified"] = p.log.verify().ok
    drop(url)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--deadline", type=float, default=None, help="$PLAUDIT_DEADLINE_S to use")
    args = ap.parse_args()
    if args.deadline is not None:
        os.environ["PLAUDIT_DEADLINE_S"] = str(args.deadline)
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as td:
        results: dict[str, list[dict[str, Any]]] = {}
        for r in range(args.runs):
            for case in args.cases.split(","):
                res = one(case, args.calls, Path(td))
                results.setdefault(case, []).append(res)
                print(f"run {r + 1} {case}: {res}", file=sys.stderr)
        for case, rs in results.items():
            rows.append(
                [
                    case,
                    f"{median([x['first'] for x in rs]):.2f}",
                    f"{median([x['rest'] for x in rs]):.3f}",
                    rs[0]["got"],
                    ", ".join(rs[0]["others"]),
                    f"{median([x['sequenced_s'] for x in rs]):.2f}"
                    if "sequenced_s" in rs[0]
                    else "-",
                    "yes" if all(x["verified"] for x in rs) else "NO",
                    ", ".join(sorted({str(x["child_exit"]) for x in rs})),
                ]
            )
    print(
        table(
            [
                "case",
                "first call waited s",
                "longest of the rest s",
                "first call got",
                "the rest got",
                "queued sequenced after s",
                "log verifies",
                "stopped process exit",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
