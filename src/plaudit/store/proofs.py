"""Proof bundles: one JSON file that shows an outsider an event is in the log, with no store.

A bundle carries everything a checker needs: the event's stored fields (payload and meta as
the exact JSON text the chain hashed), the chain hash of the event before it, the event's
chain and leaf hashes, the audit path, the signed checkpoint and the log's public key. The
checker rebuilds body -> chain hash -> leaf hash -> root and checks the checkpoint's
signature, so trusting the bundle means trusting only the key (pin it with `trusted_key`).

Bundles are written as compact JSON with one trailing newline; every hash is lowercase hex
and the checker refuses any other spelling, so a changed byte cannot keep the meaning.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from plaudit.errors import IntegrityError, ValidationError
from plaudit.events import Event, Prepared, StoredEvent, encode_json
from plaudit.store.chain import GENESIS
from plaudit.store.checkpoints import Checkpoint, parse_checkpoint
from plaudit.store.keys import fingerprint, load_public_key
from plaudit.store.merkle import (
    inclusion_path_length,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)

PROOF_FORMAT = "plaudit-proof v1"
CONSISTENCY_FORMAT = "plaudit-consistency v1"
#: A bundle holds one event (at most ~2 MiB of payload and meta) and a few KiB besides.
MAX_BUNDLE_BYTES = 8 << 20
_HEX32 = re.compile(r"[0-9a-f]{64}")

Failure = Literal["format", "key", "signature", "leaf", "path", "root"]


class BundleEvent(msgspec.Struct, forbid_unknown_fields=True):
    """The event as stored: `payload_json` and `meta_json` are the exact hashed text."""

    seq: int
    id: str
    type: str
    ts_ms: int
    session_id: str
    source: str
    payload_json: str
    meta_json: str


class ProofBundle(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    event: BundleEvent
    prev_hash: str
    chain_hash: str
    leaf_hash: str
    audit_path: list[str]
    checkpoint: str
    public_key: str
    key_fingerprint: str


class ConsistencyBundle(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    old_size: int
    old_root: str
    proof: list[str]
    checkpoint: str
    public_key: str
    key_fingerprint: str


class ProofReport(msgspec.Struct):
    ok: bool
    #: What failed, when it did: the bundle's form, the key, the checkpoint's signature, the
    #: event's leaf, the audit path's shape, or the root the path leads to.
    failed: Failure | None = None
    message: str = ""
    event_id: str | None = None
    seq: int | None = None
    tree_size: int | None = None
    root: str | None = None
    fingerprint: str | None = None
    #: True when the key was given by the checker, not only taken from the bundle.
    key_pinned: bool = False


def event_body(ev: BundleEvent) -> bytes:
    """The bytes the hash chain covers, by the log's own definition (`Prepared.body`)."""
    e = Event(
        id=ev.id,
        type=ev.type,
        ts_ms=ev.ts_ms,
        session_id=ev.session_id,
        source=ev.source,
        payload={},
    )
    return Prepared(e, ev.payload_json, ev.meta_json, b"").body()


def bundle_event(
    event: StoredEvent, *, payload_json: str | None = None, meta_json: str | None = None
) -> BundleEvent:
    """A stored event as a bundle carries it. Pass the stored texts when you have them; else
    they are re-encoded canonically, which is what the log stored."""
    return BundleEvent(
        seq=event.seq,
        id=event.id,
        type=event.type,
        ts_ms=event.ts_ms,
        session_id=event.session_id,
        source=event.source,
        payload_json=encode_json(event.payload) if payload_json is None else payload_json,
        meta_json=(encode_json(event.meta) if event.meta else "{}")
        if meta_json is None
        else meta_json,
    )


def build_proof(
    event: BundleEvent | StoredEvent,
    *,
    prev_hash: bytes,
    audit_path: Sequence[bytes],
    checkpoint: Checkpoint,
    public_key: bytes,
) -> bytes:
    """The encoded bundle for `event` (a `StoredEvent` or a `BundleEvent`).

    The bundle is checked before it is returned: a store that would hand out a proof that
    does not hold (a damaged row, a stale checkpoint) gets an IntegrityError instead.
    """
    ev = bundle_event(event) if isinstance(event, StoredEvent) else event
    chain = hashlib.sha256(prev_hash + event_body(ev)).digest()
    bundle = ProofBundle(
        format=PROOF_FORMAT,
        event=ev,
        prev_hash=prev_hash.hex(),
        chain_hash=chain.hex(),
        leaf_hash=leaf_hash(chain).hex(),
        audit_path=[p.hex() for p in audit_path],
        checkpoint=checkpoint.to_text(),
        public_key=public_key.hex(),
        key_fingerprint=fingerprint(public_key),
    )
    data = msgspec.json.encode(bundle) + b"\n"
    if isinstance(event, StoredEvent) and event.hash and event.hash != chain.hex():
        raise IntegrityError(
            f"event {ev.id} at position {ev.seq}: its fields and the previous hash give "
            f"chain hash {chain.hex()}, the log stores {event.hash}"
        )
    report = check_proof(data)
    if not report.ok:
        raise IntegrityError(f"cannot build a proof for event {ev.id}: {report.message}")
    return data


def _fail(report: ProofReport, failed: Failure, message: str) -> ProofReport:
    report.ok, report.failed, report.message = False, failed, message
    return report


def _hex32(value: str) -> bytes | None:
    return bytes.fromhex(value) if _HEX32.fullmatch(value) else None


def _key_and_checkpoint(
    report: ProofReport,
    fmt: str,
    want_fmt: str,
    public_key: str,
    key_fp: str,
    checkpoint: str,
    trusted_key: bytes | None,
) -> Checkpoint | None:
    """Checks shared by both bundles; None after recording a failure in `report`."""
    if fmt != want_fmt:
        _fail(report, "format", f"format is {fmt!r}, expected {want_fmt!r}")
        return None
    key = _hex32(public_key)
    if key is None:
        _fail(report, "format", "public_key is not 64 lowercase hex digits")
        return None
    report.fingerprint = fingerprint(key)
    if key_fp != report.fingerprint:
        _fail(report, "key", "key_fingerprint is not the SHA-256 of public_key")
        return None
    if trusted_key is not None:
        report.key_pinned = True
        if key != trusted_key:
            _fail(
                report,
                "key",
                f"the bundle is signed by key {report.fingerprint}, "
                f"not by the trusted key {fingerprint(trusted_key)}",
            )
            return None
    try:
        ck = parse_checkpoint(checkpoint, where="bundle checkpoint")
    except ValidationError as exc:
        _fail(report, "format", str(exc))
        return None
    report.tree_size, report.root = ck.size, ck.root.hex()
    try:
        ck.verify(key)
    except IntegrityError as exc:
        _fail(report, "signature", str(exc))
        return None
    return ck


def _decode(data: bytes, kind: type[msgspec.Struct], report: ProofReport) -> msgspec.Struct | None:
    if len(data) > MAX_BUNDLE_BYTES:
        _fail(report, "format", f"larger than {MAX_BUNDLE_BYTES} bytes: not a proof bundle")
        return None
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        _fail(report, "format", f"not a well-formed bundle: {exc}")
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        _fail(report, "format", f"not valid JSON: {exc}")
    return None


class _Format(msgspec.Struct):
    format: str = ""


def check_proof(data: bytes, *, trusted_key: bytes | None = None) -> ProofReport:
    """Check an encoded bundle of either kind (`plaudit log prove`'s inclusion proof, or
    `plaudit log consistency`'s), chosen by its `format`; never raises for what it holds."""
    try:
        fmt = msgspec.json.decode(data[:MAX_BUNDLE_BYTES], type=_Format).format
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        fmt = ""
    if fmt == CONSISTENCY_FORMAT:
        return check_consistency(data, trusted_key=trusted_key)
    return _check_inclusion(data, trusted_key)


def _check_inclusion(data: bytes, trusted_key: bytes | None) -> ProofReport:
    report = ProofReport(ok=False)
    b = _decode(data, ProofBundle, report)
    if not isinstance(b, ProofBundle):
        return report
    ev = b.event
    report.event_id, report.seq = ev.id, ev.seq
    ck = _key_and_checkpoint(
        report, b.format, PROOF_FORMAT, b.public_key, b.key_fingerprint, b.checkpoint, trusted_key
    )
    if ck is None:
        return report
    prev, chain, leaf = _hex32(b.prev_hash), _hex32(b.chain_hash), _hex32(b.leaf_hash)
    path = [_hex32(p) for p in b.audit_path]
    if prev is None or chain is None or leaf is None:
        return _fail(report, "format", "prev_hash, chain_hash and leaf_hash must be 64 hex digits")
    if any(p is None for p in path):
        return _fail(report, "path", "every audit_path entry must be 64 lowercase hex digits")
    if ev.seq < 1:
        return _fail(report, "leaf", f"event position {ev.seq} is not a log position (1, 2, ...)")
    if ev.seq == 1 and prev != GENESIS:
        return _fail(report, "leaf", "the first event must chain from the log's genesis hash")
    try:
        body = event_body(ev)
    except UnicodeEncodeError:
        return _fail(report, "leaf", "the event's fields are not valid Unicode text")
    if hashlib.sha256(prev + body).digest() != chain:
        return _fail(
            report, "leaf", "the event's fields and prev_hash do not hash to its chain_hash"
        )
    if leaf_hash(chain) != leaf:
        return _fail(report, "leaf", "leaf_hash is not SHA-256(0x00 || chain_hash)")
    index = ev.seq - 1
    if index >= ck.size:
        return _fail(
            report, "path", f"position {ev.seq} is beyond the checkpoint's {ck.size} events"
        )
    want = inclusion_path_length(index, ck.size)
    if len(path) != want:
        return _fail(
            report,
            "path",
            f"the audit path has {len(path)} hashes; leaf {index} of a tree of {ck.size} "
            f"needs {want}",
        )
    if not verify_inclusion(index, ck.size, leaf, path, ck.root):  # type: ignore[arg-type]
        return _fail(
            report,
            "root",
            f"the leaf and audit path do not lead to the signed root {ck.root.hex()}",
        )
    report.ok = True
    report.message = (
        f"event {ev.id} is entry {ev.seq} of the log {report.fingerprint[:16]}... "
        f"of {ck.size} events (root {ck.root.hex()[:16]}..., signed)"
    )
    return report


def build_consistency(
    old_size: int,
    old_root: bytes,
    proof: Sequence[bytes],
    checkpoint: Checkpoint,
    public_key: bytes,
) -> bytes:
    """The encoded proof that the log at `checkpoint` extends an older tree (old_size, old_root)."""
    bundle = ConsistencyBundle(
        format=CONSISTENCY_FORMAT,
        old_size=old_size,
        old_root=old_root.hex(),
        proof=[p.hex() for p in proof],
        checkpoint=checkpoint.to_text(),
        public_key=public_key.hex(),
        key_fingerprint=fingerprint(public_key),
    )
    return msgspec.json.encode(bundle) + b"\n"


def check_consistency(
    data: bytes, *, trusted_key: bytes | None = None, old: Checkpoint | None = None
) -> ProofReport:
    """Check a consistency bundle; with `old`, also that it starts from that checkpoint."""
    report = ProofReport(ok=False)
    b = _decode(data, ConsistencyBundle, report)
    if not isinstance(b, ConsistencyBundle):
        return report
    ck = _key_and_checkpoint(
        report,
        b.format,
        CONSISTENCY_FORMAT,
        b.public_key,
        b.key_fingerprint,
        b.checkpoint,
        trusted_key,
    )
    if ck is None:
        return report
    old_root = _hex32(b.old_root)
    proof = [_hex32(p) for p in b.proof]
    if old_root is None or any(p is None for p in proof):
        return _fail(report, "path", "old_root and every proof entry must be 64 hex digits")
    if old is not None and (old.size, old.root) != (b.old_size, old_root):
        return _fail(
            report,
            "root",
            f"the proof starts from size {b.old_size}, root {b.old_root[:16]}..., not from the "
            f"old checkpoint's size {old.size}, root {old.root.hex()[:16]}...",
        )
    if not verify_consistency(b.old_size, ck.size, old_root, ck.root, proof):  # type: ignore[arg-type]
        return _fail(
            report,
            "root",
            f"the proof does not show the tree of {ck.size} extending the tree of "
            f"{b.old_size} (root {b.old_root[:16]}...)",
        )
    report.ok = True
    report.message = f"the log of {ck.size} events extends its tree of {b.old_size} events"
    return report


def read_bundle(path: str | os.PathLike[str]) -> bytes:
    """A bundle file's bytes; ValidationError naming the file if it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BUNDLE_BYTES + 1)
    except FileNotFoundError:
        raise ValidationError("proof", f"{os.fspath(path)} does not exist") from None
    except IsADirectoryError:
        raise ValidationError("proof", f"{os.fspath(path)} is a directory") from None
    except OSError as exc:
        raise ValidationError(
            "proof", f"cannot read {os.fspath(path)}: {exc.strerror or exc}"
        ) from None
    return data


def check_proof_file(
    path: str | os.PathLike[str], *, key_path: str | os.PathLike[str] | None = None
) -> ProofReport:
    """`plaudit log check-proof`: read the key (if given: what `plaudit log key` prints, or a
    PEM or hex key) and the bundle (either kind), and check it."""
    trusted = None if key_path is None else load_public_key(key_path)
    return check_proof(read_bundle(path), trusted_key=trusted)


__all__ = [
    "CONSISTENCY_FORMAT",
    "PROOF_FORMAT",
    "BundleEvent",
    "ConsistencyBundle",
    "ProofBundle",
    "ProofReport",
    "build_consistency",
    "build_proof",
    "bundle_event",
    "check_consistency",
    "check_proof",
    "check_proof_file",
    "event_body",
    "read_bundle",
]
