"""Output formats for exported rows: one writer per (format, split).

* ``jsonl``: the reference exporter's rows, one JSON object per line.
* ``parquet``: the same rows with a fixed schema; ``context`` and ``candidates`` are free-form,
  so they are stored as JSON text columns.
* ``preference``: pairs from overridden decisions: ``prompt``, ``chosen`` (the task the user
  switched to), ``rejected`` (the task the router chose), as DPO-style trainers read them;
  only pairs whose preferred task ran and succeeded or partly succeeded, so a pair never
  teaches a preference for a task that failed. ``preference-all`` keeps every pair. Each pair
  carries the outcome of each side that ran (``chosen_outcome``, ``rejected_outcome``; null
  for a side that did not run), so trainers can filter differently.
* ``chat``: supervised fine-tuning examples, ``prompt`` as a list of messages and ``answer``
  the task that ran, only from rows whose outcome was ``success``.
* ``rl``: every row, ``prompt`` as messages, the task that ran, its outcome and ``reward``, as
  RL trainers read them (failures included: they carry the negative signal).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import msgspec

from plaudit.errors import ValidationError

FORMATS = ("jsonl", "parquet", "preference", "preference-all", "chat", "rl")
SUFFIX = {
    "jsonl": ".jsonl",
    "parquet": ".parquet",
    "preference": ".preference.jsonl",
    "preference-all": ".preference-all.jsonl",
    "chat": ".chat.jsonl",
    "rl": ".rl.jsonl",
}
#: Outcomes whose task may stand as the preferred side of a pair.
GOOD = ("success", "partial")
SYSTEM_PROMPT = (
    "You are a task router. Given the user's intent, the project context, the candidate tasks "
    "and the recent routing history, answer with the single task to run."
)

_enc = msgspec.json.Encoder()
_canon = msgspec.json.Encoder(order="sorted")


class RowWriter(Protocol):
    path: Path
    rows: int
    #: True when the writer takes the row's JSON bytes (`write_line`) rather than a dict.
    raw_lines: bool

    def write(self, row: dict[str, Any]) -> None: ...

    def write_line(self, line: bytes) -> None: ...

    def close(self) -> None: ...


def prompt_text(row: dict[str, Any]) -> str:
    """The routing problem as text: intent, context, candidates, recent decisions."""
    parts = [
        f"Intent: {row.get('user_intent') or ''}",
        f"Context: {_canon.encode(row.get('context') or {}).decode()}",
        f"Candidates: {_canon.encode(row.get('candidates') or []).decode()}",
    ]
    history = row.get("event_history") or []
    if history:
        recent = ", ".join(f"t-{h['t_minus']}: {h['chosen_task']}" for h in history)
        parts.append(f"Recent decisions: {recent}")
    return "\n".join(parts)


class _Lines:
    raw_lines = False

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = 0
        self._f = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed in close()

    def _emit(self, obj: Any) -> None:
        self._f.write(_enc.encode(obj))
        self._f.write(b"\n")
        self.rows += 1

    def write(self, row: dict[str, Any]) -> None:
        self._emit(row)

    def write_line(self, line: bytes) -> None:
        """`line` is one JSON object and its newline."""
        self._f.write(line)
        self.rows += 1

    def write_pieces(self, pieces: list[bytes], rows: int) -> None:
        """`pieces`, concatenated, are `rows` JSON objects, each with its newline."""
        self._f.writelines(pieces)
        self.rows += rows

    def copy_from(self, fd: int, offset: int, length: int, rows: int) -> None:
        """Append `length` bytes of the file open as `fd`, from `offset`: `rows` whole lines
        (`plaudit.signals.reuse`). The kernel copies them where it can."""
        self._f.flush()
        out = self._f.fileno()
        while length > 0:
            try:
                done = os.copy_file_range(fd, out, length, offset)
            except OSError:  # no such call here, or not between these files: copy by hand
                done = os.write(out, os.pread(fd, min(length, 1 << 20), offset))
            if done <= 0:
                raise OSError(f"{self.path}: the previous export's file ended early")
            offset += done
            length -= done
        self._f.seek(0, os.SEEK_END)
        self.rows += rows

    def close(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()


class JsonlWriter(_Lines):
    raw_lines = True

    def write(self, row: dict[str, Any]) -> None:
        self._f.write(_enc.encode(row) + b"\n")
        self.rows += 1


def _info(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "session_id": row.get("session_id"),
        "chosen_task": row.get("chosen_task"),
        "task_executed": row.get("task_executed"),
        "outcome": row.get("outcome"),
        "reward": row.get("reward"),
        "confidence": row.get("confidence"),
        "propensity": row.get("propensity"),
        "manual_override_task": row.get("manual_override_task"),
        "candidates": row.get("candidates"),
    }


def _messages(row: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": prompt_text(row)},
    ]


class PreferenceWriter(_Lines):
    """Pairs whose preferred task ran and succeeded or partly succeeded (`every=False`)."""

    every = False

    def write(self, row: dict[str, Any]) -> None:
        chosen = row.get("manual_override_task") or ""
        rejected = row.get("chosen_task") or ""
        if not chosen or chosen == rejected:
            return
        executed = row.get("task_executed")
        outcome = row.get("outcome")
        chosen_outcome = outcome if executed == chosen else None
        if not self.every and chosen_outcome not in GOOD:
            return
        self._emit(
            {
                "id": row["id"],
                "prompt": prompt_text(row),
                "chosen": chosen,
                "rejected": rejected,
                "session_id": row.get("session_id"),
                "outcome": outcome,
                "task_executed": executed,
                "chosen_outcome": chosen_outcome,
                "rejected_outcome": outcome if executed == rejected else None,
                "reward": row.get("reward"),
            }
        )


class AllPreferenceWriter(PreferenceWriter):
    every = True


class ChatWriter(_Lines):
    """Supervised examples: only what ran and succeeded is an answer to imitate."""

    def write(self, row: dict[str, Any]) -> None:
        if row.get("outcome") != "success":
            return
        answer = row.get("task_executed") or row["chosen_task"]
        self._emit({"prompt": _messages(row), "answer": answer, "info": _info(row)})


class RlWriter(_Lines):
    """Every row with its reward: a failure is a signal too."""

    def write(self, row: dict[str, Any]) -> None:
        self._emit(
            {
                "prompt": _messages(row),
                "task": row.get("task_executed") or row["chosen_task"],
                "outcome": row.get("outcome"),
                "reward": row.get("reward"),
                "info": _info(row),
            }
        )


class ParquetWriter:
    BATCH = 10_000
    raw_lines = False

    def __init__(self, path: Path) -> None:
        from plaudit.extras import need

        pa = need("pyarrow", extra="parquet", feature="the parquet export format")
        import pyarrow.parquet as pq

        self.path = path
        self.rows = 0
        self._pa = pa
        text = pa.string()
        history = pa.list_(
            pa.struct(
                [
                    ("t_minus", pa.int64()),
                    ("decision_id", text),
                    ("chosen_task", text),
                    ("ts_ms", pa.int64()),
                ]
            )
        )
        self.schema = pa.schema(
            [
                ("schema_version", text),
                ("id", text),
                ("ts_ms", pa.int64()),
                ("source", text),
                ("session_id", text),
                ("project_fingerprint", text),
                ("project_path", text),
                ("git_branch", text),
                ("git_commit", text),
                ("user_hash", text),
                ("user_intent", text),
                ("context", text),
                ("candidates", text),
                ("chosen_task", text),
                ("confidence", pa.float64()),
                ("task_executed", text),
                ("outcome", text),
                ("time_to_resolution_ms", pa.int64()),
                ("error_kind", text),
                ("manual_override_task", text),
                ("event_history", history),
                ("reward", pa.float64()),
                ("dedupe_id", text),
                ("propensity", pa.float64()),
            ]
        )
        self._writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")
        self._buf: list[dict[str, Any]] = []

    @staticmethod
    def _text(v: Any) -> str | None:
        if v is None or isinstance(v, str):
            return v
        return _canon.encode(v).decode()

    def write(self, row: dict[str, Any]) -> None:
        r = dict(row)
        # seq_mem input may carry integers Parquet's int64 cannot hold: those become null.
        r["ts_ms"] = _i64(r.get("ts_ms"))
        r["time_to_resolution_ms"] = _i64(r.get("time_to_resolution_ms"))
        r["event_history"] = [
            {**h, "ts_ms": _i64(h.get("ts_ms"))} for h in r.get("event_history") or []
        ]
        for k in ("project_fingerprint", "project_path", "git_branch", "git_commit", "user_hash"):
            r[k] = self._text(r.get(k))
        r["user_intent"] = self._text(r.get("user_intent"))
        r["context"] = _canon.encode(r.get("context") or {}).decode()
        r["candidates"] = _canon.encode(r.get("candidates") or []).decode()
        r["propensity"] = _f64(r.get("propensity"))
        self._buf.append(r)
        self.rows += 1
        if len(self._buf) >= self.BATCH:
            self._flush()

    def write_line(self, line: bytes) -> None:
        self.write(msgspec.json.decode(line))

    def _flush(self) -> None:
        if self._buf:
            try:
                table = self._pa.Table.from_pylist(self._buf, schema=self.schema)
            except (self._pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                first = self._buf[0].get("id")
                raise ValidationError(
                    "format", f"rows from {first!r} on cannot be written as Parquet: {exc}"
                ) from None
            self._writer.write_table(table)
            self._buf = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        with open(self.path, "rb+") as f:
            os.fsync(f.fileno())


def _f64(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (OverflowError, TypeError, ValueError):
        return None


def _i64(value: Any) -> int | None:
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return None


WRITERS: dict[str, type] = {
    "jsonl": JsonlWriter,
    "parquet": ParquetWriter,
    "preference": PreferenceWriter,
    "preference-all": AllPreferenceWriter,
    "chat": ChatWriter,
    "rl": RlWriter,
}


def open_writer(fmt: str, directory: Path, split: str) -> RowWriter:
    return WRITERS[fmt](directory / f"{split}{SUFFIX[fmt]}")
