"""One consistent CLI: one JSON-input reader, one progress bar, suggestions for every mistyped
command, and `--output` only ever an output."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _terminal import on_a_terminal
from plaudit import Plaudit
from plaudit.cli import main
from plaudit.errors import ValidationError
from plaudit.inputs import as_list, load, parse

REPO = Path(__file__).resolve().parent.parent

scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_value = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
records = st.lists(st.dictionaries(st.text(max_size=8), json_value, max_size=4), max_size=8)


@given(items=records)
def test_every_layout_of_the_same_records_reads_the_same(items: list[dict]) -> None:
    layouts = [
        json.dumps(items),
        json.dumps(items, indent=2),
        "\n".join(json.dumps(i) for i in items) + "\n\n",
    ]
    if not items:
        layouts = layouts[:2]  # no lines at all is empty input, below
    for text in layouts:
        assert as_list(parse(text, what="input")) == items, text
        assert as_list(parse(text.encode(), what="input")) == items
    if len(items) == 1:  # one object, pretty or not, is a list of one
        assert as_list(parse(json.dumps(items[0], indent=2), what="input")) == items


@pytest.mark.parametrize(
    ("data", "where", "message"),
    [
        ("", "f.json", "f.json: input: is empty: no JSON given"),
        (" \n\t\n", None, "input: is empty: no JSON given"),
        ("{oops", "stdin", "stdin: input: malformed JSON"),
        ('{"a": 1}\n\n{oops\n', "f.jsonl", "f.jsonl:3: input: malformed JSON"),
        ('{"a": 1}\n{oops', None, "line 2: input: malformed JSON"),
        (b'{"a": "\xff"}', "f.json", "f.json: input: invalid UTF-8 at byte 7"),
        ("[" * 100_000 + "]" * 100_000, "f.json", "f.json: input:"),
    ],
)
def test_bad_input_names_what_and_where(data, where, message) -> None:
    with pytest.raises(ValidationError) as info:
        parse(data, what="input", where=where)
    assert str(info.value).startswith(message), str(info.value)


def test_a_value_given_inline_is_one_document() -> None:
    with pytest.raises(ValidationError, match="--reward-map: malformed JSON"):
        parse('{"a": 1}\n{"b": 2}', what="--reward-map", lines=False)


def test_files_stdin_and_the_size_limit(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "x.json"
    f.write_text('{"a": 1}')
    assert load(str(f), what="arms") == {"a": 1}
    with pytest.raises(ValidationError, match=r"x.json: arms: is larger than 4 bytes"):
        load(str(f), what="arms", limit=4)
    with pytest.raises(ValidationError, match=r"arms: cannot read .*missing.json"):
        load(str(tmp_path / "missing.json"), what="arms")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"[1, 2]\n")))
    assert load("-", what="input") == [1, 2]
    monkeypatch.setattr("sys.stdin", io.StringIO("[3]"))  # a text-only replacement
    assert load("-", what="input") == [3]


@pytest.fixture
def store(tmp_path: Path) -> str:
    db = str(tmp_path / "p.db")
    Plaudit.open(db).close()
    return db


def test_the_three_readers_take_the_same_layouts(store: str, tmp_path: Path, capsys) -> None:
    """Layouts one command took and another refused before: now all three take them all."""
    pretty = tmp_path / "one.json"
    pretty.write_text(json.dumps({"category": "pattern_reuse", "action": "a"}, indent=2))
    assert main(["--db", store, "ledger", "record-batch", str(pretty), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recorded"] == 1
    arms = tmp_path / "arms.jsonl"
    arms.write_text('{"id": "tool:exec:Bash", "tokens": 300}\n\n{"id": "skill:x:y", "tokens": 5}\n')
    assert main(["--db", store, "arms", "register", str(arms)]) == 0
    assert "registered 2 arms" in capsys.readouterr().out
    events = tmp_path / "events.json"
    events.write_text(json.dumps([{"type": "a.b"}, {"type": "a.c"}], indent=2))
    with events.open("rb") as f, pytest.MonkeyPatch.context() as m:
        m.setattr("sys.stdin", io.TextIOWrapper(f))
        assert main(["--db", store, "log", "append", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["appended"] == 2


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [
        (["selct"], "Did you mean 'select'?"),
        (["posterior"], "Did you mean 'posteriors'?"),
        (["ledger", "scor"], "'score'"),
        (["ledger", "sessions", "strt"], "Did you mean 'start'?"),
        (["log", "verfy"], "Did you mean 'verify'?"),
        (["signal", "exprt"], "Did you mean 'export'?"),
        (["arms", "lst"], "Did you mean 'list'?"),
    ],
)
def test_a_mistyped_command_gets_a_suggestion_everywhere(args, suggestion, capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"No such command {args[-1]!r}." in err and suggestion in err


def test_no_suggestion_when_nothing_is_close(capsys) -> None:
    assert main(["zzzzqqq"]) == 2
    err = capsys.readouterr().err
    assert "No such command 'zzzzqqq'." in err and "Did you mean" not in err


def test_help_still_lists_every_command() -> None:
    from plaudit.cli import COMMANDS

    r = subprocess.run(
        [sys.executable, "-c", "from plaudit.cli import main; main(['--help'])"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert all(name in r.stdout for name in COMMANDS)


def select_run(store: str, tmp_path: Path, capsys) -> str:
    arms = tmp_path / "arms.json"
    arms.write_text('[{"id": "file:workspace:README.md", "tokens": 10}]')
    assert main(["--db", store, "select", "--arms", str(arms), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["run_id"]


def test_observe_takes_response_and_the_old_output_spelling_warns(
    store: str, tmp_path: Path, capsys
) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_text("I read README.md")
    run = select_run(store, tmp_path, capsys)
    assert main(["--db", store, "observe", "--run-id", run, "--response", str(answer)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("recorded: 1/1 referenced") and err == ""
    assert main(["--db", store, "observe", "--run-id", run, "--output", str(answer)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("already recorded")
    assert err == "warning: observe --output is deprecated; use --response FILE\n"
    both = ["--response", str(answer), "--output", str(answer)]
    assert main(["--db", store, "observe", "--run-id", run, *both]) == 2
    assert main(["--db", store, "observe", "--run-id", run]) == 2
    assert "Missing option '--response'" in capsys.readouterr().err


def test_observe_help_shows_no_output_option() -> None:
    from plaudit.cli.bandit import observe

    ctx = observe.make_context("observe", ["--help"], resilient_parsing=True)
    text = observe.get_help(ctx)
    assert "--response" in text and "--output" not in text


def test_no_command_takes_an_output_that_is_read() -> None:
    """`--output` (and `-o`) only ever name something the command writes."""
    import click

    from plaudit.cli._app import _build

    cli = _build()
    ctx = click.Context(cli)
    seen = []

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), f"{path} {name}")
            return
        for p in cmd.params:
            if "--output" in getattr(p, "opts", []) and not getattr(p, "hidden", False):
                seen.append(path.strip())

    walk(cli, "")
    assert seen == ["log export"]


def test_one_progress_bar_on_a_terminal_and_none_elsewhere(tmp_path: Path) -> None:
    sample = REPO / "examples" / "data" / "sample_router_log.jsonl"
    code, _, drawn = on_a_terminal(["--db", "p.db", "log", "import", str(sample)], tmp_path)
    assert code == 0 and b"importing" in drawn
    code, _, drawn = on_a_terminal(["demo", "--runs", "50", "--dir", "d"], tmp_path)
    assert code == 0 and b"simulating agent runs" in drawn and b"50/50" in drawn
    r = subprocess.run(
        [sys.executable, "-c", "import sys; from plaudit.cli import main; sys.exit(main())",
         "--db", "p.db", "log", "import", str(sample)],
        capture_output=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0 and r.stderr == b""  # not a terminal: no bar at all


def test_the_fast_emit_path_lives_under_cli() -> None:
    import importlib.util

    assert importlib.util.find_spec("plaudit.cli.emit") is not None
    assert importlib.util.find_spec("plaudit.signals.emit_cli") is None
