"""`plaudit serve` is a writer (agents append through it): on a missing store it makes one and
says so; on an existing one it says nothing of the kind."""

from __future__ import annotations

from pathlib import Path

import httpx2


def test_serve_makes_a_missing_store_and_says_so(serve_factory, tmp_path: Path) -> None:
    db = tmp_path / "new" / "p.db"
    srv = serve_factory(str(db))
    assert httpx2.get(f"{srv.url}/v1/log/head").status_code == 200
    out = srv.stop()
    assert f"created a new plaudit store at {db}\n" in out
    assert db.exists()
    again = serve_factory(str(db))
    assert "created a new plaudit store" not in again.stop()


def test_serve_on_a_busy_port_exits_7_and_creates_nothing(tmp_path: Path, capsys) -> None:
    """Issue 31: it printed "serving", exited 3 (the code for an id conflict) and had made
    the store first."""
    import socket

    from plaudit.cli import main

    holder = socket.create_server(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    db = tmp_path / "new" / "p.db"
    try:
        for extra in ([], ["--workers", "2"]):
            code = main(["--db", str(db), "serve", "--port", str(port), *extra])
            err = capsys.readouterr().err
            assert code == 7
            assert err.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
            assert "serving" not in err and "created a new" not in err and "Traceback" not in err
            assert not (tmp_path / "new").exists()
    finally:
        holder.close()


def test_run_server_on_a_busy_port_raises_listen_error(sqlite_url: str) -> None:
    import socket

    import pytest

    from plaudit import Plaudit
    from plaudit.errors import ListenError
    from plaudit.server.app import create_app
    from plaudit.server.run import run_server

    holder = socket.create_server(("127.0.0.1", 0))
    try:
        with Plaudit.open(sqlite_url) as p, pytest.raises(ListenError, match="cannot listen"):
            run_server(create_app(p), port=holder.getsockname()[1])
    finally:
        holder.close()
