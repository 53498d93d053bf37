"""Merkle proofs at scale: making and checking an inclusion proof, and the cost of the tree.

    .venv/bin/python bench/proofs.py                   # 1M leaves, 5 interleaved runs
    .venv/bin/python bench/proofs.py --size 200000     # quicker

A SQLite file (kept in a temp directory for the run) holds `--size` chain hashes in a
`plaudit_events (seq, hash)` table and the stored upper tree nodes in `plaudit_tree_nodes`,
built with `CompactRange.extend` in sequencer-sized batches. Each run then times, in turn:
- make: a fresh read transaction, `inclusion_proof` of a random leaf in the full tree
  (target: <= 5 ms each);
- check: `verify_inclusion` plus the Ed25519 check of the signed checkpoint (target: <= 5 ms);
- extend: the per-leaf cost of `extend` over `--batch`-leaf batches, leaf hashing included,
  beside the per-event cost of `EventLog.append_batch` on SQLite in the same run; their
  ratio is what the tree adds to the batch append (target: < 10%).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from common import median, percentile, router_events, table
from plaudit import Plaudit
from plaudit.store.backend import DIALECT_WORDS
from plaudit.store.checkpoints import sign_checkpoint
from plaudit.store.keys import load_or_create_key
from plaudit.store.merkle import CompactRange, leaf_hash, leaf_hashes, verify_inclusion
from plaudit.store.tree import INSERT_NODES_SQL, TREE_NODES_DDL, TxSource, inclusion_proof


class _Tx:
    """The two reads `TxSource` makes, on a plain sqlite3 connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def fetchall(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]


def build(path: Path, size: int, batch: int) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE plaudit_events (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL)")
    conn.execute(TREE_NODES_DDL.format(**DIALECT_WORDS["sqlite"]))
    prev = hashlib.sha256(b"plaudit.log.v1").digest()
    rng = CompactRange.empty()
    sha = hashlib.sha256
    for lo in range(0, size, batch):
        hi = min(lo + batch, size)
        chain = []
        for s in range(lo, hi):
            prev = sha(prev + s.to_bytes(8, "big")).digest()
            chain.append(prev)
        conn.executemany(
            "INSERT INTO plaudit_events (seq, hash) VALUES (?, ?)",
            zip(range(lo + 1, hi + 1), chain, strict=True),
        )
        ext = rng.extend(leaf_hashes(chain))
        conn.executemany(INSERT_NODES_SQL, [(n.level, n.index, n.hash) for n in ext.nodes])
        rng = ext.range
    conn.commit()
    conn.close()
    return rng.root


def time_proofs(path: Path, size: int, root: bytes, ck: Any, pub: bytes, n: int, seed: int):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rnd = random.Random(seed)
    make, check = [], []
    for _ in range(n):
        i = rnd.randrange(size)
        t = time.perf_counter()
        conn.execute("BEGIN")
        src = TxSource(_Tx(conn))
        path_ = inclusion_proof(i, size, src)
        entry = src.leaves(i, i + 1)[0]
        conn.execute("COMMIT")
        make.append(time.perf_counter() - t)
        t = time.perf_counter()
        ck.verify(pub)
        ok = verify_inclusion(i, size, leaf_hash(entry), path_, root)
        check.append(time.perf_counter() - t)
        assert ok, i
    conn.close()
    return make, check


def time_extend(hashes: list[bytes], batch: int) -> tuple[float, float]:
    """Seconds (wall, CPU) per leaf to extend over `hashes` in batches."""
    rng = CompactRange.empty()
    t, c = time.perf_counter(), time.process_time()
    for lo in range(0, len(hashes), batch):
        rng = rng.extend(leaf_hashes(hashes[lo : lo + batch])).range
    return (time.perf_counter() - t) / len(hashes), (time.process_time() - c) / len(hashes)


def time_append(workdir: Path, events: list[dict[str, Any]], run: int) -> tuple[float, float]:
    """Seconds (wall, CPU) per event of `append_batch` on a fresh SQLite store."""
    p = Plaudit.open(str(workdir / f"append-{run}.db"))
    try:
        t, c = time.perf_counter(), time.process_time()
        p.log.append_batch(events)
        return (time.perf_counter() - t) / len(events), (time.process_time() - c) / len(events)
    finally:
        p.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--proofs", type=int, default=200, help="proofs per run")
    ap.add_argument("--batch", type=int, default=1000, help="leaves per extend batch")
    ap.add_argument("--append-events", type=int, default=50_000)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        db = work / "tree.db"
        t = time.perf_counter()
        root = build(db, args.size, args.batch)
        built = time.perf_counter() - t
        conn = sqlite3.connect(db)
        nodes = conn.execute("SELECT count(*) FROM plaudit_tree_nodes").fetchone()[0]
        conn.close()
        key = load_or_create_key(str(work / "tree.db"), {})
        ck = sign_checkpoint(key, args.size, root, int(time.time() * 1000))
        hashes = [os.urandom(32) for _ in range(args.append_events)]
        events = router_events(args.append_events)

        make_med, make_p99, check_med, check_p99 = [], [], [], []
        ext_wall, ext_cpu, app_wall, app_cpu = [], [], [], []
        for run in range(args.runs):  # interleaved: each run does every measurement once
            make, check = time_proofs(db, args.size, root, ck, key.public_key, args.proofs, run)
            make_med.append(median(make))
            make_p99.append(percentile(make, 99))
            check_med.append(median(check))
            check_p99.append(percentile(check, 99))
            w, c = time_extend(hashes, args.batch)
            ext_wall.append(w)
            ext_cpu.append(c)
            w, c = time_append(work, events, run)
            app_wall.append(w)
            app_cpu.append(c)

    ms = lambda v: f"{median(v) * 1e3:.3f}"  # noqa: E731
    us = lambda v: f"{median(v) * 1e6:.3f}"  # noqa: E731
    print(f"tree of {args.size:,} leaves, {nodes:,} stored nodes, built in {built:.1f}s")
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {args.runs} runs\n")
    print(
        table(
            ["operation", "median ms", "p99 ms (median of runs)", "target"],
            [
                ("make inclusion proof", ms(make_med), ms(make_p99), "<= 5 ms"),
                ("check proof + signature", ms(check_med), ms(check_p99), "<= 5 ms"),
            ],
        )
    )
    ratio = median(ext_wall) / median(app_wall)
    cpu_ratio = median(ext_cpu) / median(app_cpu)
    print()
    print(
        table(
            ["per leaf / event", "wall us", "CPU us"],
            [
                (f"extend (batches of {args.batch})", us(ext_wall), us(ext_cpu)),
                ("append_batch, SQLite", us(app_wall), us(app_cpu)),
            ],
        )
    )
    print(
        f"\nextend adds {ratio:.1%} of wall time and {cpu_ratio:.1%} of CPU time to the "
        "batch append's per event (target < 10%)"
    )


if __name__ == "__main__":
    main()
