"""How long a candidate may run before the dead-man's switch restores the known-good unit.

The switch is armed when a candidate is installed and disarmed at KEEP or ROLLBACK; a controller that
does neither within the bound is dead or stuck. The default bound is the policy's own worst case from
install to verdict: the candidate's startup timeout, then every candidate trial the judge may ask for,
each request taking its full timeout, then a margin for the keep itself.
"""

from __future__ import annotations

import math

from deployctl.inventory.policy import BenchPolicy, Policy

MARGIN_S = 60.0


def sweep_worst_case_s(bench: BenchPolicy) -> float:
    """One sweep when every request runs to its timeout: per level, waves of C requests."""
    waves = sum(math.ceil((bench.warmup_requests + bench.requests_for(c)) / c) for c in bench.concurrency)
    return waves * bench.request_timeout_s


def bound_s(policy: Policy) -> float:
    """The policy's ``dead_man_s``, else startup timeout + the judge's most trials at worst + margin."""
    if policy.dead_man_s is not None:
        return policy.dead_man_s
    bench = policy.judge.max_trials * sweep_worst_case_s(policy.bench)
    return policy.gates.startup_timeout_s + bench + MARGIN_S
