"""The reward ledger: categorised rewards and penalties as events in the shared log, with
checksums, reconciliation against source records, audit and recovery (seed 003)."""

from plaudit.ledger.api import Ledger
from plaudit.ledger.config import LedgerConfig, load_config
from plaudit.ledger.integrity import VerifyOutcome, log_verified
from plaudit.ledger.models import Checksum, Transaction
from plaudit.ledger.progress import ProgressFile, read_progress
from plaudit.ledger.scheduler import start_reconcile_thread, start_scheduler_thread
from plaudit.ledger.sources import SourceFiles, read_source_files

__all__ = [
    "Checksum",
    "Ledger",
    "LedgerConfig",
    "ProgressFile",
    "SourceFiles",
    "Transaction",
    "VerifyOutcome",
    "load_config",
    "log_verified",
    "read_progress",
    "read_source_files",
    "start_reconcile_thread",
    "start_scheduler_thread",
]
