"""Joining decisions, outcomes and overrides into training rows, the reference exporter's way.

Input is a stream of router events, from a seq_mem.jsonl file (streamed line by line, bad lines
counted in `parse_errors`) or from the log. Semantics follow `router_signal_export.py` so that on
the same valid input the counts, quality figures, distributions and split sizes are the same:
events older than `max_age_hours` or without a decision id are ignored, the last decision or
outcome seen for an id wins, and `manual_override_task` falls back to the last override.

What differs, on purpose: nothing crashes; repeated ids are reported as identical repeats or
conflicts instead of silently; and `dedupe_id` hashes the row's content, not its decision id,
so a retried decision re-emitted under a new id is dropped and counted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from math import isfinite
from typing import IO, Any

import msgspec

from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE

Progress = Callable[[str, int, int | None], None]

REWARDS: dict[str, float] = {"success": 1.0, "partial": 0.55, "failure": 0.0, "wasted": -0.2}
MAX_LINE_BYTES = 8 << 20
MAX_CONFLICT_IDS = 20


class _Row(msgspec.Struct):
    name: Any = None
    ts_ms: Any = None
    session_id: Any = None
    # seq writes the subject as a JSON-encoded string; an object is accepted too.
    subject: str | dict[str, Any] | None = None


_NULL = msgspec.Raw(b"null")


class _Head(msgspec.Struct):
    """The subject fields the export uses. `context` and `candidates` stay raw JSON text: they
    are copied to the output as they are, never decoded and re-encoded."""

    decision_id: Any = None
    session_id: Any = None
    chosen_task: Any = None
    source: Any = None
    project_fingerprint: Any = None
    project_path: Any = None
    git_branch: Any = None
    git_commit: Any = None
    user_hash: Any = None
    user_intent: Any = None
    confidence: Any = None
    propensity: Any = None
    context: msgspec.Raw = _NULL
    candidates: msgspec.Raw = _NULL
    outcome: Any = None
    task_executed: Any = None
    time_to_resolution_ms: Any = None
    manual_override_task: Any = None
    error_kind: Any = None
    original_task: Any = None
    override_task: Any = None


_row_decoder = msgspec.json.Decoder(_Row)
_head_decoder = msgspec.json.Decoder(_Head)
_any_decoder = msgspec.json.Decoder()
_canon = msgspec.json.Encoder(order="sorted")
_EMPTY_HEAD = _Head()
_EMPTY_OBJECT = msgspec.Raw(b"{}")
_EMPTY_LIST = msgspec.Raw(b"[]")


def _s(value: Any) -> str:
    """`str(value or "")`, as the reference coerces fields."""
    if not value:
        return ""
    return value if type(value) is str else str(value)


def _ts(value: Any) -> int:
    """`int(value or 0)`; raises on what the reference cannot convert either."""
    if not value:
        return 0
    if type(value) is int:
        return value
    return int(value)


def _float(value: Any) -> float:
    try:
        f = float(value or 0.0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return f if isfinite(f) else 0.0


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


@dataclass
class Counts:
    decisions: int = 0
    outcomes: int = 0
    joined_rows: int = 0
    missing_outcome: int = 0
    duplicate_decision_ids: int = 0
    duplicate_outcome_ids: int = 0
    dropped_duplicate_rows: int = 0
    overrides: int = 0
    train_rows: int = 0
    val_rows: int = 0
    test_rows: int = 0
    parse_errors: int = 0
    # plaudit's additions
    lines: int = 0
    identical_repeats: int = 0
    conflicting_decision_ids: int = 0
    conflicting_outcome_ids: int = 0
    override_events: int = 0
    skipped_old: int = 0
    skipped_no_decision_id: int = 0
    skipped_no_chosen_task: int = 0
    oversize_lines: int = 0

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

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Collected:
    """The first pass: the latest decision and outcome per id, overrides, and the counts."""

    counts: Counts = field(default_factory=Counts)
    # decision id -> [ts_ms, row session, head, first position]: a list rather than an object,
    # because 200,000 of them must stay small and cheap to build.
    decisions: dict[str, list[Any]] = field(default_factory=dict)
    outcomes: dict[str, _Head] = field(default_factory=dict)
    overrides: dict[str, _Head] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Collector:
    """Folds router events in file/log order; `now_ms` and `max_age_hours` as the reference."""

    def __init__(self, *, now_ms: int, max_age_hours: int) -> None:
        self.now_ms = now_ms
        self.max_age_ms = max(1, max_age_hours) * 3600 * 1000
        self.out = Collected()

    def error(self, where: str, reason: str) -> None:
        self.out.counts.parse_errors += 1
        if len(self.out.errors) < MAX_CONFLICT_IDS:
            self.out.errors.append(f"{where}: {reason}")

    def _conflict(self, what: str) -> None:
        if len(self.out.conflicts) < MAX_CONFLICT_IDS:
            self.out.conflicts.append(what)

    def add(
        self,
        name: str,
        ts_ms: int,
        row_session: str,
        head: _Head,
    ) -> None:
        c = self.out.counts
        if ts_ms <= 0 or (self.now_ms - ts_ms) > self.max_age_ms:
            c.skipped_old += 1
            return
        did = head.decision_id
        if type(did) is not str:
            did = _s(did)
        if not did:
            c.skipped_no_decision_id += 1
            return
        out = self.out
        if name == DECISION:
            # Copies, so the raw fields stop pinning the whole subject text in memory.
            head.context = head.context.copy()
            head.candidates = head.candidates.copy()
            decisions = out.decisions
            prev = decisions.get(did)
            if prev is None:
                decisions[did] = [ts_ms, row_session, head, c.decisions]
                c.decisions += 1
                return
            c.duplicate_decision_ids += 1
            if prev[2] == head and prev[1] == row_session:
                c.identical_repeats += 1
            else:
                c.conflicting_decision_ids += 1
                self._conflict(f"decision {did}")
            # Last one wins (the reference's rule), keeping the first one's place in the order.
            decisions[did] = [ts_ms, row_session, head, prev[3]]
        elif name == OUTCOME:
            head.context = head.candidates = _NULL
            prev_o = out.outcomes.get(did)
            if prev_o is None:
                c.outcomes += 1
            else:
                c.duplicate_outcome_ids += 1
                if prev_o == head:
                    c.identical_repeats += 1
                else:
                    c.conflicting_outcome_ids += 1
                    self._conflict(f"outcome {did}")
            out.outcomes[did] = head
        elif name == OVERRIDE:
            c.override_events += 1
            head.context = head.candidates = _NULL
            out.overrides[did] = head

    # -- sources ------------------------------------------------------------------------
    def feed_lines(
        self,
        f: IO[bytes],
        *,
        where: str,
        progress: Progress | None = None,
        total: int | None = None,
    ) -> None:
        """Stream seq_mem lines. A bad line is counted and skipped; nothing raises."""
        c = self.out.counts
        done = 0
        line_no = 0
        decode_row = _row_decoder.decode
        decode_head = _head_decoder.decode
        add = self.add
        readline = f.readline
        limit = MAX_LINE_BYTES + 1
        lines = 0
        while True:
            line = readline(limit)
            if not line:
                break
            line_no += 1
            if progress is not None:
                done += len(line)
                if not line_no % 20_000:
                    progress("reading", done, total)
            if len(line) >= limit and not line.endswith(b"\n"):
                while True:
                    more = readline(1 << 20)
                    done += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                c.oversize_lines += 1
                self.error(f"{where}:{line_no}", f"line longer than {MAX_LINE_BYTES} bytes")
                continue
            try:
                row = decode_row(line)
                ts = row.ts_ms
                if type(ts) is not int:
                    ts = _ts(ts)
            except (msgspec.DecodeError, ValueError, TypeError, OverflowError) as exc:
                if not line.strip():
                    continue
                self.error(f"{where}:{line_no}", str(exc) or type(exc).__name__)
                continue
            lines += 1
            subject = row.subject
            if type(subject) is str:
                try:
                    head = decode_head(subject)
                except msgspec.DecodeError:
                    head = _EMPTY_HEAD  # like the reference, an unreadable subject is {}
            elif type(subject) is dict:
                head = _head_from(subject)
            else:
                head = _EMPTY_HEAD
            name = row.name
            session = row.session_id
            add(
                name if type(name) is str else _s(name),
                ts,
                session if type(session) is str else _s(session),
                head,
            )
        c.lines += lines
        if progress is not None:
            progress("reading", done, total)

    def feed_rows(
        self, rows: Iterable[tuple[str, int, str, str]], *, progress: Progress | None = None
    ) -> None:
        """(type, ts_ms, session_id, payload JSON text) rows straight from the log's table:
        the payload is decoded once, into the fields the export needs."""
        decode_head = _head_decoder.decode
        add = self.add
        n = 0
        for name, ts_ms, session, payload in rows:
            n += 1
            try:
                head = decode_head(payload)
            except msgspec.DecodeError:
                head = _EMPTY_HEAD
            add(name, ts_ms, session, head)
            if progress is not None and not n % 20_000:
                progress("reading", n, None)
        self.out.counts.lines += n


def _head_from(subject: dict[str, Any]) -> _Head:
    fields = {k: subject[k] for k in _Head.__struct_fields__ if k in subject}
    for k in ("context", "candidates"):
        if k in fields:
            fields[k] = msgspec.Raw(_canon.encode(fields[k]))
    return _Head(**fields)


#: Fields that make up a row's content for `dedupe_id`: everything but the decision id, the
#: timestamp and the derived history, so the same decision re-emitted under a new id matches.
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
)


def _first(item: tuple[int, str, str]) -> int:
    return item[0]


def _starts(raw: msgspec.Raw, byte: int) -> bool:
    view = memoryview(raw)
    return len(view) > 0 and view[0] == byte


def dedupe_id(row: dict[str, Any]) -> str:
    """sha256 of the content fields, in a fixed order, nested keys sorted."""
    return hashlib.sha256(_canon.encode([row.get(k) for k in DEDUPE_FIELDS])).hexdigest()


def joined_rows(
    col: Collected,
    *,
    history_size: int = 3,
    rewards: dict[str, float] | None = None,
    progress: Progress | None = None,
    full: bool = True,
) -> Iterator[dict[str, Any]]:
    """Yield the joined rows oldest first, duplicates (same content) already dropped.

    `full=False` yields only `id`, `session_id`, `chosen_task` and `outcome` (enough for a
    summary), skipping the history and the row itself.

    Updates `col.counts` (missing_outcome, joined_rows, dropped_duplicate_rows, overrides) as it
    goes, so the counts are final once the iterator is exhausted.
    """
    reward_map = REWARDS if rewards is None else rewards
    c = col.counts
    k = max(0, history_size)
    decisions = col.decisions
    outcomes = col.outcomes
    overrides = col.overrides
    # Per-session timelines of (ts, decision id, task), ordered as the reference orders them:
    # by timestamp, ties in first-seen order (a stable sort on ts alone).
    timelines: dict[str, list[tuple[int, str, str]]] = {}
    order: list[tuple[Any, ...]] = []
    missing = 0
    for did, (ts_ms, row_session, head, first) in decisions.items():
        session = head.session_id
        if type(session) is not str:
            session = _s(session)
        session = session or row_session
        chosen = head.chosen_task
        if type(chosen) is not str:
            chosen = _s(chosen)
        if session:
            tl = timelines.get(session)
            if tl is None:
                tl = timelines[session] = []
            tl.append((ts_ms, did, chosen))
        o_head = outcomes.get(did)
        if o_head is None:
            missing += 1
        elif not chosen:
            c.skipped_no_chosen_task += 1
        else:
            # (ts, first position) is unique, so sorting never compares the rest.
            order.append((ts_ms, first, did, session, chosen, head, o_head))
    c.missing_outcome = missing
    position: dict[str, int] = {}
    for tl in timelines.values():
        tl.sort(key=_first)
        for i, item in enumerate(tl):
            position[item[1]] = i
    # Oldest first; ties keep first-seen order, as the reference's stable sort does.
    order.sort()

    seen: set[bytes] = set()
    total = len(order)
    sha256 = hashlib.sha256
    encode = _canon.encode
    joined = 0
    overridden = 0
    reward_of = reward_map.get
    for n, (ts_ms, _, did, session, chosen, subj, o_head) in enumerate(order, 1):
        if progress is not None and not n % 20_000:
            progress("joining", n, total)
        history: list[dict[str, Any]] = []
        if full and k and session:
            idx = position[did]
            if idx:
                tl = timelines[session]
                for j in range(max(0, idx - k), idx):
                    past_ts, past_id, past_task = tl[j]
                    history.append(
                        {
                            "t_minus": idx - j,
                            "decision_id": past_id,
                            "chosen_task": past_task,
                            "ts_ms": past_ts,
                        }
                    )
        override_task = o_head.manual_override_task
        if type(override_task) is not str:
            override_task = _s(override_task)
        if not override_task:
            last = overrides.get(did)
            if last is not None:
                override_task = _s(last.override_task)
        outcome = o_head.outcome
        if type(outcome) is not str:
            outcome = _s(outcome)
        context = subj.context
        if not _starts(context, 123):  # "{": the reference keeps only an object
            context = _EMPTY_OBJECT
        candidates = subj.candidates
        if not _starts(candidates, 91):  # "[": ... and only a list
            candidates = _EMPTY_LIST
        source = subj.source
        if type(source) is not str:
            source = _s(source)
        source = source or "flow"
        intent = subj.user_intent
        confidence = subj.confidence
        if type(confidence) is not float or not isfinite(confidence):
            confidence = _float(confidence)
        executed = o_head.task_executed
        if type(executed) is not str:
            executed = _s(executed)
        executed = executed or chosen
        ttr = o_head.time_to_resolution_ms
        if type(ttr) is not int:
            ttr = _int(ttr)
        error_kind = o_head.error_kind
        if type(error_kind) is not str:
            error_kind = _s(error_kind)
        fp = subj.project_fingerprint
        path = subj.project_path
        branch = subj.git_branch
        commit = subj.git_commit
        user = subj.user_hash
        # The DEDUPE_FIELDS, in that order.
        digest = sha256(
            encode(
                [
                    "flow_router_train_row_v1",
                    source,
                    session,
                    fp,
                    path,
                    branch,
                    commit,
                    user,
                    intent,
                    context,
                    candidates,
                    chosen,
                    confidence,
                    executed,
                    outcome,
                    ttr,
                    error_kind,
                    override_task,
                ]
            )
        ).digest()
        if digest in seen:
            c.dropped_duplicate_rows += 1
            continue
        seen.add(digest)
        joined += 1
        if override_task:
            overridden += 1
        if not full:
            yield {"id": did, "session_id": session, "chosen_task": chosen, "outcome": outcome}
            continue
        propensity = subj.propensity
        yield {
            "schema_version": "flow_router_train_row_v1",
            "id": did,
            "ts_ms": ts_ms,
            "source": source,
            "session_id": session,
            "project_fingerprint": fp,
            "project_path": path,
            "git_branch": branch,
            "git_commit": commit,
            "user_hash": user,
            "user_intent": intent,
            "context": context,
            "candidates": candidates,
            "chosen_task": chosen,
            "confidence": confidence,
            "task_executed": executed,
            "outcome": outcome,
            "time_to_resolution_ms": ttr,
            "error_kind": error_kind,
            "manual_override_task": override_task,
            "event_history": history,
            "reward": reward_of(outcome, 0.0),
            "dedupe_id": digest.hex(),
            "propensity": propensity if type(propensity) in (int, float) else None,
        }
    c.joined_rows = joined
    c.overrides = overridden
