"""Input a person hands a command (a file, stdin, an argument): one reader, so every command
takes the same layouts and reports a mistake the same way (what, where, which line).

JSON is one document laid out any way (an object, an array, pretty-printed or not), or JSON
lines (one document per line, blank lines skipped). Input is UTF-8 and at most
`MAX_INPUT_BYTES`; anything else is a ValidationError naming the input and the place.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from plaudit.errors import ValidationError

MAX_INPUT_BYTES = 64 << 20
STDIN = "-"


def read_bytes(source: str, *, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a file, or of stdin when `source` is "-", refusing more than `limit`."""
    if source == STDIN:
        binary = getattr(sys.stdin, "buffer", None)  # absent when stdin was replaced by text
        if binary is not None:
            data = binary.read(limit + 1)
        else:
            data = sys.stdin.read(limit + 1).encode("utf-8", "surrogateescape")
        if len(data) > limit:
            raise ValidationError(what, f"holds more than {limit} bytes", where="stdin")
        return data
    try:
        with open(source, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise ValidationError(what, f"cannot read {source}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ValidationError(what, f"is larger than {limit} bytes", where=source)
    return data


def parse(data: bytes | str, *, what: str, where: str | None = None, lines: bool = True) -> Any:
    """One JSON document, or (when `lines`) a list of JSON lines; `where` names the source
    ("stdin", a path; None for a value given inline) in errors, with the line number."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(what, f"invalid UTF-8 at byte {exc.start}", where=where) from None
    else:
        text = data
    stripped = text.strip()
    if not stripped:
        raise ValidationError(what, "is empty: no JSON given", where=where)
    try:
        return _decode(stripped, what, where)
    except msgspec.DecodeError as whole:
        rows = stripped.splitlines()
        if not lines or len(rows) == 1:
            raise ValidationError(what, f"malformed JSON: {whole}", where=where) from None
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        at = f"{where}:{n}" if where else f"line {n}"
        try:
            items.append(_decode(line, what, at))
        except msgspec.DecodeError as exc:
            raise ValidationError(what, f"malformed JSON: {exc}", where=at) from None
    return items


def _decode(text: str, what: str, where: str | None) -> Any:
    try:
        return msgspec.json.decode(text)
    except RecursionError:
        raise ValidationError(what, "is JSON nested too deeply to read", where=where) from None


def read_text(source: str, *, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """UTF-8 text from a file, or from stdin when `source` is "-"."""
    data = read_bytes(source, what=what, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = "stdin" if source == STDIN else source
        raise ValidationError(what, f"invalid UTF-8 at byte {exc.start}", where=where) from None


def load(source: str, *, what: str, limit: int = MAX_INPUT_BYTES) -> Any:
    """`parse` the contents of a file, or of stdin when `source` is "-"."""
    data = read_bytes(source, what=what, limit=limit)
    return parse(data, what=what, where="stdin" if source == STDIN else source)


def as_list(value: Any) -> list[Any]:
    """A list of items whichever way they came: one object is a list of one."""
    return value if isinstance(value, list) else [value]


__all__ = ["MAX_INPUT_BYTES", "STDIN", "as_list", "load", "parse", "read_bytes", "read_text"]
