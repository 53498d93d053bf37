"""`plaudit demo`, the main job: it must run end to end and its report must be true."""

from __future__ import annotations

import json
import re

from plaudit import Plaudit
from plaudit.cli import main
from plaudit.demo import run_demo


def test_demo_report_matches_the_store(tmp_path):
    report = run_demo(tmp_path / "demo", runs=300, seed=3)
    assert report.runs == 300
    assert report.log_ok and report.ledger["verified"]
    with Plaudit.open(report.db) as p:
        assert p.log.verify().ok
        assert p.log.head().digest == report.log_head
        stats = p.log.stats()
        # every run is one decision and one outcome, and the bandit recorded each run
        assert stats.by_type["flow.router.decision.v1"] == 300
        assert stats.by_type["flow.router.outcome.v1"] == 300
        assert stats.by_type["plaudit.bandit.run.v2"] == 300
        assert p.ledger.score()["total_score"] == report.ledger["total_score"]
    summary = json.loads((tmp_path / "demo" / "signals-export" / "summary.json").read_text())
    assert summary["counts"]["joined_rows"] == report.export_counts["joined_rows"] == 300
    audit = json.loads((tmp_path / "demo" / "signals-export" / "audit.json").read_text())
    assert audit["pass"] == report.audit["pass"]
    assert 0.0 <= report.recall_last_500 <= 1.0


def test_demo_replaces_an_earlier_run(tmp_path):
    first = run_demo(tmp_path / "d", runs=60, seed=1)
    second = run_demo(tmp_path / "d", runs=60, seed=1)
    assert first.events == second.events  # a fresh store each time, not an appended one


def test_demo_cli_prints_the_report(tmp_path, capsys):
    assert main(["demo", "--dir", str(tmp_path / "demo"), "--runs", "80"]) == 0
    out = capsys.readouterr().out
    assert "token savings" in out and "hash chain intact: yes" in out
    assert "plaudit serve --db" in out
    # the headline is the store's figure, with its interval and what it is measured against
    with Plaudit.open(str(tmp_path / "demo" / "plaudit.db")) as p:
        s = p.bandit.savings()
    shown = re.search(r"token savings +(-?[\d.]+)% +\(95% CI (-?[\d.]+)% \.\. (-?[\d.]+)%\)", out)
    assert shown is not None, out
    want = (s["prompt_savings_percent"], s["prompt_ci_low"], s["prompt_ci_high"])
    assert [float(x) for x in shown.groups()] == [round(v, 1) for v in want]
    assert f"in {s['runs']} runs, against what each would have sent" in out
    assert s["counterfactual"] in out


def test_demo_refuses_a_directory_holding_user_files(tmp_path, capsys):
    """`--dir mydir` once deleted mydir/notes.txt; `--dir .` deleted a project's src/."""
    mydir = tmp_path / "mydir"
    (mydir / "src").mkdir(parents=True)
    (mydir / "notes.txt").write_text("keep me")
    (mydir / "src" / "main.py").write_text("print('hi')")
    assert main(["demo", "--dir", str(mydir), "--runs", "50"]) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and "did not write" in err and "Nothing was changed" in err
    assert (mydir / "notes.txt").read_text() == "keep me"
    assert (mydir / "src" / "main.py").read_text() == "print('hi')"
    assert sorted(p.name for p in mydir.iterdir()) == ["notes.txt", "src"]


def test_demo_rerun_keeps_files_a_user_added_to_its_directory(tmp_path):
    d = tmp_path / "d"
    run_demo(d, runs=50, seed=1)
    assert (d / ".plaudit-demo").is_file()
    (d / "my-notes.md").write_text("mine")
    run_demo(d, runs=50, seed=1)
    assert (d / "my-notes.md").read_text() == "mine"


def test_demo_writes_into_an_empty_directory(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    report = run_demo(d, runs=50, seed=2)
    assert report.log_ok and (d / "plaudit.db").is_file()


def test_demo_refuses_a_file_as_its_directory(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["demo", "--dir", str(f), "--runs", "50"]) == 2
    assert f.read_text() == "x"
