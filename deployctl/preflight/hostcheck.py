"""Judge gathered host facts against what the inventory declares (pure)."""

from __future__ import annotations

from typing import Mapping

from deployctl.preflight.hostfacts import HostFacts, normalize_cc
from deployctl.preflight.report import Finding

DISK_ERROR_BYTES = 256 * 2**20  # below this the journal and the ledger cannot take a startup log
DISK_WARN_BYTES = 2 * 2**30
_SOURCE_NVML = "NVML (nvidia-ml-py) on this machine vs the inventory's hosts.{host}.gpus"


def _visible_count(env: Mapping[str, str]) -> int | None:
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    return len([d for d in visible.split(",") if d.strip()])


def gpu_findings(host_name: str, declared_model: str, declared_count: int, declared_cc: str,
                 facts: HostFacts, env: Mapping[str, str]) -> list[Finding]:
    source = _SOURCE_NVML.format(host=host_name)
    if facts.gpus is None:
        return [Finding("WARN", "host-gpu-unverified",
                        f"NVML is not available here, so the {declared_count} × {declared_model} ({declared_cc}) "
                        f"that hosts.{host_name}.gpus declares were not verified", source,
                        hint="install the NVIDIA driver's NVML (libnvidia-ml) or run deployctl on the GPU host")]
    out: list[Finding] = []
    seen = len(facts.gpus)
    visible = _visible_count(env)
    if (visible is None and seen != declared_count) or (visible is not None and seen < declared_count):
        out.append(Finding("ERROR", "host-gpu-count",
                           f"hosts.{host_name}.gpus.count is {declared_count} but NVML sees {seen} GPU(s)", source,
                           hint="fix the inventory, or check the driver (nvidia-smi) if a GPU fell off the bus"))
    names = sorted({g.name for g in facts.gpus})
    if names and not any(_same_model(declared_model, n) for n in names):
        out.append(Finding("ERROR", "host-gpu-model",
                           f"hosts.{host_name}.gpus.model is {declared_model!r} but NVML reports {', '.join(names)}",
                           source))
    ccs = sorted({g.compute_capability for g in facts.gpus if g.compute_capability})
    want = normalize_cc(declared_cc)
    if ccs and want not in ccs:
        out.append(Finding("ERROR", "host-gpu-compute-capability",
                           f"hosts.{host_name}.gpus.compute_capability is {declared_cc} but NVML reports "
                           f"{', '.join(ccs)}; the architecture checks would judge the wrong GPU", source))
    return out


def _same_model(declared: str, reported: str) -> bool:
    a, b = declared.lower().strip(), reported.lower().strip()
    return a == b or a in b or b in a


def path_findings(host_name: str, python: str, facts: HostFacts, cuda_home: str | None,
                  simulated: bool) -> list[Finding]:
    out: list[Finding] = []
    if not facts.python_executable:
        out.append(Finding("ERROR", "host-python", f"the interpreter {python} does not exist or is not executable",
                           "filesystem", hint=f"set hosts.{host_name}.python to the SGLang venv's interpreter"))
    if cuda_home is not None and facts.cuda_home_exists is False and not simulated:
        out.append(Finding("ERROR", "host-cuda-home",
                           f"CUDA_HOME={cuda_home} does not exist; FlashInfer and DeepGEMM JIT-compile kernels "
                           "with it at start-up", "filesystem",
                           hint=f"set hosts.{host_name}.cuda_home to an installed CUDA toolkit"))
    return out


def port_findings(port: int, unit: str, facts: HostFacts) -> list[Finding]:
    source = "bind() on 0.0.0.0 and /proc/net/tcp{,6}"
    if facts.port_state == "held_by_unit":
        return [Finding("INFO", "host-port", f"port {port} is held by {unit} itself ({facts.port_holder}); "
                        "the restart frees it", source)]
    if facts.port_state == "held_by_other":
        return [Finding("ERROR", "host-port",
                        f"port {port} is held by {facts.port_holder}, which is not {unit}; the server could not bind it",
                        source, hint="stop that process or change deployments.<name>.port")]
    if facts.port_state == "in_use":
        holder = f" ({facts.port_holder})" if facts.port_holder else ""
        return [Finding("WARN", "host-port",
                        f"port {port} is in use{holder} and its owner could not be identified (not root?)", source)]
    return []


def disk_findings(facts: HostFacts) -> list[Finding]:
    out: list[Finding] = []
    for path, free in facts.disk_free_bytes:
        mib = free / 2**20
        if free < DISK_ERROR_BYTES:
            out.append(Finding("ERROR", "host-disk", f"only {mib:.0f} MiB free for {path}; the startup log and "
                               "the ledger need room", "statvfs", hint=f"free space on the filesystem of {path}"))
        elif free < DISK_WARN_BYTES:
            out.append(Finding("WARN", "host-disk", f"only {mib:.0f} MiB free for {path}", "statvfs"))
    return out
