"""Quality gates: the reference's gates, flags, defaults, env overrides and audit.json."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plaudit import Plaudit
from plaudit.errors import ValidationError
from plaudit.signals.audit import GATES, audit, thresholds

from .conftest import BIG_AGE, DATA, run_plaudit

REFERENCE_GATE_NAMES = [
    "min_decisions",
    "min_joined",
    "min_link_rate",
    "max_task_dominance",
    "min_overrides",
    "min_failureish",
]


def summary_with(**counts: Any) -> dict[str, Any]:
    base = {
        "decisions": 600,
        "joined_rows": 500,
        "overrides": 30,
        "duplicate_decision_ids": 0,
        "dropped_duplicate_rows": 0,
    }
    base.update(counts)
    return {
        "schema_version": "flow_router_signal_export_v1",
        "counts": base,
        "quality": {
            "decision_outcome_link_rate": 0.9,
            "task_dominance": 0.3,
            "split_leakage_rate": 0.0,
        },
        "distributions": {
            "outcomes": {"success": 400, "partial": 40, "failure": 40, "wasted": 20},
            "chosen_tasks": {"a": 300, "b": 200},
        },
    }


def test_defaults_are_the_references() -> None:
    assert list(GATES) == REFERENCE_GATE_NAMES
    assert thresholds(env={}) == {
        "min_decisions": 500,
        "min_joined": 400,
        "min_link_rate": 0.80,
        "max_task_dominance": 0.55,
        "min_overrides": 20,
        "min_failureish": 60,
    }


def test_pass_and_fail_boundaries() -> None:
    report = audit(summary_with(), env={})
    assert report["pass"] is True
    assert list(report["gates"]) == REFERENCE_GATE_NAMES
    assert report["gates"]["min_failureish"] == {"actual": 100, "threshold": 60, "pass": True}
    edge = audit(summary_with(decisions=500), env={})["gates"]["min_decisions"]
    assert edge["pass"] is True  # >= as in the reference
    low = audit(summary_with(decisions=499), env={})
    assert low["pass"] is False
    assert [n for n, g in low["gates"].items() if not g["pass"]] == ["min_decisions"]


def test_precedence_argument_env_default() -> None:
    env = {"ROUTER_SIGNAL_MIN_DECISIONS": "700", "ROUTER_SIGNAL_MAX_TASK_DOMINANCE": "0.2"}
    limits = thresholds(env=env)
    assert limits["min_decisions"] == 700 and limits["max_task_dominance"] == 0.2
    assert thresholds({"min_decisions": 10}, env=env)["min_decisions"] == 10
    with pytest.raises(ValidationError, match=r"\$ROUTER_SIGNAL_MIN_JOINED"):
        thresholds(env={"ROUTER_SIGNAL_MIN_JOINED": "lots"})
    with pytest.raises(ValidationError, match="min_typo"):
        thresholds({"min_typo": 1}, env={})


def test_extra_gates_off_by_default_on_when_asked() -> None:
    s = summary_with(duplicate_decision_ids=60)
    assert "max_duplicate_rate" not in audit(s, env={})["gates"]
    r = audit(
        s,
        limits={"max_duplicate_rate": 0.05, "min_rows_per_task": 250, "max_split_leakage": 0.0},
        env={},
    )
    gates = r["gates"]
    assert gates["max_duplicate_rate"] == {"actual": 0.090909, "threshold": 0.05, "pass": False}
    assert gates["min_rows_per_task"] == {"actual": 200, "threshold": 250, "pass": False}
    assert gates["max_split_leakage"]["pass"] is True
    env_on = audit(s, env={"ROUTER_SIGNAL_MIN_ROWS_PER_TASK": "100"})["gates"]
    assert env_on["min_rows_per_task"]["pass"] is True


def test_reference_summary_without_leakage_figure_fails_that_gate() -> None:
    s = summary_with()
    del s["quality"]["split_leakage_rate"]
    gate = audit(s, limits={"max_split_leakage": 0.1}, env={})["gates"]["max_split_leakage"]
    assert gate["pass"] is False and gate["actual"] is None and "re-export" in gate["note"]


def test_empty_summary_fails_like_the_reference() -> None:
    r = audit({}, env={})
    assert r["pass"] is False
    assert r["gates"]["max_task_dominance"]["actual"] == 1.0  # `or 1.0`, as the reference


def test_wrong_types_in_summary_are_named() -> None:
    s = summary_with(decisions="many")
    with pytest.raises(ValidationError, match=r"counts\.decisions"):
        audit(s, env={})


def test_audit_json_written_beside_summary(tmp_path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary_with()))
    report = audit(path, env={})
    on_disk = json.loads((tmp_path / "audit.json").read_text())
    assert on_disk == {k: v for k, v in report.items() if k != "report"}
    assert on_disk["schema_version"] == "flow_router_signal_audit_v1"
    assert on_disk["summary"] == str(path)
    other = tmp_path / "reports" / "a.json"
    audit(path, report_out=other, env={})
    assert json.loads(other.read_text())["pass"] is True


def test_values_are_coerced_as_the_reference_coerces_them() -> None:
    """`int(x or 0)` / `float(x or d)`: numeric strings and booleans count, as they do there."""
    s = summary_with(decisions="600", joined_rows=500.0, overrides=True)
    s["quality"]["decision_outcome_link_rate"] = "0.9"
    s["distributions"]["outcomes"] = {"partial": 59, "failure": True}  # isinstance(True, int)
    r = audit(s, env={})
    assert r["gates"]["min_decisions"]["actual"] == 600
    assert r["gates"]["min_overrides"]["actual"] == 1
    assert r["gates"]["min_link_rate"]["actual"] == 0.9
    assert r["gates"]["min_failureish"]["actual"] == 60


@pytest.mark.parametrize(
    ("field", "value"),
    [("decisions", [1]), ("decisions", "12.5"), ("decisions", 1e999), ("joined_rows", {"a": 1})],
)
def test_values_the_reference_cannot_convert_are_named(field, value) -> None:
    with pytest.raises(ValidationError, match=rf"counts\.{field}"):
        audit(summary_with(**{field: value}), env={})


def test_huge_numbers_are_errors_not_crashes() -> None:
    s = summary_with()
    s["quality"]["decision_outcome_link_rate"] = 10**400  # float() overflows
    with pytest.raises(ValidationError, match="decision_outcome_link_rate"):
        audit(s, env={})


def test_fields_only_extra_gates_read_cannot_fail_an_audit_without_them() -> None:
    """The reference never reads these; with their gates off, neither does plaudit."""
    s = summary_with(dropped_duplicate_rows="n/a", duplicate_decision_ids=10**400)
    s["quality"]["split_leakage_rate"] = float("nan")
    assert audit(s, env={})["pass"] is True
    with pytest.raises(ValidationError, match="dropped_duplicate_rows"):
        audit(s, limits={"max_duplicate_rate": 0.5}, env={})
    with pytest.raises(ValidationError, match="split_leakage_rate"):  # never NaN in audit.json
        audit(s, limits={"max_split_leakage": 0.1}, env={})
    huge = summary_with(dropped_duplicate_rows=10**400)
    with pytest.raises(ValidationError, match="too large"):
        audit(huge, limits={"max_duplicate_rate": 0.5}, env={})


def test_deeply_nested_summary_is_a_clean_error(tmp_path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"x":' + "[" * 5000 + "]" * 5000 + "}")
    r = run_plaudit("signal", "audit", "--summary", str(path))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: summary:") and "nested too deeply" in r.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read"), ("{broken", "is not valid JSON"), ("[1]", "is not a JSON object")],
)
def test_bad_summary_files(tmp_path, content, message) -> None:
    path = tmp_path / "summary.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValidationError, match=message):
        audit(path, env={})
    r = run_plaudit("signal", "audit", "--summary", str(path))
    assert r.returncode == 2 and r.stderr.startswith("error: summary:")
    assert "Traceback" not in r.stderr


def _cli_audit(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    path = tmp_path / "summary.json"
    if not path.exists():
        path.write_text(json.dumps(summary_with()))
    return run_plaudit("signal", "audit", "--summary", str(path), *args, env=env)


def test_cli_pass_fail_exit_codes(tmp_path) -> None:
    ok = _cli_audit(tmp_path)
    assert ok.returncode == 0
    assert ok.stdout.splitlines()[0] == "Flow router signal audit: PASS"
    bad = _cli_audit(tmp_path, "--min-decisions", "1000", "--min-overrides", "31")
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[0] == "Flow router signal audit: FAIL"
    assert "fail min_decisions: actual=600 threshold=1000" in bad.stderr
    assert "fail min_overrides: actual=30 threshold=31" in bad.stderr
    env = _cli_audit(tmp_path, env={"ROUTER_SIGNAL_MIN_LINK_RATE": "0.95"})
    assert env.returncode == 1 and "fail min_link_rate" in env.stderr
    extra = _cli_audit(tmp_path, "--min-rows-per-task", "201", "--json")
    assert extra.returncode == 1
    assert json.loads(extra.stdout)["gates"]["min_rows_per_task"]["pass"] is False


def test_cli_audit_of_log(tmp_path, db_url) -> None:
    Plaudit.open(db_url).close()  # an empty store (a missing one is refused: test_dropin)
    r = run_plaudit("--db", db_url, "signal", "audit", "--json")
    assert r.returncode == 1  # an empty log cannot pass
    report = json.loads(r.stdout)
    assert report["summary"] is None and report["gates"]["min_decisions"]["actual"] == 0


def test_cli_export_then_audit_end_to_end(tmp_path) -> None:
    out = tmp_path / "out"
    r = run_plaudit(
        "signal", "export", "--seq-mem", str(DATA / "compat.jsonl"), "--output-dir", str(out),
        "--max-age-hours", str(BIG_AGE),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # no progress bar when stderr is not a terminal
    assert r.stdout.startswith(f"Exported flow router signal dataset: {out}")
    a = run_plaudit("signal", "audit", "--summary", str(out / "summary.json"))
    assert a.returncode == 1  # 155 decisions < 500
    assert (out / "audit.json").exists()
    a = run_plaudit(
        "signal", "audit", "--summary", str(out / "summary.json"), "--min-decisions", "100",
        "--min-joined", "100", "--min-overrides", "10", "--min-failureish", "30",
    )  # fmt: skip
    assert a.returncode == 0, a.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reward", "wasted=abc"], "--reward"),
        (["--reward", "great=1"], "rewards.great"),
        (["--reward-map", "{oops"], "--reward-map"),
        (["--seq-mem", "no/such/file.jsonl"], "seq_mem: cannot read"),
    ],
)
def test_cli_export_bad_input(tmp_path, args, message) -> None:
    r = run_plaudit("signal", "export", "--output-dir", str(tmp_path / "o"), *args)
    assert r.returncode == 2
    assert message in r.stderr and r.stderr.startswith("error: ")
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_progress_bar_only_on_a_terminal(tmp_path) -> None:
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [
                sys.executable, "-c", "import sys; from plaudit.cli import main; sys.exit(main())",
                "signal", "export", "--seq-mem", str(DATA / "compat.jsonl"),
                "--output-dir", str(tmp_path / "o"), "--max-age-hours", str(BIG_AGE),
            ],
            stdout=subprocess.PIPE,
            stderr=slave,
            timeout=120,
            env={**os.environ, "COLUMNS": "100"},
        )  # fmt: skip
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    assert b"reading" in b"".join(chunks)  # the bar was drawn on the terminal
    assert b"reading" not in proc.stdout


def test_cli_takes_the_references_abbreviations(tmp_path) -> None:
    """argparse took unambiguous prefixes; so does plaudit, preferring the reference's own
    options where one plaudit added also fits (`--max`: only --max-task-dominance there)."""
    report = tmp_path / "r.json"
    r = _cli_audit(tmp_path, "--min-dec", "700", "--max", "0.2", "--report", str(report))
    assert r.returncode == 1, r.stderr
    gates = json.loads(report.read_text())["gates"]
    assert gates["min_decisions"]["threshold"] == 700
    assert gates["max_task_dominance"]["threshold"] == 0.2
    r = _cli_audit(tmp_path, "--min", "5")
    assert r.returncode == 2 and "ambiguous option --min" in r.stderr
    out = tmp_path / "out"
    src = DATA / "compat.jsonl"
    r = run_plaudit("signal", "export", "--seq", str(src), "--out", str(out), "--max-age", "999999")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["input"]["max_age_hours"] == 999999
