"""How long one bandit checkpoint takes, store included, on SQLite and PostgreSQL.

    .venv/bin/python bench/bandit_checkpoint.py
    .venv/bin/python bench/bandit_checkpoint.py --backend postgres --runs 5

The workload is `bench/http_load.py`'s: its arms, 4 contexts, outputs that name up to three of
the selected tools. A store is warmed with `--warm` select+observe pairs, then `--pending`
observations are appended directly (no checkpoint is asked for below the backend's limit).
Each of `--n` timed checkpoints folds those same pending observations in a write transaction
that is then rolled back, so every one does the same work. Figures are the median wall and CPU
milliseconds of a checkpoint. The script calls only `projection.checkpoint` and
`projection.load_config`, so it runs against older trees too (PYTHONPATH=<tree>/src).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_mix import ARMS
from plaudit import Plaudit
from plaudit.bandit import projection
from plaudit.events import make_event

PG = "postgresql://127.0.0.1:5432/test"


class _Undo(Exception):
    pass


def _pair(p: Plaudit, i: int) -> None:
    sel = p.bandit.select(token_budget=6000, context=f"repo-{i % 4}", seed=i)
    tools = [a.split(":", 2)[2] for a in sel.included if a.startswith("tool:")][:3]
    p.bandit.observe(sel.run_id, "used " + " and ".join(tools or ["nothing"]), [])


def _pending(p: Plaudit, n: int, seed: int) -> None:
    ids = [a["id"] for a in ARMS][:24]
    for i in range(n):
        run = make_event(
            "plaudit.bandit.run.v1",
            {
                "arms": [{"id": a, "tokens": 100, "included": True} for a in ids],
                "budget": 6000,
                "used_tokens": 0,
                "context": f"repo-{i % 4}",
            },
            id=f"ck-{seed}-{i}",
        )
        obs = make_event(
            "plaudit.bandit.observation.v1",
            {
                "run_id": f"ck-{seed}-{i}",
                "rewards": {a: int((i + k) % 3 == 0) for k, a in enumerate(ids)},
                "updates": True,
                "context": f"repo-{i % 4}",
            },
        )
        p.log.append_batch([run, obs])


def one(db: str, args: argparse.Namespace) -> dict[str, float]:
    with Plaudit.open(db) as p:
        try:
            p.bandit.register(ARMS)
            for i in range(args.warm):
                _pair(p, i)
            # stop the trailing checkpoints of the warm-up (trees that have them), so that none
            # folds the timed pending observations; then leave nothing pending
            trailing = getattr(p.bandit, "_trailing", None)
            if trailing is not None:
                trailing.close()
            with p.log.writer() as w:
                projection.checkpoint(w.tx, projection.load_config(w.tx))
                w.tx.execute("UPDATE bandit_meta SET ckpt_index = obs_index, pending = 0")
            _pending(p, args.pending, args.warm)
            walls, cpus = [], []
            for _ in range(args.n):
                try:
                    with p.log.writer() as w:
                        cfg = projection.load_config(w.tx)
                        c0, t0 = time.process_time(), time.perf_counter()
                        projection.checkpoint(w.tx, cfg)
                        walls.append((time.perf_counter() - t0) * 1e3)
                        cpus.append((time.process_time() - c0) * 1e3)
                        raise _Undo
                except _Undo:
                    pass
            return {"wall_ms": statistics.median(walls), "cpu_ms": statistics.median(cpus)}
        finally:
            if db.startswith("postgres"):
                p.backend.drop_schema()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=40, help="timed checkpoints per run")
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--pending", type=int, default=15)
    args = ap.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    load0 = os.getloadavg()[0]
    got: dict[str, list[dict[str, float]]] = {b: [] for b in backends}
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.runs):
            for b in backends:
                db = (
                    f"{PG}?schema=bench_ck_{uuid.uuid4().hex[:8]}"
                    if b == "postgres"
                    else str(Path(d) / f"ck-{r}.db")
                )
                res: dict[str, Any] = one(db, args)
                got[b].append(res)
                print(f"  {b} run {r + 1}: {res}", file=sys.stderr, flush=True)
    print("| backend | runs | checkpoint wall ms (median of runs) | CPU ms |")
    print("|---|---:|---:|---:|")
    for b, rs in got.items():
        wall = statistics.median(x["wall_ms"] for x in rs)
        cpu = statistics.median(x["cpu_ms"] for x in rs)
        print(f"| {b} | {len(rs)} | {wall:.2f} | {cpu:.2f} |")
    print(
        f"\n{args.pending} pending observations of 24 arms over 4 contexts; load average "
        f"{load0:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
