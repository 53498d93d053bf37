"""`plaudit arms|select|observe|posteriors|savings`: the context bandit from the shell."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from plaudit.cli._common import SuggestingGroup, db_option, echo_json, json_option, open_store
from plaudit.errors import ValidationError


def _load_arms(path: str) -> list[Any]:
    from plaudit.inputs import load

    data = load(path, what="arms")
    if isinstance(data, dict) and "arms" in data:
        data = data["arms"]
    if not isinstance(data, list):
        raise ValidationError("arms", f'{path} must hold a list of arms (or {{"arms": [...]}})')
    return data


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def _settings(items: tuple[str, ...]) -> dict[str, Any]:
    """KEY=JSON pairs (a bare word such as passive or auto is taken as a string)."""
    changes: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValidationError("--set", f"{item!r} is not KEY=VALUE")
        try:
            changes[key] = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            changes[key] = raw
    return changes


@click.group(cls=SuggestingGroup)
def arms() -> None:
    """The bandit's arm inventory: list, show, register, configure."""


@arms.command("list")
@db_option
@click.option("--context", default=None, help="Show posteriors for this context.")
@json_option
def arms_list(db: str | None, context: str | None, as_json: bool) -> None:
    """Registered arms with their posterior mean, pulls and confidence."""
    with open_store(db) as p:
        stats = p.bandit.posteriors(context)
    if as_json:
        echo_json({"arms": stats})
        return
    if not stats:
        click.echo("no arms registered")
        return
    click.echo(f"{'arm':48} {'tokens':>7} {'mean':>6} {'pulls':>6}  confidence")
    for s in stats:
        click.echo(
            f"{s.id[:48]:48} {s.tokens or 0:>7} {s.mean:>6.3f} {s.pulls:>6}  {s.confidence}"
            f"{_flags(s)}"
        )
    _under_note(stats)


def _flags(s: Any) -> str:
    return "".join(
        f" ({name})"
        for name, on in (("protected", s.protected), ("under-explored", s.underexplored))
        if on
    )


def _under_note(stats: list[Any]) -> None:
    if any(s.underexplored for s in stats):
        click.echo(
            "under-explored: fewer pulls than min_pulls (min_pulls_context in a context); "
            "always included while the inventory fits the budget"
        )


@arms.command("show")
@db_option
@click.argument("arm_id")
@json_option
def arms_show(db: str | None, arm_id: str, as_json: bool) -> None:
    """One arm: registration, global posterior and each context's posterior."""
    with open_store(db) as p:
        info = p.bandit.arm(arm_id)
    if as_json:
        echo_json(info)
        return
    a = info["arm"]
    click.echo(f"{a['id']}  tokens={a['tokens']}  kind={a.get('kind')}")
    for label, s in [("global", info["global"]), *info["contexts"].items()]:
        click.echo(
            f"  {label:20} mean={s['mean']:.3f}  95% [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"
            f"  alpha={s['alpha']:.2f} beta={s['beta']:.2f}  pulls={s['pulls']}"
            f" ({s['confidence']})"
        )


@arms.command("register")
@db_option
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
def arms_register(db: str | None, file: str, as_json: bool) -> None:
    """Register or update arms from a JSON file ([{"id", "tokens", "content"?, "kind"?}])."""
    data = _load_arms(file)
    with open_store(db, create=True) as p:
        registered = p.bandit.register(data)
    if as_json:
        echo_json({"registered": len(registered)})
    else:
        click.echo(f"registered {len(registered)} arms")


@arms.command("config")
@db_option
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=JSON",
    help="Change a setting, e.g. --set threshold=0.1 --set protected='[\"tool:*:WebSearch\"]'.",
)
@json_option
def arms_config(db: str | None, settings: tuple[str, ...], as_json: bool) -> None:
    """Show the bandit's settings, or change them (recorded in the log)."""
    changes = _settings(settings)
    with open_store(db, create=bool(changes)) as p:
        cfg = p.bandit.configure(changes) if changes else p.bandit.config
    if as_json:
        echo_json(cfg)
    else:
        for k, v in cfg.to_dict().items():
            click.echo(f"{k:22} {msgspec.json.encode(v).decode()}")


@click.command()
@db_option
@click.option("--arms", "arms_file", default=None, help="JSON file of arms (default: registered).")
@click.option("--budget", type=click.IntRange(0, 100_000_000), default=8000, show_default=True)
@click.option("--context", default=None, help="Context label, e.g. a task type.")
@click.option("--seed", type=click.IntRange(0, 2**53 - 1), default=None, help="Reproducible.")
@click.option("--session", "session_id", default="default", show_default=True)
@json_option
def select(
    db: str | None,
    arms_file: str | None,
    budget: int,
    context: str | None,
    seed: int | None,
    session_id: str,
    as_json: bool,
) -> None:
    """Choose the arms for one run and record it; prints the run id to observe later."""
    data = _load_arms(arms_file) if arms_file else None
    # Without --arms the store must already hold registered arms: nothing to create.
    with open_store(db, create=data is not None) as p:
        sel = p.bandit.select(
            data, token_budget=budget, context=context, seed=seed, session_id=session_id
        )
    if as_json:
        echo_json(sel)
        return
    kind = "baseline" if sel.is_baseline else sel.phase
    click.echo(f"run {sel.run_id} ({kind}, {sel.used_tokens}/{sel.budget} tokens)")
    for a in sel.included:
        click.echo(f"  + {a}")
    for a in sel.excluded:
        click.echo(f"  - {a}")
    if sel.guidance:
        click.echo(f"for the prompt: {sel.guidance}")


@click.command()
@db_option
@click.option("--run-id", required=True, help="The run id printed by `plaudit select`.")
@click.option(
    "--response",
    "response_file",
    default=None,
    metavar="FILE",
    help="File with the model's response text ('-': stdin). Required.",
)
@click.option(
    "--output",
    "legacy_output",
    default=None,
    hidden=True,
    help="Deprecated spelling of --response (it names an input, not an output).",
)
@click.option("--tool-calls", "calls_file", default=None, help='JSON list of {"name": ...}.')
@click.option("--tokens", type=click.IntRange(0, 2**53 - 1), default=None, help="Usage tokens.")
@click.option("--duration-ms", type=click.FloatRange(0, 1e15), default=None)
@click.option("--error", default=None, help="Mark the run as failed with this message.")
@json_option
def observe(
    db: str | None,
    run_id: str,
    response_file: str | None,
    legacy_output: str | None,
    calls_file: str | None,
    tokens: int | None,
    duration_ms: float | None,
    error: str | None,
    as_json: bool,
) -> None:
    """Reward each included arm by whether the output referenced it."""
    from plaudit.inputs import as_list, load, read_text

    if legacy_output is not None:
        if response_file is not None:
            raise click.UsageError("give --response only (--output is its old spelling)")
        click.echo("warning: observe --output is deprecated; use --response FILE", err=True)
        response_file = legacy_output
    if response_file is None:
        raise click.UsageError("Missing option '--response' (the model's response text)")
    text = read_text(response_file, what="response")
    calls: Any = []
    if calls_file:
        calls = as_list(load(calls_file, what="tool_calls"))
    with open_store(db) as p:
        obs = p.bandit.observe(run_id, text, calls, tokens, duration_ms, error)
    if as_json:
        echo_json(obs)
        return
    state = "already recorded" if obs.status == "present" else "recorded"
    learned = "posteriors updated" if obs.updated else "posteriors not updated"
    click.echo(f"{state}: {len(obs.referenced)}/{len(obs.rewards)} referenced, {learned}")
    for arm_id, r in obs.rewards.items():
        click.echo(f"  {'+' if r else '-'} {arm_id}")


@click.command()
@db_option
@click.option("--context", default=None)
@click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95)
@json_option
def posteriors(db: str | None, context: str | None, level: float, as_json: bool) -> None:
    """Every arm's Beta posterior with a credible interval at --level."""
    with open_store(db) as p:
        stats = p.bandit.posteriors(context, level=level)
    if as_json:
        echo_json({"context": context, "level": level, "arms": stats})
        return
    pct = f"{level * 100:g}%"
    click.echo(f"{'arm':44} {'alpha':>7} {'beta':>7} {'mean':>6} {pct + ' interval':>18} pulls")
    for s in stats:
        click.echo(
            f"{s.id[:44]:44} {s.alpha:>7.2f} {s.beta:>7.2f} {s.mean:>6.3f} "
            f"[{s.ci_low:.3f}, {s.ci_high:.3f}]  {s.pulls:>5} {s.confidence}{_flags(s)}"
        )
    _under_note(stats)


@click.command()
@db_option
@click.option("--context", default=None)
@json_option
def savings(db: str | None, context: str | None, as_json: bool) -> None:
    """Token savings of selected runs against their counterfactual, with a 95% interval."""
    with open_store(db) as p:
        s = p.bandit.savings(context)
    if as_json:
        echo_json(s)
        return
    ci = (
        f" (95% CI {_fmt(s['prompt_ci_low'], '.1f')}% .. {_fmt(s['prompt_ci_high'], '.1f')}%)"
        if s["prompt_ci_low"] is not None
        else ""
    )
    # The headline first, and what it compares; the seed's comparison after it, as secondary.
    click.echo(f"token savings: {_fmt(s['prompt_savings_percent'], '.1f')}%{ci}")
    click.echo(
        f"  prompt tokens sent in {s['runs']} runs, against what each would have sent without "
        f"the bandit ({s['counterfactual']})"
    )
    if s["baseline_runs"]:
        click.echo(
            f"also measured on baseline runs: {_fmt(s['token_savings_percent'], '.1f')}% "
            f"(95% CI {_fmt(s['ci_low'], '.1f')}% .. {_fmt(s['ci_high'], '.1f')}%), "
            f"{_fmt(s['net_savings_percent'], '.1f')}% net of their cost; avg tokens "
            f"{_fmt(s['baseline_avg_tokens'], '.0f')} baseline vs "
            f"{_fmt(s['selected_avg_tokens'], '.0f')} selected"
        )
    else:
        click.echo(
            "no baseline runs (baseline_rate is 0): set it to also compare observed usage, "
            "duration and errors with the full prompt's"
        )
    click.echo(f"runs: {s['baseline_runs']} baseline, {s['selected_runs']} selected")
    click.echo(
        f"duration ms: {_fmt(s['baseline_avg_duration_ms'], '.0f')} vs "
        f"{_fmt(s['selected_avg_duration_ms'], '.0f')}; error rate: "
        f"{_fmt(s['baseline_error_rate'])} vs {_fmt(s['selected_error_rate'])}"
    )


@click.group()
def bandit() -> None:
    """Bandit analysis: list runs, evaluate a candidate configuration on logged runs."""


@bandit.command("runs")
@db_option
@click.option("--session", "session_id", default=None, help="Only this session's runs.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0, 2**53 - 1), default=0, show_default=True)
@json_option
def runs(db: str | None, session_id: str | None, limit: int, offset: int, as_json: bool) -> None:
    """Recorded runs, newest first; page with --limit and --offset."""
    with open_store(db) as p:
        got = p.bandit.runs(session_id, limit=limit, offset=offset)
    if as_json:
        echo_json({"session_id": session_id, "limit": limit, "offset": offset, "runs": got})
        return
    if not got:
        click.echo("no runs" + (f" in session {session_id!r}" if session_id else ""))
        return
    for r in got:
        kind = "baseline" if r["is_baseline"] else r["phase"]
        outcome = (
            ("observed" if not r.get("error") else f"error: {r['error']}")
            if r["observed"]
            else "not observed"
        )
        click.echo(
            f"{r['run_id']}  {r['session_id']}  {r['context'] or '-'}  {kind}  "
            f"{r['included']} arms, {r['used_tokens']}/{r['budget']} tokens  {outcome}"
        )


@bandit.command("evaluate")
@db_option
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=JSON",
    help="A setting of the candidate, e.g. --set core_level=0.6 --set miss_cost_tokens=15000.",
)
@click.option("--level", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True)
@json_option
def _net(e: dict) -> str:
    if e.get("net_savings_percent") is None:
        return ""
    lo, hi = e.get("net_savings_ci") or (None, None)
    net = _fmt(e["net_savings_percent"], ".1f")
    return f"  net savings {net}% [{_fmt(lo, '.1f')}, {_fmt(hi, '.1f')}]"


def evaluate(db: str | None, settings: tuple[str, ...], level: float, as_json: bool) -> None:
    """Estimate a candidate configuration's savings and recall from logged runs (IPS, SNIPS,
    doubly robust, with intervals), beside the current configuration's. Writes nothing."""
    changes = _settings(settings)
    with open_store(db) as p:
        res = p.bandit.evaluate(changes, level=level)
    if as_json:
        echo_json(res)
        return
    click.echo(
        f"trained on {res['train_runs']} runs, evaluated on {res['candidate']['runs']} "
        f"({int(level * 100)}% intervals)"
    )
    for name in ("current", "candidate"):
        r = res[name]
        click.echo(f"{name}: prompt savings {_fmt(r['savings_percent'], '.1f')}%")
        for est in ("ips", "snips", "dr"):
            e = r[est]
            lo, hi = e["recall_ci"]
            click.echo(
                f"  {est:5} recall {_fmt(e['recall'])} [{_fmt(lo)}, {_fmt(hi)}]  "
                f"misses/run {_fmt(e['misses_per_run'], '.3f')}" + _net(e)
            )
            if e.get("trusted") is False:
                click.echo(f"        not to be trusted: {e['why']}")
