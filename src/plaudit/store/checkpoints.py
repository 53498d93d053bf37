"""Signed checkpoints: the log's size and tree root at a moment, signed by the log's key.

A checkpoint is a small text note, one `key value` per line so that a person, `grep` or any
language can read it, with a signature over its first five lines:

    plaudit-checkpoint v1
    log <fingerprint: 64 hex digits>
    size <tree size, decimal>
    root <tree root: 64 hex digits>
    time_ms <milliseconds since the epoch, decimal>
    <empty line>
    signature <Ed25519 signature of the first five lines, 128 hex digits>

Each line ends in "\\n", and the signed message is exactly the first five lines with their
line ends. There is one way to write each checkpoint (lowercase hex, no leading zeros, no
extra spaces); a parser refuses anything else, so no edit of a checkpoint goes unnoticed.
"""

from __future__ import annotations

import re

import msgspec

from plaudit.errors import IntegrityError, ValidationError
from plaudit.store.keys import LogKey, fingerprint, verify_signature

CHECKPOINT_HEADER = "plaudit-checkpoint v1"
_MAX_INT = 2**63 - 1
_LINE_RE = re.compile(
    r"plaudit-checkpoint v1\n"
    r"log (?P<log>[0-9a-f]{64})\n"
    r"size (?P<size>0|[1-9][0-9]{0,18})\n"
    r"root (?P<root>[0-9a-f]{64})\n"
    r"time_ms (?P<time_ms>0|[1-9][0-9]{0,18})\n"
    r"\n"
    r"signature (?P<signature>[0-9a-f]{128})\n"
)


class Checkpoint(msgspec.Struct, frozen=True):
    """A signed tree head. `root` and `signature` are raw bytes."""

    log: str
    size: int
    root: bytes
    time_ms: int
    signature: bytes

    def message(self) -> bytes:
        """The signed bytes: the note's first five lines."""
        return checkpoint_message(self.log, self.size, self.root, self.time_ms)

    def to_text(self) -> str:
        return f"{self.message().decode()}\nsignature {self.signature.hex()}\n"

    def verify(self, public_key: bytes) -> None:
        """Raise IntegrityError unless `public_key` is this log's and signed this checkpoint."""
        if fingerprint(public_key) != self.log:
            raise IntegrityError(
                f"checkpoint of size {self.size} names log {self.log[:16]}..., "
                f"not the key's {fingerprint(public_key)[:16]}..."
            )
        if not verify_signature(public_key, self.signature, self.message()):
            raise IntegrityError(
                f"checkpoint of size {self.size}: the signature does not match its contents"
            )


def checkpoint_message(log: str, size: int, root: bytes, time_ms: int) -> bytes:
    return (
        f"{CHECKPOINT_HEADER}\nlog {log}\nsize {size}\nroot {root.hex()}\ntime_ms {time_ms}\n"
    ).encode()


def sign_checkpoint(key: LogKey, size: int, root: bytes, time_ms: int) -> Checkpoint:
    """Sign (size, root, time) as the log `key` names."""
    if type(size) is not int or not 0 <= size <= _MAX_INT:
        raise ValidationError("size", f"must be an integer in 0..2^63-1, got {size!r}")
    if type(time_ms) is not int or not 0 <= time_ms <= _MAX_INT:
        raise ValidationError("time_ms", f"must be an integer in 0..2^63-1, got {time_ms!r}")
    if type(root) is not bytes or len(root) != 32:
        raise ValidationError("root", "must be 32 bytes")
    message = checkpoint_message(key.fingerprint, size, root, time_ms)
    return Checkpoint(key.fingerprint, size, root, time_ms, key.sign(message))


def parse_checkpoint(text: str | bytes, *, where: str = "checkpoint") -> Checkpoint:
    """Read a checkpoint note; ValidationError naming `where` unless it is exactly well formed.

    This checks the form only; `Checkpoint.verify` checks the signature.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("checkpoint", "is not UTF-8 text", where=where) from None
    m = _LINE_RE.fullmatch(text)
    if m is None:
        raise ValidationError("checkpoint", _describe(text), where=where)
    size, time_ms = int(m["size"]), int(m["time_ms"])
    if size > _MAX_INT or time_ms > _MAX_INT:
        raise ValidationError("checkpoint", "size or time_ms exceeds 2^63-1", where=where)
    return Checkpoint(
        m["log"], size, bytes.fromhex(m["root"]), time_ms, bytes.fromhex(m["signature"])
    )


_EXPECTED = (
    ("plaudit-checkpoint v1", re.compile(r"plaudit-checkpoint v1")),
    ("log <64 hex digits>", re.compile(r"log [0-9a-f]{64}")),
    ("size <decimal>", re.compile(r"size (0|[1-9][0-9]{0,18})")),
    ("root <64 hex digits>", re.compile(r"root [0-9a-f]{64}")),
    ("time_ms <decimal>", re.compile(r"time_ms (0|[1-9][0-9]{0,18})")),
    ("an empty line", re.compile(r"")),
    ("signature <128 hex digits>", re.compile(r"signature [0-9a-f]{128}")),
)


def _describe(text: str) -> str:
    """Which line of a malformed note is wrong, for the error message."""
    if not text:
        return "is empty"
    lines = text.split("\n")
    for i, (want, rx) in enumerate(_EXPECTED):
        if i >= len(lines) or (i == len(lines) - 1 and lines[i] == ""):
            return f"is truncated: line {i + 1} should be {want!r}"
        if rx.fullmatch(lines[i]) is None:
            if i == len(lines) - 1:  # the text stops inside this line
                return f"is truncated in line {i + 1}, which should be {want!r}"
            return f"line {i + 1} should be {want!r}"
    if len(lines) != len(_EXPECTED) + 1 or lines[-1] != "":
        return f"should end after line {len(_EXPECTED)} with a newline"
    return "is not a plaudit checkpoint"


__all__ = [
    "CHECKPOINT_HEADER",
    "Checkpoint",
    "checkpoint_message",
    "parse_checkpoint",
    "sign_checkpoint",
]
