"""Slow and idle clients against a real server, over real sockets.

150 connections hold half-sent requests (nothing, part of the headers, the headers and part of
the body); every one must be closed within its configured limit, and none much before it.
Both of uvicorn's HTTP implementations are driven: httptools through `plaudit serve`, h11
through the library's `run_server` as an embedding application would call it.
"""

from __future__ import annotations

import select
import selectors
import socket
import textwrap
import time
from pathlib import Path

import httpx2
import pytest

from conftest import Server

LIMIT = 1.0  # every timeout, in seconds
SLACK = 1.5  # scheduling on a loaded 2-core machine; still far below "never"
PER_KIND = 50


_EMBEDDED = textwrap.dedent(
    """
    import sys
    from plaudit import Plaudit
    from plaudit.server.app import create_app
    from plaudit.server.run import run_server
    from plaudit.server.timeouts import Timeouts

    db, port, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with Plaudit.open(db) as p:
        app = create_app(p, token="tok", body_timeout=limit)
        t = Timeouts(headers=limit, body=limit, idle=limit)
        run_server(app, port=port, timeouts=t, log_level="warning", http="h11")
    """
)


@pytest.fixture(params=["serve-httptools", "embedded-h11"])
def server(request: pytest.FixtureRequest, serve_factory, tmp_path: Path) -> Server:
    db = str(tmp_path / "t.db")
    if request.param == "embedded-h11":
        return serve_factory(db, str(LIMIT), script=_EMBEDDED)
    limits = [
        x for flag in ("--header", "--body", "--idle") for x in (f"{flag}-timeout", str(LIMIT))
    ]
    return serve_factory(db, "--token", "tok", *limits)


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    return s


def _wait_closed(socks: dict[socket.socket, str], limit: float) -> dict[str, list[tuple]]:
    """Read every socket until the server closes it; (seconds, bytes received) per kind."""
    sel = selectors.DefaultSelector()
    started = time.monotonic()
    received: dict[socket.socket, bytes] = {s: b"" for s in socks}
    done: dict[str, list[tuple]] = {kind: [] for kind in set(socks.values())}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    open_ = set(socks)
    while open_ and time.monotonic() - started < limit:
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            if data:
                received[s] += data
                continue
            done[socks[s]].append((time.monotonic() - started, received[s]))
            sel.unregister(s)
            open_.discard(s)
    for s in socks:
        s.close()
    assert not open_, f"{len(open_)} connections still open after {limit} s"
    return done


def test_150_half_sent_requests_are_closed_within_the_limits(server: Server) -> None:
    socks: dict[socket.socket, str] = {}
    for _ in range(PER_KIND):
        socks[_connect(server.port)] = "idle"
    for _ in range(PER_KIND):
        s = _connect(server.port)
        s.sendall(b"POST /v1/log/append HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        socks[s] = "headers"
    for _ in range(PER_KIND):
        s = _connect(server.port)
        s.sendall(
            b"POST /v1/log/append HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"type": '
        )
        socks[s] = "body"
    done = _wait_closed(socks, limit=LIMIT + 1.0 + SLACK + 5)  # generous: a failure is "never"

    assert {k: len(v) for k, v in done.items()} == {"idle": 50, "headers": 50, "body": 50}
    for kind, results in done.items():
        times = sorted(t for t, _ in results)
        ceiling = LIMIT + SLACK + (1.0 if kind == "body" else 0.0)
        assert times[-1] <= ceiling, f"{kind}: the last closed after {times[-1]:.2f} s"
        assert times[0] >= LIMIT * 0.8, f"{kind}: one closed early, after {times[0]:.2f} s"
    assert all(data == b"" for _, data in done["idle"])  # nothing to answer: just closed
    for _, data in done["headers"]:
        assert data.startswith(b"HTTP/1.1 408"), data[:80]
    for _, data in done["body"]:
        assert data.startswith(b"HTTP/1.1 408"), data[:80]
        assert b'"error":"RequestTimeout"' in data


def test_dripping_header_bytes_does_not_reset_the_deadline(server: Server) -> None:
    """Slowloris: a byte every 0.2 s keeps a connection 'active' but never finishes."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    request = b"GET /v1/log/head HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    started = time.monotonic()
    closed_after = None
    reply = b""
    for byte in request:
        try:
            s.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed_after = time.monotonic() - started
            break
        readable, _, _ = select.select([s], [], [], 0.2)
        if readable:
            try:
                reply = s.recv(4096)
            except ConnectionResetError:
                reply = b""
            closed_after = time.monotonic() - started
            break
    s.close()
    assert closed_after is not None, "the server kept a dripping connection open"
    assert LIMIT * 0.8 <= closed_after <= LIMIT + SLACK
    assert reply == b"" or reply.startswith(b"HTTP/1.1 408")


def test_prompt_and_kept_alive_requests_still_work(server: Server) -> None:
    with httpx2.Client(base_url=server.url, timeout=5) as c:
        for _ in range(3):
            assert c.get("/v1/log/head").status_code == 200
            time.sleep(LIMIT / 3)  # idle, but less than the limit: the connection is reused
    # Headers in two parts, well inside the limit, then the body: accepted.
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    body = b'{"type": "test.slow.v1", "payload": {}}'
    s.sendall(b"POST /v1/log/append HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    time.sleep(LIMIT / 3)
    s.sendall(
        b"Authorization: Bearer tok\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    time.sleep(LIMIT / 3)
    s.sendall(body)
    reply = s.recv(65536)
    s.close()
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]


def test_non_ascii_credentials_over_the_wire_are_a_401(server: Server) -> None:
    for header in ("Bearer tök".encode(), b"Bearer \xff\xfe", "Bearer ☃".encode()):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        body = b'{"type": "test.auth.v1", "payload": {}}'
        s.sendall(
            b"POST /v1/log/append HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
            + header
            + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + body
        )
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        s.close()
        assert reply.startswith(b"HTTP/1.1 401"), (header, reply[:200])
    assert httpx2.get(f"{server.url}/v1/log/head").json()["length"] == 0


def test_connection_counts_stay_bounded_under_a_stream_of_idle_connections(
    server: Server,
) -> None:
    """Connections opened faster than they time out are still all closed in time."""
    socks: dict[socket.socket, str] = {}
    stop = time.monotonic() + LIMIT * 1.5
    while time.monotonic() < stop:
        socks[_connect(server.port)] = "idle"
        time.sleep(0.02)
    done = _wait_closed(socks, limit=LIMIT * 1.5 + LIMIT + SLACK + 5)
    assert len(done["idle"]) == len(socks)
