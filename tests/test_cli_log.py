"""`plaudit log ...`: every command with --db and --json, the $PLAUDIT_DB default, and errors
that are one `error: ...` line with a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _logtools import ev
from plaudit import Plaudit
from plaudit.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "examples" / "data" / "sample_router_log.jsonl"
PLAUDIT = str(Path(sys.executable).with_name("plaudit"))


def run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def script(
    args: list[str], *, stdin: str | None = None, env: dict[str, str] | None = None, cwd=None
) -> subprocess.CompletedProcess[str]:
    """The real console script, in a child process."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("PLAUDIT_DB", "PLAUDIT_DEBUG")}
    full_env.update(env or {})
    return subprocess.run(
        [PLAUDIT, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=60,
    )


def test_append_head_tail_stats_json(db_url: str, capsys) -> None:
    events = [
        {"type": "myapp.thing.v1", "id": f"a{i}", "session_id": f"s{i % 2}", "payload": {"i": i}}
        for i in range(3)
    ]
    code, out, _ = run(["log", "append", "--db", db_url, "--json", json.dumps(events)], capsys)
    assert code == 0
    result = json.loads(out)
    assert (result["appended"], result["present"]) == (3, 0)
    assert [r["seq"] for r in result["results"]] == [1, 2, 3]

    code, out, _ = run(["log", "append", "--db", db_url, json.dumps(events[0])], capsys)
    assert code == 0 and out.split()[:3] == ["present", "1", "a0"]

    code, out, _ = run(["log", "head", "--db", db_url, "--json"], capsys)
    head = json.loads(out)
    assert head["length"] == 3 and head["digest"] == f"3:{head['hash']}"

    code, out, _ = run(["log", "tail", "--db", db_url, "-n", "2", "--json"], capsys)
    tail = [json.loads(x) for x in out.splitlines()]
    assert [t["id"] for t in tail] == ["a1", "a2"] and tail[1]["payload"] == {"i": 2}
    code, out, _ = run(["log", "tail", "--db", db_url, "--type", "nothing."], capsys)
    assert code == 0 and out == ""
    code, out, _ = run(["log", "tail", "--db", db_url], capsys)
    assert len(out.splitlines()) == 3 and "myapp.thing.v1" in out

    code, out, _ = run(["log", "stats", "--db", db_url, "--json"], capsys)
    stats = json.loads(out)
    assert stats["length"] == 3 and stats["sessions"] == 2
    assert stats["by_type"] == {"myapp.thing.v1": 3} and stats["quarantined"] == 0
    assert stats["backend"] in ("sqlite", "postgres")
    code, out, _ = run(["log", "stats", "--db", db_url], capsys)
    assert "events      3" in out and "myapp.thing.v1  3" in out

    code, out, _ = run(["log", "verify", "--db", db_url, "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["checked"] == 3
    assert report["head"] == head["digest"]


def test_import_export_commands(db_url: str, tmp_path: Path, capsys) -> None:
    code, out, _ = run(["log", "import", "--db", db_url, str(SAMPLE)], capsys)
    n = sum(1 for _ in SAMPLE.open("rb"))
    assert code == 0 and f"{n} imported, 0 duplicate, 0 quarantined" in out
    target = tmp_path / "sub" / "out.jsonl"
    code, _, err = run(["log", "export", "--db", db_url, "-o", str(target)], capsys)
    assert code == 2 and f"its directory {target.parent} does not exist" in err
    assert not target.parent.exists()  # a mistyped directory is never made
    target.parent.mkdir()
    code, _, err = run(["log", "export", "--db", db_url, "-o", str(target)], capsys)
    assert code == 0 and f"wrote {n} events" in err
    assert len(target.read_bytes().splitlines()) == n
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp left
    full = tmp_path / "full.jsonl"
    args = ["log", "export", "--db", db_url, "--format", "jsonl", "--type", "flow.router.override"]
    code, _, _ = run([*args, "-o", str(full)], capsys)
    rows = [json.loads(x) for x in full.read_bytes().splitlines()]
    assert code == 0 and rows and {r["type"] for r in rows} == {"flow.router.override.v1"}
    assert all(r["seq"] > 0 and len(r["hash"]) == 64 for r in rows)


def test_group_level_db_option(sqlite_url: str, capsys) -> None:
    code, _, _ = run(["--db", sqlite_url, "log", "append", json.dumps({"type": "a.b"})], capsys)
    assert code == 0
    with Plaudit.open(sqlite_url) as p:
        assert len(p.log) == 1


def test_plaudit_db_env_default(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    r = script(["log", "append"], stdin='{"type": "a.b", "id": "x"}\n', env={"PLAUDIT_DB": str(db)})
    assert r.returncode == 0, r.stderr
    assert db.exists()
    r = script(["log", "stats", "--json"], env={"PLAUDIT_DB": str(db)})
    assert json.loads(r.stdout)["length"] == 1


def test_default_path_without_env(tmp_path: Path) -> None:
    r = script(["log", "head"], cwd=tmp_path)  # a read never makes the store it was asked for
    assert r.returncode == 2 and "no plaudit store at .plaudit/plaudit.db" in r.stderr
    assert not (tmp_path / ".plaudit").exists()
    r = script(["init"], cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "created a new plaudit store at .plaudit/plaudit.db\n"
    assert (tmp_path / ".plaudit" / "plaudit.db").exists()
    r = script(["log", "head"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0:")


def test_append_queue_returns_before_positions_and_close_sequences(db_url: str, capsys) -> None:
    """`--queue` answers once the events are durable (PostgreSQL: "queued", no position);
    the command's store is closed before it exits, which sequences what it queued."""
    events = [{"type": "myapp.thing.v1", "id": f"q{i}", "payload": {"i": i}} for i in range(2)]
    code, out, _ = run(["log", "append", "--db", db_url, "--queue", json.dumps(events)], capsys)
    assert code == 0
    with Plaudit.open(db_url) as p:
        expected = "queued" if p.backend.dialect == "postgres" else "appended"
        assert [line.split()[0] for line in out.splitlines()] == [expected, expected]
        assert [p.log.get(f"q{i}").seq for i in range(2)] == [1, 2]  # type: ignore[union-attr]


def test_append_from_stdin_json_lines(sqlite_url: str) -> None:
    lines = "\n".join(json.dumps({"type": "a.b", "id": f"l{i}"}) for i in range(4))
    r = script(["log", "append", "--db", sqlite_url, "--json"], stdin=lines + "\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["appended"] == 4
    pretty = json.dumps({"type": "a.b", "id": "pretty", "payload": {"x": [1, 2]}}, indent=2)
    r = script(["log", "append", "--db", sqlite_url], stdin=pretty)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:3] == ["appended", "5", "pretty"]


def test_append_rejects_bytes_that_are_not_utf8(sqlite_url: str) -> None:
    r = subprocess.run(
        [PLAUDIT, "log", "append", "--db", sqlite_url],
        input=b'{"type": "a.b", "payload": {"x": "\xff"}}',
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 2 and b"error: stdin: input: invalid UTF-8 at byte" in r.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "code", "words"),
    [
        (["log", "append"], "{not json", 2, "error: stdin: input: malformed JSON"),
        (["log", "append"], '{"type": "a.b"}\n{oops', 2, "error: stdin:2: input: malformed JSON"),
        (["log", "append"], "  \n", 2, "error: stdin: input: is empty: no JSON given"),
        (["log", "append"], '"just a string"', 2, "error: event[0]: event: must be an object"),
        (["log", "append"], '{"type": "a.b", "ts_ms": "x"}', 2, "error: event[0]: ts_ms:"),
        (["log", "append"], '[{"type": "a.b"}, {"type": "bad"}]', 2, "error: event[1]: type:"),
        (["log", "append"], '{"type": "a.b", "payload": [1]}', 2, "error: event[0]: payload:"),
        (["log", "verify", "--against", "zz"], None, 2, "error: against:"),
        (["log", "import", "missing.jsonl"], None, 2, "does not exist"),
        (["log", "tail", "-n", "0"], None, 2, "0 is not in the range"),
    ],
)
def test_console_script_errors(
    sqlite_url: str, args: list[str], stdin: str | None, code: int, words: str
) -> None:
    Plaudit.open(sqlite_url).close()
    r = script([*args[:2], "--db", sqlite_url, *args[2:]], stdin=stdin)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert words in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    with Plaudit.open(sqlite_url) as p:
        assert len(p.log) == 0  # nothing partial was written


def test_conflict_exit_code(sqlite_url: str, capsys) -> None:
    with Plaudit.open(sqlite_url) as p:
        p.log.append(ev(1))
    other = json.dumps({"type": "test.thing.v1", "id": "e1", "payload": {"i": 2}})
    code, _, err = run(["log", "append", "--db", sqlite_url, other], capsys)
    assert code == 3 and err.startswith("error: id 'e1' is already committed")


def test_not_a_database(tmp_path: Path, capsys) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("this is not a database, " * 200)
    code, _, err = run(["log", "stats", "--db", str(bogus)], capsys)
    assert code == 6 and err.startswith("error: cannot open SQLite database")
    assert bogus.read_text().startswith("this is not a database")


def test_unreachable_postgres(capsys) -> None:
    code, _, err = run(["log", "head", "--db", "postgresql://127.0.0.1:1/nothing"], capsys)
    assert code == 6 and err.startswith("error: cannot connect to PostgreSQL")


def test_bad_schema_name(capsys) -> None:
    code, _, err = run(["log", "head", "--db", "postgresql://127.0.0.1:1/x?schema=A;drop"], capsys)
    assert code == 2 and "schema 'A;drop' must match" in err


def test_export_to_an_unwritable_place(sqlite_url: str, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = str(blocker / "o.jsonl")
    Plaudit.open(sqlite_url).close()
    code, _, err = run(["log", "export", "--db", sqlite_url, "-o", target], capsys)
    assert code == 2 and err.startswith("error: output: cannot write")


def test_every_log_command_has_db_and_json() -> None:
    from plaudit.cli.log import log, rebuild

    read_only = {"verify", "head", "tail", "stats", "quarantine", "import", "append"}
    store_free = {"check-proof"}  # never opens a store, so a --db would only mislead
    for name, cmd in [*log.commands.items(), ("rebuild", rebuild)]:
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if name in store_free:
            assert "--db" not in opts and "--json" in opts, name
            continue
        assert "--db" in opts, name
        if name in read_only or name == "rebuild":
            assert "--json" in opts, name
