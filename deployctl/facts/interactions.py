"""The flag-interaction catalogue (``sglang-flag-interactions.yaml``) as typed records, and the
architecture gate of a flag (value) taken from it.

An entry's ``flag`` is free text: ``--attention-backend trtllm_mha``, ``--attention-backend
torch_native|flex_attention``, ``SGLANG_ENABLE_SPEC_V2 (env)``, ``(GPU memory size)``. Entries that
name a CLI flag (optionally with values) and give ``archs_effective`` as a list become gates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class Interaction:
    field: str | None  # ServerArgs field ("attention_backend"), "env:NAME", or None (not a flag)
    values: tuple[str, ...]  # the flag values the entry is about; () = any value
    effect: str
    condition: str
    archs: Any  # list of "SM90"…, "any", or {version or value: list}
    side_effects: tuple[str, ...]
    versions: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Gate:
    archs: tuple[str, ...]  # lower case: ("sm100", "sm103")
    effect: str
    source: str


# CLI spellings whose ServerArgs field is not the flag with "-" → "_" (argparse dest= or allow_abbrev).
_CLI_ALIASES = {"tp": "tp_size", "dp": "dp_size", "pp": "pp_size", "ep": "ep_size", "model": "model_path",
                "fp8_gemm_backend": "fp8_gemm_runner_backend", "fp4_gemm_backend": "fp4_gemm_runner_backend",
                "tensor_parallel_size": "tp_size", "data_parallel_size": "dp_size",
                "pipeline_parallel_size": "pp_size", "expert_parallel_size": "ep_size"}


def field_name(flag: str) -> str:
    """``--mem-fraction-static`` / ``mem-fraction-static`` → ``mem_fraction_static`` (``--tp`` → ``tp_size``)."""
    key = flag.strip().lstrip("-").replace("-", "_")
    return _CLI_ALIASES.get(key, key)


def _parse_flag(text: str) -> tuple[str | None, tuple[str, ...]]:
    text = text.strip()
    if text.endswith("(env)"):
        return f"env:{text.split()[0]}", ()
    if not text.startswith("--"):
        return None, ()
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    values: tuple[str, ...] = ()
    if rest and not rest.startswith(("(", "/")):
        values = tuple(rest.split()[0].split("|"))
    return field_name(name), values


@lru_cache(maxsize=1)
def load_interactions() -> tuple[Interaction, ...]:
    text = resources.files("deployctl.facts").joinpath("sglang-flag-interactions.yaml").read_text()
    data = yaml.safe_load(text)
    out = []
    for entry in data.get("interactions", ()):
        field, values = _parse_flag(str(entry.get("flag", "")))
        out.append(Interaction(
            field=field, values=values, effect=str(entry.get("effect", "")), condition=str(entry.get("condition", "")),
            archs=entry.get("archs_effective"), side_effects=tuple(entry.get("side_effects") or ()),
            versions=tuple(str(v) for v in entry.get("versions") or ()), source=str(entry.get("source", ""))))
    return tuple(out)


def arch_gate(field: str, value: Any, version: str | None = None) -> Gate | None:
    """Where setting ``field`` (to ``value``) takes effect, when the catalogue restricts it by
    architecture; None when it acts on any architecture or the catalogue does not say."""
    for item in load_interactions():
        if item.field != field or (item.values and str(value) not in item.values):
            continue
        archs = item.archs
        if isinstance(archs, dict):  # keyed by version ("0.5.23") or by value ("flashinfer_trtllm")
            archs = archs.get(version) if version in archs else archs.get(str(value))
        if not isinstance(archs, list):
            continue
        names = tuple(str(a).lower() for a in archs if str(a).upper().startswith("SM"))
        if names:
            return Gate(names, item.effect, item.source)
    return None


@lru_cache(maxsize=1)
def _implies() -> dict[str, tuple[str, ...]]:
    text = resources.files("deployctl.facts").joinpath("sglang-flag-interactions.yaml").read_text()
    data = yaml.safe_load(text).get("implies") or {}
    return {str(k): tuple(str(f) for f in v.get("fields", ())) for k, v in data.items()}


def implied_fields(key: str) -> tuple[str, ...]:
    """The fields (or ``env:NAME``) whose values only mean something with ``key`` set: SGLang derives
    them from it when unset, so a bisect applies them together with it (``implies:`` in the catalogue)."""
    return _implies().get(key, ())
