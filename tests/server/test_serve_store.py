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
