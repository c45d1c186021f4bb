"""Telemetry: summaries of recorded samples (a real H200 run), the no-GPU path, the sources."""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path

import httpx
import pynvml
import pytest

from deployctl.adapters import gpu as gpu_adapter
from deployctl.adapters.gpu import (
    GpuInfo,
    SimulatedGpus,
    gpu_inventory,
    open_nvml,
    parse_sim_gpu,
    simulated_inventory,
    throttle_names,
)
from deployctl.bench.result import LevelTelemetry
from deployctl.preflight.hostfacts import GpuSpeedFacts, speed_facts
from deployctl.bench.telemetry import (
    GpuSample,
    ProcSample,
    Sample,
    render_telemetry,
    samples_from_dicts,
    samples_to_dicts,
    summarize,
)
from deployctl.load.telemetry import TelemetrySampler

DATA = Path(__file__).resolve().parents[1] / "data" / "telemetry"


@pytest.fixture(scope="module")
def h200():
    data = json.loads((DATA / "h200-idle-load-idle.json").read_text())
    phases = {p["name"]: (p["start"], p["end"]) for p in data["phases"]}
    return samples_from_dicts(data["samples"]), phases


def test_h200_idle_is_low_power_and_zero_utilisation(h200):
    samples, phases = h200
    start, end = phases["idle before"]
    t = summarize(samples, start, end, source="nvml")
    assert t.gpu_power_w < 100 and t.gpu_power_limit_w == 700.0
    assert t.gpu_util_pct == 0.0
    assert t.details["per_gpu"][0]["throttle_share"] == {"gpu_idle": 1.0}
    assert render_telemetry(t).startswith("GPU power 78 W of 700 W (11 %), SM 0 %")


def test_h200_under_matmul_load_runs_at_its_power_cap(h200):
    samples, phases = h200
    start, end = phases["matmul load"]
    # Steady state: the last 12 s of the load phase (its start is torch's import and CUDA init).
    t = summarize(samples, end - 12, end, source="nvml")
    assert t.gpu_power_w > 600 and t.gpu_util_pct >= 95
    gpu0 = t.details["per_gpu"][0]
    assert gpu0["throttle_share"]["sw_power_cap"] >= 0.9
    assert gpu0["sm_clock_mhz"] < 1980 and gpu0["temperature_c_max"] > 40
    assert t.process_cpu_pct > 50 and t.process_count == 1
    whole = summarize(samples, start, end, source="nvml")
    assert t.gpu_power_w > whole.gpu_power_w > summarize(samples, *phases["idle before"], source="nvml").gpu_power_w


def test_a_window_with_no_samples_is_empty_not_an_error(h200):
    samples, _ = h200
    t = summarize(samples, 0.0, 1.0, source="nvml")
    assert t.gpu_power_w is None and t.details["samples"] == 0
    assert render_telemetry(t) == ""


def gpus(power: float, util: float, n: int = 8, limit: float = 600.0) -> tuple[GpuSample, ...]:
    return tuple(GpuSample(index=i, power_w=power, power_limit_w=limit, sm_util_pct=util, mem_used_gb=90.0)
                 for i in range(n))


def test_multi_gpu_figures_are_per_gpu_with_the_total_in_details():
    samples = [Sample(t=float(t), gpus=gpus(250.0, 61.0)) for t in range(10)]
    t = summarize(samples, 0, 9, source="nvml")
    assert (t.gpu_power_w, t.gpu_power_limit_w, t.gpu_util_pct) == (250.0, 600.0, 61.0)
    assert t.details["power_w_total"] == 2000.0 and t.details["gpus"] == 8
    assert render_telemetry(t) == "GPU power 250 W of 600 W (42 %), SM 61 %"


def test_simulated_figures_are_labelled_simulated():
    t = summarize([Sample(t=1.0, gpus=gpus(125.0, 30.0))], 0, 2, source="simulated")
    assert render_telemetry(t) == "GPU power 125 W of 600 W (21 %), SM 30 % (simulated)"


def test_no_gpu_reports_the_process_only_and_keeps_the_reason():
    samples = [Sample(t=float(t), process=ProcSample(cpu_pct=310.0 if t else None, rss_gb=12.25, threads=90,
                                                     processes=11)) for t in range(3)]
    t = summarize(samples, 0, 3, source="unavailable", unavailable="NVML library not found")
    assert t.source == "unavailable" and t.gpu_power_w is None
    assert t.details["gpu_unavailable"] == "NVML library not found"
    assert render_telemetry(t) == "server CPU 310 %, RSS 12.2 GB in 11 processes"
    assert t.details["process_threads"] == 90


def test_a_small_server_reads_in_mb_not_as_zero_gb():
    # the simulator's one process: about 40 MB, which read "RSS 0.0 GB in 1 processes" on every trial
    samples = [Sample(t=float(t), process=ProcSample(cpu_pct=4.0, rss_gb=0.0404, threads=3, processes=1)) for t in range(3)]
    assert render_telemetry(summarize(samples, 0, 3, source="simulated")) == "server CPU 4 %, RSS 41 MB in 1 process"


def test_render_of_nothing_is_empty():
    assert render_telemetry(None) == ""
    assert render_telemetry(LevelTelemetry(source="client", details={"client": {}})) == ""


def test_samples_round_trip_through_json(h200):
    samples, _ = h200
    again = samples_from_dicts(json.loads(json.dumps(samples_to_dicts(samples))))
    assert again == samples


def test_throttle_mask_names():
    assert throttle_names(0x4) == ("sw_power_cap",)
    assert throttle_names(0x1 | 0x40) == ("gpu_idle", "hw_thermal")
    assert throttle_names(0) == ()


# --- the no-NVML path ---------------------------------------------------------------------------


@pytest.fixture
def no_nvml(monkeypatch):
    def fail() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    monkeypatch.setattr(gpu_adapter, "_unavailable_logged", threading.Event())


def test_without_nvml_there_is_no_inventory_and_it_is_said_once(no_nvml, caplog):
    caplog.set_level(logging.INFO, logger="deployctl")
    assert gpu_inventory() is None
    session, reason = open_nvml()
    assert session is None and reason == "NVML library not found (no NVIDIA driver on this host)"
    said = [r for r in caplog.records if "GPU telemetry unavailable" in r.getMessage()]
    assert len(said) == 1


def test_a_sampler_without_nvml_still_samples_processes(no_nvml):
    sampler = TelemetrySampler.for_server(pid=os.getpid(), interval_s=0.01)
    assert sampler.source == "unavailable" and sampler.unavailable.startswith("NVML library not found")
    first, second = sampler.sample_once(), sampler.sample_once()
    assert first.gpus == () and second.process.processes >= 1
    t = sampler.window(first.t, second.t)
    assert t.source == "unavailable" and t.process_rss_gb > 0
    assert sampler.stop() == [first, second]


# --- NVML with a scripted library ---------------------------------------------------------------


class FakeNvml:
    """Enough of pynvml for one GPU: the units NVML uses (mW, bytes, KB/s, a bit mask)."""

    def __init__(self, monkeypatch):
        util = type("U", (), {"gpu": 61, "memory": 40})()
        mem = type("M", (), {"used": 90 * 1024**3, "total": 96 * 1024**3})()
        calls = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: 1,
            "nvmlDeviceGetHandleByIndex": lambda i: f"h{i}",
            "nvmlDeviceGetUtilizationRates": lambda h: util,
            "nvmlDeviceGetMemoryInfo": lambda h: mem,
            "nvmlDeviceGetPowerUsage": lambda h: 250_000,
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: 600_000,
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4,
            "nvmlDeviceGetPcieThroughput": self._pcie,
            "nvmlDeviceGetClockInfo": lambda h, kind: 2100 if kind == pynvml.NVML_CLOCK_SM else 14000,
            "nvmlDeviceGetTemperature": lambda h, kind: 71,
            "nvmlDeviceGetCudaComputeCapability": lambda h: (12, 0),
            "nvmlDeviceGetName": lambda h: "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "nvmlDeviceGetUUID": lambda h: "GPU-1",
            "nvmlSystemGetDriverVersion": lambda: "580.95.05",
            "nvmlDeviceGetClock": lambda h, kind, which: self.app_clocks.get((kind, which), 1500),
        }
        self.app_clocks: dict[tuple[int, int], int] = {}  # (clock, NVML_CLOCK_ID_*) → MHz; else the default
        for name, fn in calls.items():
            monkeypatch.setattr(pynvml, name, fn)
        self.pcie_supported = True

    def _pcie(self, h, counter):
        if not self.pcie_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 12_000 if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else 3_000


def test_nvml_inventory_converts_units(monkeypatch):
    FakeNvml(monkeypatch)
    [info] = gpu_inventory()
    assert info.compute_capability == "sm120" and info.memory_gb == 96.0 and info.power_limit_w == 600.0
    assert info.name.startswith("NVIDIA RTX PRO 6000") and info.driver_version == "580.95.05"


def test_nvml_clocks_policy_is_default_until_someone_sets_application_clocks(monkeypatch):
    fake = FakeNvml(monkeypatch)
    assert gpu_inventory()[0].clocks_policy == "default"
    fake.app_clocks[(pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_ID_APP_CLOCK_TARGET)] = 1980
    assert gpu_inventory()[0].clocks_policy == "application clocks SM 1980 MHz"


def test_simulated_inventory_is_labelled_simulated_and_a_silent_simulator_is_unknown():
    body = {"simulated": True, "gpus": [{"index": i, "name": "NVIDIA H200", "power_limit_w": 700,
                                         "mem_total_gb": 139.8} for i in range(2)]}
    found = simulated_inventory("http://sim", transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    assert [(g.name, g.power_limit_w, g.driver_version, g.clocks_policy) for g in found] == \
        [("NVIDIA H200 (simulated)", 700.0, "simulated", "simulated")] * 2

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    assert simulated_inventory("http://sim", transport=httpx.MockTransport(refused)) is None


def test_speed_facts_name_count_and_board_and_take_the_lowest_power_limit():
    h200 = GpuInfo(0, "NVIDIA H200", "sm90", 139.8, 700.0, driver_version="570.86", clocks_policy="default")
    facts = speed_facts([h200, replace(h200, index=1, power_limit_w=600.0)])
    assert facts == GpuSpeedFacts("2× NVIDIA H200", "570.86", 600.0, "default")
    assert speed_facts([h200, replace(h200, clocks_policy=None)]).clocks_policy is None  # unknown: never matches
    assert speed_facts(None) == GpuSpeedFacts()


def test_nvml_sample_converts_units_and_unsupported_readings_are_none(monkeypatch):
    fake = FakeNvml(monkeypatch)
    session, reason = open_nvml()
    assert reason is None
    [g] = session.read()
    assert (g.power_w, g.power_limit_w, g.sm_util_pct, g.mem_used_gb) == (250.0, 600.0, 61.0, 90.0)
    assert (g.sm_clock_mhz, g.mem_clock_mhz, g.temperature_c) == (2100.0, 14000.0, 71.0)
    assert g.throttle_reasons == ("sw_power_cap",) and (g.pcie_tx_mb_s, g.pcie_rx_mb_s) == (12.0, 3.0)
    fake.pcie_supported = False
    [g] = session.read()
    assert g.pcie_tx_mb_s is None and g.power_w == 250.0
    session.close()


def test_the_sampler_thread_collects_until_stopped(monkeypatch):
    FakeNvml(monkeypatch)
    sampler = TelemetrySampler.for_server(interval_s=0.01).start()
    got = threading.Event()
    for _ in range(200):
        if len(sampler.samples()) >= 3:
            got.set()
            break
        threading.Event().wait(0.01)
    samples = sampler.stop()
    assert got.is_set() and sampler.source == "nvml"
    assert all(s.gpus[0].power_w == 250.0 for s in samples)
    assert len(sampler.samples()) == len(samples)  # nothing after stop


# --- the simulator's endpoint -------------------------------------------------------------------


def test_simulated_gpus_read_the_sim_endpoint():
    body = {"simulated": True, "gpus": [
        {"index": i, "name": "NVIDIA RTX PRO 6000", "power_w": 250.0, "power_limit_w": 600,
         "sm_util_pct": 61.0, "mem_used_gb": 88.5, "mem_total_gb": 95.6} for i in range(8)]}

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/sim/telemetry"
        return httpx.Response(200, json=body)

    source = SimulatedGpus("http://sim", transport=httpx.MockTransport(handler))
    sampler = TelemetrySampler(source)
    sample = sampler.sample_once()
    assert len(sample.gpus) == 8 and sample.gpus[3].power_limit_w == 600.0
    t = sampler.window(sample.t - 1, sample.t + 1)
    assert render_telemetry(t) == "GPU power 250 W of 600 W (42 %), SM 61 % (simulated)"
    sampler.stop()


def test_simulated_source_that_does_not_answer_is_a_gap():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    source = SimulatedGpus("http://sim", transport=httpx.MockTransport(handler))
    assert source.read() == ()
    source.close()


def test_parse_sim_gpu_ignores_non_numbers():
    g = parse_sim_gpu({"index": 2, "power_w": "n/a", "power_limit_w": 600, "sm_util_pct": True})
    assert (g.index, g.power_w, g.power_limit_w, g.sm_util_pct) == (2, None, 600.0, None)


class SteadyGpu:
    name = "simulated"

    def read(self) -> tuple[GpuSample, ...]:
        return gpus(250.0, 61.0, n=1)

    def close(self) -> None:
        pass


def test_a_trial_shorter_than_the_sampling_interval_still_gets_a_reading():
    clock = iter(float(t) for t in range(100, 200))
    sampler = TelemetrySampler(SteadyGpu(), interval_s=60.0, clock=lambda: next(clock))
    t = sampler.window(50.0, 50.4)
    assert t.gpu_power_w == 250.0 and t.details["samples"] == 1
