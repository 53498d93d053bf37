"""Handing a router event to a running `plaudit serve` over a local socket.

A shell hook's `plaudit signal emit` spends most of its time starting: importing the store and
opening it. When `plaudit serve` runs on the same SQLite store it listens on a Unix socket
beside it (`STORE.sock`); the hook then validates the event as always, sends it there as one
line of JSON, and waits for the server's answer, which comes only once the event is committed
(the server appends with `synchronous=FULL`, so acknowledged means durable, as on the direct
path). Nothing of the store is imported on that path.

When no server listens (no socket, or a stale one), the connection fails at once and the hook
appends directly. If the exchange breaks after the event was sent, the hook appends directly
too: the event's id is derived from its content, so one the server did commit is then
acknowledged as `present`, never written twice.

The server re-validates what it receives with the same contract (`plaudit.signals.contract`),
so the socket accepts nothing the command line would refuse. It listens only while serving a
SQLite store with full durability, and its socket is open to whoever may write the store
file (the file's owner, and its group when the group may write it).

This module keeps to the standard library's `json`, `os` and `_socket` at import: the hook
loads it. The server side (`serve`) imports what it needs when called.
"""

from __future__ import annotations

import json
import os

from plaudit.errors import PlauditError
from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE, Emission

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from plaudit.core import Plaudit

SUFFIX = ".sock"
#: A request larger than this is refused (the HTTP API's own body limit).
MAX_REQUEST = 2 << 20
#: How long the hook waits for the server's answer before appending directly instead.
TIMEOUT_S = 30.0
PROTOCOL = 1


class Refused(PlauditError):
    """The server refused the event (what the direct path would have refused too)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def socket_path(db: str) -> str | None:
    """Where a server on the SQLite store `db` listens; None for stores it cannot serve so."""
    if not db or db == ":memory:" or db.startswith(("postgresql://", "postgres://", "file:")):
        return None
    return db + SUFFIX


def connect(db: str) -> Any:
    """A connection to the server on the SQLite store `db`, or None when none listens."""
    path = socket_path(db)
    if path is None:
        return None
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT_S)
        sock.connect(path)
    except OSError:  # no server, a stale socket, a path too long
        sock.close()
        return None
    return sock


def send(sock: Any, emission: Emission, ts_ms: int) -> dict[str, Any] | None:
    """Have the server append the event (closes `sock`); its answer ({"status", "seq"}), or
    None when it did not answer (then append directly). Raises `Refused` for an event the
    server refused, with the direct path's message and exit status."""
    request = {"v": PROTOCOL, "type": emission.type, "payload": emission.payload, "ts_ms": ts_ms}
    reply = b""
    try:
        sock.sendall(json.dumps(request, ensure_ascii=False).encode() + b"\n")
        while not reply.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                return None  # the server went away: append directly
            reply += chunk
    except OSError:  # a broken connection, a timeout
        return None
    finally:
        sock.close()
    try:
        answer = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("retry"):
        return None
    if not answer.get("ok"):
        raise Refused(str(answer.get("error")), int(answer.get("exit", 1)))
    return answer


# -- the server side ------------------------------------------------------------------------
_BUILDERS = {DECISION: "build_decision", OUTCOME: "build_outcome", OVERRIDE: "build_override"}


def answer(plaudit: Plaudit, line: bytes) -> dict[str, Any]:
    """One request, validated as the command line validates it, appended, and the reply."""
    from plaudit.signals import contract
    from plaudit.signals.emit import record

    try:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            raise Refused("handoff: the request is not one line of JSON", 2) from None
        if not isinstance(request, dict) or request.get("v") != PROTOCOL:
            raise Refused(f"handoff: not a version {PROTOCOL} request", 2)
        builder = _BUILDERS.get(request.get("type"))  # type: ignore[arg-type]
        payload = request.get("payload")
        if builder is None or not isinstance(payload, dict):
            raise Refused("handoff: only router decisions, outcomes and overrides", 2)
        fields = {k: v for k, v in payload.items() if k != "schema_version"}
        try:
            emission = getattr(contract, builder)(
                **fields, ts_ms=request.get("ts_ms"), where="plaudit signal emit"
            )
        except TypeError as exc:
            raise Refused(f"handoff: {exc}", 2) from None
        result = record(plaudit, emission)
    except PlauditError as exc:
        return {"ok": False, "error": str(exc), "exit": exc.exit_code}
    except Exception as exc:  # the server's trouble, not the event's: the hook appends itself
        return {"ok": False, "retry": True, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "status": result["status"], "seq": result["seq"]}


class Handoff:
    """The socket a running server listens on; `close` stops it and removes the socket."""

    def __init__(self, server: Any, path: str, thread: Any) -> None:
        self.server = server
        self.path = path
        self.thread = thread
        self._inode = os.stat(path).st_ino

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
        try:  # only the socket this server made, not one a later server put there
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass


def serve(plaudit: Plaudit, db: str) -> tuple[Handoff | None, str]:
    """Listen beside the SQLite store `db` for hooks' events, in background threads. Returns
    the handle (None when not listening) and a sentence for the operator."""
    import socketserver
    import stat
    import threading

    path = socket_path(db)
    if path is None or plaudit.backend.dialect != "sqlite":
        return None, "no local handoff socket (a SQLite store only)"
    if getattr(plaudit.backend, "synchronous", "FULL") != "FULL":
        return None, "no local handoff socket: hooks append directly unless durability is full"
    if os.path.exists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return None, f"no local handoff socket: {path} exists and is not a socket"
        import _socket

        probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # left by a server that is gone
        else:
            return None, f"another server already takes hooks' events at {path}"
        finally:
            probe.close()

    class Handler(socketserver.StreamRequestHandler):
        timeout = TIMEOUT_S

        def handle(self) -> None:
            line = self.rfile.readline(MAX_REQUEST + 1)
            if not line:
                return
            if len(line) > MAX_REQUEST:
                reply = {"ok": False, "error": "handoff: the request is too large", "exit": 2}
            else:
                reply = answer(plaudit, line)
            self.wfile.write(json.dumps(reply).encode() + b"\n")

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    try:
        server = Server(path, Handler)
        os.chmod(path, _mode(db))
    except OSError as exc:
        return None, f"no local handoff socket at {path}: {exc.strerror or exc}"
    thread = threading.Thread(target=server.serve_forever, name="plaudit-handoff", daemon=True)
    thread.start()
    return Handoff(server, path, thread), f"hooks' events are taken at {path}"


def _mode(db: str) -> int:
    """Who may connect: whoever may write the store (its owner; its group if it may write)."""
    try:
        mode = os.stat(db).st_mode
    except OSError:
        return 0o600
    return 0o600 | (0o060 if mode & 0o020 else 0)
