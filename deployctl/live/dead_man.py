"""The dead-man's switch: a transient timer that restores the known-good unit unless the controller says otherwise.

Armed when a candidate is installed, disarmed when the promote ends (kept or rolled back). If the
controller dies (SIGKILL, OOM, a crashed host process) the timer fires after the policy's bound
(``deployctl.promote.dead_man.bound_s``) and runs ``deployctl recover``, which rolls the unfinished
release back through ``deployctl.live.recovery``: no one has to run a command. PID 1 owns the timer, so
it outlives every process of deployctl.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from deployctl.adapters.transient import TransientService, dead_man_units, timer_properties
from deployctl.errors import DeployctlError
from deployctl.live.operation import WORKER_ENV, unit_environment
from deployctl.live.restart import Endpoint

log = logging.getLogger("deployctl")


class DeadMan:
    def __init__(self, endpoint: Endpoint, deployment: str, recover_argv: Sequence[str], env: Mapping[str, str],
                 cwd: str, bound_s: float) -> None:
        self.endpoint = endpoint
        self.deployment = deployment
        self.timer, self.service = dead_man_units(deployment)
        self.bound_s = bound_s
        self.recover_argv = list(recover_argv)
        self.cwd = cwd
        self.env = {k: v for k, v in unit_environment(env, self.service).items() if k != WORKER_ENV}

    def _service(self, release_id: int) -> TransientService:
        # The release it guards: an old timer must not stop a later promote that is alive and well.
        return TransientService(argv=[*self.recover_argv, "--release", str(release_id)],
                                description=f"deployctl dead-man's switch: recover {self.deployment}",
                                environment=self.env, working_directory=self.cwd)

    async def arm(self, release_id: int) -> str:
        async with await self.endpoint.connect() as systemd:
            await systemd.stop_if_loaded(self.timer)  # one left by an earlier, killed controller
            for unit in (self.timer, self.service):
                await systemd.reset_failed(unit)
            description = f"deployctl dead-man's switch for {self.deployment}"
            (await systemd.start_transient(self.timer, timer_properties(description, self.bound_s),
                                           [(self.service, self._service(release_id).properties())])).check()
        return f"armed {self.timer}: the known-good unit comes back in {self.bound_s:g} s unless kept or rolled back"

    async def disarm(self) -> None:
        """Stop the timer; a failure only means a later `deployctl recover` finds nothing to do."""
        try:
            async with await self.endpoint.connect() as systemd:
                await systemd.stop_if_loaded(self.timer)
        except DeployctlError as exc:
            log.warning("could not disarm %s (%s); when it fires it finds the promote finished", self.timer, exc)
