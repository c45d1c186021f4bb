"""Name the cause of a failed SGLang start from the text it printed (pure; exact texts in the facts §7).

Kinds (stable, documented in docs/startup.md):
    unknown_flag      argparse: ``unrecognized arguments: --x`` (exit 2)
    bad_flag          any other argparse rejection (invalid choice, ambiguous option, missing value) or
                      a ``ValueError``/``AssertionError`` raised while ServerArgs resolves the flags
    model_not_found   the model is neither a local folder nor a reachable Hub repo (exit 1)
    oom_kv_cache      ``Not enough memory. Please try to increase --mem-fraction-static``
    oom_cuda_graph    ``Capture cuda graph failed: CUDA out of memory…``
    oom               any other CUDA out-of-memory (weights, warm-up)
    nccl              ``NCCL error`` while the TP group is built, or a ``DistBackendError``
    rank_died         a scheduler process was killed (``Rank i scheduler died…`` / ``…is dead``)
    port_in_use       uvicorn could not bind (``[Errno 98] … address already in use``)
    warmup_failed     ``Initialization failed. warmup error: …``
    crashed           ``Subprocess … crashed with exit code …`` (watchdog, after start-up)
    exception         any other Python exception that stopped a process
"""

from __future__ import annotations

import re

FLAG_KINDS = frozenset({"unknown_flag", "bad_flag"})
FAILURE_KINDS = (
    "unknown_flag", "bad_flag", "model_not_found", "oom_kv_cache", "oom_cuda_graph", "oom", "nccl",
    "rank_died", "port_in_use", "warmup_failed", "crashed", "exception",
)
# A later, more specific cause replaces an earlier generic one; otherwise the first cause stands.
GENERIC_KINDS = frozenset({"exception", "rank_died", "crashed"})

EXCEPTION_LINE_RE = re.compile(r"^((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt|Failure))(?::\s?(.*))?$")
ARGPARSE_ERROR_RE = re.compile(r"^(launch_server\.py|sglang serve|sglang|[\w.\-]+\.py): error: (.*)$")
UNRECOGNIZED_RE = re.compile(r"unrecognized arguments: (.*)$")
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
        return "oom_cuda_graph" if "out of memory" in exc_line.lower() else "exception"
    if "NCCL error" in exc_line or "DistBackendError" in exc_line or "ncclSystemError" in exc_line \
            or "ncclInternalError" in exc_line or "ncclUnhandledCudaError" in exc_line:
        return "nccl"
    if RANK_DIED_RE.search(exc_line):
        return "rank_died"
    if any(cue in exc_line for cue in MODEL_NOT_FOUND_CUES):
        return "model_not_found"
    if "OutOfMemoryError" in exc_line or "CUDA out of memory" in exc_line:
        return "oom"
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
