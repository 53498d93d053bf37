"""Benchmark: re-exporting a log after 1% more events, against the reference on the whole file.

    python bench/signals_reexport.py --reference PATH/TO/router_signal_export.py

The reference exporter is `tools/router_signal_export.py` in https://github.com/nikivdev/seq
(fetch it yourself; nothing here downloads it). A seq_mem file of --decisions decisions is
generated (`plaudit.signals.synth`, seed 1) and imported into a SQLite store, which keeps the
`signals` projection current as it goes. Then, --runs times: 1% more events are appended to
both the log (through the log's API, as emits would) and the file; `plaudit signal export
--db STORE` and the reference on the whole file run one after the other, as child processes.
Each run's summaries are compared (counts, quality, distributions, split sizes); the figures
are medians of wall time and CPU time (user + system, from `wait4`) per exporter.

plaudit exports into the same directory every time, so it copies the hours whose rows did not
change from its previous files (`plaudit.signals.reuse`); `--new-dir` exports into a new
directory each run instead, which builds every row from the projection, and `--new-dir
--reuse` exports into a new directory each run with `--reuse-from` the previous run's
directory (which it only reads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plaudit import Plaudit
from plaudit.seqmem import SeqMemRow, import_file, row_to_event
from plaudit.signals import synth
from plaudit.signals.join import Counts
from plaudit.signals.seqmem_file import safe_json
from signals_common import median, plaudit_command, run_measured

START_MS = 1_790_000_000_000


def more_rows(decisions: int, batch: int, seed: int) -> list[dict]:
    """One batch of new traffic: decision ids of their own, later timestamps."""
    start = START_MS + 10**10 + batch * 10**9
    return list(synth.rows(decisions, seed=seed + batch, start_ms=start, sessions=2400))


def same_summary(ours: dict, theirs: dict) -> bool:
    same = all(ours["counts"][k] == theirs["counts"][k] for k in Counts.REFERENCE)
    same = same and ours["distributions"] == theirs["distributions"]
    return same and all(ours["quality"][k] == v for k, v in theirs["quality"].items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=60_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reference", help="path to router_signal_export.py")
    ap.add_argument("--workdir", help="where to put the inputs and outputs (default: temp dir)")
    ap.add_argument("--extra", nargs="*", default=[], help="extra flags for plaudit's export")
    ap.add_argument(
        "--new-dir", action="store_true", help="plaudit exports into a new directory each run"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="with --new-dir: pass --reuse-from the previous run's output directory",
    )
    args = ap.parse_args()
    if args.reuse and not args.new_dir:
        ap.error("--reuse goes with --new-dir")

    work = Path(args.workdir or tempfile.mkdtemp(prefix="plaudit-bench-reexport-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "seq_mem.jsonl"
    db = work / "store.db"
    for path in (src, db):
        if path.exists():
            path.unlink()
    t = time.perf_counter()
    with open(src, "w") as f:
        lines = synth.write(f, args.decisions, seed=1)
    with Plaudit.open(db, durability="normal") as p:
        report = import_file(p.log, src)
    print(
        f"setup: {lines} lines, {report.imported} events imported with the projection kept"
        f" current, in {time.perf_counter() - t:.1f}s"
    )
    age = ["--max-age-hours", "100000"]
    plaudit = [*plaudit_command(), "signal", "export", "--db", str(db),
               "--output-dir", str(work / "out_plaudit"), *age, *args.extra]  # fmt: skip
    reference = [sys.executable, str(args.reference or ""), "--seq-mem", str(src),
                 "--output-dir", str(work / "out_reference"), *age]  # fmt: skip
    results: dict[str, dict[str, list[float]]] = {
        k: {"wall": [], "cpu": []} for k in ("plaudit", "reference")
    }
    new_events = max(1, lines // 100)
    # As installed: bytecode cached (whatever the environment says), which the warm-up export
    # writes; it also verifies the log in full and confirms its checkpoints, once, untimed.
    env = {"PYTHONDONTWRITEBYTECODE": ""}
    run_measured(plaudit, env=env)
    all_same = True
    for run in range(args.runs):
        if args.new_dir:
            previous = plaudit[plaudit.index("--output-dir") + 1]
            out = work / f"out_plaudit_{run}"
            plaudit[plaudit.index("--output-dir") + 1] = str(out)
            if args.reuse:
                if "--reuse-from" in plaudit:
                    plaudit[plaudit.index("--reuse-from") + 1] = previous
                else:
                    plaudit += ["--reuse-from", previous]
        batch = []
        for row in more_rows(max(1, args.decisions // 100), run, seed=1000):
            batch.append(row)
            if len(batch) >= new_events:
                break
        with Plaudit.open(db) as p:
            p.log.append_batch([row_to_event(SeqMemRow(**r)) for r in batch])
        with open(src, "a") as f:
            f.write("".join(safe_json(r) + "\n" for r in batch))
        commands = {"plaudit": plaudit}
        if args.reference:
            commands["reference"] = reference
        for name, cmd in commands.items():
            wall, _, rc, cpu = run_measured(cmd, env=env)
            if rc != 0:
                print(f"{name} failed with exit status {rc}", file=sys.stderr)
                return 1
            results[name]["wall"].append(wall)
            results[name]["cpu"].append(cpu)
        if args.reference:
            out_dir = plaudit[plaudit.index("--output-dir") + 1]
            ours = json.loads((Path(out_dir) / "summary.json").read_text())
            theirs = json.loads((work / "out_reference" / "summary.json").read_text())
            all_same = all_same and same_summary(ours, theirs)
        print(
            f"run {run + 1}: +{len(batch)} events; "
            + ", ".join(f"{k} {v['wall'][-1]:.3f}s" for k, v in results.items() if v["wall"])
        )
    load = os.getloadavg()
    print(f"\n{args.decisions} decisions, +1% events per run; median of {args.runs} runs;")
    print(f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n")
    print("| exporter | wall time (s) | CPU time (s) |")
    print("|---|---:|---:|")
    for name, r in results.items():
        if r["wall"]:
            print(f"| {name} | {median(r['wall']):.3f} | {median(r['cpu']):.3f} |")
    if args.reference:
        ref, ours = results["reference"], results["plaudit"]
        print(
            f"\nplaudit re-export: {median(ref['wall']) / median(ours['wall']):.1f}x faster"
            f" (wall), {median(ref['cpu']) / median(ours['cpu']):.1f}x less CPU time;"
            f" counts, quality, distributions and split sizes identical in every run: {all_same}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
