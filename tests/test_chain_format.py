"""The chain format is defined once (`plaudit.store.chain`); its fast twins and SQL agree with it.

Verification rebuilds the hashed bytes in SQL on each backend; the append builds them in
Python, once in `event_body` and once inlined in the batch loop. Any drift between the four
would make every new log fail verify, or worse, pass it with different bytes.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.events import prepare, prepare_batch
from plaudit.store.chain import (
    BODY_SQL,
    DIGEST_BODY_SQL,
    GENESIS,
    chain_new_rows,
    content_digest,
    digest_body,
    event_body,
)

texts = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=12)
events = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["fmt.a.v1", "fmt.b.v2"]),
            "ts_ms": st.integers(0, 2**53 - 1),
            "session_id": texts,
            "source": texts,
            "payload": st.dictionaries(texts, st.integers(-(2**53) + 1, 2**53 - 1) | texts),
            "meta": st.dictionaries(texts, st.booleans(), max_size=2),
        }
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=100, deadline=None)
@given(events)
def test_python_builders_agree(batch: list[dict[str, Any]]) -> None:
    one = [prepare({**f, "id": f"id-{i}"}) for i, f in enumerate(batch)]
    many = prepare_batch([{**f, "id": f"id-{i}"} for i, f in enumerate(batch)])
    assert one == many  # prepare_batch's inlined digest is content_digest
    rows, _, _ = chain_new_rows(one, 0, GENESIS, bytes)
    prev = GENESIS
    for p, row in zip(one, rows, strict=True):
        e = p.event
        body = event_body(
            e.id, e.type, e.ts_ms, e.session_id, e.source, p.payload_text, p.meta_text
        )
        assert body == p.body()
        prev = hashlib.sha256(prev + body).digest()
        assert row[-1] == prev
        assert p.content_digest == content_digest(
            e.type, e.session_id, e.source, p.payload_text.encode()
        )


_ids = itertools.count()


# One store for every example (ids never repeat), so the fixture's reuse is intended.
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events)
def test_sql_rebuilds_the_same_bytes(db_url: str, batch: list[dict[str, Any]]) -> None:
    with Plaudit.open(db_url) as p:
        prepared = [prepare({**f, "id": f"fmt-{next(_ids)}"}) for f in batch]
        p.log.append_batch([q.event for q in prepared])
        with p.backend.read() as tx:
            for q in prepared:
                e = q.event
                body, dbody = tx.fetchone(
                    f"SELECT {BODY_SQL[tx.dialect]}, {DIGEST_BODY_SQL[tx.dialect]} "
                    "FROM plaudit_events WHERE id = ?",
                    (e.id,),
                )
                assert bytes(body) == q.body()
                assert bytes(dbody) == digest_body(
                    e.type, e.session_id, e.source, q.payload_text.encode()
                )
