"""GPU and process telemetry during a benchmark: a background sampler and per-level summaries.

The incidents' real clue was power: 250 W of a 600 W limit under load (GPUs starved, not busy), then
125 W after the bad patch. So every benchmark level carries a summary such as
``GPU power 250 W of 600 W (42 %), SM 61 %``, and the raw samples are kept for the ledger.

    sampler = TelemetrySampler.for_server(url, simulated=False, pid=main_pid).start()
    result = await run_sweep(url, policy, telemetry=sampler.window)   # a LevelTelemetry per trial
    samples = sampler.stop()                                          # raw, for the ledger
    if sampler.unavailable: print(f"GPU telemetry unavailable: {sampler.unavailable}")   # once

Sources: NVML (``adapters.gpu.Nvml``), the simulator's ``/sim/telemetry`` (labelled "simulated"),
and the server's process tree (``adapters.procs.ProcessTree``). Without NVML the GPU part is
"unavailable", said once by the caller, never an error. ``summarize`` is pure and tested on recorded
samples (tests/data/telemetry/).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from statistics import fmean
from typing import Any, Callable, Iterable, Protocol, Sequence

from deployctl.adapters.gpu import GpuSample, SimulatedGpus, open_nvml
from deployctl.adapters.procs import ProcessTree, ProcSample
from deployctl.benchresult import LevelTelemetry

DEFAULT_INTERVAL_S = 0.5  # 2 Hz: NVML's power average itself spans about a second


class GpuSource(Protocol):
    name: str

    def read(self) -> tuple[GpuSample, ...]: ...

    def close(self) -> None: ...


class ProcessSource(Protocol):
    def read(self) -> ProcSample | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Sample:
    t: float  # epoch seconds, the clock benchmark trials are stamped with
    gpus: tuple[GpuSample, ...] = ()
    process: ProcSample | None = None


class TelemetrySampler:
    """Reads its sources every ``interval_s`` in a daemon thread between ``start()`` and ``stop()``."""

    def __init__(
        self,
        gpu: GpuSource | None = None,
        process: ProcessSource | None = None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        unavailable: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.gpu = gpu
        self.process = process
        self.interval_s = interval_s
        # Why there is no GPU source ("NVML library not found …"), for the caller to say once.
        self.unavailable = unavailable if gpu is None else None
        self._clock = clock
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_server(
        cls,
        url: str | None = None,
        *,
        simulated: bool = False,
        pid: int | None = None,
        cgroup: str | None = None,
        gpu_indices: Sequence[int] | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> "TelemetrySampler":
        """The usual sources: the simulator's endpoint for a simulated host, else NVML; plus the
        server's processes when its MainPID or cgroup is known."""
        gpu: GpuSource | None
        reason = None
        if simulated:
            if url is None:
                raise ValueError("a simulated host's telemetry needs the server's URL")
            gpu = SimulatedGpus(url)
        else:
            gpu, reason = open_nvml(gpu_indices)
        process = ProcessTree(pid=pid, cgroup=cgroup) if pid is not None or cgroup is not None else None
        return cls(gpu, process, interval_s=interval_s, unavailable=reason)

    @property
    def source(self) -> str:
        return self.gpu.name if self.gpu is not None else "unavailable"

    def start(self) -> "TelemetrySampler":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="deployctl-telemetry", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        """Stop sampling, release the sources, return every sample taken."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10 * self.interval_s + 5)
        for source in (self.gpu, self.process):
            if source is not None:
                source.close()
        return self.samples()

    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def window(self, start: float, end: float) -> LevelTelemetry:
        """The summary of [start, end] so far: pass ``sampler.window`` as ``run_sweep(telemetry=…)``."""
        samples = self.samples()
        has_sources = self.gpu is not None or self.process is not None
        if has_sources and not any(start <= s.t <= end for s in samples):
            # A trial shorter than the sampling interval (a time-scaled simulator, a tiny sweep): read the
            # sources now, just after its end, rather than report nothing for it.
            fresh = self.sample_once()
            samples.append(fresh)
            end = max(end, fresh.t)
        return summarize(samples, start, end, source=self.source, unavailable=self.unavailable)

    def sample_once(self) -> Sample:
        gpus = self.gpu.read() if self.gpu is not None else ()
        process = self.process.read() if self.process is not None else None
        sample = Sample(t=self._clock(), gpus=gpus, process=process)
        with self._lock:
            self._samples.append(sample)
        return sample

    def __enter__(self) -> "TelemetrySampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))


def summarize(
    samples: Iterable[Sample], start: float, end: float, *, source: str, unavailable: str | None = None
) -> LevelTelemetry:
    """Per-level figures from the samples taken in [start, end].

    GPU figures are per GPU, averaged over the GPUs and the samples (so "250 W of 600 W" reads as the
    incident's operators said it); ``details`` holds the total, each GPU's figures, clocks, maximum
    temperature, the share of samples under each throttle reason, PCIe throughput, and the process
    tree's peak thread and process counts.
    """
    window = [s for s in samples if start <= s.t <= end]
    gpu_rows = [g for s in window for g in s.gpus]
    procs = [s.process for s in window if s.process is not None]
    details: dict[str, Any] = {"samples": len(window), "window_s": round(end - start, 3)}
    if unavailable:
        details["gpu_unavailable"] = unavailable
    per_gpu = _per_gpu(window)
    if per_gpu:
        details["gpus"] = len(per_gpu)
        details["per_gpu"] = per_gpu
        totals = [sum(g.power_w for g in s.gpus if g.power_w is not None) for s in window if s.gpus]
        if any(g.power_w is not None for g in gpu_rows):
            details["power_w_total"] = round(fmean(totals), 1)
    cpu = [p.cpu_pct for p in procs if p.cpu_pct is not None]
    if procs:
        details["process_threads"] = max(p.threads for p in procs)
    return LevelTelemetry(
        source=source,
        gpu_power_w=_mean(g.power_w for g in gpu_rows),
        gpu_power_limit_w=_mean(g.power_limit_w for g in gpu_rows),
        gpu_util_pct=_mean(g.sm_util_pct for g in gpu_rows),
        gpu_mem_used_gb=_mean(g.mem_used_gb for g in gpu_rows),
        process_cpu_pct=round(fmean(cpu), 1) if cpu else None,
        process_rss_gb=round(max(p.rss_gb for p in procs), 3) if procs else None,
        process_count=max(p.processes for p in procs) if procs else None,
        details=details,
    )


def _per_gpu(window: list[Sample]) -> list[dict[str, Any]]:
    by_index: dict[int, list[GpuSample]] = {}
    for s in window:
        for g in s.gpus:
            by_index.setdefault(g.index, []).append(g)
    out = []
    for index, rows in sorted(by_index.items()):
        entry: dict[str, Any] = {"index": index}
        for key in ("power_w", "power_limit_w", "sm_util_pct", "mem_util_pct", "mem_used_gb", "sm_clock_mhz",
                    "mem_clock_mhz", "pcie_tx_mb_s", "pcie_rx_mb_s"):
            value = _mean(getattr(g, key) for g in rows)
            if value is not None:
                entry[key] = value
        temps = [g.temperature_c for g in rows if g.temperature_c is not None]
        if temps:
            entry["temperature_c_max"] = max(temps)
        reasons: dict[str, float] = {}
        for g in rows:
            for r in g.throttle_reasons:
                reasons[r] = reasons.get(r, 0) + 1
        if reasons:
            entry["throttle_share"] = {r: round(n / len(rows), 3) for r, n in sorted(reasons.items())}
        out.append(entry)
    return out


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(fmean(present), 1) if present else None


def render_telemetry(t: LevelTelemetry | None) -> str:
    """One line for a benchmark table: ``GPU power 250 W of 600 W (42 %), SM 61 %, server CPU 310 %``.

    Empty when there is nothing to show; "unavailable" is said once by the caller, not on every level.
    """
    if t is None:
        return ""
    parts = []
    if t.gpu_power_w is not None:
        text = f"GPU power {t.gpu_power_w:.0f} W"
        if t.gpu_power_limit_w:
            text += f" of {t.gpu_power_limit_w:.0f} W ({100 * t.gpu_power_w / t.gpu_power_limit_w:.0f} %)"
        parts.append(text)
    if t.gpu_util_pct is not None:
        parts.append(f"SM {t.gpu_util_pct:.0f} %")
    if parts and t.source == "simulated":
        parts[-1] += " (simulated)"
    if t.process_cpu_pct is not None:
        parts.append(f"server CPU {t.process_cpu_pct:.0f} %")
    if t.process_rss_gb is not None:
        parts.append(f"RSS {t.process_rss_gb:.1f} GB in {t.process_count} processes")
    return ", ".join(parts)


def samples_to_dicts(samples: Iterable[Sample]) -> list[dict[str, Any]]:
    """Raw samples as plain JSON, for the ledger."""
    return [asdict(s) for s in samples]


def samples_from_dicts(data: Iterable[dict[str, Any]]) -> list[Sample]:
    out = []
    for d in data:
        gpus = tuple(
            GpuSample(**{**g, "throttle_reasons": tuple(g.get("throttle_reasons", ()))}) for g in d.get("gpus", ())
        )
        proc = ProcSample(**d["process"]) if d.get("process") else None
        out.append(Sample(t=float(d["t"]), gpus=gpus, process=proc))
    return out
