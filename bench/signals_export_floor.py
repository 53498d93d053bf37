"""Benchmark: the least CPU the export's native calls need, with no Python work around them.

    python bench/signals_export_floor.py [--workdir DIR] [--runs 3]

`plaudit signal export` reads a seq_mem file with msgspec, hashlib and bytes methods, driven by
Python loops. This script times those native calls alone, in one process with the garbage
collector off, on the same generated file as `signals_export.py`: splitting the file into
lines, decoding each row, decoding each decision's and outcome's subject, encoding each
decision's output row head, and the split bucket's sha256. Their sum is a floor for the read
phase that no tuning of the Python around them can go below; the join and the writing come on
top. `--phases` also runs the whole export in this process (one process, no worker) and
splits its CPU time into reading (with folding the records) and the rest (join, digests,
writing). With `--polars`, and polars installed, it also times polars reading the same file
(an engine that parses in parallel natively), for comparison.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plaudit.signals import scan, synth
from plaudit.signals.contract import DECISION, OUTCOME


def timed(
    fn: Callable[[], Any], runs: int, clock: Callable[[], float] = time.process_time
) -> tuple[float, Any]:
    """Median seconds (of CPU time, unless another clock is given) of `runs` calls, and the
    last call's result."""
    times = []
    result = None
    for _ in range(runs):
        result = None  # free the previous result before timing the next call
        t = clock()
        result = fn()
        times.append(clock() - t)
    return statistics.median(times), result


def export_phases(src: Path, out: Path) -> tuple[float, float, float]:
    """(reading, the rest, all) in CPU seconds of one in-process export without a worker.
    Reading ends at its last progress report, which comes after the records are folded."""
    from plaudit.signals.export import export

    read_done = 0.0

    def progress(phase: str, done: int, total: int | None) -> None:
        nonlocal read_done
        if phase == "reading":
            read_done = time.process_time()

    gc.enable()  # as the command runs
    start = time.process_time()
    export(seq_mem=src, output_dir=out, max_age_hours=100_000, parallel=False, progress=progress)
    end = time.process_time()
    gc.disable()
    return read_done - start, end - read_done, end - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", help="where the input is or goes (default: a temp dir)")
    ap.add_argument("--polars", action="store_true", help="also time polars (if installed)")
    ap.add_argument("--phases", action="store_true", help="also time the export's phases")
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="plaudit-bench-floor-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"seq_mem_{args.decisions}.jsonl"
    if not src.exists():
        with open(src, "w") as f:
            synth.write(f, args.decisions, seed=1)
    # First, while this process holds nothing else the collector would have to walk.
    phases = [
        export_phases(src, work / "out_phases") for _ in range(args.runs if args.phases else 0)
    ]
    data = src.read_bytes()
    gc.disable()
    rows: dict[str, float] = {}

    rows["split into lines (bytes.split)"], lines = timed(lambda: data.split(b"\n"), args.runs)
    lines = [line for line in lines if line]
    decode_row = scan._decode_row
    rows["decode rows (msgspec, typed)"], decoded = timed(
        lambda: [decode_row(line) for line in lines], args.runs
    )
    subjects = {DECISION: [], OUTCOME: []}
    for row in decoded:
        if row.name in subjects:
            subjects[row.name].append(row.subject)
    decode_decision = scan._SUBJECT_DECODERS[DECISION]
    decode_outcome = scan._SUBJECT_DECODERS[OUTCOME]
    rows["decode decision subjects"], decisions = timed(
        lambda: [decode_decision(s) for s in subjects[DECISION]], args.runs
    )
    rows["decode outcome subjects"], _ = timed(
        lambda: [decode_outcome(s) for s in subjects[OUTCOME]], args.runs
    )

    def encode_heads() -> bytearray:
        buf = bytearray()
        encode_into = scan._encode_into
        head = scan._RowHead
        for d in decisions:
            encode_into(
                head(
                    scan.SCHEMA_ROW, d.decision_id, 1, "flow", "s", d.project_fingerprint,
                    d.project_path, d.git_branch, d.git_commit, d.user_hash, d.user_intent,
                    d.context, d.candidates, d.chosen_task, 0.5,
                ),
                buf,
                -1,
            )  # fmt: skip
        return buf

    rows["encode output row heads"], _ = timed(encode_heads, args.runs)
    sha256 = hashlib.sha256
    rows["split bucket sha256"], _ = timed(
        lambda: [sha256(f"42:{d.decision_id}".encode()).digest() for d in decisions], args.runs
    )
    print(
        f"\ninput: {src.name}, {len(data) / 1e6:.0f} MB, {len(lines)} lines "
        f"({len(subjects[DECISION])} decisions, {len(subjects[OUTCOME])} outcomes); "
        f"median of {args.runs} runs, one process\n"
    )
    print("| native calls alone | CPU s |")
    print("|---|---:|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.2f} |")
    print(f"| **sum: floor of the read phase** | **{sum(rows.values()):.2f}** |")

    if phases:
        print("\n| the export in one process, CPU s | median | range |")
        print("|---|---:|---:|")
        for i, name in enumerate(("reading and folding", "joining, digests, writing", "all")):
            values = [p[i] for p in phases]
            print(
                f"| {name} | {statistics.median(values):.2f} | "
                f"{min(values):.2f} to {max(values):.2f} |"
            )

    if args.polars:
        try:
            import polars as pl
        except ImportError:
            print("\npolars is not installed; skipped")
            return 0
        schema = {"name": pl.Utf8, "ts_ms": pl.Int64, "session_id": pl.Utf8, "subject": pl.Utf8}
        wall = time.perf_counter
        read_s, frame = timed(lambda: pl.read_ndjson(src, schema=schema), args.runs, wall)
        fields = ("decision_id", "session_id", "chosen_task", "source", "confidence")
        fields += ("user_intent", "project_path", "context", "candidates")
        decided = frame.filter(pl.col("name") == DECISION)
        extract_s, _ = timed(
            lambda: decided.select(
                [pl.col("subject").str.json_path_match(f"$.{k}").alias(k) for k in fields]
            ),
            args.runs,
            wall,
        )
        print(f"\npolars {pl.__version__}, wall s (it uses both cores):\n")
        print(f"| read_ndjson, 4 columns | {read_s:.2f} |")
        print(f"| json_path_match, {len(fields)} decision fields | {extract_s:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
