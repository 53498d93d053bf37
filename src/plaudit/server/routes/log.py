"""`/v1/log/...`: append to, verify and inspect the hash-chained event log.

The request model checks shapes (types, lengths, unknown fields) so a malformed body gets a 422
that names the field; the library then checks content (namespaced types, control characters,
JSON-safe numbers, payload size) and its `ValidationError` names `event[i].field`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Body, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictInt, StrictStr, Tag

from plaudit.core import Plaudit
from plaudit.errors import NotFoundError
from plaudit.events import MAX_ID_LEN, MAX_NAME_LEN, MAX_SAFE_INT, StoredEvent
from plaudit.server.deps import get_plaudit, require_write

router = APIRouter(prefix="/v1/log", tags=["log"])
PlauditDep = Annotated[Plaudit, Depends(get_plaudit)]

#: Most events one append request may carry (the body size limit applies as well).
MAX_BATCH = 10_000
MAX_TAIL = 1_000
#: What an event type (or a prefix of one) may contain; see plaudit.events.TYPE_RE.
TYPE_PREFIX = r"^[A-Za-z0-9_.\-]+$"
NO_CONTROL = r"^[^\x00-\x1f\x7f]+$"


class EventIn(BaseModel):
    """One event. `id` and `ts_ms` are generated when omitted; give `id` to retry safely."""

    model_config = ConfigDict(extra="forbid")

    type: Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_LEN)]
    payload: dict[str, Any] = Field(default_factory=dict)
    id: Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID_LEN)] | None = None
    session_id: Annotated[StrictStr, Field(max_length=MAX_NAME_LEN)] = "default"
    source: Annotated[StrictStr, Field(max_length=MAX_NAME_LEN)] = "plaudit"
    ts_ms: Annotated[StrictInt, Field(ge=0, le=MAX_SAFE_INT)] | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


def _one_or_many(value: Any) -> str:
    return "events" if isinstance(value, list) else "event"


# A tagged union, so a bad body is reported once, as `body.event.type` or `body.events[3].type`,
# rather than once per alternative.
AppendBody = Annotated[
    Annotated[EventIn, Tag("event")]
    | Annotated[list[EventIn], Field(min_length=1, max_length=MAX_BATCH), Tag("events")],
    Discriminator(_one_or_many),
    Body(
        openapi_examples={
            "one": {
                "summary": "one event",
                "value": {"type": "myapp.thing.v1", "payload": {"answer": 42}},
            },
            "batch": {
                "summary": "a batch, appended atomically",
                "value": [
                    {"type": "myapp.thing.v1", "payload": {"n": 1}, "id": "a1"},
                    {"type": "myapp.thing.v1", "payload": {"n": 2}, "id": "a2"},
                ],
            },
        }
    ),
]


def _event_dict(e: StoredEvent) -> dict[str, Any]:
    return msgspec.to_builtins(e)


@router.post("/append", dependencies=[Depends(require_write)])
def append(
    body: AppendBody,
    p: PlauditDep,
    on_conflict: Annotated[
        Literal["raise", "skip"],
        Query(description="'raise': 409 if an id exists with other content; 'skip': report it"),
    ] = "raise",
    wait: Annotated[
        bool,
        Query(
            description="false: answer once the events are durable in the intake, before they "
            "have positions ('queued', seq null; PostgreSQL; SQLite always waits)"
        ),
    ] = True,
) -> dict[str, Any]:
    """Append one event or a list, atomically (all or none) and idempotently by id."""
    events = body if isinstance(body, list) else [body]
    call = p.log.append_batch if wait else p.log.enqueue_batch
    result = call([e.model_dump(exclude_none=True) for e in events], on_conflict=on_conflict)
    return {
        "appended": result.appended,
        "present": result.present,
        "queued": result.queued,
        "conflicts": result.conflicts,
        "results": [{"id": r.id, "seq": r.seq, "status": r.status} for r in result.results],
        "head": p.log.head().digest,
        "receipt": result.receipt,
    }


@router.get("/verify")
def verify(
    p: PlauditDep,
    against: Annotated[
        str | None,
        Query(
            max_length=200,
            description="An earlier head digest ('length:hash') the log must still extend.",
        ),
    ] = None,
    full: Annotated[bool, Query(description="Re-check everything, not only what is new.")] = False,
) -> dict[str, Any]:
    """Check the chain, the Merkle tree, the signed checkpoints and the witnesses; `ok` is
    false with the first bad position if broken. Incremental from the newest checkpoint an
    earlier verify confirmed, unless `full`."""
    return msgspec.to_builtins(p.log.verify(against=against or None, full=full))


def _note(ck: Any) -> Response:
    return Response(
        ck.to_text(), media_type="text/plain; charset=utf-8", headers={"X-Plaudit-Log": ck.log}
    )


@router.get("/checkpoint")
def checkpoint(p: PlauditDep) -> Response:
    """The newest signed checkpoint as its text note (`plaudit-checkpoint v1`, see
    docs/proofs.md), with the log's key fingerprint in `X-Plaudit-Log`."""
    ck = p.log.latest_checkpoint()
    if ck is None:
        raise NotFoundError("no checkpoint has been signed yet: POST /v1/log/checkpoint")
    return _note(ck)


@router.post("/checkpoint", dependencies=[Depends(require_write)])
def sign_checkpoint(p: PlauditDep) -> Response:
    """Sign a checkpoint of the log as it is now; it also goes to every witness."""
    return _note(p.log.checkpoint())


@router.get("/proof/{event_id}")
def proof(
    event_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_LEN, pattern=NO_CONTROL)],
    p: PlauditDep,
) -> Response:
    """A self-contained inclusion proof bundle (`plaudit-proof v1`) for one event: check it
    with `plaudit log check-proof`, or by hand (docs/proofs.md)."""
    return Response(p.log.prove(event_id, sign=False), media_type="application/json")


@router.get("/consistency")
def consistency(
    p: PlauditDep,
    from_: Annotated[
        int,
        Query(alias="from", ge=0, le=MAX_SAFE_INT, description="The old tree size to extend."),
    ],
) -> Response:
    """A bundle (`plaudit-consistency v1`) proving that the log extends its tree of `from`
    events, up to the newest signed checkpoint."""
    return Response(p.log.consistency(from_, sign=False), media_type="application/json")


@router.get("/head")
def head(p: PlauditDep) -> dict[str, Any]:
    """The log's length and last hash; keep `digest` to check later that history is unchanged."""
    h = p.log.head()
    return {"length": h.length, "hash": h.hash, "digest": h.digest}


@router.get("/stats")
def stats(p: PlauditDep) -> dict[str, Any]:
    """Length, head, sessions, time range, counts by event type and projection positions."""
    return msgspec.to_builtins(p.log.stats())


@router.get("/tail")
def tail(
    p: PlauditDep,
    n: Annotated[int, Query(ge=1, le=MAX_TAIL, description="How many of the newest events.")] = 10,
    type: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_NAME_LEN, pattern=TYPE_PREFIX)]]
        | None,
        Query(description="Only event types starting with this prefix (repeatable)."),
    ] = None,
) -> dict[str, Any]:
    """The newest `n` events, oldest first."""
    return {"events": [_event_dict(e) for e in p.log.tail(n, types=type or None)]}


@router.get("/events/{event_id}")
def get_event(
    event_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_LEN, pattern=NO_CONTROL)],
    p: PlauditDep,
) -> dict[str, Any]:
    """One committed event by id, with its position and chain hash."""
    e = p.log.get(event_id)
    if e is None:
        raise NotFoundError(f"no event with id {event_id!r} in the log")
    return _event_dict(e)


__all__ = ["EventIn", "router"]
