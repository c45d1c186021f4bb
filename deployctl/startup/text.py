"""Plain-text views of startup reports and startup diffs, for terminals and cron mail (pure)."""

from __future__ import annotations

from deployctl.startup.diff import FactChange, FlagDifference, mamba_ratio
from deployctl.startup.report import StartupReport

# What an operator does next, per failure kind.
HINTS = {
    "unknown_flag": "this SGLang version does not have the flag: check the installed version (`deployctl check`) "
                    "or drop the flag from the profile",
    "bad_flag": "the flag value is not accepted by this SGLang version: see the error line for the allowed choices",
    "model_not_found": "check the model path / repo id and the host's Hugging Face access (HF_TOKEN, network, cache)",
    "oom_kv_cache": "weights leave no room for the KV cache: raise --mem-fraction-static, use more GPUs (--tp) "
                    "or a smaller/quantized checkpoint",
    "oom_cuda_graph": "CUDA-graph capture ran out of memory: lower --mem-fraction-static or --cuda-graph-max-bs",
    "oom": "a GPU ran out of memory: lower --mem-fraction-static or the batch limits",
    "nccl": "NCCL could not build the TP group or a collective failed or timed out: check NCCL_* environment "
            "(P2P/IB), GPU visibility and peer access; rerun with NCCL_DEBUG=INFO",
    "rank_died": "a scheduler process was killed (exit -9 is usually the kernel OOM killer): check `dmesg -T` "
                 "and host RAM",
    "port_in_use": "another process holds the port: `ss -ltnp` shows which; stop it or change the port",
    "warmup_failed": "the server loaded but its warm-up request failed: the evidence shows why",
    "crashed": "a server process crashed (the watchdog saw it exit, or it died below Python: a segfault, "
               "SIGKILL): see the evidence lines; `dmesg -T` shows the kernel's side",
    "exception": "a Python exception stopped the start: the evidence shows where",
    "cuda_graph_failed": "CUDA-graph capture failed (the reason is above): a kernel built without this GPU's "
                         "architecture needs a matching sgl-kernel/flashinfer build; or start with "
                         "--disable-cuda-graph to confirm the capture is the cause",
    "cuda_error": "a CUDA runtime error stopped a rank: 'no kernel image' means a kernel was not built for this "
                  "GPU (install the build for its compute capability); an illegal memory access is a kernel bug: "
                  "rerun with CUDA_LAUNCH_BLOCKING=1",
    "process_exit": "the container stopped with a non-zero exit code and no line says why (137: SIGKILL, often "
                    "the OOM killer): check `dmesg -T` and the container's memory limit",
}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s"


def _ranks(ranks: tuple[int, ...], kind: str = "TP") -> str:
    if not ranks:
        return ""
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{kind}{ranks[0]}-{ranks[-1]}"
    return ",".join(f"{kind}{r}" for r in ranks)


def _phase(phase: str | None) -> str:
    # No timestamped line tells the phase (a paste of bare lines): say so, never guess "argument parsing".
    return {None: "an unknown phase", "arguments": "argument parsing"}.get(phase, phase or "")


def _version(report: StartupReport) -> str:
    if report.sglang_version:
        how = {"server_info": "from /server_info", "log_exact": "stated in the log",
               "log_inferred": "the only release the log format fits"}.get(report.sglang_version_source or "", "")
        return f"sglang {report.sglang_version}" + (f" ({how})" if how else "")
    if report.sglang_version_range:
        return f"sglang {report.sglang_version_range} (from the log format)"
    if report.sglang_version_contradiction:
        return f"sglang version unknown (the log's cues contradict: {report.sglang_version_contradiction})"
    return "sglang version unknown"


def _hint(report: StartupReport) -> str | None:
    failure = report.failure
    if failure is None:
        return None
    if failure.kind == "unknown_flag":
        spelled = [flag for flag in failure.unknown_flags if "_" in flag]
        if spelled and len(spelled) == len(failure.unknown_flags):
            # argparse knows only the hyphen spelling: the flag exists, its spelling does not.
            fixed = ", ".join(f"{flag} → {flag[:2]}{flag[2:].replace('_', '-')}" for flag in spelled)
            return f"SGLang's flags are spelled with hyphens: use {fixed}"
    return HINTS.get(failure.kind)


def _failed_ranks(labels: tuple[str, ...]) -> str:
    if labels and all(label.startswith("TP") and label[2:].isdigit() for label in labels):
        return _ranks(tuple(sorted(int(label[2:]) for label in labels)))
    if len(labels) > 4:
        return f"{', '.join(labels[:3])} … {labels[-1]} ({len(labels)} ranks)"
    return ", ".join(labels)


def _where(report: StartupReport) -> str:
    split = report.parallelism
    shape = "" if split is None else split.label + (" (from the ranks seen)" if split.source == "rank_prefixes" else "")
    return " · ".join(x for x in (_version(report), shape, report.listening or "") if x)


def _model_line(report: StartupReport) -> str | None:
    parts = []
    if report.quantization:
        parts.append(f"quantization {report.quantization}")
    spec = report.speculative
    if spec is not None:
        text = f"speculative {spec.algorithm or 'decoding (draft graphs captured)'}"
        own = f"own draft layers {spec.draft_model_class}" if spec.draft_model_class else ""
        details = [f"draft {spec.draft_model}" if spec.draft_model else own,
                   f"{spec.num_steps} steps" if spec.num_steps is not None else "",
                   f"topk {spec.eagle_topk}" if spec.eagle_topk is not None else "",
                   f"{spec.num_draft_tokens} draft tokens" if spec.num_draft_tokens is not None else ""]
        details = [d for d in details if d]
        parts.append(text + (f" ({', '.join(details)})" if details else ""))
    return "  model     " + " · ".join(parts) if parts else None


def render_report(report: StartupReport, *, verbose: bool = False) -> str:
    """A summary an operator reads in five seconds: outcome first, then capacity, graphs, warnings."""
    lines: list[str] = []
    where = _where(report)
    if report.outcome == "ready":
        took = f"in {_duration(report.total_seconds)}" if report.total_seconds is not None else \
            "(time to ready unknown: the log does not begin at the start)"
        lines.append(f"READY {took} · {where}")
    elif report.outcome == "failed" and report.failure is not None:
        f = report.failure
        on = _failed_ranks(report.failed_ranks) or _ranks(f.ranks, f.rank_kind)
        at = f" on {on}" if on else ""
        lines.append(f"FAILED: {f.kind}{at} during {_phase(report.phase)} · {where}")
        lines.append(f"  {f.message}")
        hint = _hint(report)
        if hint:
            lines.append(f"  hint: {hint}")
    else:
        last = report.phases[-1] if report.phases else None
        since = f" for {_duration(last.seconds)}" if last and last.seconds is not None else ""
        lines.append(f"STARTING: in {_phase(report.phase)}{since} (log ends {report.last_timestamp or '?'}) · {where}")
        args = report.server_args or {}
        if isinstance(args.get("node_rank"), int) and args["node_rank"] > 0:
            lines.append(f"  node {args['node_rank']} of {args.get('nnodes')}: its HTTP server and scheduler "
                         "summary are on node 0, so this log never says ready")

    mrr, configured = report.max_running_requests, report.configured_max_running_requests
    if mrr is not None or report.max_total_num_tokens is not None:
        cap = f"max_running_requests {mrr}"
        if configured is not None and configured != mrr:
            cap += f" (configured {configured}"
            if report.max_mamba_cache_size is not None:
                ratio = mamba_ratio(report.server_args or {})
                cap += f"; hybrid-model cap: max_mamba_cache_size {report.max_mamba_cache_size} // {ratio}"
            cap += ")"
        parts = [cap]
        if report.max_total_num_tokens is not None:
            parts.append(f"KV {report.max_total_num_tokens:,} tokens")
        if report.context_len is not None:
            parts.append(f"context {report.context_len:,}")
        if report.available_gpu_mem_gb is not None:
            parts.append(f"free {report.available_gpu_mem_gb:g} GB/GPU")
        lines.append("  capacity  " + " · ".join(parts))
    model = _model_line(report)
    if model:
        lines.append(model)

    graph = report.cuda_graph
    text = f"CUDA graph {graph.state}"
    if graph.batch_sizes:
        text += f" (bs {graph.batch_sizes[0]}…{graph.batch_sizes[-1]}, {len(graph.batch_sizes)} sizes"
        text += f", {_duration(graph.seconds)})" if graph.seconds is not None else ")"
    elif graph.seconds is not None:
        text += f" ({_duration(graph.seconds)})"
    if graph.draft_captured:
        text += " + draft"
    if graph.reason:  # the failure line above has it whole
        text += f" ({graph.reason if len(graph.reason) <= 80 else graph.reason[:79] + '…'})"
    pw = report.piecewise_cuda_graph
    text += f" · piecewise {pw.state}"
    if pw.auto_set and pw.reason:
        text += f" (automatic: {pw.reason})"
    lines.append("  graphs    " + text)

    for w in report.moe_config_warnings:
        shape = f"E={w.E},N={w.N}" + (f",{w.dtype}" if w.dtype else "") + (f",block {w.block_shape}" if w.block_shape else "")
        what = {"default_config": "untuned MoE kernel (default config)",
                "down_config_missing_using_up_or_default": "untuned MoE down kernel",
                "fallback_other_triton_version": "MoE config from another Triton version"}.get(w.kind, w.kind)
        lines.append(f"  moe       {what}: {shape} on {_ranks(w.ranks)} ({w.triton_dir or 'config dir'})")
    for d in report.deprecations:
        lines.append(f"  deprecated {', '.join(d.flags) or d.message}")

    if report.phases:
        shown = [f"{p.name} {_duration(p.seconds)}" + ("…" if not p.complete else "")
                 for p in report.phases if p.name != "ready"]
        lines.append("  phases    " + " · ".join(shown))
    if report.format_note:
        lines.append(f"  note      {report.format_note}")
    for fact in report.inferred:
        lines.append(f"  inferred  {fact}")
    if report.blob_lines:
        lines.append(f"  note      {report.blob_lines} line(s) read as '[N blob data]' (journalctl without -a): "
                     "what was printed on them (progress bars and records glued to them) is missing")
    if report.earlier_starts:
        lines.append(f"  note      this log holds {report.earlier_starts} earlier start(s); this is the last one")
    if report.failure is not None and report.failure.evidence:
        lines.append("  evidence:")
        evidence = report.failure.evidence if verbose else report.failure.evidence[-6:]
        lines += [f"    {line}" for line in evidence]
    if report.notices:
        if verbose:
            lines.append("  notices (printed before logging was set up):")
            lines += [f"    {n}" for n in report.notices]
        else:
            lines.append(f"  notices   {len(report.notices)} bare warning line(s) (-v shows them)")
    return "\n".join(lines)


def render_diff(changes: list[FactChange], unlinked: list[FlagDifference]) -> str:
    if not changes and not unlinked:
        return "no startup fact changed"
    lines = [str(change) for change in changes] or ["no startup fact changed"]
    if unlinked:
        lines.append("flag differences linked to no changed fact:")
        lines += [f"  {d.phrase}" for d in unlinked]
    return "\n".join(lines)
