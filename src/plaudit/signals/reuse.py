"""Re-exporting into the same directory: unchanged hours are copied from the previous files.

An export from the log with default options, whose window holds every event, writes its rows
hour by hour (`signals_hours`, which every append that changes an hour's rows counts up). It
records, per hour, that count and where the hour's lines sit in each split's file
(`signals_exports`, with each file's device, inode, size and modification time). The next
such export into the same directory copies every hour whose count has not moved from those
files (`os.copy_file_range`: in the kernel, no Python per row) and builds only the others
from the projection, so re-exporting after 1% more events reads 1% of the rows.

The previous files are only used when they are exactly the ones that export wrote (same
device, inode, size and modification time, and the same split percentages); anything else
(another export into the directory, a file edited, moved or deleted, a rebuilt projection)
makes this export write every row, as it would have without a previous one.

An export into a new directory can name an earlier export's directory to copy from
(`reuse_from`, `plaudit signal export --reuse-from DIR`): the same rules hold for that
directory's files, which are only ever opened for reading, so DIR is left exactly as it was.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import PlauditError

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.store.backend import Tx

#: A file's identity as the index records it: device, inode, size, modification time (ns).
Identity = list[int]


def _identity(st: os.stat_result) -> Identity:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


class Previous:
    """The previous export's files (open) and, per hour, its version and (offset, length,
    rows) in each split's file."""

    def __init__(self, fds: list[int], hours: dict[int, tuple[int, list[Any]]]) -> None:
        self.fds = fds
        self.hours = hours

    @classmethod
    def load(cls, tx: Tx, output_dir: str, splits: str, paths: Sequence[str]) -> Previous | None:
        row = tx.fetchone(
            "SELECT splits, files, hours FROM signals_exports WHERE output_dir = ?", (output_dir,)
        )
        if row is None or row[0] != splits:
            return None
        files = msgspec.json.decode(row[1])
        fds: list[int] = []
        try:
            for path, ident in zip(paths, files, strict=True):
                fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                if _identity(os.fstat(fds[-1])) != ident:
                    raise FileNotFoundError(path)  # not the file that export wrote
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            return None
        hours = {e[0]: (e[1], e[2:]) for e in msgspec.json.decode(bytes(row[2]))}
        return cls(fds, hours)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class HourWriter:
    """Writes the rows hour by hour into one writer per split (train, val, test), copying the
    hours the previous export holds unchanged, and records the new index."""

    def __init__(
        self,
        writers: Sequence[Any],
        paths: Sequence[str],
        output_dir: str,
        splits: str,
        reuse_from: str | None = None,
    ) -> None:
        self.writers = list(writers)  # `formats._Lines`: `write_pieces` and `copy_from`
        self.paths = list(paths)  # where the files will be once the export is in place
        self.output_dir = output_dir
        #: The directory whose export's files are copied from (by default the output's own).
        self.reuse_from = output_dir if reuse_from is None else reuse_from
        self.splits = splits
        self.previous: Previous | None = None
        self.pos = [0, 0, 0]  # bytes each file will hold so far (pending copies included)
        self.entries: list[list[int]] = []  # [hour, version, off, len, rows] x 3 splits
        self._pending: list[list[int] | None] = [None, None, None]  # [src offset, length, rows]
        self._hour: list[int] | None = None  # [hour, version, start of each file]
        self._rows = [0, 0, 0]  # rows of the hour being built, per split
        self.copied_hours = 0
        self.built_hours = 0
        self.opened = False  # whether the rows were written through this
        self._placed: list[Identity] | None = None  # the files' identities once in place

    def open(self, tx: Tx) -> None:
        names = [os.path.basename(path) for path in self.paths]
        sources = [os.path.join(self.reuse_from, name) for name in names]
        self.previous = Previous.load(tx, self.reuse_from, self.splits, sources)
        self.opened = True

    def reusable(self, hour: int, version: int) -> bool:
        prev = self.previous
        return prev is not None and prev.hours.get(hour, (None,))[0] == version

    def copy(self, hour: int, version: int) -> None:
        """The hour's lines, as the previous export wrote them."""
        assert self.previous is not None
        self.end()
        ranges = self.previous.hours[hour][1]
        entry = [hour, version]
        for split in range(3):
            offset, length, rows = ranges[3 * split : 3 * split + 3]
            entry += (self.pos[split], length, rows)
            if length:
                run = self._pending[split]
                if run is not None and run[0] + run[1] == offset:
                    run[1] += length
                    run[2] += rows
                else:
                    self._copy(split)
                    self._pending[split] = [offset, length, rows]
                self.pos[split] += length
        self.entries.append(entry)
        self.copied_hours += 1

    def start(self, hour: int, version: int | None) -> None:
        """The next lines (`add`) are the hour's, built from the projection."""
        self.end()
        self._hour = [hour, -1 if version is None else version, *self.pos]
        self.built_hours += 1

    def add(self, split: int, pieces: list[bytes], rows: int) -> None:
        self._copy(split)
        size = sum(map(len, pieces))
        self.writers[split].write_pieces(pieces, rows)
        self.pos[split] += size
        self._rows[split] += rows

    def end(self) -> None:
        if self._hour is None:
            return
        hour, version, *starts = self._hour
        entry = [hour, version]
        for split in range(3):
            entry += (starts[split], self.pos[split] - starts[split], self._rows[split])
        if version >= 0:  # an hour with no version is never reused
            self.entries.append(entry)
        self._hour = None
        self._rows = [0, 0, 0]

    def finish(self) -> None:
        self.end()
        for split in range(3):
            self._copy(split)
        self.close()

    def close(self) -> None:
        if self.previous is not None:
            self.previous.close()

    def _copy(self, split: int) -> None:
        run = self._pending[split]
        if run is None:
            return
        self._pending[split] = None
        assert self.previous is not None
        self.writers[split].copy_from(self.previous.fds[split], *run)

    def placed(self) -> None:
        """The files are in place: note which they are (called under the directory's lock, so
        an export that replaces them right after cannot be mistaken for this one)."""
        try:
            self._placed = [_identity(os.stat(path)) for path in self.paths]
        except OSError:
            self._placed = None

    def save(self, plaudit: Plaudit) -> None:
        """Record what the files this export put in place hold, for the next export (best
        effort: a store this process cannot write to simply exports every row next time)."""
        files = self._placed
        if files is None:
            return
        try:
            with plaudit.log.writer() as w:
                w.tx.execute(
                    "INSERT INTO signals_exports (output_dir, splits, files, hours)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (output_dir) DO UPDATE SET"
                    " splits = excluded.splits, files = excluded.files, hours = excluded.hours",
                    (
                        self.output_dir,
                        self.splits,
                        msgspec.json.encode(files).decode(),
                        w.tx.blob(msgspec.json.encode(self.entries)),
                    ),
                )
        except (OSError, PlauditError):
            pass
