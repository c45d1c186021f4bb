"""An OpenSSH server inside a sandboxed systemd: the "host" a laptop (or Ansible) reaches over SSH.

The sandbox shares the network namespace, so each sshd listens on its own port of 127.0.0.1; a session it
starts lives in the sandbox's mount and PID namespaces, where deployctl finds that sandbox's systemd, unit
directories and journal at their standard paths.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from support.clirun import free_port

from deployctl.sandbox import Sandbox

SSH_OPTIONS = "-o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"


def make_keys(keys: Path) -> Path:
    """A host key, the client's key (authorized) and a stranger's (not) in ``keys``."""
    for name in ("host_ed25519", "client", "stranger"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
    (keys / "authorized_keys").write_text((keys / "client.pub").read_text())
    return keys


@dataclass(frozen=True)
class Sshd:
    box: Sandbox
    keys: Path
    port: int
    unit: str

    def options(self, key: str = "client") -> str:
        return f"-i {self.keys / key} {SSH_OPTIONS}"

    def answers(self) -> bool:
        argv = ["ssh", *self.options().split(), "-o", "BatchMode=yes", "-p", str(self.port), "root@127.0.0.1", "true"]
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0

    def stop(self) -> None:
        self.box.run(["systemctl", "stop", self.unit])


def start_sshd(box: Sandbox, keys: Path, *, unit: str = "test-sshd.service", timeout_s: float = 30) -> Sshd:
    """sshd as a transient unit of ``box``'s systemd, accepting ``keys``' client key; up once it answers."""
    port = free_port()
    config = keys / f"sshd_config-{port}"
    config.write_text(
        f"ListenAddress 127.0.0.1\nHostKey {keys}/host_ed25519\nAuthorizedKeysFile {keys}/authorized_keys\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        # StrictModes no: pytest's tmp dirs sit under a world-writable /tmp
        f"UsePAM no\nStrictModes no\nPidFile {keys}/sshd-{port}.pid\n"
    )
    started = box.run([
        "systemd-run", f"--unit={unit}", "--property=RuntimeDirectory=sshd", "/usr/sbin/sshd", "-D", "-e",
        "-f", str(config), "-p", str(port)], timeout=30)
    assert started.returncode == 0, started.stderr
    server = Sshd(box, keys, port, unit)
    deadline = time.monotonic() + timeout_s
    while not server.answers():
        if time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"sshd on port {port} did not answer within {timeout_s:g} s")
        time.sleep(0.3)
    return server
