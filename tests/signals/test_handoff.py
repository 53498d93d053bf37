"""A running `plaudit serve` takes hooks' events over a socket beside the store.

The hook's result must be exactly the direct path's (output, exit status, what is recorded,
in the log and in seq_mem.jsonl), with none of the store imported; without a server, or with
one that fails, it appends directly.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.signals import handoff
from plaudit.signals.contract import DECISION

SECRET = '{"api_key": "sk-abcdefghijklmnopqrstuv"}'
ARGS = ["--decision-id", "d1", "--chosen-task", "ai:flow/test", "--confidence", "0.7",
        "--session-id", "s1", "--context-json", SECRET]  # fmt: skip
#: What the hook imports when it hands the event over, at most (it reports what it loaded).
CODE = (
    "import sys\n"
    "from plaudit.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print('STORE=' + ','.join(sorted(m for m in sys.modules if m.startswith("
    "('plaudit.store', 'plaudit.core', 'sqlite3', 'msgspec')))))\n"
    "sys.exit(rc)\n"
)


class Served:
    def __init__(self, p: Plaudit, db: Path, handle: handoff.Handoff) -> None:
        self.p, self.db, self.handle = p, db, handle
        self.answers: list[dict] = []


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    db = tmp_path / "p.db"
    p = Plaudit.open(db)
    seen: list[dict] = []
    answer = handoff.answer

    def counting(plaudit: Plaudit, line: bytes) -> dict:
        seen.append(reply := answer(plaudit, line))
        return reply

    monkeypatch.setattr(handoff, "answer", counting)
    handle, note = handoff.serve(p, str(db))
    assert handle is not None, note
    s = Served(p, db, handle)
    s.answers = seen
    try:
        yield s
    finally:
        handle.close()
        p.close()


def emit(db: Path, *args: str, seq_mem: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--seq-mem", str(seq_mem)] if seq_mem else []
    return subprocess.run(
        [sys.executable, "-c", CODE, "--db", str(db), "signal", "emit", *extra, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_server_takes_the_event(served: Served, tmp_path: Path) -> None:
    rows = tmp_path / "s.jsonl"
    r = emit(served.db, "decision", *ARGS, seq_mem=rows)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("emitted flow.router.decision.v1 decision_id=d1\n")
    assert "STORE=\n" in r.stdout  # the hook opened nothing of the store itself
    assert [a["status"] for a in served.answers] == ["appended"]
    (event,) = served.p.log.replay(types=[DECISION])
    assert event.payload["context"] == {"api_key": "[REDACTED]"}  # validated as on the CLI
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    assert row["ts_ms"] == event.ts_ms and json.loads(row["subject"]) == event.payload
    # A retry is acknowledged as present; a different decision under the id is refused.
    r = emit(served.db, "decision", *ARGS, seq_mem=rows)
    assert r.returncode == 0 and "(already recorded)" in r.stdout
    changed = [a if a != "ai:flow/test" else "ai:flow/other" for a in ARGS]
    r = emit(served.db, "decision", *changed, seq_mem=rows)
    assert r.returncode == 3 and "a different decision is already recorded" in r.stderr
    assert len(rows.read_text().splitlines()) == 2  # nothing for the refused one
    # What only the log refuses comes back as the log's own message.
    r = emit(served.db, "decision", *ARGS[:2], "--chosen-task", "t", "--confidence", "0.5",
             "--context-json", '{"n": 99999999999999999999}')  # fmt: skip
    assert r.returncode == 2 and "payload.context.n" in r.stderr
    assert len(served.answers) == 4
    assert len(served.p.log) == 1


def test_without_a_server_the_hook_appends_itself(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with Plaudit.open(db):
        pass
    # A socket left by a server that is gone: nobody listens on it.
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(db) + handoff.SUFFIX)
    stale.close()
    r = emit(db, "decision", *ARGS)
    assert r.returncode == 0, r.stderr
    assert "plaudit.store" in r.stdout  # opened the store itself
    with Plaudit.open(db) as p:
        assert len(p.log) == 1


def test_a_server_in_trouble_leaves_the_append_to_the_hook(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("plaudit.signals.emit.record", broken)
    r = emit(served.db, "decision", *ARGS)
    assert r.returncode == 0, r.stderr
    assert served.answers and served.answers[0]["retry"] is True
    assert len(served.p.log) == 1  # appended by the hook


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{oops\n", "not one line of JSON"),
        (b'{"v": 9}\n', "not a version 1 request"),
        (b'{"v": 1, "type": "plaudit.ledger.x", "payload": {}}\n', "only router"),
        (b'{"v": 1, "type": "flow.router.decision.v1", "payload": {"bogus": 1}}\n', "bogus"),
        (
            b'{"v": 1, "type": "flow.router.decision.v1", "payload": {"decision_id": "d",'
            b' "chosen_task": "t", "confidence": 7, "user_intent": ""}}\n',
            "confidence",
        ),
    ],
)
def test_what_the_socket_refuses(tmp_path: Path, line: bytes, message: str) -> None:
    with Plaudit.open(tmp_path / "p.db") as p:
        reply = handoff.answer(p, line)
        assert reply["ok"] is False and reply["exit"] == 2 and message in reply["error"]
        assert len(p.log) == 0


def test_the_socket_is_only_for_durable_sqlite_stores(tmp_path: Path) -> None:
    with Plaudit.open(tmp_path / "n.db", durability="normal") as p:
        handle, note = handoff.serve(p, str(tmp_path / "n.db"))
        assert handle is None and "durability" in note
        assert not os.path.exists(tmp_path / "n.db.sock")
    assert handoff.socket_path("postgresql://h/db") is None


def test_one_server_per_store(served: Served) -> None:
    handle, note = handoff.serve(served.p, str(served.db))
    assert handle is None and "already" in note
    assert served.handle.path == str(served.db) + handoff.SUFFIX


def test_closing_removes_the_socket(tmp_path: Path) -> None:
    with Plaudit.open(tmp_path / "p.db") as p:
        handle, _ = handoff.serve(p, str(tmp_path / "p.db"))
        assert handle is not None and os.path.exists(handle.path)
        assert oct(os.stat(handle.path).st_mode & 0o777) == oct(0o600)
        handle.close()
        assert not os.path.exists(handle.path)


def test_a_seq_mem_that_cannot_be_opened_sends_nothing(served: Served, tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    r = emit(served.db, "decision", *ARGS, seq_mem=tmp_path / "adir")
    assert r.returncode == 2 and "seq_mem: cannot open" in r.stderr
    assert served.answers == [] and len(served.p.log) == 0
