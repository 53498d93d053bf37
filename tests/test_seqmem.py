"""seq_mem.jsonl import/export: bad lines are quarantined with a place and a reason, never fatal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plaudit import Plaudit
from plaudit.cli import main
from plaudit.seqmem import (
    MAX_LINE_BYTES,
    export_rows,
    import_file,
    parse_line,
    quarantined,
)

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "examples" / "data" / "sample_router_log.jsonl"


def row(i: int, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ts_ms": 1_763_700_000_000 + i,
        "dur_us": 100 + i,
        "ok": True,
        "session_id": f"sess-{i % 3}",
        "event_id": f"ev-{i}",
        "content_hash": f"{i:064x}",
        "name": "flow.router.decision.v1",
        "subject": json.dumps({"decision_id": f"d{i}", "confidence": 0.5}),
    }
    base.update(over)
    return base


def deep(n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(n):
        out = [out]
    return out


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def events_of(p: Plaudit) -> list[tuple[Any, ...]]:
    return [
        (e.id, e.type, e.ts_ms, e.session_id, e.source, e.payload, e.meta) for e in p.log.replay()
    ]


def test_sample_imports_and_reimports_as_duplicates(pl: Plaudit) -> None:
    n = sum(1 for _ in SAMPLE.open("rb"))
    first = import_file(pl.log, SAMPLE)
    assert (first.lines, first.imported, first.duplicates, first.quarantined) == (n, n, 0, 0)
    head = pl.log.head()
    again = import_file(pl.log, SAMPLE)
    assert (again.imported, again.duplicates, again.quarantined) == (0, n, 0)
    assert pl.log.head() == head and pl.log.verify().ok
    e = pl.log.get("sample-000:decision")
    assert e is not None and e.type == "flow.router.decision.v1" and e.source == "seq_mem"
    assert e.payload["chosen_task"] == "ai:flow/refactor"
    assert e.meta["dur_us"] == 269 and e.meta["ok"] is True


BAD_LINES: list[tuple[bytes, str]] = [
    (b'{"ts_ms": 1, "name": "a.b", "event_id": \n', "malformed JSON"),
    (b"[1, 2, 3]\n", "not a JSON object"),
    (b"42\n", "not a JSON object"),
    (b'"just a string"\n', "not a JSON object"),
    (line(row(90, ts_ms="yesterday")), "Expected `int`, got `str` - at `$.ts_ms`"),
    (line(row(91, subject=17)), "$.subject"),
    (line({"ts_ms": 5, "name": "a.b"}), "missing required field `event_id`"),
    (line(row(92))[:-3] + b'\xff\xfe"}\n', "invalid UTF-8 at byte"),
    (line(row(93)).replace(b"d93", b"d\x0093"), "NUL byte"),
    (line(row(94, name="not namespaced")), "type:"),
    (line(row(95, ts_ms=-5)), "ts_ms: must be between 0"),
    (line(row(96, subject=json.dumps({"n": 2**60}))), "JSON-safe range"),
    (line(row(97, event_id="")), "id: must not be empty"),
    (line(row(98, subject="[" * 50_000 + "]" * 50_000)), "nested too deeply"),
    (
        line(row(99, subject={"x": "PLACEHOLDER"})).replace(
            b'"PLACEHOLDER"', b"[" * 50_000 + b"]" * 50_000
        ),
        "nested too deeply",
    ),
    (line(row(100, subject={"x": deep(70)})), "nested deeper than 64"),
]


def test_bad_lines_are_quarantined_and_the_import_goes_on(pl: Plaudit, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = [line(row(0))]
    for bad, _ in BAD_LINES:
        lines += [bad, line(row(len(lines)))]
    lines.append(b"\n")  # blank lines are skipped, not quarantined
    lines.append(line(row(0, subject=json.dumps({"changed": True}))))  # reused id: conflict
    lines.append(b'{"ts_ms": 1763700000000, "name": "flow.router')  # truncated last line
    path.write_bytes(b"".join(lines))

    report = import_file(pl.log, path)
    n_bad = len(BAD_LINES) + 2
    assert report.lines == len(lines)
    assert report.blank == 1
    assert report.quarantined == n_bad
    assert report.imported == len(lines) - n_bad - 1
    assert report.duplicates == 0

    q = quarantined(pl.log)
    assert len(q) == n_bad
    assert all(x.file == str(path) for x in q)
    by_line = {x.line_no: x for x in q}
    for k, (_, words) in enumerate(BAD_LINES):
        assert words in by_line[2 + 2 * k].reason, (k, by_line[2 + 2 * k].reason)
    assert "already committed with different content" in by_line[len(lines) - 1].reason
    assert "malformed JSON" in by_line[len(lines)].reason
    assert by_line[len(lines)].raw.startswith('{"ts_ms"')
    assert pl.log.verify().ok

    # A second import changes nothing, and the quarantine does not fill up with repeats.
    head = pl.log.head()
    again = import_file(pl.log, path)
    assert (again.imported, again.quarantined) == (0, n_bad)
    assert pl.log.head() == head
    assert len(quarantined(pl.log)) == n_bad


def test_oversize_line_is_quarantined_without_reading_it_whole(pl: Plaudit, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    huge = line(row(1, subject=json.dumps({"blob": "x" * (MAX_LINE_BYTES + 10)})))
    path.write_bytes(line(row(0)) + huge + line(row(2)))
    report = import_file(pl.log, path)
    assert (report.imported, report.quarantined) == (2, 1)
    (q,) = quarantined(pl.log)
    assert q.line_no == 2 and f"exceeds {MAX_LINE_BYTES} bytes" in q.reason
    assert len(q.raw) <= 4096  # only a prefix is kept


def test_empty_file(pl: Plaudit, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    report = import_file(pl.log, path)
    assert (report.lines, report.imported, report.quarantined) == (0, 0, 0)


def test_subject_forms_round_trip_exactly(pl: Plaudit, tmp_path: Path) -> None:
    rows = [
        row(0),
        row(1, subject={"as": "object", "n": [1, 2]}),
        row(2, subject="plain text, not JSON"),
        row(3, subject=None),
        row(4, subject="[1, 2]"),  # JSON, but not an object: kept as text
    ]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(line(r) for r in rows))
    assert import_file(pl.log, src).imported == 5
    out = tmp_path / "out.jsonl"
    with out.open("wb") as f:
        assert export_rows(pl.log, f) == 5
    back = [json.loads(x) for x in out.read_bytes().splitlines()]
    assert back[1:] == rows[1:]
    assert json.loads(back[0]["subject"]) == json.loads(rows[0]["subject"])
    assert {k: v for k, v in back[0].items() if k != "subject"} == {
        k: v for k, v in rows[0].items() if k != "subject"
    }


def test_import_export_import_round_trips(db_url: str, tmp_path: Path) -> None:
    with Plaudit.open(db_url) as a:
        import_file(a.log, SAMPLE)
        a.log.append({"type": "myapp.note.v1", "payload": {"x": 1}, "id": "native", "ts_ms": 5})
        first = tmp_path / "first.jsonl"
        with first.open("wb") as f:
            export_rows(a.log, f)
        original = events_of(a)
        assert import_file(a.log, first).imported == 0  # everything is already there
    with Plaudit.open(str(tmp_path / "b.db")) as b:
        report = import_file(b.log, first)
        assert report.imported == len(original) and report.quarantined == 0
        second = tmp_path / "second.jsonl"
        with second.open("wb") as f:
            export_rows(b.log, f)
        assert second.read_bytes() == first.read_bytes()
        copied = events_of(b)
    seq_mem_only = [e for e in original if e[0] != "native"]
    assert [e for e in copied if e[0] != "native"] == seq_mem_only
    native = next(e for e in copied if e[0] == "native")
    assert native[1:6] == ("myapp.note.v1", 5, "default", "plaudit", {"x": 1})


def test_export_filters_by_type(pl: Plaudit, tmp_path: Path) -> None:
    import_file(pl.log, SAMPLE)
    out = tmp_path / "o.jsonl"
    with out.open("wb") as f:
        n = export_rows(pl.log, f, types=["flow.router.outcome"])
    names = {json.loads(x)["name"] for x in out.read_bytes().splitlines()}
    assert n > 0 and names == {"flow.router.outcome.v1"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [(b"{", "line"), (b"null", "line"), (b"{}", "row"), (b"\x00", "line"), (b"\xc3(", "line")],
)
def test_parse_line_names_what_is_wrong(raw: bytes, field: str) -> None:
    from plaudit import ValidationError

    with pytest.raises(ValidationError) as info:
        parse_line(raw)
    assert info.value.field == field


def test_cli_import_and_quarantine(db_url: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "cli.jsonl"
    path.write_bytes(line(row(0)) + b"not json\n" + line(row(1)))
    assert main(["log", "import", "--db", db_url, str(path)]) == 0
    captured = capsys.readouterr()
    assert "2 imported, 0 duplicate, 1 quarantined" in captured.out
    assert "plaudit log quarantine" in captured.err
    assert main(["log", "import", "--db", db_url, str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["imported"], report["duplicates"], report["quarantined"]) == (0, 2, 1)
    assert main(["log", "quarantine", "--db", db_url]) == 0
    assert f"{path}:2: line: malformed JSON" in capsys.readouterr().out
    assert main(["log", "quarantine", "--db", db_url, "--json", "--file", str(path)]) == 0
    (q,) = json.loads(capsys.readouterr().out)["quarantine"]
    assert (q["line_no"], q["raw"]) == (2, "not json\n")
    assert main(["log", "quarantine", "--db", db_url, "--file", "elsewhere"]) == 0
    assert "quarantine is empty" in capsys.readouterr().out
    with Plaudit.open(db_url) as p:
        assert quarantined(p.log, file="x\x00y") == []
