"""The dead-man's switch: a repeating transient timer that checks the controller's lease and undoes a dead one.

Armed when a candidate is installed, disarmed when the promote ends (kept or rolled back). Every
``check_s`` seconds PID 1 runs ``deployctl recover --release N``: a free deployment lock means the
controller died (SIGKILL, OOM, a crash), and recover rolls the unfinished release back through
``deployctl.flows.recover`` with nobody at a keyboard; a held lock whose lease was not renewed for the
policy's stall bound means a stuck controller, which is stopped (``deployctl.decisions.dead_man`` decides).

Why a repeating timer that checks, and not a timer the controller re-arms, nor ``WatchdogSec=``:
- re-arming a transient timer is a stop and a start (its ``OnActiveSec`` cannot be changed once it is
  loaded), two D-Bus calls per renewal with a moment between them where no switch exists; a renewal here is
  one small file write, cheap enough for every finished request;
- ``WatchdogSec=`` + ``OnFailure=`` only guards a controller that is the main process of a unit: a plain
  ``deployctl promote`` in a terminal is not, and it needs the same switch;
- death is told by the kernel (the ``flock`` is dropped with the process), not guessed from a silence, so
  a live controller in one long request is never taken for a dead one, and a dead one is found at the next
  check whatever the policy's timeouts.
PID 1 owns the timer, so it outlives every process of deployctl.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Mapping, Sequence

from deployctl.adapters.transient import TransientService, dead_man_units, timer_properties
from deployctl.errors import DeployctlError
from deployctl.operations.operation import WORKER_ENV, unit_environment
from deployctl.operations.restart import Endpoint
from deployctl.decisions.dead_man import Lease

log = logging.getLogger("deployctl")

# Renewals closer together than this are not written: a sweep finishes hundreds of requests a second.
_RENEW_EVERY_S = 1.0


def lease_path(state_dir: Path, deployment: str) -> Path:
    return state_dir / "operations" / f"{deployment}.lease.json"


def read_lease(state_dir: Path, deployment: str) -> Lease | None:
    """The lease the controller last wrote, None if there is none (or it cannot be read: judged by the lock)."""
    try:
        return Lease(**json.loads(lease_path(state_dir, deployment).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_lease(path: Path, lease: Lease) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(lease)))
    os.replace(tmp, path)  # a reader sees the old lease or the new one, never half of one


class DeadMan:
    def __init__(self, endpoint: Endpoint, deployment: str, recover_argv: Sequence[str], env: Mapping[str, str],
                 cwd: str, state_dir: Path, *, check_s: float, stall_s: float) -> None:
        self.endpoint = endpoint
        self.deployment = deployment
        self.timer, self.service = dead_man_units(deployment)
        self.check_s = check_s
        self.stall_s = stall_s
        self.recover_argv = list(recover_argv)
        self.cwd = cwd
        self.lease_file = lease_path(state_dir, deployment)
        self.env = {k: v for k, v in unit_environment(env, self.service).items() if k != WORKER_ENV}
        self._release: int | None = None
        self._written = 0.0

    def _service(self, release_id: int) -> TransientService:
        # The release it guards: an old timer must not stop a later promote that is alive and well.
        return TransientService(argv=[*self.recover_argv, "--release", str(release_id)],
                                description=f"deployctl dead-man's switch: check {self.deployment}'s controller",
                                environment=self.env, working_directory=self.cwd)

    def renew(self) -> None:
        """The controller made progress: push the stall bound back. Cheap; a no-op before the arm."""
        if self._release is None:
            return
        now = time.monotonic()
        if now - self._written < _RENEW_EVERY_S:
            return
        self._written = now
        try:
            _write_lease(self.lease_file, Lease(self._release, os.getpid(), now, self.stall_s))
        except OSError as exc:  # the stall bound then counts from the last renewal that was written
            log.warning("could not renew the dead-man's lease %s: %s", self.lease_file, exc)

    async def arm(self, release_id: int) -> str:
        self._release, self._written = release_id, 0.0
        self.renew()  # before the timer: its first check finds the lease
        async with await self.endpoint.connect() as systemd:
            await systemd.stop_if_loaded(self.timer)  # one left by an earlier, killed controller
            for unit in (self.timer, self.service):
                await systemd.reset_failed(unit)
            description = f"deployctl dead-man's switch for {self.deployment}"
            (await systemd.start_transient(self.timer,
                                           timer_properties(description, self.check_s, every_s=self.check_s),
                                           [(self.service, self._service(release_id).properties())])).check()
        return (f"armed {self.timer}: if this controller dies the known-good unit comes back within"
                f" {self.check_s:g} s; with no progress for {self.stall_s:g} s it is stopped")

    async def disarm(self) -> None:
        """Stop the timer; a failure only means its next check finds the promote finished."""
        self._release = None
        self.lease_file.unlink(missing_ok=True)
        await stop_switch(self.endpoint, self.deployment)


async def stop_switch(endpoint: Endpoint, deployment: str) -> None:
    """Stop ``deployment``'s dead-man's timer (its running check, if any, goes on to its end)."""
    timer, _ = dead_man_units(deployment)
    try:
        async with await endpoint.connect() as systemd:
            await systemd.stop_if_loaded(timer)
    except DeployctlError as exc:
        log.warning("could not disarm %s (%s); when it fires it finds the promote finished", timer, exc)
