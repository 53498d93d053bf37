"""Secret redaction for router `context` (and outcome `extra`) before anything is stored.

Hooks pass whatever context they have at hand, which sometimes includes an environment dump or
request headers. A secret written to an append-only, hash-chained log can never be removed, so
it is redacted on the way in. Keys are matched by word (``github_token``, ``apiKey``,
``X-Auth-Token``), not by substring, so counters such as ``max_tokens`` survive.
"""

from __future__ import annotations

import itertools
import re

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REDACTED = "[REDACTED]"

#: A key is secret when one of its words is one of these...
SECRET_WORDS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "authorization",
        "auth",
        "cookie",
        "credential",
        "credentials",
        "apikey",
        "privatekey",
        "jwt",
        "bearer",
    }
)
#: ...or when two consecutive words form one of these.
SECRET_PAIRS = frozenset(
    {("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"), ("session", "key")}
)

_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Values that are credentials whatever their key is called.
_VALUE_RE = re.compile(
    r"^(?:Bearer\s+\S+|Basic\s+[A-Za-z0-9+/=]{8,}|sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*)$"
)


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(key)]


def is_secret_key(key: str) -> bool:
    words = _words(key)
    if any(w in SECRET_WORDS for w in words):
        return True
    return any(pair in SECRET_PAIRS for pair in itertools.pairwise(words))


def looks_like_secret(value: str) -> bool:
    return bool(_VALUE_RE.match(value.strip()))


def redact(value: Any) -> tuple[Any, int]:
    """A copy of `value` with secrets replaced by "[REDACTED]", and how many were replaced."""
    count = 0

    def walk(v: Any) -> Any:
        nonlocal count
        if isinstance(v, dict):
            out: dict[Any, Any] = {}
            for k, item in v.items():
                if isinstance(k, str) and is_secret_key(k) and item is not None and item != "":
                    out[k] = REDACTED
                    count += 1
                else:
                    out[k] = walk(item)
            return out
        if isinstance(v, list | tuple):
            return [walk(item) for item in v]
        if isinstance(v, str) and looks_like_secret(v):
            count += 1
            return REDACTED
        return v

    return walk(value), count
