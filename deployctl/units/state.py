"""What systemd says about a unit, as the core reads it: the adapter fills it, readiness and status decide on it."""

from __future__ import annotations

import signal
from dataclasses import dataclass

# ExecMainCode values are siginfo's si_code (CLD_*).
CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3


@dataclass(frozen=True)
class UnitState:
    """A snapshot of the unit properties deployctl decides on."""

    name: str
    load_state: str
    active_state: str
    sub_state: str
    result: str
    main_pid: int
    exec_main_code: int
    exec_main_status: int
    n_restarts: int
    invocation_id: str
    active_enter_us: int
    need_daemon_reload: bool
    fragment_path: str

    @property
    def running(self) -> bool:
        return self.active_state == "active" and self.sub_state == "running"

    @property
    def exit_description(self) -> str:
        """How the main process ended, e.g. ``exited with status 1`` or ``killed by signal 9 (SIGKILL)``."""
        if self.exec_main_code == CLD_EXITED:
            meaning = " (could not execute the command)" if self.exec_main_status == 203 else ""
            return f"exited with status {self.exec_main_status}{meaning}"
        if self.exec_main_code in (CLD_KILLED, CLD_DUMPED):
            try:
                name = signal.Signals(self.exec_main_status).name
            except ValueError:
                name = "unknown signal"
            dumped = ", core dumped" if self.exec_main_code == CLD_DUMPED else ""
            return f"killed by signal {self.exec_main_status} ({name}{dumped})"
        return "has not exited"
