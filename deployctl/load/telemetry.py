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
from typing import Callable, Protocol, Sequence

from deployctl.adapters.gpu import SimulatedGpus, open_nvml
from deployctl.adapters.procs import ProcessTree
from deployctl.bench.result import LevelTelemetry
from deployctl.bench.telemetry import GpuSample, ProcSample, Sample, summarize

DEFAULT_INTERVAL_S = 0.5  # 2 Hz: NVML's power average itself spans about a second


class GpuSource(Protocol):
    name: str

    def read(self) -> tuple[GpuSample, ...]: ...

    def close(self) -> None: ...


class ProcessSource(Protocol):
    def read(self) -> ProcSample | None: ...

    def close(self) -> None: ...


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


