"""`plaudit demo`: plaudit's main job end to end on a fresh embedded store."""

from __future__ import annotations

from pathlib import Path

import click

from plaudit.cli._common import echo_json, json_option
from plaudit.cli._progress import progress_bar


@click.command()
@click.option(
    "--dir",
    "directory",
    default=".plaudit/demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help=(
        "Where the demo's store and exports go: a new or empty directory, or an earlier "
        "demo's (only the demo's own files are replaced)."
    ),
)
@click.option("--runs", default=3000, show_default=True, type=click.IntRange(50, 100_000))
@click.option("--seed", default=7, show_default=True, type=int)
@json_option
def demo(directory: str, runs: int, seed: int, as_json: bool) -> None:
    """Simulate an agent workload through all three jobs and report what plaudit learned."""
    from plaudit.demo import run_demo

    with progress_bar("items", enabled=not as_json) as update:
        if update is not None:
            report = run_demo(
                directory,
                runs=runs,
                seed=seed,
                on_progress=lambda n: update("simulating agent runs", n, runs),
            )
        else:  # no terminal: a line every tenth of the way, so a log shows it is alive
            step = max(runs // 10, 1)

            def tick(n: int) -> None:
                if n % step == 0 and not as_json:
                    click.echo(f"  {n}/{runs} runs", err=True)

            report = run_demo(directory, runs=runs, seed=seed, on_progress=tick)
    if as_json:
        echo_json(report)
        return
    s = report.savings
    savings = s.get("prompt_savings_percent")
    ci = (s.get("prompt_ci_low"), s.get("prompt_ci_high"))
    audit = report.audit
    passed = bool(audit.get("pass"))
    failing = [name for name, g in audit.get("gates", {}).items() if not g.get("pass")]
    out = [
        f"plaudit demo: {report.runs} agent runs in {report.seconds:.1f}s, "
        f"{report.events} events in {report.db}",
        "",
        "context bandit",
        f"  token savings                          {_pct(savings)}"
        + (f"  (95% CI {_pct(ci[0])} .. {_pct(ci[1])})" if ci[0] is not None else ""),
        f"    of prompt tokens in {s.get('runs')} runs, against what each would have sent "
        f"without the bandit ({s.get('counterfactual')})",
        f"  token savings, last 500 runs           {_pct(report.savings_last_500)}",
        f"  needed-arm recall, last 500 runs       {report.recall_last_500:.3f}"
        + (
            f"  (rare-but-critical {report.rare_recall_last_500:.3f})"
            if report.rare_recall_last_500 is not None
            else ""
        ),
        "reward ledger",
        f"  score {report.ledger.get('total_score')} from {report.ledger.get('transactions')} "
        f"transactions; verified: {'yes' if report.ledger.get('verified') else 'NO'}",
        "event log",
        f"  hash chain intact: {'yes' if report.log_ok else 'NO'}   head {report.log_head}",
        "router signals",
        f"  export written to {report.export_dir}  "
        f"(joined rows {report.export_counts.get('joined_rows')}, "
        f"train/val/test {report.export_counts.get('train_rows')}/"
        f"{report.export_counts.get('val_rows')}/{report.export_counts.get('test_rows')})",
        f"  audit: {'PASS' if passed else 'FAIL'}"
        + (f" (failing: {', '.join(map(str, failing))})" if failing else ""),
        "",
        "Look at the results in the dashboard:",
        f"  plaudit serve --db {Path(report.db)}",
    ]
    click.echo("\n".join(out))


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"
