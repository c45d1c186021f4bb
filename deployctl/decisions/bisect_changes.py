"""The changes a bisect searches over: the semantic profile diff cut into units that can be applied alone.

A flag and the values it implies are one change (``--speculative-algorithm`` with its step, top-k and
draft-token counts): applying the algorithm without them, or them without it, is a configuration
nobody wrote. The groups come from ``implies:`` in ``facts/sglang-flag-interactions.yaml``. A subset of
changes is written as an inventory profile that ``extends`` the live one (``null`` removes), so an
intermediate profile renders through the same template and the survivor prints as YAML to paste.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import yaml

from deployctl.facts.interactions import field_name, implied_fields
from deployctl.units.profilediff import ProfileDiff, format_value


@dataclass(frozen=True)
class Change:
    """One unit of the diff: flags and env set to their candidate values (None: removed)."""

    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, Any] = field(default_factory=dict)
    texts: tuple[str, ...] = ()  # "+ --enable-metrics", "~ OMP_NUM_THREADS 8 -> 4"

    @property
    def text(self) -> str:
        return self.texts[0] if len(self.texts) == 1 else f"{self.texts[0]} (with {', '.join(self.texts[1:])})"

    @property
    def keys(self) -> frozenset[str]:
        """The names the startup attribution speaks of: ServerArgs fields and ``env:NAME``."""
        return frozenset({field_name(f) for f in self.flags} | {f"env:{e}" for e in self.env})


def changes_from_diff(diff: ProfileDiff) -> tuple[Change, ...]:
    """The diff's changes in its own order, each implied flag folded into the flag that implies it."""
    singles: list[tuple[str, str, Any, str]] = []  # (kind, name, candidate value or None, text)
    for name, value in diff.flags_added.items():
        singles.append(("flag", name, value, f"+ --{name}" + ("" if value is True else f" {format_value(value)}")))
    for name, value in diff.flags_removed.items():
        singles.append(("flag", name, None, f"- --{name}"))
    for name, (old, new) in diff.flags_changed.items():
        singles.append(("flag", name, new, f"~ --{name} {format_value(old)} -> {format_value(new)}"))
    for name, value in diff.env_added.items():
        singles.append(("env", name, value, f"+ {name}={value}"))
    for name, value in diff.env_removed.items():
        singles.append(("env", name, None, f"- {name}"))
    for name, (old, new) in diff.env_changed.items():
        singles.append(("env", name, new, f"~ {name} {old} -> {new}"))

    def key(kind: str, name: str) -> str:
        return field_name(name) if kind == "flag" else f"env:{name}"

    present = {key(kind, name) for kind, name, _, _ in singles}
    leader_of: dict[str, str] = {}
    for kind, name, _, _ in singles:
        for implied in implied_fields(key(kind, name)):
            if implied in present and implied != key(kind, name):
                leader_of.setdefault(implied, key(kind, name))
    groups: dict[str, list[tuple[str, str, Any, str]]] = {}
    for item in singles:
        k = key(item[0], item[1])
        groups.setdefault(leader_of.get(k, k), []).append(item)
    # a leader's own entry first, so the change is named after the flag that implies the others
    out = []
    for lead, items in groups.items():
        items.sort(key=lambda it: key(it[0], it[1]) != lead)
        out.append(Change(flags={n: v for kind, n, v, _ in items if kind == "flag"},
                          env={n: v for kind, n, v, _ in items if kind == "env"},
                          texts=tuple(t for *_, t in items)))
    return tuple(out)


def overlay(changes: Iterable[Change]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The flags and env to lay over the live profile (None removes) for a set of changes."""
    flags: dict[str, Any] = {}
    env: dict[str, Any] = {}
    for change in changes:
        flags.update(change.flags)
        env.update(change.env)
    return flags, env


def profile_definition(base: str, changes: Iterable[Change], description: str) -> dict[str, Any]:
    """An inventory profile: ``base`` plus ``changes``, as the operator would write it."""
    flags, env = overlay(changes)
    out: dict[str, Any] = {"description": description, "extends": base}
    if flags:
        out["flags"] = flags
    if env:
        out["env"] = env
    return out


def profile_yaml(name: str, definition: Mapping[str, Any]) -> str:
    """The profile as YAML to paste under the deployment's ``profiles:``."""
    return yaml.safe_dump({name: dict(definition)}, sort_keys=False, default_flow_style=False)


# Each startup gate (deployctl.judge.gates) names the startup fact it checks (deployctl.startup.diff).
_GATE_FACTS = (
    ("effective max_running_requests", "max_running_requests"),
    ("KV cache capacity", "max_total_num_tokens"),
    ("piecewise CUDA graphs", "piecewise_cuda_graph.state"),
    ("CUDA graphs", "cuda_graph.state"),
    ("new warning", "moe_config_warnings"),
    ("did not start", "outcome"),
    ("never reported ready", "outcome"),
)


def gate_facts(gate_failures: Iterable[str]) -> frozenset[str]:
    """The startup facts behind the gate failures (``startup gate: effective max_running_requests …``)."""
    out = set()
    for failure in gate_failures:
        for label, fact in _GATE_FACTS:
            if label in failure:
                out.add(fact)
                break
    return frozenset(out)


def startup_blame(changes: tuple[Change, ...], subset: Iterable[int], facts: frozenset[str],
                  fact_changes: Iterable[Any], failure_message: str = "") -> frozenset[int]:
    """The changes of ``subset`` that the startup catalogue links to the failed ``facts``.

    ``fact_changes``: the startup diff (``deployctl.startup.diff.FactChange``), whose explanations name
    the flag differences catalogued for each fact. A start that failed outright blames the changes whose
    flag its message names (``unrecognized arguments: --enable-warp-drive``)."""
    explaining = {e.flag.flag for fc in fact_changes if fc.fact in facts for e in fc.explanations}
    blamed = {i for i in subset if changes[i].keys & explaining}
    if failure_message:
        words = set(failure_message.replace("=", " ").split())
        blamed |= {i for i in subset if any(f"--{name}" in words for name in changes[i].flags)}
    return frozenset(blamed)
