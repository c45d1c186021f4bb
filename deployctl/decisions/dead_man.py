"""The dead-man's switch as a lease: when a candidate must be undone, decided from data.

From the install of a candidate to the keep or rollback, PID 1 runs ``deployctl recover --release N`` every
``check_s`` seconds (a repeating timer). Each check answers two questions:

- **Is the controller alive?** It holds the deployment's ``flock``, which the kernel drops when the process
  dies (SIGKILL, OOM, a crash). A free lock means a dead controller: the check rolls the candidate back at
  once. So a dead controller's candidate serves at most ``check_s`` (+ the check's own start) before the
  rollback starts, whatever the policy's timeouts.
- **Is it making progress?** The controller renews its lease (a timestamp in the state directory) at each
  step (restart, readiness, trial) and each finished request of a benchmark. No renewal for ``stall_s``:
  it is stuck though alive, and gets SIGTERM (it rolls back itself); still no renewal after twice that (a
  stopped or wedged process ignores SIGTERM), SIGKILL, and the next check rolls back for it.

A live controller's long benchmark is never cut: requests finish, each one renews. The default ``stall_s``
is the longest wait between two renewals the policy allows a healthy controller: the startup timeout (a
restart) or the request timeout (one wave), whichever is longer, plus a margin.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from deployctl.inventory.policy import Policy

MARGIN_S = 60.0


def stall_s(policy: Policy) -> float:
    """How long a controller may go without progress before it is stopped: ``dead_man_s``, else the
    policy's longest legitimate pause (startup timeout or request timeout) + margin."""
    if policy.dead_man_s is not None:
        return policy.dead_man_s
    return max(policy.gates.startup_timeout_s, policy.bench.request_timeout_s) + MARGIN_S


def check_s(policy: Policy) -> float:
    """How often PID 1 checks the lease: the most a dead controller's candidate serves before the rollback."""
    return policy.dead_man_check_s


@dataclass(frozen=True)
class Lease:
    """What the controller last said: it runs ``release_id`` as ``pid``; progress at ``renewed``.

    ``renewed`` is CLOCK_MONOTONIC (``time.monotonic()``): one clock for every process of the host, which
    a wall-clock step (NTP, an operator's ``date -s``) does not move."""

    release_id: int
    pid: int
    renewed: float
    stall_s: float


class LeaseAction(enum.Enum):
    WAIT = "wait"  # alive and making progress
    TERMINATE = "terminate"  # stuck: SIGTERM, it rolls back itself
    KILL = "kill"  # stuck and deaf to SIGTERM: SIGKILL, the next check rolls back


def judge_alive(lease: Lease | None, now: float) -> LeaseAction:
    """What to do about a controller that is alive (holds the lock), from its lease.

    No lease (a controller that armed before it could write one, or a deployctl that writes none) is
    judged by the lock alone: alive, so wait."""
    if lease is None:
        return LeaseAction.WAIT
    idle = now - lease.renewed
    if idle >= 2 * lease.stall_s:
        return LeaseAction.KILL
    if idle >= lease.stall_s:
        return LeaseAction.TERMINATE
    return LeaseAction.WAIT


def describe(policy: Policy) -> str:
    """One line for ``promote --dry-run`` and the arm message."""
    return (f"dead-man's switch: if the controller dies, the rollback starts within {check_s(policy):g} s "
            f"(checked every {check_s(policy):g} s); a live one with no progress for {stall_s(policy):g} s is "
            "stopped")
