"""`plaudit serve` for real: refusal rules, token from the environment, kill -9, parallel
writers."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from pathlib import Path

import httpx2
import pytest

from plaudit import Plaudit
from plaudit.bandit.fold import GLOBAL
from plaudit.cli import main
from plaudit.server.guards import allowed_hosts, is_loopback


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("myhost.example", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected
    assert (allowed_hosts(host) is None) is (not expected)


def test_refuses_a_public_address_without_a_token(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("PLAUDIT_TOKEN", raising=False)
    db = tmp_path / "x.db"
    code = main(["serve", "--db", str(db), "--host", "0.0.0.0", "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: refusing to listen on '0.0.0.0' without a token")
    assert "Traceback" not in err
    assert not db.exists()  # nothing was opened, let alone written


@pytest.mark.parametrize("origin", ["ui.example", "https://ui.example/", "ftp://ui.example"])
def test_rejects_a_malformed_cors_origin(tmp_path: Path, capsys, origin: str) -> None:
    code = main(["serve", "--db", str(tmp_path / "x.db"), "--cors-origin", origin])
    assert code == 2
    assert f"error: CORS origin {origin!r} must look like" in capsys.readouterr().err
    assert not (tmp_path / "x.db").exists()


def test_cors_wildcard_needs_a_token(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("PLAUDIT_TOKEN", raising=False)
    code = main(["serve", "--db", str(tmp_path / "x.db"), "--cors-origin", "*"])
    assert code == 2
    assert "any web page write" in capsys.readouterr().err


def test_token_from_the_environment_guards_writes(serve_factory, sqlite_url: str) -> None:
    srv = serve_factory(sqlite_url, env={"PLAUDIT_TOKEN": "tok-123"})
    event = {"type": "test.thing.v1", "payload": {}}
    assert httpx2.post(f"{srv.url}/v1/log/append", json=event).status_code == 401
    ok = httpx2.post(
        f"{srv.url}/v1/log/append", json=event, headers={"Authorization": "Bearer tok-123"}
    )
    assert ok.status_code == 200
    # A loopback server refuses Host names it does not answer to (DNS rebinding).
    rebound = httpx2.get(f"{srv.url}/v1/log/head", headers={"Host": "evil.example"})
    assert rebound.status_code == 400
    page = httpx2.get(f"{srv.url}/")
    assert page.status_code == 200 and "rl-score-widget" in page.text


def _post_until_killed(url: str, acked: list[str], stop: threading.Event) -> None:
    i = 0
    with httpx2.Client(timeout=5) as c:
        while not stop.is_set():
            ids = [f"k{i}-{j}" for j in range(3)]
            i += 1
            body = [{"type": "test.kill.v1", "id": x, "payload": {"i": i}} for x in ids]
            try:
                r = c.post(f"{url}/v1/log/append", json=body)
            except httpx2.HTTPError:
                return  # the server died mid-request: this batch was never acknowledged
            if r.status_code == 200:
                acked.extend(ids)


def test_acknowledged_appends_survive_kill_9(serve_factory, db_url: str) -> None:
    srv = serve_factory(db_url)
    acked: list[str] = []
    stop = threading.Event()
    writers = [
        threading.Thread(target=_post_until_killed, args=(srv.url, acked, stop)) for _ in range(3)
    ]
    for w in writers:
        w.start()
    deadline = time.monotonic() + 20
    while len(acked) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.kill()  # SIGKILL while requests are in flight
    stop.set()
    for w in writers:
        w.join(10)
    assert len(acked) >= 60

    with Plaudit.open(db_url) as p:
        report = p.log.verify()
        assert report.ok, report.reason
        missing = [x for x in acked if p.log.get(x) is None]
        assert missing == []
        # Batches are atomic: every batch is either wholly present or wholly absent.
        seen = {e.id for e in p.log.replay(types=["test.kill."])}
        batches = {x.rsplit("-", 1)[0] for x in seen}
        assert all(f"{b}-{j}" in seen for b in batches for j in range(3))


def _client_process(url: str, worker: int, n: int, out: mp.Queue) -> None:
    acked = []
    with httpx2.Client(timeout=30) as c:
        for i in range(n):
            ids = [f"w{worker}-{i}-{j}" for j in range(2)]
            body = [{"type": "test.par.v1", "id": x, "payload": {"w": worker}} for x in ids]
            r = c.post(f"{url}/v1/log/append", json=body)
            if r.status_code == 200:
                acked.extend(ids)
    out.put(acked)


def test_parallel_clients_on_two_servers_sharing_one_store(serve_factory, db_url: str) -> None:
    """Four client processes write through two server processes on the same database."""
    servers = [serve_factory(db_url), serve_factory(db_url)]
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    procs = [
        ctx.Process(target=_client_process, args=(servers[k % 2].url, k, 25, out)) for k in range(4)
    ]
    for pr in procs:
        pr.start()
    acked = [x for _ in procs for x in out.get(timeout=120)]
    for pr in procs:
        pr.join(30)
    assert len(acked) == 4 * 25 * 2

    with Plaudit.open(db_url) as p:
        assert len(p.log) == len(acked)
        assert {e.id for e in p.log.replay()} == set(acked)
        assert p.log.verify().ok
    for s in servers:
        s.stop()


def test_warming_loads_the_jobs_in_use_and_only_those(db_url: str) -> None:
    """`Plaudit.warm` (called by `run_server` before the first request) loads the bandit's
    cache where the store uses the bandit, and creates nothing where it does not."""
    with Plaudit.open(db_url) as p:
        assert p.warm() == []
        with p.backend.read() as tx:
            assert not tx.table_exists("bandit_meta")
        p.bandit.register([{"id": "tool:exec:Bash", "tokens": 10}])
    with Plaudit.open(db_url) as p:
        assert p.warm() == ["bandit"]
        cache = p.bandit._cache
        assert cache.registry.ids == ["tool:exec:Bash"] and GLOBAL in cache.tables


def test_warming_the_routes_answers_404_and_leaves_the_app_serving(sqlite_url: str) -> None:
    from fastapi.testclient import TestClient

    from plaudit.server.app import create_app
    from plaudit.server.run import warm_routes

    with Plaudit.open(sqlite_url) as p:
        app = create_app(p, host="127.0.0.1")
        assert warm_routes(app) == 404
        with TestClient(app, base_url="http://127.0.0.1") as c:
            r = c.post("/v1/bandit/arms", json={"arms": [{"id": "tool:exec:Bash", "tokens": 5}]})
            assert r.status_code == 200
            sel = c.post("/v1/bandit/select", json={}).json()
            assert sel["included"] == ["tool:exec:Bash"]


def test_a_failed_warm_up_is_logged_and_the_server_still_starts(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Warming up only moves work before the first request: a store whose bandit cache cannot
    load still serves (its selects report the error themselves), with a warning at start."""
    from plaudit.server import run

    def broken(self: Plaudit) -> list[str]:
        raise RuntimeError("the cache would not load")

    monkeypatch.setattr(Plaudit, "warm", broken)
    with Plaudit.open(sqlite_url) as p, caplog.at_level("WARNING", logger="plaudit.server"):
        run._best_effort(p.warm, "loading the jobs' caches")  # no exception escapes
    assert "the cache would not load" in caplog.text
