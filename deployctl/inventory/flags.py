"""The SGLang flags whose value type deployctl checks, and the flags an inventory may not set directly.

A small table of well-known flags, not SGLang's whole CLI (that is the preflight's catalogue). The point
is to catch the common slip — ``tp: eight``, ``disable-cuda-graph: 1``, ``attention-backend: true`` —
at ``validate`` time with the file and line, instead of minutes later in a journal. Any other flag
passes as the text written in the inventory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["int", "float", "switch", "value"]


@dataclass(frozen=True)
class FlagType:
    kind: Kind
    minimum: float | None = None
    maximum: float | None = None
    # True when the minimum itself is not allowed (mem-fraction-static > 0).
    exclusive_minimum: bool = False


_POSITIVE = FlagType("int", minimum=1)
_NON_NEGATIVE = FlagType("int", minimum=0)
_SWITCH = FlagType("switch")
_VALUE = FlagType("value")

KNOWN_FLAGS: dict[str, FlagType] = {
    # parallelism
    **dict.fromkeys(["tp", "tp-size", "tensor-parallel-size", "dp", "dp-size", "data-parallel-size",
                     "pp-size", "pipeline-parallel-size", "ep", "ep-size", "expert-parallel-size",
                     "nnodes"], _POSITIVE),
    "node-rank": _NON_NEGATIVE,
    # capacity and memory
    **dict.fromkeys(["max-running-requests", "max-total-tokens", "max-prefill-tokens", "chunked-prefill-size",
                     "context-length", "page-size", "cuda-graph-max-bs", "max-mamba-cache-size"], _POSITIVE),
    "mem-fraction-static": FlagType("float", minimum=0, maximum=1, exclusive_minimum=True),
    "mamba-full-memory-ratio": FlagType("float", minimum=0, exclusive_minimum=True),
    "schedule-conservativeness": FlagType("float", minimum=0, exclusive_minimum=True),
    "watchdog-timeout": FlagType("float", minimum=0, exclusive_minimum=True),
    "random-seed": _NON_NEGATIVE,
    # speculative decoding
    "speculative-algorithm": _VALUE,
    **dict.fromkeys(["speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"], _POSITIVE),
    # backends and formats: a value, never a bare switch
    **dict.fromkeys(["attention-backend", "quantization", "kv-cache-dtype", "moe-runner-backend",
                     "fp8-gemm-backend", "nsa-decode-backend", "nsa-prefill-backend", "reasoning-parser",
                     "tool-call-parser", "mamba-scheduler-strategy", "host", "load-format", "dtype",
                     "log-level"], _VALUE),
    # switches (store_true): true passes the bare flag, false leaves it out
    **dict.fromkeys(["trust-remote-code", "disable-cuda-graph", "disable-radix-cache",
                     "disable-piecewise-cuda-graph", "enable-piecewise-cuda-graph",
                     "enable-flashinfer-allreduce-fusion", "enforce-disable-flashinfer-allreduce-fusion",
                     "enable-fused-moe-sum-all-reduce", "enable-torch-compile", "enable-dp-attention",
                     "disable-overlap-schedule", "enable-mixed-chunk", "enable-metrics",
                     "disable-custom-all-reduce", "skip-server-warmup"], _SWITCH),
}

# Spellings of one SGLang option (argparse aliases and the unique prefixes operators use).
ALIASES: tuple[frozenset[str], ...] = (
    frozenset({"tp", "tp-size", "tensor-parallel-size"}),
    frozenset({"dp", "dp-size", "data-parallel-size"}),
    frozenset({"pp-size", "pipeline-parallel-size"}),
    frozenset({"ep", "ep-size", "expert-parallel-size"}),
)

# Flags that come from elsewhere in the inventory, so that each fact has exactly one home.
RESERVED_FLAGS: dict[str, str] = {
    "port": "the port is set once per deployment: deployments.NAME.port",
    "model-path": "the model comes from the preset: models.PRESET.path",
    "model": "the model comes from the preset: models.PRESET.path (--model is SGLang's alias of --model-path)",
    "served-model-name": "the served name comes from the preset: models.PRESET.served_name",
}

# Environment variables deployctl sets itself.
RESERVED_ENV: dict[str, str] = {
    **dict.fromkeys(
        ["SGLANG_SIM_GPU_NAME", "SGLANG_SIM_GPU_COUNT", "SGLANG_SIM_COMPUTE_CAPABILITY",
         "SGLANG_SIM_GPU_MEMORY_GB", "SGLANG_SIM_POWER_LIMIT_W", "SGLANG_SIM_P2P"],
        "simulated hardware facts come from the host entry (hosts.NAME.gpus, hosts.NAME.p2p)",
    ),
}
