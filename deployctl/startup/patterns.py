"""The texts SGLang prints at startup, and the values read from each (pure).

Each reader takes one record's message and returns a value or None; none of them keeps state. The
format strings, per version, with their SGLang source: docs/startup.md (from the wheels' code).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from deployctl.startup.report import KvCache, MoeWarning

# Scheduler summary, read key by key: 0.3.x has no chunked_prefill_size=, 0.3.x/0.4.3 no available_gpu_mem=
# (0.3.2 managers/tp_worker.py:149, 0.4.3 managers/scheduler.py:283, 0.5.4 :377, 0.5.9 :622).
SUMMARY_KEY_RE = re.compile(r"(\w+)=(-?[\d.]+)")
CAPTURE_RE = re.compile(r"^Capture ((?:[a-z]+ ){0,2})(?:cuda|CUDA) graph (begin|end)\b(.*)$")
# The whole list only: a line cut inside it ("[1, 2, 4, 8, 1") would turn 16 into 1.
CAPTURE_BS_LIST_RE = re.compile(r"^Capture ((?:[a-z]+ ){0,2})(?:cuda|CUDA) graph bs \[([\d, ]*)\]")
CAPTURE_END_BS_RE = re.compile(r"bs=\[([\d, ]*)\]")
ELAPSED_RE = re.compile(r"(?:Time elapsed: |elapsed=)([\d.]+) ?s")
CAPTURING_BS_RE = re.compile(r"Capturing batches \(bs=(\d+)")
KV_RE = re.compile(
    r"KV Cache is allocated\. (?:dtype: ([^,]+), )?(?:#tokens: (-?\d+), )?"
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)
# 0.5.10+ "Load weight end. elapsed=…, type=…, quant=modelopt_fp4, quant_algo=NVFP4, avail mem=…".
QUANT_RE = re.compile(r"\bquant=([\w.-]+)(?:, quant_algo=([\w.-]+))?")
MAMBA_RE = re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+)")
LOAD_END_RE = re.compile(r"Load weight end\. (elapsed=([\d.]+) s, )?type=([\w.]+), (dtype=)?.*?avail mem=([\d.]+) GB"
                         r"(?:, mem usage=([\d.]+) GB)?")
# The file name may hold a space (block_shape=[128, 128]), so the path ends at the first ".json".
MOE_PATH_RE = re.compile(r"[Cc]onfig file not found at (.+?\.json)")
MOE_FILE_RE = re.compile(
    r"^E=(\d+),N=(\d+),device_name=(.+?)(?:,dtype=([^,]+?))?(?:,block_shape=(\[[^\]]*\]))?"
    r"(,per_channel_quant=True)?(_down)?\.json$"
)
ACCESS_RE = re.compile(r'"(GET|POST) (\S+) HTTP/[\d.]+" (\d{3})')
LISTEN_RE = re.compile(r"Uvicorn running on (\S+)")
FLAG_RE = re.compile(r"--[a-z][a-z0-9-]+")
OPTION_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]+)")
# A negative token budget is a failure on its way (E pool_configurator: "Not enough memory" follows).
NEGATIVE_BUDGET_RE = re.compile(r"\b(max_total_num_tokens|full_layer_tokens|swa_layer_tokens|#tokens:?)[= ](-\d+)")
WARMUP_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions", "/encode", "/v1/embeddings")


class Summary(NamedTuple):
    max_total_num_tokens: int
    chunked_prefill_size: int | None
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    available_gpu_mem_gb: float | None
    keys: frozenset[str]


def read_summary(msg: str) -> Summary | None:
    """``max_total_num_tokens=…, [chunked_prefill_size=…, ]max_prefill_tokens=…, max_running_requests=…,
    context_len=…[, available_gpu_mem=… GB]``; None unless the four keys every version prints are there."""
    values = dict(SUMMARY_KEY_RE.findall(msg))
    try:
        mem = values.get("available_gpu_mem") or values.get("available_cpu_mem")
        chunked = values.get("chunked_prefill_size")
        return Summary(int(values["max_total_num_tokens"]), int(chunked) if chunked is not None else None,
                       int(values["max_prefill_tokens"]), int(values["max_running_requests"]),
                       int(values["context_len"]), float(mem) if mem is not None else None, frozenset(values))
    except (KeyError, ValueError):
        return None


def read_kv(msg: str) -> KvCache | None:
    """0.4.3 prints no ``#tokens`` (the scheduler summary has them); 0.5.23 adds ``dtype:``."""
    match = KV_RE.search(msg)
    if not match:
        return None
    dtype, tokens, k, v, kv = match.groups()
    return KvCache(int(tokens) if tokens is not None else None, dtype=dtype, k_gb=float(k) if k else None,
                   v_gb=float(v) if v else None, kv_gb=float(kv) if kv else None)


class Capture(NamedTuple):
    key: str  # target_decode | target_prefill | draft_decode | draft_extend
    begin: bool
    seconds: float | None
    batch_sizes: list[int] | None


def read_capture(msg: str) -> Capture | None:
    match = CAPTURE_RE.match(msg)
    if not match:
        return None
    words = match.group(1).split()
    role = "draft" if "draft" in words else "target"
    if "extend" in words:
        kind = "extend"
    elif "piecewise" in words or "prefill" in words:
        kind = "prefill"
    else:
        kind = "decode"  # "verify" is the target decode graph with speculative decoding (0.5.23)
    if match.group(2) == "begin":
        return Capture(f"{role}_{kind}", True, None, None)
    rest = match.group(3)
    elapsed = ELAPSED_RE.search(rest)
    listed = CAPTURE_END_BS_RE.search(rest)
    sizes = [int(x) for x in listed.group(1).split(",")] if listed and listed.group(1).strip() else None
    return Capture(f"{role}_{kind}", False, float(elapsed.group(1)) if elapsed else None, sizes)


def moe_warning(msg: str) -> dict[str, Any] | None:
    """The fields of a ``MoeWarning`` (ranks aside) from an untuned-kernel warning."""
    match = MOE_PATH_RE.search(msg)
    if not match:
        return None
    path = match.group(1)
    directory, _, name = path.rpartition("/")
    triton_dir = directory.rpartition("/")[2] if directory else None
    if name.endswith("_down.json") or msg.startswith("Down MoE config"):
        kind = "down_config_missing_using_up_or_default"
    elif "Fallback to triton version" in msg:
        kind = "fallback_other_triton_version"
    else:
        kind = "default_config"
    entry: dict[str, Any] = {"kind": kind, "config_file": name, "path": path,
                             "triton_dir": triton_dir if triton_dir and triton_dir.startswith("triton_") else None}
    parts = MOE_FILE_RE.match(name)
    if parts:
        e, n, device, dtype, block, per_channel, down = parts.groups()
        entry.update(E=int(e), N=int(n), device_name=device, dtype=dtype, block_shape=block,
                     per_channel_quant=bool(per_channel), down=bool(down))
    return entry


def freeze_moe(entry: dict[str, Any]) -> MoeWarning:
    return MoeWarning(**{**entry, "ranks": tuple(sorted(entry["ranks"]))})
