"""Replacing the log's signing key: the one way, a signed and witnessed event.

`plaudit log key --new` (`EventLog.rotate_key`) makes a new key and appends a
`plaudit.log.key.v1` event naming the old and the new verifier keys, signed by the old key;
then it signs a checkpoint with the new key and copies it to every witness. From that event's
position on, checkpoints are the new key's; before it, the old key's.

Verify walks the rotations back from the key it holds (`KeyTimeline`): each must name the key
in force after it and carry a valid signature of the key it replaces, and each checkpoint must
be signed by the key in force at its size. An attacker with the database cannot add a
rotation to a key of their own: later checkpoints, signed by the real key and copied to the
witnesses, cover the event.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plaudit.errors import IntegrityError, PlauditError

if TYPE_CHECKING:
    from plaudit.store.backend import Tx
    from plaudit.store.keys import LogKey

ROTATION_TYPE = "plaudit.log.key.v1"


class RotationError(IntegrityError):
    """A key rotation event that does not check out, at `position`."""

    def __init__(self, position: int, message: str) -> None:
        self.position = position
        super().__init__(f"the key rotation at position {position} {message}")


def statement(old: str, new: str) -> bytes:
    """What the old key signs: both verifier key strings."""
    return f"plaudit key rotation\nold {old}\nnew {new}\n".encode()


def rotation_payload(old: LogKey, new: LogKey) -> dict[str, Any]:
    from plaudit.store.checkpoints import verifier_key

    old_vkey, new_vkey = str(verifier_key(old.public_key)), str(verifier_key(new.public_key))
    signature = old.sign(statement(old_vkey, new_vkey))
    return {"old": old_vkey, "new": new_vkey, "signature": base64.b64encode(signature).decode()}


class KeyTimeline:
    """Which key signs the checkpoints of each tree size: (from size, raw public key)."""

    def __init__(self, spans: Sequence[tuple[int, bytes]]) -> None:
        self.spans = list(spans)

    def key_at(self, size: int) -> bytes:
        current = self.spans[0][1]
        for start, key in self.spans:
            if size >= start:
                current = key
        return current

    @property
    def fingerprints(self) -> list[str]:
        from plaudit.store.keys import fingerprint

        return [fingerprint(k) for _, k in reversed(self.spans)]


def timeline(tx: Tx, current: bytes) -> KeyTimeline:
    """The keys in force over the log, from its rotation events back from `current`; raises
    IntegrityError naming the position of a rotation that does not check out."""
    from plaudit.store.checkpoints import verifier_key
    from plaudit.store.signed_note import parse_verifier_key
    from plaudit.store.view import LogView

    rotations = [(e.seq, e.payload) for e in LogView(tx).scan(types=[ROTATION_TYPE])]
    spans: list[tuple[int, bytes]] = []
    key = current
    for seq, payload in reversed(rotations):
        try:
            old = parse_verifier_key(str(payload.get("old")), where=f"key rotation at {seq}")
            new = parse_verifier_key(str(payload.get("new")), where=f"key rotation at {seq}")
            signature = base64.b64decode(str(payload.get("signature")), validate=True)
        except (PlauditError, ValueError) as exc:
            raise RotationError(seq, f"is malformed: {exc}") from None
        if new.public_key != key or str(new) != str(verifier_key(key)):
            raise RotationError(seq, "names a new key that is not the key in force after it")
        if not old.verify(statement(str(old), str(new)), signature):
            raise RotationError(seq, "is not signed by the key it replaces")
        spans.append((seq, key))
        key = old.public_key
    spans.append((0, key))
    return KeyTimeline(list(reversed(spans)))
