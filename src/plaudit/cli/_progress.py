"""The CLI's one progress bar: rich, on stderr, only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

#: update(phase, done, total): a phase's bar appears on its first update.
Update = Callable[[str, int, "int | None"], None]
Unit = Literal["bytes", "items", "percent"]

#: Redraw at most this often: an import reports every line, and a redraw costs ~0.1 ms.
REDRAW_SECONDS = 0.1


@contextmanager
def progress_bar(unit: Unit = "percent", *, enabled: bool = True) -> Iterator[Update | None]:
    """Yield `update(phase, done, total)`, or None when there is no terminal to draw on (or
    `enabled` is False), so callers pass it straight on as an optional progress callback.

    The bar has no refresh thread: it is redrawn by updates. A thread would make forking unsafe
    (the signals export forks a worker) and costs a wake-up 10 times a second for nothing.
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    amount: ProgressColumn = {
        "bytes": DownloadColumn(),
        "items": MofNCompleteColumn(),
        "percent": TextColumn("{task.percentage:>3.0f}%"),
    }[unit]
    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        amount,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        auto_refresh=False,
    )
    tasks: dict[str, TaskID] = {}
    last_drawn = 0.0

    def update(phase: str, done: int, total: int | None) -> None:
        nonlocal last_drawn
        if phase not in tasks:
            tasks[phase] = prog.add_task(phase, total=total)
        prog.update(tasks[phase], completed=done, total=total)
        now = time.monotonic()
        if now - last_drawn >= REDRAW_SECONDS or (total is not None and done >= total):
            last_drawn = now
            prog.refresh()

    with prog:
        yield update


def counting(update: Update | None, phase: str, total: int | None) -> Callable[[int], None] | None:
    """For work that reports increments (e.g. bytes read): a callback that adds them up."""
    if update is None:
        return None
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        update(phase, done, total)

    return advance


__all__ = ["Update", "counting", "progress_bar"]
