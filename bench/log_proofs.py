"""What the Merkle tree and checkpoints cost the log, and what incremental verify saves.

1. Incremental against full verify: a SQLite log of `--events` events (checkpoints every 1,000)
   is verified once (which confirms its newest checkpoint), then gets 1% more events; the
   default (incremental) `verify()` and `verify(full=True)` are then timed, interleaved.
   Target (issue 12): incremental <= 10% of full.
2. Batch append with the tree against without it: batches of 1,000 router events into fresh
   SQLite stores, with the sequencer's tree extension on, and replaced by a no-op (the same
   code otherwise), interleaved. Target: within 10%.

Medians of `--runs` runs, wall and CPU seconds, and the load average.

    .venv/bin/python bench/log_proofs.py --runs 5 --events 200000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, router_events, table
from plaudit import Plaudit


def timed(fn: Any) -> tuple[float, float, Any]:
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def build_log(path: Path, n: int) -> None:
    events = router_events(n)
    with Plaudit.open(path, checkpoint_every=1000, checkpoint_seconds=0) as p:
        for i in range(0, n, 1000):
            p.log.append_batch(events[i : i + 1000])


def verify_runs(n: int, runs: int, tmp: Path) -> list[list[Any]]:
    path = tmp / "verify.db"
    build_log(path, n)
    extra = router_events(n // 100, prefix="more")
    with Plaudit.open(path, checkpoint_every=1000, checkpoint_seconds=0) as p:
        assert p.log.verify().ok  # confirms the newest checkpoint
        p.log.append_batch(extra)
        inc, full = [], []
        for _ in range(runs):
            w, c, r = timed(lambda: p.log.verify(workers=1))
            assert r.ok and r.mode == "incremental", r
            inc.append((w, c))
            w, c, r = timed(lambda: p.log.verify(full=True, workers=1))
            assert r.ok and r.mode == "full"
            full.append((w, c))
    ratio = median([a[0] / b[0] for a, b in zip(inc, full, strict=True)])
    cpu_ratio = median([a[1] / b[1] for a, b in zip(inc, full, strict=True)])
    return [
        [
            f"{n:,} + 1%",
            f"{median([x[0] for x in inc]):.3f} / {median([x[1] for x in inc]):.3f}",
            f"{median([x[0] for x in full]):.3f} / {median([x[1] for x in full]):.3f}",
            f"{ratio:.3f}",
            f"{cpu_ratio:.3f}",
        ]
    ]


def append_runs(n: int, runs: int, tmp: Path) -> list[list[Any]]:
    import plaudit.store.log as log_module
    from plaudit.store.merkle import CompactRange, Extension

    events = router_events(n)
    real = log_module.EventLog._tree_at

    class _NoTree(CompactRange):
        def extend(self, hashes: Any, *, store_level: int = 8) -> Extension:
            return Extension(self, b"\0" * 32, [])

    def no_tree(self: Any, tx: Any, head: Any) -> CompactRange:
        return _NoTree(0, [])

    rates: dict[str, list[tuple[float, float]]] = {"with tree": [], "without": []}
    for r in range(runs):
        for label in ("with tree", "without"):
            log_module.EventLog._tree_at = real if label == "with tree" else no_tree  # type: ignore[method-assign]
            path = tmp / f"append-{r}-{label.replace(' ', '')}.db"
            with Plaudit.open(path, checkpoint_every=0, checkpoint_seconds=0) as p:

                def run(p: Plaudit = p) -> None:
                    for i in range(0, n, 1000):
                        p.log.append_batch(events[i : i + 1000])

                w, c, _ = timed(run)
            rates[label].append((n / w, n / c))
            os.remove(path)
    log_module.EventLog._tree_at = real  # type: ignore[method-assign]
    ratio = median([a[0] / b[0] for a, b in zip(rates["with tree"], rates["without"], strict=True)])
    cpu = median([a[1] / b[1] for a, b in zip(rates["with tree"], rates["without"], strict=True)])
    return [
        [
            label,
            f"{median([x[0] for x in v]):,.0f}",
            f"{median([x[1] for x in v]):,.0f}",
            f"{ratio:.3f}" if label == "with tree" else "1",
            f"{cpu:.3f}" if label == "with tree" else "1",
        ]
        for label, v in rates.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--append-events", type=int, default=100_000)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        v = verify_runs(args.events, args.runs, tmp)
        a = append_runs(args.append_events, args.runs, tmp)
    print(f"load average at start: {load:.2f}\n")
    print(
        table(
            [
                "log",
                "incremental s (wall / CPU)",
                "--full s (wall / CPU)",
                "ratio (wall)",
                "ratio (CPU)",
            ],
            v,
        )
    )
    print()
    print(
        table(["batch append", "events/s (wall)", "events/CPU-s", "ratio (wall)", "ratio (CPU)"], a)
    )


if __name__ == "__main__":
    main()
