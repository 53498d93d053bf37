"""Tamper evidence: edits made directly in the database, as an attacker would, are caught.

Every case drops plaudit's append-only triggers first (SQLite: the file opened with the sqlite3
module; PostgreSQL: the trigger in the test schema), then changes rows behind plaudit's back.
Each runs with one sequential pass and with the range-parallel verifier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest

from _logtools import Raw, attacker, ev
from plaudit import Head, Plaudit, ValidationError
from plaudit.cli import main

N = 12


@pytest.fixture(params=[1, 3], ids=["serial", "parallel"])
def workers(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture
def filled(pl: Plaudit) -> Plaudit:
    pl.log.append_batch([ev(i, session=f"s{i % 3}") for i in range(1, N + 1)])
    return pl


def modify_payload_byte(raw: Raw) -> None:
    (payload,) = raw.execute("SELECT payload FROM plaudit_events WHERE seq = 5")[0]
    raw.execute(
        "UPDATE plaudit_events SET payload = ? WHERE seq = 5", (payload.replace("5", "6", 1),)
    )


def modify_session(raw: Raw) -> None:
    raw.execute("UPDATE plaudit_events SET session_id = 'other' WHERE seq = 7")


def delete_row(raw: Raw) -> None:
    raw.execute("DELETE FROM plaudit_events WHERE seq = 4")


def swap_rows(raw: Raw) -> None:
    raw.execute("UPDATE plaudit_events SET seq = -1 WHERE seq = 3")
    raw.execute("UPDATE plaudit_events SET seq = 3 WHERE seq = 4")
    raw.execute("UPDATE plaudit_events SET seq = 4 WHERE seq = -1")


def insert_row_with_junk_hash(raw: Raw) -> None:
    raw.execute("UPDATE plaudit_events SET seq = seq + 1000 WHERE seq >= 6")
    raw.execute("UPDATE plaudit_events SET seq = seq - 999 WHERE seq >= 1000")
    raw.execute(
        "INSERT INTO plaudit_events (seq, id, type, ts_ms, session_id, source, payload, meta, "
        "content_digest, hash) VALUES (6, 'fake', 'test.thing.v1', 1, 's', 't', '{}', '{}', ?, ?)",
        (b"\0" * 32, b"\1" * 32),
    )


def insert_row_with_valid_hash(raw: Raw) -> None:
    """A careful attacker: the inserted row's own hash and content_digest are both right."""
    insert_row_with_junk_hash(raw)
    (prev,) = raw.execute("SELECT hash FROM plaudit_events WHERE seq = 5")[0]
    body = "\x1f".join(("fake", "test.thing.v1", "1", "s", "t", "{}", "{}")).encode()
    h = hashlib.sha256(bytes(prev) + body).digest()
    digest = hashlib.sha256("\x1f".join(("test.thing.v1", "s", "t", "{}")).encode()).digest()
    raw.execute("UPDATE plaudit_events SET hash = ?, content_digest = ? WHERE seq = 6", (h, digest))


def insert_row_with_valid_hash_but_junk_digest(raw: Raw) -> None:
    insert_row_with_junk_hash(raw)
    (prev,) = raw.execute("SELECT hash FROM plaudit_events WHERE seq = 5")[0]
    body = "\x1f".join(("fake", "test.thing.v1", "1", "s", "t", "{}", "{}")).encode()
    h = hashlib.sha256(bytes(prev) + body).digest()
    raw.execute("UPDATE plaudit_events SET hash = ? WHERE seq = 6", (h,))


def delete_from_end(raw: Raw) -> None:
    raw.execute(f"DELETE FROM plaudit_events WHERE seq > {N - 2}")


def append_outside(raw: Raw) -> None:
    (prev,) = raw.execute(f"SELECT hash FROM plaudit_events WHERE seq = {N}")[0]
    body = "\x1f".join(("extra", "test.thing.v1", "1", "s", "t", "{}", "{}")).encode()
    raw.execute(
        "INSERT INTO plaudit_events (seq, id, type, ts_ms, session_id, source, payload, meta, "
        "content_digest, hash) VALUES (?, 'extra', 'test.thing.v1', 1, 's', 't', '{}', '{}', ?, ?)",
        (N + 1, b"\0" * 32, hashlib.sha256(bytes(prev) + body).digest()),
    )


def row_before_the_log(raw: Raw) -> None:
    raw.execute(
        "INSERT INTO plaudit_events (seq, id, type, ts_ms, session_id, source, payload, meta, "
        "content_digest, hash) VALUES (0, 'zero', 'test.thing.v1', 1, 's', 't', '{}', '{}', ?, ?)",
        (b"\0" * 32, b"\0" * 32),
    )


def change_hash_only(raw: Raw) -> None:
    raw.execute("UPDATE plaudit_events SET hash = ? WHERE seq = 9", (b"\7" * 32,))


CASES: list[tuple[Callable[[Raw], None], int, str]] = [
    (modify_payload_byte, 5, "does not match"),
    (modify_session, 7, "does not match"),
    (delete_row, 4, "missing"),
    (swap_rows, 3, "does not match"),
    (insert_row_with_junk_hash, 6, "does not match"),
    (insert_row_with_valid_hash, 7, "does not match"),
    (insert_row_with_valid_hash_but_junk_digest, 6, "content_digest"),
    (delete_from_end, N - 1, "deleted from the end"),
    (append_outside, N + 1, "added outside plaudit"),
    (row_before_the_log, 1, "before the log"),
    (change_hash_only, 9, "does not match"),
]


@pytest.mark.parametrize(("tamper", "position", "words"), CASES, ids=[c[0].__name__ for c in CASES])
def test_tampering_is_caught_at_its_position(
    filled: Plaudit, db_url: str, workers: int, tamper, position: int, words: str
) -> None:
    assert filled.log.verify(workers=workers, full=True).ok
    with attacker(db_url) as raw:
        tamper(raw)
    report = filled.log.verify(workers=workers, full=True)
    assert not report.ok
    assert report.first_bad == position, report
    assert words in (report.reason or "")
    assert report.checked == min(position - 1, N)


def test_intact_log_verifies(filled: Plaudit, workers: int) -> None:
    report = filled.log.verify(workers=workers, full=True)
    assert report.ok and report.checked == N and report.length == N
    assert report.first_bad is None and report.reason is None
    assert report.head == filled.log.head().digest


def test_empty_log_verifies(pl: Plaudit) -> None:
    report = pl.log.verify(full=True)
    assert report.ok and report.checked == 0
    assert report.head == f"0:{hashlib.sha256(b'plaudit.log.v1').hexdigest()}"


def test_triggers_refuse_ordinary_rewrites(filled: Plaudit) -> None:
    with pytest.raises(Exception, match="append-only"), filled.log.writer() as w:
        w.tx.execute("UPDATE plaudit_events SET payload = '{}' WHERE seq = 1")
    with pytest.raises(Exception, match="append-only"), filled.log.writer() as w:
        w.tx.execute("DELETE FROM plaudit_events WHERE seq = 1")
    assert filled.log.verify(full=True).ok


def test_verify_against_accepts_an_extended_log(filled: Plaudit, workers: int) -> None:
    anchor = filled.log.head()
    filled.log.append_batch([ev(i) for i in range(100, 110)])
    report = filled.log.verify(against=anchor.digest, workers=workers, full=True)
    assert report.ok and report.against == anchor.digest and report.length == N + 10
    assert filled.log.verify(against=Head(0, anchor.hash), full=True).ok is False  # wrong genesis
    genesis = hashlib.sha256(b"plaudit.log.v1").hexdigest()
    assert filled.log.verify(against=f"0:{genesis}", full=True).ok


def test_verify_against_rejects_a_consistent_rewrite(
    filled: Plaudit, db_url: str, workers: int
) -> None:
    anchor = filled.log.head()
    with attacker(db_url) as raw:
        modify_payload_byte(raw)
        raw.rehash_from(5)  # a chain that checks out on its own
    assert filled.log.verify(
        workers=workers, full=True
    ).ok  # nothing left to see without an anchor...
    report = filled.log.verify(against=anchor.digest, workers=workers, full=True)
    assert not report.ok  # ...but the earlier head no longer matches
    assert report.first_bad == N and "rewritten" in (report.reason or "")


def test_verify_against_rejects_a_truncated_then_reheaded_log(filled: Plaudit, db_url: str) -> None:
    anchor = filled.log.head()
    with attacker(db_url) as raw:
        delete_from_end(raw)
        raw.rehash_from(N + 1)  # only moves the head back to the new last row
    assert filled.log.verify(full=True).ok
    report = filled.log.verify(against=anchor, full=True)
    assert not report.ok and report.first_bad == N - 1
    assert "covers 12 events but the log has 10" in (report.reason or "")


@pytest.mark.parametrize(
    "digest", ["", "12", "x:abc", "-1:" + "0" * 64, "3:" + "z" * 64, "3:" + "0" * 63]
)
def test_bad_anchor_digest_is_a_validation_error(pl: Plaudit, digest: str) -> None:
    with pytest.raises(ValidationError, match="against"):
        pl.log.verify(against=digest, full=True)


def test_append_after_rows_were_added_outside_is_an_integrity_error(
    filled: Plaudit, db_url: str
) -> None:
    from plaudit import IntegrityError

    with attacker(db_url) as raw:
        append_outside(raw)
    with pytest.raises(IntegrityError, match=f"position {N + 1} is already taken"):
        filled.log.append(ev(999))
    assert filled.log.verify(full=True).first_bad == N + 1


def test_cli_verify_names_the_position(filled: Plaudit, db_url: str, capsys) -> None:
    assert main(["log", "verify", "--db", db_url]) == 0
    assert f"OK: {N} events verified" in capsys.readouterr().out
    digest = filled.log.head().digest
    with attacker(db_url) as raw:
        swap_rows(raw)
    assert main(["log", "verify", "--db", db_url]) == 1
    out = capsys.readouterr().out
    assert "FAILED at position 3" in out
    assert main(["log", "verify", "--db", db_url, "--against", digest, "--json"]) == 1
    assert '"first_bad":3' in capsys.readouterr().out


def test_cli_verify_against(filled: Plaudit, db_url: str, capsys) -> None:
    assert main(["log", "head", "--db", db_url]) == 0
    digest = capsys.readouterr().out.strip()
    assert digest == filled.log.head().digest
    filled.log.append(ev(500))
    assert main(["log", "verify", "--db", db_url, "--against", digest]) == 0
    assert f"extends {digest}" in capsys.readouterr().out
    with attacker(db_url) as raw:
        modify_session(raw)
        raw.rehash_from(1)
    assert main(["log", "verify", "--db", db_url]) == 0
    capsys.readouterr()
    assert main(["log", "verify", "--db", db_url, "--against", digest]) == 1
    assert f"FAILED at position {N}" in capsys.readouterr().out
    assert main(["log", "verify", "--db", db_url, "--against", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: against:") and "Traceback" not in err
