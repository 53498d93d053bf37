"""Benchmark: `plaudit signal export` against the reference exporter on the same seq_mem file.

    python bench/signals_export.py --reference PATH/TO/router_signal_export.py

The reference exporter is `tools/router_signal_export.py` in https://github.com/nikivdev/seq
(fetch it yourself; nothing here downloads it). Without --reference only plaudit is measured.
All run as child processes on one generated file, interleaved; each figure is the median of
--runs runs. Peak memory is each child's ru_maxrss as `wait4` reports it, which for plaudit's
two-process run is the larger of the exporter and its worker process. plaudit is measured
three times: as it runs by default (PLAUDIT_EXPORT_JOBS=auto: a second process reads half
the file when the load average shows an idle core), with PLAUDIT_EXPORT_JOBS=1 (one process)
and with PLAUDIT_EXPORT_JOBS=2 (always two). The summaries' counts are compared as well.
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

from plaudit.signals import synth
from plaudit.signals.join import Counts
from signals_common import median, plaudit_command, run_measured

REFERENCE_COUNTS = Counts.REFERENCE  # the counts the reference exporter also reports


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--print-runs", action="store_true", help="also print every run's figures")
    ap.add_argument("--reference", help="path to router_signal_export.py")
    ap.add_argument("--workdir", help="where to put the input and outputs (default: a temp dir)")
    ap.add_argument("--max-age-hours", type=int, default=100_000)
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="plaudit-bench-signals-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"seq_mem_{args.decisions}.jsonl"
    if not src.exists():
        t = time.perf_counter()
        with open(src, "w") as f:
            lines = synth.write(f, args.decisions, seed=1)
        print(f"generated {src.name}: {lines} lines in {time.perf_counter() - t:.1f}s")
    size_mb = src.stat().st_size / 1e6
    age = ["--max-age-hours", str(args.max_age_hours)]
    plaudit = [
        *plaudit_command(), "signal", "export", "--seq-mem", str(src),
        "--output-dir", str(work / "out_plaudit"), *age,
    ]  # fmt: skip
    commands = {
        "plaudit": plaudit,
        "plaudit, one process": plaudit,
        "plaudit, two processes": plaudit,
    }
    # As installed: bytecode cached, whatever the environment says.
    cached = {"PYTHONDONTWRITEBYTECODE": ""}
    envs = {
        "plaudit": {"PLAUDIT_EXPORT_JOBS": "auto", **cached},
        "plaudit, one process": {"PLAUDIT_EXPORT_JOBS": "1", **cached},
        "plaudit, two processes": {"PLAUDIT_EXPORT_JOBS": "2", **cached},
        "reference": cached,
    }
    if args.reference:
        commands["reference"] = [
            sys.executable, args.reference, "--seq-mem", str(src),
            "--output-dir", str(work / "out_reference"), *age,
        ]  # fmt: skip
    results: dict[str, dict[str, list[float]]] = {
        k: {"wall": [], "rss": [], "cpu": []} for k in commands
    }
    for _ in range(args.runs):
        for name, cmd in commands.items():  # interleaved, so load changes hit both alike
            wall, rss, rc, cpu = run_measured(cmd, env=envs.get(name))
            if rc != 0:
                print(f"{name} failed with exit status {rc}", file=sys.stderr)
                return 1
            results[name]["wall"].append(wall)
            results[name]["rss"].append(rss / 1024)
            results[name]["cpu"].append(cpu)

    if args.print_runs:
        for name, r in results.items():
            walls = ", ".join(f"{w:.2f}" for w in r["wall"])
            print(f"{name}: wall {walls}")
    load = os.getloadavg()
    print(
        f"\ninput: {args.decisions} decisions, {size_mb:.0f} MB; median of {args.runs} runs;"
        f" load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n"
    )
    print("| exporter | wall time (s) | CPU time (s) | peak RSS (MiB) |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        wall, cpu, rss = median(r["wall"]), median(r["cpu"]), median(r["rss"])
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {rss:.0f} |")
    if "reference" in results:
        ref = results["reference"]
        print()
        for name in ("plaudit", "plaudit, one process", "plaudit, two processes"):
            p = results[name]
            speed = median(ref["wall"]) / median(p["wall"])
            cpu = median(ref["cpu"]) / median(p["cpu"])
            mem = median(p["rss"]) / median(ref["rss"])
            print(
                f"{name}: {speed:.1f}x faster (wall), {cpu:.1f}x less CPU time; "
                f"peak memory {mem:.2f} of the reference's"
            )
        ours = json.loads((work / "out_plaudit" / "summary.json").read_text())
        theirs = json.loads((work / "out_reference" / "summary.json").read_text())
        same = all(ours["counts"][k] == theirs["counts"][k] for k in REFERENCE_COUNTS)
        same = same and ours["distributions"] == theirs["distributions"]
        same = same and all(ours["quality"][k] == v for k, v in theirs["quality"].items())
        print(f"counts, quality and distributions identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
