"""The built-in projections, registered by import string so their modules load only when
their events appear. Each job adds its line here."""

from __future__ import annotations

from plaudit.store.projections import register_projection

BUILTIN_PROJECTIONS: list[tuple[str, tuple[str, ...], str]] = [
    # (name, event type prefixes, "module:attr")
    ("bandit", ("plaudit.bandit.",), "plaudit.bandit.projection:BanditProjection"),
    ("ledger", ("plaudit.ledger.",), "plaudit.ledger.projection:LedgerProjection"),
    ("signals", ("flow.router.",), "plaudit.signals.projection:SignalsProjection"),
]

for _name, _prefixes, _target in BUILTIN_PROJECTIONS:
    register_projection(_target, name=_name, prefixes=_prefixes)
