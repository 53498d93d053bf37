"""What trust costs: writer signatures per append and per verified event, and a receipt per
queued call.

    .venv/bin/python bench/log_trust.py --runs 5
    .venv/bin/python bench/log_trust.py --runs 5 --no-pg

Interleaved runs (plain, then signed, ...), medians, CPU beside wall, load average:
* batch append (batches of 1,000, SQLite) and single appends, without and with a writer key;
* `verify(full=True)` against `verify(full=True, writers=True)` on the signed log: the
  signature check per event;
* PostgreSQL `enqueue` of one event while another handle holds the lease (so it stays in the
  intake and gets a receipt), against the receipt's signing alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, table
from plaudit import Plaudit

PG_DSN = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")


def timed(fn: Any) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def events(n: int, tag: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{tag}-{i}", "type": "bench.trust.v1", "session_id": "s",
         "payload": {"route": "code", "i": i, "pad": "x" * 80}}
        for i in range(n)
    ]  # fmt: skip


def one_run(tmp: Path, key: str, n: int, singles: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, writer in (("plain", None), ("signed", key)):
        db = tmp / f"{label}-{uuid.uuid4().hex[:6]}.db"
        with Plaudit.open(db, writer_key=writer, checkpoint_every=0, checkpoint_seconds=0) as p:
            batch = events(n, label)
            wall, cpu = timed(
                lambda p=p, b=batch: [
                    p.log.append_batch(b[i : i + 1000]) for i in range(0, n, 1000)
                ]
            )
            out[f"{label}_batch_eps"] = n / wall
            out[f"{label}_batch_cpu_us"] = cpu / n * 1e6
            one = events(singles, label + "-one")
            _, cpu = timed(lambda p=p, o=one: [p.log.append(e) for e in o])
            out[f"{label}_single_cpu_us"] = cpu / singles * 1e6
            if writer is not None:
                p.log.register_writer(str(p.log.core.signer.verifier))  # type: ignore[union-attr]
                _, cpu_plain = timed(lambda p=p: p.log.verify(full=True))
                _, cpu_writers = timed(lambda p=p: p.log.verify(full=True, writers=True))
                total = len(p.log)
                out["verify_us_per_event"] = cpu_plain / total * 1e6
                out["writers_us_per_event"] = (cpu_writers - cpu_plain) / total * 1e6
    return out


def receipt_run(n: int) -> dict[str, float]:
    import threading

    from plaudit.events import prepare
    from plaudit.store.receipts import sign_receipt

    os.environ["PLAUDIT_HOST_GROUP"] = "0"
    url = f"{PG_DSN}?schema=bench_trust_{uuid.uuid4().hex[:8]}"
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with Plaudit.open(url) as h, h.log.writer():
            holding.set()
            release.wait(120)

    with Plaudit.open(url) as p:
        p.log.append({"type": "bench.trust.v1", "payload": {}})
        th = threading.Thread(target=hold)
        th.start()
        holding.wait(30)
        try:
            evs = events(n, "q")
            _, cpu = timed(lambda: [p.log.enqueue(e) for e in evs])
            key = p.log.checkpointer.current_key()
            prepared = [prepare(e) for e in evs]
            _, sign_cpu = timed(lambda: [sign_receipt(key, [x], 1) for x in prepared])
        finally:
            release.set()
            th.join()
        p.log.sequence()
        p.backend.connection().execute(f'DROP SCHEMA "{url.partition("schema=")[2]}" CASCADE')
    return {"enqueue_cpu_us": cpu / n * 1e6, "receipt_cpu_us": sign_cpu / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--singles", type=int, default=300)
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        key = str(tmp / "w.key")
        from plaudit.store.writers import new_writer_key

        k = new_writer_key("bench")
        Path(key).write_bytes(b"name: bench\n" + k.pem())
        runs = []
        for r in range(args.runs):
            res = one_run(tmp, key, args.events, args.singles)
            if not args.no_pg:
                res.update(receipt_run(300))
            runs.append(res)
            print(f"run {r + 1}: {res}", file=sys.stderr)
    m = {k: median([x[k] for x in runs]) for k in runs[0]}
    rows = [
        ["batch append, events/s (SQLite, batches of 1,000)",
         f"{m['plain_batch_eps']:,.0f}", f"{m['signed_batch_eps']:,.0f}"],
        ["batch append, CPU µs per event",
         f"{m['plain_batch_cpu_us']:.1f}", f"{m['signed_batch_cpu_us']:.1f}"],
        ["single append, CPU µs per append",
         f"{m['plain_single_cpu_us']:.0f}", f"{m['signed_single_cpu_us']:.0f}"],
        ["verify --full, CPU µs per event (plus --writers)",
         f"{m['verify_us_per_event']:.1f}", f"+{m['writers_us_per_event']:.1f}"],
    ]  # fmt: skip
    if not args.no_pg:
        rows.append(
            ["PostgreSQL enqueue into the intake, CPU µs per call (of which the receipt)",
             f"{m['enqueue_cpu_us']:.0f}", f"{m['receipt_cpu_us']:.0f}"]
        )  # fmt: skip
    print(table(["what", "without", "with writer key / receipt"], rows))
    print(f"\n{args.runs} interleaved runs; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
