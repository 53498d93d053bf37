"""Recording a validated router event: into the log, and optionally into seq_mem.jsonl."""

from __future__ import annotations

import os
import time

from plaudit.signals.contract import Emission
from plaudit.signals.seqmem_file import append_row

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
    identical repeats and never turns them into duplicate training rows.
    """
    ts = emission.ts_ms if emission.ts_ms is not None else time.time_ns() // 1_000_000
    out: dict[str, Any] = {
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
    if plaudit is not None:
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
        result = plaudit.log.append(event)
        out["status"] = result.status
        out["seq"] = result.seq
    if seq_mem is not None:
        append_row(seq_mem, emission, ts)
        out["seq_mem"] = os.fspath(seq_mem)
    return out
