"""C2SP signed notes (https://c2sp.org/signed-note): a text signed by one or more named keys.

A signed note is UTF-8 text with no control characters but newline: the note text (ending in a
newline), a blank line, then one or more signature lines `— <key name> <base64>`, where the
base64 holds a 4-byte key ID and the signature. A key is named to verifiers by a *verifier
key* string, `<name>+<8 hex digits of key ID>+<base64(signature type || public key)>`.

This module speaks the two signature types plaudit needs, both Ed25519:

* 0x01, Ed25519 over the note text (signed-note itself);
* 0x04, timestamped Ed25519 checkpoint cosignatures (https://c2sp.org/tlog-cosignature):
  the signature is an 8-byte big-endian POSIX time followed by an Ed25519 signature over
  `cosignature/v1\\ntime <t>\\n` and the note text. Verifying one is a note-level operation,
  so it lives here; signing one is a witness's act on a checkpoint (`tlog_checkpoint.py`).

Readers are strict: one spelling is accepted for every value (lowercase hex key IDs, canonical
padded base64), so a change to any byte of a note signed by known keys is either caught or
turns that signature into an unknown one, which the specification says to ignore.

Signer keys, `PRIVATE+KEY+<name>+<key ID>+base64(0x01 || 32-byte seed)`, are not part of the
C2SP text; they are the convention of Go's golang.org/x/mod/sumdb/note, kept for interop.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from plaudit.errors import IntegrityError, ValidationError

#: Signature type 0x01: Ed25519 over the note text.
ED25519 = 0x01
#: Signature type 0x04: timestamped Ed25519 checkpoint cosignature (tlog-cosignature).
COSIGNATURE_V1 = 0x04
SIGNATURE_TYPES = {ED25519: "Ed25519", COSIGNATURE_V1: "Ed25519 cosignature/v1"}

#: Default limits for reading a note. The specification asks verifiers to accept at least 16
#: signatures; Go's reader stops at 100, and so does this one.
MAX_SIGNATURES = 100
MAX_NOTE_BYTES = 1_000_000
#: The largest cosignature timestamp the specification allows.
MAX_TIMESTAMP = 2**63 - 1

_PUBLIC_KEY_SIZE = 32
_ED25519_SIG_SIZE = 64
_TIMESTAMP_SIZE = 8
_SIG_PREFIX = "\u2014 "  # em dash, space
_PRIVATE_PREFIX = "PRIVATE+KEY+"
_KEY_ID_RE = re.compile(r"[0-9a-f]{8}")
_BASE64_RE = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_CONTROL_RE = re.compile(r"[\x00-\x09\x0b-\x1f]")
#: Unicode's White_Space property: the "Unicode spaces" a key name must not contain.
_WHITE_SPACE = frozenset(
    [*map(chr, range(0x09, 0x0E)), " ", "\x85", "\xa0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)


class InvalidSignatureError(IntegrityError):
    """A signature by a known key did not verify: the note was changed or forged."""

    def __init__(self, where: str, signature: Signature) -> None:
        self.signature = signature
        super().__init__(
            f"{where}: the signature by {signature.label} does not verify: "
            "the note was changed after it was signed, or the signature is forged"
        )


class UnverifiedNoteError(IntegrityError):
    """No signature on a well-formed note is by a known key; `note` holds what was read."""

    def __init__(self, where: str, note: Note, known: Sequence[VerifierKey]) -> None:
        self.note = note
        found = ", ".join(s.label for s in note.signatures)
        wanted = ", ".join(k.label for k in known) or "none"
        super().__init__(
            f"{where}: no signature by a known key (signed by {found}; known keys: {wanted})"
        )


# -- names, key IDs, base64 ------------------------------------------------------------------


def check_key_name(name: object, *, field: str = "key name", where: str | None = None) -> str:
    """`name` if it is a valid key name: non-empty UTF-8, no Unicode space, no '+', no control
    character (a note may hold none); else a ValidationError naming the offending character."""
    if not isinstance(name, str) or not name:
        raise ValidationError(field, "must be a non-empty string", where=where)
    for ch in name:
        if ch in _WHITE_SPACE:
            why = f"contains a space character (U+{ord(ch):04X}); key names contain none"
        elif ch == "+":
            why = "contains '+', which separates the parts of a key string"
        elif ch < " ":
            why = f"contains the control character U+{ord(ch):04X}"
        elif "\ud800" <= ch <= "\udfff":
            why = "is not valid UTF-8 (it holds a lone surrogate)"
        else:
            continue
        shown = name if len(name) <= 64 else name[:61] + "..."
        raise ValidationError(field, f"{shown!r} {why}", where=where)
    return name


def key_id(name: str, sig_type: int, public_key: bytes) -> int:
    """The key ID: the first 4 bytes, big-endian, of SHA-256(name || 0x0A || type || key)."""
    check_key_name(name)
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def decode_base64(text: str) -> bytes | None:
    """The bytes of canonical standard padded base64 (RFC 4648 section 4), else None.

    Canonical means unused trailing bits are zero, so every byte string has one spelling."""
    if _BASE64_RE.fullmatch(text) is None:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        return None
    return raw if base64.b64encode(raw).decode() == text else None


def encode_base64(raw: bytes) -> str:
    """Standard padded base64 (RFC 4648 section 4), as text."""
    return base64.b64encode(raw).decode()


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The 32-byte RFC 8032 encoding of an Ed25519 public key (or a private key's)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# -- signatures over a note text ---------------------------------------------------------------


def cosignature_message(text: bytes, timestamp: int) -> bytes:
    """What a cosignature/v1 signs: header line, time line, then the checkpoint's note text."""
    return b"cosignature/v1\ntime %d\n" % timestamp + text


def _ed25519_ok(public_key: bytes, signature: bytes, message: bytes) -> bool:
    if len(signature) != _ED25519_SIG_SIZE:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass(frozen=True)
class VerifierKey:
    """A named public key and its signature type, as a verifier key string names it.

    Build one with `VerifierKey.ed25519(...)` or `parse_verifier_key(...)`; the constructor
    checks that the key ID is the one the name, type and key give."""

    name: str
    key_id: int
    sig_type: int
    public_key: bytes

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if self.sig_type not in SIGNATURE_TYPES:
            raise ValidationError("signature type", _unsupported(self.sig_type))
        if len(self.public_key) != _PUBLIC_KEY_SIZE:
            raise ValidationError(
                "public key", f"an Ed25519 key is 32 bytes, got {len(self.public_key)}"
            )
        want = key_id(self.name, self.sig_type, self.public_key)
        if self.key_id != want:
            raise ValidationError(
                "key ID",
                f"{self.key_id:08x} does not match the name and key (they give {want:08x})",
            )

    @classmethod
    def ed25519(
        cls, name: str, public_key: bytes | Ed25519PublicKey, sig_type: int = ED25519
    ) -> VerifierKey:
        """The verifier key for an Ed25519 public key (raw 32 bytes or a key object)."""
        if isinstance(public_key, Ed25519PublicKey):
            public_key = raw_public_key(public_key)
        return cls(name, key_id(name, sig_type, bytes(public_key)), sig_type, bytes(public_key))

    @property
    def label(self) -> str:
        """`<name>+<key ID>`: how messages name this key."""
        return f"{self.name}+{self.key_id:08x}"

    def __str__(self) -> str:
        """The verifier key string: `<name>+<key ID>+base64(type || public key)`."""
        return f"{self.label}+{encode_base64(bytes([self.sig_type]) + self.public_key)}"

    def verify(self, text: bytes, signature: bytes) -> bool:
        """Whether `signature` (the bytes after the key ID) is this key's over note `text`."""
        if self.sig_type == ED25519:
            return _ed25519_ok(self.public_key, signature, text)
        if len(signature) != _TIMESTAMP_SIZE + _ED25519_SIG_SIZE:
            return False
        timestamp = int.from_bytes(signature[:_TIMESTAMP_SIZE], "big")
        if timestamp > MAX_TIMESTAMP:
            return False
        message = cosignature_message(text, timestamp)
        return _ed25519_ok(self.public_key, signature[_TIMESTAMP_SIZE:], message)


def _unsupported(sig_type: int) -> str:
    known = ", ".join(f"0x{t:02x} {n}" for t, n in SIGNATURE_TYPES.items())
    return f"0x{sig_type:02x} is not supported here (supported: {known})"


def _split_key_string(text: str, where: str, *, secret: bool) -> tuple[str, int, bytes]:
    """`<name>+<key ID>+<base64>` into its parts, each checked. Errors never quote a part of
    a `secret` (signer) key, and never the key bytes of any."""
    if text != text.strip():
        raise ValidationError("format", "has leading or trailing whitespace", where=where)
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise ValidationError(
            "format", "must be '<name>+<8 hex digits>+<base64 key>' (three parts)", where=where
        )
    name, hex_id, b64 = parts
    try:
        check_key_name(name, field="name", where=where)
    except ValidationError:
        if not secret:
            raise
        raise ValidationError(
            "name",
            "is not a key name (non-empty, no spaces, '+' or control characters)",
            where=where,
        ) from None
    if _KEY_ID_RE.fullmatch(hex_id) is None:
        got = f"{len(hex_id)} characters" if secret else repr(hex_id)
        raise ValidationError("key ID", f"must be 8 lowercase hex digits, got {got}", where=where)
    raw = decode_base64(b64)
    if raw is None:
        raise ValidationError("key", "is not canonical padded base64", where=where)
    if not raw:
        raise ValidationError("key", "is empty", where=where)
    if raw[0] not in SIGNATURE_TYPES:
        raise ValidationError("signature type", _unsupported(raw[0]), where=where)
    if len(raw) != 1 + _PUBLIC_KEY_SIZE:
        raise ValidationError(
            "key",
            f"an Ed25519 key is 32 bytes after the type byte, got {len(raw) - 1}",
            where=where,
        )
    return name, int(hex_id, 16), raw


def parse_verifier_key(text: str, *, where: str = "verifier key") -> VerifierKey:
    """Read `<name>+<key ID>+base64(type || key)` strictly (types 0x01 and 0x04).

    The key ID must be the one the name, type and key give, as both specifications require."""
    if text.startswith(_PRIVATE_PREFIX):
        raise ValidationError(
            "format",
            "this is a private signer key (PRIVATE+KEY+...), not a verifier key",
            where=where,
        )
    name, claimed, raw = _split_key_string(text, where, secret=False)
    sig_type, public = raw[0], raw[1:]
    expected = key_id(name, sig_type, public)
    if claimed != expected:
        raise ValidationError(
            "key ID",
            f"{claimed:08x} does not match the name and key (they give {expected:08x}): "
            "the name, the ID or the key was changed",
            where=where,
        )
    return VerifierKey(name, claimed, sig_type, public)


# -- signers -----------------------------------------------------------------------------------


class Signer(Protocol):
    """Anything that signs a note text as one named key."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def sign(self, text: bytes) -> Signature: ...


class Ed25519Signer:
    """Signs note texts with an Ed25519 key under a key name (signature type 0x01)."""

    sig_type = ED25519

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        self.name = check_key_name(name)
        self._private = private_key
        self.verifier_key = VerifierKey.ed25519(name, raw_public_key(private_key), self.sig_type)
        self.key_id = self.verifier_key.key_id

    @classmethod
    def generate(cls, name: str) -> Ed25519Signer:
        return cls(name, Ed25519PrivateKey.generate())

    def sign(self, text: bytes) -> Signature:
        return Signature(self.name, self.key_id, self._private.sign(text))

    def signer_key(self) -> str:
        """Go's signer key string, `PRIVATE+KEY+<name>+<key ID>+base64(0x01 || seed)`: secret."""
        seed = self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        return (
            f"{_PRIVATE_PREFIX}{self.verifier_key.label}+{encode_base64(bytes([ED25519]) + seed)}"
        )

    def __repr__(self) -> str:  # never the private key
        return f"{type(self).__name__}({self.verifier_key.label!r})"


def parse_signer_key(text: str, *, where: str = "signer key") -> Ed25519Signer:
    """Read Go's `PRIVATE+KEY+<name>+<key ID>+base64(0x01 || 32-byte seed)` strictly.

    The key ID must be that of the public key the seed gives. Errors never quote the key."""
    if not text.startswith(_PRIVATE_PREFIX):
        raise ValidationError("format", "must start with 'PRIVATE+KEY+'", where=where)
    name, claimed, raw = _split_key_string(text[len(_PRIVATE_PREFIX) :], where, secret=True)
    if raw[0] != ED25519:
        raise ValidationError(
            "signature type", f"must be 0x01 (Ed25519), got 0x{raw[0]:02x}", where=where
        )
    signer = Ed25519Signer(name, Ed25519PrivateKey.from_private_bytes(raw[1:]))
    if signer.key_id != claimed:
        raise ValidationError(
            "key ID",
            f"{claimed:08x} does not match the key (it gives {signer.key_id:08x})",
            where=where,
        )
    return signer


# -- notes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One signature line: the key's name and ID and the signature bytes after the ID."""

    name: str
    key_id: int
    signature: bytes

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if not 0 <= self.key_id < 2**32:
            raise ValidationError("key ID", f"must fit in 32 bits, got {self.key_id}")
        if not self.signature:
            raise ValidationError("signature", "must not be empty")

    @property
    def label(self) -> str:
        return f"{self.name}+{self.key_id:08x}"

    def encoded(self) -> str:
        """base64(key ID || signature), as it stands in the signature line."""
        return encode_base64(self.key_id.to_bytes(4, "big") + self.signature)

    def line(self) -> str:
        """`— <name> <base64>` and a newline."""
        return f"{_SIG_PREFIX}{self.name} {self.encoded()}\n"


@dataclass(frozen=True)
class Note:
    """A note as written: its text (with the final newline) and its signatures, in order."""

    text: str
    signatures: tuple[Signature, ...]


@dataclass(frozen=True)
class VerifiedNote:
    """A note whose known signatures all verified: those, and the ones by unknown keys."""

    text: str
    verified: tuple[Signature, ...]
    unverified: tuple[Signature, ...]

    def signed_by(self, key: VerifierKey) -> bool:
        return any((s.name, s.key_id) == (key.name, key.key_id) for s in self.verified)


def check_note_text(text: str, *, where: str = "note text") -> bytes:
    """The UTF-8 bytes of `text` if it can be a note's text: it ends in a newline and holds
    no control character but newline. Else a ValidationError naming the line."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise ValidationError("text", "must be a string ending in a newline", where=where)
    _check_characters(utf8_text(text, "text", where=where), where)
    return text.encode()


def _check_characters(text: str, where: str) -> None:
    m = _CONTROL_RE.search(text)
    if m is not None:
        line = text.count("\n", 0, m.start()) + 1
        what = "a carriage return" if m.group() == "\r" else "a control character"
        raise ValidationError(
            f"line {line}",
            f"holds {what} (U+{ord(m.group()):04X}); notes allow no control character but newline",
            where=where,
        )


def format_note(text: str, signatures: Sequence[Signature]) -> bytes:
    """The signed note: text, a blank line, one line per signature (at least one)."""
    body = check_note_text(text)
    if not signatures:
        raise ValidationError("signatures", "a signed note needs at least one")
    return body + b"\n" + "".join(s.line() for s in signatures).encode()


def sign_note(text: str, *signers: Signer, existing: Sequence[Signature] = ()) -> bytes:
    """Sign `text` with every signer; `existing` signatures (say, from `parse_note`) are kept
    first, except those by a key that signs again here, as Go's note.Sign does."""
    body = check_note_text(text)
    fresh = [s.sign(body) for s in signers]
    resigned = {(s.name, s.key_id) for s in fresh}
    kept = [s for s in existing if (s.name, s.key_id) not in resigned]
    return format_note(text, kept + fresh)


def parse_signature_line(line: str, *, field: str = "signature line", where: str = "") -> Signature:
    """One `— <key name> <base64(key ID || signature)>` line, without its newline."""
    where = where or "signed note"
    if not line.startswith(_SIG_PREFIX):
        raise ValidationError(field, "must start with an em dash (U+2014) and a space", where=where)
    name, sep, b64 = line[len(_SIG_PREFIX) :].partition(" ")
    if not sep:
        raise ValidationError(field, "must be '— <key name> <base64 signature>'", where=where)
    check_key_name(name, field=f"{field} key name", where=where)
    raw = decode_base64(b64)
    if raw is None:
        raise ValidationError(field, "the signature is not canonical padded base64", where=where)
    if len(raw) < 5:
        raise ValidationError(
            field, f"the signature is {len(raw)} bytes: a 4-byte key ID and more", where=where
        )
    return Signature(name, int.from_bytes(raw[:4], "big"), raw[4:])


def utf8_text(data: bytes | str, field: str, *, where: str | None = None) -> str:
    """`data` as text if it is valid UTF-8 (a str must hold no lone surrogate), else a
    ValidationError giving the offset."""
    try:
        if isinstance(data, str):
            data.encode()
            return data
        return data.decode()
    except UnicodeError as e:
        unit = "character" if isinstance(data, str) else "byte"
        start = getattr(e, "start", 0)
        raise ValidationError(field, f"is not valid UTF-8 at {unit} {start}", where=where) from None


def _as_text(data: bytes | str, max_bytes: int, where: str) -> str:
    """The note as checked text; bytes are measured before they are decoded."""
    raw = data if isinstance(data, bytes) else utf8_text(data, "note", where=where).encode()
    if len(raw) > max_bytes:
        raise ValidationError(
            "note", f"is {len(raw)} bytes, more than the limit of {max_bytes}", where=where
        )
    text = utf8_text(raw, "note", where=where)
    _check_characters(text, where)
    return text


def parse_note(
    data: bytes | str,
    *,
    max_signatures: int = MAX_SIGNATURES,
    max_bytes: int = MAX_NOTE_BYTES,
    where: str = "signed note",
) -> Note:
    """Read a signed note's form, checking no signature: the text is everything up to the last
    blank line, and every line after it must be a signature line ending in a newline."""
    text = _as_text(data, max_bytes, where)
    split = text.rfind("\n\n")
    if split < 0:
        raise ValidationError("note", "has no blank line before its signatures", where=where)
    body, block = text[: split + 1], text[split + 2 :]
    if not block:
        raise ValidationError("note", "has no signature line after the blank line", where=where)
    if not block.endswith("\n"):
        raise ValidationError("note", "does not end with a newline", where=where)
    lines = block[:-1].split("\n")
    if len(lines) > max_signatures:
        raise ValidationError(
            "note",
            f"has {len(lines)} signatures, more than the limit of {max_signatures}",
            where=where,
        )
    sigs = tuple(
        parse_signature_line(line, field=f"signature line {i}", where=where)
        for i, line in enumerate(lines, 1)
    )
    return Note(body, sigs)


def _index_keys(known: Iterable[VerifierKey]) -> dict[tuple[str, int], VerifierKey]:
    index: dict[tuple[str, int], VerifierKey] = {}
    for key in known:
        other = index.setdefault((key.name, key.key_id), key)
        if other != key:
            raise ValidationError(
                "known keys", f"two different keys share the name and ID {key.label}"
            )
    return index


def open_note(
    data: bytes | str,
    known: VerifierKey | Iterable[VerifierKey],
    *,
    max_signatures: int = MAX_SIGNATURES,
    max_bytes: int = MAX_NOTE_BYTES,
    where: str = "signed note",
) -> VerifiedNote:
    """Read a note and verify it against the `known` keys, as the specification says: every
    signature whose name and key ID match a known key is verified, and one that fails rejects
    the note (InvalidSignatureError); signatures by other keys are ignored and returned as
    unverified; a note with no verified signature is rejected (UnverifiedNoteError).
    A malformed note is a ValidationError naming the line."""
    index = _index_keys([known] if isinstance(known, VerifierKey) else known)
    note = parse_note(data, max_signatures=max_signatures, max_bytes=max_bytes, where=where)
    body = note.text.encode()
    verified: list[Signature] = []
    unverified: list[Signature] = []
    for sig in note.signatures:
        key = index.get((sig.name, sig.key_id))
        if key is None:
            unverified.append(sig)
        elif key.verify(body, sig.signature):
            verified.append(sig)
        else:
            raise InvalidSignatureError(where, sig)
    if not verified:
        raise UnverifiedNoteError(where, note, list(index.values()))
    return VerifiedNote(note.text, tuple(verified), tuple(unverified))


__all__ = [
    "COSIGNATURE_V1",
    "ED25519",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "MAX_TIMESTAMP",
    "SIGNATURE_TYPES",
    "Ed25519Signer",
    "InvalidSignatureError",
    "Note",
    "Signature",
    "Signer",
    "UnverifiedNoteError",
    "VerifiedNote",
    "VerifierKey",
    "check_key_name",
    "check_note_text",
    "cosignature_message",
    "decode_base64",
    "encode_base64",
    "format_note",
    "key_id",
    "open_note",
    "parse_note",
    "parse_signature_line",
    "parse_signer_key",
    "parse_verifier_key",
    "raw_public_key",
    "sign_note",
    "utf8_text",
]
