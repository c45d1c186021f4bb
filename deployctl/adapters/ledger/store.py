"""The ledger's connection: opening (WAL, durable writes, the schema migrated), and every ``sqlite3`` error
turned into a ``LedgerError`` that names the fault. The row kinds (``releases``, ``events``,
``benchmarks``, ``restart_pairs``) build on ``Store``; ``deployctl.adapters.ledger.Ledger`` is all of them.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from deployctl.adapters.ledger.location import LEDGER_FILE, MEMORY, private_files
from deployctl.adapters.ledger.schema import SCHEMA, migrate
from deployctl.errors import EnvironmentUnfit

S = TypeVar("S", bound="Store")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def loads(text: str | None) -> Any:
    return json.loads(text) if text else None


def placeholders(values: Sequence[Any]) -> str:
    """``?,?,?`` for ``NOT IN (…)``; for none, ``-1`` (no row's id): ``NOT IN ()`` is not SQL, and
    ``NOT IN (NULL)`` matches nothing."""
    return ",".join("?" * len(values)) or "-1"


class LedgerError(EnvironmentUnfit):
    """The ledger cannot be opened, read or written: disk full, I/O error, a corrupt file, locked too long.

    Exit 5 on its own; a promote that meets it with a trial installed rolls back without the ledger and
    exits 12 (``deployctl.live.runner``)."""


def ledger_error(path: Path, doing: str, exc: Exception) -> LedgerError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        hint = "another process holds the ledger's write lock; find it with `fuser -v` on the ledger file"
    elif "full" in text or "No space" in text:
        hint = f"free space on the file system of {path.parent}"
    elif "not a database" in text or "malformed" in text:
        hint = f"the ledger file is damaged: move {path} aside (keep it for `sqlite3 .recover`) and retry"
    else:
        hint = f"check the disk under {path.parent} (dmesg shows I/O errors); then retry"
    return LedgerError(f"the ledger {path} {doing}: {exc}", hint=hint)


class Store:
    """The connection every part of the ledger writes and reads through (``_write``, ``_rows``, ``_row``)."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time, busy_timeout_s: float = 10.0) -> None:
        self.path = path
        self._clock = clock
        try:
            if path != MEMORY:
                private_files(path)
            self._db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # the intent must survive a power cut
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(SCHEMA)
            migrate(self._db)
        except PermissionError as exc:
            raise LedgerError(
                f"cannot open the ledger {path}: {exc}",
                hint="run as root, or point --state-dir / $DEPLOYCTL_STATE_DIR at a writable directory",
            ) from exc
        except (sqlite3.Error, OSError) as exc:
            raise ledger_error(path, "cannot be opened", exc) from exc

    def now(self) -> float:
        """The ledger's clock, the one its rows are stamped with (a stored baseline's age is read on it)."""
        return self._clock()

    @classmethod
    def in_memory(cls: type[S], **kwargs: Any) -> S:
        """A ledger that lives in memory and touches no file (the runner's tests)."""
        return cls(MEMORY, **kwargs)

    @classmethod
    def open(cls: type[S], state_dir: Path, **kwargs: Any) -> S:
        return cls(Path(state_dir) / LEDGER_FILE, **kwargs)

    def close(self) -> None:
        self._db.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> int:
        try:
            cur = self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise ledger_error(self.path, "refused a write", exc) from exc
        return int(cur.lastrowid or 0)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise ledger_error(self.path, "cannot be read", exc) from exc

    def _row(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Row | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None
