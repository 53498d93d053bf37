"""A thread's store connection outlives the thread: servers' worker threads come and go, and
neither a connection per thread ever seen (the server's connection limit) nor a new one per
thread (10 to 20 ms on PostgreSQL) is acceptable."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time

from plaudit import Plaudit


def _in_threads(p: Plaudit, n: int, *, concurrent: bool, wave: str = "") -> list[int]:
    """Append once from each of `n` threads; the ids of the connections they used."""
    used: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        p.log.append({"id": f"t{wave}{i}", "type": "test.conn.v1", "session_id": "s", "source": "t",
                      "ts_ms": 1, "payload": {"i": i}})  # fmt: skip
        with lock:
            used.append(id(p.backend.connection()))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
        if not concurrent:
            t.join()
    for t in threads:
        t.join()
    del threads
    gc.collect()
    return used


def test_connections_of_ended_threads_are_reused(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        used = _in_threads(p, 30, concurrent=False)
        # One thread at a time: each takes the connection the previous one gave back.
        assert len(set(used)) == 1
        assert len(p.backend._all) <= 2  # that one, and the main thread's (opening the store)
        used = _in_threads(p, 12, concurrent=True, wave="b")
        opened = len(p.backend._all)
        assert opened <= 12 + 2
        # Threads that ended gave theirs back: another wave opens nothing new.
        _in_threads(p, 12, concurrent=True, wave="c")
        assert len(p.backend._all) <= opened + 1
        assert len(p.log) == 54 and p.log.verify().ok


def test_a_connection_left_in_a_transaction_is_closed_not_reused(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        conn_ids: list[int] = []

        def leave_open() -> None:
            conn = p.backend.connection()
            conn_ids.append(id(conn))
            conn.execute("BEGIN")  # the thread ends with a transaction open (a bug elsewhere)

        t = threading.Thread(target=leave_open)
        t.start()
        t.join()
        del t
        gc.collect()
        assert all(id(c) != conn_ids[0] for c in p.backend._spare)
        assert all(id(c) != conn_ids[0] for c in p.backend._all)
        after = {"id": "after", "type": "test.conn.v1", "session_id": "s", "source": "t"}
        assert p.log.append({**after, "ts_ms": 1, "payload": {}}).status == "appended"


def test_warm_opens_spares_the_next_threads_take(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        assert p.backend.warm(4) == 4
        spares = {id(c) for c in p.backend._spare}
        used = _in_threads(p, 4, concurrent=True)
        assert set(used) <= spares | {id(c) for c in p.backend._all}
        assert len(p.backend._all) <= 4 + 1


OPEN_AT_ONCE = r"""
import os, sys, time
from plaudit import Plaudit
db, gate, name = sys.argv[1:4]
while not os.path.exists(gate):
    time.sleep(0.0005)
with Plaudit.open(db) as p:
    p.log.append({"id": name, "type": "test.open.v1", "ts_ms": 1, "session_id": "s",
                  "source": "t", "payload": {}})
"""


def test_processes_opening_a_new_sqlite_file_at_once_all_get_in(tmp_path) -> None:
    """The first opens of a new file race to switch it to WAL; SQLite tells the losers
    "database is locked" without waiting, and opening must ask again, not fail."""
    for round_ in range(3):
        db = tmp_path / f"new-{round_}.db"
        gate = tmp_path / f"go-{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT_ONCE, str(db), str(gate), f"p{k}"],
                stderr=subprocess.PIPE,
            )
            for k in range(6)
        ]
        time.sleep(0.5)
        gate.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()[-2000:]
        with Plaudit.open(db) as p:
            assert len(p.log) == 6 and p.log.verify().ok
