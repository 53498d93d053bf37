"""Every wait of the log has a deadline, and a waiter that reaches it is told who it waited for.

A lock, a lease, a host leader or a relay that does not answer within the deadline gives the
waiter its result by another route or a `DeadlineError` naming the holder (pid and host where
known, and whether that process is stopped) and what to do. The deadline is one setting per
open store: `Plaudit.open(..., deadline_s=)`, else `$PLAUDIT_DEADLINE_S`, else 5 seconds.

A holder must not keep a waiter past the deadline either: on PostgreSQL a session that holds
the sequencer lease and stays idle inside its transaction for half the deadline is ended by
the server (`idle_in_transaction_session_timeout`), which releases the lease and rolls back
what it had not committed, so a stopped process delays the others by at most the deadline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache

from plaudit.errors import ConfigError, DeadlineError

ENV_DEADLINE = "PLAUDIT_DEADLINE_S"
DEFAULT_DEADLINE_S = 5.0
#: Deadlines below this would fail healthy writers on a busy machine (a commit's fsync).
MIN_DEADLINE_S = 0.2


@lru_cache(maxsize=1)
def host() -> str:
    """This machine's name, as holders write it and waiters compare it."""
    import socket

    return socket.gethostname()


def deadline_from(value: float | None, env: Mapping[str, str] | None = None) -> float:
    """The deadline in seconds: `value`, else `$PLAUDIT_DEADLINE_S`, else 5."""
    if value is None:
        raw = (os.environ if env is None else env).get(ENV_DEADLINE, "")
        if not raw.strip():
            return DEFAULT_DEADLINE_S
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"${ENV_DEADLINE} must be a number of seconds, not {raw!r}") from None
    if not isinstance(value, int | float) or not MIN_DEADLINE_S <= float(value) <= 3600:
        raise ConfigError(
            f"deadline_s must be between {MIN_DEADLINE_S} and 3600 seconds, got {value!r}"
        )
    return float(value)


def process_state(pid: int) -> str | None:
    """What this host's kernel says of process `pid`: "stopped", "running", ... or None when
    there is no such process here (or it cannot be read)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except (OSError, ValueError):
        return None
    # The state letter follows the command name, which is in parentheses and may hold any
    # character: take the last closing parenthesis.
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return {
        b"R": "running",
        b"S": "sleeping",
        b"D": "waiting for the disk",
        b"T": "stopped",
        b"t": "stopped by a debugger",
        b"Z": "exited",
    }.get(state, "alive")


def holder(pid: int | None, host_name: str | None) -> str:
    """'pid 123 on host h (stopped)': as much as is known of who holds something."""
    if pid is None:
        return "another process"
    text = f"pid {pid}"
    if host_name:
        text += f" on host {host_name}"
    if host_name in (None, host()):
        state = process_state(pid)
        if state is not None:
            text += f" ({state})"
        elif host_name == host():
            text += " (no longer running)"
    return text


def waited(what: str, seconds: float, who: str, advice: str) -> DeadlineError:
    """The error a waiter gets at its deadline (`seconds` 0: it did not wait, because the
    holder it ran out of time on before is still stopped)."""
    if seconds <= 0:
        return DeadlineError(f"{what} is still held by {who}, which is stopped: {advice}")
    return DeadlineError(f"waited {seconds:g} s for {what}, held by {who}: {advice}")
