"""The report's header facts: parallelism, weight quantisation, speculative decoding (pure).

Each comes from the ``server_args`` dump when the log has one (every version names these fields
``tp_size``, ``dp_size``, ``ep_size``, ``pp_size``, ``quantization``, ``speculative_*``), else from
what other lines show: the rank prefixes (``[… DP3 TP5 EP5]``, ``PP1``), ``Load weight end``'s
``quant=…, quant_algo=…`` (0.5.10+), the draft model's capture lines.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from deployctl.startup.lines import Rank
from deployctl.startup.report import Parallelism, Speculative


def _size(args: Mapping[str, Any], key: str) -> int | None:
    value = args.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parallelism(args: Mapping[str, Any], ranks: Iterable[Rank]) -> Parallelism | None:
    seen = list(ranks)
    if _size(args, "tp_size") is not None:
        ep = _size(args, "ep_size") or 1
        dp_attention = args.get("enable_dp_attention")
        return Parallelism(tp=_size(args, "tp_size") or 1, dp=_size(args, "dp_size") or 1, ep=ep,
                           pp=_size(args, "pp_size") or 1, nnodes=_size(args, "nnodes") or 1,
                           dp_attention=dp_attention if isinstance(dp_attention, bool) else None)
    if not seen:
        return None

    def extent(values: Iterable[int | None]) -> int:
        return max((v for v in values if v is not None), default=-1) + 1 or 1

    # The prefix shows TP only when tp_size > 1 and so on: a part that never appears is 1.
    return Parallelism(tp=extent(r.tp for r in seen), dp=extent(r.dp for r in seen), ep=extent(r.ep for r in seen),
                       pp=extent(r.pp for r in seen), source="rank_prefixes")


def quantization(args: Mapping[str, Any], load_line_quant: str | None,
                 moe_dtypes: Iterable[str | None] = ()) -> tuple[str | None, str | None]:
    """(quantisation, source). The load line's ``quant_algo`` says more than the dump's method; a
    checkpoint quantised in its own config shows ``quantization=None`` in the dump, and then only the
    fused-MoE kernel config's ``dtype=fp8_w8a8`` (before 0.5.10) names it."""
    if load_line_quant:
        return load_line_quant, "load_weight_line"
    value = args.get("quantization")
    if isinstance(value, str) and value and value.lower() != "none":
        return value, "server_args"
    dtype = next((d for d in moe_dtypes if d), None)
    if dtype:
        return dtype, "moe_kernel_config"
    return None, None


def speculative(args: Mapping[str, Any], draft_graph_seen: bool, draft_class: str | None = None) -> Speculative | None:
    algorithm = args.get("speculative_algorithm")
    if isinstance(algorithm, str) and algorithm and algorithm.upper() != "NONE":
        def number(key: str) -> int | None:
            value = args.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        draft = args.get("speculative_draft_model_path")
        return Speculative(algorithm, draft if isinstance(draft, str) and draft else None,
                           number("speculative_num_steps"), number("speculative_eagle_topk"),
                           number("speculative_num_draft_tokens"), draft_model_class=draft_class)
    if draft_graph_seen and not args:
        return Speculative(None, source="capture_lines", draft_model_class=draft_class)
    return None
