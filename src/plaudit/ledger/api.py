"""`Plaudit.ledger`: the reward ledger's public API. Each method is a thin composition of the
modules beside it; the CLI and HTTP routes call these and nothing else."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plaudit.errors import IntegrityError, ValidationError
from plaudit.events import make_event
from plaudit.ids import now_ms, uuid7
from plaudit.ledger import audit as _audit
from plaudit.ledger import eventtypes as et
from plaudit.ledger import integrity, queries, reports, scheduler
from plaudit.ledger import reconcile as _reconcile
from plaudit.ledger.backup import backup as _backup
from plaudit.ledger.backup import restore as _restore
from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.config import LedgerConfig, load_config
from plaudit.ledger.models import Checksum, Transaction
from plaudit.ledger.progress import (
    ProgressFile,
    build_progress,
    export_progress,
    import_progress,
)
from plaudit.ledger.projection import read_state
from plaudit.ledger.rules import build_rules
from plaudit.ledger.sources import SourceFiles, SourceImport
from plaudit.ledger.spec import MAX_NAME_LEN, parse_spec
from plaudit.ledger.writing import LedgerWriter, Pending
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit

#: Halts about the store a backup came from rather than the ledger it holds; a plain restore
#: whose log verifies and whose totals add up lifts them.
_STORE_HALTS = ("log", "log_extra", "checksum")


class Ledger:
    """An honest, tamper-evident score of agent behaviour, kept in the shared event log."""

    def __init__(
        self, plaudit: Plaudit, config: LedgerConfig | str | os.PathLike[str] | None = None
    ) -> None:
        self.p = plaudit
        self.config = config if isinstance(config, LedgerConfig) else load_config(config)
        self.writer = LedgerWriter(plaudit, self.config)
        #: Scheduled jobs check whether they are due and then run: two threads of one process
        #: (a write's follow-up and the server's timed pass) must not both find one due.
        self.jobs_lock = threading.RLock()
        plaudit.log.ensure_projection("ledger")

    # -- recording ------------------------------------------------------------------------
    def record(
        self,
        category: str,
        action: str,
        *,
        points: int | None = None,
        source: str | Mapping[str, str] | None = None,
        session: str | None = None,
        key: str | None = None,
        ts_ms: int | None = None,
    ) -> Transaction:
        """Record one reward or penalty. `key` makes retries idempotent."""
        raw = {
            "category": category,
            "action": action,
            "points": points,
            "source": source,
            "session": session,
            "key": key,
            "ts_ms": ts_ms,
        }
        spec = parse_spec(self.config, {k: v for k, v in raw.items() if v is not None})
        t = self.writer.commit(lambda tx, state: ([Pending(spec)], []))[0]
        self.after_write()
        return t

    def record_batch(self, items: Iterable[Mapping[str, Any]]) -> list[Transaction]:
        """Record many transactions in one atomic append: all of them, or none on any error."""
        specs = [parse_spec(self.config, raw, where=f"[{i}]") for i, raw in enumerate(items)]
        if not specs:
            return []
        pendings = [Pending(s) for s in specs]
        txs = self.writer.commit(lambda tx, state: (pendings, []))
        self.after_write()
        return txs

    # -- sessions -------------------------------------------------------------------------
    def start_session(self, session_id: str | None = None, *, label: str | None = None) -> dict:
        sid = session_id or uuid7()
        self._check_name(sid, "session")
        if label is not None:
            self._check_name(label, "label")
        # The id is derived from the session, so starting it twice is one start (or, with a
        # different label, a ConflictError) and a session never restarts after its end.
        self._append_simple(
            et.SESSION_START,
            {"session": sid, "label": label},
            session_id=sid,
            id=f"ledger-session:{sid}:start",
        )
        return self.session(sid)

    def end_session(self, session_id: str | None = None) -> dict:
        """End the given session, or the current open one."""
        with self.p.backend.read() as tx:
            state = queries.state_or_zero(tx)
            sess = queries.current_session(tx, state)
        sid = session_id or (sess["session_id"] if sess and sess["open"] else None)
        if sid is None:
            raise ValidationError("session", "no session is open; give one to end")
        info = self.session(sid)
        if not info["open"]:
            raise ValidationError("session", f"session {sid!r} has already ended")
        self._append_simple(
            et.SESSION_END, {"session": sid}, session_id=sid, id=f"ledger-session:{sid}:end"
        )
        return self.session(sid)

    def session(self, session_id: str) -> dict:
        from plaudit.errors import NotFoundError

        with self.p.backend.read() as tx:
            for s in queries.sessions(tx):
                if s["session_id"] == session_id:
                    return s
        raise NotFoundError(f"no ledger session {session_id!r}")

    def sessions(self) -> list[dict]:
        with self.p.backend.read() as tx:
            return queries.sessions(tx)

    # -- queries --------------------------------------------------------------------------
    def score(self) -> dict[str, Any]:
        """Scores and the `verified` flag the CLI, HTTP and the dashboard show: true only when
        the log verifies (`log_verified`), the checksum holds and recording is not halted."""
        outcome = integrity.log_verified(self.p)
        with self.p.backend.read() as tx:
            return queries.score(tx, self.config, outcome)

    def breakdown(self) -> dict[str, Any]:
        with self.p.backend.read() as tx:
            return queries.breakdown(tx)

    def metrics(self) -> dict[str, Any]:
        with self.p.backend.read() as tx:
            return queries.metrics(tx, queries.state_or_zero(tx), self.config)

    def learning_efficiency(self) -> float:
        return float(self.metrics()["learning_efficiency"])

    def transactions(
        self, limit: int = 10, *, category: str | None = None, session: str | None = None
    ) -> list[Transaction]:
        """Newest first by date, ties by log position: a transaction recovered or imported
        today for a record of last week is listed with last week's."""
        if type(limit) is not int or limit < 0:
            raise ValidationError("limit", "must be a non-negative integer")
        if category is not None:
            known = set(self.config.categories) | {"opening_balance", "audit_correction"}
            if category not in known:
                raise ValidationError("category", f"unknown category {category!r}")
        with self.p.backend.read() as tx:
            return queries.transactions(tx, limit=limit, category=category, session=session)

    def incidents(self, limit: int = 20) -> list[dict[str, Any]]:
        """Halts, audits and recoveries, newest first."""
        if type(limit) is not int or limit < 0:
            raise ValidationError("limit", "must be a non-negative integer")
        with self.p.backend.read() as tx:
            return queries.incidents(tx, limit)

    def checksum(self) -> Checksum:
        """The quick check every record runs: stored total vs the log since the checkpoint."""
        with self.p.backend.read() as tx:
            return quick_checksum(tx, read_state(tx))

    # -- integrity ------------------------------------------------------------------------
    def verify(self, *, full: bool = False) -> dict[str, Any]:
        """Checksum validation plus the log's cryptographic verification. With an intact chain
        the totals are recalculated from the newest checkpoint; `full=True` from the start."""
        return integrity.verify(self.p, full=full)

    def audit(
        self,
        export_dir: str | os.PathLike[str] | None = None,
        *,
        sources_dir: str | os.PathLike[str] | None = None,
    ) -> dict[str, Any]:
        """The six-step audit, including the source files (`sources_dir`, default the
        configured memory bank). It resumes recording only once nothing remains."""
        return _audit.audit(
            self.p, self.config, self.writer, export_dir=export_dir, sources_dir=sources_dir
        )

    def checkpoint(self) -> dict[str, Any]:
        """Write a hashed checkpoint now, if the stored totals pass the checksum."""
        with self.p.log.writer() as w:
            head_seq, _ = w.head()
            self.p.log.projections.ensure_named(w.tx, "ledger", head_seq)
            state = read_state(w.tx)
            chk = quick_checksum(w.tx, state)
            if state is None or not chk.is_valid or state["halted"]:
                raise IntegrityError(
                    "no checkpoint written: "
                    + (chk.reason or "the ledger is halted")
                    + ". Run `plaudit ledger recover` or `plaudit ledger audit` first."
                )
            self.writer.maybe_checkpoint(w, state, force=True)
        with self.p.backend.read() as tx:
            return {"checksum": quick_checksum(tx, read_state(tx))}

    def recover(self) -> dict[str, Any]:
        """Repair the stored totals from the log (an incident only when something was
        repaired) and lift the halt once the ledger is whole; `remaining` says what is not."""
        return _audit.recover(self.p, self.config)

    def backup(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        return _backup(self.p, path)

    def restore(self, path: str | os.PathLike[str], *, rechain: bool = False) -> dict[str, Any]:
        """Corruption: restore from a backup, recalculate, and record the incident.
        `rechain=True` takes a backup of a damaged log into an empty store with a fresh chain
        (then run `audit` there)."""
        result = _restore(self.p, path, rechain=rechain)
        check = integrity.verify(self.p, full=True, locate_on_failure=False)
        result["checksum_valid"] = check["checksum_validation"]["is_valid"]
        result["log_ok"] = check["log"]["ok"]
        with self.p.backend.read() as tx:
            state = read_state(tx)
        # A halt about the old store's log (rows edited or added behind plaudit's back) or its
        # stored totals does not hold for this store once its own log verifies and its totals
        # add up: the backup stopped at the last position plaudit wrote. A rechained log keeps
        # its halt: what was forged in it is still to be corrected by the audit.
        lifted = None
        if (
            not rechain
            and state is not None
            and state["halted"]
            and state.get("halt_kind") in _STORE_HALTS
            and check["ok"]
        ):
            lifted = state.get("halt_kind")
        events = [
            make_event(
                et.INCIDENT,
                {
                    "kind": "corruption",
                    "action": "restore --rechain" if rechain else "restore",
                    "file": Path(path).name,
                    "events": result["events"],
                    "head": result["head"],
                    **({"damage": result["damage"]} if rechain else {}),
                    **({"lifted_halt": lifted} if lifted else {}),
                },
                source="plaudit.ledger",
            )
        ]
        if lifted:
            events.append(make_event(et.RESUME, {"after": "restore"}, source="plaudit.ledger"))
        self.p.log.append_batch(events)
        with self.p.backend.read() as tx:
            state = read_state(tx)
        result["halted"] = bool(state and state["halted"])
        result["lifted_halt"] = lifted
        if result["halted"]:
            result["next"] = "run `plaudit ledger audit` in this store to correct and resume"
        return result

    # -- sources and reconciliation -------------------------------------------------------
    def import_sources(
        self, directory: str | os.PathLike[str] | SourceFiles, *, book: bool = True
    ) -> SourceImport:
        """New and changed records become events; records a re-read file no longer holds are
        marked deleted; the triggers of seed 003's cross-file table are booked (`book=False`:
        the records only). `directory` may be `read_source_files(...)`'s answer, read before a
        store was opened."""
        out = _reconcile.import_sources(self.p, self.config, self.writer, directory, book=book)
        if out.booked:
            self.after_write()
        return out

    def reconcile(self, *, sources_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Ledger sums per source record against what each record declares (or its trigger
        owes). A mismatch opens an incident and halts recording (`on_mismatch = "halt"`, the
        default) or only warns; a clean result lifts a reconciliation halt."""
        return _reconcile.reconcile(self.p, self.config, self.writer, sources_dir=sources_dir)

    def maybe_reconcile(self, *, now: int | None = None) -> dict[str, Any] | None:
        """Reconcile when the configured count or time has passed since the last time."""
        sch = self.config.schedule
        with self.p.backend.read() as tx:
            state = read_state(tx)
        if state is None or not scheduler.reconcile_due(
            state,
            now or now_ms(),
            every_tx=sch.reconcile_every,
            every_ms=sch.reconcile_seconds * 1000,
        ):
            return None
        return self.reconcile()

    def recover_missing(self) -> dict[str, Any]:
        """Missing transactions: a recovery transaction for each record the ledger holds too
        little for, under the record's own category and date; then reconcile again."""
        out = _reconcile.recover_missing(self.p, self.config, self.writer)
        out["reconcile"] = self.reconcile()
        return out

    def correct(self) -> dict[str, Any]:
        """Reverse what the ledger holds in excess of a record's declaration, or for a
        deleted record, with audit corrections; then reconcile again."""
        out = _reconcile.correct_excess(self.p, self.config, self.writer)
        out["reconcile"] = self.reconcile()
        return out

    # -- automatic work -------------------------------------------------------------------
    def after_write(self) -> dict[str, Any]:
        """The automatic work due after a write (reconcile, backup, reports): run by every
        library method that records transactions, so every surface applies it."""
        return scheduler.after_write(self)

    def run_scheduled(self, *, now: int | None = None) -> dict[str, Any]:
        """Everything due now, the weekly audit included (`plaudit ledger watch`)."""
        return scheduler.run_due(self, now=now)

    # -- interop, reports, rules ----------------------------------------------------------
    def export_progress(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        return export_progress(self.p, self.config, path)

    def progress(self) -> dict[str, Any]:
        """The progress.json document, without writing it."""
        return build_progress(self.p, self.config)

    def import_progress(
        self, path: str | os.PathLike[str] | ProgressFile, *, accept_inconsistent: bool = False
    ) -> dict[str, Any]:
        """Idempotent: re-importing a file, or this ledger's own export, changes nothing. An
        inconsistent file is refused (naming the JSON path of its first inconsistency) unless
        `accept_inconsistent`, which imports it and records an incident."""
        out = import_progress(
            self.p, self.config, self.writer, path, accept_inconsistent=accept_inconsistent
        )
        self.after_write()
        return out

    def report(self, period: str = "daily", day: date | None = None) -> dict[str, Any]:
        if period not in reports.PERIODS:
            raise ValidationError(
                "period", f"{period!r} is not one of {', '.join(reports.PERIODS)}"
            )
        with self.p.backend.read() as tx:
            return reports.build_report(tx, period, day or date.today())

    def report_markdown(self, period: str = "daily", day: date | None = None) -> str:
        return reports.to_markdown(self.report(period, day))

    def apply_rules(self, *, limit: int | None = None) -> dict[str, Any]:
        """Turn matching events after the rules cursor into transactions (idempotent)."""
        info: dict[str, Any] = {}

        def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
            head, _ = LogView(tx).head()
            pendings, extras, meta = build_rules(self.config, tx, head, limit)
            info.update(meta)
            return pendings, extras

        txs = self.writer.commit(build)
        self.after_write()
        info["created"] = sum(t.status == "appended" for t in txs)
        info["already_present"] = sum(t.status == "present" for t in txs)
        return info

    # -- helpers --------------------------------------------------------------------------
    @staticmethod
    def _check_name(value: Any, field: str) -> None:
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_LEN:
            raise ValidationError(field, f"must be a string of 1 to {MAX_NAME_LEN} characters")

    def _append_simple(
        self,
        event_type: str,
        payload: dict[str, Any],
        *,
        session_id: str = "default",
        id: str | None = None,
    ) -> None:
        self.p.log.append(
            make_event(event_type, payload, id=id, session_id=session_id, source="plaudit.ledger")
        )
