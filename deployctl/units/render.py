"""Render a deployment's profile into a systemd unit (Jinja2, StrictUndefined).

The only importer of Jinja2. Every value reaches the template already quoted by ``deployctl.unit_escape``
(and the same quoting is offered to custom templates as filters), so the template decides layout,
never escaping. The unit carries ``X-Deployctl-Deployment/Profile/Hash`` in ``[Unit]``; the hash is the
SHA-256 of the unit text with the hash's own value blanked, so ``deployctl.units.stamp.read_stamp`` can tell
whether an installed unit is exactly what deployctl wrote.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import jinja2

from deployctl.errors import InputError
from deployctl.inventory.model import (
    Deployment,
    EnvRef,
    FlagValue,
    Host,
    Inventory,
    ResolvedProfile,
    resolve_profile,
)
from deployctl.unit_escape import (
    EnvArg,
    environment_assignment,
    exec_arg,
    forbidden_character,
    plain_value,
)
from deployctl.units.stamp import with_hash

__all__ = [
    "RenderedUnit", "exec_argv", "flag_arguments", "render_unit",
    "unit_environment",
]

# Looked up in order: next to the inventory, the checkout's templates/ (where operators read and add
# templates; its sglang.service.j2 is a link to the bundled one), then the template shipped in the wheel.
REPO_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
BUNDLED_TEMPLATES = Path(str(importlib.resources.files("deployctl.units") / "templates"))
SGLANG_MODULE = "sglang.launch_server"
SIM_MODULE = "deployctl.sim"


@dataclass(frozen=True)
class RenderedUnit:
    name: str  # the unit file name, e.g. sglang-glm5.service
    text: str
    sha256: str  # == the unit's X-Deployctl-Hash
    deployment: str
    profile: str


def render_unit(
    inv: Inventory, deployment: str | Deployment, profile: str, *, default_python: str | None = None
) -> RenderedUnit:
    """Render one profile. ``default_python`` serves hosts without ``python:`` (simulated ones)."""
    dep = inv.deployment(deployment) if isinstance(deployment, str) else deployment
    host = inv.hosts[dep.host]
    resolved = resolve_profile(inv, dep, profile)
    where = f"deployments.{dep.name}.profiles.{profile}"
    argv = exec_argv(inv, dep, resolved, default_python=default_python)
    env = unit_environment(host, resolved)

    # One ExecStart line per flag (with its values), joined by systemd's line continuation.
    exec_lines = [" ".join(_quoted(f"hosts.{dep.host}.python", exec_arg, arg) for arg in argv[:4])]
    for name, value in resolved.flags.items():
        group = flag_arguments({name: value})
        if group:
            exec_lines.append(" ".join(_quoted(f"{where}.flags.{name}", exec_arg, arg) for arg in group))
    context = {
        "deployment": dep.name,
        "profile": profile,
        "unit": dep.unit,
        "description": plain_value(f"SGLang {dep.name} ({profile} profile), managed by deployctl"),
        "user": _optional(f"deployments.{dep.name}.user", dep.user),
        "group": _optional(f"deployments.{dep.name}.group", dep.group),
        "working_directory": _optional(f"deployments.{dep.name}.working_directory", dep.working_directory),
        "environment_file": _optional(f"deployments.{dep.name}.environment_file", dep.environment_file),
        "environment": [_quoted(f"{where}.env.{name}", environment_assignment, name, value)
                        for name, value in env.items()],
        "exec_start": " \\\n    ".join(exec_lines),
        "simulated": host.simulated,
        "content_hash": "",
    }
    try:
        text = _template(_template_dirs(inv), dep.template).render(context)
    except jinja2.TemplateError as exc:
        raise InputError(f"unit template {dep.template}: {exc}") from None
    _check_rendered(text, dep.template)
    text, digest = with_hash(text)
    return RenderedUnit(name=dep.unit, text=text, sha256=digest, deployment=dep.name, profile=profile)


def exec_argv(
    inv: Inventory, deployment: Deployment, resolved: ResolvedProfile, *, default_python: str | None = None
) -> list[str]:
    """The unit's command line, unquoted: interpreter, ``-u -m MODULE``, then the flags."""
    host = inv.hosts[deployment.host]
    python = host.python or default_python
    if python is None:
        raise InputError(
            f"host {deployment.host!r} has no python: interpreter to run",
            hint=f"set hosts.{deployment.host}.python to the SGLang venv's interpreter",
        )
    module = SIM_MODULE if host.simulated else SGLANG_MODULE
    return [python, "-u", "-m", module, *flag_arguments(resolved.flags)]


def flag_arguments(flags: dict[str, FlagValue]) -> list[str]:
    """``{"tp": 8, "disable-cuda-graph": True, "cuda-graph-bs": ["1", "2"]}`` → SGLang argv."""
    args: list[str] = []
    for name, value in flags.items():
        if value is False or value is None:
            continue
        args.append(f"--{name}")
        if isinstance(value, list):
            args.extend(str(item) for item in value)
        elif isinstance(value, EnvRef):
            args.append(EnvArg(value.name))
        elif value is not True:
            args.append(str(value))
    return args


def unit_environment(host: Host, resolved: ResolvedProfile) -> dict[str, str]:
    """Every ``Environment=`` of the unit, in order: fixed ones, host facts, then the profile's."""
    env = {"PYTHONUNBUFFERED": "1"}
    if host.cuda_home:
        env["CUDA_HOME"] = host.cuda_home
    if host.simulated:
        gpus = host.gpus
        env["SGLANG_SIM_GPU_NAME"] = gpus.model
        env["SGLANG_SIM_GPU_COUNT"] = str(gpus.count)
        env["SGLANG_SIM_COMPUTE_CAPABILITY"] = gpus.compute_capability
        if gpus.memory_gb is not None:
            env["SGLANG_SIM_GPU_MEMORY_GB"] = f"{gpus.memory_gb:g}"
        if gpus.power_limit_w is not None:
            env["SGLANG_SIM_POWER_LIMIT_W"] = f"{gpus.power_limit_w:g}"
        env["SGLANG_SIM_P2P"] = "1" if host.p2p else "0"
    env.update(resolved.env)
    return env


# ------------------------------------------------------------------------------------------ helpers


def _quoted(key: str, quote: Callable[..., str], *values: str) -> str:
    try:
        return quote(*values)
    except ValueError as exc:
        raise InputError(f"{key}: {exc}", hint="fix the inventory value; unit files cannot carry it") from None


def _optional(key: str, value: str | None) -> str | None:
    return None if value is None else _quoted(key, plain_value, value)


def _template_dirs(inv: Inventory) -> tuple[str, ...]:
    dirs = (inv.directory, REPO_TEMPLATES, BUNDLED_TEMPLATES)
    return tuple(dict.fromkeys(str(d) for d in dirs if d and Path(d).is_dir()))


@lru_cache(maxsize=8)
def _environment(search_path: tuple[str, ...]) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(search_path)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # For custom templates that build lines themselves: the same quoting the context already has.
    env.filters.update(exec_arg=exec_arg, environment_assignment=environment_assignment, unit_value=plain_value)
    return env


def _template(search_path: tuple[str, ...], name: str) -> jinja2.Template:
    if name.startswith("/"):
        search_path, name = (str(Path(name).parent),), Path(name).name
    try:
        return _environment(search_path).get_template(name)
    except jinja2.TemplateNotFound:
        raise InputError(
            f"unit template {name!r} not found (looked in {', '.join(search_path)})",
            hint="deployments.NAME.template names a .j2 file next to the inventory or in templates/",
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(f"unit template {exc.filename or name}:{exc.lineno}: {exc.message}") from None


def _check_rendered(text: str, template: str) -> None:
    """Last line of defence: a rendered unit is lines of text, each a directive, header or comment."""
    for number, line in enumerate(text.splitlines(), 1):
        bad = forbidden_character(line)
        if bad:
            raise InputError(f"template {template} produced {bad} on line {number} of the unit")
