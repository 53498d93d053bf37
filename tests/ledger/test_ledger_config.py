"""Ledger config: packaged defaults, user overrides, and clear errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from plaudit.errors import ConfigError
from plaudit.ledger.config import ENV_CONFIG, load_config


def test_defaults_are_the_framework_table() -> None:
    cfg = load_config()
    rewards = {n: c.points for n, c in cfg.categories.items() if c.type == "reward"}
    penalties = {n: c.points for n, c in cfg.categories.items() if c.type == "penalty"}
    assert rewards == {
        "constitutional_compliance": 50,
        "successful_validation": 30,
        "autonomous_recovery": 40,
        "pattern_reuse": 20,
        "zero_duplication": 25,
        "emd_compliance": 15,
        "mcp_integration": 10,
        "consensus_achievement": 35,
    }
    assert penalties == {
        "file_creation_violation": -10,
        "constitutional_breach": -50,
        "validation_failure": -20,
        "mcp_omission": -15,
        "unused_variables": -5,
        "emd_violation": -10,
        "permission_request": -25,
        "duplicate_logic": -15,
        "consensus_failure": -30,
    }
    # the seed's cross-file table
    src = {n: c.source for n, c in cfg.categories.items()}
    assert src["constitutional_compliance"] == "pattern"
    assert src["autonomous_recovery"] == src["file_creation_violation"] == "mistake"
    assert src["mcp_integration"] == "mcp_chain" and src["pattern_reuse"] == "entity"
    assert cfg.base_autonomy == 100.0


def test_env_and_json_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "ledger.json"
    f.write_text('{"categories": {"pattern_reuse": {"type": "reward", "points": 2}}}')
    monkeypatch.setenv(ENV_CONFIG, str(f))
    cfg = load_config()
    assert cfg.categories["pattern_reuse"].points == 2
    assert cfg.categories["successful_validation"].points == 30
    assert cfg.origin == str(f)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("categories = [", "malformed"),
        ('[categories.x]\ntype = "bonus"\npoints = 1\n', "categories.x.type"),
        ('[categories.x]\ntype = "reward"\npoints = 1.5\n', "must be an integer"),
        ('[categories.x]\ntype = "reward"\npoints = 1\nsource = "planet"\n', "unknown source"),
        ('[categories.opening_balance]\ntype = "reward"\npoints = 1\n', "reserved"),
        ("base_autonomy = 150\n", "base_autonomy"),
        ("checkpoint_every = 0\n", "checkpoint_every"),
        ('[[rules]]\nname = "r"\ntype = "a.b"\ncategory = "nope"\n', "rules[0].category"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "ledger.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert needle in str(err.value) and str(f) in str(err.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")


def _documented_schedule_block() -> str:
    """The `[reconcile]`...`[audit]` example of docs/ledger.md, as written there."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ledger.md").read_text()
    start = doc.index("```toml\n[reconcile]")
    return doc[start + len("```toml\n") : doc.index("```", start + 7)]


def test_the_documented_config_with_relative_paths_resolves_against_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/ledger.md's example (relative `sources_dir`, backup, report and audit folders)
    loads, resolves each path against the config file's folder, not the working directory,
    and every surface that loads it works: the library's `Ledger(p, path)`, the CLI through
    $PLAUDIT_LEDGER_CONFIG, and `load_config`."""
    from plaudit import Plaudit
    from plaudit.cli import main
    from plaudit.ledger import Ledger

    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    cfg_file = conf_dir / "ledger.toml"
    cfg_file.write_text(_documented_schedule_block())
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    s = load_config(cfg_file).schedule
    assert s.sources_dir == str(conf_dir / "memory-bank")
    assert s.backup_dir == str(conf_dir / "backups")
    assert s.reports_dir == str(conf_dir / "reports")
    assert s.audit_dir == str(conf_dir / "audits")

    db = str(tmp_path / "store.db")
    with Plaudit.open(db) as p:
        ledger = Ledger(p, str(cfg_file))
        assert ledger.config.schedule.backup_dir == str(conf_dir / "backups")
        assert ledger.record("successful_validation", "tests pass").points == 30
    monkeypatch.setenv(ENV_CONFIG, str(cfg_file))
    for args in (
        ["ledger", "score"],
        ["ledger", "record", "-c", "successful_validation", "-a", "again"],
    ):
        assert main(["--db", db, *args]) == 0, capsys.readouterr().err
    assert "internal error" not in capsys.readouterr().err
    assert not (elsewhere / "backups").exists()
