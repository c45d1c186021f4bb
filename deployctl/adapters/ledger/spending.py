"""The ledger's record of what each promote spent: its trials (their own wall time) and its server starts
(restart to ready, a ``server-start`` note per start), what ``deployctl.decisions.cost`` prices the next one from."""

from __future__ import annotations

from deployctl.adapters.ledger.store import Store, loads
from deployctl.decisions.cost import PastPromote


SERVER_START = "server-start"  # the note the runner writes once a restarted server is ready (or is not): wait_s


class Spending(Store):
    def spent(self, release_id: int) -> PastPromote:
        """What ``release_id`` spent: the trials it ran itself (the baseline's apart) and its server starts. A role's rows accumulate
        its rounds (each row the merged sweep so far), so a trial is counted once; a reused baseline's stored
        trials ran before this release, for another one, and are not counted."""
        began = self._row("SELECT started_at FROM releases WHERE id=?", (release_id,))
        trials: dict[tuple[object, ...], float] = {}
        reused = False
        for row in self._rows("SELECT role, reused_from, result_json FROM benchmarks WHERE release_id=?", (release_id,)):
            reused = reused or (row["role"] == "baseline" and row["reused_from"] is not None)
            for level in loads(row["result_json"])["levels"]:
                for t in level["trials"]:
                    if row["reused_from"] is None or began is None or t["started_at"] >= began["started_at"]:
                        trials[(row["role"], t["concurrency"], t["trial"], t["started_at"], t["wall_s"])] = t["wall_s"]
        starts = [loads(row["detail_json"])["wait_s"] for row in self._rows(
            "SELECT detail_json FROM events WHERE release_id=? AND kind='note' AND name=?", (release_id, SERVER_START))]
        return PastPromote(trials=len(trials), trial_s=sum(trials.values()), starts=len(starts), start_s=sum(starts),
                           baseline_trials=sum(key[0] == "baseline" for key in trials),
                           baseline_s=sum(s for key, s in trials.items() if key[0] == "baseline"), reused=reused)

    def past_promotes(self, *, deployment: str, host: str | None, bench_key: str, limit: int = 20) -> list[PastPromote]:
        """What the newest finished promotes of this deployment on this host, on this sweep, spent; only those
        whose server starts were recorded (a ledger from before deployctl timed them prices from defaults)."""
        rows = self._rows(
            "SELECT r.id FROM releases r WHERE r.deployment=? AND r.host IS ? AND r.kind='promote'"
            " AND r.finished_at IS NOT NULL"
            " AND EXISTS (SELECT 1 FROM benchmarks b WHERE b.release_id=r.id AND b.bench_key=?)"
            " AND EXISTS (SELECT 1 FROM events e WHERE e.release_id=r.id AND e.name=?)"
            " ORDER BY r.id DESC LIMIT ?", (deployment, host, bench_key, SERVER_START, limit))
        return [self.spent(row["id"]) for row in rows]
