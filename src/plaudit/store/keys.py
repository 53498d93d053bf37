"""The log's Ed25519 signing key: how it is read and made, and how others name it.

One key signs every checkpoint of one log. It lives outside the database's folder, where the
database's writer does not reach: by default in the user's config directory, one file per
store, mode 0600, made with the log's first checkpoint and never overwritten
(`plaudit.store.trust_paths`, `Checkpointer.key`); or it comes from `$PLAUDIT_SIGNING_KEY` (a
path, or the PEM text itself) or a file the user names. Hosts sharing a PostgreSQL database
share one key that way. A key that is missing where the log already has checkpoints is an
error, never a silent new identity. The log is known to the world by its fingerprint (the
SHA-256 of the raw 32-byte public key) and, in C2SP's terms, by its verifier key string
(`plaudit.store.checkpoints.verifier_key`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from plaudit.errors import ConfigError, ValidationError
from plaudit.store.atomic import fsync_dir, write_temp

ENV_SIGNING_KEY = "PLAUDIT_SIGNING_KEY"
_RAW = serialization.Encoding.Raw
_log = logging.getLogger("plaudit.keys")


def fingerprint(public_key: bytes) -> str:
    """The log's identity: sha256 of the raw public key, as 64 lowercase hex digits."""
    return hashlib.sha256(public_key).hexdigest()


class LogKey:
    """A signing key, with where it came from (for messages)."""

    def __init__(self, private: Ed25519PrivateKey, origin: str) -> None:
        self._private = private
        self.origin = origin
        self.public_key: bytes = private.public_key().public_bytes(
            _RAW, serialization.PublicFormat.Raw
        )
        self.fingerprint = fingerprint(self.public_key)

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def public_pem(self) -> str:
        return public_key_pem(self.public_key)

    def __repr__(self) -> str:  # never the private key
        return f"LogKey(fingerprint={self.fingerprint[:16]}..., origin={self.origin!r})"


def public_key_pem(public_key: bytes) -> str:
    return (
        Ed25519PublicKey.from_public_bytes(public_key)
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def verify_signature(public_key: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"signing key {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"signing key {path} is a directory, not a key file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read signing key {path}: {exc.strerror or exc}") from None


def _parse_private(pem: bytes, origin: str) -> LogKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        detail = "it is encrypted" if "encrypted" in str(exc).lower() else "it is not a PEM key"
        raise ConfigError(
            f"signing key {origin} is unreadable: {detail} "
            "(expected an unencrypted PKCS#8 Ed25519 private key)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"signing key {origin} is not an Ed25519 key")
    return LogKey(key, origin)


def load_signing_key(spec: str) -> LogKey:
    """A key given as a path or as PEM text (what `$PLAUDIT_SIGNING_KEY` holds)."""
    if spec.lstrip().startswith("-----BEGIN"):
        return _parse_private(spec.encode(), f"${ENV_SIGNING_KEY} (PEM text)")
    path = Path(spec).expanduser()
    key = _parse_private(_read(path), str(path))
    with contextlib.suppress(OSError):
        if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            _log.warning("signing key %s is readable by other users; chmod 600 it", path)
    return key


def write_key_file(path: Path, key: LogKey) -> None:
    """Write `key` to a new private file at `path` (never over an existing one)."""
    pem = key._private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    tmp = write_temp(path.parent, path.name, pem, 0o600)
    try:
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fsync_dir(path.parent)


def create_key_file(path: Path) -> LogKey:
    """Write a new key to `path` unless one is there; two racing processes end with one key.

    The key is written whole to a private temporary file and then hard-linked into place,
    which fails rather than replaces when `path` exists: an existing key is never
    overwritten, and a crash never leaves a half-written key under the real name.
    """
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    directory = path.parent
    try:
        tmp = write_temp(directory, path.name, pem, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot create signing key {path}: {exc.strerror or exc}") from None
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return load_signing_key(str(path))  # another process made it first: use theirs
        except OSError as exc:
            raise ConfigError(f"cannot create signing key {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fsync_dir(directory)
    key = LogKey(private, str(path))
    _log.info("created signing key %s (fingerprint %s)", path, key.fingerprint)
    return key


def load_public_key(path: str | os.PathLike[str]) -> bytes:
    """A trusted public key for `check-proof --key`: the output of `plaudit log key` saved to
    a file (its C2SP verifier key string line is read), a verifier key string alone, a PEM
    public or private key, or the raw key as 64 hex digits."""
    p = Path(path).expanduser()
    data = _read_public(p)
    text = data.strip()
    vkey = None if text.startswith(b"-----BEGIN") else _verifier_key_in(text, p)
    if vkey is not None:
        return vkey
    if text.startswith(b"-----BEGIN"):
        try:
            if b"PRIVATE" in text.split(b"\n", 1)[0]:
                key = serialization.load_pem_private_key(text, password=None).public_key()
            else:
                key = serialization.load_pem_public_key(text)
        except (ValueError, TypeError):
            raise ValidationError("key", f"{p} is not a readable PEM key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise ValidationError("key", f"{p} is not an Ed25519 key")
        return key.public_bytes(_RAW, serialization.PublicFormat.Raw)
    try:
        raw = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ValidationError(
            "key", f"{p} holds neither a PEM key nor a 64-hex-digit Ed25519 public key"
        )
    return raw


_VKEY_RE = re.compile(r"[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+")


def _verifier_key_in(text: bytes, path: Path) -> bytes | None:
    """The public key of the C2SP verifier key string in `text` (a line of its own, or a
    `key: value` line such as `plaudit log key` prints), or None when there is none."""
    from plaudit.store.signed_note import ED25519, parse_verifier_key

    for raw in text.decode("utf-8", "replace").splitlines():
        words = raw.split()
        candidate = words[-1] if words else ""  # `verifier_key <string>`, or the string alone
        if _VKEY_RE.fullmatch(candidate):
            vkey = parse_verifier_key(candidate, where=str(path))
            if vkey.sig_type != ED25519:
                raise ValidationError("key", f"{path}: not a log's Ed25519 verifier key")
            return vkey.public_key
    return None


def _read_public(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ValidationError("key", f"{path} does not exist") from None
    except IsADirectoryError:
        raise ValidationError("key", f"{path} is a directory") from None
    except OSError as exc:
        raise ValidationError("key", f"cannot read {path}: {exc.strerror or exc}") from None


__all__ = [
    "ENV_SIGNING_KEY",
    "LogKey",
    "create_key_file",
    "fingerprint",
    "load_public_key",
    "load_signing_key",
    "public_key_pem",
    "verify_signature",
]
