"""What each timestamped SGLang record means: a table of message prefixes and their handlers (pure).

Each handler reads one record into the ``State`` of the start (state.py). The
table is keyed by the message's first character, so a record costs one dict lookup and a few
``startswith`` calls; the few messages recognised by a substring are tried last.
"""

from __future__ import annotations

import re
from typing import Callable

from deployctl.startup.failure import RANK_DIED_RE, kernel_error
from deployctl.startup.lines import Rank, Record
from deployctl.startup.patterns import (
    ACCESS_RE,
    CAPTURE_BS_LIST_RE,
    FLAG_RE,
    LISTEN_RE,
    QUANT_RE,
    MAMBA_RE,
    LOAD_END_RE,
    NEGATIVE_BUDGET_RE,
    WARMUP_PATHS,
    moe_warning,
    read_capture,
    read_kv,
    read_summary,
)
from deployctl.startup.report import Deprecation
from deployctl.startup.state import MAX_NOTICES, State, label, primacy, rank_number, tp_of
from deployctl.startup.tracebacks import Traceback, clip

Handler = Callable[[State, Record, str], None]


def _init_begin(st: State, rec: Record, msg: str) -> None:
    st.mark("distributed_init", rec)
    if msg.startswith("Init parallel"):
        st.cue("'Init parallel begin.' (after 0.5.10)")
    elif msg.startswith("Init nccl"):
        st.cue("'Init nccl begin.' (until 0.3.5)")
    else:
        st.cue("'Init torch distributed begin.' (0.3.3 … 0.5.22)")


def _init_ends(st: State, rec: Record, msg: str) -> None:
    if "elapsed=" in msg:
        st.cue("'Init torch distributed ends. elapsed=' (0.5.8.post1 … 0.5.22)")
    elif "mem usage=" in msg:  # the whole line: a cut one says nothing about elapsed=
        st.cue("'Init torch distributed ends.' without elapsed= (0.4.3.post1 … 0.5.8.post1)")


def _warmup_failed(st: State, rec: Record, msg: str) -> None:
    st.close_tb()
    st.tb = Traceback("warmup", None, clip(label(rec)))


def _load_begin(st: State, rec: Record, msg: str) -> None:
    st.mark("load_weights", rec)


def _load_end(st: State, rec: Record, msg: str) -> None:
    st.mark("kv_cache", rec)
    match = LOAD_END_RE.match(msg)
    if not match:
        return
    if match.group(6) is None:
        st.cue("'Load weight end.' without mem usage= (until 0.4.10.post1)")
    elif match.group(1) is None:
        st.cue("'Load weight end.' with mem usage= and without elapsed= (0.4.3.post1 … 0.5.8.post1)")
    elif match.group(4):
        st.cue("'Load weight end.' with elapsed= and dtype= (0.5.8.post1 … 0.5.9)")
    else:
        st.cue("'Load weight end.' with elapsed= and without dtype= (from 0.5.10)")
    quant = QUANT_RE.search(msg)
    if quant and st.weight_quant is None:
        st.weight_quant = quant.group(1) + (f" ({quant.group(2)})" if quant.group(2) else "")
    # The first rank's figures, replaced by TP0's (a node-1 log of a multi-node run has no TP0).
    tp = tp_of(rec.rank)
    if st.model_class is None or (tp == 0 and st.weights_rank != 0):
        st.model_class = match.group(3)
        st.weights_gb = float(match.group(6)) if match.group(6) else None
        st.weights_rank = tp
    elif st.draft_class is None and match.group(3) != st.model_class:
        st.draft_class = match.group(3)  # the draft worker loads after the target (…ForCausalLMMTP, Eagle3…)


def _kv(st: State, rec: Record, msg: str) -> None:
    st.mark("kv_cache", rec)
    _negative_budget(st, rec, msg)
    tp = tp_of(rec.rank)
    if st.kv is not None and (tp != 0 or st.kv_rank == 0):
        return
    kv = read_kv(msg)
    if kv is None:
        return
    if kv.dtype is not None:
        st.cue("'KV Cache is allocated. dtype:' (after 0.5.10)")
    elif kv.tokens is None:
        st.cue("'KV Cache is allocated.' without #tokens (0.3.6.post1 … 0.4.10.post1)")
    else:
        st.cue("'KV Cache is allocated. #tokens:' (0.4.3.post1 … 0.5.22)")
    st.kv, st.kv_rank = kv, tp


def _negative_budget(st: State, rec: Record, msg: str) -> None:
    match = NEGATIVE_BUDGET_RE.search(msg)
    if match and st.kv_budget_warning is None:
        st.kv_budget_warning = (f"negative KV token budget ({match.group(1).rstrip(':')} {match.group(2)}): "
                                f"the pool does not fit, a failure is on its way — {clip(label(rec))}")


def _mamba(st: State, rec: Record, msg: str) -> None:
    st.mark("kv_cache", rec)
    match = MAMBA_RE.match(msg)
    if match and st.mamba is None:
        st.mamba = int(match.group(1))


def _pool_end(st: State, rec: Record, msg: str) -> None:
    st.mark("cuda_graphs", rec)


def _capture(st: State, rec: Record, msg: str) -> None:
    listed = CAPTURE_BS_LIST_RE.match(msg)
    if listed:  # 0.5.x: "Capture cuda graph bs [1, 2, 4, …]" (TP0), the sizes before the bar shows them
        role = "draft" if "draft" in listed.group(1) else "target"
        key = f"{role}_{'extend' if 'extend' in listed.group(1) else 'decode'}"
        st.capture.batch_sizes[key] = [int(x) for x in re.findall(r"\d+", listed.group(2))]
        st.capture.listed.add(key)
        return
    found = read_capture(msg)
    if found is None:
        return
    log, tp = st.capture, tp_of(rec.rank)
    if found.key == "target_prefill":
        st.cue("'Capture piecewise CUDA graph' (0.5.4.post1 … 0.5.22)" if "piecewise" in msg
               else "'Capture … CUDA graph begin. backend=' (after 0.5.10)")
    elif "backend=" in msg:
        st.cue("'Capture … CUDA graph begin. backend=' (after 0.5.10)")
    elif found.begin and found.key == "target_decode":
        if "avail mem=" in msg:
            st.cue("'Capture cuda graph begin.' with avail mem= (0.4.3.post1 … 0.5.22)")
        elif msg.rstrip().endswith("minutes."):  # the whole line, not one cut before "avail mem="
            st.cue("'Capture cuda graph begin.' without avail mem= (until 0.4.10.post1)")
    if found.begin:
        st.mark("cuda_graphs", rec)
        if tp == 0:
            log.context = found.key
        log.begun.add(found.key)
        return
    log.ended.add(found.key)
    if tp == 0 and found.key not in log.seconds:
        if found.seconds is not None:
            log.seconds[found.key] = found.seconds
        if found.batch_sizes and found.key not in log.listed:
            log.batch_sizes[found.key] = found.batch_sizes


def _summary(st: State, rec: Record, msg: str) -> None:
    _negative_budget(st, rec, msg)
    if st.summary is not None and primacy(rec.rank) >= primacy(st.summary_rank):
        return
    found = read_summary(msg)
    if found is None:
        return
    st.mark("http_server", rec)
    if "chunked_prefill_size" not in found.keys:
        st.cue("scheduler summary without chunked_prefill_size= (until 0.4.2)")
    if found.available_gpu_mem_gb is None:
        st.cue("scheduler summary without available_gpu_mem= (until 0.4.10.post1)")
    else:
        st.cue("scheduler summary with available_gpu_mem= (from 0.4.3.post1)")
    st.summary, st.summary_rank = found, rec.rank


def _kv_dtype(st: State, rec: Record, msg: str) -> None:
    st.kv_dtype = msg[len("Using KV cache dtype: "):].strip()


def _listening(st: State, rec: Record, msg: str) -> None:
    match = LISTEN_RE.match(msg)
    st.listening = match.group(1) if match else None
    st.http_up = True
    st.mark("warmup", rec)


def _http_server(st: State, rec: Record, msg: str) -> None:
    st.mark("http_server", rec)


def _ready(st: State, rec: Record, msg: str) -> None:
    st.ready = True
    st.mark("ready", rec)


def _piecewise_disabled(st: State, rec: Record, msg: str) -> None:
    st.capture.piecewise_disable_reason = msg[len("Disable piecewise CUDA graph because "):]


def _prefill_disabled(st: State, rec: Record, msg: str) -> None:
    st.capture.prefill_disable_reason = msg[len("Disable prefill CUDA graph because "):]


def _rank_exception(st: State, rec: Record, msg: str) -> None:
    st.close_tb()
    number = rank_number(rec.rank) if rec.rank is not None else None
    st.tb = Traceback("rank", number if number is not None or rec.rank is None else 0, clip(label(rec)))
    st.failed_rank(rec.rank)


def _kernel(st: State, rec: Record, msg: str) -> None:
    """A CUDA/NCCL error a kernel printed (no Python traceback): fatal on its rank."""
    found = kernel_error(msg)
    if found is None:
        return
    kind, message, torch_rank = found
    rank = rec.rank if rec.rank is not None else Rank(tp=torch_rank) if torch_rank is not None else None
    st.failed_rank(rank)
    st.fail(kind, message, evidence=(clip(label(rec)),), rank=rank_number(rank) if rank is not None else None)


def _sigquit(st: State, rec: Record, msg: str) -> None:
    st.close_tb()
    st.sigquit = clip(label(rec))
    if "child proces." in msg:
        st.cue("'Received sigquit from a child proces.' (typo, until 0.5.3)")


def _crashed(st: State, rec: Record, msg: str) -> None:
    if "crashed with exit code" in msg:
        st.fail("crashed", msg, evidence=(clip(label(rec)),), rank=None)


def _kill_tree(st: State, rec: Record, msg: str) -> None:
    st.cue("'kill_process_tree called:' (after 0.5.10)")


def _sliding_window(st: State, rec: Record, msg: str) -> None:
    st.mark("kv_cache", rec)
    _negative_budget(st, rec, msg)


def rank_died(st: State, rec: Record, msg: str) -> None:
    died = RANK_DIED_RE.search(msg)
    if died:
        st.failed_rank(Rank(tp=int(died.group(1))))
    st.fail("rank_died", msg.removeprefix("RuntimeError: "), evidence=(clip(label(rec)),),
            rank=int(died.group(1)) if died else None, exception=msg if rec.ts is not None else None)


def _port_in_use(st: State, rec: Record, msg: str) -> None:
    st.fail("port_in_use", msg, evidence=(clip(label(rec)),), rank=None)


def _moe(st: State, rec: Record, msg: str) -> None:
    if "not found" not in msg:
        return
    found = moe_warning(msg)
    if found is None:
        return
    entry = st.moe.setdefault((found["kind"], found["config_file"]), {**found, "ranks": set()})
    entry["ranks"].add(tp_of(rec.rank))


def deprecation(st: State, rec: Record, msg: str) -> None:
    if "Endpoint '/get_model_info' is deprecated" in msg:
        st.cue("'Endpoint '/get_model_info' is deprecated' (from 0.5.4.post1)")
    if msg in st.deprecations or len(st.deprecations) >= MAX_NOTICES:
        return
    st.deprecations[msg] = Deprecation(clip(msg), tuple(dict.fromkeys(FLAG_RE.findall(msg))))


def access(st: State, msg: str) -> None:
    match = ACCESS_RE.search(msg)
    if not match:
        return
    method, path, status = match.groups()
    # The warm-up's own poll (after uvicorn listens, before its request), not a client's call.
    if path.startswith("/get_model_info") and method == "GET" and st.warmup_request is None and not st.ready:
        st.cue("warm-up polls GET /get_model_info (until 0.5.7)")
    if st.http_up and not st.ready and st.warmup_request is None and method == "POST" \
            and path.startswith(WARMUP_PATHS):
        st.warmup_request = f"{method} {path}"
        if status != "200":
            st.warmup_request += f" ({status})"


# Message prefix → handler, grouped by the first character (checked in order: longer prefixes first).
_PREFIXES: tuple[tuple[str, Handler], ...] = (
    ("Init torch distributed begin", _init_begin),
    ("Init parallel begin", _init_begin),
    ("Init nccl begin", _init_begin),
    ("Init torch distributed ends", _init_ends),
    ("Initialization failed. warmup error", _warmup_failed),
    ("Load weight begin", _load_begin),
    ("Load weight end", _load_end),
    ("KV Cache is allocated", _kv),
    ("Full KV Cache is allocated", _kv),
    ("SWA KV Cache is allocated", _kv),
    ("Mamba Cache is allocated", _mamba),
    ("Memory pool end", _pool_end),
    ("Capture", _capture),
    ("max_total_num_tokens=", _summary),
    ("Using KV cache dtype: ", _kv_dtype),
    ("Using default MoE kernel config", _moe),
    ("Using MoE kernel config with down_moe", _moe),
    ("Use sliding window memory pool", _sliding_window),
    ("Uvicorn running on", _listening),
    ("Started server process", _http_server),
    ("Application startup complete", _http_server),
    ("The server is fired up and ready to roll", _ready),
    ("Disable piecewise CUDA graph because", _piecewise_disabled),
    ("Disable prefill CUDA graph because", _prefill_disabled),
    ("Down MoE config", _moe),
    ("Config file not found at", _moe),
    ("Scheduler hit an exception", _rank_exception),
    ("DataParallelController hit an exception", _rank_exception),
    ("DetokenizerManager hit an exception", _rank_exception),
    ("TokenizerManager hit an exception", _rank_exception),
    ("Received sigquit", _sigquit),
    ("Subprocess", _crashed),
    ("kill_process_tree called", _kill_tree),
)
BY_FIRST: dict[str, tuple[tuple[str, Handler], ...]] = {}
for _prefix, _handler in _PREFIXES:
    BY_FIRST[_prefix[0]] = (*BY_FIRST.get(_prefix[0], ()), (_prefix, _handler))

# Messages told by a substring, wherever it sits (tried when no prefix matched).
BY_SUBSTRING: tuple[tuple[str, Handler], ...] = (
    ("scheduler died during initialization", rank_died),
    ("scheduler is dead", rank_died),
    ("address already in use", _port_in_use),
    ("[Errno 98]", _port_in_use),
    ("eprecat", deprecation),
    ("rror", _kernel),  # "CUDA error (file:line): …", "NCCL error …" logged with a stamp: last, one scan
)


def dispatch(st: State, rec: Record, msg: str) -> bool:
    """Run the handler of this message, if it has one; True when it had."""
    for prefix, handler in BY_FIRST.get(msg[:1], ()):
        if msg.startswith(prefix):
            handler(st, rec, msg)
            return True
    for needle, handler in BY_SUBSTRING:
        if needle in msg:
            handler(st, rec, msg)
            return True
    return False
