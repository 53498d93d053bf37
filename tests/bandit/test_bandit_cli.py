"""The CLI commands: output, --json, and clear errors (exit codes, no traceback, no write)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.cli import main


@pytest.fixture
def cli(db_url: str, capsys: pytest.CaptureFixture[str]):
    """`plaudit --db <store> ...` on a store made by `plaudit init` (reads refuse a missing one)."""
    assert main(["--db", db_url, "init"]) == 0
    capsys.readouterr()

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--db", db_url, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def files(tmp_path: Path, arms) -> dict[str, str]:
    paths = {
        "arms": tmp_path / "arms.json",
        "out": tmp_path / "out.txt",
        "calls": tmp_path / "calls.json",
        "bad": tmp_path / "bad.json",
        "trunc": tmp_path / "trunc.json",
        "neg": tmp_path / "neg.json",
    }
    paths["arms"].write_text(json.dumps(arms))
    paths["out"].write_text("Checked README.md, deploys go through the canary stage.")
    paths["calls"].write_text(json.dumps([{"name": "Bash", "arguments": {"cmd": "ls"}}]))
    paths["bad"].write_text('{"arms": 3}')
    paths["trunc"].write_text('[{"id": "tool:exec:Bash", "tok')
    paths["neg"].write_text('[{"id": "tool:exec:Bash", "tokens": -4}]')
    return {k: str(v) for k, v in paths.items()}


def test_select_observe_posteriors_savings(cli, files, db_url) -> None:
    code, out, _ = cli(
        "select",
        "--arms",
        files["arms"],
        "--budget",
        "8000",
        "--context",
        "code",
        "--seed",
        "3",
        "--json",
    )
    assert code == 0
    sel = json.loads(out)
    assert sel["context"] == "code" and sel["budget"] == 8000
    code, out, _ = cli(
        "observe",
        "--run-id",
        sel["run_id"],
        "--response",
        files["out"],
        "--tool-calls",
        files["calls"],
        "--tokens",
        "4000",
        "--json",
    )
    assert code == 0
    obs = json.loads(out)
    assert obs["rewards"]["tool:exec:Bash"] == 1 and obs["rewards"]["tool:web:WebSearch"] == 0
    assert obs["rewards"]["memory:project:deploys"] == 1
    code, out, _ = cli(
        "observe",
        "--run-id",
        sel["run_id"],
        "--response",
        files["out"],
        "--tool-calls",
        files["calls"],
        "--tokens",
        "4000",
    )
    assert code == 0 and out.startswith("already recorded")
    code, out, _ = cli("posteriors", "--json", "--level", "0.9")
    post = {a["id"]: a for a in json.loads(out)["arms"]}
    assert post["tool:exec:Bash"]["alpha"] == 1.75 and post["tool:exec:Bash"]["pulls"] == 1
    code, out, _ = cli("posteriors", "--level", "0.9")
    assert code == 0 and "tool:exec:Bash" in out and "90% interval" in out
    code, out, _ = cli("savings", "--json")
    assert code == 0 and json.loads(out)["selected_runs"] + json.loads(out)["baseline_runs"] == 1
    code, out, _ = cli("savings")
    assert code == 0 and out.startswith("token savings:")
    with Plaudit.open(db_url) as p:
        assert p.bandit.run(sel["run_id"])["observation"]["usage_tokens"] == 4000


def test_arms_list_show_register_config(cli, files) -> None:
    assert cli("arms", "list")[1].strip() == "no arms registered"
    code, out, _ = cli("arms", "register", files["arms"])
    assert code == 0 and out.strip() == "registered 6 arms"
    code, out, _ = cli("arms", "list", "--json")
    assert {a["id"] for a in json.loads(out)["arms"]} >= {"tool:exec:Bash"}
    code, out, _ = cli("arms", "show", "tool:exec:Bash")
    assert code == 0 and out.startswith("tool:exec:Bash  tokens=300")
    code, out, _ = cli(
        "arms", "config", "--set", "phase=passive", "--set", "threshold=0.3", "--json"
    )
    cfg = json.loads(out)
    assert cfg["phase"] == "passive" and cfg["threshold"] == 0.3
    code, out, _ = cli("select", "--json")  # registered inventory, passive: everything
    assert json.loads(out)["excluded"] == [] and json.loads(out)["phase"] == "passive"


@pytest.mark.parametrize(
    ("args", "message", "exit_code"),
    [
        (["select", "--arms", "{bad}"], "arms: {bad} must hold a list of arms", 2),
        (["select", "--arms", "{trunc}"], "malformed JSON", 2),
        (["select", "--arms", "{neg}"], "arms[0]: tokens: tool:exec:Bash: -4 is not between", 2),
        (["select", "--arms", "{missing}"], "cannot read", 2),
        (["observe", "--run-id", "nope", "--response", "{out}"], "no bandit run with run_id", 4),
        (["observe", "--run-id", "x", "--response", "{missing}"], "cannot read", 2),
        (["arms", "show", "Bash"], "'Bash' is not 'type:category:name'", 2),
        (["arms", "show", "tool:exec:Nope"], "no registered arm", 4),
        (["arms", "config", "--set", "threshold=7"], "threshold: must be a number", 2),
        (["arms", "config", "--set", "nonsense"], "is not KEY=VALUE", 2),
        (["posteriors", "--context", ""], "context: must be a string", 2),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(
    cli, files, db_url, tmp_path, args, message, exit_code
) -> None:
    with Plaudit.open(db_url) as p:
        before = len(p.log)
    fmt = {**files, "missing": str(tmp_path / "missing.json")}
    code, out, err = cli(*(a.format(**fmt) for a in args))
    assert code == exit_code
    assert err.startswith("error: ") and message.format(**fmt) in err
    assert "Traceback" not in err + out
    with Plaudit.open(db_url) as p:
        assert len(p.log) == before


def test_conflicting_observation_exit_code(cli, files, tmp_path) -> None:
    sel = json.loads(cli("select", "--arms", files["arms"], "--json")[1])
    assert cli("observe", "--run-id", sel["run_id"], "--response", files["out"])[0] == 0
    other = tmp_path / "other.txt"
    other.write_text("something else")
    code, _, err = cli("observe", "--run-id", sel["run_id"], "--response", str(other))
    assert code == 3 and "already observed with a different outcome" in err


def test_observe_reads_the_output_from_stdin(cli, files, monkeypatch) -> None:
    import io

    sel = json.loads(cli("select", "--arms", files["arms"], "--json")[1])
    monkeypatch.setattr("sys.stdin", io.StringIO("I opened README.md"))
    code, out, _ = cli("observe", "--run-id", sel["run_id"], "--response", "-", "--json")
    assert code == 0 and json.loads(out)["rewards"]["file:workspace:README.md"] == 1
