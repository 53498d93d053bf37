"""Recording a validated router event: into the log, and optionally into seq_mem.jsonl."""

from __future__ import annotations

import os
import time

from plaudit.errors import ConflictError
from plaudit.signals.contract import Emission
from plaudit.signals.seqmem_file import open_for_append, write_row

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from plaudit.core import Plaudit


def record(
    plaudit: Plaudit | None,
    emission: Emission,
    *,
    seq_mem: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Append to the log (idempotent by the derived id), then to `seq_mem` when given.

    The log comes first: it is the source of truth and decides whether this is a retry. The
    seq_mem copy is at-least-once (a retry appends the row again); the exporter recognises
    identical repeats and never turns them into duplicate training rows. The seq_mem file is
    opened before the log is written, so one that cannot be opened fails the emit with
    nothing recorded anywhere.
    """
    ts = _ts(emission)
    out = _result(emission, ts)
    opened = open_for_append(seq_mem) if seq_mem is not None else None
    try:
        if plaudit is not None:
            _append_to_log(plaudit, emission, ts, out)
    except BaseException:
        if opened is not None:
            os.close(opened[0])
        raise
    if opened is not None:
        write_row(*opened, emission, ts)
        out["seq_mem"] = os.fspath(seq_mem)
    return out


def record_via_server(
    db: str, emission: Emission, *, seq_mem: str | os.PathLike[str] | None = None
) -> dict[str, Any] | None:
    """`record`, with the append made by a `plaudit serve` running on the SQLite store `db`
    (`plaudit.signals.handoff`); None when no server took the event, with nothing written
    anywhere (then call `record`). With a server, the seq_mem file is opened before the event
    is sent, as `record` opens it before appending."""
    from plaudit.signals.handoff import connect, send

    sock = connect(db)
    if sock is None:
        return None
    ts = _ts(emission)
    try:
        opened = open_for_append(seq_mem) if seq_mem is not None else None
    except BaseException:
        sock.close()
        raise
    try:
        answer = send(sock, emission, ts)
    except BaseException:
        if opened is not None:
            os.close(opened[0])
        raise
    if answer is None:
        if opened is not None:
            os.close(opened[0])
        return None
    out = _result(emission, ts)
    out["status"], out["seq"] = answer["status"], answer["seq"]
    if opened is not None:
        write_row(*opened, emission, ts)
        out["seq_mem"] = os.fspath(seq_mem)
    return out


def _ts(emission: Emission) -> int:
    return emission.ts_ms if emission.ts_ms is not None else time.time_ns() // 1_000_000


def _result(emission: Emission, ts: int) -> dict[str, Any]:
    return {
        "id": emission.id,
        "type": emission.type,
        "decision_id": emission.decision_id,
        "session_id": emission.session_id,
        "ts_ms": ts,
        "status": "skipped",
        "seq": None,
        "redacted": emission.redacted,
        "seq_mem": None,
    }


def _append_to_log(plaudit: Plaudit, emission: Emission, ts: int, out: dict[str, Any]) -> None:
    from plaudit.events import make_event

    event = make_event(
        emission.type,
        emission.payload,
        id=emission.id,
        session_id=emission.session_id,
        source=emission.source,
        ts_ms=ts,
        meta={"ok": emission.ok, "dur_us": 0},
    )
    try:
        result = plaudit.log.append(event)
    except ConflictError:
        raise _conflict(plaudit, emission) from None
    out["status"] = result.status
    out["seq"] = result.seq


def _conflict(plaudit: Plaudit, emission: Emission) -> ConflictError:
    """The log's conflict, said in the router's terms: which fields differ from what is kept."""
    kept = plaudit.log.get(emission.id)
    before = kept.payload if kept is not None else {}
    fields = sorted(
        k
        for k in before.keys() | emission.payload.keys()
        if before.get(k) != emission.payload.get(k)
    )
    if kept is not None and kept.session_id != emission.session_id and "session_id" not in fields:
        fields.insert(0, "session_id")
    what = emission.type.rsplit(".", 2)[-2]  # decision, outcome or override
    shown = ", ".join(
        f"{k}: {before.get(k)!r} kept, {emission.payload.get(k)!r} now"
        if k != "session_id"
        else f"session_id: {kept.session_id!r} kept, {emission.session_id!r} now"
        for k in fields[:3]
    )
    return ConflictError(
        emission.id,
        f"decision_id {emission.decision_id!r}: a different {what} is already recorded"
        f" ({shown or 'different content'}); each decision keeps its first {what}",
    )
