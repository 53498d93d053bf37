"""`restore --rechain` of a damaged ledger's backup, then the audit in the new store.

    .venv/bin/python bench/ledger_rechain.py --n 100000 --rounds 5

The rechain also records which rows were edited, moved or follow deleted ones (one SHA-256 per
line, over the bytes the append hashes anyway), and the audit reads that to amend the forged
transaction (issue 31). To see what that costs, run the same script against the code before it
with PYTHONPATH pointing at an older `src/`, interleaved with this one. Figures are medians of
`--rounds` rounds, CPU seconds beside wall seconds, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from plaudit import Plaudit

CATS = ["successful_validation", "validation_failure", "pattern_reuse", "unused_variables"]


def damaged_backup(folder: Path, n: int) -> Path:
    """A ledger of `n` transactions with one edited behind plaudit's back, backed up."""
    with Plaudit.open(folder / "old.db", durability="normal") as p:
        batch = 5000
        for start in range(0, n, batch):
            p.ledger.record_batch(
                [
                    {"category": CATS[i % 4], "action": f"step {i}"}
                    for i in range(start, min(n, start + batch))
                ]
            )
        seq = n // 2
        with p.backend.write() as tx:
            tx.execute("DROP TRIGGER IF EXISTS plaudit_events_no_update")
            tx.execute(
                "UPDATE plaudit_events SET payload = json_set(payload, '$.points', 3000) "
                "WHERE seq = (SELECT MIN(seq) FROM plaudit_events WHERE seq >= ? "
                "AND type = 'plaudit.ledger.transaction.v1')",
                (seq,),
            )
        p.ledger.backup(folder / "damaged.jsonl")
    return folder / "damaged.jsonl"


def one_round(backup: Path, folder: Path, k: int) -> tuple[float, float, float, float]:
    with Plaudit.open(folder / f"new-{k}.db", durability="normal") as p:
        w0, c0 = time.perf_counter(), time.process_time()
        p.ledger.restore(backup, rechain=True)
        w1, c1 = time.perf_counter(), time.process_time()
        audit = p.ledger.audit()
        w2, c2 = time.perf_counter(), time.process_time()
        assert not audit["halted"], audit["remaining"]
    return w1 - w0, c1 - c0, w2 - w1, c2 - c1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="transactions in the ledger")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        backup = damaged_backup(folder, args.n)
        rows = [one_round(backup, folder, k) for k in range(args.rounds)]
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(f"{args.n} transactions; median of {args.rounds} rounds")
    print(f"load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f}")
    print(f"restore --rechain  wall {med[0]:6.2f} s  cpu {med[1]:6.2f} s")
    print(f"audit              wall {med[2]:6.2f} s  cpu {med[3]:6.2f} s")


if __name__ == "__main__":
    main()
