"""The promote flow, in one place: under the deployment's lock, recover what a dead controller left, adopt the
installed unit, record the release, then run the state machine (``deployctl.decisions.machine`` decides keep
or rollback; ``deployctl.live.runner`` acts) until it says it is over. SIGTERM/SIGINT and ``deployctl abort``
make it roll back. The ``promote`` verb parses and prints; canary and bisect run their trials through here.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Sequence

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import DeploymentLock
from deployctl.console.cost import promote_cost
from deployctl.console.output import TerminalProgress
from deployctl.console.release_verbs import adopt_installed, limits, say, who
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import Plan, PreflightResult, PromoteOutcome
from deployctl.decisions.report import plan_lines, preflight_lines
from deployctl.errors import UsageError
from deployctl.flows.abort import abort_on_signals
from deployctl.flows.recover import recover_first, refuse_after_failed_rollback
from deployctl.judge.reuse import BASELINE_MAX_AGE_S
from deployctl.live.protocols import Guard, Preflight
from deployctl.operations.site import Site


async def promote(site: Site, profile: str, lock: DeploymentLock, *, preflight: bool = True,
                  baseline_max_age_s: float = BASELINE_MAX_AGE_S, guard: Guard | None = None,
                  inventory: str | None = None, output_gate: bool = True,
                  show_plan: Callable[[Sequence[str]], None] | None = None) -> PromoteOutcome:
    """The whole promote under a held lock: recover, adopt, record, run; SIGTERM/SIGINT roll back.

    ``show_plan`` hears the plan before the work starts and the pre-flight warnings once they are known (a
    report at the end said them only after VERIFY)."""
    # Here, not at the top: the real adapters and the runner bring aiohttp and the judge (numpy, scipy), which
    # every other verb would pay for at start-up, as they import this module's helpers (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters
    from deployctl.live.runner import Runner

    progress = TerminalProgress()
    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, profile, progress, preflight=preflight, guard=guard) as adapters:
            say(await recover_first(ledger, site, adapters, "promote"))
            await refuse_after_failed_rollback(ledger, site, adapters)
            plan = site.plan(profile)
            if show_plan is not None:
                show_plan(plan_lines(plan, restart=False))
                adapters.preflight = WarningsAtOnce(adapters.preflight, show_plan)
            if not plan.unchanged:
                progress.expect(promote_cost(site, plan, baseline_max_age_s, ledger))
            previous = adopt_installed(ledger, site)
            release_id = ledger.begin_release(
                deployment=site.name, kind="promote", profile=profile, unit_name=plan.unit_name,
                unit_text=plan.candidate_text, unit_hash=plan.candidate_hash, who=who(), flags=plan.flags,
                env=plan.env, host=site.host, pid=os.getpid(), previous_id=previous,
            )
            if inventory:
                ledger.record(release_id, m.Phase.PREFLIGHT.value, "note", "inventory", {"reason": inventory})
            runner = Runner(ledger, adapters, plan, release_id, previous_release_id=previous,
                            baseline_max_age_s=baseline_max_age_s, crash_after=crash_after(os.environ))
            abort_on_signals(runner, lock)
            return await runner.run(m.start(limits(site.policy, preflight=preflight, output_gate=output_gate),
                                            unchanged=plan.unchanged))


class WarningsAtOnce:
    """The pre-flight adapter, whose warnings are shown as soon as it has found them."""

    def __init__(self, preflight: Preflight, show: Callable[[Sequence[str]], None]) -> None:
        self.preflight, self.show = preflight, show

    async def check(self, plan: Plan) -> PreflightResult:
        result = await self.preflight.check(plan)
        self.show(preflight_lines(result))
        return result


def crash_after(env: Mapping[str, str]) -> m.Phase | None:
    """``DEPLOYCTL_CRASH_AFTER=PHASE``: the promote kills itself (SIGKILL) once PHASE's action is done, before
    its outcome is recorded — how the crash tests reproduce a controller dying at each step."""
    name = env.get("DEPLOYCTL_CRASH_AFTER")
    if not name:
        return None
    try:
        return m.Phase(name.upper())
    except ValueError:
        raise UsageError(f"DEPLOYCTL_CRASH_AFTER={name}: not a phase",
                         hint="one of " + ", ".join(p.value for p in m.Phase)) from None
