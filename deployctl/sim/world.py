"""The world model (world.yaml) and the simulated host read from the environment (contract §2)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

_WORLD = Path(__file__).with_name("world.yaml")


@lru_cache(maxsize=1)
def world() -> dict[str, Any]:
    """The shipped world.yaml, or SGLANG_SIM_WORLD's file (an operator's own GPUs and models)."""
    return yaml.safe_load(Path(os.environ.get("SGLANG_SIM_WORLD") or _WORLD).read_text())


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str   # "sm120"
    memory_gb: float
    total_gib: float
    power_limit_w: float
    idle_w: float
    pcie_only: bool
    moe_configs_shipped: bool

    @property
    def sm_major(self) -> int:
        return int(self.compute_capability.removeprefix("sm")) // 10


@dataclass(frozen=True)
class Host:
    gpu: Gpu
    count: int
    p2p: bool


def _lookup_gpu(name: str | None) -> dict[str, Any]:
    gpus = world()["gpus"]
    if not name:
        return gpus[world()["default_gpu"]]
    wanted = name.lower()
    for key, gpu in gpus.items():
        if wanted == key or key in wanted.replace(" ", "-") or wanted in gpu["name"].lower():
            return gpu
    return {**gpus[world()["default_gpu"]], "name": name}


def host_from_env(env: Mapping[str, str] = os.environ) -> Host:
    """SGLANG_SIM_GPU_* describe the host; anything unset falls back to the world's default GPU."""
    base = _lookup_gpu(env.get("SGLANG_SIM_GPU_NAME"))
    memory_gb = float(env.get("SGLANG_SIM_GPU_MEMORY_GB", base["memory_gb"]))
    total_gib = base["total_gib"] * memory_gb / base["memory_gb"]
    gpu = Gpu(
        name=base["name"],
        compute_capability=env.get("SGLANG_SIM_COMPUTE_CAPABILITY", base["compute_capability"]).lower(),
        memory_gb=memory_gb,
        total_gib=round(total_gib, 2),
        power_limit_w=float(env.get("SGLANG_SIM_POWER_LIMIT_W", base["power_limit_w"])),
        idle_w=float(base["idle_w"]),
        pcie_only=bool(base["pcie_only"]),
        moe_configs_shipped=bool(base["moe_configs_shipped"]),
    )
    count = int(env.get("SGLANG_SIM_GPU_COUNT", world()["default_gpu_count"]))
    p2p = env.get("SGLANG_SIM_P2P", "0" if gpu.pcie_only else "1") == "1"
    return Host(gpu=gpu, count=count, p2p=p2p)
