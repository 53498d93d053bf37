"""Which transactions were forged, and what each was acknowledged with.

A transaction's `running_total` was written under the write lock when it was recorded, so the
difference between it and the running total before it is the points the ledger acknowledged
for it. A transaction whose points no longer match that difference was edited behind
plaudit's back; the audit then writes an *amendment* for it (an `audit_correction` naming it),
which the projection folds into that transaction's category, session, source record and
reward/penalty split, so every figure comes back to what was acknowledged, not only the total.

Which rows were edited is told by the hash chain: in a damaged store, by re-checking each
suspect row against the stored hash before it; in a store made by `restore --rechain`, by the
row statuses the restore recorded from the backup's old hashes (`damage`). A row whose content
still matches its hash was not edited, so a difference next to it is explained otherwise (a
running total edited before it, or a transaction deleted before it) and is not attributed to
it; a row whose content matches another row's hash was moved, not edited. What cannot be
attributed stays one unattributed `audit_correction`, as before: the total is always restored.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from plaudit.store.backend import Tx
from plaudit.store.view import LogView

#: Positions a moved row is looked for around its own (a swap of neighbours, or a short move).
MOVE_WINDOW = 3
#: At most this many positions of each status are kept in a restore's `damage`.
MAX_LISTED = 10_000

INTACT, FORGED, MOVED = "intact", "forged", "moved"


@dataclass(frozen=True)
class Row:
    seq: int
    id: str
    category: str
    session: str | None
    points: int  # as the log holds it
    running_total: int
    kind: str
    amended: int  # what earlier amendments added


@dataclass(frozen=True)
class Amendment:
    row: Row
    acknowledged: int  # the points the ledger acknowledged for the row
    amount: int  # what brings the row's effective points there

    def payload(self) -> dict[str, Any]:
        r = self.row
        return {
            "id": r.id,
            "category": r.category,
            "session": r.session,
            "acknowledged": self.acknowledged,
            "log_points": r.points,
        }


class Evidence:
    """The hash chain's word on single rows: edited, moved, or rows missing before them."""

    def __init__(
        self,
        status: Callable[[int], str],
        gap_between: Callable[[int, int], bool],
        known: bool,
    ) -> None:
        self.status = status
        self.gap_between = gap_between
        self.known = known  # False: nothing can be said, so nothing is attributed


def rows(tx: Tx) -> Iterator[Row]:
    """Every transaction, in log order, as the projection holds it (rebuilt from the log),
    streamed: an audit of a large ledger holds three of them at a time."""
    for s, i, c, sess, pts, rt, k, am in tx.iterate(
        "SELECT seq, id, category, session, points, running_total, kind, amended"
        " FROM ledger_tx ORDER BY seq"
    ):
        yield Row(int(s), i, c, sess, int(pts), int(rt), k, int(am))


def find(txs: Iterable[Row], evidence: Evidence) -> list[Amendment]:
    """An amendment for every edited transaction whose acknowledged points the running totals
    around it tell, and that it does not hold yet."""
    if not evidence.known:
        return []
    out: list[Amendment] = []
    window: deque[Row | None] = deque([None, None], maxlen=3)  # before, this one, next
    for row in _and_end(iter(txs)):
        window.append(row)
        before, this, nxt = window
        if this is not None:
            found = _amendment(before, this, nxt, evidence)
            if found is not None:
                out.append(found)
    return out


def _and_end(rows: Iterator[Row]) -> Iterator[Row | None]:
    yield from rows
    yield None


def _amendment(
    before: Row | None, row: Row, nxt: Row | None, evidence: Evidence
) -> Amendment | None:
    if row.kind == "audit":
        return None
    prev_rt = before.running_total if before else 0
    if row.points + row.amended == row.running_total - prev_rt:
        return None
    if evidence.status(row.seq) != FORGED or evidence.gap_between(
        before.seq if before else 0, row.seq
    ):
        return None
    if before is not None and evidence.status(before.seq) == MOVED:
        return None
    # the running total before it is trusted as written: were it forged, this row (forged
    # too) could not confirm it
    acknowledged = _trusted(row, nxt, evidence) - prev_rt
    amount = acknowledged - (row.points + row.amended)
    return Amendment(row, acknowledged, amount) if amount else None


def _trusted(row: Row, nxt: Row | None, evidence: Evidence) -> int:
    """The acknowledged running total after `row`: its own, unless it was edited and the next
    transaction, intact, says what it was."""
    confirms = (
        nxt is not None
        and nxt.kind != "audit"
        and evidence.status(nxt.seq) == INTACT
        and not evidence.gap_between(row.seq, nxt.seq)
    )
    if confirms and evidence.status(row.seq) == FORGED:
        assert nxt is not None
        return nxt.running_total - nxt.points - nxt.amended
    return row.running_total


# -- the evidence, from the live log or from a rechained restore ---------------------------------
def live_evidence(tx: Tx) -> Evidence:
    """Re-check single rows of this store's own (damaged) chain."""
    from plaudit.store.chain import GENESIS

    view = LogView(tx)
    cache: dict[int, str] = {}

    def hash_before(seq: int) -> bytes | None:
        return GENESIS if seq == 1 else view.hash_at(seq - 1)

    def status(seq: int) -> str:
        if seq not in cache:
            prev = hash_before(seq)
            if prev is not None and view.check_chain(seq, seq, prev)[0] is None:
                cache[seq] = INTACT
            else:
                around = [seq + d for d in range(-MOVE_WINDOW, MOVE_WINDOW + 1) if d not in (0, -1)]
                hashes = [h for h in (hash_before(m + 1) for m in around if m >= 0) if h]
                moved = any(view.check_chain(seq, seq, h)[0] is None for h in hashes)
                cache[seq] = MOVED if moved else FORGED
        return cache[seq]

    def gap_between(lo: int, hi: int) -> bool:
        return len(view.hashes(lo + 1, hi)) != hi - lo

    return Evidence(status, gap_between, True)


def restored_evidence(damage: dict[str, Any]) -> Evidence:
    """What `restore --rechain` recorded of the backup's rows (positions in this store)."""
    forged = set(damage.get("forged") or ())
    moved = set(damage.get("moved") or ())
    gaps = sorted(damage.get("missing_before") or ())

    def status(seq: int) -> str:
        return FORGED if seq in forged else MOVED if seq in moved else INTACT

    def gap_between(lo: int, hi: int) -> bool:
        return any(lo < g <= hi for g in gaps)

    return Evidence(status, gap_between, bool(damage.get("complete")))


def no_evidence() -> Evidence:
    return Evidence(lambda seq: INTACT, lambda lo, hi: False, True)


def evidence_for(tx: Tx, log_ok: bool) -> Evidence:
    """The live chain when it is damaged, else what the newest rechaining restore recorded."""
    if not log_ok:
        return live_evidence(tx)
    row = tx.fetchone(
        "SELECT detail FROM ledger_incidents WHERE kind = 'corruption' ORDER BY seq DESC LIMIT 1"
    )
    if row is None:
        return no_evidence()
    detail = msgspec.json.decode(row[0])
    damage = detail.get("damage") if detail.get("action") == "restore --rechain" else None
    return no_evidence() if not isinstance(damage, dict) else restored_evidence(damage)


# -- what a rechaining restore records ----------------------------------------------------------
class LineChecker:
    """Statuses of a backup's rows, checked one by one as they are appended (their bodies are
    not kept): `forged` rows no longer match their recorded hash, `moved` ones match another
    row's, and `missing_before` rows follow positions the backup lacks. Rows are given in file
    order and reported at their new positions 1..n."""

    def __init__(self, hashes: Sequence[str], old_seqs: Sequence[int], genesis: bytes) -> None:
        self.raw = [bytes.fromhex(h) for h in hashes]
        self.old_seqs = old_seqs
        self.genesis = genesis
        self.forged: list[int] = []
        self.moved: list[int] = []
        self.gaps: list[int] = []

    def check(self, k: int, body: bytes) -> None:
        sha, raw = hashlib.sha256, self.raw
        if self.old_seqs[k] != (self.old_seqs[k - 1] + 1 if k else 1):
            self.gaps.append(k + 1)
            return
        if sha((raw[k - 1] if k else self.genesis) + body).digest() == raw[k]:
            return
        around = [k + d for d in range(-MOVE_WINDOW, MOVE_WINDOW + 1) if d not in (0, -1)]
        others = [raw[m] for m in around if 0 <= m < len(raw)]
        if 0 < k <= MOVE_WINDOW:
            others.append(self.genesis)
        if any(sha(h + body).digest() == raw[k] for h in others):
            self.moved.append(k + 1)
        else:
            self.forged.append(k + 1)

    def damage(self) -> dict[str, Any]:
        complete = max(len(self.forged), len(self.moved), len(self.gaps)) <= MAX_LISTED
        return {
            "forged": self.forged[:MAX_LISTED],
            "moved": self.moved[:MAX_LISTED],
            "missing_before": self.gaps[:MAX_LISTED],
            "complete": complete,
        }
