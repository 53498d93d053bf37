"""Ledger test helpers: sample memory-bank files, raw SQL for tampering, a CLI runner."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_helpers import DATA

from plaudit import Plaudit
from plaudit.ledger import Ledger


@pytest.fixture
def ledger(pl: Plaudit) -> Ledger:
    return pl.ledger


@pytest.fixture
def memory_bank(tmp_path: Path) -> Path:
    """A copy of the sample memory bank, so tests may edit it."""
    dst = tmp_path / "memory-bank"
    shutil.copytree(DATA / "memory-bank", dst)
    return dst


@pytest.fixture
def sourced(pl: Plaudit, memory_bank: Path) -> Ledger:
    """Sources imported, their triggers not booked (tests record against them by hand);
    reconciliation mismatches warn (see data/warn.toml)."""
    lg = Ledger(pl, DATA / "warn.toml")
    lg.import_sources(memory_bank, book=False)
    return lg


@pytest.fixture
def cli(db_url: str, capsys: pytest.CaptureFixture[str]) -> Iterator:
    """Run `plaudit --db <store> ...` in-process: returns (exit code, stdout, stderr).

    The store is made first, by `plaudit init`: commands that only read refuse a missing one."""
    from plaudit.cli import main

    assert main(["--db", db_url, "init"]) == 0
    capsys.readouterr()

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--db", db_url, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    yield run


@pytest.fixture
def pg_or_sqlite_second(tmp_path: Path) -> Iterator[Ledger]:
    """A second, empty SQLite store (for round trips between stores)."""
    p = Plaudit.open(str(tmp_path / "second.db"))
    try:
        yield p.ledger
    finally:
        p.close()


@pytest.fixture(scope="module")
def sqlite_url_module(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite store per module, for hypothesis tests that run many examples."""
    return str(tmp_path_factory.mktemp("ledger") / "plaudit.db")
