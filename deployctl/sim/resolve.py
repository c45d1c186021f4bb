"""Resolve a command line the way SGLang's ServerArgs and ModelRunner would (pure, no I/O).

The result carries everything the log, the HTTP API and the throughput model need: the resolved
server_args dump, the bare warning lines, the per-rank memory figures, the effective
max_running_requests, CUDA-graph decisions and the MoE kernel-config warnings.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from deployctl.sim.cli import ParsedArgs
from deployctl.sim.world import Host, world

# The simulator's own copy of the ServerArgs field lists (same facts as deployctl/facts), so the
# package stands alone: it reads nothing from the controller.
_FIELDS = Path(__file__).with_name("serverargs-fields.json")


@lru_cache(maxsize=None)
def _field_defaults(version: str) -> tuple[tuple[str, Any], ...]:
    data = json.loads(_FIELDS.read_text())
    return tuple((name, default) for name, default in data[version]["fields"])


@dataclass(frozen=True)
class Memory:
    """Per-rank GiB figures along the startup, as the model-runner lines print them."""

    total: float
    init_usage: float
    avail_load_begin: float
    weights: float
    avail_load_end: float
    pool: float
    kv_tokens: int
    kv_gib: float
    mamba_size: int
    mamba_conv_gib: float
    mamba_ssm_gib: float
    spec_interm_ssm_gib: float
    spec_interm_conv_gib: float
    draft_weights: float
    avail_pool_end: float


@dataclass(frozen=True)
class Resolved:
    version: str
    fmt: dict[str, Any]              # world.yaml versions[version]
    model_path: str
    model: dict[str, Any] | None     # None: not a known model -> model-not-found failure
    server_args: dict[str, Any]
    bare_lines: list[str]
    tp: int
    speculative: bool
    draft_tokens: int
    memory: Memory | None
    failure: str | None              # "oom_kv_cache" when the pool does not fit
    effective_mrr: int
    cuda_graph: bool
    capture_bs: list[int]
    piecewise_disabled: bool
    moe_warnings: list[tuple[str, str]] = field(default_factory=list)  # (kind, config file path)
    custom_allreduce_warning: bool = False
    kv_dtype_torch: str = "torch.bfloat16"


# Fields whose default is None but whose add_argument type is int/float (names say so); every other
# None-default field is a string (paths, names, keys, JSON).
_NUMERIC_NAME = re.compile(r"(size|tokens|requests|length|seed|timeout|fraction|ratio|port|num|_bs|max|min|"
                           r"interval|threshold|_gb|count|rank|step|depth|buckets|layers|topk|breadth|capacity|priority|watermark|bucket|cpuinfer|delimiter)")


def _coerce(default: Any, value: Any, name: str = "") -> Any:
    """argparse gives strings; SGLang's add_argument types turn them into the field's type."""
    if isinstance(value, list):
        inner = default[0] if isinstance(default, list) and default else None
        return [_coerce(inner, v, name) for v in value]
    if not isinstance(value, str):
        return value
    if isinstance(default, bool):
        return value
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    if default is None and _NUMERIC_NAME.search(name):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


def _cuda_graph_bs(version: str, max_bs: int, speculative: bool) -> list[int]:
    if version.startswith("0.4"):
        return [1, 2, 4, 8] + list(range(16, max_bs + 1, 8))
    if speculative:
        bs = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
    else:
        bs = [1, 2, 4, 8, 12] + list(range(16, 257, 8))
    return [b for b in bs + list(range(272, max_bs + 1, 16)) if b <= max_bs]


def _version_at_least(version: str, minimum: str) -> bool:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split(".")[:3] if p.isdigit())
    return key(version) >= key(minimum)


def resolve(version: str, parsed: ParsedArgs, host: Host, env: Mapping[str, str]) -> Resolved:
    w = world()
    fmt = w["versions"][version]
    args: dict[str, Any] = {}
    defaults = _field_defaults(version)
    default_of = dict(defaults)
    for name, default in defaults:
        args[name] = list(default) if isinstance(default, list) else default
    for dest, value in parsed.values.items():
        args[dest] = _coerce(default_of.get(dest), value, dest)
    explicit = parsed.explicit
    bare: list[str] = []
    model_path = args["model_path"]
    # SGLANG_SIM_MODEL lets any --model-path (an operator's own checkpoint) behave like a preset
    model = w["models"].get(env.get("SGLANG_SIM_MODEL") or model_path)
    if model is not None and not _version_at_least(version, model["min_version"]):
        model = None  # an unsupported architecture fails while loading the config, like a missing one

    if args.get("tokenizer_path") is None:
        args["tokenizer_path"] = model_path
    if args.get("served_model_name") is None:
        args["served_model_name"] = model_path
    if "random_seed" in args and args["random_seed"] is None:
        args["random_seed"] = random.Random(env.get("SGLANG_SIM_SEED")).randrange(1 << 30)
    tp = int(args.get("tp_size") or 1)
    gpu = host.gpu
    modern = not version.startswith("0.4")

    # --- speculative decoding (server_args.py _handle_speculative_decoding)
    algo = args.get("speculative_algorithm")
    speculative = algo is not None
    if algo == "NEXTN":
        args["speculative_algorithm"] = "EAGLE"
    spec_v2 = version == "0.5.23" or env.get("SGLANG_ENABLE_SPEC_V2", "0") in ("1", "true", "True")
    if speculative:
        for name, value in (("speculative_num_steps", 3), ("speculative_eagle_topk", 1), ("speculative_num_draft_tokens", 4)):
            if args.get(name) is None:
                args[name] = value
        if "max_running_requests" not in explicit:
            args["max_running_requests"] = w["scheduling"]["speculative_default_max_running_requests"]
            bare.append("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.")
        if spec_v2 and version != "0.5.23":
            bare.append("Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.")
        elif not spec_v2:
            args["disable_overlap_schedule"] = True
    draft_tokens = int(args.get("speculative_num_draft_tokens") or 1) if speculative else 1

    # --- model-specific (DSA/GLM-5), attention defaults
    if model is not None and model.get("dsa") and modern:
        nsa_prefill = "nsa_prefill_backend" if "nsa_prefill_backend" in args else "dsa_prefill_backend"
        nsa_decode = nsa_prefill.replace("prefill", "decode")
        if gpu.sm_major >= 10:
            bare.append(f"Force NSA prefill to use MLA (i.e. disable MHA_ONE_SHOT) for {model['arch']} on Blackwell.")
        dp = "attn_dp_size" if version == "0.5.23" else "dp_size"  # arg_groups/model_hook.py in 0.5.23
        bare.append(f"DSA with TP mode is active, {dp}=1, tp_size={tp}, attn_tp_size={tp}, attention weights will be sharded across {tp} ranks.")
        bare.append("Setting page size to 64 for DeepSeek DSA.")
        args["page_size"] = 64
        if (args.get(nsa_prefill) or args.get(nsa_decode)) and args.get("kv_cache_dtype") == "auto":
            bare.append("When specifying --nsa-prefill-backend or --nsa-decode-backend, you should also explicitly set --kv-cache-dtype (e.g., 'fp8_e4m3' or 'bfloat16'). DeepSeek V3.2 defaults to FP8 KV cache which may not be compatible with all backends.")
        if args.get("kv_cache_dtype") == "auto" and gpu.sm_major >= 10:
            args["kv_cache_dtype"] = "fp8_e4m3"
            bare.append(f"Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM{gpu.sm_major} device.")
        if args["kv_cache_dtype"] == "fp8_e4m3":
            args[nsa_prefill] = args.get(nsa_prefill) or "flashmla_auto"
            args[nsa_decode] = args.get(nsa_decode) or "flashmla_kv"
            bare.append(f"Set NSA backends for fp8_e4m3 KV Cache: prefill={args[nsa_prefill]}, decode={args[nsa_decode]}.")
    if modern and args.get("attention_backend") is None and model is not None:
        if gpu.sm_major == 9:
            args["attention_backend"] = "fa3"
        elif gpu.sm_major == 10:
            args["attention_backend"] = "trtllm_mha" if not model["mla"] else "flashinfer"
        else:
            args["attention_backend"] = "triton" if model["mla"] or model.get("hybrid_mamba") else "flashinfer"

    # --- GPU-memory defaults (chunked prefill, graph batch sizes, mem_fraction_static)
    hbm = gpu.memory_gb
    if args.get("chunked_prefill_size") is None:
        args["chunked_prefill_size"] = 2048 if hbm < 35 else 4096 if hbm < 60 else 8192 if hbm < 160 else 16384
    # 0.4.x leaves the field None in the dump and lets the graph runner pick 256
    if modern and "cuda_graph_max_bs" in args and args.get("cuda_graph_max_bs") is None:
        args["cuda_graph_max_bs"] = 512 if hbm >= 160 or tp >= 4 else 256
    max_bs = int(args.get("cuda_graph_max_bs") or (512 if modern else 256))
    if "cuda_graph_bs" in args and args.get("cuda_graph_bs") is None:
        args["cuda_graph_bs"] = _cuda_graph_bs(version, max_bs, speculative)

    # --- piecewise CUDA graph (0.5.10: _handle_piecewise_cuda_graph)
    piecewise_disabled = True
    if fmt["piecewise"] == "default_on":
        reasons = {
            "speculative": speculative,
            "multimodal": bool(model and model.get("multimodal")),
            "enable_torch_compile": bool(args.get("enable_torch_compile")),
            "enable_dp_attention": bool(args.get("enable_dp_attention")),
            "pp_gt_1": int(args.get("pp_size") or 1) > 1,
            "moe_a2a": args.get("moe_a2a_backend") not in (None, "none"),
            "lora": bool(args.get("enable_lora")),
        }
        auto = any(reasons[r] for r in w["scheduling"]["piecewise_auto_disable"])
        if auto and not args.get("enforce_piecewise_cuda_graph"):
            args["disable_piecewise_cuda_graph"] = True
        piecewise_disabled = bool(args.get("disable_piecewise_cuda_graph"))
    elif fmt["piecewise"] == "opt_in":
        piecewise_disabled = not args.get("enable_piecewise_cuda_graph")

    if modern and args.get("mem_fraction_static") is None:
        mem_mb = gpu.total_gib * 1024
        reserved = 512 + max(args["chunked_prefill_size"], 2048) * 1.5 + max_bs * 2 + tp / 8 * 1024
        reserved = max(reserved, 10 * 1024 if hbm > 60 else 0)
        if speculative:
            reserved += 4 * 1024 if version != "0.5.9" else 2 * 1024
        args["mem_fraction_static"] = round((mem_mb - reserved) / mem_mb, 3)
    elif args.get("mem_fraction_static") is None:
        args["mem_fraction_static"] = fmt["default_mem_fraction_static"]

    cuda_graph = not args.get("disable_cuda_graph")
    kv_dtype = args.get("kv_cache_dtype", "auto")
    kv_torch = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}.get(kv_dtype, "torch.bfloat16")

    memory = None
    failure = None
    effective_mrr = 0
    moe_warnings: list[tuple[str, str]] = []
    if model is not None:
        memory, effective_mrr = _memory(args, model, gpu.total_gib, tp, speculative, draft_tokens, spec_v2, kv_dtype)
        if memory.pool <= 0:
            failure = "oom_kv_cache"
        moe_warnings = _moe_warnings(version, fmt, model, gpu.name, tp, args, gpu.moe_configs_shipped)
    capture_bs = [b for b in _cuda_graph_bs(version, max_bs, speculative) if b <= max(effective_mrr, 1)] if cuda_graph else []
    if isinstance(args.get("cuda_graph_bs"), list) and "cuda_graph_bs" in explicit:
        capture_bs = [b for b in args["cuda_graph_bs"] if b <= max(effective_mrr, 1)]
    if version == "0.5.23":
        args["cuda_graph_config"] = {
            "decode": {"backend": "disabled" if not cuda_graph else "full", "max_bs": max_bs, "bs": capture_bs},
            "prefill": {"backend": "disabled" if not cuda_graph or (model and model.get("multimodal")) else "breakable"},
        }
    return Resolved(
        version=version, fmt=fmt, model_path=model_path, model=model, server_args=args, bare_lines=bare,
        tp=tp, speculative=speculative, draft_tokens=draft_tokens, memory=memory, failure=failure,
        effective_mrr=effective_mrr, cuda_graph=cuda_graph, capture_bs=sorted(capture_bs, reverse=True),
        piecewise_disabled=piecewise_disabled, moe_warnings=moe_warnings,
        custom_allreduce_warning=gpu.pcie_only and tp > 2 and not args.get("disable_custom_all_reduce"),
        kv_dtype_torch=kv_torch,
    )


def _memory(args: dict[str, Any], model: dict[str, Any], total: float, tp: int, speculative: bool,
            draft_tokens: int, spec_v2: bool, kv_dtype: str) -> tuple[Memory, int]:
    w = world()
    init = w["memory"]["init_usage_gib"]
    weights = model["weights_gib"] / tp
    draft = model["draft_weights_gib"] / tp if speculative else 0.0
    budget = total * float(args["mem_fraction_static"])
    charges = dict(w["memory"]["flag_workspace_gib"])
    if model.get("hybrid_mamba"):
        for flag, gib in w["memory"]["hybrid_mamba_flag_reserve_gib"].items():
            charges[flag] = charges.get(flag, 0.0) + gib
    workspace = sum(gib for flag, gib in charges.items() if args.get(flag))
    pool = budget - init - weights - draft - workspace
    kv_per_token = model["kv_gib_per_token"] if model["mla"] else model["kv_gib_per_token"] / tp
    if kv_dtype.startswith("fp8") and not model["mla"]:
        kv_per_token /= 2
    requested = args.get("max_running_requests")
    base_mrr = int(requested) if requested is not None else None
    interm_ssm = interm_conv = conv = ssm = 0.0
    mamba_size = 0
    rest = pool
    if model.get("hybrid_mamba") and pool > 0:
        if speculative:
            interm = model["spec_intermediate_gib_per_token"] / tp * (base_mrr or 48) * draft_tokens
            interm_ssm, interm_conv = interm * 0.965, interm * 0.035
            rest -= interm
        mamba_gib = max(rest, 0.0) * model["mamba_share"]
        per_req = model["mamba_state_gib_per_req"] / tp
        mamba_size = int(mamba_gib / per_req)
        conv, ssm = mamba_size * per_req * 0.034, mamba_size * per_req * 0.966
        rest -= mamba_gib
    page = int(args.get("page_size") or 1)
    kv_tokens = max(int(rest / kv_per_token) // page * page, 0) if pool > 0 else 0
    kv_gib = kv_tokens * kv_per_token
    ctx = int(args.get("context_length") or model["context_len"])
    estimated = min(max(int(kv_tokens / ctx * 512), 2048), 4096)
    mrr = min(base_mrr, estimated) if base_mrr is not None else min(estimated, max(kv_tokens // 2, 1))
    if model.get("hybrid_mamba") and pool > 0:
        sched = w["scheduling"]
        ratio = sched["mamba_ratio_base"]
        if args.get("disable_radix_cache"):
            ratio = 1
        elif args.get("mamba_scheduler_strategy") == "extra_buffer" or args.get("mamba_radix_cache_strategy") == "extra_buffer":
            overlap = not args.get("disable_overlap_schedule")
            ratio += sched["mamba_extra_buffer_overlap"] if overlap else sched["mamba_extra_buffer_no_overlap"]
        mrr = min(mrr, mamba_size // ratio)
    used = init + weights + draft + workspace + max(pool, 0)
    memory = Memory(
        total=total, init_usage=init, avail_load_begin=total - init, weights=weights,
        avail_load_end=total - init - weights, pool=pool, kv_tokens=kv_tokens, kv_gib=kv_gib,
        mamba_size=mamba_size, mamba_conv_gib=conv, mamba_ssm_gib=ssm, spec_interm_ssm_gib=interm_ssm,
        spec_interm_conv_gib=interm_conv, draft_weights=draft, avail_pool_end=total - used,
    )
    return memory, max(mrr, 0)


def _moe_warnings(version: str, fmt: dict[str, Any], model: dict[str, Any], gpu_name: str, tp: int,
                  args: dict[str, Any], shipped: bool) -> list[tuple[str, str]]:
    """Triton fused-MoE kernel-config lookups: ("found", path) or the warnings when no tuned file ships."""
    runner = args.get("moe_runner_backend", "auto")
    legacy_non_triton = any(args.get(f) for f in ("enable_flashinfer_cutlass_moe", "enable_flashinfer_trtllm_moe", "enable_deepep_moe"))
    if runner not in ("auto", "triton", None) or legacy_non_triton:
        return []
    moe = model["moe"]
    n = math.ceil(moe["intermediate"] / tp)
    device = gpu_name.replace(" ", "_")
    name = f"E={moe['experts']},N={n},device_name={device}"
    if moe.get("dtype"):
        name += f",dtype={moe['dtype']}"
    if moe.get("block_shape"):
        name += f",block_shape={moe['block_shape']}"
    base = f"{world()['site_packages']}/sglang/srt/{fmt['moe_config_dir']}/{fmt['triton_dir']}/"
    if shipped:
        return [("found", base + name + ".json")]
    out = [("default_config", base + name + ".json")]
    if fmt["moe_down_warning"]:
        out.append(("down_config", base + name + "_down.json"))
    return out
