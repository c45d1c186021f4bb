"""Facts about the machine a deployment runs on, gathered here and judged in :mod:`.hostcheck`.

Everything that touches the machine is in this module: NVML (through ``deployctl.adapters.gpu``, the
only importer of pynvml), the filesystem, a bind on the port and ``/proc`` to see who holds it.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, Sequence

PortState = Literal["free", "held_by_unit", "held_by_other", "in_use"]


@dataclass(frozen=True)
class GpuFact:
    name: str
    compute_capability: str | None  # "sm120"
    memory_gb: float | None = None


@dataclass(frozen=True)
class HostFacts:
    gpus: tuple[GpuFact, ...] | None  # None: no NVML on this machine
    python_executable: bool
    cuda_home_exists: bool | None  # None: no CUDA_HOME configured
    port_state: PortState
    port_holder: str | None  # "pid 1234 (python3)" when known
    disk_free_bytes: tuple[tuple[str, int], ...]  # (path checked, bytes free)


@dataclass(frozen=True)
class ProbeRequest:
    python: str
    cuda_home: str | None
    port: int
    unit: str
    state_paths: tuple[str, ...]


class HostProbe(Protocol):
    def __call__(self, request: ProbeRequest) -> HostFacts: ...


STATE_PATHS = ("/var/lib/deployctl", "/var/log/journal")


def probe_local_host(request: ProbeRequest) -> HostFacts:
    """The default :class:`HostProbe`: this machine."""
    state, holder = port_state(request.port, request.unit)
    return HostFacts(
        gpus=local_gpus(),
        python_executable=os.access(request.python, os.X_OK) and Path(request.python).is_file(),
        cuda_home_exists=None if request.cuda_home is None else Path(request.cuda_home).is_dir(),
        port_state=state,
        port_holder=holder,
        disk_free_bytes=tuple((p, shutil.disk_usage(_existing(p)).free) for p in request.state_paths),
    )


def local_gpus() -> tuple[GpuFact, ...] | None:
    """GPUs as NVML reports them, via the telemetry adapter; None when there is no NVML."""
    from deployctl.adapters.gpu import (
        gpu_inventory,  # NVML is loaded only when a probe runs
    )

    found = gpu_inventory()
    if found is None:
        return None
    return tuple(GpuFact(info.name, normalize_cc(info.compute_capability), info.memory_gb) for info in found)


@dataclass(frozen=True)
class GpuSpeedFacts:
    """What of the GPUs sets a server's speed, for a baseline's fingerprint (``judge.reuse``); None: unknown."""

    model: str | None = None  # "8× NVIDIA H200": the count as well as the board
    driver: str | None = None
    power_limit_w: float | None = None  # the lowest enforced limit: a tensor-parallel group runs at its pace
    clocks_policy: str | None = None


def speed_facts(gpus: Sequence[Any] | None) -> GpuSpeedFacts:
    """``GpuSpeedFacts`` of ``adapters.gpu.GpuInfo`` rows; a fact the GPUs disagree on is listed per kind."""
    if not gpus:
        return GpuSpeedFacts()

    def one(values: Sequence[Any]) -> Any:
        if any(v is None for v in values):
            return None
        kinds = sorted({str(v) for v in values})
        return values[0] if len(kinds) == 1 else " + ".join(kinds)

    names = [g.name for g in gpus]
    model = " + ".join(f"{names.count(n)}× {n}" for n in sorted(set(names)))
    limits = [g.power_limit_w for g in gpus]
    return GpuSpeedFacts(model, one([g.driver_version for g in gpus]),
                         None if any(v is None for v in limits) else min(limits),
                         one([g.clocks_policy for g in gpus]))


def local_speed_facts(simulated_url: str | None = None) -> GpuSpeedFacts:
    """This machine's GPUs (NVML), or a simulated host's as its simulator reports them at ``simulated_url``."""
    from deployctl.adapters.gpu import gpu_inventory, simulated_inventory

    return speed_facts(simulated_inventory(simulated_url) if simulated_url else gpu_inventory())


def normalize_cc(value: Any) -> str | None:
    """(12, 0) / "12.0" / "sm_120" / "SM120" → "sm120"."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)) and len(value) >= 2:
        return f"sm{int(value[0])}{int(value[1])}"
    text = str(value).strip().lower().replace("_", "")
    if text.startswith("sm"):
        return text
    if "." in text:
        major, minor = text.split(".", 1)
        return f"sm{int(major)}{int(minor[:1] or 0)}"
    return f"sm{text}"


def _existing(path: str) -> str:
    current = Path(path)
    while not current.exists() and current != current.parent:
        current = current.parent
    return str(current)


def port_state(port: int, unit: str) -> tuple[PortState, str | None]:
    """Whether ``port`` can be bound, and if not, whether the unit's own process holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a TIME_WAIT leftover is not "in use"
        try:
            sock.bind(("0.0.0.0", port))
            return "free", None
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return "in_use", str(exc)
    for pid in _listening_pids(port):
        comm = _read(f"/proc/{pid}/comm").strip() or "?"
        holder = f"pid {pid} ({comm})"
        if _in_unit(pid, unit):
            return "held_by_unit", holder
        return "held_by_other", holder
    return "in_use", None


def _listening_pids(port: int) -> list[int]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in _read(table).splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue  # gone, or not ours to read
        if any(_readlink(f"/proc/{entry}/fd/{fd}") in wanted for fd in fds):
            pids.append(int(entry))
    return pids


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None  # closed meanwhile (the directory listing's own fd, for one)


_SERVER_MODULES = ("sglang.launch_server", "deployctl.sim")


def _in_unit(pid: int, unit: str) -> bool:
    """Whether ``pid`` runs in ``unit``: its cgroup says so, or, where cgroups do not tell processes apart
    (a container without delegation, the test sandbox: the holder shares deployctl's own cgroups), it
    runs the server module."""
    cgroups = _read(f"/proc/{pid}/cgroup")
    if any(line.rstrip().endswith(f"/{unit}") for line in cgroups.splitlines()):
        return True
    if cgroups != _read("/proc/self/cgroup"):
        return False
    argv = _read(f"/proc/{pid}/cmdline").split("\0")
    return any(module in argv for module in _SERVER_MODULES)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
