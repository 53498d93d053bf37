"""`Tx.upsert`: the one bulk upsert every backend offers (SQLite: multi-row statements in
chunks; PostgreSQL: one statement of typed arrays). Whatever the rows, the table ends as a
model of it says."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit

_tables = itertools.count()
_row = st.tuples(
    st.sampled_from(["a", "b", "é", "x" * 40]),
    st.integers(0, 30),
    st.floats(allow_nan=False, width=64),
    st.one_of(st.none(), st.integers(-(2**62), 2**62)),
)
#: Calls of rows whose keys do not repeat within one call (as `update` requires).
_calls = st.lists(
    st.tuples(st.lists(_row, max_size=90, unique_by=lambda r: (r[0], r[1])), st.booleans()),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=_calls)
def test_upsert_ends_as_the_model_says(db_url: str, calls: list[Any]) -> None:
    table = f"upsert_t{next(_tables)}"
    with Plaudit.open(db_url) as p:
        with p.backend.write() as tx:
            tx.execute(
                tx.ddl(
                    f"CREATE TABLE {table} (name TEXT NOT NULL, k {{bigint}} NOT NULL, "
                    "v {double} NOT NULL, w {bigint}, PRIMARY KEY (name, k))"
                )
            )
        model: dict[tuple[str, int], tuple[Any, ...]] = {}
        for rows, update in calls:
            with p.backend.write() as tx:
                tx.upsert(
                    table,
                    ("name", "k", "v", "w"),
                    ("text", "{bigint}", "{double}", "{bigint}"),
                    rows,
                    key=("name", "k"),
                    update=update,
                )
            for r in rows:
                if update or (r[0], r[1]) not in model:
                    model[(r[0], r[1])] = r
        with p.backend.read() as tx:
            got = tx.fetchall(f"SELECT name, k, v, w FROM {table}")
        assert sorted(got) == sorted(model.values())
