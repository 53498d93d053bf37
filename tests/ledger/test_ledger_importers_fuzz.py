"""Every importer turns a malformed file into one validation error naming the field, and a
refused file creates nothing, not even an empty store (issue 31, item 8): NaN, infinities,
numbers out of range, 5,000-digit integers and 50,000-deep nesting, anywhere in a
progress.json or a memory-bank file, through the command line."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_helpers import DATA

from plaudit.cli import main

#: (raw JSON text, why it must be refused)
POISONS = {
    "NaN": "not a number",
    "Infinity": "not a number",
    "-Infinity": "not a number",
    "1e400": "out of range",
    "-1e400": "out of range",
    "1e300": "out of range",
    "9" * 5000: "out of range",
    "-" + "9" * 5000: "out of range",
    str(2**63): "out of range",
    "[" * 50_000 + "]" * 50_000: "nested deeper than 64 levels",
    '{"a":' * 50_000 + "1" + "}" * 50_000: "nested deeper than 64 levels",
    "[" * 100 + "]" * 100: "nested deeper than 64 levels",
}
MARK = "__poison__"


def _paths(doc: Any, path: str = "") -> list[str]:
    """Every place in a document a value sits at, as the error messages write it."""
    out = [path] if path else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, f"{path}.{k}" if path else k)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, f"{path}[{i}]")
    return out


def _put(doc: Any, path: str, value: Any) -> Any:
    import re

    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    cur = doc
    for part in parts[:-1]:
        cur = cur[int(part[1:-1])] if part.startswith("[") else cur[part]
    last = parts[-1]
    if last.startswith("["):
        cur[int(last[1:-1])] = value
    else:
        cur[last] = value
    return doc


def _poisoned(doc: Any, path: str, raw: str) -> str:
    text = json.dumps(_put(json.loads(json.dumps(doc)), path, MARK))
    return text.replace(f'"{MARK}"', raw, 1)


def _refused(args: list[str], db: Path, capsys: Any, path: str, why: str) -> None:
    code = main(["--db", str(db), *args])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (path, why, captured)
    assert err.count("\n") == 0 and err.startswith("error: ") and "Traceback" not in err
    assert f": {path[:40]}" in err and why in err, (path, err)
    assert not db.exists() and not db.parent.exists()  # not even an empty store


PROGRESS = json.loads((DATA / "progress.json").read_text())
BANK = {f.name: json.loads(f.read_text()) for f in (DATA / "memory-bank").iterdir()}
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(path=st.sampled_from(_paths(PROGRESS)), raw=st.sampled_from(sorted(POISONS)))
def test_import_progress_refuses_a_malformed_file_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], path: str, raw: str
) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "progress.json"
        f.write_text(_poisoned(PROGRESS, path, raw))
        _refused(
            ["ledger", "import-progress", str(f)],
            Path(d) / "new" / "p.db",
            capsys,
            path,
            POISONS[raw],
        )


@SETTINGS
@given(
    target=st.sampled_from([(name, p) for name, doc in BANK.items() for p in _paths(doc)]),
    raw=st.sampled_from(sorted(POISONS)),
)
def test_import_sources_refuses_a_malformed_file_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], target: tuple[str, str], raw: str
) -> None:
    name, path = target
    with tempfile.TemporaryDirectory() as d:
        bank = Path(d) / "bank"
        shutil.copytree(DATA / "memory-bank", bank)
        (bank / name).write_text(_poisoned(BANK[name], path, raw))
        _refused(
            ["ledger", "import-sources", str(bank)],
            Path(d) / "new" / "p.db",
            capsys,
            path,
            POISONS[raw],
        )


@pytest.mark.parametrize("field", ["penalty", "points"])
def test_numbers_beyond_what_a_transaction_holds_name_their_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    """Within ±2^53 but beyond what one transaction may hold (±10^9 points)."""
    if field == "penalty":
        bank = tmp_path / "bank"
        shutil.copytree(DATA / "memory-bank", bank)
        doc = json.loads((bank / "mistakes.json").read_text())
        doc["error_patterns"][1]["penalty"] = -(10**12)
        (bank / "mistakes.json").write_text(json.dumps(doc))
        args, path = ["ledger", "import-sources", str(bank)], "error_patterns[1].penalty"
    else:
        doc = json.loads((DATA / "progress.json").read_text())
        doc["transaction_log"][0]["points"] = 10**12
        f = tmp_path / "progress.json"
        f.write_text(json.dumps(doc))
        args, path = ["ledger", "import-progress", str(f)], "transaction_log[0].points"
    _refused(args, tmp_path / "new" / "p.db", capsys, path, "out of range")


def test_a_refused_import_leaves_an_existing_store_as_it_was(tmp_path: Path, capsys) -> None:
    from plaudit import Plaudit

    db = tmp_path / "p.db"
    with Plaudit.open(db) as p:
        p.ledger.record("pattern_reuse", "before")
        head = p.log.head()
    f = tmp_path / "progress.json"
    f.write_text(_poisoned(PROGRESS, "reinforcement_learning_ledger.total_score", "NaN"))
    assert main(["--db", str(db), "ledger", "import-progress", str(f)]) == 2
    with Plaudit.open(db) as p:
        assert p.log.head() == head


def test_a_refused_record_batch_file_creates_no_store(tmp_path: Path, capsys) -> None:
    f = tmp_path / "batch.jsonl"
    f.write_text(
        '{"category": "pattern_reuse", "action": "a"}\n{"category": "nope", "action": "b"}\n'
    )
    db = tmp_path / "new" / "p.db"
    assert main(["--db", str(db), "ledger", "record-batch", str(f)]) == 2
    assert "[1]: category: unknown category 'nope'" in capsys.readouterr().err
    assert not db.parent.exists()
