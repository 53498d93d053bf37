"""Reference detection: did the model use an included arm? One rule per arm type."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import msgspec

#: A memory is referenced when any run of this many characters of it appears in the output.
MEMORY_MIN_MATCH = 20
_ANCHOR = MEMORY_MIN_MATCH // 2  # k-gram length and output stride: k + stride - 1 < 20


class MemoryIndex:
    """Finds whether any 20-character substring of a memory occurs in a text.

    Every 10-character window of the memory is indexed. A common substring of 20 characters
    contains an output window starting at a multiple of 10, so the output is probed only every
    10 characters and each hit is extended both ways to confirm 20 characters. Hits are kept as
    distinct 30-character neighbourhoods, which bounds the work on repetitive memories.
    """

    def __init__(self, content: str) -> None:
        self.content = content
        self.short = len(content) < MEMORY_MIN_MATCH
        self._grams: dict[str, set[tuple[str, str]]] = {}
        if self.short:
            return
        k = _ANCHOR
        for p in range(len(content) - k + 1):
            left = content[max(0, p - k) : p]
            right = content[p + k : p + 2 * k]
            self._grams.setdefault(content[p : p + k], set()).add((left, right))

    def found_in(self, text: str) -> bool:
        if self.short:  # nothing 20 long to find: fall back to the whole (non-empty) memory
            return bool(self.content) and self.content in text
        k = _ANCHOR
        grams = self._grams
        for j in range(0, len(text) - k + 1, k):
            hoods = grams.get(text[j : j + k])
            if not hoods:
                continue
            out_left = text[max(0, j - k) : j]
            out_right = text[j + k : j + 2 * k]
            for left, right in hoods:
                if _common_suffix(out_left, left) + k + _common_prefix(out_right, right) >= (
                    MEMORY_MIN_MATCH
                ):
                    return True
        return False


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


@lru_cache(maxsize=512)
def memory_index(content: str) -> MemoryIndex:
    return MemoryIndex(content)


@lru_cache(maxsize=4096)
def _word_re(word: str) -> re.Pattern[str]:
    # Word boundaries that also treat '_' and digits as word characters: "go" is not in "good".
    return re.compile(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _path_re(path: str) -> re.Pattern[str]:
    # A file name must not be the tail of a longer name: "a.py" is not in "data.py".
    return re.compile(r"(?<![A-Za-z0-9_.\-])" + re.escape(path) + r"(?![A-Za-z0-9_\-])")


def tool_call_names(tool_calls: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(c["name"]) for c in tool_calls}


def tool_call_text(tool_calls: Sequence[Mapping[str, Any]]) -> str:
    """Tool-call metadata as one searchable string (arguments included)."""
    if not tool_calls:
        return ""
    return "\n".join(msgspec.json.encode(dict(c)).decode() for c in tool_calls)


def is_referenced(
    arm_id: str,
    content: str | None,
    text: str,
    calls_text: str,
    call_names: set[str],
) -> bool:
    """The per-type rule: tool by call name, skill by word, file by name or path, memory by
    any 20-character substring, section always."""
    type_, category, name = arm_id.split(":", 2)
    if type_ == "section":
        return True
    if type_ == "tool":
        return name in call_names
    if type_ == "skill":
        rx = _word_re(category)
        return bool(rx.search(text) or rx.search(calls_text))
    if type_ == "file":
        path = content or name
        candidates = {path, path.replace("\\", "/").rsplit("/", 1)[-1]}
        return any(
            c and (_path_re(c).search(text) or _path_re(c).search(calls_text)) for c in candidates
        )
    if type_ == "memory":
        return bool(content) and memory_index(content).found_in(text)
    return False
