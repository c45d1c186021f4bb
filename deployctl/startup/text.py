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
    "nccl": "the TP group could not be built: check NCCL_* environment (P2P/IB), GPU visibility and peer access; "
            "rerun with NCCL_DEBUG=INFO",
    "rank_died": "a scheduler process was killed (exit -9 is usually the kernel OOM killer): check `dmesg -T` "
                 "and host RAM",
    "port_in_use": "another process holds the port: `ss -ltnp` shows which; stop it or change the port",
    "warmup_failed": "the server loaded but its warm-up request failed: the evidence shows why",
    "crashed": "a server process crashed after start-up: see the evidence lines",
    "exception": "a Python exception stopped the start: the evidence shows where",
}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s"


def _ranks(ranks: tuple[int, ...]) -> str:
    if not ranks:
        return ""
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"TP{ranks[0]}-{ranks[-1]}"
    return ",".join(f"TP{r}" for r in ranks)


def _version(report: StartupReport) -> str:
    if report.sglang_version:
        how = {"server_info": "from /server_info", "log_exact": "stated in the log",
               "log_inferred": "the only release the log format fits"}.get(report.sglang_version_source or "", "")
        return f"sglang {report.sglang_version}" + (f" ({how})" if how else "")
    if report.sglang_version_range:
        return f"sglang {report.sglang_version_range} (from the log format)"
    return "sglang version unknown"


def render_report(report: StartupReport, *, verbose: bool = False) -> str:
    """A summary an operator reads in five seconds: outcome first, then capacity, graphs, warnings."""
    lines: list[str] = []
    where = " · ".join(x for x in (_version(report), _ranks(report.tp_ranks), report.listening or "") if x)
    if report.outcome == "ready":
        took = f"in {_duration(report.total_seconds)}" if report.total_seconds is not None else \
            "(time to ready unknown: the log does not begin at the start)"
        lines.append(f"READY {took} · {where}")
    elif report.outcome == "failed" and report.failure is not None:
        f = report.failure
        at = f" on {_ranks(f.ranks)}" if f.ranks else ""
        lines.append(f"FAILED: {f.kind}{at} during {report.phase or 'argument parsing'} · {where}")
        lines.append(f"  {f.message}")
        hint = HINTS.get(f.kind)
        if hint:
            lines.append(f"  hint: {hint}")
    else:
        last = report.phases[-1] if report.phases else None
        since = f" for {_duration(last.seconds)}" if last and last.seconds is not None else ""
        lines.append(f"STARTING: in {report.phase or 'argument parsing'}{since} (log ends {report.last_timestamp or '?'}) · {where}")
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

    graph = report.cuda_graph
    text = f"CUDA graph {graph.state}"
    if graph.batch_sizes:
        text += f" (bs {graph.batch_sizes[0]}…{graph.batch_sizes[-1]}, {len(graph.batch_sizes)} sizes"
        text += f", {_duration(graph.seconds)})" if graph.seconds is not None else ")"
    elif graph.seconds is not None:
        text += f" ({_duration(graph.seconds)})"
    if graph.draft_captured:
        text += " + draft"
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
