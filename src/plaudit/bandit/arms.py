"""Arms: the prompt components the bandit chooses between, and how their ids are checked."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec

from plaudit.errors import ValidationError

ArmType = Literal["tool", "skill", "file", "memory", "section"]
Kind = Literal["curated", "learned"]

ARM_TYPES: tuple[str, ...] = ("tool", "skill", "file", "memory", "section")
#: Files are discovered from the workspace, so nothing vouches for them up front.
DEFAULT_KIND: dict[str, str] = {
    "tool": "curated",
    "skill": "curated",
    "file": "learned",
    "memory": "curated",
    "section": "curated",
}
MAX_ARM_ID = 512
MAX_CONTENT = 1 << 18  # 256 KiB of memory text or path per arm
MAX_TOKENS = 10_000_000

_CATEGORY_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def parse_arm_id(arm_id: Any, *, where: str | None = None) -> tuple[str, str, str]:
    """Split `type:category:name`; the name may itself contain colons (paths, URLs)."""
    if not isinstance(arm_id, str):
        raise ValidationError("id", f"must be a string, got {type(arm_id).__name__}", where=where)
    if len(arm_id) > MAX_ARM_ID:
        raise ValidationError("id", f"longer than {MAX_ARM_ID} characters", where=where)
    if _CONTROL_RE.search(arm_id):
        raise ValidationError("id", f"{arm_id!r} contains a control character", where=where)
    parts = arm_id.split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise ValidationError(
            "id",
            f"{arm_id!r} is not 'type:category:name' (e.g. 'tool:exec:Bash')",
            where=where,
        )
    type_, category, name = parts
    if type_ not in ARM_TYPES:
        raise ValidationError(
            "id",
            f"{arm_id!r} has unknown type {type_!r} (one of {', '.join(ARM_TYPES)})",
            where=where,
        )
    if not _CATEGORY_RE.match(category):
        raise ValidationError(
            "id",
            f"{arm_id!r}: category {category!r} may hold only letters, digits, '_', '.', '-'",
            where=where,
        )
    if name != name.strip():
        raise ValidationError("id", f"{arm_id!r}: name has leading or trailing space", where=where)
    return type_, category, name


class Arm(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One prompt component. `content` is memory text or a file path; used for detection."""

    id: str
    tokens: int
    content: str | None = None
    kind: str | None = None

    def __post_init__(self) -> None:
        parse_arm_id(self.id)
        if type(self.tokens) is not int:
            raise ValidationError(
                "tokens",
                f"{self.id}: must be an integer, got {type(self.tokens).__name__}",
            )
        if not 0 <= self.tokens <= MAX_TOKENS:
            raise ValidationError(
                "tokens", f"{self.id}: {self.tokens} is not between 0 and {MAX_TOKENS}"
            )
        if self.content is not None:
            if not isinstance(self.content, str):
                raise ValidationError(
                    "content", f"{self.id}: must be a string, got {type(self.content).__name__}"
                )
            if len(self.content) > MAX_CONTENT:
                raise ValidationError("content", f"{self.id}: longer than {MAX_CONTENT} characters")
        if self.kind is not None and self.kind not in ("curated", "learned"):
            raise ValidationError("kind", f"{self.id}: {self.kind!r} is not 'curated' or 'learned'")

    @property
    def type(self) -> str:
        return self.id.split(":", 1)[0]

    @property
    def category(self) -> str:
        return self.id.split(":", 2)[1]

    @property
    def name(self) -> str:
        return self.id.split(":", 2)[2]

    @property
    def effective_kind(self) -> str:
        return self.kind or DEFAULT_KIND[self.type]

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


_ARM_KEYS = {"id", "tokens", "content", "kind"}


def coerce_arm(value: Arm | Mapping[str, Any], *, where: str | None = None) -> Arm:
    """Accept an Arm or a dict with `id`, `tokens` and optionally `content`, `kind`."""
    if isinstance(value, Arm):
        return value
    if not isinstance(value, Mapping):
        raise ValidationError(
            "arm", f"must be an object with id and tokens, got {type(value).__name__}", where=where
        )
    unknown = set(value) - _ARM_KEYS
    if unknown:
        raise ValidationError(
            sorted(map(str, unknown))[0],
            "unknown field (allowed: id, tokens, content, kind)",
            where=where,
        )
    for key in ("id", "tokens"):
        if key not in value:
            raise ValidationError(key, "is required", where=where)
    try:
        return Arm(
            id=value["id"],
            tokens=value["tokens"],
            content=value.get("content"),
            kind=value.get("kind"),
        )
    except ValidationError as exc:
        raise ValidationError(exc.field, exc.reason, where=where) from None


def coerce_arms(values: Iterable[Arm | Mapping[str, Any]], *, where: str = "arms") -> list[Arm]:
    """A validated list of arms with unique ids; the error names the offending position."""
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ValidationError(where, f"must be a list of arms, got {type(values).__name__}")
    out: list[Arm] = []
    seen: set[str] = set()
    for i, v in enumerate(values):
        arm = coerce_arm(v, where=f"{where}[{i}]")
        if arm.id in seen:
            raise ValidationError("id", f"{arm.id!r} is listed twice", where=f"{where}[{i}]")
        seen.add(arm.id)
        out.append(arm)
    return out
