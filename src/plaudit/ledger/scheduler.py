"""Automatic work (seed 003): reconcile every N transactions or hourly, back up every N
transactions into a rotated folder, write the daily/weekly/monthly compliance reports once
their period has closed, and audit weekly.

`after_write` runs inside the library after every write that records transactions, so the
library, the CLI and HTTP all apply the count-based jobs; `run_due` is the timed pass that
`plaudit ledger watch` and `plaudit serve` run (every minute by default), so the hourly and
calendar jobs happen without traffic too. Each job appends a `plaudit.ledger.job.v1` event,
so "when did it last run" survives restarts and is the same for every process.
"""

from __future__ import annotations

import logging
import re
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plaudit.errors import PlauditError
from plaudit.events import make_event
from plaudit.ids import now_ms
from plaudit.ledger import eventtypes as et
from plaudit.ledger.projection import read_state

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.ledger.api import Ledger

log = logging.getLogger("plaudit.ledger")
BACKUP_NAME = re.compile(r"^ledger-backup-\d{8}T\d{6}\d{3}Z-\d+\.jsonl$")
DAY_MS = 86_400_000


def reconcile_due(state: dict[str, Any], now: int, *, every_tx: int, every_ms: int) -> bool:
    count = int(state["tx_count"])
    if every_tx and count - int(state["last_reconcile_count"] or 0) >= every_tx:
        return True
    last = state.get("last_reconcile_ms")
    return bool(every_ms) and count > 0 and (last is None or now - int(last) >= every_ms)


def _jobs(p: Plaudit) -> dict[str, tuple[int, int, str | None]]:
    with p.backend.read() as tx:
        return {
            j: (int(ms), int(n), k)
            for j, ms, n, k in tx.fetchall(
                "SELECT job, last_ms, last_count, last_key FROM ledger_jobs"
            )
        }


def _mark(p: Plaudit, job: str, count: int, key: str | None) -> None:
    p.log.append(
        make_event(et.JOB, {"job": job, "tx_count": count, "key": key}, source="plaudit.ledger")
    )


def backup_due(lg: Ledger, state: dict[str, Any], jobs: dict[str, Any]) -> bool:
    sch = lg.config.schedule
    if sch.backup_dir is None or int(state["tx_count"]) == 0:
        return False
    last = jobs.get("backup", (0, 0, None))[1]
    return int(state["tx_count"]) - last >= sch.backup_every


def run_backup(lg: Ledger, state: dict[str, Any]) -> dict[str, Any]:
    """A full backup into the configured folder; only files named as plaudit names its
    backups there are rotated away (never anything else in the folder)."""
    sch = lg.config.schedule
    assert sch.backup_dir is not None
    folder = Path(sch.backup_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")[:-3] + "Z"
    head = lg.p.log.head().length
    result = lg.backup(folder / f"ledger-backup-{stamp}-{head}.jsonl")
    ours = sorted(f for f in folder.iterdir() if f.is_file() and BACKUP_NAME.match(f.name))
    removed = []
    for old in ours[: max(0, len(ours) - sch.backup_keep)]:
        old.unlink(missing_ok=True)
        removed.append(old.name)
    _mark(lg.p, "backup", int(state["tx_count"]), Path(result["file"]).name)
    return {**result, "rotated_out": removed}


def closed_periods(today: date) -> dict[str, date]:
    """A day inside the most recent closed day, ISO week and month."""
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    return {
        "daily": today - timedelta(days=1),
        "weekly": monday - timedelta(days=7),
        "monthly": first - timedelta(days=1),
    }


def run_reports(lg: Ledger, jobs: dict[str, Any], today: date) -> list[str]:
    """Write each configured period's report once, after the period has closed."""
    sch = lg.config.schedule
    if sch.reports_dir is None:
        return []
    from plaudit.ledger.reports import period_bounds, to_markdown

    written = []
    folder = Path(sch.reports_dir)
    for period, day in closed_periods(today).items():
        if period not in sch.report_periods:
            continue
        start, _ = period_bounds(period, day)
        key = start.date().isoformat()
        if jobs.get(f"report:{period}", (0, 0, None))[2] == key:
            continue
        report = lg.report(period, day)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"ledger-{period}-{key}.md"
        from plaudit.files import atomic_write

        text = to_markdown(report).encode()
        atomic_write(folder / name, lambda f, t=text: f.write(t))
        _mark(lg.p, f"report:{period}", report["transactions"], key)
        written.append(name)
    return written


def audit_due(lg: Ledger, jobs: dict[str, Any], now: int) -> bool:
    days = lg.config.schedule.audit_days
    if not days:
        return False
    with lg.p.backend.read() as tx:
        first = tx.scalar("SELECT MIN(ts_ms) FROM ledger_tx")
        last_audit = tx.scalar("SELECT MAX(ts_ms) FROM ledger_incidents WHERE kind = 'audit'")
    scheduled = jobs.get("audit", (0, 0, None))[2]  # the clock the last scheduled one ran by
    known = [int(v) for v in (last_audit, scheduled) if v is not None and str(v).isdigit()]
    since = max(known) if known else first
    return since is not None and now - int(since) >= days * DAY_MS


def after_write(lg: Ledger, *, now: int | None = None) -> dict[str, Any]:
    """The count-based jobs (and the hourly reconcile when it is due), after a write. A job
    that fails is logged: the write it follows is already committed."""
    with lg.jobs_lock:
        return _after_write(lg, now or now_ms())


def _after_write(lg: Ledger, now: int) -> dict[str, Any]:
    done: dict[str, Any] = {}
    sch = lg.config.schedule
    try:
        with lg.p.backend.read() as tx:
            state = read_state(tx)
        if state is None:
            return done
        if reconcile_due(
            state, now, every_tx=sch.reconcile_every, every_ms=sch.reconcile_seconds * 1000
        ):
            r = lg.reconcile()
            done["reconcile"] = {"ok": r["ok"], "halted": r["halted"]}
            if not r["ok"]:
                log.warning(
                    "ledger reconciliation found %d mismatches (%s)",
                    len(r["mismatches"]) + len(r["orphans"]),
                    "recording halted" if r["halted"] else "warn mode",
                )
        if sch.backup_dir is not None or sch.reports_dir is not None:
            jobs = _jobs(lg.p)
            if backup_due(lg, state, jobs):
                done["backup"] = run_backup(lg, state)["file"]
            reports = run_reports(lg, jobs, datetime.fromtimestamp(now / 1000, UTC).date())
            if reports:
                done["reports"] = reports
    except (PlauditError, OSError) as exc:
        log.warning("ledger scheduled work after a write failed: %s", exc)
        done["error"] = str(exc)
    return done


def run_due(lg: Ledger, *, now: int | None = None) -> dict[str, Any]:
    """The timed pass: everything `after_write` does, plus the weekly audit."""
    now = now or now_ms()
    done = after_write(lg, now=now)
    try:
        if audit_due(lg, _jobs(lg.p), now):  # only the timed pass audits: no second caller
            r = lg.audit(lg.config.schedule.audit_dir)
            _mark(lg.p, "audit", 0, str(now))
            done["audit"] = {"audit": r["audit"], "halted": r["halted"]}
    except (PlauditError, OSError) as exc:
        log.warning("ledger weekly audit failed: %s", exc)
        done["error"] = str(exc)
    return done


def start_scheduler_thread(
    p: Plaudit, *, interval_s: float = 60.0, stop: threading.Event | None = None
) -> tuple[threading.Thread, threading.Event]:
    """A daemon thread running `run_due` every `interval_s` (what `plaudit serve` starts)."""
    stop = stop or threading.Event()

    def run() -> None:
        while not stop.wait(interval_s):
            try:
                run_due(p.ledger)
            except Exception:  # a database hiccup must not end the schedule for good
                log.exception("ledger scheduled work failed unexpectedly")

    t = threading.Thread(target=run, name="plaudit-ledger-schedule", daemon=True)
    t.start()
    return t, stop


#: The name earlier releases exported.
start_reconcile_thread = start_scheduler_thread
