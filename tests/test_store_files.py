"""A store's files are private to their owner by default (plaudit.store.perms): the database,
its WAL and shared memory, its lock file and the directories plaudit makes, whatever the
umask; a configured group gets them instead; files plaudit did not create keep their mode."""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.errors import ConfigError


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> object:
    old = os.umask(0o000)  # the worst case: everything world-writable unless plaudit says no
    yield
    os.umask(old)


def test_a_new_store_and_its_files_are_private(tmp_path: Path, loose_umask: object) -> None:
    db = tmp_path / "new" / "deeper" / "s.db"
    with Plaudit.open(db) as p:
        p.log.append({"type": "test.files.v1", "payload": {}})
        with p.log.reading() as view:  # keep the WAL and shared memory open while we look
            view.head()
            files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}.lock")]
            for f in files:
                assert f.exists(), f
                assert mode(f) == 0o600, (f, oct(mode(f)))
    assert mode(tmp_path / "new") == 0o700
    assert mode(tmp_path / "new" / "deeper") == 0o700


def test_another_user_cannot_take_the_lock(tmp_path: Path) -> None:
    """The lock file is not readable by others: a local user could otherwise take the lock
    from a read-only descriptor and freeze every writer."""
    db = tmp_path / "s.db"
    with Plaudit.open(db) as p:
        p.log.append({"type": "test.files.v1", "payload": {}})
    assert mode(Path(f"{db}.lock")) & 0o077 == 0
    assert mode(db) & 0o077 == 0


def test_files_plaudit_did_not_create_keep_their_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with Plaudit.open(shared / "s.db") as p:
        p.log.append({"type": "test.files.v1", "payload": {}})
    assert mode(shared) == 0o755


def test_a_configured_group_shares_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loose_umask: object
) -> None:
    group = grp.getgrgid(os.getgid()).gr_name
    monkeypatch.setenv("PLAUDIT_GROUP", group)
    db = tmp_path / "team" / "s.db"
    with Plaudit.open(db) as p:
        p.log.append({"type": "test.files.v1", "payload": {}})
    assert mode(db) == 0o660 and db.stat().st_gid == os.getgid()
    assert mode(Path(f"{db}.lock")) == 0o660
    assert mode(tmp_path / "team") == 0o770


def test_an_unknown_group_is_a_clear_error_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAUDIT_GROUP", "no-such-group-here")
    with pytest.raises(ConfigError, match="no-such-group-here"):
        Plaudit.open(tmp_path / "x" / "s.db")
    assert not (tmp_path / "x").exists()
