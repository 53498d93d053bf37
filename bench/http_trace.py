"""Loaded into a benchmarked `plaudit serve` before plaudit: counts the SQL statements it sends.

SQLite: every connection made through `sqlite3.connect` gets a trace callback, which sees each
statement SQLite runs (BEGIN and COMMIT included; statements run by triggers arrive as
`-- TRIGGER name` and are counted under that name). PostgreSQL: psycopg's `Cursor.execute`,
`executemany` and `copy` are wrapped (`Connection.execute` goes through them), and a server-side
cursor's DECLARE and each of its FETCH round trips. Counts are by
statement shape (literals as `?`, whitespace folded, cut at 160 characters) and are answered,
as JSON, to whoever connects to the Unix socket given to `install`. Only the standard library
and psycopg are used, so any tree's interpreter can load this file.

The wrappers cost CPU of their own: runs that count statements are not runs that time CPU.
"""

from __future__ import annotations

import collections
import json
import os
import re
import socket
import threading
from typing import Any

_counts: collections.Counter[str] = collections.Counter()
#: Literals become `?` (SQLite's trace shows statements with their values filled in), and a
#: list of them `(?, ...)`, so one statement shape is one count.
_LITERALS = [
    (re.compile(r"[xX]'[0-9a-fA-F]*'|'(?:[^']|'')*'"), "?"),
    (re.compile(r"(?<![\w$])-?\d+(?:\.\d+)?(?![\w$])"), "?"),
    (re.compile(r"\(\s*\?(?:\s*,\s*\?)+\s*\)"), "(?, ...)"),
]
_lock = threading.Lock()


def _note(sql: Any) -> None:
    if isinstance(sql, bytes):
        sql = sql.decode(errors="replace")
    elif not isinstance(sql, str):
        sql = getattr(sql, "_obj", None) or repr(sql)  # psycopg.sql.Composed and the like
        sql = sql if isinstance(sql, str) else repr(sql)
    text = " ".join(sql.split())
    for pattern, mark in _LITERALS:
        text = pattern.sub(mark, text)
    text = text[:160]
    with _lock:
        _counts[text] += 1


def _trace_sqlite() -> None:
    import sqlite3

    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(_note)
        return conn

    sqlite3.connect = traced


def _trace_psycopg() -> None:
    try:
        import psycopg
    except ImportError:
        return
    cursor = psycopg.Cursor
    execute, executemany, copy = cursor.execute, cursor.executemany, cursor.copy

    def traced_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        _note(query)
        return execute(self, query, *args, **kwargs)

    def traced_executemany(self: Any, query: Any, params_seq: Any, *args: Any, **kw: Any) -> Any:
        params_seq = list(params_seq)
        _note(f"[many x{len(params_seq)}] " + (query if isinstance(query, str) else repr(query)))
        return executemany(self, query, params_seq, *args, **kw)

    def traced_copy(self: Any, statement: Any, *args: Any, **kwargs: Any) -> Any:
        _note(statement)
        return copy(self, statement, *args, **kwargs)

    cursor.execute = traced_execute
    cursor.executemany = traced_executemany
    cursor.copy = traced_copy
    _trace_server_cursor(psycopg.ServerCursor)


def _trace_server_cursor(cursor: Any) -> None:
    """A named (server-side) cursor: its DECLARE, each FETCH round trip, and its CLOSE."""
    execute = cursor.execute

    def traced_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        _note(query)
        return execute(self, query, *args, **kwargs)

    cursor.execute = traced_execute
    for name in ("fetchone", "fetchmany", "fetchall", "close"):
        method = getattr(cursor, name)
        what = "CLOSE" if name == "close" else f"FETCH ({name})"

        def traced(self: Any, *args: Any, _method: Any = method, _what: str = what) -> Any:
            if _what != "CLOSE" or not self.closed:
                _note(f"{_what} server-side cursor")
            return _method(self, *args)

        setattr(cursor, name, traced)


def _answer(path: str) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(4)
        while True:
            conn, _ = server.accept()
            with conn, _lock:
                conn.sendall(json.dumps(dict(_counts)).encode())


def install(path: str) -> None:
    _trace_sqlite()
    _trace_psycopg()
    if os.path.exists(path):
        os.unlink(path)
    threading.Thread(target=_answer, args=(path,), name="http-trace", daemon=True).start()
