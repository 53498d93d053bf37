"""`plaudit signal emit|export|audit`: drop-in replacements for the reference router tools."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import click

from plaudit.cli._abbrev import AbbreviatingCommand
from plaudit.cli._common import (
    SuggestingGroup,
    db_option,
    echo_json,
    json_option,
    resolve,
)
from plaudit.cli._progress import progress_bar
from plaudit.errors import ValidationError

#: The reference exporter's default output directory, in the system's temp dir.
DEFAULT_OUTPUT_DIR = os.path.join(tempfile.gettempdir(), "seq_router_signal")


@click.group(cls=SuggestingGroup)
def signal() -> None:
    """Router signals: decision -> outcome -> override telemetry, export and quality gates."""


@signal.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.pass_context
def emit(ctx: click.Context) -> None:
    """Record a router event: `emit decision|outcome|override --decision-id ... `.

    Takes the reference emitter's flags; see `plaudit signal emit --help`.
    """
    from plaudit.cli.emit import main

    args = list(ctx.args)
    db = resolve(None)
    if db is not None and "--db" not in args:
        args = ["--db", db, *args]
    ctx.exit(main(["signal", "emit", *args]))


def _rewards(pairs: tuple[str, ...], raw_map: str | None) -> dict[str, float]:
    out: dict[str, Any] = {}
    if raw_map:
        from plaudit.inputs import parse

        parsed = parse(raw_map, what="--reward-map", lines=False)
        if not isinstance(parsed, dict):
            raise ValidationError("--reward-map", "must be a JSON object of outcome -> reward")
        out.update(parsed)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValidationError("--reward", f"{pair!r} is not OUTCOME=VALUE")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise ValidationError("--reward", f"{value!r} is not a number (in {pair!r})") from None
    return out


#: The reference scripts' own options: an abbreviation that fits one of these means it.
EXPORT_OPTIONS = ("--seq-mem", "--output-dir", "--seed", "--val-percent", "--test-percent")
EXPORT_OPTIONS += ("--history-size", "--max-age-hours")
AUDIT_OPTIONS = ("--summary", "--min-decisions", "--min-joined", "--min-link-rate")
AUDIT_OPTIONS += ("--max-task-dominance", "--min-overrides", "--min-failureish", "--report-out")


@signal.command(cls=AbbreviatingCommand, reference_options=EXPORT_OPTIONS)
@db_option
@click.option(
    "--seq-mem", default=None, metavar="FILE", help="Read this seq_mem.jsonl instead of the log."
)
@click.option("--output-dir", default=DEFAULT_OUTPUT_DIR, metavar="DIR", show_default=True)
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--val-percent", type=int, default=10, show_default=True)
@click.option("--test-percent", type=int, default=10, show_default=True)
@click.option("--history-size", type=int, default=3, show_default=True)
@click.option("--max-age-hours", type=int, default=168, show_default=True)
@click.option(
    "--split-by",
    type=click.Choice(["decision", "session"]),
    default="decision",
    show_default=True,
    help="decision: the reference's split; session: whole sessions, no history leakage.",
)
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(["jsonl", "parquet", "preference", "preference-all", "chat", "rl"]),
    help="Output format (repeatable; default jsonl).",
)
@click.option("--reward", "reward_pairs", multiple=True, metavar="OUTCOME=VALUE")
@click.option("--reward-map", default=None, metavar="JSON", help='e.g. {"wasted": -0.5}')
@click.option(
    "--allow-unverified",
    is_flag=True,
    help="Export a log that fails verification anyway (the summary records it).",
)
@click.option(
    "--verify-full",
    is_flag=True,
    help="Recompute the whole chain, not only what was appended since the last export.",
)
@click.option(
    "--reuse-from",
    default=None,
    metavar="DIR",
    help="An earlier export's directory: copy the rows that did not change from its files"
    " (only read; from the log with default options).",
)
@json_option
def export(
    db: str | None,
    seq_mem: str | None,
    output_dir: str,
    seed: int,
    val_percent: int,
    test_percent: int,
    history_size: int,
    max_age_hours: int,
    split_by: str,
    formats: tuple[str, ...],
    reward_pairs: tuple[str, ...],
    reward_map: str | None,
    allow_unverified: bool,
    verify_full: bool,
    reuse_from: str | None,
    as_json: bool,
) -> None:
    """Export joined, deduplicated, split training rows and summary.json."""
    from plaudit.signals.export import export as run_export

    if "parquet" in formats:  # before any work, not after reading the whole log
        from plaudit.extras import require

        require("parquet", "--format parquet")

    options: dict[str, Any] = {
        "output_dir": output_dir,
        "seed": seed,
        "val_percent": val_percent,
        "test_percent": test_percent,
        "history_size": history_size,
        "max_age_hours": max_age_hours,
        "split_by": split_by,
        "formats": formats or ("jsonl",),
        "rewards": _rewards(reward_pairs, reward_map),
    }
    if reuse_from is not None and seq_mem is not None:
        raise ValidationError("--reuse-from", "applies to exports from the log, not --seq-mem")
    from plaudit.signals.export import check_export_options

    check_export_options(  # a bad option is reported before any store is looked for
        **{k: options[k] for k in ("seed", "val_percent", "test_percent", "history_size")},
        **{k: options[k] for k in ("max_age_hours", "split_by", "formats", "rewards")},
    )
    with progress_bar("percent") as progress:
        if seq_mem is not None:
            summary = run_export(seq_mem=seq_mem, progress=progress, **options)
        else:
            from plaudit.signals.verified import open_existing

            with open_existing(resolve(db)) as p:
                summary = run_export(
                    plaudit=p,
                    progress=progress,
                    allow_unverified=allow_unverified,
                    verify_full=verify_full,
                    reuse_from=reuse_from,
                    **options,
                )
    if as_json:
        echo_json(summary)
        return
    c, q = summary["counts"], summary["quality"]
    click.echo(
        f"Exported flow router signal dataset: {os.path.dirname(summary['outputs']['summary'])}"
    )
    click.echo(f"  decisions={c['decisions']} outcomes={c['outcomes']} joined={c['joined_rows']}")
    click.echo(f"  train={c['train_rows']} val={c['val_rows']} test={c['test_rows']}")
    click.echo(
        f"  link_rate={q['decision_outcome_link_rate']:.3f} override_rate={q['override_rate']:.3f}"
    )
    window = summary["input"]
    since = _utc(window["window_start_ms"])
    click.echo(
        f"  skipped_old={c['skipped_old']} (window: the last {window['max_age_hours']} h,"
        f" since {since}; --max-age-hours changes it)"
    )
    verified = window.get("verified")
    reuse = window.get("reuse")
    if reuse is not None:
        click.echo(f"  reused {reuse['copied_hours']} unchanged hours of rows from {reuse['from']}")
    if verified is not None and not verified["ok"]:
        click.echo(f"  warning: exported a log that fails verification ({verified['reason']})")
    extra = []
    if c["parse_errors"]:
        extra.append(f"parse_errors={c['parse_errors']}")
    if c["dropped_duplicate_rows"] or c["identical_repeats"]:
        extra.append(
            f"dropped_duplicates={c['dropped_duplicate_rows']} "
            f"identical_repeats={c['identical_repeats']}"
        )
    if c["conflicting_decision_ids"] or c["conflicting_outcome_ids"]:
        extra.append(
            f"conflicting_ids={c['conflicting_decision_ids'] + c['conflicting_outcome_ids']}"
        )
    if extra:
        click.echo("  " + " ".join(extra))


def _utc(ms: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _gate_option(name: str, kind: type, help_text: str) -> Any:
    return click.option(
        f"--{name.replace('_', '-')}", name, type=kind, default=None, help=help_text
    )


_GATE_OPTIONS = (
    _gate_option("min_decisions", int, "default 500, env ROUTER_SIGNAL_MIN_DECISIONS"),
    _gate_option("min_joined", int, "default 400, env ROUTER_SIGNAL_MIN_JOINED"),
    _gate_option("min_link_rate", float, "default 0.80, env ROUTER_SIGNAL_MIN_LINK_RATE"),
    _gate_option("max_task_dominance", float, "default 0.55, env ROUTER_SIGNAL_MAX_TASK_DOMINANCE"),
    _gate_option("min_overrides", int, "default 20, env ROUTER_SIGNAL_MIN_OVERRIDES"),
    _gate_option("min_failureish", int, "minimum partial+failure+wasted rows (default 60)"),
    _gate_option("max_split_leakage", float, "extra gate: max share of sessions split apart"),
    _gate_option("min_rows_per_task", int, "extra gate: min rows for every chosen task"),
    _gate_option("max_duplicate_rate", float, "extra gate: max share of duplicate decisions"),
)


def gate_options(f: Any) -> Any:
    """The audit's gate thresholds as options (`signal audit`, `signal learn`)."""
    for option in reversed(_GATE_OPTIONS):
        f = option(f)
    return f


@signal.command(cls=AbbreviatingCommand, reference_options=AUDIT_OPTIONS)
@db_option
@click.option(
    "--summary", "summary_path", metavar="FILE", help="summary.json (default: the log's)."
)
@gate_options
@click.option("--report-out", metavar="FILE", help="audit report path (default: beside summary)")
@click.option(
    "--max-age-hours", type=int, default=168, show_default=True, help="when auditing the log"
)
@json_option
def audit(
    db: str | None,
    summary_path: str | None,
    report_out: str | None,
    max_age_hours: int,
    as_json: bool,
    **limits: Any,
) -> None:
    """Check the export's quality gates; exit 0 on PASS, 1 on FAIL."""
    from plaudit.signals.audit import audit as run_audit

    given = {k: v for k, v in limits.items() if v is not None}
    if summary_path is not None:
        report = run_audit(summary_path, limits=given, report_out=report_out)
    else:
        from plaudit.signals.verified import open_existing

        with open_existing(resolve(db)) as p:
            report = p.signals.audit(
                None, report_out=report_out, max_age_hours=max_age_hours, **given
            )
    ok = report["pass"]
    if as_json:
        echo_json(report)
    else:
        click.echo(f"Flow router signal audit: {'PASS' if ok else 'FAIL'}")
        click.echo(f"  summary: {report['summary'] or '(the log)'}")
        click.echo(f"  report:  {report.get('report') or '(not written)'}")
        for name, gate in report["gates"].items():
            if not gate["pass"]:
                click.echo(
                    f"  fail {name}: actual={gate['actual']} threshold={gate['threshold']}",
                    err=True,
                )
    raise click.exceptions.Exit(0 if ok else 1)


@signal.command()
@db_option
@click.option(
    "--policy",
    "policy_spec",
    required=True,
    metavar="FILE|MODULE:FUNCTION",
    help="The candidate: a JSON table file, or a Python function decision -> {task: prob}.",
)
@click.option(
    "--seq-mem", default=None, metavar="FILE", help="Read this seq_mem.jsonl instead of the log."
)
@click.option(
    "--default-propensity",
    type=float,
    default=None,
    metavar="P",
    help="Propensity for decisions logged without one (default: leave them out).",
)
@click.option(
    "--min-propensity-coverage",
    type=float,
    default=None,
    metavar="F",
    help="Gate: fail (exit 1) when fewer than this share of decisions have a logged propensity.",
)
@click.option("--bootstrap", type=int, default=1000, show_default=True, help="Resamples (0: none).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--level", type=float, default=0.95, show_default=True, help="Interval level.")
@click.option(
    "--reward-key",
    multiple=True,
    metavar="FIELD",
    help="Field the reward model groups by, e.g. context.ci_status (repeatable;"
    " default: the table's key).",
)
@click.option("--max-age-hours", type=int, default=168, show_default=True)
@click.option("--reward", "reward_pairs", multiple=True, metavar="OUTCOME=VALUE")
@click.option("--reward-map", default=None, metavar="JSON", help='e.g. {"wasted": -0.5}')
@json_option
def evaluate(
    db: str | None,
    policy_spec: str,
    seq_mem: str | None,
    default_propensity: float | None,
    min_propensity_coverage: float | None,
    bootstrap: int,
    seed: int,
    level: float,
    reward_key: tuple[str, ...],
    max_age_hours: int,
    reward_pairs: tuple[str, ...],
    reward_map: str | None,
    as_json: bool,
) -> None:
    """Estimate what a candidate routing policy would have earned on the logged decisions
    (IPS, SNIPS, doubly robust); exit 0, or 1 when nothing could be estimated or a gate fails."""
    from plaudit.signals.evaluate import check_evaluate_options, evaluate_policy
    from plaudit.signals.policy import load_policy

    options: dict[str, Any] = {
        "default_propensity": default_propensity,
        "min_propensity_coverage": min_propensity_coverage,
        "bootstrap": bootstrap,
        "seed": seed,
        "level": level,
        "max_age_hours": max_age_hours,
        "rewards": _rewards(reward_pairs, reward_map),
        "reward_key": list(reward_key) or None,
    }
    check_evaluate_options(folds=5, **options)  # bad options before any store is looked for
    policy = load_policy(policy_spec)
    with progress_bar("percent") as progress:
        if seq_mem is not None:
            result = evaluate_policy(policy, seq_mem=seq_mem, progress=progress, **options)
        else:
            from plaudit.signals.verified import open_existing

            with open_existing(resolve(db)) as p:
                result = evaluate_policy(policy, plaudit=p, progress=progress, **options)
    if as_json:
        echo_json(result)
    else:
        _print_evaluation(result)
    raise click.exceptions.Exit(0 if result["pass"] else 1)


def _print_evaluation(result: dict[str, Any]) -> None:
    c, pol = result["counts"], result["policy"]
    where = result["input"]["seq_mem"] or "the log"
    click.echo(f"Off-policy evaluation of {pol['name']} ({pol['kind']}) on {where}")
    click.echo(
        f"  decisions={c['joined_rows']} evaluated={c['evaluated']}"
        f" missing_propensity={c['missing_propensity']}"
        f" invalid_propensity={c['invalid_propensity']}"
        f" defaulted={c['defaulted_propensity']}"
        f" coverage={result['propensity']['coverage']:.3f}"
    )
    for sample in result["propensity"]["invalid_samples"][:3]:
        click.echo(
            f"  invalid propensity {sample['propensity']!r} ({sample['reason']})"
            f" in decision {sample['decision_id']!r}",
            err=True,
        )
    if result["note"]:
        click.echo(f"  {result['note']}", err=True)
    if result["logging"] is not None:
        _print_estimates(result["logging"], result["estimates"], result["input"]["level"])
        d = result["diagnostics"]
        click.echo(
            f"  effective sample size {result['effective_sample_size']:.1f} of {c['evaluated']};"
            f" weights mean {d['weights']['mean']:.3f} max {d['weights']['max']:.3g}"
        )
        if d["unlogged_mass"] > 0:
            click.echo(
                f"  warning: {d['unlogged_mass']:.1%} of the candidate's choices are (context,"
                " task) pairs never logged; IPS and SNIPS cannot see them, DR leans on its model",
                err=True,
            )
    for name, gate in result["gates"].items():
        if not gate["pass"]:
            click.echo(
                f"  fail {name}: actual={gate['actual']} threshold={gate['threshold']}", err=True
            )


def _ci(values: list[float] | None, signed: bool = False) -> str:
    if values is None:
        return ""
    f = "{:+.4f}" if signed else "{:.4f}"
    return f"[{f.format(values[0])}, {f.format(values[1])}]"


def _print_estimates(logging: dict[str, Any], estimates: dict[str, Any], level: float) -> None:
    """The logging router's value and each estimate, with its paired difference."""
    shown = round(level * 100, 1)
    click.echo(f"  mean reward per decision ({shown:g}% intervals):")
    width = max(8, *(len(name) for name in estimates))
    click.echo(f"    {'logging':<{width}} {logging['value']:.4f} {_ci(logging['ci'])}")
    for name, e in estimates.items():
        if e is None or e["value"] is None:
            click.echo(f"    {name:<{width}} (undefined: the candidate never picks a logged task)")
            continue
        click.echo(
            f"    {name:<{width}} {e['value']:.4f} {_ci(e['ci'])}"
            f"  vs logging {e['difference']:+.4f} {_ci(e['difference_ci'], True)}"
        )


# The loop's commands (learn, recommend, compare, simulate) join the group when it loads.
from plaudit.cli import signal_loop as _loop  # noqa: E402, F401
