"""What a promote's steps share: the ledger, the adapters, the plan, the release, the evidence so far,
and how a step starts the server, sends benchmark traffic and reads the host's learned noise from the
ledger. ``deployctl.live.runner.Runner`` is built on it, with its step groups (``baseline_steps``,
``verify_steps``)."""

from __future__ import annotations

import asyncio
from typing import Mapping, Sequence

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.ledger.spending import SERVER_START
from deployctl.bench.result import BenchResult
from deployctl.judge.noise import learn_history, learn_restart, restart_pair
from deployctl.judge.stats import NoiseEstimate, RestartNoise
from deployctl.live.protocols import Adapters
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import Evidence, Plan, StartOutcome, bench_key


class StepContext:
    """One promote's state and the helpers its steps use; the plan, the lock and the release row come from
    the verb."""

    def __init__(
        self,
        ledger: Ledger,
        adapters: Adapters,
        plan: Plan,
        release_id: int,
        *,
        previous_release_id: int | None = None,
        abort: asyncio.Event | None = None,
        baseline_max_age_s: float = 3600.0,
        evidence: Evidence | None = None,
        crash_after: m.Phase | None = None,
    ) -> None:
        self.ledger = ledger
        self.a = adapters
        self.plan = plan
        self.release_id = release_id
        self.previous_release_id = previous_release_id
        self.abort = abort or asyncio.Event()
        self.abort_reason = "aborted by the operator"
        self.baseline_max_age_s = baseline_max_age_s
        self.evidence = evidence or Evidence()
        self._last: m.State | None = None  # the state whose step is under way, for a rollback without the ledger
        # Fault injection for the crash tests (``DEPLOYCTL_CRASH_AFTER``): SIGKILL itself once this phase's
        # action is done and before its outcome is recorded, the worst moment for recovery.
        self.crash_after = crash_after

    def _outside(self, key: str, seconds: float) -> None:
        self.evidence.add_time("traffic", seconds)
        self.evidence.add_time(key, seconds)

    async def _start(self, *, fresh: bool, record: bool = True) -> StartOutcome:
        """Restart the unit and wait for it; ``record=False``: the ledger has failed, do not write to it."""
        timeout = self.plan.policy.gates.startup_timeout_s
        outcome = await self.a.units.restart_and_wait(self.plan.unit_name, timeout, fresh_start=fresh)
        self.evidence.add_time("startup_wait", outcome.wait_s)
        if not record:
            return outcome
        # What the next promote's estimate prices a server start at (``decisions.cost``).
        phase = self._last.phase.value if self._last is not None else "start"
        self.ledger.record(self.release_id, phase, "note", SERVER_START,
                           {"wait_s": outcome.wait_s, "ready": outcome.ready})
        return outcome

    def _learned_noise(self) -> dict[int, NoiseEstimate]:
        """The host's trial-to-trial σ per level, from the ledger's earlier measurements of unchanged releases."""
        # The stored baseline under confirmation (then reused) is pooled by the check itself: not twice.
        stored = self.evidence.stored_baseline
        exclude = (self.release_id,) + ((stored.release_id,) if stored is not None else ())
        stored = self.ledger.aa_benches(deployment=self.plan.deployment, host=self.plan.host,
                                        bench_key=bench_key(self.plan.policy), exclude_releases=exclude)
        return learn_history((b.bench for b in stored), self.plan.policy.judge.metric)

    def _learned_restart(self, learned: Mapping[int, NoiseEstimate]) -> RestartNoise:
        """The host's between-restart σ, from the ledger's measurements of one unit on two starts (the
        default until there are any): the baseline and the candidate run on two server starts."""
        stored = self.evidence.stored_baseline
        exclude = (self.release_id,) + ((stored.release_id,) if stored is not None else ())
        rows = self.ledger.restart_pairs(deployment=self.plan.deployment, host=self.plan.host,
                                         bench_key=bench_key(self.plan.policy), exclude_releases=exclude)
        metric = self.plan.policy.judge.metric
        pairs = [pair for row in rows
                 if (pair := restart_pair(row.before.bench, row.after.bench, metric, learned, row.source))]
        return learn_restart(pairs)

    async def _traffic(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int,
                       role: str) -> BenchResult:
        t0 = self.a.clock()
        try:
            return await self.a.bench.sweep(url, levels, trials)
        finally:
            took = self.a.clock() - t0
            self.evidence.add_time("traffic", took)
            self.evidence.add_time(f"bench:{role}", took)


def unusable(result: BenchResult) -> str | None:
    """Why a sweep cannot serve as evidence at all (every request failed), else None."""
    ok = sum(t.requests_ok for lv in result.levels for t in lv.trials)
    failed = sum(t.requests_failed for lv in result.levels for t in lv.trials)
    if ok == 0:
        errors: dict[str, int] = {}
        for lv in result.levels:
            for t in lv.trials:
                for k, v in t.failures.items():
                    errors[k] = errors.get(k, 0) + v
        top = ", ".join(f"{k} ×{v}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1])[:3])
        return f"all {failed} requests failed" + (f": {top}" if top else "")
    return None
