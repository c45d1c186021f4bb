"""The inventory: hosts, model presets, deployments and their profiles, validated into typed models.

``load_inventory(path)`` reads one YAML file and either returns an ``Inventory`` or raises
``InventoryInvalid`` listing *every* problem as ``FILE:LINE: key.path: message``. Validation runs in
two passes over the same parsed document, and their problems are reported together:

1. structure, by the pydantic models of ``schema`` (unknown keys, wrong types, missing keys, bad
   names/paths), their errors located by ``pydantic_problems``;
2. meaning, by ``checks.Checks`` (flag and environment values, references between sections,
   inheritance cycles, control characters anywhere, unit names and ports unique per host, policy
   overrides).

This module is the inventory's API: the models are re-exported so callers import from one place.

Schema reference: ``inventory/README.md``.
"""

from __future__ import annotations

import difflib
from pathlib import Path as FsPath
from typing import Any, Mapping

import yaml
from pydantic import ValidationError

from deployctl.errors import InputError
from deployctl.inventory.checks import Checks
from deployctl.inventory.layers import deep_merge, layered
from deployctl.inventory.marked_yaml import HostileYaml, load_marked
from deployctl.inventory.policy import Policy
from deployctl.inventory.problems import InventoryInvalid, Problem, dotted
from deployctl.inventory.pydantic_problems import pydantic_problems
from deployctl.inventory.schema import (
    DEFAULT_TEMPLATE,
    Deployment,
    EnvRef,
    FlagValue,
    Gpus,
    Host,
    Inventory,
    ModelPreset,
    Profile,
    ResolvedProfile,
)

__all__ = [
    "DEFAULT_TEMPLATE", "Deployment", "EnvRef", "FlagValue", "Gpus", "Host", "Inventory", "InventoryInvalid", "ModelPreset",
    "Problem", "Profile", "ResolvedProfile", "decode_inventory", "deployment_policy", "load_inventory",
    "parse_inventory", "profile_chain", "resolve_profile",
]


def load_inventory(path: str | FsPath) -> Inventory:
    """Read and validate an inventory file. Raises InputError / InventoryInvalid (exit 2)."""
    name = str(path)
    try:
        data = FsPath(path).read_bytes()
    except FileNotFoundError:
        raise InputError(
            f"inventory file not found: {name}",
            hint="pass -i FILE, set DEPLOYCTL_INVENTORY, or create /etc/deployctl/inventory.yaml",
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read inventory {name}: {exc.strerror or exc}") from None
    inventory = parse_inventory(decode_inventory(data, name), name)
    inventory._directory = str(FsPath(path).resolve().parent)
    return inventory


def decode_inventory(data: bytes, file: str = "<inventory>") -> str:
    """The file's text; a byte that is not UTF-8 is reported at its line and key path."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        key = "(file)"
        try:  # the key path, from the text with the bad bytes replaced
            marked = load_marked(data.decode("utf-8", errors="replace"))
            on_line = [p for p, n in marked.lines.items() if n == line]
            key = dotted(max(on_line, key=len)) if on_line else key
        except yaml.YAMLError:
            pass
        byte = data[exc.start]
        raise InventoryInvalid(file, [Problem(
            file, line, key, f"byte 0x{byte:02x} at column {column} is not UTF-8; save the file as UTF-8")]) from None


def parse_inventory(text: str, file: str = "<inventory>") -> Inventory:
    """Validate inventory YAML text; ``file`` is only used to name the source in problems."""
    try:
        marked = load_marked(text)
    except HostileYaml as exc:
        raise InventoryInvalid(file, [Problem(file, exc.line, dotted(exc.path), exc.message)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        detail = " ".join(part for part in (exc.context, exc.problem) if part)
        raise InventoryInvalid(file, [Problem(file, line, "(yaml)", f"not valid YAML: {detail}")]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, a lone surrogate …)
        line = text.count("\n", 0, exc.position) + 1
        raise InventoryInvalid(file, [Problem(file, line, "(yaml)", f"not valid YAML: {exc}")]) from None
    except yaml.YAMLError as exc:
        raise InventoryInvalid(file, [Problem(file, 1, "(yaml)", f"not valid YAML: {exc}")]) from None

    problems = [Problem(file, line, dotted(path), message) for line, path, message in marked.problems]
    if not isinstance(marked.data, dict):
        what = "empty" if marked.data is None else f"a {type(marked.data).__name__}, not a mapping"
        problems.append(Problem(file, 1, "(file)", f"the inventory is {what}; expected hosts:, models:, deployments:"))
        raise InventoryInvalid(file, problems)

    inventory: Inventory | None = None
    try:
        inventory = Inventory.model_validate(marked.data)
    except ValidationError as exc:
        problems += pydantic_problems(exc, marked, file, Inventory, ())
    checks = Checks(marked, file)
    checks.run()
    problems += checks.problems
    if problems or inventory is None:
        raise InventoryInvalid(file, _unique(problems))
    return _normalized(inventory, checks, file)


def resolve_profile(inv: Inventory, deployment: str | Deployment, profile: str) -> ResolvedProfile:
    """Flags and environment of one profile after ``extends`` and ``null`` removals."""
    dep = _deployment(inv, deployment)
    if profile not in dep.profiles:
        known = ", ".join(dep.profiles)
        close = difflib.get_close_matches(profile, list(dep.profiles), n=1)
        raise InputError(f"deployment {dep.name!r} has no profile {profile!r} (known: {known})",
                         hint=f"did you mean {close[0]!r}?" if close else
                         "`deployctl validate` lists each deployment's profiles")
    preset = inv.models[dep.model]
    chain = [dep.profiles[name] for name in reversed(_chain(dep.profiles, profile))]
    flags: dict[str, Any] = {"model-path": preset.path}
    if preset.served_name is not None:
        flags["served-model-name"] = preset.served_name
    flags = layered([flags, preset.flags, *(p.flags for p in chain)])
    flags = {name: value for name, value in flags.items() if value is not False}
    flags["port"] = dep.port
    env = layered([preset.env, *(p.env for p in chain)])
    return ResolvedProfile(flags=flags, env=env)


def deployment_policy(inv: Inventory, deployment: str | Deployment) -> Policy:
    """The global policy with the deployment's ``policy:`` block laid over it (mappings merge deeply)."""
    dep = _deployment(inv, deployment)
    if not dep.policy:
        return inv.policy
    return Policy.model_validate(deep_merge(inv.policy.model_dump(), dep.policy))


def profile_chain(inv: Inventory, deployment: str | Deployment, profile: str) -> list[str]:
    """``profile`` followed by the profiles it extends, nearest first."""
    return _chain(_deployment(inv, deployment).profiles, profile)


# ------------------------------------------------------------------------------------------ helpers


def _deployment(inv: Inventory, deployment: str | Deployment) -> Deployment:
    return inv.deployment(deployment) if isinstance(deployment, str) else deployment


def _chain(profiles: Mapping[str, Any], start: str) -> list[str]:
    chain = [start]
    while True:
        parent = _extends(profiles[chain[-1]])
        if parent is None:
            return chain
        if parent in chain:
            raise InputError(f"profile inheritance cycle: {' -> '.join(chain + [parent])}")
        chain.append(parent)


def _extends(profile: Any) -> str | None:
    return profile.extends if isinstance(profile, Profile) else profile.get("extends")


def _unique(problems: list[Problem]) -> list[Problem]:
    return sorted(set(problems))

def _normalized(inventory: Inventory, checks: Checks, file: str) -> Inventory:
    """Swap in the checked flag/env values and name every deployment."""
    models = {
        name: preset.model_copy(update={
            "flags": checks.normalized[("models", name, "flags")],
            "env": checks.normalized[("models", name, "env")],
        })
        for name, preset in inventory.models.items()
    }
    deployments = {}
    for dep_name, dep in inventory.deployments.items():
        base = ("deployments", dep_name, "profiles")
        profiles = {
            name: profile.model_copy(update={
                "flags": checks.normalized[base + (name, "flags")],
                "env": checks.normalized[base + (name, "env")],
            })
            for name, profile in dep.profiles.items()
        }
        new = dep.model_copy(update={"profiles": profiles})
        new._name = dep_name
        deployments[dep_name] = new
    result = inventory.model_copy(update={"models": models, "deployments": deployments})
    result._source = file
    return result
