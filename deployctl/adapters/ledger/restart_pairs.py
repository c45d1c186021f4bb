"""The ledger's restart pairs: one unit measured on two server starts, what the judge learns its
between-restart σ from (``deployctl.judge.noise.learn_restart``, docs/judge.md "Learning the restart offset")."""

from __future__ import annotations

from typing import Sequence

from deployctl.adapters.ledger.benchmarks import bench_row
from deployctl.adapters.ledger.store import Store, placeholders
from deployctl.decisions.evidence import SECOND_START_ROLE
from deployctl.decisions.records import StoredRestartPair


class RestartPairs(Store):
    def restart_pairs(
        self, *, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int], limit: int = 24
    ) -> list[StoredRestartPair]:
        """The newest measurements of one unit on two server starts, oldest first (by the second's time): per
        release, its fresh baseline and then, after a restart, the same unit again — the rollback's
        verification, or an A/A promote's candidate (its unit hash the baseline's; the latest of its merged
        rounds) — the candidate's two starts (``_candidate_pairs``) and the canary's ``_watch_pairs``. What ``deployctl.judge.noise.learn_restart`` learns the
        between-restart σ from.

        At most one pair per role per release, also where a verdict decided over starts measured three starts a
        side (``judge.starts.starts_a_side``): the baseline's is B1 with the latest verification (B3 where it was
        measured, else B2), the candidate's C1 with its first restart (C2). More pairs of one release would share
        a start, and count its offset twice as if independent."""
        # Here, not at the top: only the judge reads restart pairs, and the ledger opens for every verb without
        # the judge's noise planning (scipy; benchmarks/cli_startup.py).
        from deployctl.judge.noise import AA_PROMOTE, CANDIDATE_RESTARTED, ROLLBACK_VERIFICATION, WATCH_AFTER_RESTART

        # What measured a pair's second side, by its benchmark role (the canary's synthetic watch is ``watch``).
        sources = {"verify": ROLLBACK_VERIFICATION, "candidate": AA_PROMOTE, "watch": WATCH_AFTER_RESTART,
                   SECOND_START_ROLE: CANDIDATE_RESTARTED}
        marks = placeholders(exclude_releases)
        rows = self._rows(
            "SELECT b.release_id AS rid, b.id AS before_id, (SELECT a.id FROM benchmarks a WHERE a.release_id = b.release_id"
            "   AND a.host IS b.host AND a.unit_hash = b.unit_hash AND (a.role = 'verify'"
            "   OR (a.role = 'candidate' AND a.bench_key = b.bench_key)) ORDER BY a.at DESC, a.id DESC LIMIT 1) AS after_id"
            " FROM benchmarks b JOIN releases r ON r.id = b.release_id"
            " WHERE b.role = 'baseline' AND r.deployment=? AND b.host IS ? AND b.bench_key=? AND b.reused_from IS NULL"
            f" AND b.release_id NOT IN ({marks}) ORDER BY b.at DESC LIMIT ?",
            (deployment, host, bench_key, *exclude_releases, 4 * limit))
        ids = [(r["before_id"], r["after_id"]) for r in rows if r["after_id"] is not None][:limit]
        ids += self._candidate_pairs(deployment, host, bench_key, exclude_releases, limit)
        ids += self._watch_pairs(deployment, host, bench_key, exclude_releases, limit)
        wanted = tuple(i for pair in ids for i in pair)
        by_id = {r["id"]: bench_row(r) for r in self._rows(
            f"SELECT * FROM benchmarks WHERE id IN ({placeholders(wanted)})", wanted)}
        pairs = [StoredRestartPair(by_id[b], by_id[a], sources[by_id[a].role]) for b, a in ids]
        return sorted(pairs, key=lambda p: (p.after.at, p.after.id or 0))[-limit:]

    def _candidate_pairs(self, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int],
                         limit: int) -> list[tuple[int, int]]:
        """(first start, second start) of each candidate restarted in place to decide over server starts: its
        sweep on the first start (the latest of its merged rounds before the restart) and the plan measured
        on the second (role ``candidate-restart``; its first such row: a third start, C3, makes no second pair),
        one unit, the same host."""
        marks = placeholders(exclude_releases)
        rows = self._rows(
            "SELECT (SELECT b.id FROM benchmarks b WHERE b.release_id = a.release_id AND b.role = 'candidate'"
            "   AND b.host IS a.host AND b.unit_hash = a.unit_hash AND b.bench_key = ? AND b.at <= a.at"
            "   ORDER BY b.at DESC, b.id DESC LIMIT 1) AS before_id, a.id AS after_id"
            " FROM benchmarks a JOIN releases r ON r.id = a.release_id"
            " WHERE a.role = ? AND r.deployment=? AND a.host IS ?"
            " AND a.id = (SELECT MIN(x.id) FROM benchmarks x WHERE x.release_id = a.release_id AND x.role = a.role)"
            f" AND a.release_id NOT IN ({marks}) ORDER BY a.at DESC LIMIT ?",
            (bench_key, SECOND_START_ROLE, deployment, host, *exclude_releases, 4 * limit))
        return [(r["before_id"], r["after_id"]) for r in rows if r["before_id"] is not None][:limit]

    def _watch_pairs(self, deployment: str, host: str | None, bench_key: str, exclude_releases: Sequence[int],
                     limit: int) -> list[tuple[int, int]]:
        """(reference row, watch row) of the first synthetic canary watch on each start whose reference was
        measured on an earlier start of the same unit and sweep (its note's ``restart_between``,
        ``decisions.canary.WatchStart``). Only the first: the later watches on that start measure the same
        restart offset again, and would count one offset as many."""
        marks = placeholders(exclude_releases)
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
