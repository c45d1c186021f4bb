from __future__ import annotations

from typing import Optional

import msgspec
from sglang.srt.arg_groups.arg_utils import A, Arg
from sglang.srt.arg_groups.choices import Backend


class ExecGraph(msgspec.Struct):
    _NS_PATH = "exec.graph"
    cuda_graph_backend_decode: A[Optional[str], Arg(help="decode graph", choices=Backend.ALL)] = None
    cuda_graph_max_bs_decode: A[Optional[int], "max bs decode"] = None
    cuda_graph_max_bs_prefill: A[Optional[int], "max bs prefill"] = None
    fp8_gemm_runner_backend: A[str, Arg(help="fp8", cli_name="--fp8-gemm-backend", choices=["auto", "cutlass"])] = "auto"
