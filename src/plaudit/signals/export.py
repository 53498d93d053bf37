"""Export: collect, join, deduplicate, split, write, summarise; all or nothing on disk.

Files are written into a temporary directory inside the output directory, fsynced, then moved
into place with `os.replace`, `summary.json` last. A failed or killed export therefore leaves the
previous outputs as they were (at worst a stale `.plaudit-export-*` directory, which the next
export removes).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.seqmem import REPEAT
from plaudit.signals.contract import PREFIX
from plaudit.signals.formats import FORMATS, RowWriter, open_writer
from plaudit.signals.join import REWARDS, Collected, Collector, Progress, joined_rows
from plaudit.signals.scan import scan_file
from plaudit.signals.split import SPLITS, bucket, clamp_percents

if TYPE_CHECKING:
    from plaudit.core import Plaudit

SCHEMA_VERSION = "flow_router_signal_export_v1"
TMP_PREFIX = ".plaudit-export-"


def check_options(
    *,
    split_by: str,
    formats: Sequence[str],
    rewards: Mapping[str, Any] | None,
    history_size: int,
    max_age_hours: int,
    seed: int,
) -> dict[str, float]:
    """Validate export options; returns the effective reward map."""
    if isinstance(formats, str):
        raise ValidationError("format", f"must be a list of formats, e.g. [{formats!r}]")
    if split_by not in ("decision", "session"):
        raise ValidationError("split_by", f"{split_by!r} is not 'decision' or 'session'")
    if not formats:
        raise ValidationError("format", "at least one format is needed")
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValidationError("format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    for name, value in (("history_size", history_size), ("max_age_hours", max_age_hours)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(name, f"must be an integer, got {type(value).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError("seed", f"must be an integer, got {type(seed).__name__}")
    merged = dict(REWARDS)
    for key, value in (rewards or {}).items():
        if key not in REWARDS:
            raise ValidationError(
                f"rewards.{key}", f"unknown outcome (known: {', '.join(REWARDS)})"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(f"rewards.{key}", f"must be a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise ValidationError(f"rewards.{key}", "must be a finite number")
        merged[key] = float(value)
    return merged


def check_export_options(
    *,
    split_by: str,
    formats: Sequence[str],
    rewards: Mapping[str, Any] | None,
    history_size: int,
    max_age_hours: int,
    seed: int,
    val_percent: int,
    test_percent: int,
) -> tuple[dict[str, float], int, int]:
    """Validate every export option (before a store is opened, so a bad option is reported
    as itself); returns the reward map and the clamped val and test percentages."""
    reward_map = check_options(
        split_by=split_by,
        formats=formats,
        rewards=rewards,
        history_size=history_size,
        max_age_hours=max_age_hours,
        seed=seed,
    )
    for name, value in (("val_percent", val_percent), ("test_percent", test_percent)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(name, f"must be an integer, got {type(value).__name__}")
    val_pct, test_pct = clamp_percents(val_percent, test_percent)
    if val_pct + test_pct >= 100:
        raise ValidationError(
            "val_percent",
            f"val {val_pct}% + test {test_pct}% leave no rows for train; keep their sum under 100",
        )
    return reward_map, val_pct, test_pct


def _check_path(field: str, value: str | os.PathLike[str]) -> Path:
    text = os.fspath(value)
    if not text or "\x00" in text:
        raise ValidationError(field, "must be a non-empty path without NUL characters")
    return Path(text).expanduser().resolve()


def _check_reuse_from(
    value: str | os.PathLike[str], *, seq_path: Path | None, out_root: Path | None
) -> Path:
    """The directory an export may copy unchanged rows from: an existing directory, for an
    export from the log that writes files."""
    reuse_dir = _check_path("reuse_from", value)
    if seq_path is not None:
        raise ValidationError("reuse_from", "applies to exports from the log, not --seq-mem")
    if out_root is None:
        raise ValidationError("reuse_from", "applies only to an export that writes files")
    if not reuse_dir.is_dir():
        raise ValidationError("reuse_from", f"{str(reuse_dir)!r} is not a directory")
    return reuse_dir


def _clean_stale(out_root: Path) -> None:
    for entry in out_root.glob(f"{TMP_PREFIX}*"):
        pid = entry.name[len(TMP_PREFIX) :].split("-", 1)[0]
        try:
            os.kill(int(pid), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(entry, ignore_errors=True)
        except PermissionError:
            pass


class _Outputs:
    """Writers for every (format, split), in a temp dir until `commit`."""

    def __init__(self, out_root: Path, formats: Sequence[str]) -> None:
        self.out_root = out_root
        self.formats = list(dict.fromkeys(formats))
        #: Set when the rows were written hour by hour (`plaudit.signals.reuse`).
        self.by_hour: Any = None
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", dir=out_root))
        self.writers: dict[str, list[RowWriter]] = {s: [] for s in SPLITS}
        for split in SPLITS:
            for fmt in self.formats:
                self.writers[split].append(open_writer(fmt, self.tmp, split))

    def close(self, summary_bytes: bytes) -> None:
        """Finish every file and write `summary.json` beside them, all fsynced. The files are
        synced at once, in threads: the disk then commits them together, where one after the
        other each waits for its own journal commit."""
        summary_tmp = self.tmp / "summary.json"

        def summary() -> None:
            with open(summary_tmp, "wb") as f:
                f.write(summary_bytes)
                f.flush()
                os.fsync(f.fileno())

        _together([summary, *(w.close for ws in self.writers.values() for w in ws)])

    def final(self, tmp_path: Path) -> Path:
        return self.out_root / tmp_path.name

    def outputs(self) -> dict[str, Any]:
        # train/val/test name the first format's files, as the reference's keys do.
        out: dict[str, Any] = {s: str(self.final(self.writers[s][0].path)) for s in SPLITS}
        out["summary"] = str(self.out_root / "summary.json")
        out["files"] = {
            fmt: {s: str(self.final(self.writers[s][i].path)) for s in SPLITS}
            for i, fmt in enumerate(self.formats)
        }
        return out

    def commit(self) -> None:
        """Move every file (written by `close`) into place, `summary.json` last, holding the
        output directory's lock, so concurrent exports to one directory take turns instead of
        mixing their files. If a move fails, the files it replaced are put back: what is left
        is the previous export, whole. (Only a kill in the middle of these renames can leave a
        mix.)"""
        summary_tmp = self.tmp / "summary.json"
        moves = [(w.path, self.final(w.path)) for ws in self.writers.values() for w in ws]
        moves.append((summary_tmp, self.out_root / "summary.json"))
        previous = self.tmp / "previous"
        previous.mkdir()
        with _locked(self.out_root):
            for _, final in moves:
                if final.is_dir() and not final.is_symlink():
                    raise ValidationError(
                        "output_dir", f"{str(final)!r} is a directory where an output file goes"
                    )
            done: list[tuple[Path, Path | None]] = []
            try:
                for src, final in moves:
                    saved = None
                    if final.exists() or final.is_symlink():
                        saved = previous / final.name
                        os.replace(final, saved)
                    done.append((final, saved))
                    os.replace(src, final)
            except OSError:
                for final, saved in reversed(done):
                    with contextlib.suppress(OSError):
                        if saved is not None:
                            os.replace(saved, final)
                        else:
                            os.remove(final)
                raise
            _fsync_dir(self.out_root)
            if self.by_hour is not None:  # which files these are, before another export's
                self.by_hour.placed()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self) -> None:
        for ws in self.writers.values():
            for w in ws:
                with contextlib.suppress(Exception):  # best effort while failing anyway
                    w.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _together(calls: Sequence[Callable[[], None]]) -> None:
    """Run `calls` at once (all but the first in threads); raise the first one's error."""
    errors: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls[1:]]
    for t in threads:
        t.start()
    run(calls[0])
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive `flock` on the directory itself: no lock file is left behind."""
    import fcntl

    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def collect_seq_mem(
    path: Path,
    *,
    now_ms: int,
    max_age_hours: int,
    seed: int = 42,
    progress: Progress | None,
    parallel: bool | None = None,
) -> Collector:
    col = Collector(now_ms=now_ms, max_age_hours=max_age_hours, seed=seed)
    where = str(path)
    try:
        size = path.stat().st_size
        scans = scan_file(
            where,
            size,
            now_ms=now_ms,
            max_age_ms=col.max_age_ms,
            seed=seed,
            progress=None if progress is None else _bytes_progress(progress, size),
            parallel=parallel,
        )
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValidationError("seq_mem", f"cannot read {where!r}: {reason}") from None
    col.fold(scans, where=where)
    if progress is not None:
        progress("reading", size, size)
    return col


def _bytes_progress(progress: Progress, total: int) -> Progress:
    def report(phase: str, done: int, _: int | None) -> None:
        progress(phase, min(done, total), total)

    return report


def collect_log(
    plaudit: Plaudit,
    *,
    now_ms: int,
    max_age_hours: int,
    seed: int = 42,
    progress: Progress | None,
) -> Collector:
    """Read every router event of the log (what the projection saves an export from, and
    what it is checked against)."""
    col = Collector(now_ms=now_ms, max_age_hours=max_age_hours, seed=seed)
    # Raw columns in log order, without building an event object per row.
    with plaudit.log.reading() as view:
        rows = view.scan_columns(
            ("seq", "type", "ts_ms", "session_id", "payload"), types=[PREFIX, REPEAT]
        )
        col.feed_rows(_unwrap_repeats(rows), progress=progress)
    return col


def _unwrap_repeats(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The log's router events, each repeat record (kept by `plaudit log import` for an exact
    repeat of a line) as the event it repeats, where it stood: the lines the file held."""
    from plaudit.signals.projection import repeated_router_event

    for row in rows:
        if row[1] != REPEAT:
            yield row
            continue
        kind, payload = repeated_router_event(msgspec.json.decode(row[4]))
        if kind is not None:
            yield row[0], kind, row[2], row[3], msgspec.json.encode(payload)


class _FromCollector:
    """A collected file (or a full read of the log) as an export source."""

    def __init__(self, collected: Collected) -> None:
        self.collected = collected
        self.counts = collected.counts
        self.conflicts = collected.conflicts
        self.errors = collected.errors

    def rows(
        self,
        *,
        seed: int,
        history_size: int,
        rewards: dict[str, float],
        progress: Progress | None,
        full: bool,
    ) -> Iterator[tuple[str, str, str, str, int, bytes | None]]:
        del seed  # buckets were computed with it while reading
        return joined_rows(
            self.collected,
            history_size=history_size,
            rewards=rewards,
            progress=progress,
            full=full,
        )


@contextlib.contextmanager
def _source(
    plaudit: Plaudit | None,
    seq_path: Path | None,
    *,
    now: int,
    max_age_hours: int,
    seed: int,
    progress: Progress | None,
    parallel: bool | None,
    use_projection: bool,
) -> Iterator[Any]:
    """What the export reads: a seq_mem file, else the log's `signals` projection (in one
    read transaction), else, when the age window splits some id's events, the whole log."""
    if seq_path is not None:
        col = collect_seq_mem(
            seq_path,
            now_ms=now,
            max_age_hours=max_age_hours,
            seed=seed,
            progress=progress,
            parallel=parallel,
        )
        yield _FromCollector(col.out)
        return
    assert plaudit is not None
    if use_projection:
        from plaudit.signals.logrows import read
        from plaudit.signals.projection import NAME

        plaudit.log.ensure_projection(NAME)
        with plaudit.log.reading() as view:
            src = read(view.tx, now_ms=now, max_age_hours=max_age_hours)
            if src is not None:
                yield src
                return
    col = collect_log(
        plaudit, now_ms=now, max_age_hours=max_age_hours, seed=seed, progress=progress
    )
    yield _FromCollector(col.out)


@contextlib.contextmanager
def joined_lines(
    plaudit: Plaudit | None,
    seq_path: Path | None,
    *,
    now: int,
    max_age_hours: int,
    rewards: dict[str, float],
    progress: Progress | None,
) -> Iterator[tuple[Any, Iterator[tuple[str, str, str, str, int, bytes | None]]]]:
    """(source, rows): the joined rows with their lines, for the default seed and history,
    as `signal evaluate`, `learn` and `compare` read them; the source's counts are final once
    the rows are exhausted."""
    with _source(
        plaudit,
        seq_path,
        now=now,
        max_age_hours=max_age_hours,
        seed=42,
        progress=progress,
        parallel=None,
        use_projection=True,
    ) as source:
        yield (
            source,
            source.rows(seed=42, history_size=3, rewards=rewards, progress=progress, full=True),
        )


def export(
    *,
    plaudit: Plaudit | None = None,
    seq_mem: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] | None,
    seed: int = 42,
    val_percent: int = 10,
    test_percent: int = 10,
    history_size: int = 3,
    max_age_hours: int = 168,
    split_by: str = "decision",
    formats: Sequence[str] = ("jsonl",),
    rewards: Mapping[str, Any] | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
    parallel: bool | None = None,
    use_projection: bool = True,
    allow_unverified: bool = False,
    verify_full: bool = False,
    reuse_from: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Export from `seq_mem` when given, else from the log; returns the summary.

    Files are only written from a log that verifies (see `plaudit.signals.verified`); one that
    does not is refused unless `allow_unverified`, and the summary's `input.verified` says so.
    What was appended since the last verified export is checked, or, with `verify_full`, the
    whole chain.

    With `output_dir=None` nothing is written (the summary alone, e.g. for quality gates).
    `parallel=True` reads a seq_mem file in two halves, one in a forked worker process; None
    (the default) does so for a file of 32 MiB or more, from a single-threaded process, when
    PLAUDIT_EXPORT_JOBS=2, or when it is unset (or `auto`) and the load average shows an idle
    core; PLAUDIT_EXPORT_JOBS=1 keeps it in one process.

    `reuse_from`: an earlier export's directory (from this log) to copy unchanged rows from,
    as a re-export into its own directory does (`plaudit.signals.reuse`); it is only read.
    Where its files cannot be used, every row is built; `input.reuse` in the summary says
    how many hours were copied.
    """
    reward_map, val_pct, test_pct = check_export_options(
        split_by=split_by,
        formats=formats,
        rewards=rewards,
        history_size=history_size,
        max_age_hours=max_age_hours,
        seed=seed,
        val_percent=val_percent,
        test_percent=test_percent,
    )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    out_root = _check_path("output_dir", output_dir) if output_dir is not None else None
    seq_path = _check_path("seq_mem", seq_mem) if seq_mem is not None else None
    if seq_path is None and plaudit is None:
        raise ValidationError("seq_mem", "give a seq_mem file or an open store to export from")
    reuse_dir = None
    if reuse_from is not None:
        reuse_dir = _check_reuse_from(reuse_from, seq_path=seq_path, out_root=out_root)

    # The export builds hundreds of thousands of small acyclic objects; the cyclic collector
    # would rescan them all again and again (it doubled the run time) and can free nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _export(
            plaudit,
            seq_path,
            out_root,
            now=now,
            seed=seed,
            val_pct=val_pct,
            test_pct=test_pct,
            history_size=history_size,
            max_age_hours=max_age_hours,
            split_by=split_by,
            formats=formats,
            reward_map=reward_map,
            progress=progress,
            parallel=parallel,
            use_projection=use_projection,
            allow_unverified=allow_unverified,
            verify_full=verify_full,
            reuse_dir=reuse_dir,
        )
    finally:
        if gc_was_enabled:
            gc.enable()


def _export(
    plaudit: Plaudit | None,
    seq_path: Path | None,
    out_root: Path | None,
    *,
    now: int,
    seed: int,
    val_pct: int,
    test_pct: int,
    history_size: int,
    max_age_hours: int,
    split_by: str,
    formats: Sequence[str],
    reward_map: dict[str, float],
    progress: Progress | None,
    parallel: bool | None,
    use_projection: bool,
    allow_unverified: bool,
    verify_full: bool,
    reuse_dir: Path | None,
) -> dict[str, Any]:
    verified = None
    if seq_path is None and out_root is not None and plaudit is not None:
        from plaudit.signals.verified import require_verified

        verified = require_verified(plaudit, allow_unverified=allow_unverified, full=verify_full)
    with _source(
        plaudit,
        seq_path,
        now=now,
        max_age_hours=max_age_hours,
        seed=seed,
        progress=progress,
        parallel=parallel,
        use_projection=use_projection,
    ) as source:
        outputs: _Outputs | None = None
        if out_root is not None:
            try:
                out_root.mkdir(parents=True, exist_ok=True)
                _clean_stale(out_root)
                outputs = _Outputs(out_root, formats)
            except OSError as exc:
                raise ValidationError(
                    "output_dir", f"cannot write to {str(out_root)!r}: {exc.strerror or exc}"
                ) from None
        try:
            summary = _run(
                source,
                outputs,
                seed=seed,
                val_pct=val_pct,
                test_pct=test_pct,
                history_size=history_size,
                split_by=split_by,
                rewards=reward_map,
                progress=progress,
                reuse_dir=reuse_dir,
            )
            summary["generated_at_ms"] = now
            summary["input"] = {
                "seq_mem": str(seq_path) if seq_path is not None else None,
                "max_age_hours": max_age_hours,
                "seed": seed,
                "val_percent": val_pct,
                "test_percent": test_pct,
                "history_size": history_size,
                "source": "seq_mem" if seq_path is not None else "log",
                "db": None
                if seq_path is not None or plaudit is None
                else plaudit.backend.describe(),
                "split_by": split_by,
                "formats": list(dict.fromkeys(formats)),
                "rewards": reward_map,
                "window_start_ms": max(1, now - max(1, max_age_hours) * 3_600_000),
                "verified": verified,
            }
            if reuse_dir is not None:
                by_hour = outputs.by_hour if outputs is not None else None
                hourly = by_hour is not None and by_hour.opened  # else every row was built
                summary["input"]["reuse"] = {
                    "from": str(reuse_dir),
                    "copied_hours": by_hour.copied_hours if hourly else 0,
                    "built_hours": by_hour.built_hours if hourly else None,
                }
            summary = _ordered(summary)
            if outputs is not None:
                import json

                summary["outputs"] = outputs.outputs()
                outputs.close((json.dumps(summary, indent=2) + "\n").encode())
                outputs.commit()
            else:
                summary["outputs"] = {}
        except BaseException as exc:
            if outputs is not None:
                if outputs.by_hour is not None:
                    outputs.by_hour.close()
                outputs.abort()
            if isinstance(exc, OSError):
                where = f" ({exc.filename})" if exc.filename else ""
                raise ValidationError(
                    "output_dir", f"writing the export failed: {exc.strerror or exc}{where}"
                ) from None
            raise
    # Once the read is over: what the files now in place hold, for the next export there.
    if outputs is not None and outputs.by_hour is not None and outputs.by_hour.opened:
        assert plaudit is not None
        outputs.by_hour.save(plaudit)
    return summary


def _ordered(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("schema_version", "generated_at_ms", "input", "counts", "quality", "distributions")
    out = {k: summary[k] for k in keys if k in summary}
    out.update({k: v for k, v in summary.items() if k not in out})
    return out


def _run(
    source: Any,
    outputs: _Outputs | None,
    *,
    seed: int,
    val_pct: int,
    test_pct: int,
    history_size: int,
    split_by: str,
    rewards: dict[str, float],
    progress: Progress | None,
    reuse_dir: Path | None = None,
) -> dict[str, Any]:
    # bucket -> split index (0 train, 1 val, 2 test), the reference's rule, as a table
    split_of = [2] * test_pct + [1] * val_pct + [0] * (100 - test_pct - val_pct)
    by_hour = None
    raw: list[list[RowWriter]] = [[], [], []]
    parsed: list[list[RowWriter]] = [[], [], []]
    if outputs is not None:
        for i, name in enumerate(SPLITS):
            for w in outputs.writers[name]:
                (raw if w.raw_lines else parsed)[i].append(w)
    # The usual case, one JSONL file per split, is one bound call per row.
    direct = [
        ws[0].write_line if len(ws) == 1 and not p else None
        for ws, p in zip(raw, parsed, strict=True)
    ]
    stored = getattr(source, "stored", None)
    defaults = (
        seed == 42
        and split_by == "decision"
        and history_size == 3
        and rewards == REWARDS
        and (outputs is None or all(d is not None for d in direct))
    )
    if stored is not None and defaults:
        many = [ws[0].write_pieces for ws in raw if ws]
        write = None if outputs is None else lambda split, pieces, n: many[split](pieces, n)
        if outputs is not None:
            from plaudit.signals.reuse import HourWriter

            by_hour = outputs.by_hour = HourWriter(
                [ws[0] for ws in raw],
                [str(outputs.final(ws[0].path)) for ws in raw],
                str(outputs.out_root),
                f"{test_pct}/{val_pct}",
                reuse_from=None if reuse_dir is None else str(reuse_dir),
            )
        tallies = stored(split_of, write, by_hour)
        if tallies is not None:
            return _summary(
                source,
                tallies.tasks,
                tallies.outcomes,
                tallies.splits,
                tallies.sessions,
                tallies.leaking,
            )
    rows = source.rows(
        seed=seed,
        history_size=history_size,
        rewards=rewards,
        progress=progress,
        full=outputs is not None,
    )
    by_session = split_by == "session"
    session_bucket: dict[str, int] = {}  # sessions repeat: bucket each once
    tally = RowTally()
    sessions, tasks, outcomes, splits = tally.sessions, tally.tasks, tally.outcomes, tally.splits
    decode = msgspec.json.decode
    for _, session, chosen, outcome, row_bucket, line in rows:
        if by_session and session:
            b = session_bucket.get(session)
            if b is None:
                b = session_bucket[session] = bucket(session, seed)
            split = split_of[b]
        else:
            split = split_of[row_bucket]
        sessions.append(session)
        tasks.append(chosen)
        outcomes.append(outcome)
        splits.append(split)
        if line is None:
            continue
        write = direct[split]
        if write is not None:
            write(line)
            continue
        for w in raw[split]:
            w.write_line(line)
        if parsed[split]:
            row = decode(line)
            for w in parsed[split]:
                w.write(row)
    del sessions, tasks, outcomes, splits
    return tally.summary(source)


class RowTally:
    """What the summary counts of the exported rows: per row, kept in flat lists and tallied
    at the end by C code (Counter, set)."""

    def __init__(self) -> None:
        self.sessions: list[str] = []
        self.tasks: list[str] = []
        self.outcomes: list[str] = []
        self.splits: list[int] = []

    def summary(self, source: Any) -> dict[str, Any]:
        """The summary of `source` (its counts are final once its rows were read)."""
        outcome_counts = Counter([o or "unknown" for o in self.outcomes])
        task_counts = Counter([t or "unknown" for t in self.tasks])
        per_split = Counter(self.splits)
        # How many splits each session's rows went to: more than one is leakage.
        pairs = set(zip(self.sessions, self.splits, strict=True))
        session_splits = Counter([s for s, _ in pairs if s])
        leaking = sum(1 for n in session_splits.values() if n > 1)
        return _summary(
            source,
            dict(task_counts),
            dict(outcome_counts),
            [per_split[i] for i in range(3)],
            len(session_splits),
            leaking,
        )


def _summary(
    source: Any,
    task_counts: dict[str, int],
    outcome_counts: dict[str, int],
    split_rows: list[int],
    sessions: int,
    leaking: int,
) -> dict[str, Any]:
    counts = source.counts
    counts.train_rows, counts.val_rows, counts.test_rows = split_rows
    joined = counts.joined_rows
    seen = counts.decisions + counts.duplicate_decision_ids
    return {
        "schema_version": SCHEMA_VERSION,
        "counts": counts.to_dict(),
        "quality": {
            "decision_outcome_link_rate": round(joined / max(1, counts.decisions), 6),
            "override_rate": round(counts.overrides / max(1, joined), 6),
            "task_dominance": round(
                (max(task_counts.values()) / max(1, joined)) if task_counts else 0.0, 6
            ),
            "duplicate_rate": round(
                (counts.duplicate_decision_ids + counts.dropped_duplicate_rows) / max(1, seen), 6
            ),
            "sessions": sessions,
            "split_leakage_sessions": leaking,
            "split_leakage_rate": round(leaking / max(1, sessions), 6),
        },
        "distributions": {"outcomes": outcome_counts, "chosen_tasks": task_counts},
        "conflicts": list(source.conflicts),
        "parse_error_samples": list(source.errors),
    }
