"""Joining decisions, outcomes and overrides into training rows, the reference exporter's way.

Input is a stream of router events, from a seq_mem.jsonl file (see `scan`: read in big chunks,
bad lines counted in `parse_errors`) or from the log. Semantics follow `router_signal_export.py`
so that on the same valid input the counts, quality figures, distributions and split sizes are
the same: events older than `max_age_hours` or without a decision id are ignored, the last
decision or outcome seen for an id wins, and `manual_override_task` falls back to the last
override.

What differs, on purpose: nothing crashes; repeated ids are reported as identical repeats or
conflicts instead of silently; and `dedupe_id` hashes the row's content, not its decision id,
so a retried decision re-emitted under a new id is dropped and counted.

Rows come out as ready-made JSON bytes: a decision's first half is encoded once when it is read
(`scan`), and the join only encodes the small outcome-dependent tail.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from plaudit.signals.scan import SCHEMA_ROW, Scan, Scanner

Progress = Callable[[str, int, int | None], None]

REWARDS: dict[str, float] = {"success": 1.0, "partial": 0.55, "failure": 0.0, "wasted": -0.2}
MAX_CONFLICT_IDS = 20

#: Fields that make up a row's content for `dedupe_id`, in this order: everything but the
#: decision id and the derived history, then the timestamp. `dedupe_id` is the sha256 of these
#: fields encoded as one compact JSON object in this order (`context` and `candidates` as their
#: JSON text in the input), so only rows with the same content made in the same millisecond
#: share one: an identical re-write under a new id is dropped, while two decisions made at
#: different times are never merged, however alike.
DEDUPE_FIELDS = (
    "schema_version",
    "source",
    "session_id",
    "project_fingerprint",
    "project_path",
    "git_branch",
    "git_commit",
    "user_hash",
    "user_intent",
    "context",
    "candidates",
    "chosen_task",
    "confidence",
    "task_executed",
    "outcome",
    "time_to_resolution_ms",
    "error_kind",
    "manual_override_task",
    "ts_ms",
)
_DEDUPE_PREFIX = b'{"schema_version":"' + SCHEMA_ROW.encode() + b'",'


class _Tail(msgspec.Struct):
    """The outcome's part of a row (the last DEDUPE_FIELDS)."""

    task_executed: str
    outcome: str
    time_to_resolution_ms: int
    error_kind: str
    manual_override_task: str


class _Past(msgspec.Struct):
    """A history entry without its `t_minus`, which depends on the row it is shown in."""

    decision_id: str
    chosen_task: str
    ts_ms: int


_encode = msgspec.json.Encoder().encode


class Counts:
    """The summary's counts (a plain class, cheap to import on the emit path)."""

    REFERENCE = (
        "decisions",
        "outcomes",
        "joined_rows",
        "missing_outcome",
        "duplicate_decision_ids",
        "duplicate_outcome_ids",
        "dropped_duplicate_rows",
        "overrides",
        "train_rows",
        "val_rows",
        "test_rows",
        "parse_errors",
    )
    FIELDS = (
        *REFERENCE,
        # plaudit's additions
        "lines",
        "identical_repeats",
        "conflicting_decision_ids",
        "conflicting_outcome_ids",
        "override_events",
        "skipped_old",
        "skipped_no_decision_id",
        "skipped_no_chosen_task",
        "oversize_lines",
        "other_events",
    )
    __slots__ = FIELDS

    def __init__(self) -> None:
        for name in self.FIELDS:
            setattr(self, name, 0)

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.FIELDS}


class Collected:
    """The latest decision and outcome per id, overrides, and the counts.

    A decision is a list [ts_ms, session, chosen_task, heads, head start, content start,
    head end, propensity, bucket, first position]: `heads` is its Scan's buffer (a memoryview),
    with its output row's first half at those offsets (see `Scanner`).
    An outcome is a tuple (task_executed, outcome, time_to_resolution_ms, error_kind,
    manual_override_task); an override is its task.
    """

    def __init__(self) -> None:
        self.counts = Counts()
        self.decisions: dict[str, list[Any]] = {}
        self.outcomes: dict[str, tuple[str, str, int, str, str]] = {}
        self.overrides: dict[str, str] = {}
        self.conflicts: list[str] = []
        self.errors: list[str] = []


class Collector:
    """Folds records in file/log order; `now_ms`, `max_age_hours` and `seed` as the reference."""

    def __init__(self, *, now_ms: int, max_age_hours: int, seed: int = 42) -> None:
        self.now_ms = now_ms
        self.max_age_ms = max(1, max_age_hours) * 3600 * 1000
        self.seed = seed
        self.out = Collected()

    def scanner(self) -> Scanner:
        return Scanner(now_ms=self.now_ms, max_age_ms=self.max_age_ms, seed=self.seed)

    def _conflict(self, what: str) -> None:
        if len(self.out.conflicts) < MAX_CONFLICT_IDS:
            self.out.conflicts.append(what)

    def fold(self, scans: Iterable[Scan], *, where: str = "") -> None:
        """Fold scans of consecutive stretches of the input, in order."""
        out = self.out
        c = out.counts
        decisions = out.decisions
        outcomes = out.outcomes
        overrides = out.overrides
        line_base = 0
        for scan in scans:
            c.lines += scan.events
            c.parse_errors += scan.parse_errors
            c.oversize_lines += scan.oversize_lines
            c.skipped_old += scan.skipped_old
            c.skipped_no_decision_id += scan.skipped_no_decision_id
            c.other_events += scan.other_events
            for line_no, reason in scan.errors:
                if len(out.errors) < MAX_CONFLICT_IDS:
                    out.errors.append(f"{where}:{line_base + line_no}: {reason}")
            line_base += scan.lines
            n_decisions = c.decisions
            heads = memoryview(scan.heads)
            for did, ts, session, chosen, start, cut, end, propensity, b in scan.decisions:
                prev = decisions.get(did)
                entry = [ts, session, chosen, heads, start, cut, end, propensity, b, 0]
                if prev is None:
                    entry[9] = n_decisions
                    decisions[did] = entry
                    n_decisions += 1
                    continue
                c.duplicate_decision_ids += 1
                if prev[7] == propensity and _content(prev) == heads[cut + 1 : end]:
                    c.identical_repeats += 1
                else:
                    c.conflicting_decision_ids += 1
                    self._conflict(f"decision {did}")
                # Last one wins (the reference's rule), keeping the first one's place.
                entry[9] = prev[9]
                decisions[did] = entry
            for rec in scan.outcomes:
                did = rec[0]
                value = rec[1:]
                prev_o = outcomes.get(did)
                if prev_o is None:
                    c.outcomes += 1
                else:
                    c.duplicate_outcome_ids += 1
                    if prev_o == value:
                        c.identical_repeats += 1
                    else:
                        c.conflicting_outcome_ids += 1
                        self._conflict(f"outcome {did}")
                outcomes[did] = value
            c.override_events += len(scan.overrides)
            overrides.update(scan.overrides)
            c.decisions = n_decisions
            scan.decisions = scan.outcomes = []  # folded: let them go
            scan.overrides = []

    def feed_rows(
        self, rows: Iterable[tuple[int, str, int, str, str]], *, progress: Progress | None = None
    ) -> None:
        """(seq, type, ts_ms, session_id, payload JSON text) rows straight from the log's table:
        each payload is decoded once, into the fields the export needs."""
        scanner = self.scanner()
        event = scanner.event
        n = 0
        for seq, name, ts_ms, session, payload in rows:
            n += 1
            event(name, ts_ms, session, payload, seq)
            if progress is not None and not n % 20_000:
                progress("reading", n, None)
        scanner.out.events = n
        self.fold([scanner.finish()], where="log")


_DEDUPE_BASE = hashlib.sha256(_DEDUPE_PREFIX)
#: The row's end, after the outcome's fields, filled by one bytes format per row.
END_FORMAT = b'%b,%b,"event_history":%b,"reward":%b,"dedupe_id":"%b","propensity":%b}\n'


def encode_tail(
    chosen: str, executed: str, outcome: str, ttr: int, error_kind: str, override_task: str
) -> bytes:
    """The outcome's part of a row, as JSON members without braces."""
    return _encode(_Tail(executed or chosen, outcome, ttr, error_kind, override_task))[1:-1]


def row_digest(content: bytes | memoryview, tail: bytes, ts_ms: int) -> bytes:
    """`dedupe_id`'s sha256 (see DEDUPE_FIELDS): `content` is the row's members from `source`
    to `confidence`, `tail` the outcome's (from `encode_tail`)."""
    h = _DEDUPE_BASE.copy()
    h.update(content)
    h.update(b",")
    h.update(tail)
    h.update(b',"ts_ms":%d}' % ts_ms)
    return h.digest()


def history_entry(decision_id: str, chosen_task: str, ts_ms: int) -> bytes:
    """A history entry's JSON after its opening brace (its `t_minus` goes in front)."""
    return _encode(_Past(decision_id, chosen_task, ts_ms))[1:]


def t_minus_prefix(i: int) -> bytes:
    return b'{"t_minus":%d,' % i


def _content(d: list[Any]) -> memoryview:
    """A decision's content: its row's fields from `source` to `confidence`, as JSON."""
    heads: memoryview = d[3]
    return heads[d[5] + 1 : d[6]]


def joined_rows(
    col: Collected,
    *,
    history_size: int = 3,
    rewards: dict[str, float] | None = None,
    progress: Progress | None = None,
    full: bool = True,
) -> Iterator[tuple[str, str, str, str, int, bytes | None]]:
    """Yield (id, session, chosen_task, outcome, bucket, row JSON line) oldest first, duplicates
    (same content) already dropped. `full=False` yields None for the row (enough for a
    summary) and skips building the history.

    Updates `col.counts` (missing_outcome, joined_rows, dropped_duplicate_rows, overrides) as it
    goes, so the counts are final once the iterator is exhausted.
    """
    reward_map = REWARDS if rewards is None else rewards
    c = col.counts
    k = max(0, history_size)
    decisions = col.decisions
    outcomes = col.outcomes
    overrides = col.overrides
    # Per-session timelines, ordered as the reference orders them: by timestamp, ties in
    # first-seen order (a stable sort on ts alone).
    timelines: dict[str, list[tuple[int, int, str, str]]] = {}
    order: list[tuple[Any, ...]] = []
    missing = 0
    no_task = 0
    for did, d in decisions.items():
        ts_ms, session, chosen = d[0], d[1], d[2]
        if session:
            tl = timelines.get(session)
            if tl is None:
                tl = timelines[session] = []
            tl.append((ts_ms, d[9], did, chosen))
        o = outcomes.get(did)
        if o is None:
            missing += 1
        elif not chosen:
            no_task += 1
        else:
            # (ts, first position) is unique, so sorting never compares the rest.
            order.append((ts_ms, d[9], did, d, o))
    c.missing_outcome = missing
    c.skipped_no_chosen_task += no_task
    # Where each decision sits in its session, and its history entry pre-encoded.
    position: dict[str, int] = {}
    past: dict[str, list[bytes]] = {}
    want_history = full and k > 0
    longest = 0
    for session, tl in timelines.items():
        longest = max(longest, len(tl))
        tl.sort()
        for i, item in enumerate(tl):
            position[item[2]] = i
        if want_history:
            past[session] = [history_entry(e[2], e[3], e[0]) for e in tl]
    del timelines
    order.sort()

    # Bounded by the longest session too: `--history-size 10**20` must not allocate 10**20.
    t_minus = [t_minus_prefix(i) for i in range(min(k, longest) + 1)]
    seen: set[bytes] = set()
    total = len(order)
    joined = 0
    overridden = 0
    end_format = END_FORMAT
    reward_json = {name: _encode(float(value)) for name, value in reward_map.items()}
    no_reward = _encode(0.0)
    hexlify = binascii.hexlify
    base = _DEDUPE_BASE
    for n, (_, _, did, d, o) in enumerate(order, 1):
        if progress is not None and not n % 20_000:
            progress("joining", n, total)
        executed, outcome, ttr, error_kind, override_task = o
        if not override_task:
            override_task = overrides.get(did, "")
        chosen = d[2]
        tail = _encode(_Tail(executed or chosen, outcome, ttr, error_kind, override_task))
        heads = d[3]
        h = base.copy()
        h.update(heads[d[5] + 1 : d[6]])
        h.update(b",")
        h.update(tail[1:-1])
        h.update(b',"ts_ms":%d}' % d[0])
        digest = h.digest()
        if digest in seen:
            c.dropped_duplicate_rows += 1
            continue
        seen.add(digest)
        joined += 1
        if override_task:
            overridden += 1
        session = d[1]
        if not full:
            yield did, session, chosen, outcome, d[8], None
            continue
        history = b"[]"
        if want_history and session:
            idx = position[did]
            if idx:
                entries = past[session]
                parts = [t_minus[idx - j] + entries[j] for j in range(max(0, idx - k), idx)]
                history = b"[%b]" % b",".join(parts)
        propensity = d[7]
        line = end_format % (
            heads[d[4] : d[6]],
            tail[1:-1],
            history,
            reward_json.get(outcome, no_reward),
            hexlify(digest),
            b"null" if propensity is None else _encode(propensity),
        )
        yield did, session, chosen, outcome, d[8], line
    c.joined_rows = joined
    c.overrides = overridden
