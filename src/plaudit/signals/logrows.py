"""Export rows read from the `signals` projection: the cost of the rows written, not the log.

The projection holds every decision's finished parts (see `plaudit.signals.projection`); this
module applies the export's options on the way out, in one read transaction:

* the age window, as a range on timestamps (exact when no id has events on both sides of the
  window's start; `read` returns None otherwise, and the caller reads the whole log);
* counts, as a few aggregate queries over the projection's tables;
* rows, streamed in export order (timestamp, then first-seen position), deduplicated by their
  stored digest, with history, reward, bucket and propensity filled in per row.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.signals.join import (
    END_FORMAT,
    REWARDS,
    Counts,
    Progress,
    encode_tail,
    row_digest,
)
from plaudit.signals.projection import (
    BY_OVERRIDE,
    HISTORY,
    HOUR_MS,
    NOT_OVERRIDDEN,
    SEED,
    encode_history,
)
from plaudit.signals.scan import bucket
from plaudit.store.backend import Tx

if TYPE_CHECKING:
    from plaudit.signals.reuse import HourWriter

MAX_SAMPLES = 20
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode
_TABLES = ("signals_decisions", "signals_outcomes", "signals_overrides")

Row = tuple[str, str, str, str, int, bytes | None]


class FromProjection:
    """The export's input from the projection: counts, conflicts, samples and rows."""

    def __init__(self, counts: Counts, conflicts: list[str], errors: list[str]) -> None:
        self.counts = counts
        self.conflicts = conflicts
        self.errors = errors
        self.rows: Callable[..., Iterator[Row]] = lambda **_: iter(())
        #: The export with default options from the stored lines (None when they do not fit).
        self.stored: Callable[..., Tallies | None] = lambda *_: None


def cutoff(now_ms: int, max_age_hours: int) -> int:
    """The oldest timestamp the window keeps (the reference keeps `now - ts <= max_age`, and
    never ts <= 0)."""
    return max(1, now_ms - max(1, max_age_hours) * 3600 * 1000)


def whole_log_totals(tx: Tx, start: int) -> dict[str, tuple[int, ...]] | None:
    """The three tables' counts as `read` sums them, from the projection's totals
    (`signals_hours`), when the window holds every event the tables folded (None otherwise:
    then they are summed per window)."""
    sums = tx.fetchone(
        "SELECT SUM(d_ids), SUM(d_n), SUM(d_identical), SUM(d_conflicting), SUM(o_ids),"
        " SUM(o_n), SUM(o_identical), SUM(o_conflicting), SUM(v_ids), SUM(v_n), MIN(min_ts)"
        " FROM signals_hours"
    )
    if sums is None or sums[10] is None:  # nothing folded yet (every fold sets a time)
        return _NOTHING
    if sums[10] < start:
        return None
    d, o = [int(v) for v in sums[0:4]], [int(v) for v in sums[4:8]]
    v = [int(x) for x in sums[8:10]]
    return {
        "signals_decisions": (d[0], d[1], d[1], d[2], d[3]),
        "signals_outcomes": (o[0], o[1], o[1], o[2], o[3]),
        "signals_overrides": (v[0], v[1], v[1], 0, 0),
    }


_NOTHING = {table: (0, 0, 0, 0, 0) for table in _TABLES}


def straddles(tx: Tx, start: int) -> bool:
    """Whether some id has events both before and inside the window: its windowed state (the
    last event inside, the repeat counts) is then not what the projection folded."""
    return any(
        tx.fetchone(f"SELECT 1 FROM {t} WHERE min_ts < ? AND max_ts >= ? LIMIT 1", (start, start))
        for t in _TABLES
    )


def read(tx: Tx, *, now_ms: int, max_age_hours: int) -> FromProjection | None:
    """Counts and a row reader for the window, or None when the window splits an id's events."""
    start = cutoff(now_ms, max_age_hours)
    c = Counts()
    totals = whole_log_totals(tx, start)
    if totals is None and straddles(tx, start):
        return None
    for table in () if totals is not None else _TABLES:
        row = tx.fetchone(
            "SELECT COALESCE(SUM(CASE WHEN max_ts >= ? THEN 1 ELSE 0 END), 0),"
            " COALESCE(SUM(CASE WHEN max_ts >= ? THEN n ELSE 0 END), 0),"
            " COALESCE(SUM(n), 0)"
            + (
                ", COALESCE(SUM(CASE WHEN max_ts >= ? THEN identical ELSE 0 END), 0),"
                " COALESCE(SUM(CASE WHEN max_ts >= ? THEN conflicting ELSE 0 END), 0)"
                if table != "signals_overrides"
                else ", 0, 0"
            )
            + f" FROM {table}",
            (start,) * (4 if table != "signals_overrides" else 2),
        )
        assert row is not None
        totals = totals or {}
        totals[table] = tuple(int(v) for v in row)
    assert totals is not None
    ids, n_in, n_all, same, differ = totals["signals_decisions"]
    c.decisions, c.duplicate_decision_ids = ids, n_in - ids
    c.identical_repeats, c.conflicting_decision_ids = same, differ
    old = n_all - n_in
    lines = n_all
    ids, n_in, n_all, same, differ = totals["signals_outcomes"]
    c.outcomes, c.duplicate_outcome_ids = ids, n_in - ids
    c.identical_repeats += same
    c.conflicting_outcome_ids = differ
    old += n_all - n_in
    lines += n_all
    _, n_in, n_all, _, _ = totals["signals_overrides"]
    c.override_events = n_in
    old += n_all - n_in
    lines += n_all
    for kind, inside, n in tx.fetchall(
        "SELECT kind, inside, COUNT(*) FROM (SELECT kind,"
        " CASE WHEN ts_ms >= ? THEN 1 ELSE 0 END AS inside FROM signals_other) s"
        " GROUP BY kind, inside",
        (start,),
    ):
        lines += n
        if not inside:
            old += n
        elif kind == "other":
            c.other_events += n
        elif kind == "no_id":
            c.skipped_no_decision_id += n
        elif kind == "error":
            c.parse_errors += n
    c.lines = lines
    c.skipped_old = old
    conflicts = [
        what
        for (what,) in tx.fetchall(
            # Decisions' first, then outcomes', each in log order, as the file export lists them.
            "SELECT what FROM signals_conflicts WHERE ts_ms >= ?"
            f" ORDER BY substr(what, 1, 1), seq LIMIT {MAX_SAMPLES}",
            (start,),
        )
    ]
    errors = [
        f"log:{seq}: {reason}"
        for seq, reason in tx.fetchall(
            "SELECT seq, reason FROM signals_other WHERE kind = 'error' AND ts_ms >= ?"
            f" ORDER BY seq LIMIT {MAX_SAMPLES}",
            (start,),
        )
    ]
    out = FromProjection(c, conflicts, errors)

    def rows(**options: Any) -> Iterator[Row]:
        return _rows(tx, c, start, windowed=old > 0, **options)

    def stored(
        split_of: list[int],
        write: Callable[[int, list[bytes], int], None] | None,
        by_hour: HourWriter | None = None,
    ) -> Tallies | None:
        if not whole_rows_fit(tx, start, old > 0):
            return None
        return stream_stored(
            tx, c, start, windowed=old > 0, split_of=split_of, write=write, by_hour=by_hour
        )

    out.rows = rows
    out.stored = stored
    return out


_ROW_COLUMNS = (
    "d.decision_id, d.ts_ms, d.session_id, d.chosen_task, d.outcome, d.bucket, d.digest,"
    " d.overridden, d.tail, d.rest, d.hist_min_ts, d.head"
)
#: What a row is rebuilt from when its default line does not fit the export's options.
_PART_COLUMNS = (
    ", d.history, d.propensity, d.cut, o.task_executed, o.outcome, o.ttr,"
    " o.error_kind, o.manual_override_task, o.max_ts, v.max_ts"
)
_FROM = (
    " FROM signals_decisions d JOIN signals_outcomes o ON o.decision_id = d.decision_id"
    " LEFT JOIN signals_overrides v ON v.decision_id = d.decision_id"
)


def _rows(
    tx: Tx,
    c: Counts,
    start: int,
    *,
    windowed: bool,
    seed: int,
    history_size: int,
    rewards: dict[str, float],
    progress: Progress | None,
    full: bool,
) -> Iterator[Row]:
    """Yield (id, session, chosen task, outcome, bucket, row line or None) in export order;
    the counts are final once it is exhausted.

    Each row's line for the default options is stored; it is used as it is unless the
    options differ (history size, rewards) or the window cuts into the row's history or
    drops the override that filled its `manual_override_task`.
    """
    k = max(0, history_size)
    defaults = k == HISTORY and rewards == REWARDS
    if windowed:
        sql = (
            f"SELECT {_ROW_COLUMNS}{_PART_COLUMNS}{_FROM}"
            " WHERE d.ts_ms >= ? AND o.max_ts >= ? AND d.outcome IS NOT NULL"
            " ORDER BY d.ts_ms, d.first_seq"
        )
        params: tuple[Any, ...] = (start, start)
    else:
        parts = "" if defaults or not full else _PART_COLUMNS
        sql = (
            f"SELECT {_ROW_COLUMNS}{parts}{_FROM if parts else ' FROM signals_decisions d'}"
            " WHERE d.outcome IS NOT NULL ORDER BY d.ts_ms, d.first_seq"
        )
        params = ()
    histories = _histories(tx, start, k) if full and k != HISTORY and k > 0 else None
    reward_json = {name: _encode(float(value)) for name, value in rewards.items()}
    no_reward = _encode(0.0)
    hexlify = binascii.hexlify
    end_format = END_FORMAT
    own_buckets = seed == SEED
    seen: set[bytes] = set()
    add = seen.add
    seen_rows = no_task = dropped = joined = overridden = 0
    for chunk in tx.chunks(sql, params):
        seen_rows += len(chunk)
        if progress is not None:
            progress("joining", seen_rows, None)
        for row in chunk:
            if row[8] is None:  # no chosen task
                no_task += 1
                continue
            did, ts, session, chosen, outcome, b, digest, how, tail, rest, oldest = row[:11]
            stale_override = windowed and how == BY_OVERRIDE and (row[21] or 0) < start
            if stale_override:
                # The override that filled `manual_override_task` is older than the window.
                tail = encode_tail(chosen, *row[15:19], "")
                digest = row_digest(bytes(row[11])[row[14] + 1 :], tail, ts)
                how = NOT_OVERRIDDEN
            digest = bytes(digest)
            if digest in seen:
                dropped += 1
                continue
            add(digest)
            joined += 1
            if how != NOT_OVERRIDDEN:
                overridden += 1
            if not own_buckets:
                b = bucket(did, seed)
            if not full:
                yield did, session, chosen, outcome, b, None
                continue
            trimmed = windowed and oldest is not None and oldest < start
            if defaults and not stale_override and not trimmed:
                yield did, session, chosen, outcome, b, row[11] + rest
                continue
            if k == 0:
                history: Any = b"[]"
            elif histories is not None:
                history = histories.get(did, b"[]")
            else:
                history = row[12]
                if trimmed:
                    history = _encode([h for h in _decode(history) if h["ts_ms"] >= start])
            propensity = row[13]
            line = end_format % (
                row[11],
                tail,
                history,
                reward_json.get(outcome, no_reward),
                hexlify(digest),
                b"null" if propensity is None else propensity.encode(),
            )
            yield did, session, chosen, outcome, b, line
    c.missing_outcome = c.decisions - seen_rows
    c.skipped_no_chosen_task += no_task
    c.dropped_duplicate_rows = dropped
    c.joined_rows = joined
    c.overrides = overridden


def _histories(tx: Tx, start: int, k: int) -> dict[str, bytes]:
    """`event_history` of every decision in the window for a history size other than the
    stored one, from the sessions' timelines."""
    out: dict[str, bytes] = {}
    timeline: list[tuple[Any, ...]] = []
    current: str | None = None

    def flush() -> None:
        encoded: list[bytes | None] = [None] * len(timeline)
        for i, entry in enumerate(timeline):
            out[entry[0]] = encode_history(timeline, i, k, encoded)[0]

    for did, chosen, ts, session in tx.iterate(
        "SELECT decision_id, chosen_task, ts_ms, session_id FROM signals_decisions"
        " WHERE ts_ms >= ? AND session_id <> '' ORDER BY session_id, ts_ms, first_seq",
        (start,),
    ):
        if session != current:
            flush()
            timeline = []
            current = session
        timeline.append((did, chosen, ts))
    flush()
    return out


_HOUR_ROWS = (
    "SELECT d.ts_ms, d.bucket, d.head, d.rest FROM signals_decisions d"
    " WHERE d.dup = 0 AND d.ts_ms >= ? AND d.ts_ms < ? ORDER BY d.ts_ms, d.first_seq"
)


def stream_hours(tx: Tx, split_of: list[int], out: HourWriter) -> None:
    """Every row in export order, an hour at a time: hours the previous export into the same
    directory holds unchanged are copied from its files, runs of the others are read here."""
    out.open(tx)
    hours = tx.fetchall("SELECT hour, version FROM signals_hours ORDER BY hour")
    i = 0
    while i < len(hours):
        if out.reusable(*hours[i]):
            out.copy(*hours[i])
            i += 1
            continue
        j = i + 1
        while j < len(hours) and not out.reusable(*hours[j]):
            j += 1
        versions = dict(hours[i:j])
        current = None
        for chunk in tx.chunks(
            _HOUR_ROWS, (hours[i][0] * HOUR_MS, (hours[j - 1][0] + 1) * HOUR_MS)
        ):
            lines: list[list[bytes]] = [[], [], []]
            for ts, b, head, rest in chunk:
                hour = ts // HOUR_MS
                if hour != current:
                    _flush(out, lines)
                    out.start(hour, versions.pop(hour, None))
                    current = hour
                some = lines[split_of[b]]
                some.append(head)
                some.append(rest)
            _flush(out, lines)
        out.end()
        for hour, version in versions.items():  # hours left with no row to write
            out.start(hour, version)
        out.end()
        i = j
    out.finish()


def _flush(out: HourWriter, lines: list[list[bytes]]) -> None:
    for split, some in enumerate(lines):
        if some:
            out.add(split, some, len(some) // 2)
            lines[split] = []


class Tallies:
    """What the summary needs from the rows: per outcome, task and split, and sessions."""

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self.tasks: dict[str, int] = {}
        self.splits = [0, 0, 0]
        self.sessions = 0
        self.leaking = 0


def whole_rows_fit(tx: Tx, start: int, windowed: bool) -> bool:
    """Whether every row's stored line is what the export writes: no row in the window shows
    history from before it, or an override from before it."""
    if not windowed:
        return True
    return (
        tx.fetchone(
            "SELECT 1 FROM signals_decisions d"
            " LEFT JOIN signals_overrides v ON v.decision_id = d.decision_id"
            " WHERE d.ts_ms >= ? AND d.tail IS NOT NULL AND (d.hist_min_ts < ?"
            f" OR (d.overridden = {BY_OVERRIDE} AND (v.max_ts IS NULL OR v.max_ts < ?)))"
            " LIMIT 1",
            (start, start, start),
        )
        is None
    )


def stream_stored(
    tx: Tx,
    c: Counts,
    start: int,
    *,
    windowed: bool,
    split_of: list[int],
    write: Callable[[int, list[bytes], int], None] | None,
    by_hour: HourWriter | None = None,
) -> Tallies:
    """The export with default options, done by the database: counts by aggregate queries,
    and each row's stored line (`head` and `rest`, one after the other) handed to
    `write(split, pieces, rows)` in export order, a chunk of rows per split at a time.
    Duplicates are the rows the projection flagged (`dup`)."""
    if windowed:
        source = (
            " FROM signals_decisions d JOIN signals_outcomes o ON o.decision_id = d.decision_id"
            " WHERE d.ts_ms >= ? AND o.max_ts >= ? AND d.outcome IS NOT NULL"
        )
        params: tuple[Any, ...] = (start, start)
    else:
        source = " FROM signals_decisions d WHERE d.outcome IS NOT NULL"
        params = ()
    test = split_of.count(2)
    val = split_of.count(1)
    split_sql = f"CASE WHEN d.bucket < {test} THEN 2 WHEN d.bucket < {test + val} THEN 1 ELSE 0 END"
    if windowed:
        seen_rows, no_task, dropped = tx.fetchone(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN d.dup IS NULL THEN 1 ELSE 0 END), 0),"
            f" COALESCE(SUM(CASE WHEN d.dup = 1 THEN 1 ELSE 0 END), 0){source}",
            params,
        ) or (0, 0, 0)
        groups = tx.fetchall(
            f"SELECT d.outcome, d.chosen_task, {split_sql}, d.overridden, COUNT(*){source}"
            f" AND d.dup = 0 GROUP BY d.outcome, d.chosen_task, {split_sql}, d.overridden",
            params,
        )
    else:  # every row counts: the projection keeps these tallies
        seen_rows = no_task = dropped = 0
        groups = []
        for outcome, task, b, how, dup, n in tx.fetchall(
            "SELECT outcome, chosen_task, bucket, overridden, dup, n FROM signals_tally"
        ):
            seen_rows += n
            if dup == 0:
                groups.append((outcome, task, split_of[b], how, n))
            elif dup == 1:
                dropped += n
            else:
                no_task += n
    t = Tallies()
    overridden = 0
    for outcome, task, split, how, n in groups:
        key = outcome or "unknown"
        t.outcomes[key] = t.outcomes.get(key, 0) + n
        key = task or "unknown"
        t.tasks[key] = t.tasks.get(key, 0) + n
        t.splits[split] += n
        if how != NOT_OVERRIDDEN:
            overridden += n
    sessions, leaking = tx.fetchone(
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN lo <> hi THEN 1 ELSE 0 END), 0) FROM"
        f" (SELECT d.session_id, MIN({split_sql}) AS lo, MAX({split_sql}) AS hi{source}"
        " AND d.dup = 0 AND d.session_id <> '' GROUP BY d.session_id) s",
        params,
    ) or (0, 0)
    t.sessions, t.leaking = int(sessions), int(leaking)
    if by_hour is not None and not windowed:
        stream_hours(tx, split_of, by_hour)
    elif write is not None:
        for chunk in tx.chunks(
            f"SELECT d.bucket, d.head, d.rest{source} AND d.dup = 0 ORDER BY d.ts_ms, d.first_seq",
            params,
        ):
            lines: list[list[bytes]] = [[], [], []]
            for b, head, rest in chunk:
                some = lines[split_of[b]]
                some.append(head)  # a line is its head and its rest: not joined (copied) here
                some.append(rest)
            for split, some in enumerate(lines):
                if some:
                    write(split, some, len(some) // 2)
    c.missing_outcome = c.decisions - int(seen_rows)
    c.skipped_no_chosen_task += int(no_task)
    c.dropped_duplicate_rows = int(dropped)
    c.joined_rows = sum(t.splits)
    c.overrides = overridden
    return t
