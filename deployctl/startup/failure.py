"""Name the cause of a failed SGLang start from the text it printed (pure; exact texts in the facts §7).

Kinds (stable, documented in docs/startup.md):
    unknown_flag      argparse: ``unrecognized arguments: --x`` (exit 2)
    bad_flag          any other argparse rejection (invalid choice, ambiguous option, missing value) or
                      a ``ValueError``/``AssertionError`` raised while ServerArgs resolves the flags
    model_not_found   the model is neither a local folder nor a reachable Hub repo (exit 1)
    oom_kv_cache      ``Not enough memory. Please try to increase --mem-fraction-static``
    oom_cuda_graph    ``Capture cuda graph failed: CUDA out of memory…``, or a CUDA OOM whose traceback runs
                      through the decode runner's capture (tracebacks.py)
    cuda_graph_failed ``Capture cuda graph failed: <any other reason>`` (a kernel without an image for this
                      GPU, an illegal memory access, an assertion in a model's forward…)
    oom               any other CUDA out-of-memory (weights, warm-up)
    nccl              ``NCCL error`` while the TP group is built, or a ``DistBackendError``, or an NCCL
                      error a kernel or torch's watchdog printed (``Failed: NCCL error file:line '…'``)
    cuda_error        a CUDA runtime error: ``CUDA error (file:line): no kernel image is available…``
                      printed by a kernel, ``CUDA error: an illegal memory access was encountered``
    rank_died         a scheduler process was killed (``Rank i scheduler died…`` / ``…is dead``)
    port_in_use       uvicorn could not bind (``[Errno 98] … address already in use``)
    warmup_failed     ``Initialization failed. warmup error: …``
    crashed           ``Subprocess … crashed with exit code …`` (watchdog, after start-up), or a process
                      that died below Python (``Fatal Python error: Segmentation fault``, the shell's
                      ``Segmentation fault (core dumped)`` / ``Killed``)
    exception         any other Python exception that stopped a process
    process_exit      the container stopped with a non-zero code (``svc exited with code 137``) and no
                      line said why
"""

from __future__ import annotations

import re

FLAG_KINDS = frozenset({"unknown_flag", "bad_flag"})
FAILURE_KINDS = (
    "unknown_flag", "bad_flag", "model_not_found", "oom_kv_cache", "oom_cuda_graph", "cuda_graph_failed", "oom",
    "nccl", "cuda_error", "rank_died", "port_in_use", "warmup_failed", "crashed", "exception", "process_exit",
)
# A later, more specific cause replaces an earlier generic one; otherwise the first cause stands.
GENERIC_KINDS = frozenset({"exception", "rank_died", "crashed", "process_exit"})
# ... and a capture failure replaces the runtime error it wraps (the kernel printed the error first, then
# the capture raised it with the phase and the reason).
REFINES = {"cuda_graph_failed": frozenset({"cuda_error", "nccl", "oom"}),
           "oom_cuda_graph": frozenset({"oom", "cuda_error"})}

EXCEPTION_LINE_RE = re.compile(r"^((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt|Failure))(?::\s?(.*))?$")
ARGPARSE_ERROR_RE = re.compile(r"^(launch_server\.py|sglang serve|sglang|[\w.\-]+\.py): error: (.*)$")
UNRECOGNIZED_RE = re.compile(r"unrecognized arguments: (.*)$")
# Capture failures of every graph and version: "Capture cuda graph failed: …" (0.4–0.5.22),
# "Capture prefill CUDA graph failed: …" (0.5.23), "Capture piecewise cuda graph failed: …".
CAPTURE_FAILED_RE = re.compile(r"Capture ((?:[a-z]+ ){0,2})(?:cuda|CUDA) graph failed: ?(.*)$")
# Errors printed by C++/CUDA code, not raised as a Python exception: a kernel's CUDA_CHECK, NCCL's and
# custom all-reduce's CUDACHECK/NCCLCHECK ("Failed: Cuda error file:line 'text'"), c10's terminate
# message ("  what():  CUDA error: …"), torch's NCCL watchdog ("[rank3]:[E… ProcessGroupNCCL.cpp…]
# … Process group watchdog thread terminated with exception: CUDA error: …").
KERNEL_ERROR_RE = re.compile(
    r"(?:^|\s|\]:?\s?|what\(\):\s+|terminated with exception: )"
    r"((?:CUDA|Cuda|NCCL) error(?: \(([^)]*)\))?(?::\s?| in: | (\S+:\d+) ')(.+?)'?)$"
)
KERNEL_ERROR_CUES = ("CUDA error", "Cuda error", "NCCL error", "collective operation timeout",
                     "no kernel image is available", "an illegal memory access was encountered",
                     "cudaErrorNoKernelImageForDevice")
# Said by the CUDA runtime whatever printed it ("cudaLaunchKernelEx(…): no kernel image is available …").
_CUDA_RUNTIME_TEXTS = KERNEL_ERROR_CUES[4:]
COLLECTIVE_TIMEOUT_RE = re.compile(r"Watchdog caught collective operation timeout: .*?(?= Exception raised|$)")
TORCH_RANK_RE = re.compile(r"\[rank(\d+)\]")
# A process that died below Python: faulthandler's header, the shell's words for a signal, absl's handler.
FATAL_LINE_RE = re.compile(r"^(?:Fatal Python error: .+|Segmentation fault(?: \(core dumped\))?|Aborted \(core dumped\)"
                           r"|\*\*\* SIGSEGV received at .+|Killed)$")
CONTAINER_EXIT_RE = re.compile(r"^([A-Za-z0-9][\w.-]*) exited with code (\d+)$")
RANK_DIED_RE = re.compile(r"Rank (\d+) scheduler (?:died during initialization|is dead)")
MODEL_NOT_FOUND_CUES = (
    "is not a local folder and is not a valid model identifier",
    "couldn't connect to 'https://huggingface.co'",
    "RepositoryNotFoundError",
    "HFValidationError",
    "GatedRepoError",
    "does not appear to have a file named config.json",
)


def classify_exception(exc_line: str, *, in_server_args: bool = False) -> str:
    """The failure kind for the final exception line of a traceback."""
    if "Not enough memory" in exc_line and "mem-fraction-static" in exc_line:
        return "oom_kv_cache"
    if "graph failed" in exc_line and "Capture" in exc_line:
        return "oom_cuda_graph" if "out of memory" in exc_line.lower() else "cuda_graph_failed"
    if "NCCL error" in exc_line or "DistBackendError" in exc_line or "ncclSystemError" in exc_line \
            or "ncclInternalError" in exc_line or "ncclUnhandledCudaError" in exc_line:
        return "nccl"
    if RANK_DIED_RE.search(exc_line):
        return "rank_died"
    if any(cue in exc_line for cue in MODEL_NOT_FOUND_CUES):
        return "model_not_found"
    if "OutOfMemoryError" in exc_line or "CUDA out of memory" in exc_line or "CUDA error: out of memory" in exc_line:
        return "oom"
    if "CUDA error" in exc_line or "Cuda error" in exc_line or "illegal memory access" in exc_line \
            or "CUBLAS_STATUS_" in exc_line or "device-side assert" in exc_line or "Triton Error [CUDA]" in exc_line \
            or "no kernel image is available" in exc_line:
        return "cuda_error"
    if in_server_args and exc_line.split(":", 1)[0] in ("ValueError", "AssertionError"):
        return "bad_flag"
    return "exception"


def exception_message(exc_line: str, *, keep_type: bool) -> str:
    """``RuntimeError: text`` → ``text`` for errors SGLang raises itself; the whole line otherwise."""
    if keep_type:
        return exc_line
    match = EXCEPTION_LINE_RE.match(exc_line)
    if match and match.group(2):
        return match.group(2)
    return exc_line


def unknown_flags(argparse_error: str) -> tuple[str, ...]:
    """The option strings in ``unrecognized arguments: --a 3 --b`` (values dropped)."""
    match = UNRECOGNIZED_RE.search(argparse_error)
    if not match:
        return ()
    return tuple(token for token in match.group(1).split() if token.startswith("-"))


def kernel_error(text: str) -> tuple[str, str, int | None] | None:
    """(kind, message, torch rank) for a CUDA/NCCL error line printed outside a Python traceback, else
    None. The message keeps the kernel's ``file:line``: it tells which kernel has no image for this GPU."""
    if not any(cue in text for cue in KERNEL_ERROR_CUES):
        return None
    timeout = COLLECTIVE_TIMEOUT_RE.search(text)
    if timeout is not None:  # a rank waited for a peer that never came (torch's NCCL watchdog)
        rank = TORCH_RANK_RE.search(text)
        return "nccl", timeout.group(0).strip(), int(rank.group(1)) if rank else None
    match = KERNEL_ERROR_RE.search(text)
    if match is None:
        if any(cue in text for cue in _CUDA_RUNTIME_TEXTS):
            rank = TORCH_RANK_RE.search(text)
            return "cuda_error", text.strip(), int(rank.group(1)) if rank else None
        return None
    message = match.group(1).strip() + ("'" if match.group(3) else "")
    lower = message.lower()
    kind = "oom" if "out of memory" in lower else "nccl" if message.startswith("NCCL") else "cuda_error"
    rank = TORCH_RANK_RE.search(text[:match.start(1)])
    return kind, message, int(rank.group(1)) if rank else None
