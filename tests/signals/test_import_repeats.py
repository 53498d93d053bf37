"""One dataset, one summary: the log keeps the exact repeats of lines that `log import` does
not turn into new events, so a summary of the log equals the summary of the file it came
from (issue 31, item 7)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.seqmem import export_rows, import_file
from plaudit.signals import synth
from plaudit.signals.audit import audit
from plaudit.signals.contract import build_decision, build_outcome
from plaudit.signals.export import export
from plaudit.signals.seqmem_file import safe_json, seq_mem_row

from .conftest import BIG_AGE, run_plaudit, write_rows

COMPARED = ("counts", "quality", "distributions", "conflicts")


def _summaries(
    tmp_path: Path, src: Path, db: str | None = None, **options: Any
) -> tuple[dict[str, Any], ...]:
    from_file = export(seq_mem=src, output_dir=None, max_age_hours=BIG_AGE, **options)
    with Plaudit.open(db or str(tmp_path / "p.db")) as p:
        import_file(p.log, src)
        from_log = export(plaudit=p, output_dir=None, max_age_hours=BIG_AGE, **options)
        full_read = export(
            plaudit=p, output_dir=None, max_age_hours=BIG_AGE, use_projection=False, **options
        )
    return tuple({k: s[k] for k in COMPARED} for s in (from_file, from_log, full_read))


def test_summary_of_the_log_equals_the_summary_of_the_file(tmp_path: Path, db_url: str) -> None:
    src = tmp_path / "seq_mem.jsonl"
    with open(src, "w") as f:
        synth.write(f, 600, seed=5, repeat_rate=0.04)
    from_file, from_log, full_read = _summaries(tmp_path, src, db_url)
    assert from_file["counts"]["identical_repeats"] > 0  # the file has repeated lines
    assert from_log == from_file
    assert full_read == from_file
    # A gate on the duplicate rate gives one verdict, whichever the source.
    limit = from_file["quality"]["duplicate_rate"] - 0.001
    verdicts = {audit(s, limits={"max_duplicate_rate": limit}, write=False)["pass"] for s in
                (from_file, from_log)}  # fmt: skip
    assert verdicts == {False}


def test_repeats_are_recorded_once_and_written_back(tmp_path: Path) -> None:
    src = tmp_path / "seq_mem.jsonl"
    with open(src, "w") as f:
        lines = synth.write(f, 200, seed=2, repeat_rate=0.1)
    with Plaudit.open(tmp_path / "p.db") as p:
        first = import_file(p.log, src)
        assert first.repeats > 0 and first.imported == lines and len(p.log) == lines
        again = import_file(p.log, src)  # the same file again adds nothing
        assert (again.imported, again.repeats, again.duplicates) == (0, 0, lines)
        assert len(p.log) == lines
        out = tmp_path / "back.jsonl"
        with out.open("wb") as f:
            export_rows(p.log, f)
    back = [json.loads(x) for x in out.read_bytes().splitlines()]
    given_rows = [json.loads(x) for x in src.read_bytes().splitlines()]
    assert [(r["event_id"], r["ts_ms"], r["name"]) for r in back] == [
        (r["event_id"], r["ts_ms"], r["name"]) for r in given_rows
    ]
    assert [json.loads(r["subject"]) for r in back] == [
        json.loads(r["subject"]) for r in given_rows
    ]


def test_cli_import_says_how_many_lines_were_repeats(tmp_path: Path) -> None:
    row = seq_mem_row(
        build_decision(
            decision_id="d1", chosen_task="t", confidence=0.5, user_intent="", session_id="s"
        ),
        1_790_000_000_000,
    )
    src = write_rows(tmp_path / "in.jsonl", [safe_json(row)] * 3)
    proc = run_plaudit("--db", str(tmp_path / "p.db"), "log", "import", str(src), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["imported"], report["repeats"], report["duplicates"]) == (3, 2, 0)


def _lines(events: list[dict[str, Any]], order: list[int]) -> list[str]:
    return [safe_json(events[i]) for i in order]


@st.composite
def files(draw: Any) -> list[str]:
    """A few router events (some sharing a decision id with different content, i.e.
    conflicts), written in an order that repeats some lines exactly, anywhere."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    ts = 1_790_000_000_000
    events = []
    for i in range(draw(st.integers(1, 6))):
        did = f"d{rnd.randrange(3)}"
        task = rnd.choice(["a", "b"])
        d = build_decision(
            decision_id=did, chosen_task=task, confidence=0.5, user_intent="", session_id="s"
        )
        events.append(seq_mem_row(d, ts + i * 1000))
        if rnd.random() < 0.7:
            o = build_outcome(
                decision_id=did,
                outcome=rnd.choice(["success", "failure"]),
                task_executed=task,
                time_to_resolution_ms=5,
                session_id="s",
            )
            events.append(seq_mem_row(o, ts + i * 1000 + rnd.choice([1, 2])))
    order = list(range(len(events)))
    order += draw(st.lists(st.sampled_from(order), max_size=8))  # the repeats
    return _lines(events, draw(st.permutations(order)))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=files())
def test_any_order_of_repeats_summarises_alike(tmp_path_factory: Any, lines: list[str]) -> None:
    work = tmp_path_factory.mktemp("repeats")
    src = write_rows(work / "in.jsonl", lines)
    from_file, from_log, full_read = _summaries(work, src)
    assert from_log == from_file
    assert full_read == from_file
