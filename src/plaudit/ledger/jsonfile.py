"""Reading a JSON file a user hands an importer (progress.json, the memory-bank files).

Python's `json` takes `NaN` and `Infinity`, turns `1e400` into infinity, fails with a bare
ValueError on an integer of more than 4300 digits and with a RecursionError on deep nesting;
anything it does take then has to fit the log (integers within ±2^53, nesting within the
event payload's depth). Each of these is a `ValidationError` here, naming the file and the
field (`error_patterns[0].penalty`), so an importer refuses the file before writing anything.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from plaudit.errors import ValidationError
from plaudit.events import MAX_DEPTH, MAX_SAFE_INT

MAX_FILE_BYTES = 64 << 20
#: More digits than this cannot be within ±2^53 (which has 16).
_MAX_DIGITS = 17
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')


class _Bad:
    """A literal the JSON parser met that the log cannot hold; reported with its path."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _parse_int(text: str) -> Any:
    digits = len(text.lstrip("-"))
    if digits > _MAX_DIGITS:
        return _Bad(f"a {digits}-digit integer is out of range (at most ±2^53)")
    value = int(text)
    if abs(value) > MAX_SAFE_INT:
        return _Bad(f"{text} is out of range (at most ±2^53)")
    return value


def _parse_float(text: str) -> Any:
    value = float(text)
    if not math.isfinite(value):
        return _Bad(f"{text[:40]} is out of range (not a finite number)")
    if abs(value) > MAX_SAFE_INT:
        return _Bad(f"{text[:40]} is out of range (at most ±2^53)")
    return value


def _parse_constant(text: str) -> Any:
    return _Bad(f"{text} is not a number (JSON has no NaN or Infinity)")


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _short(path: str, limit: int = 60) -> str:
    """A path through deep nesting, cut to its start."""
    return path if len(path) <= limit else path[:limit] + "…"


def _check(doc: Any, where: str) -> None:
    """The first value the log cannot hold, or the first place nested too deep."""
    stack: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, _Bad):
            raise ValidationError(path or "document", value.reason, where=where)
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    reason = "is not valid Unicode text (a lone surrogate)"
                    raise ValidationError(path or "document", reason, where=where) from None
            continue
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise ValidationError(
                    _short(path), f"nested deeper than {MAX_DEPTH} levels", where=where
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            # reversed, so the first field in the file is reported first
            for key, item in reversed(list(items)):
                stack.append((item, _join(path, key), depth + 1))


def _deep_path(text: str) -> str:
    """Where a document too deep for the parser first passes the depth limit: its containers
    are tracked by their brackets (strings skipped), keys by the string before each colon."""
    path: list[str | int] = []
    kinds: list[str] = []
    last_string: str | None = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            last_string = tok
            continue
        if tok == ":" and last_string is not None and kinds and kinds[-1] == "{":
            path[-1] = json.loads(last_string)
        elif tok in "[{":
            if len(kinds) >= MAX_DEPTH:
                break
            kinds.append(tok)
            path.append(0 if tok == "[" else "?")
        elif tok in "]}":
            if kinds:
                kinds.pop()
                path.pop()
        elif tok == "," and kinds and kinds[-1] == "[":
            path[-1] = int(path[-1]) + 1
        last_string = None
    out = ""
    for key in path:
        out = _join(out, key)
    return _short(out) or "document"


def load_json_file(path: Path) -> Any:
    """Parse a JSON file, naming the file and the line and column of malformed JSON, or the
    field of a value the log cannot hold."""
    where = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ValidationError("file", f"cannot read: {exc.strerror or exc}", where=where) from None
    if size > MAX_FILE_BYTES:
        raise ValidationError(
            "file", f"{size} bytes exceeds the {MAX_FILE_BYTES}-byte limit", where=where
        )
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError("file", f"is not UTF-8: {exc.reason}", where=where) from None
    except OSError as exc:
        raise ValidationError("file", f"cannot read: {exc.strerror or exc}", where=where) from None
    try:
        doc = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "json", f"malformed at line {exc.lineno} column {exc.colno}: {exc.msg}", where=where
        ) from None
    except RecursionError:
        raise ValidationError(
            _deep_path(text), f"nested deeper than {MAX_DEPTH} levels", where=where
        ) from None
    _check(doc, where)
    return doc
