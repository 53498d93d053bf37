"""`plaudit signal emit`: the reference emitter's flags, through the real entry point."""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from plaudit import Plaudit

from .conftest import run_plaudit

ROW_KEYS = {"ts_ms", "dur_us", "ok", "session_id", "event_id", "content_hash", "name", "subject"}
DECISION_KEYS = {
    "schema_version", "decision_id", "source", "session_id", "user_hash", "project_fingerprint",
    "project_path", "git_branch", "git_commit", "chosen_task", "confidence", "user_intent",
    "candidates", "context",
}  # fmt: skip

DECISION = [
    "decision",
    "--decision-id", "d-1",
    "--chosen-task", "ai:flow/dev-check",
    "--confidence", "0.74",
    "--user-intent", "sample-intent",
    "--context-json", '{"changed_files": 3, "ci_status": "failing", "api_token": "s3cret"}',
    "--candidates-json", '["ai:flow/dev-check", "ai:flow/test"]',
]  # fmt: skip
OUTCOME = [
    "outcome",
    "--decision-id", "d-1",
    "--outcome", "partial",
    "--task-executed", "ai:flow/dev-check",
    "--time-to-resolution-ms", "120000",
]  # fmt: skip
OVERRIDE = [
    "override",
    "--decision-id", "d-1",
    "--original-task", "ai:flow/dev-check",
    "--override-task", "ai:flow/test",
    "--reason", "wanted tests",
]  # fmt: skip


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_emit_all_three_into_log_and_seq_mem(tmp_path, db_url) -> None:
    sm = tmp_path / "seq_mem.jsonl"
    env = {"FLOW_ROUTER_SESSION_ID": "hook-session"}
    r1 = run_plaudit("--db", db_url, "signal", "emit", "--seq-mem", str(sm), *DECISION, env=env)
    r2 = run_plaudit("signal", "emit", *OUTCOME, "--db", db_url, "--seq-mem", str(sm), env=env)
    r3 = run_plaudit("--seq-mem", str(sm), "signal", "emit", *OVERRIDE, "--db", db_url, env=env)
    for r in (r1, r2, r3):
        assert r.returncode == 0, r.stderr
    assert r1.stdout.strip() == "emitted flow.router.decision.v1 decision_id=d-1"
    assert r2.stdout.strip() == "emitted flow.router.outcome.v1 decision_id=d-1 outcome=partial"
    rows = _rows(sm)
    assert [r["name"] for r in rows] == [
        "flow.router.decision.v1",
        "flow.router.outcome.v1",
        "flow.router.override.v1",
    ]
    for row in rows:
        assert set(row) == ROW_KEYS
        assert row["session_id"] == "hook-session"
        assert row["content_hash"] == hashlib.sha256(row["subject"].encode()).hexdigest()
        assert row["dur_us"] == 0
    subject = json.loads(rows[0]["subject"])
    assert set(subject) == DECISION_KEYS
    assert subject["context"]["api_token"] == "[REDACTED]"
    assert subject["candidates"] == ["ai:flow/dev-check", "ai:flow/test"]
    assert rows[0]["subject"] == json.dumps(subject, sort_keys=True)  # the reference encoding
    assert rows[1]["ok"] is True  # partial counts as ok, as in the reference
    with Plaudit.open(db_url) as p:
        events = list(p.log.replay())
        assert events[0].payload == subject
    # event_id as the reference computes it: 64 hex digits, one per row
    for row, event in zip(rows, events, strict=True):
        subj = json.loads(row["subject"])
        key = f"{row['name']}|{row['session_id']}|{subj['decision_id']}|{subj.get('outcome', '')}"
        assert row["event_id"] == hashlib.sha256(f"{key}|{row['ts_ms']}".encode()).hexdigest()
        assert row["event_id"] != event.id  # the log keeps its own idempotent id


def test_defaults_match_reference(tmp_path, sqlite_url) -> None:
    sm = tmp_path / "sm.jsonl"
    r = run_plaudit(
        "signal", "emit", "--db", sqlite_url, "--seq-mem", str(sm),
        "outcome", "--decision-id", "x", "--outcome", "wasted", "--task-executed", "t",
        env={"FLOW_ROUTER_SESSION_ID": ""},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    row = _rows(sm)[0]
    subject = json.loads(row["subject"])
    assert row["session_id"] == subject["session_id"] == "flow-router"
    assert subject["source"] == "flow"
    assert subject["time_to_resolution_ms"] == 0
    assert subject["manual_override_task"] == "" and subject["error_kind"] == ""
    assert subject["extra"] == {}
    assert row["ok"] is False  # wasted


def test_retry_is_acknowledged_not_duplicated(tmp_path, sqlite_url) -> None:
    args = ["--db", sqlite_url, "signal", "emit", *DECISION, "--ts-ms", "1700000000000"]
    assert run_plaudit(*args).returncode == 0
    again = run_plaudit(*args[:-1], "1700000000999")
    assert again.returncode == 0, again.stderr
    assert "(already recorded)" in again.stdout
    with Plaudit.open(sqlite_url) as p:
        assert p.log.head().length == 1
        assert p.log.tail(1)[0].ts_ms == 1700000000000


def test_a_retry_is_a_new_seq_mem_row_with_its_own_event_id(tmp_path, sqlite_url) -> None:
    """As the reference: every call writes a row whose event_id is new (it hashes the row's
    time), while the log keeps one event under its own idempotent id."""
    sm = tmp_path / "sm.jsonl"
    args = ["signal", "emit", "--db", sqlite_url, "--seq-mem", str(sm), *DECISION]
    for _ in range(2):
        r = run_plaudit(*args, env={"FLOW_ROUTER_SESSION_ID": "s"})
        assert r.returncode == 0, r.stderr
    rows = _rows(sm)
    assert len(rows) == 2 and rows[0]["ts_ms"] != rows[1]["ts_ms"]
    ids = [row["event_id"] for row in rows]
    assert ids[0] != ids[1]
    assert all(len(i) == 64 and int(i, 16) >= 0 for i in ids)
    for row in rows:
        key = f"flow.router.decision.v1|s|d-1||{row['ts_ms']}"
        assert row["event_id"] == hashlib.sha256(key.encode()).hexdigest()
    with Plaudit.open(sqlite_url) as p:
        assert p.log.head().length == 1
        assert p.log.tail(1)[0].id not in ids


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["decision", "--chosen-task", "t", "--confidence", "0.5"], "--decision-id"),
        ([*DECISION[:5], "--confidence", "abc"], "--confidence"),
        ([*DECISION[:5], "--confidence", "1.2"], "confidence: must be in [0, 1]"),
        ([*DECISION[:5], "--confidence", "nan"], "confidence: must be a finite number"),
        ([*DECISION, "--context-json", "{oops"], "--context-json: is not valid JSON"),
        ([*DECISION, "--context-json", "[1]"], "context: must be a JSON object"),
        ([*DECISION, "--candidates-json", '{"a": 1}'], "candidates: must be a JSON list"),
        (["outcome", "--decision-id", "d", "--outcome", "meh", "--task-executed", "t"], "meh"),
        ([*OUTCOME, "--time-to-resolution-ms", "-4"], "time_to_resolution_ms: must be between"),
        (
            [*OUTCOME, "--time-to-resolution-ms", str(2**53)],
            "time_to_resolution_ms: must be between 0 and 2^53-1, got 9007199254740992",
        ),
        ([*OUTCOME, "--extra-json", "3"], "extra: must be a JSON object"),
        (["override", "--decision-id", "d", "--original-task", "a"], "--override-task"),
        (["bogus"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_input_clear_error_nothing_written(tmp_path, sqlite_url, args, message) -> None:
    sm = tmp_path / "sm.jsonl"
    r = run_plaudit("--db", sqlite_url, "signal", "emit", "--seq-mem", str(sm), *args)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ")
    assert message in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert not sm.exists()
    with Plaudit.open(sqlite_url) as p:
        assert p.log.head().length == 0


def test_no_log_needs_seq_mem() -> None:
    r = run_plaudit("signal", "emit", *DECISION, "--no-log", env={"SEQ_CH_MEM_PATH": ""})
    assert r.returncode == 2
    assert r.stderr.startswith("error: --no-log: needs --seq-mem")


def test_seq_mem_defaults_to_the_references_environment_variable(tmp_path, sqlite_url) -> None:
    """The reference emitter's --seq-mem default is $SEQ_CH_MEM_PATH; a hook relying on it
    must keep writing the file after swapping the command name."""
    sm = tmp_path / "from_env.jsonl"
    env = {"SEQ_CH_MEM_PATH": str(sm)}
    r = run_plaudit("--db", sqlite_url, "signal", "emit", *DECISION, env=env)
    assert r.returncode == 0, r.stderr
    r = run_plaudit("signal", "emit", "--no-log", *OUTCOME, env=env)
    assert r.returncode == 0, r.stderr
    assert [row["name"] for row in _rows(sm)] == [
        "flow.router.decision.v1",
        "flow.router.outcome.v1",
    ]
    explicit = tmp_path / "explicit.jsonl"  # the flag still wins
    r = run_plaudit("signal", "emit", "--no-log", "--seq-mem", str(explicit), *OVERRIDE, env=env)
    assert r.returncode == 0 and len(_rows(explicit)) == 1 and len(_rows(sm)) == 2


def test_a_seq_mem_that_cannot_be_opened_leaves_the_log_untouched(tmp_path) -> None:
    db = tmp_path / "p.db"
    (tmp_path / "adir").mkdir()
    r = run_plaudit(
        "--db", str(db), "signal", "emit", "--seq-mem", str(tmp_path / "adir"), *DECISION
    )
    assert r.returncode == 2 and "\nerror: seq_mem: cannot open" in r.stderr
    assert r.stderr.startswith(f"created a new plaudit store at {db}\n")  # said, even so
    with Plaudit.open(db) as p:
        assert len(p.log) == 0  # nothing written anywhere; a retry is a first emit
    ok = tmp_path / "ok.jsonl"
    r = run_plaudit("--db", str(db), "signal", "emit", "--seq-mem", str(ok), *DECISION)
    assert r.returncode == 0 and "already recorded" not in r.stdout and len(_rows(ok)) == 1


def test_abbreviations_mean_the_references_options(tmp_path) -> None:
    """`--d` and `--se` were unambiguous for the reference (--decision-id, --session-id); the
    options plaudit adds (--db, --seq-mem) must not make them ambiguous."""
    sm = tmp_path / "abbrev.jsonl"
    args = ["decision", "--d", "d-9", "--chosen-task", "t", "--conf", "0.5", "--se", "abbr"]
    r = run_plaudit("signal", "emit", "--no-log", "--seq-mem", str(sm), *args)
    assert r.returncode == 0, r.stderr
    subject = json.loads(_rows(sm)[0]["subject"])
    assert (subject["decision_id"], subject["session_id"]) == ("d-9", "abbr")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["decison", "--decision-id", "d"], "invalid choice: 'decison'. Did you mean 'decision'?"),
        ([*DECISION[:1], "--decison-id", "d"], "no such option: --decison-id. Did you mean one"),
        (
            [*DECISION[:5], "--chosen-tsk", "t"],
            "no such option: --chosen-tsk. Did you mean '--chosen-task'?",
        ),
        (
            [*OUTCOME[:3], "--outcome", "sucess"],
            "invalid choice: 'sucess'. Did you mean 'success'?",
        ),
    ],
)
def test_a_typo_gets_did_you_mean_like_the_click_commands(args, said) -> None:
    """Issue 31: `signal emit` parses with argparse inside the click CLI, and a typo got no
    suggestion (an unknown option was even reported as the required ones missing)."""
    r = run_plaudit("signal", "emit", "--no-log", *args)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and said in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_json_nested_too_deeply_is_a_clean_error(tmp_path) -> None:
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    args = [*DECISION[:9], "--context-json", deep]
    r = run_plaudit("--db", str(tmp_path / "p.db"), "signal", "emit", *args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: --context-json: is nested too deeply")


def test_a_database_path_blocked_by_a_file_is_a_clean_error(tmp_path) -> None:
    (tmp_path / "g.db").write_text("")
    r = run_plaudit("--db", str(tmp_path / "g.db" / "p.db"), "signal", "emit", *DECISION)
    assert r.returncode == 6, r.stderr
    assert "cannot create its directory" in r.stderr and "Traceback" not in r.stderr


def test_no_log_writes_only_the_file(tmp_path) -> None:
    sm = tmp_path / "only.jsonl"
    r = run_plaudit("signal", "emit", *DECISION, "--no-log", "--seq-mem", str(sm), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(_rows(sm)) == 1
    assert not (tmp_path / ".plaudit").exists()


def test_unwritable_seq_mem_is_a_clear_error(tmp_path, sqlite_url) -> None:
    r = run_plaudit("signal", "emit", "--no-log", "--seq-mem", str(tmp_path), *DECISION)
    assert r.returncode == 2
    assert r.stderr.startswith("error: seq_mem: cannot open")
    assert "Traceback" not in r.stderr


def test_conflicting_reemit_is_refused(sqlite_url) -> None:
    assert run_plaudit("--db", sqlite_url, "signal", "emit", *DECISION).returncode == 0
    changed = [*DECISION[:4], "ai:flow/other", *DECISION[5:]]
    r = run_plaudit("--db", sqlite_url, "signal", "emit", *changed)
    assert r.returncode == 3
    assert r.stderr == (
        "error: decision_id 'd-1': a different decision is already recorded (chosen_task: "
        "'ai:flow/dev-check' kept, 'ai:flow/other' now); each decision keeps its first decision\n"
    )
    outcome = ["--db", sqlite_url, "signal", "emit", *OUTCOME]
    assert run_plaudit(*outcome).returncode == 0
    r = run_plaudit(*outcome[:-1], "5")  # another time_to_resolution_ms
    assert r.returncode == 3 and "time_to_resolution_ms: 120000 kept, 5 now" in r.stderr


def test_help_works() -> None:
    r = run_plaudit("signal", "emit", "decision", "--help")
    assert r.returncode == 0
    for flag in ("--decision-id", "--chosen-task", "--confidence", "--user-intent", "--ts-ms"):
        assert flag in r.stdout


HEAVY = ("click", "numpy", "rich", "pydantic", "pyarrow", "fastapi", "psycopg")
# Standard-library or helper modules the hook path does without (each costs 1 to 8 ms).
SLOW = ("typing_extensions", "inspect", "shutil", "pathlib", "urllib", "dataclasses")


def test_fast_path_does_not_import_heavy_modules(tmp_path) -> None:
    code = (
        "import sys\n"
        "from plaudit.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY + SLOW!r})\n"
        "print('HEAVY=' + ','.join(heavy))\n"
        "sys.exit(rc)\n"
    )
    db = str(tmp_path / "p.db")
    for args in (DECISION, [*DECISION[:5], "--confidence", "7"]):  # success and error paths
        r = subprocess.run(
            [sys.executable, "-c", code, "--db", db, "signal", "emit", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "HEAVY=\n" in r.stdout, r.stdout + r.stderr


def test_parallel_emitters_never_interleave(tmp_path, sqlite_url) -> None:
    """Many processes append large rows to one file and one database at the same time."""
    sm = tmp_path / "shared.jsonl"
    blob = "x" * 100_000  # far larger than any atomic write size: a lock is needed
    n = 24

    def one(i: int) -> subprocess.CompletedProcess[str]:
        ctx = json.dumps({"blob": blob, "i": i})
        return run_plaudit(
            "--db", sqlite_url, "signal", "emit", "--seq-mem", str(sm),
            "decision", "--decision-id", f"p-{i}", "--chosen-task", "t", "--confidence", "0.5",
            "--context-json", ctx,
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results if r.returncode]
    lines = sm.read_bytes().split(b"\n")
    assert lines[-1] == b""
    rows = [json.loads(line) for line in lines[:-1]]  # every line parses: nothing interleaved
    assert sorted(json.loads(r["subject"])["context"]["i"] for r in rows) == list(range(n))
    with Plaudit.open(sqlite_url) as p:
        assert p.log.head().length == n
        assert p.log.verify().ok


def test_click_route_delegates_to_the_same_emitter(tmp_path, sqlite_url, capsys) -> None:
    """If the fast path is bypassed, `plaudit signal emit` through click behaves the same."""
    from plaudit.cli._app import run

    rc = run(
        ["--db", sqlite_url, "signal", "emit", "--seq-mem", str(tmp_path / "c.jsonl"), *DECISION]
    )
    assert rc == 0
    assert "emitted flow.router.decision.v1 decision_id=d-1" in capsys.readouterr().out
    assert len(_rows(tmp_path / "c.jsonl")) == 1
    with Plaudit.open(sqlite_url) as p:
        assert p.log.head().length == 1


def test_torn_last_line_does_not_swallow_the_next_row(tmp_path) -> None:
    sm = tmp_path / "torn.jsonl"
    sm.write_bytes(b'{"ts_ms": 1, "name": "flow.router.decision.v1", "subj')  # a killed writer
    r = run_plaudit("signal", "emit", "--no-log", "--seq-mem", str(sm), *DECISION)
    assert r.returncode == 0, r.stderr
    lines = sm.read_bytes().split(b"\n")
    assert lines[0].endswith(b'"subj') and lines[-1] == b""
    assert json.loads(lines[1])["name"] == "flow.router.decision.v1"


@pytest.mark.slow
def test_kill_9_emitters_leave_only_whole_rows(tmp_path, sqlite_url) -> None:
    """Emitters killed at random moments: the log verifies, and every row an emitter
    acknowledged is whole, in the file and in the log."""
    sm = tmp_path / "killed.jsonl"
    rnd = random.Random(5)
    procs = []
    for i in range(16):
        ctx = json.dumps({"blob": "y" * 60_000, "i": i})
        args = [
            sys.executable, "-c", "import sys; from plaudit.cli import main; sys.exit(main())",
            "--db", sqlite_url, "signal", "emit", "--seq-mem", str(sm), "decision",
            "--decision-id", f"k-{i}", "--chosen-task", "t", "--confidence", "0.5",
            "--context-json", ctx,
        ]  # fmt: skip
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for p in procs:
        if rnd.random() < 0.5:
            time.sleep(rnd.random() * 0.15)  # during start-up, open, append or exit
            p.send_signal(signal.SIGKILL)
    acknowledged = set()
    for i, p in enumerate(procs):
        out, _ = p.communicate(timeout=60)
        if p.returncode == 0 and out.startswith(b"emitted"):
            acknowledged.add(f"k-{i}")
    in_file = set()
    for line in sm.read_bytes().splitlines():
        # A writer killed inside write() may leave a fragment; it stays a line of its own.
        with contextlib.suppress(ValueError):
            in_file.add(json.loads(json.loads(line)["subject"])["decision_id"])
    assert acknowledged <= in_file
    with Plaudit.open(sqlite_url) as p:
        assert p.log.verify().ok
        in_log = {e.payload["decision_id"] for e in p.log.replay()}
    assert acknowledged <= in_log


def test_import_without_blocks_then_restores(tmp_path) -> None:
    """The hook imports plaudit.core with typing_extensions blocked; later imports still work,
    and a module that truly needs the blocked one is imported normally instead."""
    (tmp_path / "needs_it.py").write_text("import typing_extensions\nVALUE = 1\n")
    (tmp_path / "fine.py").write_text("import json\nVALUE = 2\n")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from plaudit.cli.emit import import_without\n"
        "assert import_without('fine', 'typing_extensions').VALUE == 2\n"
        "assert 'typing_extensions' not in sys.modules\n"
        "assert import_without('needs_it', 'typing_extensions').VALUE == 1\n"
        "assert sys.modules['typing_extensions'] is not None\n"
        "import typing_extensions\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stdout + r.stderr


def test_import_without_reraises_other_import_errors(tmp_path) -> None:
    (tmp_path / "broken.py").write_text("import no_such_module_plaudit\n")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from plaudit.cli.emit import import_without\n"
        "try:\n"
        "    import_without('broken', 'typing_extensions')\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc.name)\n"
        "print('typing_extensions' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout == "no_such_module_plaudit\nFalse\n", r.stdout + r.stderr
