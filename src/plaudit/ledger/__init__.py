"""The reward ledger: categorised rewards and penalties as events in the shared log, with
checksums, reconciliation against source records, audit and recovery (seed 003)."""

from plaudit.ledger.api import Ledger
from plaudit.ledger.config import LedgerConfig, load_config
from plaudit.ledger.models import Checksum, Transaction
from plaudit.ledger.scheduler import start_reconcile_thread

__all__ = [
    "Checksum",
    "Ledger",
    "LedgerConfig",
    "Transaction",
    "load_config",
    "start_reconcile_thread",
]
