"""Never fake: reading a store that does not exist is an error that creates nothing; a write
that creates a store says so, once."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.cli import main
from plaudit.config import is_postgres, split_schema
from plaudit.errors import StoreNotFoundError

#: Every command that only reads (or works on what a store already holds), with its arguments.
READS: list[list[str]] = [
    ["log", "verify"],
    ["log", "head"],
    ["log", "tail"],
    ["log", "stats"],
    ["log", "quarantine"],
    ["log", "export"],
    ["rebuild"],
    ["arms", "list"],
    ["arms", "show", "tool:exec:Bash"],
    ["arms", "config"],
    ["select"],
    ["observe", "--run-id", "r1", "--response", "ANSWER"],
    ["posteriors"],
    ["savings"],
    ["signal", "audit"],
    ["signal", "export"],
    ["ledger", "score"],
    ["ledger", "breakdown"],
    ["ledger", "metrics"],
    ["ledger", "transactions"],
    ["ledger", "incidents"],
    ["ledger", "verify"],
    ["ledger", "audit"],
    ["ledger", "reconcile"],
    ["ledger", "recover"],
    ["ledger", "checkpoint"],
    ["ledger", "backup", "BACKUP"],
    ["ledger", "export-progress", "PROGRESS"],
    ["ledger", "report"],
    ["ledger", "apply-rules"],
    ["ledger", "sessions", "end"],
    ["ledger", "sessions", "list"],
]


def schema_exists(url: str) -> bool:
    import psycopg

    dsn, schema = split_schema(url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def store_exists(url: str) -> bool:
    return schema_exists(url) if is_postgres(url) else Path(url).exists()


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_read_commands_refuse_a_missing_sqlite_store(tmp_path: Path, args, capsys) -> None:
    db = tmp_path / "missing" / "dir" / "typo-prod.db"
    (tmp_path / "answer.txt").write_text("the model's answer")
    args = [str(tmp_path / "out" / a) if a in ("BACKUP", "PROGRESS") else a for a in args]
    args = [str(tmp_path / "answer.txt") if a == "ANSWER" else a for a in args]
    before = tree(tmp_path)
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith(f"error: no plaudit store at {db} (no such file)")
    assert f"plaudit --db {db} init" in err  # how to create one
    assert out == ""
    assert tree(tmp_path) == before  # no file, no directory


@pytest.mark.postgres
@pytest.mark.parametrize(
    "args", [["log", "verify"], ["ledger", "score"], ["signal", "audit"], ["posteriors"]]
)
def test_read_commands_never_create_a_postgres_schema(pg_url: str, args, capsys) -> None:
    code = main(["--db", pg_url, *args])
    err = capsys.readouterr().err
    _, schema = split_schema(pg_url)
    assert code == 2 and f"no plaudit store at schema {schema} of " in err, err
    assert "(no such schema)" in err
    assert not schema_exists(pg_url)


@pytest.mark.postgres
def test_an_existing_schema_without_a_store_is_not_one(pg_url: str, capsys) -> None:
    import psycopg

    dsn, schema = split_schema(pg_url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    assert main(["--db", pg_url, "log", "head"]) == 2
    assert "(no plaudit tables there)" in capsys.readouterr().err
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchone()
    assert tables == (0,)


def test_library_refuses_and_creates_nothing(db_url: str) -> None:
    with pytest.raises(StoreNotFoundError) as info:
        Plaudit.open(db_url, create=False)
    assert info.value.exit_code == 2 and info.value.location
    assert not store_exists(db_url)
    with Plaudit.open(db_url) as p:  # the default, for writers: create
        assert p.created
        p.log.append({"type": "test.thing.v1", "payload": {}})
    with Plaudit.open(db_url, create=False) as p:
        assert not p.created and len(p.log) == 1 and p.log.verify().ok
    with Plaudit.open(db_url) as p:
        assert not p.created


@pytest.mark.postgres
def test_a_password_never_appears_in_the_message(pg_url: str) -> None:
    dsn, schema = split_schema(pg_url)
    host = dsn.split("://", 1)[1]
    url = f"postgresql://postgres:s3cret@{host}?schema={schema}&password=s3cret"
    with pytest.raises(StoreNotFoundError) as info:
        Plaudit.open(url, create=False)
    assert "s3cret" not in str(info.value) and "***" in str(info.value)


@pytest.mark.parametrize("content", [b"", None], ids=["empty file", "other database"])
def test_a_file_that_is_no_store_is_left_byte_for_byte(tmp_path: Path, content, capsys) -> None:
    path = tmp_path / "other.db"
    if content is None:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (x TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert main(["--db", str(path), "log", "stats"]) == 2
    assert "(the file holds no plaudit tables)" in capsys.readouterr().err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # not even switched to WAL
    assert tree(tmp_path) == ["other.db"]


WRITES: list[list[str]] = [
    ["init"],
    ["log", "append", '{"type": "a.b"}'],
    ["ledger", "record", "-c", "successful_validation", "-a", "tests pass"],
    ["ledger", "sessions", "start"],
    ["signal", "emit", "decision", "--decision-id", "d", "--chosen-task", "t", "--confidence", "1"],
]


@pytest.mark.parametrize("args", WRITES, ids=lambda a: " ".join(a[:2]))
def test_a_write_that_creates_a_store_says_so_once(db_url: str, args, capsys) -> None:
    code = main(["--db", db_url, *args])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("created a new plaudit store at ")
    assert "s3cret" not in lines[0]
    assert store_exists(db_url)
    assert main(["--db", db_url, *args]) == 0
    assert "created" not in capsys.readouterr().err  # the second time it already existed


def test_init_on_an_existing_store_changes_nothing(sqlite_url: str, capsys) -> None:
    with Plaudit.open(sqlite_url) as p:
        p.log.append({"type": "a.b", "payload": {"k": 1}})
        head = p.log.head()
    assert main(["--db", sqlite_url, "init"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and f"already exists at {sqlite_url} (1 events)" in out
    with Plaudit.open(sqlite_url, create=False) as p:
        assert p.log.head() == head


def test_a_write_makes_the_directories_of_a_new_sqlite_store(tmp_path: Path, capsys) -> None:
    db = tmp_path / "new" / "dir" / "p.db"
    assert main(["--db", str(db), "log", "append", '{"type": "a.b"}']) == 0
    assert capsys.readouterr().err == f"created a new plaudit store at {db}\n"
    assert db.exists()


def test_export_progress_never_creates_a_directory(sqlite_url: str, tmp_path: Path, capsys):
    Plaudit.open(sqlite_url).close()
    target = tmp_path / "nonexistent" / "dir" / "p.json"
    code = main(["--db", sqlite_url, "ledger", "export-progress", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and f"its directory {target.parent} does not exist" in err
    assert not (tmp_path / "nonexistent").exists()


def test_backup_into_a_missing_directory_is_refused(sqlite_url: str, tmp_path: Path, capsys):
    Plaudit.open(sqlite_url).close()
    code = main(["--db", sqlite_url, "ledger", "backup", str(tmp_path / "no" / "b.jsonl")])
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_an_audit_export_directory_that_cannot_be_made_leaves_the_ledger_running(
    sqlite_url: str, tmp_path: Path, capsys
) -> None:
    """The audit makes the directory it was given, but not its parents; refusing happens
    before the audit freezes the ledger."""
    assert main(["--db", sqlite_url, "ledger", "record", "-c", "pattern_reuse", "-a", "x"]) == 0
    capsys.readouterr()
    bad = tmp_path / "a" / "b"
    assert main(["--db", sqlite_url, "ledger", "audit", "--export-dir", str(bad)]) == 2
    assert "its parent directory does not exist" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    assert main(["--db", sqlite_url, "ledger", "record", "-c", "pattern_reuse", "-a", "y"]) == 0
    good = tmp_path / "audits"
    assert main(["--db", sqlite_url, "ledger", "audit", "--export-dir", str(good)]) == 0
    assert [p.name.startswith("audit-") for p in good.iterdir()] == [True]
