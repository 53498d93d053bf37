"""`/v1/bandit`: the context bandit over HTTP, a thin layer over `Plaudit.bandit`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from plaudit.core import Plaudit
from plaudit.server.deps import get_plaudit, require_write
from plaudit.server.responses import MsgspecJSONResponse

router = APIRouter(prefix="/v1/bandit", tags=["bandit"])
PlauditDep = Annotated[Plaudit, Depends(get_plaudit)]

ArmId = Annotated[StrictStr, Field(min_length=5, max_length=512, pattern=r"^[a-z]+:[^:]+:.+$")]
Label = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
Session = Annotated[StrictStr, Field(max_length=256, pattern=r"^[^\x00-\x1f\x7f]*$")]


class ArmIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: ArmId
    tokens: StrictInt = Field(ge=0, le=10_000_000)
    content: StrictStr | None = Field(default=None, max_length=1 << 18)
    kind: Literal["curated", "learned"] | None = None


class ArmsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arms: list[ArmIn] = Field(min_length=1, max_length=20_000)


class SelectIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arms: list[ArmIn] | None = Field(default=None, max_length=20_000)
    token_budget: StrictInt = Field(default=8000, ge=0, le=100_000_000)
    context: Label | None = None
    seed: StrictInt | None = Field(default=None, ge=0, le=2**53 - 1)
    session_id: Session = "default"


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: StrictStr = Field(min_length=1, max_length=1000)


class ObserveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: StrictStr = Field(min_length=1, max_length=200)
    output_text: StrictStr = Field(default="", max_length=16 << 20)
    tool_calls: list[ToolCall] = Field(default_factory=list, max_length=10_000)
    usage_tokens: StrictInt | None = Field(default=None, ge=0, le=2**53 - 1)
    duration_ms: float | None = Field(default=None, ge=0, lt=1e15)
    error: StrictStr | None = Field(default=None, max_length=10_000)


def _arms(items: list[ArmIn] | None) -> list[dict[str, Any]] | None:
    if items is None:
        return None
    return [a.model_dump(exclude_none=True) for a in items]


@router.post("/arms", dependencies=[Depends(require_write)])
def register_arms(body: ArmsIn, p: PlauditDep) -> dict[str, Any]:
    arms = p.bandit.register(_arms(body.arms) or [])
    return {"registered": len(arms), "ids": [a.id for a in arms]}


@router.get("/arms")
def list_arms(p: PlauditDep) -> dict[str, Any]:
    return {"arms": [a.to_dict() for a in p.bandit.arms()]}


@router.get("/arms/{arm_id:path}")
def show_arm(arm_id: str, p: PlauditDep) -> dict[str, Any]:
    return p.bandit.arm(arm_id)


@router.post("/select", dependencies=[Depends(require_write)], response_model=dict[str, Any])
def select(body: SelectIn, p: PlauditDep) -> Response:
    # A Response, not a dict: FastAPI would otherwise check the returned dict against
    # `dict[str, Any]` (a hand-off to another thread) and walk it again to encode it, which
    # on the hottest route cost about a fifth of its HTTP overhead. The schema stays declared.
    sel = p.bandit.select(
        _arms(body.arms),
        token_budget=body.token_budget,
        context=body.context,
        seed=body.seed,
        session_id=body.session_id,
    )
    return MsgspecJSONResponse(sel.to_dict())


@router.post("/observe", dependencies=[Depends(require_write)], response_model=dict[str, Any])
def observe(body: ObserveIn, p: PlauditDep) -> Response:
    obs = p.bandit.observe(
        body.run_id,
        body.output_text,
        [c.model_dump() for c in body.tool_calls],
        usage_tokens=body.usage_tokens,
        duration_ms=body.duration_ms,
        error=body.error,
    )
    return MsgspecJSONResponse(obs.to_dict())


@router.get("/runs")
def list_runs(
    p: PlauditDep,
    session_id: Annotated[Session | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**53 - 1)] = 0,
) -> dict[str, Any]:
    """Recorded runs, newest first, of one session or of all; page with limit and offset."""
    got = p.bandit.runs(session_id, limit=limit, offset=offset)
    return {"session_id": session_id, "limit": limit, "offset": offset, "runs": got}


@router.get("/runs/{run_id}")
def get_run(run_id: str, p: PlauditDep) -> dict[str, Any]:
    return p.bandit.run(run_id)


@router.get("/posteriors")
def get_posteriors(
    p: PlauditDep,
    context: Annotated[Label | None, Query()] = None,
    level: Annotated[float, Query(gt=0, lt=1)] = 0.95,
) -> dict[str, Any]:
    stats = p.bandit.posteriors(context, level=level)
    return {"context": context, "level": level, "arms": [s.to_dict() for s in stats]}


@router.get("/contexts")
def get_contexts(p: PlauditDep) -> dict[str, Any]:
    return {"contexts": p.bandit.contexts()}


@router.get("/savings")
def get_savings(p: PlauditDep, context: Annotated[Label | None, Query()] = None) -> dict[str, Any]:
    return p.bandit.savings(context)


@router.get("/history")
def get_history(
    p: PlauditDep,
    arm_id: Annotated[ArmId | None, Query()] = None,
    context: Annotated[Label | None, Query()] = None,
    points: Annotated[int, Query(ge=1, le=10_000)] = 200,
) -> dict[str, Any]:
    return {"context": context, "arms": p.bandit.history(arm_id, context, points=points)}


@router.get("/config")
def get_config(p: PlauditDep) -> dict[str, Any]:
    return p.bandit.config.to_dict()


@router.post("/config", dependencies=[Depends(require_write)])
def set_config(body: dict[str, Any], p: PlauditDep) -> dict[str, Any]:
    return p.bandit.configure(body).to_dict()


class EvaluateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    changes: dict[str, Any] = Field(default_factory=dict)
    level: float = Field(default=0.95, gt=0.5, lt=1.0)


@router.post("/evaluate")
def evaluate(body: EvaluateIn, p: PlauditDep) -> dict[str, Any]:
    """Off-policy estimate of a candidate configuration (reads only)."""
    return p.bandit.evaluate(body.changes, level=body.level)
