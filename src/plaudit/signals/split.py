"""Train/val/test assignment.

`by="decision"` is the reference exporter's rule, kept as the default so existing splits do not
move. `by="session"` buckets whole sessions, so a row's `event_history` (earlier decisions of the
same session) can never sit in another split.
"""

from __future__ import annotations

import hashlib
from typing import Literal

SplitBy = Literal["decision", "session"]
SPLITS = ("train", "val", "test")


def bucket(key: str, seed: int) -> int:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()
    return int(digest[:8], 16) % 100


def clamp_percents(val_percent: int, test_percent: int) -> tuple[int, int]:
    """The reference's clamping: val first, then test within what is left."""
    val = max(0, min(int(val_percent), 100))
    test = max(0, min(int(test_percent), 100 - val))
    return val, test


def assign(
    decision_id: str,
    session_id: str,
    *,
    seed: int,
    val_percent: int,
    test_percent: int,
    by: SplitBy = "decision",
) -> str:
    """Percents must already be clamped. Rows without a session fall back to their id."""
    key = session_id if by == "session" and session_id else decision_id
    b = bucket(key, seed)
    if b < test_percent:
        return "test"
    if b < test_percent + val_percent:
        return "val"
    return "train"
