"""GPU facts and readings: NVML (nvidia-ml-py, NVIDIA's own binding) and the simulator's stand-in.

The only importer of ``pynvml``. Without NVML (no driver, no GPU, a container without the library)
nothing here raises: ``gpu_inventory()`` returns None and ``open_nvml()`` returns None plus the reason,
which is logged once per process. A reading NVML does not support on a device (PCIe throughput on
some boards, throttle reasons on old drivers) is None, never an error.

``SimulatedGpus`` reads ``GET <url>/sim/telemetry`` of ``deployctl.sim`` with a synchronous httpx
client: the sampler runs in its own thread, where the async control client does not fit.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import httpx
import pynvml

from deployctl.bench.telemetry import GpuSample

log = logging.getLogger("deployctl")

# Memory in GiB, which is what the boards are sold as ("96 GB" RTX PRO 6000 = 95.6 GiB) and what the
# simulator reports.
_GB = 1024**3

# Bit → name of NVML's clock event ("throttle") reasons (nvml.h, nvmlClocksEventReason*).
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the host reports it (for preflight and the inventory check)."""

    index: int
    name: str
    compute_capability: str | None  # "sm90", "sm120"
    memory_gb: float
    power_limit_w: float | None  # the enforced limit
    uuid: str | None = None
    driver_version: str | None = None
    clocks_policy: str | None = None  # "default", or the application clocks someone set ("SM 1980 / mem 2619 MHz")


_unavailable_logged = threading.Event()


def _say_unavailable_once(reason: str) -> None:
    if not _unavailable_logged.is_set():
        _unavailable_logged.set()
        log.info("GPU telemetry unavailable: %s", reason)


class Nvml:
    """An initialised NVML session over some or all GPUs. ``close()`` shuts NVML down."""

    name = "nvml"

    def __init__(self, indices: Sequence[int] | None = None, *, pcie: bool = True) -> None:
        count = pynvml.nvmlDeviceGetCount()
        self.indices = tuple(indices) if indices is not None else tuple(range(count))
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        # PCIe counters take ~20 ms a call on some drivers; switched off after the first failure.
        self._pcie = pcie

    def read(self) -> tuple[GpuSample, ...]:
        return tuple(self._read_one(i, h) for i, h in zip(self.indices, self._handles))

    def _read_one(self, index: int, h: Any) -> GpuSample:
        util = _try(lambda: pynvml.nvmlDeviceGetUtilizationRates(h))
        mem = _try(lambda: pynvml.nvmlDeviceGetMemoryInfo(h))
        power = _try(lambda: pynvml.nvmlDeviceGetPowerUsage(h))
        limit = _try(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h))
        reasons = _try(lambda: _clock_event_reasons(h))
        tx = rx = None
        if self._pcie:
            tx = _try(lambda: pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES))
            rx = _try(lambda: pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES))
            self._pcie = tx is not None or rx is not None
        return GpuSample(
            index=index,
            power_w=power / 1000 if power is not None else None,
            power_limit_w=limit / 1000 if limit is not None else None,
            sm_util_pct=float(util.gpu) if util is not None else None,
            mem_util_pct=float(util.memory) if util is not None else None,
            mem_used_gb=mem.used / _GB if mem is not None else None,
            mem_total_gb=mem.total / _GB if mem is not None else None,
            sm_clock_mhz=_try(lambda: float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))),
            mem_clock_mhz=_try(lambda: float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM))),
            temperature_c=_try(lambda: float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))),
            throttle_reasons=throttle_names(reasons) if reasons is not None else (),
            # NVML reports KB/s over a 20 ms window.
            pcie_tx_mb_s=tx / 1000 if tx is not None else None,
            pcie_rx_mb_s=rx / 1000 if rx is not None else None,
        )

    def close(self) -> None:
        _try(pynvml.nvmlShutdown)


def open_nvml(indices: Sequence[int] | None = None, *, pcie: bool = True) -> tuple[Nvml | None, str | None]:
    """An NVML session, or (None, why not). The reason is also logged, once per process."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        reason = _nvml_reason(exc)
        _say_unavailable_once(reason)
        return None, reason
    try:
        return Nvml(indices, pcie=pcie), None
    except pynvml.NVMLError as exc:
        _try(pynvml.nvmlShutdown)
        reason = _nvml_reason(exc)
        _say_unavailable_once(reason)
        return None, reason


def gpu_inventory() -> list[GpuInfo] | None:
    """The host's GPUs (count, names, compute capability, memory, power limit), or None without NVML."""
    session, _ = open_nvml(pcie=False)
    if session is None:
        return None
    try:
        driver = _try(pynvml.nvmlSystemGetDriverVersion)
        out = []
        for index, h in zip(session.indices, session._handles):
            cc = _try(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(h))
            limit = _try(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h))
            mem = _try(lambda: pynvml.nvmlDeviceGetMemoryInfo(h))
            out.append(GpuInfo(
                index=index,
                name=_text(_try(lambda: pynvml.nvmlDeviceGetName(h))) or "unknown",
                compute_capability=f"sm{cc[0]}{cc[1]}" if cc else None,
                memory_gb=round(mem.total / _GB, 1) if mem is not None else 0.0,
                power_limit_w=limit / 1000 if limit is not None else None,
                uuid=_text(_try(lambda: pynvml.nvmlDeviceGetUUID(h))),
                driver_version=_text(driver),
                clocks_policy=_clocks_policy(h),
            ))
        return out
    finally:
        session.close()


def _clocks_policy(h: Any) -> str | None:
    """"default" when the application clocks are the board's defaults, else what they were set to
    (``nvidia-smi -ac``); None when NVML cannot tell (then a baseline is not reused: unknown never matches)."""
    found = []
    for kind, label in ((pynvml.NVML_CLOCK_SM, "SM"), (pynvml.NVML_CLOCK_MEM, "mem")):
        target = _try(lambda: pynvml.nvmlDeviceGetClock(h, kind, pynvml.NVML_CLOCK_ID_APP_CLOCK_TARGET))
        default = _try(lambda: pynvml.nvmlDeviceGetClock(h, kind, pynvml.NVML_CLOCK_ID_APP_CLOCK_DEFAULT))
        if target is None or default is None:
            return None
        if target != default:
            found.append(f"{label} {target}")
    return f"application clocks {' / '.join(found)} MHz" if found else "default"


def throttle_names(mask: int) -> tuple[str, ...]:
    """NVML's clock-event bit mask as names, e.g. 0x4 → ("sw_power_cap",)."""
    return tuple(name for bit, name in THROTTLE_REASONS if mask & bit)


def _clock_event_reasons(h: Any) -> int:
    # Renamed in newer bindings ("throttle" → "clocks event"); both names exist in 12.x/13.x.
    fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(fn(h))


def _nvml_reason(exc: Exception) -> str:
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return "NVML library not found (no NVIDIA driver on this host)"
    if isinstance(exc, getattr(pynvml, "NVMLError_DriverNotLoaded", ())):
        return "the NVIDIA driver is not loaded"
    return f"NVML: {exc}"


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except pynvml.NVMLError:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class SimulatedGpus:
    """The simulator's GPUs: ``GET <url>/sim/telemetry`` → power, limit, SM util, memory per GPU."""

    name = "simulated"

    def __init__(self, url: str, *, timeout_s: float = 2.0, transport: httpx.BaseTransport | None = None) -> None:
        self._client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s, transport=transport)

    def read(self) -> tuple[GpuSample, ...]:
        """The simulator's readings; empty when it does not answer (a failed read is a gap, not an error)."""
        try:
            response = self._client.get("/sim/telemetry")
            data = response.json() if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return ()
        return tuple(parse_sim_gpu(g) for g in data.get("gpus", ()) if isinstance(g, dict))

    def close(self) -> None:
        self._client.close()


def simulated_inventory(url: str, *, timeout_s: float = 2.0,
                        transport: httpx.BaseTransport | None = None) -> list[GpuInfo] | None:
    """The simulator's GPUs as ``gpu_inventory`` reports real ones, or None when it does not answer. It has
    no driver and no clocks to set: both read "simulated", so two measurements on it still compare."""
    try:
        with httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s, transport=transport) as client:
            response = client.get("/sim/telemetry")
            data = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("simulated"):
        return None
    out = []
    for g in data.get("gpus", ()):
        if isinstance(g, dict):
            sample = parse_sim_gpu(g)
            out.append(GpuInfo(index=sample.index, name=f"{g.get('name') or 'unknown'} (simulated)",
                               compute_capability=None, memory_gb=sample.mem_total_gb or 0.0,
                               power_limit_w=sample.power_limit_w, driver_version="simulated",
                               clocks_policy="simulated"))
    return out


def parse_sim_gpu(g: dict[str, Any]) -> GpuSample:
    """One GPU of the simulator's ``/sim/telemetry`` answer."""

    def num(key: str) -> float | None:
        value = g.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return GpuSample(
        index=int(g.get("index", 0)),
        power_w=num("power_w"),
        power_limit_w=num("power_limit_w"),
        sm_util_pct=num("sm_util_pct"),
        mem_used_gb=num("mem_used_gb"),
        mem_total_gb=num("mem_total_gb"),
    )
