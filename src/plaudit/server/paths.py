"""Error messages never show an HTTP client where things live on the server.

The library's errors name files by their full path, which is what a CLI user needs; a remote
client needs only the part it gave. So before an error is sent, paths under the export root are
cut back to the part below it (the client's own words), the export root itself and the store's
location become placeholders, and any other absolute path on this machine becomes
`<server path>`. A slash-separated word that is not a path here (`/payload/x`, `ai:flow/test`)
is left alone: only a path whose first component exists on this filesystem is hidden.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from starlette.requests import Request

SERVER_PATH = "<server path>"
EXPORT_ROOT = "<export root>"
STORE = "<store>"

# An absolute POSIX or Windows path, not preceded by something that makes it part of a word,
# a URL or a name such as `ai:flow/test`.
_ABSOLUTE = re.compile(r"(?<![\w.:/\\~-])(?:[A-Za-z]:[\\/]|/)[^\s'\"<>|,;()\[\]{}]*")


@cache
def _exists_at_root(first: str) -> bool:
    return os.path.exists(os.path.join(os.sep, first))


def _is_server_path(token: str) -> bool:
    if re.match(r"[A-Za-z]:[\\/]", token):
        return True
    first = token.lstrip("/").split("/", 1)[0]
    return bool(first) and _exists_at_root(first)


class PathHider:
    """Rewrites strings (and the strings inside dicts and lists) as the module says."""

    def __init__(self, export_root: str | None = None, store: Iterable[str] = ()) -> None:
        self.roots: list[tuple[str, str]] = []
        if export_root:
            for form in {export_root, str(Path(export_root).expanduser().resolve())}:
                self.roots.append((form.rstrip("/\\") + os.sep, ""))
                self.roots.append((form.rstrip("/\\"), EXPORT_ROOT))
        for location in store:
            if location:
                self.roots.append((location, STORE))
        self.roots.sort(key=lambda pair: len(pair[0]), reverse=True)  # the most specific first

    def text(self, value: str) -> str:
        for prefix, replacement in self.roots:
            value = value.replace(prefix, replacement)
        return _ABSOLUTE.sub(
            lambda m: SERVER_PATH if _is_server_path(m.group(0)) else m.group(0), value
        )

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return value


def for_request(request: Request) -> PathHider:
    """The hider for this app: its export root (as `_confine` reads it) and its store."""
    state = request.app.state
    root = getattr(state, "export_root", None) or os.environ.get("PLAUDIT_EXPORT_ROOT")
    store: list[str] = []
    plaudit = getattr(state, "plaudit", None)
    location = getattr(getattr(plaudit, "backend", None), "url", None)  # a file, or a DSN
    if isinstance(location, str) and location and location != ":memory:":
        store.append(location)
        if getattr(plaudit, "dialect", None) == "sqlite":
            store.append(str(Path(location).resolve()))
    return PathHider(root, store)


__all__ = ["EXPORT_ROOT", "SERVER_PATH", "STORE", "PathHider", "for_request"]
