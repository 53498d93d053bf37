"""`/v1/signals/...`: router decisions, outcomes and overrides; export, audit and gates.

Request models check shapes (types, lengths, ranges, unknown fields) so a malformed body gets a
422 naming the field; the library checks content (control characters, JSON-safe values) and its
`ValidationError` names the field too. Handlers are plain `def`: the store is synchronous.

Paths in request bodies (`output_dir`, `seq_mem`, `reuse_from`, `summary_path`, `report_out`)
are confined to one directory, the export root: `app.state.export_root` or
`$PLAUDIT_EXPORT_ROOT`. Without one, those features answer 400, so an HTTP client can never
read or write elsewhere on the server.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from plaudit.core import Plaudit
from plaudit.errors import ValidationError
from plaudit.files import confine
from plaudit.server import paths
from plaudit.server.deps import get_plaudit, require_write
from plaudit.signals.contract import MAX_ID, MAX_INTENT, MAX_TEXT

router = APIRouter(prefix="/v1/signals", tags=["signals"])


def _confine(request: Request, field: str, value: str | None) -> str | None:
    """Resolve a body path inside the export root; refuse anything outside it."""
    return confine(getattr(request.app.state, "export_root", None), field, value)


Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT)]
Task = Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEXT)]
LongText = Annotated[StrictStr, Field(max_length=MAX_INTENT)]
Ts = Annotated[StrictInt, Field(ge=1, le=2**53 - 1)]
Path = Annotated[StrictStr, Field(min_length=1, max_length=4096)]
# Strict, as the library is: "0.5" and true are refused, not read as numbers.
Unit = Annotated[StrictFloat, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Number = Annotated[StrictFloat, Field(allow_inf_nan=False)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecisionIn(_In):
    decision_id: Id
    chosen_task: Task
    confidence: Unit
    user_intent: LongText
    session_id: Text | None = None
    candidates: list[Any] = Field(default_factory=list, max_length=1000)
    context: dict[str, Any] = Field(default_factory=dict)
    project_fingerprint: Text = ""
    project_path: Text = ""
    git_branch: Text = ""
    git_commit: Text = ""
    user_hash: Text = ""
    source: Text = "flow"
    ts_ms: Ts | None = None
    propensity: Annotated[StrictFloat, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None = None


class OutcomeIn(_In):
    decision_id: Id
    outcome: Literal["success", "partial", "failure", "wasted"]
    task_executed: Task
    time_to_resolution_ms: Annotated[StrictInt, Field(ge=0, le=2**53 - 1)] = 0
    manual_override_task: Text = ""
    error_kind: Text = ""
    extra: dict[str, Any] = Field(default_factory=dict)
    session_id: Text | None = None
    source: Text = "flow"
    ts_ms: Ts | None = None


class OverrideIn(_In):
    decision_id: Id
    original_task: Task
    override_task: Task
    reason: LongText = ""
    session_id: Text | None = None
    source: Text = "flow"
    ts_ms: Ts | None = None


Percent = Annotated[StrictInt, Field(ge=0, le=100)]
RewardMap = dict[Literal["success", "partial", "failure", "wasted"], Number]


class ExportIn(_In):
    """Export to a directory on the server; without `seq_mem` the log is exported."""

    output_dir: Path
    seq_mem: Path | None = None
    seed: Annotated[StrictInt, Field(ge=-(2**53), le=2**53)] = 42
    val_percent: Percent = 10
    test_percent: Percent = 10
    history_size: Annotated[StrictInt, Field(ge=0, le=1000)] = 3
    max_age_hours: Annotated[StrictInt, Field(ge=0, le=10_000_000)] = 168
    split_by: Literal["decision", "session"] = "decision"
    formats: list[Literal["jsonl", "parquet", "preference", "preference-all", "chat", "rl"]] = (
        Field(default_factory=lambda: ["jsonl"], min_length=1, max_length=6)
    )
    rewards: RewardMap = Field(default_factory=dict)
    #: Export a log that fails verification anyway (refused with 409 otherwise).
    allow_unverified: bool = False
    #: An earlier export's directory (under the export root) to copy unchanged rows from.
    reuse_from: Path | None = None


class Limits(_In):
    min_decisions: StrictInt | None = None
    min_joined: StrictInt | None = None
    min_link_rate: Number | None = None
    max_task_dominance: Number | None = None
    min_overrides: StrictInt | None = None
    min_failureish: StrictInt | None = None
    max_split_leakage: Number | None = None
    min_rows_per_task: StrictInt | None = None
    max_duplicate_rate: Number | None = None


class AuditIn(Limits):
    """Audit `summary` (an export summary object), else `summary_path` (a summary.json on the
    server), else the log's own summary. `report_out` writes audit.json there."""

    summary: dict[str, Any] | None = None
    summary_path: Path | None = None
    report_out: Path | None = None
    max_age_hours: Annotated[StrictInt, Field(ge=0, le=10_000_000)] = 168


@router.post("/decision", dependencies=[Depends(require_write)])
def decision(body: DecisionIn, p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    """Record `flow.router.decision.v1`; idempotent per decision id."""
    return p.signals.decision(**body.model_dump())


@router.post("/outcome", dependencies=[Depends(require_write)])
def outcome(body: OutcomeIn, p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    """Record `flow.router.outcome.v1`; idempotent per decision id."""
    return p.signals.outcome(**body.model_dump())


@router.post("/override", dependencies=[Depends(require_write)])
def override(body: OverrideIn, p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    """Record `flow.router.override.v1`; idempotent per (decision, original, override)."""
    return p.signals.override(**body.model_dump())


@router.post("/export", dependencies=[Depends(require_write)])
def export(
    body: ExportIn,
    request: Request,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """Write train/val/test files and summary.json to `output_dir` (under the export root);
    returns the summary."""
    options = body.model_dump()
    output_dir = _confine(request, "output_dir", options.pop("output_dir"))
    options["seq_mem"] = _confine(request, "seq_mem", options["seq_mem"])
    options["reuse_from"] = _confine(request, "reuse_from", options["reuse_from"])
    # The summary names its files (and the store) by full path: the client gets them below
    # the export root, as it named them, and nothing else of the server's layout.
    return paths.for_request(request)(p.signals.export(output_dir, **options))


@router.post("/audit", dependencies=[Depends(require_write)])
def audit(
    body: AuditIn,
    request: Request,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """The audit report: every gate with actual, threshold and pass."""
    return paths.for_request(request)(_audit(body, request, p))


def _audit(body: AuditIn, request: Request, p: Plaudit) -> dict[str, Any]:
    data = body.model_dump()
    limits = {k: v for k in Limits.model_fields if (v := data[k]) is not None}
    report_out = _confine(request, "report_out", data["report_out"])
    data["summary_path"] = _confine(request, "summary_path", data["summary_path"])
    if data["summary"] is not None:
        from plaudit.signals.audit import audit as run_audit

        return run_audit(data["summary"], limits=limits, report_out=report_out)
    if data["summary_path"] is not None:
        from plaudit.signals.audit import audit as run_audit

        # As the CLI does: the report goes to audit.json beside the summary (inside the
        # export root, as the summary is) unless report_out says where.
        return run_audit(data["summary_path"], limits=limits, report_out=report_out)
    return p.signals.audit(
        None, report_out=report_out, max_age_hours=data["max_age_hours"], **limits
    )


@router.get("/gates")
def gates(
    max_age_hours: int = Query(168, ge=0, le=10_000_000),
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """The reference gates over the log, default thresholds (env overrides apply)."""
    return p.signals.gates(max_age_hours=max_age_hours)


@router.get("/summary")
def summary(
    max_age_hours: int = Query(168, ge=0, le=10_000_000),
    split_by: Literal["decision", "session"] = "decision",
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """The export summary of the log, computed in memory (nothing is written)."""
    return p.signals.summary(max_age_hours=max_age_hours, split_by=split_by)


FieldPath = Annotated[StrictStr, Field(min_length=1, max_length=200)]


class SignalEvaluateIn(_In):
    """Off-policy evaluation of a candidate policy given as a JSON table (the format of
    `plaudit signal evaluate --policy FILE`). Over HTTP the policy is data, never code: a
    `module:function` from a request would make the server import and run whatever a client
    names, so only tables are taken."""

    policy: dict[str, Any]
    seq_mem: Path | None = None
    default_propensity: (
        Annotated[StrictFloat, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None
    ) = None
    min_propensity_coverage: Unit | None = None
    #: Capped: every resample costs a pass over the decisions, on a shared server.
    bootstrap: Annotated[StrictInt, Field(ge=0, le=10_000)] = 1000
    seed: Annotated[StrictInt, Field(ge=0, le=2**53)] = 0
    level: Annotated[StrictFloat, Field(ge=0.5, lt=1.0)] = 0.95
    max_age_hours: Annotated[StrictInt, Field(ge=0, le=10_000_000)] = 168
    rewards: RewardMap = Field(default_factory=dict)
    reward_key: list[FieldPath] | None = Field(default=None, max_length=8)


@router.post("/evaluate", dependencies=[Depends(require_write)])
def evaluate(
    body: SignalEvaluateIn,
    request: Request,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """What the candidate policy (a JSON table) would have earned per decision on the logged
    decisions: IPS, SNIPS and doubly robust estimates with bootstrap intervals. Reads only;
    the gate's verdict is `pass` in the result (200 either way)."""
    from plaudit.signals.evaluate import evaluate_policy
    from plaudit.signals.policy import TablePolicy

    options = body.model_dump()
    policy = TablePolicy(options.pop("policy"), name="body.policy")
    options["seq_mem"] = _confine(request, "seq_mem", options["seq_mem"])
    if options["seq_mem"] is not None:
        return paths.for_request(request)(evaluate_policy(policy, **options))
    return paths.for_request(request)(evaluate_policy(policy, plaudit=p, **options))


# -- the loop: learn, recommend (shadow), compare ------------------------------------------
Bootstrap = Annotated[StrictInt, Field(ge=0, le=10_000)]
Level = Annotated[StrictFloat, Field(ge=0.5, lt=1.0)]
Propensity = Annotated[StrictFloat, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
Age = Annotated[StrictInt, Field(ge=0, le=10_000_000)]
Seed = Annotated[StrictInt, Field(ge=0, le=2**53)]


class LearnIn(_In):
    """Learn a routing policy from the log (or `seq_mem`, a file under the export root) and
    write it to `out` (under the export root); without `out` nothing is written and the
    policy is in the result's `spec`. `gates`: the audit's thresholds by gate name."""

    out: Path | None = None
    seq_mem: Path | None = None
    features: list[FieldPath] | None = Field(default=None, min_length=1, max_length=8)
    max_features: Annotated[StrictInt, Field(ge=0, le=8)] = 4
    explore: Annotated[StrictFloat, Field(gt=0.0, lt=1.0)] = 0.05
    holdout_percent: Annotated[StrictInt, Field(ge=5, le=95)] = 30
    seed: Seed = 0
    format: Literal["auto", "table", "model"] = "auto"
    default_propensity: Propensity | None = None
    bootstrap: Bootstrap = 1000
    level: Level = 0.95
    max_age_hours: Age = 168
    rewards: RewardMap = Field(default_factory=dict)
    gates: Limits = Field(default_factory=Limits)


@router.post("/learn", dependencies=[Depends(require_write)])
def learn(
    body: LearnIn,
    request: Request,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """The learned policy (written to `out`), its provenance and its held-out evaluation; 409
    naming the failed gates when the telemetry fails the audit."""
    from plaudit.signals.learn import learn_policy

    options = body.model_dump()
    out = _confine(request, "out", options.pop("out"))
    seq_mem = _confine(request, "seq_mem", options.pop("seq_mem"))
    options["gates"] = {k: v for k, v in options["gates"].items() if v is not None}
    if seq_mem is not None:
        result = learn_policy(out, seq_mem=seq_mem, **options)
    else:
        result = learn_policy(out, plaudit=p, **options)
    if out is not None:
        result.pop("spec")
    return paths.for_request(request)(result)


class RecommendIn(_In):
    """A decision's recommendation: `policy` (a table or a learned model, as JSON) or
    `policy_path` (a file under the export root, kept while it is unchanged)."""

    policy: dict[str, Any] | None = None
    policy_path: Path | None = None
    context: dict[str, Any] | None = None
    candidates: list[Task] | None = Field(default=None, max_length=1000)
    decision: dict[str, Any] | None = None
    decision_id: Id | None = None
    session_id: Text | None = None
    greedy: bool = False
    #: Record the recommendation beside the router's decision of the same id.
    shadow: bool = False


def _policy(request: Request, policy: dict[str, Any] | None, path: str | None) -> Any:
    if (policy is None) == (path is None):
        raise ValidationError("policy", "give either policy (a table or model) or policy_path")
    if path is not None:
        return _confine(request, "policy_path", path)
    from plaudit.signals.policy import table_or_model

    return table_or_model(policy, name="body.policy")


@router.post("/recommend", dependencies=[Depends(require_write)])
def recommend(
    body: RecommendIn,
    request: Request,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """`{"task", "propensity", "probabilities", "policy", ...}` for the decision; with
    `shadow`, also recorded (`shadow: {"id", "status", "seq"}`)."""
    policy = _policy(request, body.policy, body.policy_path)
    result = p.signals.recommend(
        policy,
        context=body.context,
        candidates=body.candidates,
        decision=body.decision,
        decision_id=body.decision_id,
        session_id=body.session_id,
        greedy=body.greedy,
        shadow=body.shadow,
    )
    return paths.for_request(request)(result)


class CompareIn(_In):
    """The promotion gate for `policy` (or `policy_path`) against the logging router."""

    policy: dict[str, Any] | None = None
    policy_path: Path | None = None
    seq_mem: Path | None = None
    threshold: Annotated[StrictFloat, Field(allow_inf_nan=False)] = 0.0
    min_ess: Annotated[StrictFloat, Field(ge=0.0, allow_inf_nan=False)] = 100.0
    default_propensity: Propensity | None = None
    bootstrap: Bootstrap = 1000
    seed: Seed = 0
    level: Level = 0.95
    max_age_hours: Age = 168
    rewards: RewardMap = Field(default_factory=dict)
    reward_key: list[FieldPath] | None = Field(default=None, max_length=8)


@router.post("/compare", dependencies=[Depends(require_write)])
def compare(
    body: CompareIn,
    request: Request,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """The comparison and its verdict (`promote`), 200 either way. Reads only."""
    from plaudit.signals.compare import compare_policy

    options = body.model_dump()
    policy = _policy(request, options.pop("policy"), options.pop("policy_path"))
    seq_mem = _confine(request, "seq_mem", options.pop("seq_mem"))
    if seq_mem is not None:
        return paths.for_request(request)(compare_policy(policy, seq_mem=seq_mem, **options))
    return paths.for_request(request)(compare_policy(policy, plaudit=p, **options))
