"""C2SP checkpoints (https://c2sp.org/tlog-checkpoint) and their Ed25519 cosignatures
(https://c2sp.org/tlog-cosignature).

A checkpoint is a signed note whose text is a log's tree head:

    <origin>
    <tree size, decimal, no leading zeros>
    <root hash of the RFC 6962 tree, base64>
    [extension lines, each non-empty]

The log signs it as a signed note (Ed25519, type 0x01; its key name should be the origin). A
witness that has checked the checkpoint is consistent with what it saw before adds a
*cosignature*: a signature line of type 0x04 whose bytes are an 8-byte big-endian POSIX time
and an Ed25519 signature over `cosignature/v1`, `time <t>` and the checkpoint's text.

`Checkpoint` builds and strictly reads the text; `sign_checkpoint` / `open_checkpoint` sign and
verify the note; `Cosigner` is a witness's key.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from plaudit.errors import IntegrityError, ValidationError
from plaudit.store.signed_note import (
    COSIGNATURE_V1,
    MAX_NOTE_BYTES,
    MAX_TIMESTAMP,
    Signature,
    Signer,
    VerifiedNote,
    VerifierKey,
    check_key_name,
    cosignature_message,
    decode_base64,
    encode_base64,
    open_note,
    raw_public_key,
    sign_note,
    utf8_text,
)

#: Tree sizes are unsigned 64-bit numbers (tlog-cosignature's binary form holds them so).
MAX_TREE_SIZE = 2**64 - 1
#: The root is a SHA-256 hash, as in RFC 6962.
ROOT_HASH_SIZE = 32
_SIZE_RE = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class Checkpoint:
    """A log's tree head: origin, tree size, root hash and optional extension lines.

    The constructor checks every field, so a `Checkpoint` always has exactly one text."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "origin (line 1)")
        if type(self.size) is not int or not 0 <= self.size <= MAX_TREE_SIZE:
            raise ValidationError(
                "tree size", f"must be an integer in 0..2^64-1, got {self.size!r}"
            )
        if type(self.root_hash) is not bytes or len(self.root_hash) != ROOT_HASH_SIZE:
            raise ValidationError("root hash", "must be 32 bytes (a SHA-256 hash)")
        if not isinstance(self.extensions, tuple):
            raise ValidationError("extensions", "must be a tuple of lines")
        for i, line in enumerate(self.extensions, 1):
            _check_line(line, f"extension line {i} (line {i + 3})")

    def text(self) -> str:
        """The note text: one line per field, each ending in a newline."""
        lines = (self.origin, str(self.size), encode_base64(self.root_hash), *self.extensions)
        return "".join(f"{line}\n" for line in lines)


def _check_line(line: object, field: str) -> None:
    """A line of a note's text: non-empty, UTF-8, no control character (nor newline)."""
    if not isinstance(line, str) or not line:
        raise ValidationError(field, "must be a non-empty line")
    bad = next((c for c in line if c < " "), None)
    if bad is not None:
        raise ValidationError(field, f"holds the control character U+{ord(bad):04X}")
    utf8_text(line, field)


def parse_checkpoint(text: str | bytes, *, where: str = "checkpoint") -> Checkpoint:
    """Read a checkpoint's note text strictly: at least three non-empty lines, each ending in a
    newline; a decimal size without leading zeros; a canonical base64 32-byte root."""
    text = utf8_text(text, "checkpoint", where=where)
    if not text.endswith("\n"):
        raise ValidationError("checkpoint", "must end with a newline", where=where)
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise ValidationError(
            "checkpoint",
            f"has {len(lines)} line(s); it needs origin, tree size and root hash",
            where=where,
        )
    for i, line in enumerate(lines, 1):
        if not line:
            raise ValidationError(f"line {i}", "is empty; checkpoint lines never are", where=where)
    origin, size, root, *extensions = lines
    if _SIZE_RE.fullmatch(size) is None:
        raise ValidationError(
            "tree size (line 2)",
            f"must be decimal digits without leading zeros, got {size!r}",
            where=where,
        )
    if int(size) > MAX_TREE_SIZE:
        raise ValidationError("tree size (line 2)", "is larger than 2^64-1", where=where)
    raw = decode_base64(root)
    if raw is None or len(raw) != ROOT_HASH_SIZE:
        raise ValidationError(
            "root hash (line 3)", "must be the canonical base64 of 32 bytes", where=where
        )
    try:
        return Checkpoint(origin, int(size), raw, tuple(extensions))
    except ValidationError as e:
        raise ValidationError(e.field, e.reason, where=where) from None


def sign_checkpoint(
    checkpoint: Checkpoint, *signers: Signer, existing: Sequence[Signature] = ()
) -> bytes:
    """The signed checkpoint note: the log's signature (and any cosigner's) over its text."""
    return sign_note(checkpoint.text(), *signers, existing=existing)


@dataclass(frozen=True)
class OpenedCheckpoint:
    """A checkpoint whose log signature verified, and the note it came in."""

    checkpoint: Checkpoint
    note: VerifiedNote

    def cosigned_at(self, witness: VerifierKey) -> int | None:
        """When `witness` cosigned this checkpoint (POSIX seconds), or None if it did not."""
        if witness.sig_type != COSIGNATURE_V1:
            raise ValidationError("witness key", f"{witness.label} is not a cosignature key")
        for sig in self.note.verified:
            if (sig.name, sig.key_id) == (witness.name, witness.key_id):
                return cosignature_timestamp(sig)
        return None


def open_checkpoint(
    note: bytes | str,
    log_keys: VerifierKey | Iterable[VerifierKey],
    *,
    witnesses: Iterable[VerifierKey] = (),
    origin: str | None = None,
    max_bytes: int = MAX_NOTE_BYTES,
    where: str = "checkpoint",
) -> OpenedCheckpoint:
    """Verify a signed checkpoint: every signature by a log key or a witness is checked, at
    least one log key must have signed, and the text must be a checkpoint (for `origin`, if
    given). Signatures by other keys are ignored, as the specification requires."""
    logs = [log_keys] if isinstance(log_keys, VerifierKey) else list(log_keys)
    cosigners = list(witnesses)
    for key in cosigners:
        if key.sig_type != COSIGNATURE_V1:
            raise ValidationError(
                "witness key", f"{key.label} is not a cosignature (type 0x04) key", where=where
            )
    opened = open_note(note, logs + cosigners, max_bytes=max_bytes, where=where)
    log_ids = {(k.name, k.key_id) for k in logs}
    if not any((s.name, s.key_id) in log_ids for s in opened.verified):
        labels = ", ".join(k.label for k in logs)
        raise IntegrityError(f"{where}: no signature by the log's key ({labels})")
    checkpoint = parse_checkpoint(opened.text, where=where)
    if origin is not None and checkpoint.origin != origin:
        raise IntegrityError(f"{where}: it is for the log {checkpoint.origin!r}, not {origin!r}")
    return OpenedCheckpoint(checkpoint, opened)


# -- cosignatures ------------------------------------------------------------------------------


def cosignature_timestamp(signature: Signature) -> int:
    """The POSIX time a cosignature/v1 signature line carries (its first 8 bytes)."""
    if len(signature.signature) != 72:
        raise ValidationError(
            "cosignature", f"is {len(signature.signature)} bytes after the key ID, not 72"
        )
    timestamp = int.from_bytes(signature.signature[:8], "big")
    if timestamp > MAX_TIMESTAMP:
        raise ValidationError("cosignature", "its timestamp is larger than 2^63-1")
    return timestamp


class Cosigner:
    """A witness's Ed25519 key: cosigns checkpoints (signature type 0x04).

    The cosigned message does not name the cosigner, so the specification asks that one key
    serve one cosigner only."""

    sig_type = COSIGNATURE_V1

    def __init__(
        self,
        name: str,
        private_key: Ed25519PrivateKey,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = check_key_name(name)
        self._private = private_key
        self._clock = clock
        self.verifier_key = VerifierKey.ed25519(name, raw_public_key(private_key), COSIGNATURE_V1)
        self.key_id = self.verifier_key.key_id

    @classmethod
    def generate(cls, name: str) -> Cosigner:
        return cls(name, Ed25519PrivateKey.generate())

    def cosign(self, checkpoint: Checkpoint, timestamp: int | None = None) -> Signature:
        """The cosignature line for `checkpoint`, at `timestamp` (default: now, in seconds)."""
        if timestamp is None:
            timestamp = int(self._clock())
        if type(timestamp) is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
            raise ValidationError("timestamp", f"must be in 0..2^63-1, got {timestamp!r}")
        message = cosignature_message(checkpoint.text().encode(), timestamp)
        raw = timestamp.to_bytes(8, "big") + self._private.sign(message)
        return Signature(self.name, self.key_id, raw)

    def sign(self, text: bytes) -> Signature:
        """Cosign a checkpoint's note text now (the `Signer` protocol); other text is refused."""
        return self.cosign(parse_checkpoint(text, where="cosigned text"))

    def __repr__(self) -> str:  # never the private key
        return f"Cosigner({self.verifier_key.label!r})"


__all__ = [
    "MAX_TREE_SIZE",
    "ROOT_HASH_SIZE",
    "Checkpoint",
    "Cosigner",
    "OpenedCheckpoint",
    "cosignature_timestamp",
    "open_checkpoint",
    "parse_checkpoint",
    "sign_checkpoint",
]
