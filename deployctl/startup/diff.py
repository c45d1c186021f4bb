"""What changed between two startups, and which flag differences plausibly explain each change.

    changes = diff_startups(baseline_report, candidate_report, profile_diff=None, host="sm120")
    for change in changes:
        print(change)   # max_running_requests 48 → 26 (−46%): capped by the mamba cache size …

Two kinds of explanation are given for a changed fact:
- causes read from the reports themselves (the mamba cap ``max_mamba_cache_size // ratio``, graph
  batch sizes clipped to the request pool, an automatic piecewise-graph rule), and
- flag differences (from a ``ProfileDiff`` and/or the two ``server_args`` dumps) that the data
  catalogue ``facts/startup-attribution.yaml`` links to that fact, each marked when an architecture
  gate means it cannot have had an effect on this host.
Pure: no I/O beyond reading the packaged catalogue once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import yaml

from deployctl.facts.interactions import arch_gate, field_name
from deployctl.startup.report import StartupReport


@dataclass(frozen=True)
class FlagDifference:
    """One configuration difference between baseline (a) and candidate (b)."""

    flag: str  # ServerArgs field name, or "env:NAME"
    before: Any
    after: Any
    source: str  # profile | server_args
    gate_note: str | None = None  # e.g. "no effect on SM120: gated to SM90/SM100"
    effective: bool | None = None  # False when a gate rules an effect out on this host

    @property
    def phrase(self) -> str:
        name = self.flag
        if self.before in (None, False, "") and self.after is True or (self.before is None and self.after is not None):
            text = f"the candidate adds {name}" + ("" if self.after is True else f"={_show(self.after)}")
        elif self.before is True and self.after in (None, False) or (self.after is None and self.before is not None):
            text = f"the candidate drops {name}"
        else:
            text = f"{name} {_show(self.before)} → {_show(self.after)}"
        return f"{text} ({self.gate_note})" if self.gate_note else text


@dataclass(frozen=True)
class Explanation:
    flag: FlagDifference
    why: str


@dataclass(frozen=True)
class FactChange:
    fact: str
    before: Any
    after: Any
    change: str | None = None  # "−46%" for numbers
    causes: tuple[str, ...] = ()  # read from the reports
    explanations: tuple[Explanation, ...] = ()  # catalogued flag differences

    @property
    def text(self) -> str:
        head = f"{self.fact} {_show(self.before)} → {_show(self.after)}"
        if self.change:
            head += f" ({self.change})"
        parts = list(self.causes) + [e.flag.phrase for e in self.explanations]
        if not parts:
            parts = ["no catalogued flag difference explains it"]
        elif not self.causes and all(e.flag.effective is False for e in self.explanations):
            parts.append("none of these can act on this host")
        return f"{head}: " + "; ".join(parts)

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return {"fact": self.fact, "before": self.before, "after": self.after, "change": self.change,
                "causes": list(self.causes),
                "explanations": [{"flag": e.flag.flag, "before": e.flag.before, "after": e.flag.after,
                                  "why": e.why, "effective": e.flag.effective, "gate": e.flag.gate_note,
                                  "phrase": e.flag.phrase} for e in self.explanations],
                "text": self.text}


@lru_cache(maxsize=1)
def catalogue() -> dict[str, Any]:
    text = resources.files("deployctl.facts").joinpath("startup-attribution.yaml").read_text()
    return yaml.safe_load(text)


# ---------------------------------------------------------------------------------------------------

def diff_startups(a: StartupReport, b: StartupReport, profile_diff: Any = None, host: Any = None) -> list[FactChange]:
    """Every fact that differs from ``a`` (baseline) to ``b`` (candidate), with its explanations."""
    flags = flag_differences(a, b, profile_diff, host)
    by_flag = {d.flag: d for d in flags}
    cat = catalogue()
    memory_facts = set(cat["memory_facts"])
    changes = []
    outcome_changed = a.outcome != b.outcome
    for fact, before, after in _fact_pairs(a, b):
        if before == after:
            continue
        # A start that failed earlier has no value for the facts it never reached: the outcome line
        # says so once, instead of one "→ none" line per fact.
        if (after is None and not b.ready) or (before is None and not a.ready):
            continue
        if fact == "failure.kind" and outcome_changed:
            continue
        reasons = dict(cat["facts"].get(fact, {}))
        if fact in memory_facts:
            for name, why in cat["memory_flags"].items():
                reasons.setdefault(name, why)
        explanations = [Explanation(_memory_side_effect(by_flag[name]) if fact in memory_facts else by_flag[name], why)
                        for name, why in reasons.items() if name in by_flag]
        explanations.sort(key=lambda e: e.flag.effective is False)
        changes.append(FactChange(fact, before, after, _percent(before, after), tuple(_causes(fact, a, b)),
                                  tuple(explanations)))
    return changes


def unexplained_flags(changes: list[FactChange], flags: list[FlagDifference]) -> list[FlagDifference]:
    """Flag differences linked to none of the changed facts (shown separately, with their gate notes)."""
    used = {e.flag.flag for change in changes for e in change.explanations}
    return [d for d in flags if d.flag not in used]


def flag_differences(a: StartupReport, b: StartupReport, profile_diff: Any = None, host: Any = None) -> list[FlagDifference]:
    """Configuration differences: the profile diff's (as the operator wrote them) and then the
    resolved ``server_args`` differences not already covered."""
    ignore = set(catalogue().get("ignore", ()))
    arch = _arch(host)
    version = b.sglang_version or a.sglang_version
    found: dict[str, FlagDifference] = {}
    if profile_diff is not None:
        for name, value in _items(getattr(profile_diff, "flags_added", {})):
            found[field_name(name)] = FlagDifference(field_name(name), None, value, "profile")
        for name, value in _items(getattr(profile_diff, "flags_removed", {})):
            found[field_name(name)] = FlagDifference(field_name(name), value, None, "profile")
        for name, pair in _items(getattr(profile_diff, "flags_changed", {})):
            found[field_name(name)] = FlagDifference(field_name(name), pair[0], pair[1], "profile")
        for name, value in _items(getattr(profile_diff, "env_added", {})):
            found[f"env:{name}"] = FlagDifference(f"env:{name}", None, value, "profile")
        for name, value in _items(getattr(profile_diff, "env_removed", {})):
            found[f"env:{name}"] = FlagDifference(f"env:{name}", value, None, "profile")
        for name, pair in _items(getattr(profile_diff, "env_changed", {})):
            found[f"env:{name}"] = FlagDifference(f"env:{name}", pair[0], pair[1], "profile")
    args_a, args_b = a.server_args or {}, b.server_args or {}
    for name in args_b:
        if name in args_a and name not in found and name not in ignore and args_a[name] != args_b[name]:
            found[name] = FlagDifference(name, args_a[name], args_b[name], "server_args")
    return [_gated(d, arch, version, args_b or args_a) for d in found.values()]


# ---------------------------------------------------------------------------------------------------

def _fact_pairs(a: StartupReport, b: StartupReport) -> list[tuple[str, Any, Any]]:
    def graph_max(r: StartupReport) -> int | None:
        return max(r.cuda_graph.batch_sizes) if r.cuda_graph.batch_sizes else None

    def moe(r: StartupReport) -> tuple[str, ...]:
        return tuple(sorted(w.config_file for w in r.moe_config_warnings))

    pairs = [
        ("outcome", a.outcome, b.outcome),
        ("failure.kind", a.failure.kind if a.failure else None, b.failure.kind if b.failure else None),
        ("sglang_version", a.sglang_version, b.sglang_version),
        ("model_class", a.model_class, b.model_class),
        ("weights_gb", a.weights_gb, b.weights_gb),
        ("max_running_requests", a.max_running_requests, b.max_running_requests),
        ("configured_max_running_requests", a.configured_max_running_requests, b.configured_max_running_requests),
        ("max_total_num_tokens", a.max_total_num_tokens, b.max_total_num_tokens),
        ("max_prefill_tokens", a.max_prefill_tokens, b.max_prefill_tokens),
        ("chunked_prefill_size", a.chunked_prefill_size, b.chunked_prefill_size),
        ("context_len", a.context_len, b.context_len),
        ("available_gpu_mem_gb", a.available_gpu_mem_gb, b.available_gpu_mem_gb),
        ("max_mamba_cache_size", a.max_mamba_cache_size, b.max_mamba_cache_size),
        ("kv_cache.dtype", a.kv_cache.dtype if a.kv_cache else None, b.kv_cache.dtype if b.kv_cache else None),
        ("cuda_graph.state", a.cuda_graph.state, b.cuda_graph.state),
        ("cuda_graph.max_bs", graph_max(a), graph_max(b)),
        ("cuda_graph.draft_captured", a.cuda_graph.draft_captured, b.cuda_graph.draft_captured),
        ("piecewise_cuda_graph.state", a.piecewise_cuda_graph.state, b.piecewise_cuda_graph.state),
        ("moe_config_warnings", moe(a), moe(b)),
        ("deprecations", tuple(d.message for d in a.deprecations), tuple(d.message for d in b.deprecations)),
        ("ranks", len(a.ranks), len(b.ranks)),
    ]
    ta, tb = a.total_seconds, b.total_seconds
    if ta and tb and abs(tb - ta) >= max(5.0, 0.1 * ta):
        pairs.append(("startup_seconds", ta, tb))
    return pairs


def mamba_ratio(args: Mapping[str, Any]) -> int:
    """The divisor of the hybrid-model request cap (facts §0.3, 0.5.9/0.5.10 kv_cache mixin)."""
    if args.get("disable_radix_cache") is True:
        return 1
    ratio = 3
    strategy = args.get("mamba_scheduler_strategy") or args.get("mamba_radix_cache_strategy")
    if strategy == "extra_buffer":
        ratio += 1 if args.get("disable_overlap_schedule") is True else 2
    return ratio


def _mamba_cap_text(r: StartupReport) -> str | None:
    if r.max_mamba_cache_size is None or r.max_running_requests is None:
        return None
    ratio = mamba_ratio(r.server_args or {})
    cap = r.max_mamba_cache_size // ratio
    if cap == r.max_running_requests:
        return f"{r.max_mamba_cache_size} // {ratio} = {cap}"
    return None


def _causes(fact: str, a: StartupReport, b: StartupReport) -> list[str]:
    causes: list[str] = []
    if fact == "max_running_requests":
        cap_b, cap_a = _mamba_cap_text(b), _mamba_cap_text(a)
        if cap_b or cap_a:
            sizes = ""
            if a.max_mamba_cache_size != b.max_mamba_cache_size:
                sizes = f"max_mamba_cache_size {_show(a.max_mamba_cache_size)} → {_show(b.max_mamba_cache_size)}, "
            causes.append(f"capped by the mamba cache size on hybrid models ({sizes}{cap_b or cap_a})")
        elif b.configured_max_running_requests and b.max_running_requests is not None \
                and b.max_running_requests < b.configured_max_running_requests:
            causes.append(f"below the configured {b.configured_max_running_requests}: capped by the request pool")
        if a.configured_max_running_requests != b.configured_max_running_requests:
            causes.append(f"configured value {_show(a.configured_max_running_requests)} → "
                          f"{_show(b.configured_max_running_requests)}")
    elif fact in ("max_total_num_tokens", "max_mamba_cache_size", "available_gpu_mem_gb"):
        if a.weights_gb is not None and b.weights_gb is not None and a.weights_gb != b.weights_gb:
            causes.append(f"weights take {a.weights_gb:g} → {b.weights_gb:g} GB per GPU")
    elif fact == "cuda_graph.max_bs":
        if b.max_running_requests is not None and b.cuda_graph.batch_sizes \
                and max(b.cuda_graph.batch_sizes) <= b.max_running_requests < (
                    max(a.cuda_graph.batch_sizes) if a.cuda_graph.batch_sizes else 1 << 30):
            causes.append("graph batch sizes are clipped to the request pool")
    elif fact == "piecewise_cuda_graph.state" and b.piecewise_cuda_graph.reason:
        causes.append(f"automatic rule: {b.piecewise_cuda_graph.reason}")
    elif fact == "outcome" and b.failure is not None:
        causes.append(f"{b.failure.kind}: {b.failure.message}")
    return causes


def _gated(diff: FlagDifference, arch: str | None, version: str | None, args: Mapping[str, Any]) -> FlagDifference:
    if diff.after in (None, False) and diff.before in (None, False):
        return diff
    gate = catalogue().get("gates", {}).get(diff.flag.removeprefix("env:"))
    if not gate:
        return _interaction_gated(diff, arch, version)
    note = gate.get("note")
    effective: bool | None = None
    archs = gate.get("archs")
    if archs:
        if version and version in gate.get("any_arch_versions", ()):
            note = f"{version} acts on any architecture"
        elif arch is not None:
            effective = arch in archs
            note = None if effective else f"no effect on {arch.upper()}: {gate['note']}"
        else:
            note = f"takes effect only on {'/'.join(a.upper() for a in archs)}"
    runners = gate.get("runners")
    if runners and args.get("moe_runner_backend") not in (None, *runners):
        effective = False
        note = f"no effect with moe_runner_backend={args.get('moe_runner_backend')}: {gate['note']}"
    elif runners:
        note = gate["note"]
    return FlagDifference(diff.flag, diff.before, diff.after, diff.source, note, effective)


def _memory_side_effect(diff: FlagDifference) -> FlagDifference:
    """A flag whose primary function a gate rules out here can still move memory (``memory_any_arch``)."""
    note = (catalogue().get("gates", {}).get(diff.flag) or {}).get("memory_any_arch")
    return replace(diff, gate_note=note, effective=True) if note and diff.effective is False else diff


def _interaction_gated(diff: FlagDifference, arch: str | None, version: str | None) -> FlagDifference:
    """The gate from sglang-flag-interactions.yaml, for flags the curated catalogue does not annotate."""
    value = diff.after if diff.after not in (None, False) else diff.before
    gate = arch_gate(diff.flag, value, version)
    if gate is None:
        return diff
    archs = "/".join(a.upper() for a in gate.archs)
    if arch is None:
        return replace(diff, gate_note=f"takes effect only on {archs}")
    if arch in gate.archs:
        return replace(diff, effective=True)
    return replace(diff, gate_note=f"outside its architecture gate on {arch.upper()}: {archs} only", effective=False)


def _arch(host: Any) -> str | None:
    """'sm120' from 'sm120', 'SM120', '12.0', a Host-like object (gpus.compute_capability) or a mapping."""
    if host is None:
        return None
    value = host
    if not isinstance(host, str):
        gpus = host.get("gpus") if isinstance(host, Mapping) else getattr(host, "gpus", None)
        value = (gpus.get("compute_capability") if isinstance(gpus, Mapping)
                 else getattr(gpus, "compute_capability", None))
        if value is None:
            return None
    text = str(value).strip().lower().removeprefix("sm_").removeprefix("sm")
    if "." in text:
        major, _, minor = text.partition(".")
        text = f"{major}{minor or '0'}"
    return f"sm{text}" if text.isdigit() else None


def _items(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return [(name, True) for name in value]
    return []


def _percent(before: Any, after: Any) -> str | None:
    if isinstance(before, bool) or isinstance(after, bool):
        return None
    if isinstance(before, (int, float)) and isinstance(after, (int, float)) and before:
        pct = (after - before) / abs(before) * 100
        sign = "+" if pct > 0 else "−" if pct < 0 else "±"
        return f"{sign}{abs(pct):.0f}%"
    return None


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]" if value else "[]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def model_mismatch(a: StartupReport, b: StartupReport) -> str | None:
    """A warning when A and B served different models: their facts differ for that reason alone, and
    the flag attributions above do not hold. Compared on the dump's model_path, else the model class."""
    for key, what in (("model_path", "model"), ("served_model_name", "served model")):
        left, right = (a.server_args or {}).get(key), (b.server_args or {}).get(key)
        if isinstance(left, str) and isinstance(right, str):
            if left != right:
                return (f"A and B are different {what}s ({left} vs {right}): their startup facts are not "
                        "comparable, and no flag difference explains the changes")
            return None
    if a.model_class and b.model_class and a.model_class != b.model_class:
        return (f"A and B load different model classes ({a.model_class} vs {b.model_class}): their startup "
                "facts are not comparable, and no flag difference explains the changes")
    return None
