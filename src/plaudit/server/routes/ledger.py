"""`/v1/ledger/...`: record, score, verify and audit the reward ledger over HTTP.

Request models check shapes; the library checks meaning (unknown category, wrong sign, missing
source) and its errors propagate to the app's handlers as 4xx bodies. The automatic work after a
write (reconcile every N transactions, backups, reports) runs inside the library; this router's
lifespan adds the timed pass (hourly reconcile, reports, the weekly audit) while the server runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Depends, FastAPI, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from plaudit.core import Plaudit
from plaudit.events import MAX_ID_LEN, MAX_NAME_LEN
from plaudit.ledger.spec import MAX_ACTION_LEN, MAX_POINTS
from plaudit.server.deps import get_plaudit, require_write
from plaudit.server.responses import MsgspecJSONResponse

log = logging.getLogger("plaudit.server.ledger")
MAX_BATCH = 10_000
RECONCILE_CHECK_S = 60.0


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The ledger's timed work while the server runs (what `plaudit ledger watch` runs)."""
    from plaudit.ledger.scheduler import start_scheduler_thread

    p = getattr(app.state, "plaudit", None)
    stop = threading.Event()
    if p is not None:
        start_scheduler_thread(p, interval_s=RECONCILE_CHECK_S, stop=stop)
    try:
        yield
    finally:
        stop.set()


router = APIRouter(prefix="/v1/ledger", tags=["ledger"], lifespan=_lifespan)

Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_LEN)]


class RecordIn(BaseModel):
    """One reward or penalty. `points` defaults to the category's; `key` makes retries safe."""

    model_config = ConfigDict(extra="forbid")

    category: Annotated[StrictStr, Field(min_length=1, max_length=100, pattern=r"^[a-z_]+$")]
    action: Annotated[StrictStr, Field(min_length=1, max_length=MAX_ACTION_LEN)]
    points: Annotated[StrictInt, Field(ge=-MAX_POINTS, le=MAX_POINTS)] | None = None
    source: Annotated[StrictStr, Field(min_length=3, max_length=MAX_ID_LEN + 50)] | None = None
    session: Name | None = None
    key: Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID_LEN)] | None = None


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transactions: Annotated[list[RecordIn], Field(min_length=1, max_length=MAX_BATCH)]


class SessionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session: Name | None = None
    label: Name | None = None


class ReconcileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recover: StrictBool = False
    correct: StrictBool = False


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _items(body: RecordIn) -> dict[str, Any]:
    return body.model_dump(exclude_none=True)


@router.post("/record", dependencies=[Depends(require_write)], response_model=dict[str, Any])
def record(body: RecordIn, p: Plaudit = Depends(get_plaudit)) -> Response:  # noqa: B008
    # A Response, not a dict: FastAPI would otherwise check the dict against `dict[str, Any]`
    # in another thread and walk it once more to encode it (see routes/bandit.py's select).
    return MsgspecJSONResponse(_plain(p.ledger.record(**_items(body))))


@router.post("/record-batch", dependencies=[Depends(require_write)])
def record_batch(body: BatchIn, p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    txs = p.ledger.record_batch([_items(t) for t in body.transactions])
    return {"recorded": len(txs), "transactions": _plain(txs)}


@router.get("/score")
def score(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return p.ledger.score()


@router.get("/transactions")
def transactions(
    limit: Annotated[int, Query(ge=0, le=10_000)] = 10,
    category: Annotated[str | None, Query(max_length=100)] = None,
    session: Annotated[str | None, Query(max_length=MAX_NAME_LEN)] = None,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    txs = p.ledger.transactions(limit, category=category or None, session=session or None)
    return {"transactions": _plain(txs)}


@router.get("/breakdown")
def breakdown(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return p.ledger.breakdown()


@router.get("/metrics")
def metrics(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return p.ledger.metrics()


@router.get("/verify")
def verify(
    full: bool = False,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """`full=true` recalculates from the first transaction rather than the newest checkpoint."""
    return p.ledger.verify(full=full)


@router.get("/incidents")
def incidents(
    limit: Annotated[int, Query(ge=0, le=10_000)] = 20,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    """Halts, audits and recoveries, newest first."""
    return {"incidents": p.ledger.incidents(limit)}


@router.get("/sessions")
def sessions(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return {"sessions": p.ledger.sessions()}


@router.post("/sessions/start", dependencies=[Depends(require_write)])
def session_start(body: SessionIn, p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return p.ledger.start_session(body.session, label=body.label)


@router.post("/sessions/end", dependencies=[Depends(require_write)])
def session_end(body: SessionIn, p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return p.ledger.end_session(body.session)


@router.post("/audit", dependencies=[Depends(require_write)])
def audit(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    """The six-step audit. The export step records the head digest (no server-side file)."""
    return _plain(p.ledger.audit())


@router.post("/reconcile", dependencies=[Depends(require_write)])
def reconcile(
    body: ReconcileIn | None = None,
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    out = p.ledger.reconcile()
    if body is not None and body.recover:
        out["recovery"] = p.ledger.recover_missing()
        out.update({k: out["recovery"]["reconcile"][k] for k in ("ok", "mismatches", "halted")})
    if body is not None and body.correct:
        out["correction"] = p.ledger.correct()
        out.update({k: out["correction"]["reconcile"][k] for k in ("ok", "mismatches", "halted")})
    return _plain(out)


@router.post("/recover", dependencies=[Depends(require_write)])
def recover(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    """Repair the stored totals from the log; lifts the halt once the ledger is whole, else
    `remaining` says what is left and how to move on."""
    return p.ledger.recover()


@router.post("/checkpoint", dependencies=[Depends(require_write)])
def checkpoint(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return _plain(p.ledger.checkpoint())


@router.post("/apply-rules", dependencies=[Depends(require_write)])
def apply_rules(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    return p.ledger.apply_rules()


@router.get("/report")
def report(
    period: Literal["daily", "weekly", "monthly"] = "daily",
    day: Annotated[date | None, Query(alias="date")] = None,
    format: Literal["json", "markdown"] = "json",
    p: Plaudit = Depends(get_plaudit),  # noqa: B008
) -> dict[str, Any]:
    r = p.ledger.report(period, day)
    if format == "markdown":
        from plaudit.ledger.reports import to_markdown

        return {"markdown": to_markdown(r), "report": r}
    return r


@router.get("/progress")
def progress(p: Plaudit = Depends(get_plaudit)) -> dict[str, Any]:  # noqa: B008
    """The progress.json document (the seed's schema), as the export would write it."""
    return p.ledger.progress()
