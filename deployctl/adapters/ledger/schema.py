"""The ledger's tables (``SCHEMA``) and the migrations that bring an older ledger up to ``LEDGER_VERSION``.

Migrations are numbered steps keyed on ``PRAGMA user_version``, each idempotent: a ledger any older
deployctl wrote opens, and its rows stay valid.
"""

from __future__ import annotations

import sqlite3

from deployctl.units.stamp import read_stamp, unit_hash

LEDGER_VERSION = 2  # PRAGMA user_version; ``migrate`` brings older ledgers up to it
SCHEMA = """
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


def migrate(db: sqlite3.Connection) -> None:
    """Bring a ledger written by an older deployctl to the current rules; its rows stay valid."""
    if _version(db) >= LEDGER_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")  # one process migrates; the others then see the new version
    try:
        if _version(db) < 1:
            _rehash_units(db)
        if _version(db) < 2:
            _add_bench_columns(db)
        db.execute(f"PRAGMA user_version={LEDGER_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _rehash_units(db: sqlite3.Connection) -> None:
    """Version 0 hashed the whole unit text; the one rule now is ``units.stamp.unit_hash`` (the stamp's)."""
    for row in db.execute("SELECT id, unit_text, unit_hash, redacted FROM releases").fetchall():
        stamp = read_stamp(row["unit_text"])
        # A redacted text no longer hashes as the original, but its stamp still names the original.
        new = stamp.sha256 if row["redacted"] and stamp else unit_hash(row["unit_text"])
        if new != row["unit_hash"]:
            db.execute("UPDATE releases SET unit_hash=? WHERE id=?", (new, row["id"]))
            db.execute("UPDATE benchmarks SET unit_hash=? WHERE unit_hash=?", (new, row["unit_hash"]))


def _add_bench_columns(db: sqlite3.Connection) -> None:
    """Version 2 stores a baseline's fingerprint; older rows keep NULL, so they are never reused."""
    have = {row["name"] for row in db.execute("PRAGMA table_info(benchmarks)")}
    for column, kind in (("fingerprint_json", "TEXT"), ("reused_from", "INTEGER")):
        if column not in have:
            db.execute(f"ALTER TABLE benchmarks ADD COLUMN {column} {kind}")
