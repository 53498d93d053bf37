"""Raw-SQL helpers for tampering tests (a plain module so test files can import it)."""

from __future__ import annotations

from pathlib import Path

from plaudit import Plaudit

DATA = Path(__file__).parent / "data"


def raw_sql(p: Plaudit, *statements: str) -> None:
    """Change the database behind plaudit's back, as someone editing the file would."""
    with p.backend.write() as tx:
        if tx.dialect == "sqlite":
            tx.execute("DROP TRIGGER IF EXISTS plaudit_events_no_update")
            tx.execute("DROP TRIGGER IF EXISTS plaudit_events_no_delete")
        else:
            tx.execute("ALTER TABLE plaudit_events DISABLE TRIGGER plaudit_events_append_only")
        for stmt in statements:
            tx.execute(stmt)


def payload_set(p: Plaudit, field: str, value: int) -> str:
    """SQL that rewrites one integer field of a JSON payload, per dialect."""
    if p.dialect == "sqlite":
        return f"payload = json_set(payload, '$.{field}', {value})"
    return f"payload = jsonb_set(payload::jsonb, '{{{field}}}', '{value}')::text"


def raw_exec(p: Plaudit, sql: str, params: tuple = ()) -> None:
    """One parameterised statement behind plaudit's back (blobs need parameters)."""
    with p.backend.write() as tx:
        if tx.dialect == "sqlite":
            tx.execute("DROP TRIGGER IF EXISTS plaudit_events_no_update")
            tx.execute("DROP TRIGGER IF EXISTS plaudit_events_no_delete")
        else:
            tx.execute("ALTER TABLE plaudit_events DISABLE TRIGGER plaudit_events_append_only")
        tx.execute(sql, params)


def ledger_with(p: Plaudit, tmp: Path, text: str):
    """A ledger with a config file holding `text` (merged over the defaults)."""
    from plaudit.ledger import Ledger

    cfg = tmp / f"ledger-{abs(hash(text))}.toml"
    cfg.write_text(text)
    return Ledger(p, cfg)
