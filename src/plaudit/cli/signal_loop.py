"""`plaudit signal learn|recommend|compare|simulate`: close the loop from the log to a router.

Thin: the rules live in `plaudit.signals.learn`, `.recommend`, `.compare` and `.simulate`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import click

from plaudit.cli._common import echo_json, json_option, resolve
from plaudit.cli._progress import progress_bar
from plaudit.cli.signal import _print_estimates, _rewards, gate_options, signal
from plaudit.errors import ValidationError


def _source_options(f: Any) -> Any:
    """Where the decisions come from, the window and the rewards: the export's options."""
    for option in reversed(
        (
            click.option(
                "--db",
                "db",
                default=None,
                metavar="PATH|DSN",
                help="The store (default: $PLAUDIT_DB, else ./.plaudit/plaudit.db).",
            ),
            click.option(
                "--seq-mem", default=None, metavar="FILE", help="Read this seq_mem.jsonl instead."
            ),
            click.option("--max-age-hours", type=int, default=168, show_default=True),
            click.option("--reward", "reward_pairs", multiple=True, metavar="OUTCOME=VALUE"),
            click.option(
                "--reward-map", default=None, metavar="JSON", help='e.g. {"wasted": -0.5}'
            ),
            click.option(
                "--default-propensity",
                type=float,
                default=None,
                metavar="P",
                help="Propensity for decisions logged without one (default: leave them out).",
            ),
            click.option("--bootstrap", type=int, default=1000, show_default=True),
            click.option("--seed", type=int, default=0, show_default=True),
            click.option("--level", type=float, default=0.95, show_default=True),
        )
    ):
        f = option(f)
    return f


def _run(db: str | None, seq_mem: str | None, call: Any) -> Any:
    """`call(plaudit=..., seq_mem=..., progress=...)` on the file, else on the store."""
    with progress_bar("percent") as progress:
        if seq_mem is not None:
            return call(seq_mem=seq_mem, progress=progress)
        from plaudit.signals.verified import open_existing

        with open_existing(resolve(db)) as p:
            return call(plaudit=p, progress=progress)


@signal.command()
@click.option("--out", required=True, metavar="FILE", help="Where to write the policy.")
@_source_options
@click.option(
    "--feature",
    "features",
    multiple=True,
    metavar="FIELD",
    help="A decision field to group by, e.g. context.ci_status (repeatable;"
    " default: chosen from the data).",
)
@click.option("--max-features", type=int, default=4, show_default=True)
@click.option(
    "--explore",
    type=float,
    default=0.05,
    show_default=True,
    help="Probability spread over the tasks a decision may have.",
)
@click.option(
    "--holdout-percent",
    type=int,
    default=30,
    show_default=True,
    help="Share of sessions held out for the evaluation.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "table", "model"]),
    default="auto",
    show_default=True,
)
@gate_options
@json_option
def learn(
    out: str,
    db: str | None,
    seq_mem: str | None,
    max_age_hours: int,
    reward_pairs: tuple[str, ...],
    reward_map: str | None,
    default_propensity: float | None,
    bootstrap: int,
    seed: int,
    level: float,
    features: tuple[str, ...],
    max_features: int,
    explore: float,
    holdout_percent: int,
    fmt: str,
    as_json: bool,
    **gates: Any,
) -> None:
    """Learn a routing policy from the logged decisions, refuse on failing quality gates, and
    evaluate it off-policy on held-out sessions; exit 0 when written, 1 when refused."""
    from plaudit.signals.learn import LearnRefused, check_learn_options, learn_policy

    options: dict[str, Any] = {
        "features": list(features) or None,
        "max_features": max_features,
        "explore": explore,
        "holdout_percent": holdout_percent,
        "seed": seed,
        "format": fmt,
        "default_propensity": default_propensity,
        "bootstrap": bootstrap,
        "level": level,
        "max_age_hours": max_age_hours,
        "rewards": _rewards(reward_pairs, reward_map),
        "gates": {k: v for k, v in gates.items() if v is not None},
    }
    check_learn_options(**options)  # bad options before any store is looked for
    try:
        result = _run(db, seq_mem, lambda **kw: learn_policy(out, **kw, **options))
    except LearnRefused as exc:
        if as_json:
            echo_json({"error": "LearnRefused", "message": str(exc), "gates": exc.failed})
        click.echo("refusing to learn: the audit's quality gates failed", err=True)
        for gate in exc.failed:
            click.echo(
                f"  fail {gate['name']}: actual={gate['actual']} threshold={gate['threshold']}",
                err=True,
            )
        raise click.exceptions.Exit(1) from None
    if as_json:
        echo_json({k: v for k, v in result.items() if k != "spec"})
        return
    prov, ev = result["provenance"], result["evaluation"]
    rows, where = prov["rows"], prov["source"].get("seq_mem") or "the log"
    click.echo(
        f"Learned a routing policy from {rows['used']} decisions of {where}:"
        f" {out} ({result['format']}, sha256 {result['digest'][:12]})"
    )
    selected = ", ".join(prov["features"]["selected"]) or "(none: one task for every decision)"
    click.echo(f"  fields: {selected}; explore {prov['explore']:g}")
    click.echo(
        f"  held out {rows['held_out']} decisions of {ev['sessions']} sessions"
        f" (never learned from); evaluated {ev['evaluated']}:"
    )
    if ev["logging"] is None:
        click.echo(f"  {ev['note']}", err=True)
        return
    _print_estimates(ev["logging"], {"dr": ev["estimates"]["dr"]}, ev["level"])
    click.echo(f"  effective sample size {ev['effective_sample_size']:.1f} of {ev['evaluated']}")


def _json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    from plaudit.inputs import parse

    return parse(text, what=what, lines=False)


@signal.command()
@click.option(
    "--policy",
    "policy_spec",
    required=True,
    metavar="FILE",
    help="A policy table or a learned model (JSON).",
)
@click.option("--context-json", default=None, metavar="JSON", help="The decision's context.")
@click.option(
    "--candidates", default=None, metavar="TASK,...", help="The tasks the router may choose from."
)
@click.option(
    "--decision-json",
    default=None,
    metavar="JSON",
    help="Other decision fields a policy may read (user_intent, git_branch, ...).",
)
@click.option(
    "--decision-id",
    default=None,
    metavar="ID",
    help="The decision's id: the same id gets the same pick; needed for --shadow.",
)
@click.option("--session-id", default=None, metavar="ID")
@click.option("--greedy", is_flag=True, help="The most probable task instead of a draw.")
@click.option(
    "--shadow",
    is_flag=True,
    help="Record the recommendation beside the router's decision (needs a store).",
)
@click.option("--db", "db", default=None, metavar="PATH|DSN", help="The store for --shadow.")
@json_option
def recommend(
    policy_spec: str,
    context_json: str | None,
    candidates: str | None,
    decision_json: str | None,
    decision_id: str | None,
    session_id: str | None,
    greedy: bool,
    shadow: bool,
    db: str | None,
    as_json: bool,
) -> None:
    """The policy's probabilities for one decision, and its pick."""
    from plaudit.signals.recommend import recommend as run_recommend

    decision = _json_arg(decision_json, "--decision-json")
    if session_id is not None:
        decision = {**(decision or {}), "session_id": session_id}
    tasks = None
    if candidates is not None:
        tasks = [t.strip() for t in candidates.split(",") if t.strip()]
    if shadow and decision_id is None:
        raise ValidationError("--decision-id", "--shadow records under the decision's id: give it")
    result = run_recommend(
        policy_spec,
        context=_json_arg(context_json, "--context-json"),
        candidates=tasks,
        decision=decision,
        decision_id=decision_id,
        greedy=greedy,
    )
    if shadow:
        from plaudit.cli._common import open_store
        from plaudit.signals.recommend import record_shadow

        with open_store(db, create=True) as p:
            result["shadow"] = record_shadow(p, result, session_id=session_id)
    if as_json:
        echo_json(result)
        return
    click.echo(f"{result['task']}  (p={result['propensity']:.4g})")
    for task, p in sorted(result["probabilities"].items(), key=lambda kv: -kv[1]):
        click.echo(f"  {p:.4f}  {task}")
    if shadow:
        click.echo(f"  shadow: {result['shadow']['status']} ({result['shadow']['id']})")


@signal.command()
@click.option(
    "--policy",
    "policy_spec",
    required=True,
    metavar="FILE",
    help="The candidate: a policy table or a learned model (JSON).",
)
@_source_options
@click.option(
    "--threshold",
    type=float,
    default=0.0,
    show_default=True,
    help="Promote only when the difference's lower bound is above this.",
)
@click.option(
    "--min-ess",
    type=float,
    default=100.0,
    show_default=True,
    help="Promote only with at least this effective sample size.",
)
@click.option(
    "--reward-key",
    multiple=True,
    metavar="FIELD",
    help="Field the reward model groups by (default: the policy's key).",
)
@json_option
def compare(
    policy_spec: str,
    db: str | None,
    seq_mem: str | None,
    max_age_hours: int,
    reward_pairs: tuple[str, ...],
    reward_map: str | None,
    default_propensity: float | None,
    bootstrap: int,
    seed: int,
    level: float,
    threshold: float,
    min_ess: float,
    reward_key: tuple[str, ...],
    as_json: bool,
) -> None:
    """The promotion gate: the candidate against the logging router, on the decisions it did
    not learn from (and its shadow records); exit 0 only when it should be promoted."""
    from plaudit.signals.compare import check_compare_options, compare_policy
    from plaudit.signals.evaluate import check_evaluate_options
    from plaudit.signals.recommend import policy_from

    options: dict[str, Any] = {
        "default_propensity": default_propensity,
        "bootstrap": bootstrap,
        "seed": seed,
        "level": level,
        "max_age_hours": max_age_hours,
        "rewards": _rewards(reward_pairs, reward_map),
        "reward_key": list(reward_key) or None,
    }
    check_evaluate_options(folds=5, min_propensity_coverage=None, **options)
    check_compare_options(threshold=threshold, min_ess=min_ess)
    policy = policy_from(policy_spec)
    result = _run(
        db,
        seq_mem,
        lambda **kw: compare_policy(policy, threshold=threshold, min_ess=min_ess, **kw, **options),
    )
    if as_json:
        echo_json(result)
    else:
        _print_comparison(result, policy_spec)
    raise click.exceptions.Exit(0 if result["promote"] else 1)


def _print_comparison(result: dict[str, Any], path: str) -> None:
    pol, off = result["policy"], result["offline"]
    click.echo(
        f"Candidate {pol['name']} ({pol['kind']}) against the logging router, on"
        f" {off['decisions']} decisions it did not learn from ({off['skipped']} it did are left"
        f" out):"
    )
    if off["logging"] is not None:
        _print_estimates(off["logging"], {"dr": off["dr"]}, result["input"]["level"])
        click.echo(f"  effective sample size {off['effective_sample_size']:.1f}")
    shadow = result["shadow"]
    if shadow is not None:
        est = shadow["estimate"]
        agreement = "-" if shadow["agreement"] is None else f"{shadow['agreement']:.1%}"
        click.echo(
            f"  shadow: recommendations recorded {shadow['records']}, with an outcome"
            f" {shadow['with_outcome']}; agreed with the router on {agreement}"
        )
        for label, key in (
            ("agreed", "reward_when_agreed"),
            ("disagreed", "reward_when_disagreed"),
        ):
            if shadow[key] is not None:
                click.echo(f"    mean reward when it {label}: {shadow[key]:.4f}")
        if est["dr"] is not None:
            _print_estimates(est["logging"], {"shadow dr": est["dr"]}, result["input"]["level"])
    gate = result["gate"]
    if result["promote"]:
        click.echo(f"PROMOTE: {gate['reason']}")
        click.echo(f"  the router should load: {path} (sha256 {pol['digest']})")
    else:
        click.echo(f"KEEP the current router: {gate['reason']}", err=True)


@signal.command()
@click.option("--out", required=True, metavar="FILE", help="The seq_mem.jsonl file to write.")
@click.option("--decisions", type=int, default=20_000, show_default=True)
@click.option(
    "--scenario", type=click.Choice(["mediocre", "router"]), default="mediocre", show_default=True
)
@click.option(
    "--explore",
    type=float,
    default=0.3,
    show_default=True,
    help="How often the mediocre router chooses at random.",
)
@click.option("--seed", type=int, default=1, show_default=True)
@json_option
def simulate(
    out: str, decisions: int, scenario: str, explore: float, seed: int, as_json: bool
) -> None:
    """Write a simulated router's decisions and outcomes (whose true values are known)."""
    from plaudit.files import atomic_write
    from plaudit.signals import simulate as sim_module

    if decisions < 1:
        raise ValidationError("--decisions", f"must be >= 1, got {decisions}")
    if not 0 < explore <= 1:
        raise ValidationError("--explore", f"must be in (0, 1], got {explore}")
    sim = sim_module.mediocre(explore=explore) if scenario == "mediocre" else sim_module.router()
    start = int(time.time() * 1000) - decisions * 5_000 - 60_000  # every decision in the past
    sessions = max(1, decisions // 10)

    def write(f: Any) -> None:
        import io

        text = io.TextIOWrapper(f, encoding="utf-8", newline="\n")
        sim.write(text, decisions, seed=seed, start_ms=start, sessions=sessions)
        text.flush()
        text.detach()

    atomic_write(out, write, what="--out")
    result = {
        "out": os.fspath(out),
        "decisions": decisions,
        "scenario": scenario,
        "best_value": sim.best_value(),
        "logging_value": sim.logging_value(),
    }
    if as_json:
        echo_json(result)
        return
    click.echo(f"wrote {decisions} simulated decisions to {out} ({scenario})")
    click.echo(
        f"  true values: the logging router {result['logging_value']:.4f},"
        f" the best possible policy {result['best_value']:.4f}"
    )
