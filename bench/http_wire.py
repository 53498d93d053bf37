"""The HTTP benchmarks' load generator: lean kept-alive HTTP/1.1 connections on uvloop.

The generator shares the machine's two cores with the server it measures, so every CPU
millisecond it spends is one the server does not get. A general client (httpx) spent about
3.9 CPU-ms per request here, as much as the server; this one speaks only what the benchmarks
need (a JSON GET or POST, a Content-Length reply) and spends a fraction of that.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


class Connection:
    """One kept-alive HTTP/1.1 connection."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        if body is None:
            head = b"%s %s HTTP/1.1\r\nhost: %s\r\n\r\n" % (
                method.encode(),
                path.encode(),
                self.host.encode(),
            )
            self.writer.write(head)
        else:
            self.writer.write(
                b"%s %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s"
                % (method.encode(), path.encode(), self.host.encode(), len(body), body)
            )
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = None
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None:
                raise ConnectionError("reply without content-length")
            data = await self.reader.readexactly(length)
        except BaseException:
            self.writer.close()
            self.writer = None
            raise
        if b"connection: close" in head.lower():
            self.writer.close()
            self.writer = None
        return status, data

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        return await self.request("POST", path, body)


class Pool:
    """Connections handed out one request at a time; a request waits when all are busy.

    Waiting here still counts: latency runs from the moment a request was scheduled.
    """

    def __init__(self, url: str, size: int) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.idle: asyncio.Queue[Connection] = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(Connection(host, int(port)))

    async def request(
        self, method: str, path: str, payload: Any, timeout: float
    ) -> tuple[int, Any]:
        """`payload` None sends no body (a GET); a 200's JSON comes back decoded."""
        conn = await self.idle.get()
        body = None if payload is None else msgspec.json.encode(payload)
        try:  # a failed or timed-out request closes its own connection (`Connection.request`)
            status, data = await asyncio.wait_for(conn.request(method, path, body), timeout)
        finally:
            self.idle.put_nowait(conn)
        return status, msgspec.json.decode(data) if status == 200 else data

    async def post(self, path: str, payload: dict[str, Any], timeout: float) -> tuple[int, Any]:
        return await self.request("POST", path, payload, timeout)


def run_loop(coro: Any) -> Any:
    """uvloop when installed (the server's own loop; cheaper per request than asyncio's)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
