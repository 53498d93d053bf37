"""The workload suite: plaudit against its simple peers on every workload of
`plaudit.bandit.workloads`, plus the drift checks and a convergence plot.

    .venv/bin/python bench/bandit_suite.py                    # print the table
    .venv/bin/python bench/bandit_suite.py --write            # also into docs/benchmarks.md
    pip install -e '.[bench]'                                 # MABWiser and matplotlib

Every figure is the median over `--seeds` workload seeds of a summary of the last quarter of
the runs. Regret per run = excess tokens over the oracle + 5,000 x missed needed arms. Select
p50 is the in-memory policy's (the store's cost is in bench/bandit_latency.py).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bandit_peers import MabwiserLinTS, MabwiserTS, PerTaskTS
from plaudit.bandit import workloads
from plaudit.bandit.simulator import Scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
PNG = ROOT / "docs" / "bandit_convergence.png"
START, END = "<!-- bandit-suite:start -->", "<!-- bandit-suite:end -->"
KEYS = (
    "savings_percent",
    "recall",
    "critical_cheap_recall",
    "critical_expensive_recall",
    "regret_per_run",
    "select_p50_us",
)


def have_mabwiser() -> bool:
    try:
        import mabwiser  # noqa: F401
    except ImportError:
        return False
    return True


def methods(sc: Scenario) -> dict[str, Any]:
    out: dict[str, Any] = {"plaudit": "plaudit", "per-task TS": PerTaskTS}
    if have_mabwiser() and sc.n <= 200 and len(sc.task_types) <= 10:
        out["MABWiser TS"] = MabwiserTS
        out["MABWiser LinTS"] = MabwiserLinTS
    out["stationary optimum"] = "optimum"
    out["oracle"] = "oracle"
    return out


def median(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def drift_checks(seeds: int) -> list[dict[str, float]]:
    sc = workloads.drift()
    d = sc.drift_at
    out = []
    for s in range(seeds):
        for name, strat in (("plaudit", "plaudit"), ("per-task TS", PerTaskTS)):
            m = simulate(sc, strat, 2000, seed=s)
            out.append(
                {
                    "method": name,
                    "retired_after_300": m.inclusion("tool:vcs:Svn", (d + 300, d + 400), None),
                    "new_after_200": m.inclusion(
                        "file:workspace:src/new_core.py", (d + 200, d + 300), {0}
                    ),
                }
            )
    return out


def convergence_plot(seeds: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = workloads.drift()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    window = 100
    for name, strat in (
        ("plaudit", "plaudit"),
        ("per-task TS", PerTaskTS),
        ("stationary optimum", "optimum"),
    ):
        sav, rec = [], []
        for s in range(seeds):
            m = simulate(sc, strat, 2000, seed=s)
            tok = np.convolve(np.array(m.tokens, float), np.ones(window), "valid")
            full = np.convolve(np.array(m.full_tokens, float), np.ones(window), "valid")
            hit = np.convolve(np.array(m.hit, float), np.ones(window), "valid")
            need = np.convolve(np.array(m.needed, float), np.ones(window), "valid")
            sav.append(100 * (1 - tok / full))
            rec.append(hit / np.maximum(need, 1))
        x = np.arange(window, 2001)
        axes[0].plot(x, np.median(sav, axis=0), label=name)
        axes[1].plot(x, np.median(rec, axis=0), label=name)
    for ax, title in zip(
        axes, ("token savings % (100-run window)", "needed-arm recall"), strict=True
    ):
        ax.axvline(sc.drift_at, color="grey", linestyle=":")
        ax.set_title(title)
        ax.set_xlabel("run")
    axes[1].set_ylim(0.9, 1.001)
    axes[0].legend()
    fig.suptitle(
        f"drift workload ({sc.n} arms; drift at run {sc.drift_at}), median of {seeds} seeds"
    )
    fig.tight_layout()
    fig.savefig(PNG, dpi=90)


def _drift_row(method: str, drift: list[dict[str, Any]]) -> str:
    mine = [d for d in drift if d["method"] == method]
    retired = ", ".join(f"{d['retired_after_300']:.2f}" for d in mine)
    new = ", ".join(f"{d['new_after_200']:.2f}" for d in mine)
    return f"| {method} | {retired} | {new} |"


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", default=None, help="comma-separated workload names")
    ap.add_argument("--write", action="store_true", help="write the table into the docs")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    t_start, c_start = time.perf_counter(), time.process_time()
    lines = [
        "| workload | method | savings | recall | critical recall (cheap) | "
        "critical recall (expensive) | regret/run | select p50 (µs) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    names = args.only.split(",") if args.only else list(workloads.SUITE)
    for wname in names:
        build, runs = workloads.SUITE[wname]
        sc = build()
        last = runs // 4
        res: dict[str, dict[str, float | None]] = {}
        for mname, strat in methods(sc).items():
            rows = [
                simulate(sc, strat, runs, seed=s, timed=True).summary(last)
                for s in range(args.seeds)
            ]
            res[mname] = {k: median(rows, k) for k in KEYS}
            print(f"  {wname} / {mname}: {res[mname]}", file=sys.stderr)
        for mname, r in res.items():
            bold = "**" if mname == "plaudit" else ""
            lines.append(
                f"| {wname} | {bold}{mname}{bold} | {fmt(r['savings_percent'], '.1f')}% | "
                f"{fmt(r['recall'], '.3f')} | {fmt(r['critical_cheap_recall'], '.2f')} | "
                f"{fmt(r['critical_expensive_recall'], '.2f')} | "
                f"{fmt(r['regret_per_run'], ',.0f')} | {fmt(r['select_p50_us'], ',.0f')} |"
            )
        peers = [v["savings_percent"] or 0 for k, v in res.items() if "TS" in k]
        p = res["plaudit"]
        verdicts.append(
            (
                wname,
                (p["savings_percent"] or 0) >= max(peers),
                (p["recall"] or 0) >= 0.98,
                all(
                    p[k] is None or p[k] >= 0.9
                    for k in ("critical_cheap_recall", "critical_expensive_recall")
                ),
            )
        )
    drift = drift_checks(args.seeds)
    if not args.no_plot:
        convergence_plot(args.seeds)
    load1 = os.getloadavg()[0]
    wall, cpu = time.perf_counter() - t_start, time.process_time() - c_start
    out = [
        *lines,
        "",
        "| workload | savings >= best peer | recall >= 0.98 | critical recall >= 0.9 |",
        "|---|---|---|---|",
        *(
            f"| {w} | {'yes' if a else 'NO'} | {'yes' if b else 'NO'} | {'yes' if c else 'NO'} |"
            for w, a, b, c in verdicts
        ),
        "",
        "Drift workload (per seed): share of selected runs including the retired tool in the "
        "100 runs from 300 after the drift (target <= 0.10), and the new central file in code "
        "tasks in the 100 runs from 200 after it (target >= 0.90):",
        "",
        "| method | retired tool still in | new file in |",
        "|---|---|---|",
        *(_drift_row(m, drift) for m in ("plaudit", "per-task TS")),
        "",
        f"Ran in {wall:.0f} s wall, {cpu:.0f} s CPU; load average {load0:.1f} before, "
        f"{load1:.1f} after. MABWiser {'included' if have_mabwiser() else 'not installed'}.",
    ]
    text = "\n".join(out)
    print(text)
    if args.write:
        doc = DOC.read_text(encoding="utf-8")
        block = f"{START}\n{text}\n{END}"
        if START in doc:
            doc = re.sub(
                re.escape(START) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S
            )
        else:
            doc += "\n" + block + "\n"
        DOC.write_text(doc, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
