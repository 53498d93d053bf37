"""Issue 31: the defects a new user met, each reproduced as it was reported."""

from __future__ import annotations

import json
from pathlib import Path

from plaudit import Plaudit
from plaudit.ledger import Ledger


def _config(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


# -- item 5: exit codes that hide trouble -------------------------------------------------------
def test_watch_once_exits_1_when_its_reconciliation_halts_recording(
    db_url: str, tmp_path: Path, memory_bank: Path, cli
) -> None:
    """`ledger reconcile` exits 1 on a mismatch; `ledger watch --once` exited 0 when the same
    reconciliation, run on its schedule, halted recording."""
    never = "[reconcile]\nevery_transactions = 0\nevery_seconds = 0\n"
    quiet = _config(tmp_path, "quiet.toml", never)
    with Plaudit.open(db_url) as p:
        lg = Ledger(p, quiet)
        lg.import_sources(memory_bank)
        lg.record("validation_failure", "pytest failed", source="mistake:m-002")
    # The record the ledger holds points for is deleted from its file.
    mistakes = json.loads((memory_bank / "mistakes.json").read_text())
    mistakes["error_patterns"] = [m for m in mistakes["error_patterns"] if m["id"] != "m-002"]
    (memory_bank / "mistakes.json").write_text(json.dumps(mistakes))
    watched = _config(
        tmp_path,
        "watch.toml",
        f"[reconcile]\nevery_transactions = 1\nsources_dir = '{memory_bank}'\n",
    )
    code, out, _ = cli("ledger", "--config", str(watched), "watch", "--once", "--json")
    assert code == 1
    assert json.loads(out)["reconcile"] == {"ok": False, "halted": True}
    code, _, _ = cli("ledger", "--config", str(watched), "reconcile")
    assert code == 1  # the command it stands for says the same
    code, out, _ = cli("ledger", "--config", str(watched), "watch", "--once")
    assert code == 0 and out.strip() == "nothing was due"
