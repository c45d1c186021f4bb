"""A throwaway systemd: PID 1 of a private PID+mount namespace, for the system tests and the demo.

Boot recipe (measured on systemd 252, see docs/systemd.md): ``unshare --pid --fork --mount --mount-proc
--propagation private``, tmpfs over ``/run``, ``/etc/systemd/system``, ``/var/log/journal`` and
``/var/lib/deployctl`` so nothing leaks onto the host, the tmpfiles units masked (otherwise the boot cleans
the *host's* ``/tmp``, which stays shared so the repository and its venv remain visible inside), and only
``basic.target`` started. Needs root.

From outside, the sandbox is reached through ``/proc/PID/root`` (the bus socket, the unit directories,
``journalctl --root``), where PID is systemd's own pid — the child of ``unshare``, not ``unshare`` itself;
``run()`` executes a command inside (``nsenter -t PID -m -p``), where every path is the standard one.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from deployctl.errors import DeployctlError

if TYPE_CHECKING:
    from deployctl.operations.restart import Endpoint

PRIVATE_MOUNTS = ("/run", "/etc/systemd/system", "/var/log/journal", "/var/lib/deployctl")
# Masked: systemd-tmpfiles would clean the shared /tmp of the whole machine.
MASKED_UNITS = (
    "systemd-tmpfiles-setup.service",
    "systemd-tmpfiles-clean.timer",
    "systemd-tmpfiles-setup-dev.service",
)
PR_SET_PDEATHSIG = 1
SYSTEMD_CANDIDATES = ("/lib/systemd/systemd", "/usr/lib/systemd/systemd")


class SandboxError(DeployctlError):
    """The sandboxed systemd could not be booted or reached."""


def _boot_script(systemd: str) -> str:
    mounts = " ".join(PRIVATE_MOUNTS)
    masks = " ".join(MASKED_UNITS)
    return (
        "set -e\n"
        f"for m in {mounts}; do mkdir -p $m; mount -t tmpfs tmpfs $m; done\n"
        f"for u in {masks}; do ln -s /dev/null /etc/systemd/system/$u; done\n"
        f"exec {systemd} --system --unit=basic.target --log-target=journal --show-status=no\n"
    )


def _die_with_parent() -> None:
    # If the test process dies, unshare gets SIGKILL, and --kill-child passes it on to systemd: no sandbox
    # outlives its owner.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


class Sandbox:
    """A running sandboxed systemd. ``Sandbox.boot()`` starts one; ``close()`` ends every process in it."""

    def __init__(self, unshare: subprocess.Popen[bytes], pid: int) -> None:
        self._unshare = unshare
        self.pid = pid

    @classmethod
    def boot(cls, *, timeout_s: float = 60.0) -> "Sandbox":
        if os.geteuid() != 0:
            raise SandboxError("booting a sandboxed systemd needs root", hint="run the system tests as root")
        systemd = next((p for p in SYSTEMD_CANDIDATES if Path(p).exists()), None)
        missing = [tool for tool in ("unshare", "nsenter") if shutil.which(tool) is None]
        if systemd is None or missing:
            raise SandboxError(
                f"missing {', '.join(missing) or 'systemd'}",
                hint="apt-get install systemd util-linux dbus (systemd 252 or newer)",
            )
        unshare = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--propagation", "private",
             "/bin/bash", "-c", _boot_script(systemd)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
            # Out of the terminal's process group: a Ctrl-C there must reach the deployctl running inside (a
            # promote rolls back), never unshare or systemd, whose death would cut that rollback short.
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        pid = None
        while pid is None:
            children = _children(unshare.pid)
            if children and _comm(children[0]) == "systemd":
                pid = children[0]
            elif unshare.poll() is not None:
                err = unshare.stderr.read().decode(errors="replace") if unshare.stderr else ""
                raise SandboxError(f"the sandboxed systemd exited during boot: {err.strip()}")
            elif time.monotonic() > deadline:
                unshare.kill()
                raise SandboxError("the sandboxed systemd did not start in time")
            else:
                time.sleep(0.01)
        sandbox = cls(unshare, pid)
        try:
            sandbox._wait_running(deadline)
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def _wait_running(self, deadline: float) -> None:
        # Before systemd opens its private socket, systemctl reports "offline" instead of waiting.
        self._wait_for(self.root / "run/systemd/private", deadline, "systemd's control socket")
        remaining = max(1.0, deadline - time.monotonic())
        try:
            done = self.run(["systemctl", "is-system-running", "--wait"], timeout=remaining)
        except subprocess.TimeoutExpired as exc:
            raise SandboxError("the sandboxed systemd did not finish booting in time") from exc
        state = done.stdout.strip()
        if state not in ("running", "degraded"):
            raise SandboxError(f"the sandboxed systemd is {state or 'unreachable'}: {done.stderr.strip()}")
        # The bus socket is what every client needs; dbus.socket is part of basic.target.
        self._wait_for(self.root / "run/dbus/system_bus_socket", deadline, "the sandbox's system bus")
        # dbus is socket-activated: systemd takes its name on the bus only once dbus.service runs.
        self.run(["systemctl", "start", "dbus.service"], timeout=max(1.0, deadline - time.monotonic()))
        owner = ["busctl", "--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                 "org.freedesktop.DBus", "GetNameOwner", "s", "org.freedesktop.systemd1"]
        while self.run(owner, timeout=5).returncode != 0:
            if time.monotonic() > deadline or not self.alive:
                raise SandboxError("systemd never appeared on the sandbox's system bus")
            time.sleep(0.02)

    def _wait_for(self, path: Path, deadline: float, what: str) -> None:
        while not path.exists():
            if time.monotonic() > deadline or not self.alive:
                raise SandboxError(f"{what} never appeared in the sandbox ({path})")
            time.sleep(0.01)

    @property
    def root(self) -> Path:
        return Path(f"/proc/{self.pid}/root")

    @property
    def bus_address(self) -> str:
        return f"unix:path={self.root}/run/dbus/system_bus_socket"

    @property
    def unit_dir(self) -> Path:
        return self.root / "etc/systemd/system"

    @property
    def runtime_unit_dir(self) -> Path:
        return self.root / "run/systemd/system.control"

    @property
    def state_dir(self) -> Path:
        return self.root / "var/lib/deployctl"

    @property
    def journal_command(self) -> tuple[str, ...]:
        # Read from outside through /proc/PID/root. Measured on 252: `nsenter -t PID -m journalctl -f` (mount
        # namespace only) never delivers new entries, and with `-p` nsenter forks, so killing the process we
        # spawned would leave journalctl running. `--root` follows, and is the very process we spawn.
        return ("journalctl", "--root", str(self.root))

    def endpoint(self) -> "Endpoint":
        """How deployctl running outside reaches this sandbox's systemd, unit files and journal."""
        from deployctl.operations.restart import Endpoint

        return Endpoint(bus_address=self.bus_address, unit_dir=self.unit_dir, runtime_dir=self.runtime_unit_dir,
                        backup_dir=self.state_dir / "units", journal_command=self.journal_command,
                        lock_dir=self.root / "run/deployctl/locks")

    def env(self) -> dict[str, str]:
        """The same as environment variables, for a ``deployctl`` command run outside the sandbox."""
        ep = self.endpoint()
        return {"DBUS_SYSTEM_BUS_ADDRESS": self.bus_address, "DEPLOYCTL_UNIT_DIR": str(ep.unit_dir),
                "DEPLOYCTL_RUNTIME_UNIT_DIR": str(ep.runtime_dir), "DEPLOYCTL_BACKUP_DIR": str(ep.backup_dir),
                "DEPLOYCTL_JOURNALCTL": " ".join(self.journal_command), "DEPLOYCTL_LOCK_DIR": str(ep.lock_dir)}

    def nsenter(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", "-t", str(self.pid), "-m", "-p", *argv]

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        timeout: float | None = 60.0,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside the sandbox, where every path is the standard one."""
        full_env = None if env is None else {**os.environ, **env}
        return subprocess.run(
            self.nsenter(argv), env=full_env, capture_output=True, text=True, timeout=timeout, check=check,
        )

    @property
    def alive(self) -> bool:
        return self._unshare.poll() is None

    def close(self) -> None:
        """Kill systemd; the kernel then kills every process of the namespace and drops its mounts."""
        if self._unshare.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self._unshare.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._unshare.kill()
                self._unshare.wait()
        if self._unshare.stderr:
            self._unshare.stderr.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
