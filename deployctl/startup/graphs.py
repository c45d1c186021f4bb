"""The CUDA-graph states of a start, from capture lines, the dump, and the lines that come after (pure).

When a capture line is missing (a tail-only paste, a log cut short, 0.3.x which prints no ``end``), a
later line can still prove the state: the scheduler summary is printed after capture, so a start that
reached it passed the capture stage; a ``Capture cuda graph failed: … out of memory`` proves capture
began and failed. Such a state is marked ``inferred``. Formats per version: docs/startup.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from deployctl.startup.failure import CAPTURE_FAILED_RE
from deployctl.startup.report import CudaGraph, PiecewiseCudaGraph

# Reasons 0.5.1–0.5.8 print as "Disable piecewise CUDA graph because …": a flag the operator set, or a rule.
_EXPLICIT_REASONS = ("--cuda-graph-backend-prefill", "explicit", "--disable-cuda-graph", "disable_cuda_graph",
                     "disable_prefill_cuda_graph")


@dataclass
class CaptureLog:
    """What the capture lines said, keyed ``target_decode`` | ``target_prefill`` | ``draft_decode`` | …"""

    begun: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    seconds: dict[str, float] = field(default_factory=dict)
    batch_sizes: dict[str, list[int]] = field(default_factory=dict)
    listed: set[str] = field(default_factory=set)  # graphs whose sizes a "Capture cuda graph bs [...]" line gave
    context: str = "target_decode"  # the graph TP0's progress bar belongs to
    piecewise_disable_reason: str | None = None
    prefill_disable_reason: str | None = None


@dataclass(frozen=True)
class Progress:
    """How far the start got, as the graph states need it."""

    ready: bool
    summary_seen: bool
    failure_kind: str | None
    dict_dump: bool
    failure_message: str = ""
    # The log shows that the start stopped before the capture stage: it holds the start from its dump, or
    # its cause (argparse, NCCL init, the KV pool) comes before capture. Otherwise a log with no capture
    # line (a tail, a paste cut during the draft model's load) cannot tell "not reached" from "not shown".
    before_capture_known: bool = True

    def capture_failure(self) -> tuple[str, str] | None:
        """(graph words, reason) of a ``Capture … graph failed: reason`` failure: ("", …) for the decode
        graph, ("prefill ", …) / ("piecewise ", …) for the prefill one."""
        if self.failure_kind not in ("oom_cuda_graph", "cuda_graph_failed"):
            return None
        match = CAPTURE_FAILED_RE.search(self.failure_message)
        return (match.group(1), match.group(2).strip()) if match else ("", self.failure_message)


def nested(data: Mapping[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _decode_disabled(args: Mapping[str, Any]) -> str | None:
    if args.get("disable_cuda_graph") is True:
        return "server_args disable_cuda_graph=True; no 'Capture cuda graph' lines (nothing is printed when disabled)"
    if args.get("disable_decode_cuda_graph") is True:
        return "server_args disable_decode_cuda_graph=True"
    if nested(args, "cuda_graph_config", "decode", "backend") == "disabled":
        return "cuda_graph_config.decode.backend='disabled'"
    return None


def decode_graph(log: CaptureLog, args: Mapping[str, Any], progress: Progress) -> CudaGraph:
    sizes = tuple(sorted(set(log.batch_sizes.get("target_decode", ())), reverse=True))
    draft = "draft_decode" in log.ended
    passed = progress.summary_seen or progress.ready
    capture_failed = progress.capture_failure()
    if capture_failed is not None and not _prefill_words(capture_failed[0]) and "target_decode" not in log.ended:
        inferred = "target_decode" not in log.begun
        reason = capture_failed[1]
        said = f"Capture cuda graph failed: {reason}" if CAPTURE_FAILED_RE.search(progress.failure_message) else \
            f"{reason} (raised inside the CUDA-graph capture: the traceback runs through cuda_graph_runner's capture)"
        return CudaGraph("failed", sizes, None, draft, said, inferred, reason)
    if "target_decode" in log.ended:
        return CudaGraph("captured", sizes, log.seconds.get("target_decode"), draft, "Capture cuda graph begin/end")
    if "target_decode" in log.begun:
        if passed:  # 0.3.x prints no 'end'; the summary comes after capture
            return CudaGraph("captured", sizes, None, draft,
                             "Capture cuda graph begin, then the scheduler summary (printed after capture)", True)
        if progress.failure_kind is not None:
            return CudaGraph("failed", sizes, None, draft, f"capture began, then {progress.failure_kind}")
        return CudaGraph("capturing", sizes, None, draft, "Capture cuda graph begin without end")
    disabled = _decode_disabled(args)
    if disabled:
        return CudaGraph("disabled", (), None, False, disabled)
    if passed and args:
        return CudaGraph("captured", sizes, None, draft, "no capture lines in the log, but the dump does not disable "
                         "graphs and the start passed the capture stage (scheduler summary)", True)
    if passed:
        return CudaGraph("unknown", evidence="the start passed the capture stage (scheduler summary), but no line "
                         "says whether graphs were captured or disabled")
    if not progress.before_capture_known:
        return CudaGraph("unknown", evidence="no capture line, and the log does not show the start from its "
                         "beginning: the capture may have passed before the first line shown")
    return CudaGraph("not_reached")


def _prefill_words(words: str) -> bool:
    return "prefill" in words or "piecewise" in words


def piecewise_graph(log: CaptureLog, args: Mapping[str, Any], progress: Progress) -> PiecewiseCudaGraph:
    capture_failed = progress.capture_failure()
    if capture_failed is not None and _prefill_words(capture_failed[0]):
        return PiecewiseCudaGraph("failed", None, capture_failed[1],
                                  f"Capture {capture_failed[0]}CUDA graph failed: {capture_failed[1]}")
    if "target_prefill" in log.ended:
        return PiecewiseCudaGraph("captured", False, None, "Capture piecewise/prefill CUDA graph end")
    if log.prefill_disable_reason is not None:
        reason = log.prefill_disable_reason
        explicit = any(cue in reason for cue in _EXPLICIT_REASONS)
        return PiecewiseCudaGraph("disabled", not explicit, reason, f"Disable prefill CUDA graph because {reason}")
    reason = log.piecewise_disable_reason
    said = f"'Disable piecewise CUDA graph because {reason}'" if reason else ""
    if "disable_piecewise_cuda_graph" in args:  # 0.5.10: a field that rules switch on
        if args.get("disable_piecewise_cuda_graph") is True:
            rules = piecewise_auto_rules(args)
            evidence = "server_args disable_piecewise_cuda_graph=True" + (f" and {said}" if said else "")
            return PiecewiseCudaGraph("disabled", bool(rules), "; ".join(rules) or None, evidence)
        return _pending(log, progress, "server_args disable_piecewise_cuda_graph=False")
    if "enable_piecewise_cuda_graph" in args:  # 0.5.1–0.5.9: opt-in
        if args.get("enable_piecewise_cuda_graph") is True:
            if reason:
                explicit = any(cue in reason for cue in _EXPLICIT_REASONS)
                return PiecewiseCudaGraph("disabled", not explicit, reason, said)
            return _pending(log, progress, "server_args enable_piecewise_cuda_graph=True")
        return PiecewiseCudaGraph("disabled", False, None,
                                  "server_args enable_piecewise_cuda_graph=False (opt-in before 0.5.10)")
    if progress.dict_dump and args:
        backend = nested(args, "cuda_graph_config", "prefill", "backend")
        flag = next((name for name in ("disable_prefill_cuda_graph", "disable_cuda_graph") if args.get(name) is True),
                    None)
        if flag is not None:  # the operator's flag, not an automatic rule
            return PiecewiseCudaGraph("disabled", False, None, f"server_args {flag}=True")
        if backend == "disabled":
            return PiecewiseCudaGraph("disabled", None, None, "cuda_graph_config.prefill.backend='disabled' (by a "
                                      "flag or a rule: the 'Disable prefill CUDA graph because' line says which)")
        return _pending(log, progress, f"cuda_graph_config.prefill.backend={backend!r}")
    if reason:
        # No dump: 0.5.10 prints "--disable-piecewise-cuda-graph is set" whether a rule or the operator
        # set the field, so who did is unknown; an older release names its rule.
        flag_said = "--disable-piecewise-cuda-graph" in reason
        explicit = any(cue in reason for cue in _EXPLICIT_REASONS)
        return PiecewiseCudaGraph("disabled", None if flag_said else not explicit, reason, said)
    if args:
        return PiecewiseCudaGraph("not_available", None, None, "this version has no piecewise CUDA graph")
    if "target_prefill" in log.begun:
        return _pending(log, progress, "Capture piecewise CUDA graph begin")
    return PiecewiseCudaGraph("not_reached" if _not_reached(progress) else "unknown")


def _pending(log: CaptureLog, progress: Progress, evidence: str) -> PiecewiseCudaGraph:
    if "target_prefill" in log.begun and progress.failure_kind is not None and not progress.summary_seen:
        return PiecewiseCudaGraph("unknown", None, None, evidence + f"; capture began, then {progress.failure_kind}")
    if not _not_reached(progress):
        return PiecewiseCudaGraph("unknown", None, None, evidence + "; no capture line seen")
    return PiecewiseCudaGraph("not_reached", None, None, evidence)


def _not_reached(progress: Progress) -> bool:
    """No prefill capture line: not reached when the start stopped short of it and the log shows that
    (its beginning, or the failure that stopped it), else unknown."""
    if progress.ready or progress.summary_seen:
        return False
    return progress.before_capture_known or progress.failure_kind is not None


def piecewise_auto_rules(args: Mapping[str, Any]) -> list[str]:
    """The 0.5.10 ``_handle_piecewise_cuda_graph`` rules that hold for these resolved args."""
    rules = []
    if args.get("speculative_algorithm") not in (None, "", "NONE"):
        rules.append(f"speculative decoding ({args.get('speculative_algorithm')}) disables it (0.5.10)")
    if args.get("enable_dp_attention") is True:
        rules.append("DP attention")
    if args.get("enable_torch_compile") is True:
        rules.append("torch compile")
    if isinstance(args.get("pp_size"), int) and args["pp_size"] > 1:
        rules.append("pp_size > 1")
    if args.get("moe_a2a_backend") not in (None, "none"):
        rules.append(f"moe_a2a_backend={args.get('moe_a2a_backend')}")
    if args.get("enable_lora") is True or args.get("lora_paths"):
        rules.append("LoRA")
    if args.get("moe_runner_backend") in ("flashinfer_trtllm", "flashinfer_mxfp4"):
        rules.append(f"moe_runner_backend={args.get('moe_runner_backend')}")
    if args.get("enable_symm_mem") is True:
        rules.append("symmetric memory")
    if args.get("disaggregation_mode") not in (None, "null"):
        rules.append(f"PD disaggregation ({args.get('disaggregation_mode')})")
    if args.get("enable_deterministic_inference") is True:
        rules.append("deterministic inference")
    if args.get("enable_multimodal") is True:
        rules.append("multimodal model")
    return rules
