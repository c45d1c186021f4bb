"""GPU and process telemetry as values: one reading, and the per-level summary a benchmark level carries.

The incidents' real clue was power: 250 W of a 600 W limit under load (GPUs starved, not busy), then
125 W after the bad patch. So every level carries a summary such as ``GPU power 250 W of 600 W (42 %),
SM 61 %``. ``summarize`` is pure and tested on recorded samples (tests/data/telemetry/); the sampler that
takes the readings is ``deployctl.load.telemetry``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import fmean
from typing import Any, Iterable

from deployctl.bench.result import LevelTelemetry


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one instant. Fields a source cannot read are None."""

    index: int
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_gb: float | None = None
    mem_total_gb: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    pcie_tx_mb_s: float | None = None
    pcie_rx_mb_s: float | None = None


@dataclass(frozen=True)
class ProcSample:
    cpu_pct: float | None  # over all processes since the previous reading; 100 = one core; None at first
    rss_gb: float
    threads: int
    processes: int


@dataclass(frozen=True)
class Sample:
    t: float  # epoch seconds, the clock benchmark trials are stamped with
    gpus: tuple[GpuSample, ...] = ()
    process: ProcSample | None = None


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
        parts.append(f"RSS {_memory(t.process_rss_gb)}" + (
            f" in {t.process_count} process{'' if t.process_count == 1 else 'es'}" if t.process_count else ""))
    return ", ".join(parts)


def _memory(gb: float) -> str:
    # A small server (the simulator: about 40 MB) read "0.0 GB" in GB with one decimal.
    return f"{gb:.1f} GB" if gb >= 1 else f"{gb * 1024:.0f} MB"


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
