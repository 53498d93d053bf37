"""`plaudit demo`, the main job: it must run end to end and its report must be true."""

from __future__ import annotations

import json

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
        assert stats.by_type["plaudit.bandit.run.v1"] == 300
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
