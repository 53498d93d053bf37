"""Arm lists passed with each select: recognised when unchanged, validated only where they
changed, and recorded in the log once, as a named set.

An agent passes the components it has with every `select`, usually the same list or one
that changed a little since its last call. Checking 10,000 ids and copying them into every
run event cost about 100 ms per select. Here:

- The list is converted in C (`msgspec.convert`, types and unknown keys only). A list equal
  to one this handle has seen (the last one, else one of the last few, by a digest of its
  encoding) reuses everything derived from it. Of a new list, only the arms this handle has
  not validated before go through `Arm`'s checks.
- The *arm set* a run considered, its (id, tokens) pairs, is recorded once, in an event
  `plaudit.bandit.armset.v1` whose id is `armset:<digest>` and whose digest is the sha256 of
  the set's canonical form (sorted by id), so the same set gets the same name in every
  process. A run event names it (`arm_set`) instead of listing the arms. A set is recorded
  as a change to one recorded earlier (`base`, `ids`/`tokens` put, `drop` removed), so a
  slightly changed list writes what changed; every `REBASE_DEPTH` changes, or when the
  change is most of the set, it is recorded whole (in several events when large: each holds
  at most `CHUNK_BYTES` of ids). `resolve` rebuilds a set from the log and checks its digest.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from plaudit.bandit import policy
from plaudit.bandit.arms import DEFAULT_KIND, MAX_ARM_ID, MAX_TOKENS, Arm, coerce_arms
from plaudit.errors import ValidationError
from plaudit.events import Event, StoredEvent, make_event

ARMSET_V1 = "plaudit.bandit.armset.v1"
#: A set is recorded whole again once its chain of changes is this long, so rebuilding any
#: set reads at most this many events (more only for a set recorded in chunks).
REBASE_DEPTH = 32
#: At most this many bytes of ids per event (the log's cap on a payload is 1 MiB).
CHUNK_BYTES = 600_000
#: Lists a handle remembers, and arms it remembers as validated.
_LISTS_KEEP = 8
_VALID_KEEP = 100_000
_PREFIX = b"plaudit.bandit.armset.v1\n"
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
# An arm id as `arms.parse_arm_id` accepts it (the projection's check of recorded sets):
# a known type, a category of letters, digits, '_', '.', '-', and a name with no control
# character and no space at either end; ids joined by newlines match as a whole.
_NAME = r"[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?"
_ID = rf"(?:tool|skill|file|memory|section):[A-Za-z0-9_.\-]+:{_NAME}"
_IDS_RE = re.compile(rf"(?:{_ID}\n)*{_ID}")


class _ArmIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An arm as passed, with its fields' types checked (in C), not yet its values."""

    id: str
    tokens: int
    content: str | None = None
    kind: str | None = None


class ArmSetPayload(msgspec.Struct, forbid_unknown_fields=True):
    """An arm set record: the set `digest` names is `base`'s (none: empty) less the ids in
    `drop`, with each id of `ids` at the matching `tokens`."""

    digest: str
    ids: list[str]
    tokens: list[int]
    base: str | None = None
    drop: list[str] = msgspec.field(default_factory=list)


def set_digest(ids: Sequence[str], tokens: Sequence[int]) -> str:
    """The name of the set of pairs (ids[i], tokens[i]), whatever their order."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    body = msgspec.json.encode([[ids[i] for i in order], [int(tokens[i]) for i in order]])
    return hashlib.sha256(_PREFIX + body).hexdigest()


def event_id(digest: str) -> str:
    return f"armset:{digest}"


def check_record(ev: StoredEvent, p: ArmSetPayload) -> None:
    """The checks a recorded set passes without its base's contents: its shape, and the
    digest of a set recorded whole (a change's digest needs its base's contents, which
    `resolve` checks); raises ValueError."""
    if not _DIGEST_RE.match(p.digest) or ev.id != event_id(p.digest):
        raise ValueError("digest must be 64 lowercase hex digits and the event id armset:<digest>")
    if p.base is not None and not _DIGEST_RE.match(p.base):
        raise ValueError("base must be a digest")
    if p.base is None and p.drop:
        raise ValueError("a set without a base drops nothing")
    if len(p.ids) != len(p.tokens):
        raise ValueError("ids and tokens must be aligned")
    if p.tokens and not (min(p.tokens) >= 0 and max(p.tokens) <= MAX_TOKENS):
        raise ValueError(f"tokens must be integers from 0 to {MAX_TOKENS}")
    for ids in (p.ids, p.drop):
        if ids and (max(map(len, ids)) > MAX_ARM_ID or not _IDS_RE.fullmatch("\n".join(ids))):
            raise ValueError("holds a malformed arm id")
    if len(set(p.ids)) != len(p.ids) or len(set(p.drop)) != len(p.drop):
        raise ValueError("lists an id twice")
    if p.base is None and set_digest(p.ids, p.tokens) != p.digest:
        raise ValueError("digest is not the digest of the set it records")


def resolve(get: Callable[[str], StoredEvent | None], digest: str) -> dict[str, int]:
    """The set `digest` names, {id: tokens}, rebuilt from its records (`get`: the log's
    event by id) and checked against the digest. Raises LookupError if a record is missing,
    ValueError if the records do not give the set the digest names."""
    chain: list[dict[str, Any]] = []
    at: str | None = digest
    while at is not None:
        ev = get(event_id(at))
        if ev is None or ev.type != ARMSET_V1:
            raise LookupError(f"no recorded arm set {at}")
        chain.append(ev.payload)
        at = ev.payload.get("base")
    pairs: dict[str, int] = {}
    for rec in reversed(chain):
        for arm_id in rec.get("drop", ()):
            pairs.pop(arm_id, None)
        pairs.update(zip(rec["ids"], rec["tokens"], strict=True))
    ids = list(pairs)
    if set_digest(ids, [pairs[i] for i in ids]) != digest:
        raise ValueError(f"the records of arm set {digest} do not give that set")
    return pairs


@dataclass(eq=False)
class Listed:
    """One validated arm list, and what a select derives from it (kept while the list is)."""

    structs: list[_ArmIn]
    arms: list[Arm]
    ids: list[str]
    tokens: np.ndarray
    digest: str
    id_array: np.ndarray
    #: (registry object, positions of `ids` in it, -1 for unregistered arms)
    _at: tuple[Any, np.ndarray] | None = None
    _pairs: dict[str, int] | None = None
    _changes: dict[int, list[Arm]] = field(default_factory=dict)
    _types: tuple[Any, np.ndarray] | None = None
    #: whether each arm is `learned`, and the positions of the arms that give a content
    _kind: tuple[np.ndarray, list[int]] | None = None

    def _kinds(self) -> tuple[np.ndarray, list[int]]:
        if self._kind is None:
            arms = self.arms
            learned = np.fromiter(
                ((a.kind or DEFAULT_KIND[a.id[: a.id.index(":")]]) == "learned" for a in arms),
                bool,
                len(arms),
            )
            self._kind = (learned, [i for i, a in enumerate(arms) if a.content is not None])
        return self._kind

    @property
    def pairs(self) -> dict[str, int]:
        if self._pairs is None:
            self._pairs = dict(zip(self.ids, self.tokens.tolist(), strict=True))
        return self._pairs

    def positions(self, index: Mapping[str, int], held: Any) -> np.ndarray:
        """Each arm's position in a registry (`index`: id -> position; `held`: the object
        that identifies that registry), -1 where it is not registered."""
        got = self._at
        if got is None or got[0] is not held:
            at = np.fromiter((index.get(i, -1) for i in self.ids), np.int64, len(self.ids))
            got = self._at = (held, at)
        return got[1]

    def types(self, reg: Any) -> np.ndarray:
        """Each arm's type code (`policy.type_codes`): the registry's where it holds the arm."""
        got = self._types
        if got is None or got[0] is not reg:
            at = self.positions(reg.index, reg)
            types = reg.types[at] if len(reg.ids) else np.zeros(len(at), dtype=np.int64)
            unknown = np.flatnonzero(at < 0)
            if unknown.size:
                types[unknown] = policy.type_codes(self.ids[i] for i in unknown.tolist())
            got = self._types = (reg, types)
        return got[1]

    def changes(self, reg: Any, seq: int) -> list[Arm]:
        """The arms whose registration differs from the registry `reg` (`Registry`, as of
        arms event position `seq`): new ones, or a changed cost, kind or content. Compared
        as arrays, so a list of 10,000 registered arms costs a fraction of a millisecond."""
        got = self._changes.get(seq)
        if got is None:
            at = self.positions(reg.index, reg)
            diff = at < 0
            known = np.flatnonzero(~diff)
            if known.size:
                learned, _ = self._kinds()
                theirs = at[known]
                diff[known] = (self.tokens[known] != reg.tokens[theirs]) | (
                    learned[known] != (_kind_codes(reg)[theirs])
                )
            for i in self._kinds()[1]:
                a = self.arms[i]
                if not diff[i]:
                    diff[i] = reg.arms[a.id].content != a.content
            got = changed_arms([self.arms[i] for i in np.flatnonzero(diff).tolist()], reg.arms)
            self._changes = {seq: got}
        return got


_KINDS: list[tuple[Any, np.ndarray]] = []


def _kind_codes(reg: Any) -> np.ndarray:
    """Whether each registered arm is `learned`, per registry object (the last few kept)."""
    for held, codes in _KINDS:
        if held is reg:
            return codes
    codes = np.fromiter((k == "learned" for k in reg.kinds), bool, len(reg.kinds))
    _KINDS.append((reg, codes))
    del _KINDS[:-4]
    return codes


def changed_arms(arms: Iterable[Arm], registered: Mapping[str, Arm]) -> list[Arm]:
    """`arms` that registering would change: new, or another cost, kind or content (no
    content given keeps the registered one)."""
    out = []
    for a in arms:
        old = registered.get(a.id)
        if (
            old is None
            or old.tokens != a.tokens
            or old.kind != a.effective_kind
            or (a.content is not None and old.content != a.content)
        ):
            content = a.content if a.content is not None else (old.content if old else None)
            out.append(msgspec.structs.replace(a, kind=a.effective_kind, content=content))
    return out


def _structs(values: Any) -> list[_ArmIn]:
    """`values` as `_ArmIn`s; a malformed list raises `coerce_arms`'s readable error."""
    if not isinstance(values, list):
        if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
            coerce_arms(values)  # raises, naming what is wrong
        values = list(values)
    try:
        return msgspec.convert(values, list[_ArmIn], from_attributes=True)
    except (msgspec.ValidationError, TypeError):
        arms = coerce_arms(values)  # raises, naming the arm and the field
        return [_ArmIn(a.id, a.tokens, a.content, a.kind) for a in arms]


class ArmLists:
    """A handle's memory of the arm lists passed to it and of the sets it has recorded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists: OrderedDict[bytes, Listed] = OrderedDict()
        self._last: Listed | None = None
        self._valid: dict[_ArmIn, Arm] = {}
        #: recorded sets: digest -> (the set, its chain length), most recent last
        self._recorded: OrderedDict[str, tuple[dict[str, int], int]] = OrderedDict()

    def listed(self, values: Iterable[Arm | Mapping[str, Any]]) -> Listed:
        """The validated list; a malformed one raises a ValidationError naming the arm."""
        structs = _structs(values)
        if not structs:
            raise ValidationError("arms", "is empty: give at least one arm")
        with self._lock:
            last = self._last
            if last is not None and last.structs == structs:
                return last
            key = hashlib.blake2b(msgspec.json.encode(structs), digest_size=16).digest()
            hit = self._lists.get(key)
            if hit is not None and hit.structs == structs:
                self._lists.move_to_end(key)
                self._last = hit
                return hit
        listed = self._new(structs)
        with self._lock:
            self._lists[key] = listed
            while len(self._lists) > _LISTS_KEEP:
                self._lists.popitem(last=False)
            self._last = listed
        return listed

    def _new(self, structs: list[_ArmIn]) -> Listed:
        valid = self._valid
        arms: list[Arm] = []
        fresh: dict[_ArmIn, Arm] = {}
        for i, s in enumerate(structs):
            arm = valid.get(s)
            if arm is None:
                try:
                    arm = Arm(id=s.id, tokens=s.tokens, content=s.content, kind=s.kind)
                except ValidationError as exc:
                    raise ValidationError(exc.field, exc.reason, where=f"arms[{i}]") from None
                fresh[s] = arm
            arms.append(arm)
        ids = [a.id for a in arms]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            for i, arm_id in enumerate(ids):
                if arm_id in seen:
                    raise ValidationError("id", f"{arm_id!r} is listed twice", where=f"arms[{i}]")
                seen.add(arm_id)
        with self._lock:
            if len(valid) + len(fresh) > _VALID_KEEP:
                valid.clear()
            valid.update(fresh)
        tokens = np.fromiter((a.tokens for a in arms), np.int64, len(arms))
        return Listed(
            structs=structs,
            arms=arms,
            ids=ids,
            tokens=tokens,
            digest=set_digest(ids, tokens.tolist()),
            id_array=np.array(ids, dtype=object),
        )

    # -- recording ------------------------------------------------------------------------
    def known(self, digest: str) -> bool:
        with self._lock:
            return digest in self._recorded

    def records(self, listed: Listed, session_id: str) -> list[Event]:
        """The events that record `listed`'s set, for a log that does not hold it yet: a
        change to the set recorded last through this handle when that is small and its
        chain short, else the whole set (in chunks of at most `CHUNK_BYTES` of ids)."""
        with self._lock:
            base = next(reversed(self._recorded.items()), None)
        pairs = listed.pairs
        if base is not None:
            digest0, (old, depth) = base
            put = [a for a, t in pairs.items() if old.get(a) != t]
            drop = [a for a in old if a not in pairs]
            small = len(put) + len(drop) <= len(pairs) // 2
            if depth < REBASE_DEPTH and small and _size(put) + _size(drop) <= CHUNK_BYTES:
                payload = {"digest": listed.digest, "base": digest0, "ids": put, "drop": drop}
                payload["tokens"] = [pairs[a] for a in put]
                return [self._event(payload, session_id)]
        out: list[Event] = []
        ids = sorted(pairs)
        start, prev = 0, None
        while start < len(ids):
            end, size = start, 0
            while end < len(ids) and (end == start or size + len(ids[end]) + 16 <= CHUNK_BYTES):
                size += len(ids[end]) + 16
                end += 1
            chunk = ids[:end]
            tokens = [pairs[a] for a in chunk]
            digest = listed.digest if end == len(ids) else set_digest(chunk, tokens)
            part = ids[start:end]
            payload = {"digest": digest, "base": prev, "ids": part, "drop": []}
            payload["tokens"] = [pairs[a] for a in part]
            out.append(self._event(payload, session_id))
            start, prev = end, digest
        return out

    @staticmethod
    def _event(payload: dict[str, Any], session_id: str) -> Event:
        return make_event(
            ARMSET_V1,
            payload,
            id=event_id(payload["digest"]),
            session_id=session_id,
            source="bandit",
        )

    def recorded(self, listed: Listed, records: Sequence[Event]) -> None:
        """`listed`'s set is in the log (committed), through `records` if this handle wrote
        them. Their chain length decides when the next set is recorded whole; a set another
        writer recorded, whose chain this handle does not know, is never a base."""
        with self._lock:
            depth = REBASE_DEPTH
            if records and records[0].payload.get("base") is not None:
                got = self._recorded.get(records[0].payload["base"])
                depth = (got[1] if got else REBASE_DEPTH) + 1
            elif records:
                depth = len(records) - 1
            self._recorded[listed.digest] = (listed.pairs, depth)
            self._recorded.move_to_end(listed.digest)
            while len(self._recorded) > _LISTS_KEEP:
                self._recorded.popitem(last=False)


def _size(ids: Sequence[str]) -> int:
    return sum(map(len, ids)) + 16 * len(ids)
