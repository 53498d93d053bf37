"""The ledger's event types. Every ledger fact is one of these events in the shared log."""

from __future__ import annotations

PREFIX = "plaudit.ledger."
TRANSACTION = "plaudit.ledger.transaction.v1"
SESSION_START = "plaudit.ledger.session.start.v1"
SESSION_END = "plaudit.ledger.session.end.v1"
SOURCE = "plaudit.ledger.source.v1"
SOURCE_REMOVED = "plaudit.ledger.source.removed.v1"
CHECKPOINT = "plaudit.ledger.checkpoint.v1"
HALT = "plaudit.ledger.halt.v1"
RESUME = "plaudit.ledger.resume.v1"
INCIDENT = "plaudit.ledger.incident.v1"
RECONCILE = "plaudit.ledger.reconcile.v1"
#: A scheduled job ran (backup, report, weekly audit): `job`, `tx_count`, `key`.
JOB = "plaudit.ledger.job.v1"

#: How a transaction came about. Only these count as agent actions in the metrics.
ACTION_KINDS = ("record", "rule", "recovery", "import")
KINDS = (*ACTION_KINDS, "opening", "audit")
