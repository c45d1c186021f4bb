"""The ledger's ``benchmarks``: raw results (samples included) with the unit hash, host, SGLang version and
sweep they measured — for a baseline its whole fingerprint, so it is reused only where it still holds — and
the A/A measurements the judge learns its noise from."""

from __future__ import annotations

import sqlite3
from typing import Sequence

from deployctl.adapters.ledger.store import Store, dumps, loads, placeholders
from deployctl.bench.result import BenchResult
from deployctl.facts.secrets import redact
from deployctl.judge.reuse import BaselineFingerprint
from deployctl.decisions.records import StoredBench


class Benchmarks(Store):
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
             dumps(redact(result.to_dict())), dumps(fingerprint.to_dict()) if fingerprint else None, reused_from),
        )

    def benches(self, release_id: int) -> list[StoredBench]:
        rows = self._rows("SELECT * FROM benchmarks WHERE release_id=? ORDER BY id", (release_id,))
        return [bench_row(r) for r in rows]

    def fresh_baseline(
        self, *, unit_hash: str, bench_key: str, host: str | None, sglang_version: str | None, max_age_s: float
    ) -> StoredBench | None:
        """The newest baseline measurement of exactly this unit, host, SGLang version and sweep, if fresh."""
        row = self._row(
            "SELECT * FROM benchmarks WHERE role='baseline' AND unit_hash=? AND bench_key=? AND host IS ?"
            " AND sglang_version IS ? AND at>=? ORDER BY at DESC LIMIT 1",
            (unit_hash, bench_key, host, sglang_version, self._clock() - max_age_s))
        return bench_row(row) if row else None

    def stored_baseline(self, *, unit_hash: str, bench_key: str, host: str | None) -> StoredBench | None:
        """The newest measured (not itself reused) baseline of this unit and sweep on this host, whatever its
        fingerprint and age: ``judge.reuse.reuse_decision`` says whether it still holds, and why not."""
        row = self._row(
            "SELECT * FROM benchmarks WHERE role='baseline' AND unit_hash=? AND bench_key=? AND host IS ?"
            " AND reused_from IS NULL ORDER BY at DESC LIMIT 1", (unit_hash, bench_key, host))
        return bench_row(row) if row else None

    def baseline_before(self, *, unit_hash: str, bench_key: str, before: float) -> StoredBench | None:
        """The newest baseline measurement of this unit and sweep taken before ``before``: the one a release
        that reused a fresh baseline was judged against (reuse saves no row of its own)."""
        row = self._row(
            "SELECT * FROM benchmarks WHERE role='baseline' AND unit_hash=? AND bench_key=? AND at<=?"
            " ORDER BY at DESC LIMIT 1",
            (unit_hash, bench_key, before))
        return bench_row(row) if row else None

    def aa_benches(
        self, *, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int], limit: int = 20
    ) -> list[StoredBench]:
        """The newest measurements of unchanged live releases (baselines, verifications, canary watches) of
        this deployment on this host with this sweep, oldest first: the A/A samples ``deployctl.judge.noise``
        learns from.
        ``exclude_releases`` (the release being judged, the one whose baseline it reuses) are left out, and
        so are reused baselines (their trials are another row's), so no trial is counted twice."""
        marks = placeholders(exclude_releases)
        rows = self._rows(
            "SELECT b.* FROM benchmarks b JOIN releases r ON r.id = b.release_id"
            " WHERE b.role IN ('baseline', 'verify', 'watch') AND r.deployment=? AND b.host IS ? AND b.bench_key=?"
            f" AND b.reused_from IS NULL AND b.release_id NOT IN ({marks}) ORDER BY b.at DESC LIMIT ?",
            (deployment, host, bench_key, *exclude_releases, limit))
        return [bench_row(r) for r in reversed(rows)]


def bench_row(row: sqlite3.Row) -> StoredBench:
    return StoredBench(
        release_id=row["release_id"], role=row["role"], at=row["at"], unit_hash=row["unit_hash"], host=row["host"],
        sglang_version=row["sglang_version"], bench_key=row["bench_key"], result=loads(row["result_json"]),
        fingerprint=BaselineFingerprint.from_dict(fp) if (fp := loads(row["fingerprint_json"])) else None,
        reused_from=row["reused_from"], id=row["id"],
    )
