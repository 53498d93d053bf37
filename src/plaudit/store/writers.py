"""Writers that sign: an event may carry its writer's Ed25519 signature over its content digest.

The chain, the checkpoints and the witnesses show that nobody edited or removed events;
receipts show that nobody dropped queued ones. Writer signatures close the last gap: a
database user who *inserts* an event (into the intake, or with a rewrite the witnesses would
catch) cannot sign it as a registered writer.

A writer's key is an Ed25519 key with a C2SP verifier key string
(`<name>+<key ID>+<base64 key>`). `Plaudit.open(..., writer_key=)` or `$PLAUDIT_WRITER_KEY`
(a path, or the PEM text) makes every event the handle appends carry
`meta["plaudit_writer"] = "<key ID, 8 hex digits>.<base64 signature>"`, signed over the
event's content digest: meta is in the chain hash but not the digest, so a retry is the same
event. `plaudit log writers add <verifier key>` registers a writer in the log (a
`plaudit.log.writer.v1` event), and `plaudit log verify --writers` reports every event that no
registered writer signed.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import ConfigError

if TYPE_CHECKING:
    from plaudit.events import Prepared
    from plaudit.store.signed_note import VerifierKey
    from plaudit.store.view import LogView

WRITER_TYPE = "plaudit.log.writer.v1"
META_KEY = "plaudit_writer"
ENV_WRITER_KEY = "PLAUDIT_WRITER_KEY"


class WriterKey:
    """A writer's signing key, with the name it is registered under."""

    def __init__(self, name: str, private: Any) -> None:
        from plaudit.store.signed_note import VerifierKey, raw_public_key

        self.name = name
        self._private = private
        self.verifier = VerifierKey.ed25519(name, raw_public_key(private.public_key()))

    def sign(self, prepared: Sequence[Prepared]) -> list[Prepared]:
        """The events, each with this writer's signature over its content digest in meta."""
        from plaudit.events import Prepared, encode_json

        out = []
        kid = f"{self.verifier.key_id:08x}"
        for p in prepared:
            sig = base64.b64encode(self._private.sign(p.content_digest)).decode()
            meta = {**p.event.meta, META_KEY: f"{kid}.{sig}"}
            event = msgspec.structs.replace(p.event, meta=meta)
            out.append(Prepared(event, p.payload_text, encode_json(meta), p.content_digest))
        return out

    def pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def new_writer_key(name: str) -> WriterKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from plaudit.store.signed_note import check_key_name

    return WriterKey(check_key_name(name, field="writer name"), Ed25519PrivateKey.generate())


def load_writer_key(spec: str | None = None) -> WriterKey | None:
    """The writer key a path or PEM text names (default: `$PLAUDIT_WRITER_KEY`), or None. The
    PEM's first line may be preceded by `name: <writer name>`; otherwise the file's stem."""
    spec = spec if spec is not None else os.environ.get(ENV_WRITER_KEY)
    if not spec:
        return None  # before importing cryptography: the hook path never pays for it
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if spec.lstrip().startswith(("-----BEGIN", "name:")):
        text, origin, stem = spec, f"${ENV_WRITER_KEY}", "writer"
    else:
        try:
            with open(os.path.expanduser(spec)) as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"writer key {spec}: {exc.strerror or exc}") from None
        origin, stem = spec, os.path.splitext(os.path.basename(spec))[0]
    name = stem
    if text.startswith("name:"):
        first, _, text = text.partition("\n")
        name = first[5:].strip()
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"writer key {origin} is not an unencrypted PEM key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"writer key {origin} is not an Ed25519 key")
    return WriterKey(name, key)


class WritersReport(msgspec.Struct):
    """`verify --writers`: events no registered writer signed (the first few, with why)."""

    checked: int
    registered: list[str]
    unsigned: int
    first: list[dict[str, Any]] = msgspec.field(default_factory=list)


def registered(view: LogView) -> list[VerifierKey]:
    from plaudit.store.signed_note import parse_verifier_key

    keys = []
    for e in view.scan(types=[WRITER_TYPE]):
        try:
            keys.append(parse_verifier_key(str(e.payload.get("key")), where=f"position {e.seq}"))
        except Exception:  # a malformed registration registers nobody
            continue
    return keys


def check_writers(view: LogView, rows: Iterable[tuple[Any, ...]]) -> WritersReport:
    """Check each (seq, id, meta JSON text, content digest) against the registered writers."""
    keys = {k.key_id: k for k in registered(view)}
    checked, unsigned, first = 0, 0, []
    for seq, id_, meta_text, digest in rows:
        checked += 1
        why = _why_unsigned(meta_text, bytes(digest), keys)
        if why is not None:
            unsigned += 1
            if len(first) < 10:
                first.append({"seq": int(seq), "id": id_, "why": why})
    return WritersReport(checked, [str(k) for k in keys.values()], unsigned, first)


def _why_unsigned(meta_text: str, digest: bytes, keys: dict[int, VerifierKey]) -> str | None:
    try:
        meta = msgspec.json.decode(meta_text)
        kid, _, sig = str(meta.get(META_KEY, "")).partition(".")
        key = keys.get(int(kid, 16)) if kid else None
        if not kid:
            return "no writer signature"
        if key is None:
            return f"signed by key {kid}, which is not registered"
        if not key.verify(digest, base64.b64decode(sig, validate=True)):
            return f"the signature of {key.name} does not match the event's content"
    except (msgspec.DecodeError, ValueError, AttributeError):
        return "malformed writer signature"
    return None
