"""The `signals` projection: the export from it equals a from-scratch join of the whole log.

Events are appended in several batches (so rows are kept current across appends), with
repeats (identical and not), out-of-order timestamps, sessions that change, overrides before
and after outcomes, events without a decision id, unknown router types, and age windows that
cut through all of that. Every export option is compared: counts, quality, distributions,
conflicts and each output file byte for byte.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.events import make_event
from plaudit.signals import synth
from plaudit.signals.contract import DECISION, OUTCOME, OVERRIDE
from plaudit.signals.export import export
from plaudit.signals.projection import TABLES

T0 = 1_780_000_000_000
HOUR = 3_600_000
NOW = T0 + 10 * HOUR
_ids = itertools.count()


def _event(kind: str, did: Any, ts: int, session: str, **fields: Any) -> Any:
    payload: dict[str, Any] = {"decision_id": did, "session_id": session, **fields}
    if kind == "decision":
        payload.setdefault("chosen_task", "a")
        payload.setdefault("confidence", 0.5)
        return make_event(DECISION, payload, id=f"e{next(_ids)}", ts_ms=ts, session_id=session)
    if kind == "outcome":
        payload.setdefault("outcome", "success")
        payload.setdefault("task_executed", "a")
        return make_event(OUTCOME, payload, id=f"e{next(_ids)}", ts_ms=ts, session_id=session)
    if kind == "override":
        payload.setdefault("override_task", "b")
        return make_event(OVERRIDE, payload, id=f"e{next(_ids)}", ts_ms=ts, session_id=session)
    return make_event("flow.router.other.v1", payload, id=f"e{next(_ids)}", ts_ms=ts)


event = st.builds(
    _event,
    st.sampled_from(["decision", "decision", "outcome", "outcome", "override", "other"]),
    st.sampled_from(["d0", "d1", "d2", "d3", "d4", "d5", "", 7]),
    st.integers(T0, T0 + 6 * HOUR).map(lambda t: t - t % (HOUR // 2)),  # ties happen
    st.sampled_from(["s1", "s2", ""]),
    chosen_task=st.sampled_from(["a", "b", ""]),
    outcome=st.sampled_from(["success", "failure", "wasted"]),
    manual_override_task=st.sampled_from(["", "", "c"]),
    override_task=st.sampled_from(["b", "c"]),
    propensity=st.sampled_from([0.5, 1, None]),
    time_to_resolution_ms=st.sampled_from([10, 10, 20]),
)
OPTIONS = [
    {"max_age_hours": 1000},
    {"max_age_hours": 5},  # cuts through the generated hours
    {"max_age_hours": 1000, "history_size": 1, "seed": 7, "split_by": "session"},
    {"max_age_hours": 7, "history_size": 5, "rewards": {"wasted": -1.0}},
    {"max_age_hours": 1000, "history_size": 0, "formats": ["jsonl", "chat", "preference"]},
]


def _outputs(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.suffix == ".jsonl"}


def assert_same_as_full_join(p: Plaudit, work: Path, **options: Any) -> dict[str, Any]:
    a = export(plaudit=p, output_dir=work / "a", now_ms=NOW, **options)
    b = export(plaudit=p, output_dir=work / "b", now_ms=NOW, use_projection=False, **options)
    for key in ("counts", "quality", "distributions", "conflicts", "parse_error_samples"):
        assert a[key] == b[key], (key, options)
    assert _outputs(work / "a") == _outputs(work / "b"), options
    return a


def _tables(p: Plaudit) -> dict[str, list[tuple[Any, ...]]]:
    """Every projection table's rows, in one order whatever the backend returns."""
    with p.log.reading() as view:
        return {
            t: sorted(
                (
                    tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                    for row in view.tx.fetchall(f"SELECT * FROM {t}")
                ),
                key=repr,
            )
            for t in TABLES
        }


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(st.lists(event, min_size=1, max_size=12), min_size=1, max_size=4))
def test_projection_export_equals_a_full_join(batches: list[list[Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with Plaudit.open(work / "p.db") as p:
            for batch in batches:
                p.log.append_batch(batch)
                # Re-exported into the same directory after each batch: the hours whose
                # rows did not change are copied from the files of the export before.
                assert_same_as_full_join(p, work, max_age_hours=1000)
            for options in OPTIONS:
                assert_same_as_full_join(p, work, **options)
            before = _tables(p)
            p.rebuild()
            assert _tables(p) == before


def test_projection_on_both_backends_and_rebuild(pl: Plaudit, tmp_path: Path) -> None:
    rows = list(synth.rows(400, seed=5, sessions=12, start_ms=T0, repeat_rate=0.1))
    from plaudit.seqmem import SeqMemRow, row_to_event

    # Each row its own event (a retried row repeats its content under a new id).
    events = [
        msgspec.structs.replace(row_to_event(SeqMemRow(**r)), id=f"r{i}")
        for i, r in enumerate(rows)
    ]
    half = len(events) // 2
    pl.log.append_batch(events[:half])
    for e in events[half:]:  # one at a time, as emits arrive
        pl.log.append(e)
    summary = assert_same_as_full_join(pl, tmp_path, max_age_hours=1000)
    assert summary["counts"]["joined_rows"] > 100
    assert summary["counts"]["identical_repeats"] > 0
    before = _tables(pl)
    pl.rebuild()
    assert _tables(pl) == before
    assert_same_as_full_join(pl, tmp_path, max_age_hours=1000, history_size=2)


def test_an_append_updates_the_rows_it_touches(tmp_path: Path) -> None:
    with Plaudit.open(tmp_path / "p.db") as p:
        p.signals.decision("d1", "a", 0.5, "i", session_id="s", ts_ms=T0)
        p.signals.decision("d2", "b", 0.5, "i", session_id="s", ts_ms=T0 + 10)
        p.signals.outcome("d2", "success", "b", 5, session_id="s", ts_ms=T0 + 20)
        first = export(plaudit=p, output_dir=None, now_ms=NOW, max_age_hours=1000)
        assert first["counts"]["joined_rows"] == 1
        # An earlier decision arriving late goes into d2's history.
        p.signals.decision("d0", "z", 0.5, "i", session_id="s", ts_ms=T0 - 10)
        p.signals.override("d2", "b", "c", session_id="s", ts_ms=T0 + 30)
        export(plaudit=p, output_dir=tmp_path / "out", now_ms=NOW, max_age_hours=1000)
        rows = [
            json.loads(line)
            for split in ("train", "val", "test")
            for line in (tmp_path / "out" / f"{split}.jsonl").read_text().splitlines()
        ]
        assert [r["id"] for r in rows] == ["d2"]
        assert [h["decision_id"] for h in rows[0]["event_history"]] == ["d0", "d1"]
        assert rows[0]["manual_override_task"] == "c"


@pytest.mark.parametrize("age", [1000, 3])
def test_window_that_splits_an_ids_events_falls_back_exactly(tmp_path: Path, age: int) -> None:
    with Plaudit.open(tmp_path / "p.db") as p:
        p.log.append_batch(
            [
                _event("decision", "d1", T0, "s", chosen_task="a"),
                _event("outcome", "d1", T0 + 1, "s"),
                # the same decision repeated inside a 3-hour window: the window splits d1
                _event("decision", "d1", NOW - HOUR, "s", chosen_task="b"),
            ]
        )
        summary = assert_same_as_full_join(p, tmp_path, max_age_hours=age)
        assert summary["counts"]["duplicate_decision_ids"] == (1 if age == 1000 else 0)


@pytest.mark.parametrize("names", [[], ["signals"]])
def test_plaudit_rebuild_on_the_command_line_restores_the_rows(
    tmp_path: Path, names: list[str]
) -> None:
    """`plaudit rebuild` (every projection, or `signals` by name) replays the log into the
    same tables, after they were emptied behind the projection's back; the export from them
    equals a full join again."""
    from .conftest import run_plaudit

    db = tmp_path / "p.db"
    rows = list(synth.rows(120, seed=9, sessions=6, start_ms=T0, repeat_rate=0.1))
    from plaudit.seqmem import SeqMemRow, row_to_event

    with Plaudit.open(db) as p:
        p.log.append_batch([row_to_event(SeqMemRow(**r)) for r in rows])
        p.log.ensure_projection("signals")
        before = _tables(p)
        with p.log.writer() as w:  # the rows lost, as by a bad migration or a hand edit
            for table in TABLES:
                w.tx.execute(f"DELETE FROM {table}")
    r = run_plaudit("rebuild", "--db", str(db), *names)
    assert r.returncode == 0, r.stderr
    assert "rebuilt signals from" in r.stdout
    with Plaudit.open(db) as p:
        after = _tables(p)
        # Change counts per hour depend on how appends were batched; the rest is identical.
        assert {t: v for t, v in after.items() if t != "signals_hours"} == {
            t: v for t, v in before.items() if t != "signals_hours"
        }
        summary = assert_same_as_full_join(p, tmp_path, max_age_hours=1000)
        assert summary["counts"]["joined_rows"] > 50
