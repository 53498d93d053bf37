"""A thread's store connection outlives the thread: servers' worker threads come and go, and
neither a connection per thread ever seen (the server's connection limit) nor a new one per
thread (10 to 20 ms on PostgreSQL) is acceptable."""

from __future__ import annotations

import gc
import threading

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
