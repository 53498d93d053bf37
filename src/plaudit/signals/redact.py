"""Secret redaction for router `context` (and outcome `extra`) before anything is stored.

Hooks pass whatever context they have at hand, which sometimes includes an environment dump or
request headers. A secret written to an append-only, hash-chained log can never be removed, so
it is redacted on the way in. Keys are matched by what they are made of (``github_token``,
``apiKey``, ``X-Auth-Token``, ``DBPASSWORD``, ``openai_key``), with care for the counters an
LLM context is full of (``max_tokens`` and ``token_count`` survive). Values are checked too:
known credential shapes (bearer tokens, vendor keys, JWTs, private keys), passwords in URLs and
`NAME=value` lines from environment dumps.
"""

from __future__ import annotations

import re

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REDACTED = "[REDACTED]"

#: A key is secret when, lowercased with separators dropped, it contains one of these
#: ("DB_PASSWORD", "dbPassword", "passwords", "clientsecret", "APIkey" alike)...
SECRET_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "authorization",
    "cookie",
    "bearer",
    "apikey",
    "privatekey",
    "accesskey",
    "sessionkey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "sshkey",
)
#: ...or when one of its words is one of these (too short to look for inside words)...
SECRET_WORDS = frozenset({"pwd", "auth", "jwt"})
#: ...or when its last word ends in "token" (`github_token`, `authToken`, `ACCESSTOKEN`; not
#: `max_tokens` or `token_count`), or is "key" after a word not in this list (`openai_key`,
#: `ssh_key`; not `cache_key`).
BENIGN_KEY_WORDS = frozenset(
    {
        "cache", "sort", "primary", "foreign", "partition", "idempotency", "lookup", "routing",
        "group", "public", "dedupe", "hash", "map", "row", "index", "shard", "bucket", "object",
        "join", "dict", "task", "unique", "composite", "cursor", "page", "result", "config",
        "setting", "translation", "message", "event", "metric", "label", "tag", "field",
        "column", "table", "node", "entry", "item", "search", "query", "sequence", "hot",
    }
)  # fmt: skip

_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SEPARATORS_RE = re.compile(r"[^a-z0-9]+")
# Values that are credentials whatever their key is called.
_VALUE_RE = re.compile(
    r"^(?:Bearer\s+\S+|Basic\s+[A-Za-z0-9+/=]{8,}|sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*)$"
)
# The password in a URL's user part (`postgres://me:hunter2@db/x`): only it is replaced.
_URL_PASSWORD_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:)([^\s/@]+)(@)")
# `NAME=value`, as in an environment dump or a command line: redacted when NAME is secret.
_ASSIGNMENT_RE = re.compile(r"^(\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.\-]*)=)(.*)$", re.DOTALL)


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(key)]


def is_secret_key(key: str) -> bool:
    flat = _SEPARATORS_RE.sub("", key.lower())
    if any(part in flat for part in SECRET_PARTS):
        return True
    words = [w for w in _words(key) if not w.isdigit()]
    if not words:
        return False
    if any(w in SECRET_WORDS for w in words) or words[-1].endswith("token"):
        return True
    return len(words) > 1 and words[-1] == "key" and words[-2] not in BENIGN_KEY_WORDS


def looks_like_secret(value: str) -> bool:
    return bool(_VALUE_RE.match(value.strip()))


def _redact_text(value: str) -> tuple[str, bool]:
    """`value` with any credential in it replaced, and whether anything new was replaced."""
    if looks_like_secret(value):
        return REDACTED, value != REDACTED
    assignment = _ASSIGNMENT_RE.match(value)
    if assignment and is_secret_key(assignment.group(2)):
        rest = assignment.group(3)
        if rest.strip() and rest != REDACTED:
            return assignment.group(1) + REDACTED, True
        return value, False
    changed = False

    def password(m: re.Match[str]) -> str:
        nonlocal changed
        changed = changed or m.group(2) != REDACTED
        return m.group(1) + REDACTED + m.group(3)

    if "://" in value:
        value = _URL_PASSWORD_RE.sub(password, value)
    return value, changed


def redact(value: Any) -> tuple[Any, int]:
    """A copy of `value` with secrets replaced by "[REDACTED]", and how many were replaced.

    A value under a secret key is replaced whole (and counted again if it already was); inside
    other strings only the credential is (a URL keeps its host, `NAME=` its name)."""
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
        if isinstance(v, str):
            text, changed = _redact_text(v)
            count += changed
            return text
        return v

    return walk(value), count
