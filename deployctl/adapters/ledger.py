"""The ledger: every release and every step of every promote, in SQLite (WAL) on the host.

The only importer of ``sqlite3``. Lives in the state directory (``--state-dir``, ``$DEPLOYCTL_STATE_DIR``,
default ``/var/lib/deployctl``) next to the locks, because the evidence belongs where the GPUs are.

Tables:
- ``releases``: one row per promote / rollback / adoption of the installed unit: deployment, profile,
  unit text and hash, flags and environment (secret-looking values redacted), who, when, the machine's
  state (JSON, saved *before* each side effect), startup reports, verdict, reasons and result.
- ``events``: the intent of each action before it runs and its outcome after, in order.
- ``benchmarks``: raw benchmark results (samples included) with the unit hash, host and SGLang version
  they measured and, for a baseline, the whole fingerprint (``judge.reuse.BaselineFingerprint``: GPU
  model, driver, power limit, clocks policy too), so a stored baseline is reused only where it still holds.
  A reused baseline's row (the stored trials plus the confirmation trials) names the release it reused.

Secrets are never stored: every value written (unit text, flags, environment, machine state, startup
reports, events, benchmark results) first goes through ``deployctl.facts.secrets``. The state directory
is created 0700 and the ledger (with its WAL and shared-memory files) is 0600: its rows are the
operator's evidence, not the host's.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from deployctl.bench.result import BenchResult
from deployctl.errors import EnvironmentUnfit, InputError
from deployctl.facts.secrets import redact, redact_mapping, redact_text
from deployctl.judge.noise import AA_PROMOTE, ROLLBACK_VERIFICATION, WATCH_AFTER_RESTART
from deployctl.judge.reuse import BaselineFingerprint
from deployctl.promote.records import Event, Release, StoredBench, StoredRestartPair
from deployctl.startup.parser import StartupReport
from deployctl.units.stamp import read_stamp, unit_hash

DEFAULT_STATE_DIR = Path("/var/lib/deployctl")
LEDGER_FILE = "ledger.sqlite3"
_MEMORY = Path(":memory:")  # SQLite's name for a database in memory
_LEDGER_VERSION = 2  # PRAGMA user_version; Ledger._migrate brings older ledgers up to it
_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  deployment TEXT NOT NULL,
  kind TEXT NOT NULL,                -- promote | rollback | adopted | bisect
  profile TEXT,
  unit_name TEXT NOT NULL,
  unit_text TEXT NOT NULL,
  unit_hash TEXT NOT NULL,
  redacted INTEGER NOT NULL DEFAULT 0,
  flags_json TEXT NOT NULL DEFAULT '{}',
  env_json TEXT NOT NULL DEFAULT '{}',
  host TEXT,
  who TEXT NOT NULL,
  pid INTEGER,
  started_at REAL NOT NULL,
  finished_at REAL,
  phase TEXT,
  state_json TEXT,
  previous_id INTEGER,              -- the known-good release this one was tried against
  baseline_startup_json TEXT,
  startup_json TEXT,
  verdict TEXT,
  reasons_json TEXT NOT NULL DEFAULT '[]',
  result TEXT,                      -- machine.Result value once finished
  live INTEGER NOT NULL DEFAULT 0   -- 1 for the release whose unit is installed now
);
CREATE INDEX IF NOT EXISTS releases_deployment ON releases(deployment, id);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  release_id INTEGER NOT NULL REFERENCES releases(id),
  at REAL NOT NULL,
  phase TEXT NOT NULL,
  kind TEXT NOT NULL,               -- intent | outcome | note
  name TEXT NOT NULL,
  detail_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_release ON events(release_id, id);
CREATE TABLE IF NOT EXISTS benchmarks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  release_id INTEGER NOT NULL REFERENCES releases(id),
  role TEXT NOT NULL,               -- baseline | candidate | verify
  at REAL NOT NULL,
  unit_hash TEXT NOT NULL,
  host TEXT,
  sglang_version TEXT,
  bench_key TEXT NOT NULL,          -- what was measured (levels, tokens), for reuse
  result_json TEXT NOT NULL,
  fingerprint_json TEXT,            -- a baseline's BaselineFingerprint; NULL: not reusable (before version 2)
  reused_from INTEGER               -- a reused baseline: the release whose measurement it extends
);
CREATE INDEX IF NOT EXISTS benchmarks_reuse ON benchmarks(unit_hash, bench_key, at);
"""

# What measured a restart pair's second side, by its benchmark role (the canary's synthetic watch is ``watch``).
_PAIR_SOURCES = {"verify": ROLLBACK_VERIFICATION, "candidate": AA_PROMOTE, "watch": WATCH_AFTER_RESTART}


def who_from_env(env: Mapping[str, str], interactive: bool) -> str:
    """Who asked, as an operator reads it: the sudo user, the SSH user and address, or a scheduled job."""
    user = env.get("USER") or env.get("LOGNAME") or "root"
    if env.get("SUDO_USER"):
        return f"{env['SUDO_USER']} (sudo)"
    if env.get("SSH_CONNECTION"):
        return f"{user} (ssh from {env['SSH_CONNECTION'].split()[0]})"
    if not interactive and not env.get("TERM"):
        return f"{user} (cron or another non-interactive job)"
    return user


def resolve_state_dir(arg: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    if arg:
        return Path(arg)
    if env.get("DEPLOYCTL_STATE_DIR"):
        return Path(env["DEPLOYCTL_STATE_DIR"])
    return DEFAULT_STATE_DIR


def _private_files(path: Path) -> None:
    """The state directory 0700, the ledger and its WAL/SHM files 0600 (SQLite gives the WAL and SHM
    files the database file's mode); an older, looser state directory or ledger is tightened here.
    A directory deployctl does not own, or a shared sticky one such as /tmp, is left as it is."""
    state_dir = path.parent
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = state_dir.stat()
    if st.st_uid == os.geteuid() and not st.st_mode & stat.S_ISVTX and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(state_dir, stat.S_IMODE(st.st_mode) & 0o700)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        try:
            os.chmod(path.parent / name, 0o600)
        except FileNotFoundError:
            pass


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


class LedgerError(EnvironmentUnfit):
    """The ledger cannot be opened, read or written: disk full, I/O error, a corrupt file, locked too long.

    Exit 5 on its own; a promote that meets it with a trial installed rolls back without the ledger and
    exits 12 (``deployctl.live.runner``)."""


def _ledger_error(path: Path, doing: str, exc: Exception) -> LedgerError:
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


class Ledger:
    """One SQLite database per state directory; every write is its own committed transaction.

    Every ``sqlite3`` error becomes a ``LedgerError`` that names the fault (locked, full, damaged, I/O)."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time, busy_timeout_s: float = 10.0) -> None:
        self.path = path
        self._clock = clock
        try:
            if path != _MEMORY:
                _private_files(path)
            self._db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # the intent must survive a power cut
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            self._migrate()
        except PermissionError as exc:
            raise LedgerError(
                f"cannot open the ledger {path}: {exc}",
                hint="run as root, or point --state-dir / $DEPLOYCTL_STATE_DIR at a writable directory",
            ) from exc
        except (sqlite3.Error, OSError) as exc:
            raise _ledger_error(path, "cannot be opened", exc) from exc

    def _migrate(self) -> None:
        """Bring a ledger written by an older deployctl to the current rules; its rows stay valid."""
        if self._version() >= _LEDGER_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")  # one process migrates; the others then see the new version
        try:
            if self._version() < 1:
                self._rehash_units()
            if self._version() < 2:
                self._add_bench_columns()
            self._db.execute(f"PRAGMA user_version={_LEDGER_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _rehash_units(self) -> None:
        """Version 0 hashed the whole unit text; the one rule now is ``units.stamp.unit_hash`` (the stamp's)."""
        for row in self._db.execute("SELECT id, unit_text, unit_hash, redacted FROM releases").fetchall():
            stamp = read_stamp(row["unit_text"])
            # A redacted text no longer hashes as the original, but its stamp still names the original.
            new = stamp.sha256 if row["redacted"] and stamp else unit_hash(row["unit_text"])
            if new != row["unit_hash"]:
                self._db.execute("UPDATE releases SET unit_hash=? WHERE id=?", (new, row["id"]))
                self._db.execute("UPDATE benchmarks SET unit_hash=? WHERE unit_hash=?", (new, row["unit_hash"]))

    def _add_bench_columns(self) -> None:
        """Version 2 stores a baseline's fingerprint; older rows keep NULL, so they are never reused."""
        have = {row["name"] for row in self._db.execute("PRAGMA table_info(benchmarks)")}
        for column, kind in (("fingerprint_json", "TEXT"), ("reused_from", "INTEGER")):
            if column not in have:
                self._db.execute(f"ALTER TABLE benchmarks ADD COLUMN {column} {kind}")

    def now(self) -> float:
        """The ledger's clock, the one its rows are stamped with (a stored baseline's age is read on it)."""
        return self._clock()

    @classmethod
    def in_memory(cls, **kwargs: Any) -> "Ledger":
        """A ledger that lives in memory and touches no file (the runner's tests)."""
        return cls(_MEMORY, **kwargs)

    @classmethod
    def open(cls, state_dir: Path, **kwargs: Any) -> "Ledger":
        return cls(Path(state_dir) / LEDGER_FILE, **kwargs)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> int:
        try:
            cur = self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise _ledger_error(self.path, "refused a write", exc) from exc
        return int(cur.lastrowid or 0)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _ledger_error(self.path, "cannot be read", exc) from exc

    def _row(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Row | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    # --- releases ---------------------------------------------------------------------------------

    def begin_release(
        self,
        *,
        deployment: str,
        kind: str,
        unit_name: str,
        unit_text: str,
        unit_hash: str,
        who: str,
        profile: str | None = None,
        flags: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        host: str | None = None,
        pid: int | None = None,
        previous_id: int | None = None,
        finished: bool = False,
        live: bool = False,
        result: str | None = None,
    ) -> int:
        safe_text = redact_text(unit_text)
        now = self._clock()
        release_id = self._write(
            "INSERT INTO releases (deployment, kind, profile, unit_name, unit_text, unit_hash, redacted, flags_json,"
            " env_json, host, who, pid, started_at, finished_at, previous_id, result)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                deployment, kind, profile, unit_name, safe_text, unit_hash, int(safe_text != unit_text),
                _dumps(redact_mapping(flags or {})), _dumps(redact_mapping(env or {})), host, who, pid, now,
                now if finished else None, previous_id, result,
            ),
        )
        if live:
            self.mark_live(release_id)
        return release_id

    def save_state(self, release_id: int, state: Mapping[str, Any]) -> None:
        self._write(
            "UPDATE releases SET phase=?, state_json=? WHERE id=?", (state.get("phase"), _dumps(redact(state)), release_id)
        )

    def save_startup(self, release_id: int, role: str, report: StartupReport | None) -> None:
        column = {"baseline": "baseline_startup_json", "candidate": "startup_json"}[role]
        self._write(f"UPDATE releases SET {column}=? WHERE id=?",
                    (_dumps(redact(report.to_dict()) if report is not None else None), release_id))

    def finish(self, release_id: int, *, result: str, verdict: str | None, reasons: list[str] | tuple[str, ...]) -> None:
        self._write(
            "UPDATE releases SET finished_at=?, result=?, verdict=?, reasons_json=? WHERE id=?",
            (self._clock(), result, verdict, _dumps(redact(list(reasons))), release_id),
        )

    def mark_live(self, release_id: int) -> None:
        """``release_id``'s unit is the one installed now (kept, rolled back to, or adopted)."""
        deployment = self.get(release_id).deployment
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("UPDATE releases SET live=0 WHERE deployment=?", (deployment,))
                self._db.execute("UPDATE releases SET live=1 WHERE id=?", (release_id,))
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _ledger_error(self.path, "refused a write", exc) from exc

    def get(self, release_id: int) -> Release:
        row = self._row("SELECT * FROM releases WHERE id=?", (release_id,))
        if row is None:
            raise InputError(f"no release {release_id} in the ledger {self.path}", hint="see `deployctl history`")
        return _release(row)

    def history(self, deployment: str | None = None, limit: int = 20) -> list[Release]:
        if deployment:
            rows = self._rows(
                "SELECT * FROM releases WHERE deployment=? ORDER BY id DESC LIMIT ?", (deployment, limit)
            )
        else:
            rows = self._rows("SELECT * FROM releases ORDER BY id DESC LIMIT ?", (limit,))
        return [_release(r) for r in rows]

    def unfinished(self, deployment: str) -> list[Release]:
        rows = self._rows(
            "SELECT * FROM releases WHERE deployment=? AND finished_at IS NULL ORDER BY id", (deployment,)
        )
        return [_release(r) for r in rows]

    def live_release(self, deployment: str) -> Release | None:
        row = self._row(
            "SELECT * FROM releases WHERE deployment=? AND live=1 ORDER BY id DESC LIMIT 1", (deployment,))
        return _release(row) if row else None

    def release_with_hash(self, deployment: str, unit_hash: str) -> Release | None:
        row = self._row(
            "SELECT * FROM releases WHERE deployment=? AND unit_hash=? ORDER BY live DESC, id DESC LIMIT 1",
            (deployment, unit_hash))
        return _release(row) if row else None

    # --- events -----------------------------------------------------------------------------------

    def record(self, release_id: int, phase: str, kind: str, name: str, detail: Mapping[str, Any] | None = None) -> None:
        self._write(
            "INSERT INTO events (release_id, at, phase, kind, name, detail_json) VALUES (?,?,?,?,?,?)",
            (release_id, self._clock(), phase, kind, name, _dumps(redact(dict(detail or {})))),
        )

    def events(self, release_id: int) -> list[Event]:
        rows = self._rows("SELECT * FROM events WHERE release_id=? ORDER BY id", (release_id,))
        return [Event(r["at"], r["phase"], r["kind"], r["name"], _loads(r["detail_json"]) or {}) for r in rows]

    def stored_outputs(self, key: str, *, max_age_s: float, name: str = "outputs-reference"
                       ) -> tuple[int, dict[str, Any]] | None:
        """The newest reference outputs of the output gate stored under ``key`` within ``max_age_s``:
        (the release that measured them, their detail)."""
        row = self._row(
            "SELECT release_id, detail_json FROM events WHERE kind='evidence' AND name=?"
            " AND json_extract(detail_json, '$.scope')=? AND at>=? ORDER BY id DESC LIMIT 1",
            (name, key, self._clock() - max_age_s))
        return (row["release_id"], _loads(row["detail_json"])) if row else None

    # --- benchmarks -------------------------------------------------------------------------------

    def save_bench(
        self,
        release_id: int,
        role: str,
        result: BenchResult,
        *,
        unit_hash: str,
        bench_key: str,
        host: str | None = None,
        sglang_version: str | None = None,
        fingerprint: BaselineFingerprint | None = None,
        reused_from: int | None = None,
    ) -> int:
        """Stores one measurement; returns its row (``StoredBench.id``)."""
        return self._write(
            "INSERT INTO benchmarks (release_id, role, at, unit_hash, host, sglang_version, bench_key, result_json,"
            " fingerprint_json, reused_from) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (release_id, role, self._clock(), unit_hash, host, sglang_version, bench_key,
             _dumps(redact(result.to_dict())), _dumps(fingerprint.to_dict()) if fingerprint else None, reused_from),
        )

    def benches(self, release_id: int) -> list[StoredBench]:
        rows = self._rows("SELECT * FROM benchmarks WHERE release_id=? ORDER BY id", (release_id,))
        return [_bench(r) for r in rows]

    def fresh_baseline(
        self, *, unit_hash: str, bench_key: str, host: str | None, sglang_version: str | None, max_age_s: float
    ) -> StoredBench | None:
        """The newest baseline measurement of exactly this unit, host, SGLang version and sweep, if fresh."""
        row = self._row(
            "SELECT * FROM benchmarks WHERE role='baseline' AND unit_hash=? AND bench_key=? AND host IS ?"
            " AND sglang_version IS ? AND at>=? ORDER BY at DESC LIMIT 1",
            (unit_hash, bench_key, host, sglang_version, self._clock() - max_age_s))
        return _bench(row) if row else None

    def stored_baseline(self, *, unit_hash: str, bench_key: str, host: str | None) -> StoredBench | None:
        """The newest measured (not itself reused) baseline of this unit and sweep on this host, whatever its
        fingerprint and age: ``judge.reuse.reuse_decision`` says whether it still holds, and why not."""
        row = self._row(
            "SELECT * FROM benchmarks WHERE role='baseline' AND unit_hash=? AND bench_key=? AND host IS ?"
            " AND reused_from IS NULL ORDER BY at DESC LIMIT 1", (unit_hash, bench_key, host))
        return _bench(row) if row else None

    def baseline_before(self, *, unit_hash: str, bench_key: str, before: float) -> StoredBench | None:
        """The newest baseline measurement of this unit and sweep taken before ``before``: the one a release
        that reused a fresh baseline was judged against (reuse saves no row of its own)."""
        row = self._row(
            "SELECT * FROM benchmarks WHERE role='baseline' AND unit_hash=? AND bench_key=? AND at<=?"
            " ORDER BY at DESC LIMIT 1",
            (unit_hash, bench_key, before))
        return _bench(row) if row else None

    def aa_benches(
        self, *, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int], limit: int = 20
    ) -> list[StoredBench]:
        """The newest measurements of unchanged live releases (baselines, verifications, canary watches) of
        this deployment on this host with this sweep, oldest first: the A/A samples ``deployctl.judge.noise``
        learns from.
        ``exclude_releases`` (the release being judged, the one whose baseline it reuses) are left out, and
        so are reused baselines (their trials are another row's), so no trial is counted twice."""
        # NOT IN () is not SQL, and NOT IN (NULL) matches nothing: -1 is no release's id.
        marks = ",".join("?" * len(exclude_releases)) or "-1"
        rows = self._rows(
            "SELECT b.* FROM benchmarks b JOIN releases r ON r.id = b.release_id"
            " WHERE b.role IN ('baseline', 'verify', 'watch') AND r.deployment=? AND b.host IS ? AND b.bench_key=?"
            f" AND b.reused_from IS NULL AND b.release_id NOT IN ({marks}) ORDER BY b.at DESC LIMIT ?",
            (deployment, host, bench_key, *exclude_releases, limit))
        return [_bench(r) for r in reversed(rows)]

    def restart_pairs(
        self, *, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int], limit: int = 24
    ) -> list[StoredRestartPair]:
        """The newest measurements of one unit on two server starts, oldest first (by the second's time): per
        release, its fresh baseline and then, after a restart, the same unit again — the rollback's
        verification, or an A/A promote's candidate (its unit hash the baseline's; the latest of its merged
        rounds) — and the canary's ``_watch_pairs``. What ``deployctl.judge.noise.learn_restart`` learns the
        between-restart σ from."""
        marks = ",".join("?" * len(exclude_releases)) or "-1"
        rows = self._rows(
            "SELECT b.release_id AS rid, b.id AS before_id, (SELECT a.id FROM benchmarks a WHERE a.release_id = b.release_id"
            "   AND a.host IS b.host AND a.unit_hash = b.unit_hash AND (a.role = 'verify'"
            "   OR (a.role = 'candidate' AND a.bench_key = b.bench_key)) ORDER BY a.at DESC, a.id DESC LIMIT 1) AS after_id"
            " FROM benchmarks b JOIN releases r ON r.id = b.release_id"
            " WHERE b.role = 'baseline' AND r.deployment=? AND b.host IS ? AND b.bench_key=? AND b.reused_from IS NULL"
            f" AND b.release_id NOT IN ({marks}) ORDER BY b.at DESC LIMIT ?",
            (deployment, host, bench_key, *exclude_releases, 4 * limit))
        ids = [(r["before_id"], r["after_id"]) for r in rows if r["after_id"] is not None][:limit]
        ids += self._watch_pairs(deployment, host, bench_key, exclude_releases, limit)
        by_id = {r["id"]: _bench(r) for r in self._rows(
            f"SELECT * FROM benchmarks WHERE id IN ({','.join('?' * (2 * len(ids))) or '-1'})",
            tuple(i for pair in ids for i in pair))}
        pairs = [StoredRestartPair(by_id[b], by_id[a], _PAIR_SOURCES[by_id[a].role]) for b, a in ids]
        return sorted(pairs, key=lambda p: (p.after.at, p.after.id or 0))[-limit:]

    def _watch_pairs(self, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int],
                     limit: int) -> list[tuple[int, int]]:
        """(reference row, watch row) of the first synthetic canary watch on each start whose reference was
        measured on an earlier start of the same unit and sweep (its note's ``restart_between``,
        ``promote.canary.WatchStart``). Only the first: the later watches on that start measure the same
        restart offset again, and would count one offset as many."""
        marks = ",".join("?" * len(exclude_releases)) or "-1"
        rows = self._rows(
            "SELECT MIN(e.id), b.id AS before_id, a.id AS after_id FROM events e"
            " JOIN releases r ON r.id = e.release_id"
            " JOIN benchmarks a ON a.id = json_extract(e.detail_json, '$.bench_id')"
            " JOIN benchmarks b ON b.id = json_extract(e.detail_json, '$.reference_id')"
            " WHERE e.kind = 'note' AND e.name = 'watch' AND json_extract(e.detail_json, '$.restart_between') = 1"
            " AND r.deployment=? AND a.role = 'watch' AND a.host IS ? AND a.bench_key=? AND b.host IS a.host"
            f" AND b.bench_key = a.bench_key AND b.unit_hash = a.unit_hash AND a.release_id NOT IN ({marks})"
            f" AND b.release_id NOT IN ({marks})"
            " GROUP BY e.release_id, json_extract(e.detail_json, '$.start.invocation_id') ORDER BY MIN(e.id) DESC LIMIT ?",
            (deployment, host, bench_key, *exclude_releases, *exclude_releases, limit))
        return [(r["before_id"], r["after_id"]) for r in rows]


def _release(row: sqlite3.Row) -> Release:
    return Release(
        id=row["id"], deployment=row["deployment"], kind=row["kind"], profile=row["profile"],
        unit_name=row["unit_name"], unit_text=row["unit_text"], unit_hash=row["unit_hash"],
        redacted=bool(row["redacted"]), flags=_loads(row["flags_json"]) or {}, env=_loads(row["env_json"]) or {},
        host=row["host"], who=row["who"], pid=row["pid"], started_at=row["started_at"],
        finished_at=row["finished_at"], phase=row["phase"], state=_loads(row["state_json"]),
        previous_id=row["previous_id"], baseline_startup=_loads(row["baseline_startup_json"]),
        startup=_loads(row["startup_json"]), verdict=row["verdict"], reasons=_loads(row["reasons_json"]) or [],
        result=row["result"], live=bool(row["live"]),
    )


def _bench(row: sqlite3.Row) -> StoredBench:
    return StoredBench(
        release_id=row["release_id"], role=row["role"], at=row["at"], unit_hash=row["unit_hash"], host=row["host"],
        sglang_version=row["sglang_version"], bench_key=row["bench_key"], result=_loads(row["result_json"]),
        fingerprint=BaselineFingerprint.from_dict(fp) if (fp := _loads(row["fingerprint_json"])) else None,
        reused_from=row["reused_from"], id=row["id"],
    )


def live_release(ledger: Ledger, deployment: str) -> Release | None:
    """The release whose unit is installed now (kept, rolled back to, or adopted), for ``deployctl status``."""
    return ledger.live_release(deployment)
