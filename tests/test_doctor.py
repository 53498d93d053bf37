"""`plaudit doctor`: a clear list of what is wrong, exit 1 when something is; nothing created."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.cli import main
from plaudit.doctor import check_dashboard, diagnose


def run(args: list[str], capsys) -> tuple[int, dict]:
    code = main([*args, "--json"] if "doctor" in args else [*args, "doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_a_healthy_store(db_url: str, capsys) -> None:
    with Plaudit.open(db_url) as p:
        p.log.append({"type": "a.b", "payload": {}})
    code, report = run(["--db", db_url], capsys)
    checks = by_name(report)
    assert code == 0 and report["ok"] is True
    assert checks["store"]["status"] == "ok" and ": 1 events, head 1:" in checks["store"]["detail"]
    assert {checks[f"extra {e}"]["status"] for e in ("server", "postgres", "parquet")} == {"ok"}
    assert checks["dashboard"]["status"] == "ok"
    if db_url.startswith("postgresql://"):  # the store's server is checked too
        assert checks["postgresql"]["status"] == "ok"
        assert "PostgreSQL" in checks["postgresql"]["detail"]
    else:
        assert "postgresql" not in checks


def test_a_missing_store_is_a_problem_and_stays_missing(tmp_path: Path, capsys) -> None:
    db = tmp_path / "nope" / "p.db"
    code = main(["--db", str(db), "doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  store" in out and f"no plaudit store at {db}" in out and "init" in out
    assert out.rstrip().endswith("1 problem: store")
    assert not (tmp_path / "nope").exists()


def test_an_unreachable_postgres_is_named_without_its_password(sqlite_url: str, capsys) -> None:
    Plaudit.open(sqlite_url).close()
    dsn = "postgresql://me:hunter2@127.0.0.1:1/nothing"
    code, report = run(["--db", sqlite_url, "doctor", "--dsn", dsn], capsys)
    pg = by_name(report)["postgresql"]
    assert code == 1 and pg["status"] == "fail"
    assert "cannot connect to postgresql://me:***@127.0.0.1:1/nothing" in pg["detail"]
    assert "hunter2" not in json.dumps(report)


def block(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    for name in list(sys.modules):
        if name.partition(".")[0] == module:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


def test_a_missing_extra_is_absent_not_a_failure(sqlite_url: str, monkeypatch, capsys) -> None:
    Plaudit.open(sqlite_url).close()
    block(monkeypatch, "pyarrow")
    code = main(["--db", sqlite_url, "doctor"])
    out = capsys.readouterr().out
    assert code == 0
    assert "--    extra parquet   not installed (pyarrow is missing)" in out
    assert "pip install 'plaudit[parquet]'" in out and out.rstrip().endswith("no problems found")


def test_a_postgres_store_without_its_extra_fails(monkeypatch) -> None:
    block(monkeypatch, "psycopg")
    report = diagnose("postgresql://127.0.0.1:5432/test?schema=x")
    checks = {c.name: c for c in report.checks}
    assert not report.ok
    assert checks["store"].status == "fail" and checks["postgresql"].status == "fail"
    assert checks["store"].fix == "pip install 'plaudit[postgres]'"
    assert checks["extra postgres"].status == "absent"


def test_dashboard_assets_that_are_missing_or_empty(tmp_path: Path) -> None:
    static = tmp_path / "static"
    static.mkdir()
    assert check_dashboard(static).status == "fail"  # no page at all
    (static / "index.html").write_text(
        '<link href="/static/a.css"><script src="/static/b.js"></script>'
        '<script src="/static/c.js?v=2"></script>'
    )
    (static / "a.css").write_text("body {}")
    (static / "b.js").write_text("")
    check = check_dashboard(static)
    assert check.status == "fail" and check.detail.endswith("missing or empty: b.js, c.js")
    (static / "b.js").write_text("1")
    (static / "c.js").write_text("2")
    assert check_dashboard(static).status == "ok"


def test_every_extra_says_what_it_is_for() -> None:
    from plaudit.doctor import USES
    from plaudit.extras import EXTRAS

    assert set(USES) == set(EXTRAS)


def hide_extras(monkeypatch: pytest.MonkeyPatch, extras: tuple[str, ...]) -> None:
    """Make the modules these extras install unimportable, as on an install without them.

    Only each extra's own module is hidden (`opentelemetry.sdk`, not `opentelemetry`: the
    API package comes with other installs too)."""
    from plaudit.extras import EXTRAS

    for extra in extras:
        for module in EXTRAS[extra]:
            for name in list(sys.modules):
                if name == module or name.startswith(module + "."):
                    monkeypatch.delitem(sys.modules, name)
            monkeypatch.setitem(sys.modules, module, None)


@pytest.mark.parametrize(
    "hidden",
    [
        combo
        for n in range(5)
        for combo in __import__("itertools").combinations(
            ("server", "postgres", "parquet", "otel"), n
        )
    ],
    ids=lambda c: "+".join(c) or "all-installed",
)
def test_doctor_works_on_every_combination_of_extras(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys, hidden: tuple[str, ...]
) -> None:
    """A lean install (issue 31: KeyError 'otel', exit 70) and every mix in between."""
    Plaudit.open(sqlite_url).close()
    hide_extras(monkeypatch, hidden)
    code, report = run(["--db", sqlite_url], capsys)
    checks = by_name(report)
    assert code == 0 and report["ok"] is True
    for extra in ("server", "postgres", "parquet", "otel"):
        check = checks[f"extra {extra}"]
        if extra in hidden:
            assert check["status"] == "absent"
            assert check["fix"] == f"pip install 'plaudit[{extra}]'"
        else:
            assert check["status"] == "ok" and "?" not in check["detail"]
    code = main(["--db", sqlite_url, "doctor"])
    out = capsys.readouterr().out
    assert code == 0 and out.rstrip().endswith("no problems found")
