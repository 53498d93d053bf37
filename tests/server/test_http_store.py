"""Many threads writing through one handle, as in `plaudit serve`: nothing lost, chain intact."""

from __future__ import annotations

import threading

from plaudit import Plaudit, make_event


def test_many_threads_append_through_one_serving_handle(db_url: str) -> None:
    """20 threads x 25 appends: every one acknowledged, every one stored, chain intact."""
    acked: list[str] = []
    lock = threading.Lock()
    with Plaudit.open(db_url, durability="normal") as p:

        def writer(k: int) -> None:
            for i in range(25):
                r = p.log.append(make_event("test.thread.v1", {"k": k, "i": i}, id=f"t{k}-{i}"))
                with lock:
                    acked.append(r.id)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(acked) == 500
        assert len(p.log) == 500
        assert {e.id for e in p.log.replay()} == set(acked)
        assert p.log.verify().ok
