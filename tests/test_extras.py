"""A lean install: the core runs without the extras, and a missing extra is one line naming it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.cli import main
from plaudit.errors import MissingExtraError
from plaudit.extras import EXTRAS, installed, need, require

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
HEAVY = sorted({m for modules in EXTRAS.values() for m in modules})


def requirement_names(reqs: list[str]) -> set[str]:
    import re

    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in reqs}


def test_the_extras_table_matches_pyproject() -> None:
    extras = PYPROJECT["optional-dependencies"]
    core = requirement_names(PYPROJECT["dependencies"])
    for extra, modules in EXTRAS.items():
        names = requirement_names(extras[extra])
        # A module is provided by a distribution of its name (opentelemetry.sdk by
        # opentelemetry-sdk).
        dists = {n.replace("-", ".") for n in names} | names
        assert {m.lower() for m in modules} <= dists, extra
        assert not names & core, f"{extra} packages must not also be core dependencies"
    assert extras["all"] == [f"plaudit[{','.join(EXTRAS)}]"]
    assert "plaudit[all]" in extras["test"]  # the tests need every extra


def block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `import module` fail as it does when the package is not installed."""
    for name in list(sys.modules):
        if name.partition(".")[0] in modules:
            monkeypatch.delitem(sys.modules, name)
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


def test_need_names_the_extra_and_only_for_the_module_itself(monkeypatch) -> None:
    block(monkeypatch, "pyarrow")
    with pytest.raises(MissingExtraError) as info:
        need("pyarrow", extra="parquet", feature="the parquet export format")
    assert str(info.value) == (
        "the parquet export format needs the parquet extra: pip install 'plaudit[parquet]'"
    )
    assert info.value.exit_code == 2 and installed("parquet") == (False, "pyarrow")


def test_a_broken_install_is_not_called_a_missing_extra(monkeypatch, tmp_path: Path) -> None:
    """An ImportError from inside an installed package is raised as it is."""
    (tmp_path / "plaudit_broken_pkg.py").write_text("import plaudit_no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        need("plaudit_broken_pkg", extra="parquet", feature="x")
    assert info.value.name == "plaudit_no_such_dependency_xyz"


def test_serve_without_the_server_extra(monkeypatch, tmp_path: Path, capsys) -> None:
    block(monkeypatch, "uvicorn")
    code = main(["serve", "--db", str(tmp_path / "p.db"), "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "error: plaudit serve needs the server extra: pip install 'plaudit[server]'\n"
    assert not (tmp_path / "p.db").exists()  # refused before opening anything


def test_postgres_without_the_postgres_extra(monkeypatch, capsys) -> None:
    block(monkeypatch, "psycopg")
    code = main(["--db", "postgresql://127.0.0.1:5432/test", "log", "head"])
    assert capsys.readouterr().err == (
        "error: a postgresql:// store needs the postgres extra: pip install 'plaudit[postgres]'\n"
    )
    assert code == 2
    with pytest.raises(MissingExtraError):
        Plaudit.open("postgresql://127.0.0.1:5432/test")


def test_parquet_without_the_parquet_extra(monkeypatch, sqlite_url: str, tmp_path, capsys):
    Plaudit.open(sqlite_url).close()
    block(monkeypatch, "pyarrow")
    out = tmp_path / "o"
    code = main(["--db", sqlite_url, "signal", "export", "--output-dir", str(out), "--format",
                 "parquet"])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        "error: --format parquet needs the parquet extra: pip install 'plaudit[parquet]'\n"
    )
    assert not out.exists()


#: Run in a fresh interpreter where none of the extras' modules can be imported.
LEAN = """
import importlib.abc, sys
class Lean(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {heavy!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Lean())
from plaudit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def lean(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = LEAN.format(heavy=HEAVY)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


EMIT = ["--decision-id", "d", "--chosen-task", "t", "--confidence", "0.5"]


def test_the_core_runs_without_any_extra(tmp_path: Path) -> None:
    """What `pip install plaudit` promises: the log, bandit, ledger, signals and the demo."""
    arms = tmp_path / "arms.json"
    arms.write_text('[{"id": "tool:exec:Bash", "tokens": 300}]')
    answer = tmp_path / "answer.txt"
    answer.write_text("ran Bash")
    steps = [
        ["--db", "p.db", "init"],
        ["--db", "p.db", "log", "append", '{"type": "a.b"}'],
        ["--db", "p.db", "ledger", "record", "-c", "successful_validation", "-a", "ok"],
        ["--db", "p.db", "select", "--arms", str(arms), "--json"],
        ["--db", "p.db", "signal", "emit", "decision", *EMIT],
        ["--db", "p.db", "signal", "export", "--output-dir", "out"],
        ["--db", "p.db", "log", "verify"],
        ["--db", "p.db", "ledger", "export-progress", "progress.json"],
        ["demo", "--runs", "50", "--dir", "demo"],
    ]
    for args in steps:
        r = lean(*args, cwd=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
    r = lean("serve", "--db", "p.db", cwd=tmp_path)
    assert r.returncode == 2 and "pip install 'plaudit[server]'" in r.stderr
    embed = LEAN.format(heavy=HEAVY).replace("from plaudit.cli", "import plaudit.server #")
    r = subprocess.run([sys.executable, "-c", embed], capture_output=True, text=True, timeout=60)
    assert r.stderr.strip().splitlines()[-1] == (  # an app that embeds the HTTP layer
        "plaudit.errors.MissingExtraError: plaudit's HTTP server needs the server extra: "
        "pip install 'plaudit[server]'"
    )


def test_require_checks_every_module_of_an_extra(monkeypatch) -> None:
    block(monkeypatch, "uvicorn")
    with pytest.raises(MissingExtraError, match=r"^x needs the server extra"):
        require("server", "x")
    assert installed("server") == (False, "uvicorn")
    assert installed("postgres") == (True, None)
