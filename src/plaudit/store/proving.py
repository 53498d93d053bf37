"""Checkpoints on demand, inclusion proofs and consistency proofs, read from one store.

`EventLog.checkpoint`, `prove` and `consistency` delegate here; the bundle formats and their
checkers are in `plaudit.store.proofs`, and checking never needs a store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import IntegrityError, NotFoundError, ValidationError
from plaudit.ids import now_ms
from plaudit.store.chain import GENESIS
from plaudit.store.tree import TxSource, consistency_proof, inclusion_proof, root_at
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.store.backend import Tx
    from plaudit.store.checkpoints import Checkpoint
    from plaudit.store.log import EventLog


class KeyInfo(msgspec.Struct, frozen=True):
    """What `plaudit log key` prints: give it to whoever checks your proofs."""

    fingerprint: str
    public_key: str
    public_pem: str
    origin: str


def key_info(log: EventLog) -> KeyInfo:
    key = log.checkpointer.key()
    return KeyInfo(key.fingerprint, key.public_key.hex(), key.public_pem(), key.origin)


def newest_checkpoint(tx: Tx, *, at_least: int = 0) -> Checkpoint | None:
    """The newest stored checkpoint (of at least `at_least` events), or None."""
    from plaudit.store.checkpoints import parse_checkpoint

    row = tx.fetchone(
        "SELECT note FROM plaudit_checkpoints WHERE size >= ? ORDER BY size DESC LIMIT 1",
        (at_least,),
    )
    return None if row is None else parse_checkpoint(row[0], where="plaudit_checkpoints")


def checkpoint_now(log: EventLog) -> Checkpoint:
    """Sign the tree at the head now (or return the checkpoint of this size, if one exists),
    store it and copy it to the witnesses."""
    key = log.checkpointer.key()
    with log.sequencer.leased() as leased:
        head = leased.head
        if head.seq == 0:
            raise ValidationError("log", "is empty: there is no tree to sign yet")
        existing = newest_checkpoint(leased.tx, at_least=head.seq)
        if existing is not None and existing.size == head.seq:
            return existing
        root = log.core.tree_at(leased.tx, head).root
        ck = log.checkpointer.sign(leased.tx, key, head.seq, root, now_ms())
    return ck


def _covering_checkpoint(log: EventLog, seq: int, *, sign: bool) -> Checkpoint:
    with log.reading() as view:
        ck = newest_checkpoint(view.tx, at_least=seq)
    if ck is not None:
        return ck
    if not sign:
        raise NotFoundError(
            f"no signed checkpoint covers position {seq} yet: sign one (`plaudit log "
            "checkpoint`, POST /v1/log/checkpoint) or wait for the automatic one"
        )
    return checkpoint_now(log)


def prove(log: EventLog, event_id: str, *, sign: bool = True) -> bytes:
    """A self-contained inclusion proof bundle for one event (see docs/proofs.md)."""
    from plaudit.store.proofs import build_proof

    with log.reading() as view:
        event = view.get(event_id)
    if event is None:
        raise NotFoundError(f"no event with id {event_id!r} in the log")
    ck = _covering_checkpoint(log, event.seq, sign=sign)
    key = log.checkpointer.key()
    with log.reading() as view:
        src = TxSource(view.tx)
        prev = GENESIS if event.seq == 1 else view.hash_at(event.seq - 1)
        if prev is None:
            raise IntegrityError(f"position {event.seq - 1} is missing: run `plaudit log verify`")
        if root_at(ck.size, src) != ck.root:
            raise IntegrityError(
                f"the stored tree does not match the checkpoint of {ck.size} events: run "
                "`plaudit log verify --full`"
            )
        path = inclusion_proof(event.seq - 1, ck.size, src)
        payload, meta = _stored_texts(view, event.seq)
    from plaudit.store.proofs import bundle_event

    return build_proof(
        bundle_event(event, payload_json=payload, meta_json=meta),
        prev_hash=prev,
        audit_path=path,
        checkpoint=ck,
        public_key=key.public_key,
    )


def _stored_texts(view: LogView, seq: int) -> tuple[str, str]:
    row = next(iter(view.scan_columns(("payload", "meta"), after=seq - 1, until=seq)), None)
    if row is None:
        raise IntegrityError(f"position {seq} is missing: run `plaudit log verify`")
    return str(row[0]), str(row[1])


def consistency_from(
    log: EventLog, old_size: int, old_root: bytes | None = None, *, sign: bool = True
) -> bytes:
    """A bundle proving that the current log (at its newest checkpoint, signed now if the head
    moved on) extends the tree of `old_size` events; with `old_root`, that tree exactly."""
    from plaudit.store.proofs import build_consistency

    if type(old_size) is not int or old_size < 0:
        raise ValidationError("from", f"must be a size of 0 or more, got {old_size!r}")
    with log.reading() as view:
        length, _ = view.head()
    if old_size > length:
        raise IntegrityError(
            f"the log has {length} events, fewer than the {old_size} of the old checkpoint: "
            "events were removed"
        )
    ck = _covering_checkpoint(log, max(length, 1), sign=sign)
    key = log.checkpointer.key()
    with log.reading() as view:
        src = TxSource(view.tx)
        here = root_at(old_size, src)
        if old_root is not None and here != old_root:
            raise IntegrityError(
                f"the log does not extend the old checkpoint: its tree at {old_size} events "
                "differs (history before it was rewritten)"
            )
        proof = consistency_proof(old_size, ck.size, src)
    return build_consistency(old_size, here, proof, ck, key.public_key)


def consistency_with_file(
    log: EventLog, path: str | os.PathLike[str]
) -> tuple[bytes, dict[str, Any]]:
    """Prove the log extends the checkpoint in `path` (a checkpoint file or a witness copy),
    after checking that checkpoint's signature with this log's key."""
    from plaudit.store.checkpoints import parse_checkpoint
    from plaudit.store.proofs import check_consistency

    where = os.fspath(path)
    try:
        with open(path, "rb") as f:
            text = f.read(64 * 1024)
    except OSError as exc:
        raise ValidationError("file", f"cannot read: {exc.strerror or exc}", where=where) from None
    old = parse_checkpoint(text, where=where)
    key = log.checkpointer.key()
    old.verify(key.public_key)
    data = consistency_from(log, old.size, old.root)
    report = check_consistency(data, trusted_key=key.public_key, old=old)
    return data, msgspec.to_builtins(report)
