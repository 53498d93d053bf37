"""The built-in projections, registered by import string so their modules load only when
their events appear. Each job adds its line here."""

from __future__ import annotations

from plaudit.store.projections import register_projection

BUILTIN_PROJECTIONS: list[tuple[str, tuple[str, ...], str, bool]] = [
    # (name, event type prefixes, "module:attr", trailing)
    # The bandit and the ledger read their own writes, so they apply on the write path.
    ("bandit", ("plaudit.bandit.",), "plaudit.bandit.projection:BanditProjection", False),
    ("ledger", ("plaudit.ledger.",), "plaudit.ledger.projection:LedgerProjection", False),
    # Router rows are read by exports, audits and evaluations only: they trail the log, so a
    # router's appends cost the log's work alone (see docs/log.md, "Trailing projections").
    # It also folds the repeat records `plaudit log import` keeps for exact repeats of a line.
    (
        "signals",
        ("flow.router.", "plaudit.log.repeat."),
        "plaudit.signals.projection:SignalsProjection",
        True,
    ),
    # Which traces belong to which bandit runs (selects made under a trace context, spans kept
    # for a run whose end has not arrived): read by trace ingest only, so it trails.
    (
        "traces",
        ("plaudit.bandit.run.", "plaudit.trace."),
        "plaudit.traces.projection:TracesProjection",
        True,
    ),
]

for _name, _prefixes, _target, _trailing in BUILTIN_PROJECTIONS:
    register_projection(_target, name=_name, prefixes=_prefixes, trailing=_trailing)
