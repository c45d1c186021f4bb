"""The startup log as a script of events (pure): what SGLang prints, in order, for one version.

The runner plays the script: it sleeps for Pause events (scaled by SGLANG_SIM_SPEED), stamps Line
events with the time of writing and the rank prefix, and stops at Exit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Union

from deployctl.sim.resolve import Resolved
from deployctl.sim.world import world

MAIN = -1   # the main (tokenizer/HTTP) process: timestamp, no rank
BARE = -2   # printed before logging is configured: no prefix at all


@dataclass(frozen=True)
class Phase:
    name: str          # args, init, load, pools, capture, http, warmup, ready


@dataclass(frozen=True)
class Pause:
    seconds: float     # simulated seconds at SGLANG_SIM_SPEED=1


@dataclass(frozen=True)
class Line:
    rank: int          # MAIN, BARE or a TP rank
    text: str
    stdout: bool = False


@dataclass(frozen=True)
class Raw:
    text: str          # written as is (tqdm meters: '\r' + meter, no newline)


@dataclass(frozen=True)
class Listen:
    """Bind and start the HTTP server ('Uvicorn running on …' follows)."""


@dataclass(frozen=True)
class Ready:
    """Warm-up done: /health turns 200."""


@dataclass(frozen=True)
class Exit:
    code: int          # negative: die by that signal (the SIGQUIT handler SIGKILLs the tree)


Event = Union[Phase, Pause, Line, Raw, Listen, Ready, Exit]

_BLOCKS = " ▏▎▍▌▋▊▉█"


def _fmt_time(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def _rate(per_item: float) -> str:
    return f"{per_item:5.2f}s/it" if per_item >= 1 else f"{1 / per_item:5.2f}it/s"


def _bar(frac: float) -> str:
    eighths = int(frac * 10 * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (_BLOCKS[part] if full < 10 else "")).ljust(10)[:10]


def weight_meters(n: int, per_item: float) -> list[str]:
    out = [f"Loading safetensors checkpoint shards:   0% Completed | 0/{n} [00:00<?, ?it/s]"]
    for i in range(1, n + 1):
        out.append(f"Loading safetensors checkpoint shards: {int(100 * i / n):3d}% Completed | {i}/{n} "
                   f"[{_fmt_time(i * per_item)}<{_fmt_time((n - i) * per_item)}, {_rate(per_item)}]")
    out.append(out[-1])
    return out


def capture_meters(bs_list: list[int], avail: float, per_item: float) -> list[str]:
    n = len(bs_list)
    out = [f"  0%|          | 0/{n} [00:00<?, ?it/s]"]
    label = lambda i: f"Capturing batches (bs={bs_list[i]} avail_mem={avail - 0.04 * i:.2f} GB)"  # noqa: E731
    out.append(f"{label(0)}:   0%|          | 0/{n} [00:00<?, ?it/s]")
    for i in range(1, n + 1):
        stats = f"| {i}/{n} [{_fmt_time(i * per_item)}<{_fmt_time((n - i) * per_item)}, {_rate(per_item)}]"
        out.append(f"{label(i - 1)}: {int(100 * i / n):3d}%|{_bar(i / n)}{stats}")
        if i < n:
            out.append(f"{label(i)}: {int(100 * i / n):3d}%|{_bar(i / n)}{stats}")
    return out


def _dump(r: Resolved) -> str:
    if r.fmt["dump"] == "dict":
        return f"server_args={r.server_args!r}"
    body = ", ".join(f"{k}={v!r}" for k, v in r.server_args.items())
    return f"server_args=ServerArgs({body})"


def _per_rank(r: Resolved, text: str) -> Iterator[Line]:
    for rank in range(r.tp):
        yield Line(rank, text)


def _traceback_rank(r: Resolved, rank: int, frames: list[str], error: str) -> Line:
    sp = world()["site_packages"]
    lines = ["Scheduler hit an exception: Traceback (most recent call last):"]
    lines.append(f'  File "{sp}/sglang/srt/managers/scheduler.py", line 3130, in run_scheduler_process')
    lines.append("    scheduler = Scheduler(")
    lines.append("                ^^^^^^^^^^")
    lines += frames
    lines.append(error)
    lines.append("")
    return Line(rank, "\n".join(lines))


def model_not_found_lines(model_path: str) -> list[str]:
    sp = world()["site_packages"]
    url = f"https://huggingface.co/{model_path}/resolve/main/config.json"
    return [
        "Traceback (most recent call last):",
        f'  File "{sp}/huggingface_hub/utils/_http.py", line 402, in hf_raise_for_status',
        "    response.raise_for_status()",
        f'  File "{sp}/requests/models.py", line 1026, in raise_for_status',
        "    raise HTTPError(http_error_msg, response=self)",
        f"requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: {url}",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        f'  File "{sp}/transformers/utils/hub.py", line 479, in cached_files',
        "    hf_hub_download(",
        f'  File "{sp}/huggingface_hub/utils/_http.py", line 452, in hf_raise_for_status',
        "    raise _format(RepositoryNotFoundError, message, response) from e",
        "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-00000000-000000000000000000000000)",
        "",
        f"Repository Not Found for url: {url}.",
        "Please make sure you specified the correct `repo_id` and `repo_type`.",
        "If you are trying to access a private or gated repo, make sure you are authenticated. For more details, see https://huggingface.co/docs/huggingface_hub/authentication",
        "Invalid username or password.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        f'  File "{sp}/sglang/launch_server.py", line 32, in <module>',
        "    server_args = prepare_server_args(sys.argv[1:])",
        "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{sp}/sglang/srt/server_args.py", line 5092, in get_model_config',
        "    self.model_config = ModelConfig.from_server_args(self)",
        "                        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{sp}/transformers/utils/hub.py", line 511, in cached_files',
        "    raise OSError(",
        f"OSError: {model_path} is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'",
        "If this is a private repository, make sure to pass a token having permission to this repo either by logging in with `hf auth login` or by passing `token=<your_token>`",
    ]


_SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
_GRAPH_OOM_HELP = [
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
]


def script(r: Resolved, faults: frozenset[str], pid: int, host: str, port: int) -> Iterator[Event]:
    """Yield the startup events; `faults` holds the start-time fault kinds (faults.py)."""
    fmt, ph, ver = r.fmt, world()["phases"], r.version
    sp = world()["site_packages"]
    modern = not ver.startswith("0.4")
    yield Phase("args")
    if fmt["launch_userwarning"]:
        yield Line(BARE, f"{sp}/sglang/launch_server.py:51: UserWarning: 'python -m sglang.launch_server' is still supported, but 'sglang serve' is the recommended entrypoint.\n  Example: sglang serve --model-path <model> [options]\n  warnings.warn(")
    if r.model is None or "model_not_found" in faults:
        for text in model_not_found_lines(r.model_path):
            yield Line(BARE, text)
        yield Exit(1)
        return
    bare_rank = MAIN if ver == "0.5.23" else BARE
    for text in r.bare_lines:
        yield Line(bare_rank, text)
    yield Pause(ph["args"])
    yield Line(MAIN, _dump(r))
    m, model = r.memory, r.model
    assert m is not None

    yield Phase("init")
    if fmt["attention_default_line"] and r.server_args.get("attention_backend") is None:
        yield from _per_rank(r, "Attention backend not explicitly specified. Use flashinfer backend by default.")
    yield from _per_rank(r, "Init parallel begin." if ver == "0.5.23" else "Init torch distributed begin.")
    if "nccl" in faults:
        yield Pause(ph["init"])
        frames = [f'  File "{sp}/sglang/srt/distributed/device_communicators/pynccl_wrapper.py", line 376, in NCCL_CHECK',
                  "    raise RuntimeError(f\"NCCL error: {error_str}\")"]
        for rank in range(r.tp):
            yield _traceback_rank(r, rank, frames, "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
        yield Line(MAIN, _SIGQUIT)
        yield Exit(-9)
        return
    yield Line(0, f"sglang is using nccl=={fmt['nccl']}")
    if r.custom_allreduce_warning:
        yield from _per_rank(r, "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly.")
    yield Pause(ph["init"])
    for rank in range(r.tp):
        yield Line(rank, fmt["init_ends"].format(elapsed=2.71 + 0.03 * rank, mem=m.init_usage))
    if ver == "0.5.23":
        yield from _per_rank(r, f"Memory baseline taken. mem usage={m.init_usage:.2f} GB")

    yield Phase("load")
    yield from _load_weights(r, model["arch"], model["shards"], m.avail_load_begin, m.weights, ph["load_per_shard"], True)
    if "rank_killed" in faults:
        yield Pause(ph["pools"])
        if fmt["rank_died_line"]:
            yield Line(BARE, "\n".join([
                "Traceback (most recent call last):",
                '  File "<frozen runpy>", line 198, in _run_module_as_main',
                f'  File "{sp}/sglang/srt/entrypoints/engine.py", line 1222, in _wait_for_scheduler_ready',
                f"RuntimeError: Rank {r.tp - 1} scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."]))
        else:
            yield Line(MAIN, f"Rank {r.tp - 1} scheduler is dead. Please check if there are relevant logs.")
            yield Line(MAIN, "Exit code: -9")
        yield Exit(1)
        return

    yield Phase("pools")
    yield Pause(ph["pools"])
    if r.failure == "oom_kv_cache" or "oom_kv_cache" in faults:
        frames = [f'  File "{sp}/sglang/srt/model_executor/model_runner_kv_cache_mixin.py", line 416, in init_memory_pool',
                  "    raise RuntimeError("]
        mfs = r.server_args["mem_fraction_static"]
        for rank in range(r.tp):
            yield _traceback_rank(r, rank, frames, fmt["oom_kv"].format(mfs=mfs))
        yield Line(MAIN, _SIGQUIT)
        yield Exit(-9)
        return
    if modern and ver != "0.5.23":
        yield Line(0, f"Using KV cache dtype: {r.kv_dtype_torch}")
    if model.get("hybrid_mamba"):
        extra = ""
        if r.speculative:
            extra = (f" intermediate_ssm_state_cache size: {m.spec_interm_ssm_gib:.2f}GB"
                     f" intermediate_conv_window_cache size: {m.spec_interm_conv_gib:.2f}GB ")
        yield from _per_rank(r, f"Mamba Cache is allocated. max_mamba_cache_size: {m.mamba_size}, conv_state size: {m.mamba_conv_gib:.2f}GB, ssm_state size: {m.mamba_ssm_gib:.2f}GB" + (extra or " "))
    yield from _per_rank(r, _kv_line(r, m.kv_tokens, m.kv_gib))
    avail = m.avail_pool_end
    yield from _per_rank(r, f"Memory pool end. avail mem={avail:.2f} GB")
    if model.get("hybrid_mamba") and ver != "0.4.10.post2":
        yield from _per_rank(r, "Using hybrid linear attention backend for hybrid GDN models.")

    yield Phase("capture")
    mem = world()["memory"]
    if r.cuda_graph:
        avail -= 0.17
        target = f"target {'verify' if r.speculative else 'decode'} CUDA graph"
        yield from _capture(r, "cuda graph" if ver != "0.5.23" else target, avail, mem["graph_usage_gib"], ph["capture_per_bs"], with_moe=True, faults=faults)
        if "oom_cuda_graph" in faults:
            return
        avail -= mem["graph_usage_gib"]
        if fmt["piecewise"] == "default_on" and r.piecewise_disabled:
            yield from _per_rank(r, "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set")
        elif fmt["piecewise"] == "breakable":
            prefill = r.server_args["cuda_graph_config"]["prefill"]["backend"]
            if prefill == "disabled":
                yield from _per_rank(r, "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (multimodal model)")
            else:
                tokens = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
                yield from _per_rank(r, f"Capture target prefill CUDA graph begin. backend={prefill}, num_tokens={tokens}, avail mem={avail:.2f} GB")
                yield Pause(ph["capture_per_bs"] * 10)
                avail -= 0.31
                yield from _per_rank(r, f"Capture target prefill CUDA graph end. elapsed=14.62 s, mem usage=0.31 GB, avail mem={avail:.2f} GB.")
        elif fmt["piecewise"] in ("default_on", "opt_in") and not r.piecewise_disabled:
            yield from _per_rank(r, f"Capture piecewise CUDA graph begin. avail mem={avail:.2f} GB")
            yield Pause(ph["capture_per_bs"] * 10)
            avail -= 0.31
            yield from _per_rank(r, f"Capture piecewise CUDA graph end. Time elapsed: 14.62 s. mem usage=0.31 GB. avail mem={avail:.2f} GB.")
    if r.speculative:
        yield from _per_rank(r, "Init torch distributed begin." if ver != "0.5.23" else "Init parallel begin.")
        for rank in range(r.tp):
            yield Line(rank, fmt["init_ends"].format(elapsed=0.0, mem=0.0))
        yield from _load_weights(r, model["draft_arch"], model["shards"], avail, m.draft_weights, ph["load_per_shard"] / 4, False)
        avail -= m.draft_weights
        yield from _per_rank(r, _kv_line(r, m.kv_tokens, m.kv_gib / 12))
        avail -= 0.79
        yield from _per_rank(r, f"Memory pool end. avail mem={avail:.2f} GB")
        if r.cuda_graph:
            for label, usage in (("draft cuda graph", mem["draft_graph_usage_gib"]), ("draft extend cuda graph", mem["draft_extend_graph_usage_gib"])):
                if ver == "0.5.23":
                    label = label.replace("draft cuda graph", "draft decode CUDA graph").replace("extend cuda graph", "extend CUDA graph")
                yield from _capture(r, label, avail, usage, ph["draft_capture_per_bs"], with_moe=False, faults=frozenset())
                avail -= usage
    yield Line(0, f"max_total_num_tokens={m.kv_tokens}, chunked_prefill_size={r.server_args['chunked_prefill_size']}, "
                  f"max_prefill_tokens={r.server_args.get('max_prefill_tokens', 16384)}, max_running_requests={r.effective_mrr}, "
                  f"context_len={r.server_args.get('context_length') or model['context_len']}, available_gpu_mem={avail:.2f} GB")

    yield Phase("http")
    yield Pause(ph["http"])
    yield Line(MAIN, f"INFO:     Started server process [{pid}]")
    yield Line(MAIN, "INFO:     Waiting for application startup.")
    if modern:
        yield Line(MAIN, f"Using default chat sampling params from model generation config: {model['sampling_defaults']}")
    yield Line(MAIN, "INFO:     Application startup complete.")
    yield Listen()  # uvicorn binds after the lifespan startup; a taken port fails here
    yield Line(MAIN, f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")

    yield Phase("warmup")
    yield Line(MAIN, f'INFO:     127.0.0.1:{40000 + pid % 20000} - "GET {fmt["model_info_path"]} HTTP/1.1" 200 OK', stdout=True)
    yield Pause(ph["warmup"])
    if not r.cuda_graph:
        yield from _moe_lines(r)  # without graph capture the first MoE forward is the warm-up's
    usage = "full token usage: 0.00, mamba usage: 0.01" if model.get("hybrid_mamba") else "token usage: 0.00"
    tokens = 19 if model.get("multimodal") else 6
    yield Line(0, fmt["prefill_line"].format(seqs=1, tokens=tokens, usage=usage, running=0, queued=0, tput=0.0,
                                              pending=0))
    warm = "/v1/chat/completions" if model.get("multimodal") and modern else "/generate"
    yield Line(MAIN, f'INFO:     127.0.0.1:{40006 + pid % 20000} - "POST {warm} HTTP/1.1" 200 OK', stdout=True)
    if ver == "0.5.23":
        yield Line(MAIN, f'INFO:     127.0.0.1:{40008 + pid % 20000} - "POST /freeze_gc HTTP/1.1" 200 OK', stdout=True)
    yield Phase("ready")
    yield Ready()
    yield Line(MAIN, "The server is fired up and ready to roll!")


def _kv_line(r: Resolved, tokens: int, gib: float) -> str:
    if r.version == "0.5.23":
        half = gib / 2
        return f"KV Cache is allocated. dtype: {r.kv_dtype_torch}, #tokens: {tokens}, K size: {half:.2f} GB, V size: {half:.2f} GB"
    if r.model and r.model["mla"]:
        return f"KV Cache is allocated. #tokens: {tokens}, KV size: {gib:.2f} GB"
    return f"KV Cache is allocated. #tokens: {tokens}, K size: {gib / 2:.2f} GB, V size: {gib / 2:.2f} GB"


def _load_weights(r: Resolved, arch: str, shards: int, avail: float, usage: float, per_shard: float,
                  chat_template: bool) -> Iterator[Event]:
    fmt = r.fmt
    for rank in range(r.tp):
        yield Line(rank, f"Load weight begin. avail mem={avail + 0.01 * rank:.2f} GB")
    meters = weight_meters(shards, per_item=3.87)
    template = Line(MAIN, f"Using default HuggingFace chat template with detected content format: {r.model['chat_format']}") if chat_template else None
    for i, meter in enumerate(meters):
        yield Raw("\r" + meter + ("" if fmt["weight_bar_joined"] else "\n"))
        if i == 1 and template is not None:
            yield template  # another process's line glued after the open meter
        yield Pause(per_shard)
    if fmt["weight_bar_joined"]:
        yield Raw("\n")
    elapsed = shards * 3.87
    for rank in range(r.tp):
        yield Line(rank, fmt["load_end"].format(elapsed=elapsed + 0.21 * rank, arch=arch, dtype=r.model["dtype"],
                                                quant=r.model["quant_str"], avail=avail - usage + 0.01 * rank, usage=usage))


def _moe_lines(r: Resolved) -> Iterator[Line]:
    url = "https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton"
    for rank in range(r.tp):
        for kind, path in r.moe_warnings:
            if kind == "found":
                yield Line(rank, f"Using MoE kernel config from {path}.")
            elif kind == "default_config" or r.version == "0.5.23":  # 0.5.23 says so for a missing _down file too
                yield Line(rank, f"Using default MoE kernel config. Performance might be sub-optimal! Config file not found at {path}, you can create them with {url}")
            else:
                yield Line(rank, f"Using MoE kernel config with down_moe=False. Performance might be sub-optimal! Config file not found at {path}, you can create them with {url}")


def _capture(r: Resolved, label: str, avail: float, usage: float, per_bs: float, with_moe: bool,
             faults: frozenset[str]) -> Iterator[Event]:
    modern_e = r.version == "0.5.23"
    for rank in range(r.tp):
        if modern_e:
            yield Line(rank, f"Capture {label} begin. backend=full, num_tokens_per_req={r.draft_tokens}, avail mem={avail + 0.01 * rank:.2f} GB")
        else:
            yield Line(rank, f"Capture {label} begin. This can take up to several minutes. avail mem={avail + 0.01 * rank:.2f} GB")
    meters = capture_meters(r.capture_bs or [1], avail, per_item=0.91)
    for i, meter in enumerate(meters):
        yield Raw("\r" + meter)
        if i == 1 and with_moe:
            yield from _moe_lines(r)
        if i == 2 and "oom_cuda_graph" in faults:
            yield Raw("\n")
            sp = world()["site_packages"]
            frames = [f'  File "{sp}/sglang/srt/model_executor/cuda_graph_runner.py", line 654, in __init__',
                      "    raise Exception("]
            for rank in range(r.tp):
                err = (f"Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 6.00 MiB. GPU {rank} has a total "
                       f"capacity of {r.memory.total:.2f} GiB of which 5.81 MiB is free. Including non-PyTorch memory, this process has "
                       f"{r.memory.total - 0.01:.2f} GiB memory in use.\n" + "\n".join(_GRAPH_OOM_HELP))
                yield _traceback_rank(r, rank, frames, err)
            yield Line(MAIN, _SIGQUIT)
            yield Exit(-9)
            return
        yield Pause(per_bs)
    yield Raw("\n")
    n = len(r.capture_bs or [1])
    for rank in range(r.tp):
        if modern_e:
            yield Line(rank, f"Capture {label} end. bs={sorted(r.capture_bs)}, elapsed={n * 0.91 + 3.3 + 0.05 * rank:.2f} s, mem usage={usage:.2f} GB, avail mem={avail - usage + 0.01 * rank:.2f} GB.")
        else:
            yield Line(rank, f"Capture {label} end. Time elapsed: {n * 0.91 + 3.3 + 0.05 * rank:.2f} s. mem usage={usage:.2f} GB. avail mem={avail - usage + 0.01 * rank:.2f} GB.")


def rank_tag(r: Resolved, rank: int) -> str:
    """' TP3' or ' TP3 EP3': the parts whose size is >1, in the scheduler's order (TP before EP)."""
    if rank < 0:
        return ""
    ep = int(r.server_args.get("ep_size") or 1)
    return f" TP{rank}" + (f" EP{rank * ep // r.tp}" if ep > 1 else "")


def render_text(events: Iterator[Event], resolved: Resolved,
                timestamp: str = "2026-01-01 00:00:00") -> tuple[str, int | None]:
    """The merged stream the script would write (fixed timestamp) and its exit code (None: ready)."""
    parts: list[str] = []
    for event in events:
        if isinstance(event, Line):
            prefix = "" if event.rank == BARE else f"[{timestamp}{rank_tag(resolved, event.rank)}] "
            parts.append(prefix + event.text + "\n")
        elif isinstance(event, Raw):
            parts.append(event.text)
        elif isinstance(event, Exit):
            return "".join(parts), event.code
    return "".join(parts), None
