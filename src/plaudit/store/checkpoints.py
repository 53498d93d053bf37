"""Signed checkpoints: the log's size and tree root at a moment, signed by the log's key.

A checkpoint is a C2SP signed note (https://c2sp.org/signed-note) whose text is a C2SP tree
head (https://c2sp.org/tlog-checkpoint), so the tools transparency logs already use can check
a plaudit log (docs/proofs.md, "Checking a checkpoint with standard tools"):

    plaudit/<log fingerprint: 64 hex digits>        the origin, also the key's name
    <tree size, decimal>
    <tree root, base64>
    plaudit-time-ms <milliseconds since the epoch>  an extension line
    <empty line>
    — plaudit/<fingerprint> <base64(key ID || Ed25519 signature of the four lines above)>

The log's fingerprint is the SHA-256 of its raw public key; the key ID is C2SP's (the first
four bytes of SHA-256 of name, newline, 0x01 and the key). Witnesses may add their own
signature lines (cosignatures, https://c2sp.org/tlog-cosignature); readers ignore them.

Checkpoints written before plaudit used C2SP (`plaudit-checkpoint v1`, one `key value` per line
and a hex signature) are still read and verified: stores and witnesses keep them as they are.
"""

from __future__ import annotations

import re

import msgspec

from plaudit.errors import IntegrityError, ValidationError
from plaudit.store.keys import LogKey, fingerprint, verify_signature
from plaudit.store.signed_note import (
    ED25519,
    VerifierKey,
    decode_base64,
    encode_base64,
    key_id,
    parse_note,
)
from plaudit.store.tlog_checkpoint import Checkpoint as TreeHead
from plaudit.store.tlog_checkpoint import parse_checkpoint as parse_tree_head

CHECKPOINT_HEADER = "plaudit-checkpoint v1"
#: The extension line a plaudit checkpoint carries: when it was signed.
TIME_EXTENSION = "plaudit-time-ms"
_MAX_INT = 2**63 - 1
_V1_RE = re.compile(
    r"plaudit-checkpoint v1\n"
    r"log (?P<log>[0-9a-f]{64})\n"
    r"size (?P<size>0|[1-9][0-9]{0,18})\n"
    r"root (?P<root>[0-9a-f]{64})\n"
    r"time_ms (?P<time_ms>0|[1-9][0-9]{0,18})\n"
    r"\n"
    r"signature (?P<signature>[0-9a-f]{128})\n"
)
_ORIGIN_RE = re.compile(r"plaudit/(?P<log>[0-9a-f]{64})")
_TIME_RE = re.compile(rf"{TIME_EXTENSION} (?P<t>0|[1-9][0-9]{{0,18}})")


def origin_of(log: str) -> str:
    """The origin line (and key name) of the log with this fingerprint."""
    return f"plaudit/{log}"


def verifier_key(public_key: bytes) -> VerifierKey:
    """The C2SP verifier key of a log's public key: print it with `str()`."""
    return VerifierKey.ed25519(origin_of(fingerprint(public_key)), public_key)


class Checkpoint(msgspec.Struct, frozen=True):
    """A signed tree head. `root` and `signature` are raw bytes; `key_id` is the C2SP key ID of
    the signing key (None: a checkpoint of the older `plaudit-checkpoint v1` format)."""

    log: str
    size: int
    root: bytes
    time_ms: int
    signature: bytes
    key_id: int | None = None

    def message(self) -> bytes:
        """The signed bytes: the note's text (its lines before the empty line)."""
        if self.key_id is None:
            return _v1_message(self.log, self.size, self.root, self.time_ms)
        return _c2sp_text(self.log, self.size, self.root, self.time_ms)

    def to_text(self) -> str:
        """The checkpoint as it is stored and copied to witnesses: the signed note."""
        if self.key_id is None:
            return f"{self.message().decode()}\nsignature {self.signature.hex()}\n"
        sig = encode_base64(self.key_id.to_bytes(4, "big") + self.signature)
        return f"{self.message().decode()}\n\u2014 {origin_of(self.log)} {sig}\n"

    def verify(self, public_key: bytes) -> None:
        """Raise IntegrityError unless `public_key` is this log's and signed this checkpoint."""
        if fingerprint(public_key) != self.log:
            raise IntegrityError(
                f"checkpoint of size {self.size} names log {self.log[:16]}..., "
                f"not the key's {fingerprint(public_key)[:16]}..."
            )
        if self.key_id is not None and self.key_id != key_id(
            origin_of(self.log), ED25519, public_key
        ):
            raise IntegrityError(f"checkpoint of size {self.size}: its key ID is not the key's")
        if not verify_signature(public_key, self.signature, self.message()):
            raise IntegrityError(
                f"checkpoint of size {self.size}: the signature does not match its contents"
            )


def _v1_message(log: str, size: int, root: bytes, time_ms: int) -> bytes:
    return (
        f"{CHECKPOINT_HEADER}\nlog {log}\nsize {size}\nroot {root.hex()}\ntime_ms {time_ms}\n"
    ).encode()


def _c2sp_text(log: str, size: int, root: bytes, time_ms: int) -> bytes:
    head = TreeHead(origin_of(log), size, root, (f"{TIME_EXTENSION} {time_ms}",))
    return head.text().encode()


def checkpoint_message(log: str, size: int, root: bytes, time_ms: int) -> bytes:
    """The text a checkpoint of these values signs."""
    return _c2sp_text(log, size, root, time_ms)


def sign_checkpoint(key: LogKey, size: int, root: bytes, time_ms: int) -> Checkpoint:
    """Sign (size, root, time) as the log `key` names, as a C2SP checkpoint."""
    if type(size) is not int or not 0 <= size <= _MAX_INT:
        raise ValidationError("size", f"must be an integer in 0..2^63-1, got {size!r}")
    if type(time_ms) is not int or not 0 <= time_ms <= _MAX_INT:
        raise ValidationError("time_ms", f"must be an integer in 0..2^63-1, got {time_ms!r}")
    if type(root) is not bytes or len(root) != 32:
        raise ValidationError("root", "must be 32 bytes")
    text = _c2sp_text(key.fingerprint, size, root, time_ms)
    kid = key_id(origin_of(key.fingerprint), ED25519, key.public_key)
    return Checkpoint(key.fingerprint, size, root, time_ms, key.sign(text), kid)


def parse_checkpoint(text: str | bytes, *, where: str = "checkpoint") -> Checkpoint:
    """Read a checkpoint note (C2SP, or the older v1 format); ValidationError naming `where`
    unless it is exactly well formed. This checks the form only; `Checkpoint.verify` checks
    the signature. Signature lines of other keys (a witness's cosignature) are ignored."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("checkpoint", "is not UTF-8 text", where=where) from None
    if text.startswith(CHECKPOINT_HEADER + "\n"):
        return _parse_v1(text, where)
    note = parse_note(text, where=where)
    head = parse_tree_head(note.text, where=where)
    m = _ORIGIN_RE.fullmatch(head.origin)
    if m is None:
        raise ValidationError(
            "checkpoint", "line 1 should be the origin plaudit/<64 hex digits>", where=where
        )
    times = [_TIME_RE.fullmatch(x) for x in head.extensions]
    if len(times) != 1 or times[0] is None:
        raise ValidationError(
            "checkpoint", f"line 4 should be '{TIME_EXTENSION} <decimal>' and the last", where=where
        )
    time_ms = int(times[0]["t"])
    ours = [s for s in note.signatures if s.name == head.origin]
    if len(ours) != 1 or len(ours[0].signature) != 64:
        raise ValidationError(
            "checkpoint", f"needs one Ed25519 signature by {head.origin}", where=where
        )
    if head.size > _MAX_INT or time_ms > _MAX_INT:
        raise ValidationError("checkpoint", "size or time exceeds 2^63-1", where=where)
    return Checkpoint(
        m["log"], head.size, head.root_hash, time_ms, ours[0].signature, ours[0].key_id
    )


def _parse_v1(text: str, where: str) -> Checkpoint:
    m = _V1_RE.fullmatch(text)
    if m is None:
        raise ValidationError("checkpoint", _describe_v1(text), where=where)
    size, time_ms = int(m["size"]), int(m["time_ms"])
    if size > _MAX_INT or time_ms > _MAX_INT:
        raise ValidationError("checkpoint", "size or time_ms exceeds 2^63-1", where=where)
    return Checkpoint(
        m["log"], size, bytes.fromhex(m["root"]), time_ms, bytes.fromhex(m["signature"])
    )


_EXPECTED_V1 = (
    ("plaudit-checkpoint v1", re.compile(r"plaudit-checkpoint v1")),
    ("log <64 hex digits>", re.compile(r"log [0-9a-f]{64}")),
    ("size <decimal>", re.compile(r"size (0|[1-9][0-9]{0,18})")),
    ("root <64 hex digits>", re.compile(r"root [0-9a-f]{64}")),
    ("time_ms <decimal>", re.compile(r"time_ms (0|[1-9][0-9]{0,18})")),
    ("an empty line", re.compile(r"")),
    ("signature <128 hex digits>", re.compile(r"signature [0-9a-f]{128}")),
)


def _describe_v1(text: str) -> str:
    """Which line of a malformed v1 note is wrong, for the error message."""
    lines = text.split("\n")
    for i, (want, rx) in enumerate(_EXPECTED_V1):
        if i >= len(lines) or (i == len(lines) - 1 and lines[i] == ""):
            return f"is truncated: line {i + 1} should be {want!r}"
        if rx.fullmatch(lines[i]) is None:
            if i == len(lines) - 1:  # the text stops inside this line
                return f"is truncated in line {i + 1}, which should be {want!r}"
            return f"line {i + 1} should be {want!r}"
    if len(lines) != len(_EXPECTED_V1) + 1 or lines[-1] != "":
        return f"should end after line {len(_EXPECTED_V1)} with a newline"
    return "is not a plaudit checkpoint"


__all__ = [
    "CHECKPOINT_HEADER",
    "Checkpoint",
    "checkpoint_message",
    "decode_base64",
    "origin_of",
    "parse_checkpoint",
    "sign_checkpoint",
    "verifier_key",
]
