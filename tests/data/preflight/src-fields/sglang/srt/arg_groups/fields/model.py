from __future__ import annotations

import argparse
from typing import List, Literal, Optional

import msgspec
from sglang.srt.arg_groups.arg_utils import A, Arg, Derived


class Model(msgspec.Struct):
    _NS_PATH = "model"
    model_path: A[str, Arg(help="weights", aliases=["--model"])]
    tp_size: A[int, Arg(help="tensor parallel", aliases=["--tensor-parallel-size"])] = 1
    dsa_decode_backend: A[Optional[Literal["flashmla_kv", "trtllm"]], "DSA decode backend."] = None
    page_size: A[Optional[int], Arg(help="page", choices=[16, 32, 64, 128])] = None
    enable_tf32_matmul: A[Optional[bool], Arg(help="tf32", action=argparse.BooleanOptionalAction)] = None
    disable_radix_cache: A[bool, "radix"] = False
    cuda_graph_bs_decode: A[Optional[List[int]], "batch sizes"] = None
    hidden_knob: A[int, Arg(help="resolved", no_cli=True)] = 0
    rank: A[int, Derived(doc="set at run time")] = 0
    plain_field: int = 0
