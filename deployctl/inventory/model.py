"""The inventory: hosts, model presets, deployments and their profiles, validated into typed models.

``load_inventory(path)`` reads one YAML file and either returns an ``Inventory`` or raises
``InventoryInvalid`` listing *every* problem as ``FILE:LINE: key.path: message``. Validation runs in
two passes over the same parsed document, and their problems are reported together:

1. structure, by the pydantic models below (unknown keys, wrong types, missing keys, bad names/paths);
2. meaning, by ``_Checks`` (flag and environment values, references between sections, inheritance
   cycles, control characters anywhere, unit names and ports unique per host, policy overrides).

Schema reference: ``inventory/README.md``.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any, Iterable, Mapping, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from deployctl.errors import InputError
from deployctl.inventory.flags import ALIASES, KNOWN_FLAGS, RESERVED_ENV, RESERVED_FLAGS
from deployctl.inventory.marked_yaml import MarkedYaml, load_marked
from deployctl.inventory.policy import Policy
from deployctl.inventory.problems import InventoryInvalid, Problem
from deployctl.units.escape import ENV_NAME, forbidden_character

__all__ = [
    "Deployment", "Gpus", "Host", "Inventory", "InventoryInvalid", "ModelPreset", "Problem", "Profile",
    "ResolvedProfile", "deployment_policy", "load_inventory", "parse_inventory", "resolve_profile",
]

DEFAULT_TEMPLATE = "sglang.service.j2"
FlagValue = Union[str, int, float, bool, list[str]]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_FLAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_UNIT = re.compile(r"[A-Za-z0-9_.:-]+\.service")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]+")
_PATH = re.compile(r"/[A-Za-z0-9._/@+:,~-]*")
_ADDRESS = re.compile(r"[A-Za-z0-9._:@\[\]-]+")
_CAPABILITY = re.compile(r"sm[0-9]{2,3}[a-z]?")
_TEMPLATE = re.compile(r"[A-Za-z0-9_.-]+\.j2")


def _absolute_path(value: str | None) -> str | None:
    if value is not None and not _PATH.fullmatch(value):
        raise ValueError(
            f"expected an absolute path of plain characters (letters, digits and . _ - / @ + : , ~), got {value!r}"
        )
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _empty_is_none(value: Any) -> Any:
    """``flags:`` with every entry commented out is YAML null: read it as an empty mapping."""
    return {} if value is None else value


class Gpus(_Strict):
    model: str = Field(description="GPU model name, e.g. 'NVIDIA RTX PRO 6000 Blackwell'")
    count: int = Field(ge=1)
    compute_capability: str = Field(description="'sm120', 'sm100', 'sm90' …")
    power_limit_w: float | None = Field(default=None, gt=0)
    memory_gb: float | None = Field(default=None, gt=0)

    @field_validator("compute_capability")
    @classmethod
    def _capability(cls, value: str) -> str:
        if not _CAPABILITY.fullmatch(value):
            raise ValueError(f"expected a compute capability such as 'sm120' or 'sm90', got {value!r}")
        return value

    @property
    def capability_major(self) -> int:
        """'sm120' → 12, 'sm90' → 9 (the major version SGLang's architecture gates test)."""
        digits = self.compute_capability[2:].rstrip("abcdefghijklmnopqrstuvwxyz")
        return int(digits[:-1])


class Host(_Strict):
    address: str = "localhost"
    gpus: Gpus
    p2p: bool = Field(default=False, description="GPU peer-to-peer available (false: all-reduce via host memory)")
    python: str | None = Field(default=None, description="interpreter of the SGLang venv")
    cuda_home: str | None = None
    simulated: bool = False

    _python = field_validator("python", "cuda_home")(_absolute_path)

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        if not _ADDRESS.fullmatch(value):
            raise ValueError(f"expected a host name or address, got {value!r}")
        return value


class ModelPreset(_Strict):
    path: str = Field(description="--model-path: a Hugging Face repo id or a local directory")
    served_name: str | None = Field(default=None, description="--served-model-name")
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)

    _empty = field_validator("flags", "env", mode="before")(_empty_is_none)


class Profile(_Strict):
    extends: str | None = None
    description: str | None = None
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)

    _empty = field_validator("flags", "env", mode="before")(_empty_is_none)


class Deployment(_Strict):
    host: str
    unit: str
    port: int = Field(ge=1, le=65535)
    model: str
    template: str = DEFAULT_TEMPLATE
    user: str | None = None
    group: str | None = None
    environment_file: str | None = Field(default=None, description="optional secrets file (EnvironmentFile=-)")
    working_directory: str | None = None
    profiles: dict[str, Profile] = Field(min_length=1)
    policy: dict[str, Any] | None = Field(default=None, description="overrides of the global policy")

    _name: str = PrivateAttr(default="")
    _paths = field_validator("environment_file", "working_directory")(_absolute_path)

    @property
    def name(self) -> str:
        return self._name

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str) -> str:
        if not _UNIT.fullmatch(value) or len(value) > 255:
            raise ValueError(f"expected a unit name like 'sglang-glm5.service', got {value!r}")
        return value

    @field_validator("user", "group")
    @classmethod
    def _account(cls, value: str | None) -> str | None:
        if value is not None and not _USER.fullmatch(value):
            raise ValueError(f"expected a user or group name (or a numeric id), got {value!r}")
        return value

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        if not (_TEMPLATE.fullmatch(value) or (_PATH.fullmatch(value) and value.endswith(".j2"))):
            raise ValueError(f"expected a template file name ending in .j2 (or an absolute path), got {value!r}")
        return value


class Inventory(_Strict):
    hosts: dict[str, Host]
    models: dict[str, ModelPreset] = Field(default_factory=dict)
    deployments: dict[str, Deployment] = Field(default_factory=dict)
    policy: Policy = Field(default_factory=Policy)

    _empty = field_validator("models", "deployments", "policy", mode="before")(_empty_is_none)
    _source: str = PrivateAttr(default="<inventory>")
    _directory: str | None = PrivateAttr(default=None)

    @property
    def source(self) -> str:
        """The inventory file as it was named when loaded."""
        return self._source

    @property
    def directory(self) -> str | None:
        """The absolute directory of the inventory file (templates are looked up there first)."""
        return self._directory

    def deployment(self, name: str) -> Deployment:
        try:
            return self.deployments[name]
        except KeyError:
            known = ", ".join(sorted(self.deployments)) or "none"
            raise InputError(
                f"no deployment {name!r} in {self.source} (known: {known})",
                hint="`deployctl validate` lists the inventory's deployments",
            ) from None

    def host_of(self, deployment: str | Deployment) -> Host:
        return self.hosts[_deployment(self, deployment).host]


@dataclass(frozen=True)
class ResolvedProfile:
    """A profile after inheritance: every SGLang flag (without ``--``) and the profile's environment.

    ``flags`` holds, in command-line order, ``model-path`` and ``served-model-name`` from the preset, the
    preset's flags, the profile chain's flags, then ``port``. Values: ``True`` = bare switch, a list =
    one flag followed by several values, ``int``/``float`` for the flags deployctl type-checks, else the
    text as written. ``env`` is the profile's own environment (presets and inheritance applied); the
    unit adds ``PYTHONUNBUFFERED``, ``CUDA_HOME`` and, on simulated hosts, the hardware facts.
    """

    flags: dict[str, FlagValue]
    env: dict[str, str]


# ---------------------------------------------------------------------------------------------- API


def load_inventory(path: str | FsPath) -> Inventory:
    """Read and validate an inventory file. Raises InputError / InventoryInvalid (exit 2)."""
    name = str(path)
    try:
        text = FsPath(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"inventory file not found: {name}",
            hint="pass -i FILE, set DEPLOYCTL_INVENTORY, or create /etc/deployctl/inventory.yaml",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read inventory {name}: {exc}") from None
    inventory = parse_inventory(text, name)
    inventory._directory = str(FsPath(path).resolve().parent)
    return inventory


def parse_inventory(text: str, file: str = "<inventory>") -> Inventory:
    """Validate inventory YAML text; ``file`` is only used to name the source in problems."""
    try:
        marked = load_marked(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        detail = " ".join(part for part in (exc.context, exc.problem) if part)
        raise InventoryInvalid(file, [Problem(file, line, "(yaml)", f"not valid YAML: {detail}")]) from None
    except yaml.YAMLError as exc:
        raise InventoryInvalid(file, [Problem(file, 1, "(yaml)", f"not valid YAML: {exc}")]) from None

    problems = [Problem(file, line, _dotted(path), message) for line, path, message in marked.problems]
    if not isinstance(marked.data, dict):
        what = "empty" if marked.data is None else f"a {type(marked.data).__name__}, not a mapping"
        problems.append(Problem(file, 1, "(file)", f"the inventory is {what}; expected hosts:, models:, deployments:"))
        raise InventoryInvalid(file, problems)

    inventory: Inventory | None = None
    try:
        inventory = Inventory.model_validate(marked.data)
    except ValidationError as exc:
        problems += _pydantic_problems(exc, marked, file, Inventory, ())
    checks = _Checks(marked, file)
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
        raise InputError(f"deployment {dep.name!r} has no profile {profile!r} (known: {known})")
    preset = inv.models[dep.model]
    chain = [dep.profiles[name] for name in reversed(_chain(dep.profiles, profile))]
    flags: dict[str, Any] = {"model-path": preset.path}
    if preset.served_name is not None:
        flags["served-model-name"] = preset.served_name
    flags = _layered([flags, preset.flags, *(p.flags for p in chain)])
    flags = {name: value for name, value in flags.items() if value is not False}
    flags["port"] = dep.port
    env = _layered([preset.env, *(p.env for p in chain)])
    return ResolvedProfile(flags=flags, env=env)


def deployment_policy(inv: Inventory, deployment: str | Deployment) -> Policy:
    """The global policy with the deployment's ``policy:`` block laid over it (mappings merge deeply)."""
    dep = _deployment(inv, deployment)
    if not dep.policy:
        return inv.policy
    return Policy.model_validate(_deep_merge(inv.policy.model_dump(), dep.policy))


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


def _layered(layers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Later layers override earlier ones; ``None`` removes; an overridden key keeps its position."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
    return out


def _deep_merge(base: Mapping[Any, Any], over: Mapping[Any, Any]) -> dict[Any, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _dotted(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else f".{_printable(str(part))}"
    return text.lstrip(".") or "(file)"


def _printable(text: str) -> str:
    """A key as it can be shown on one line of a terminal or mail (control characters escaped)."""
    return "".join(c.encode("unicode_escape").decode("ascii") if forbidden_character(c) else c for c in text)


def _unique(problems: list[Problem]) -> list[Problem]:
    return sorted(set(problems))


def _normalized(inventory: Inventory, checks: "_Checks", file: str) -> Inventory:
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


# ------------------------------------------------------------------------------ pydantic → Problem


def _pydantic_problems(
    exc: ValidationError, marked: MarkedYaml, file: str, root: type[BaseModel], prefix: tuple[Any, ...]
) -> list[Problem]:
    problems = []
    errors = exc.errors()
    # A misspelt required key is one mistake: say "did you mean" on the typo, not also "missing" on the key.
    misspelt = {tuple(e["loc"][:-1]) + (guess,) for e in errors if e["type"] == "extra_forbidden"
                for guess in difflib.get_close_matches(str(e["loc"][-1]), _fields_at(root, tuple(e["loc"][:-1])), n=1)}
    for err in errors:
        loc = prefix + tuple(err["loc"])
        value = err.get("input")
        if isinstance(value, str) and forbidden_character(value):
            continue  # reported once, as a control character, by the second pass
        if err["type"] == "missing" and tuple(err["loc"]) in misspelt:
            continue
        problems.append(Problem(file, marked.line_of(loc), _dotted(loc), _message(err, root, tuple(err["loc"]))))
    return problems


def _show(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


_TYPE_MESSAGES = {
    "int_type": "expected an integer", "int_parsing": "expected an integer", "int_from_float": "expected an integer",
    "float_type": "expected a number", "float_parsing": "expected a number",
    "bool_type": "expected true or false", "bool_parsing": "expected true or false",
    "string_type": "expected a string", "dict_type": "expected a mapping", "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping", "list_type": "expected a list",
}


def _message(err: Mapping[str, Any], root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        allowed = _fields_at(root, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        guess = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key{guess} (allowed here: {', '.join(allowed)})"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {_show(err.get('input'))}"
    message = str(err["msg"])
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if "input" in err and not isinstance(err["input"], (dict, list)):
        return f"{message[:1].lower()}{message[1:]}, got {_show(err['input'])}"
    return message[:1].lower() + message[1:]


def _fields_at(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed in the mapping at ``loc`` (walks the model annotations)."""
    current: Any = root
    for part in loc:
        current = _unoptional(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return []
            current = field.annotation
        elif typing.get_origin(current) in (dict, list):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _unoptional(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unoptional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


# ------------------------------------------------------------------------------ semantic checks


class _Checks:
    """The second pass: meaning, on the raw parsed data (tolerant of whatever pass 1 rejected)."""

    def __init__(self, marked: MarkedYaml, file: str) -> None:
        self.marked = marked
        self.file = file
        self.problems: list[Problem] = []
        # (section path) → checked flags/env mapping, for the models after validation.
        self.normalized: dict[tuple[Any, ...], dict[str, Any]] = {}

    def add(self, path: tuple[Any, ...], message: str) -> None:
        self.problems.append(Problem(self.file, self.marked.line_of(path), _dotted(path), message))

    def run(self) -> None:
        data = self.marked.data
        self._control_characters(data, ())
        hosts = _mapping(data.get("hosts"))
        models = _mapping(data.get("models"))
        for section, entries in (("hosts", hosts), ("models", models), ("deployments", _mapping(data.get("deployments")))):
            self._names(entries, (section,))
        for name, host in hosts.items():
            host = _mapping(host)
            if not host.get("simulated") and host.get("python") is None:
                self.add(("hosts", name), "python: required for a host that is not simulated (the SGLang venv's interpreter)")
        for name, preset in models.items():
            preset = _mapping(preset)
            self._flags(("models", name, "flags"), preset.get("flags"))
            self._env(("models", name, "env"), preset.get("env"))
        seen_units: dict[tuple[Any, Any], str] = {}
        seen_ports: dict[tuple[Any, Any], str] = {}
        for name, dep in _mapping(data.get("deployments")).items():
            dep = _mapping(dep)
            self._deployment(name, dep, hosts, models, data.get("policy"))
            for seen, field in ((seen_units, "unit"), (seen_ports, "port")):
                key = (dep.get("host"), dep.get(field))
                if key[1] is None:
                    continue
                if key in seen:
                    self.add(("deployments", name, field),
                             f"{field} {key[1]!r} is already used by deployment {seen[key]!r} on host {key[0]!r}")
                else:
                    seen[key] = name

    # -- pieces

    def _control_characters(self, node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and (bad := forbidden_character(key)):
                    self.add(path + (key,), f"the key contains {bad}")
                self._control_characters(value, path + (key,))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                self._control_characters(item, path + (index,))
        elif isinstance(node, str) and (bad := forbidden_character(node)):
            self.add(path, f"contains {bad}, which may not appear in a unit file")

    def _names(self, entries: Mapping[Any, Any], path: tuple[Any, ...]) -> None:
        for name in entries:
            if isinstance(name, str) and forbidden_character(name):
                continue  # reported as a control character
            if not (isinstance(name, str) and _NAME.fullmatch(name)):
                self.add(path + (name,), "names are letters, digits and . _ - (starting with a letter or digit)")

    def _deployment(self, name: str, dep: Mapping[str, Any], hosts: Mapping[Any, Any],
                    models: Mapping[Any, Any], global_policy: Any) -> None:
        path = ("deployments", name)
        host, model = dep.get("host"), dep.get("model")
        # References into a section that is itself malformed would only repeat its problem.
        if isinstance(host, str) and isinstance(self.marked.data.get("hosts"), dict) and host not in hosts:
            self.add(path + ("host",), f"unknown host {host!r} (known: {', '.join(map(str, hosts)) or 'none'})")
        if isinstance(model, str) and isinstance(self.marked.data.get("models"), dict) and model not in models:
            self.add(path + ("model",), f"unknown model preset {model!r} (known: {', '.join(map(str, models)) or 'none'})")
        profiles = _mapping(dep.get("profiles"))
        self._names(profiles, path + ("profiles",))
        for pname, profile in profiles.items():
            profile = _mapping(profile)
            ppath = path + ("profiles", pname)
            self._flags(ppath + ("flags",), profile.get("flags"))
            self._env(ppath + ("env",), profile.get("env"))
            parent = profile.get("extends")
            if isinstance(parent, str) and parent not in profiles:
                self.add(ppath + ("extends",), f"unknown profile {parent!r} (known: {', '.join(map(str, profiles))})")
        self._inheritance(path, profiles, _mapping(models.get(model)) if isinstance(model, str) else {})
        if isinstance(dep.get("policy"), dict):
            self._policy(path, dep["policy"], global_policy)

    def _inheritance(self, path: tuple[Any, ...], profiles: Mapping[Any, Any], preset: Mapping[str, Any]) -> None:
        for start in profiles:
            chain = [start]
            while isinstance(parent := _mapping(profiles.get(chain[-1])).get("extends"), str) and parent in profiles:
                if parent in chain:
                    if parent == start:  # report each cycle once per member, at its own extends:
                        cycle = " -> ".join(map(str, chain + [parent]))
                        self.add(path + ("profiles", start, "extends"), f"inheritance cycle: {cycle}")
                    break
                chain.append(parent)
            else:
                self._aliases(path, list(reversed(chain)), profiles, preset)

    def _aliases(self, path: tuple[Any, ...], chain: list[Any], profiles: Mapping[Any, Any],
                 preset: Mapping[str, Any]) -> None:
        layers = [("preset", _mapping(preset.get("flags")))]
        layers += [(name, _mapping(_mapping(profiles[name]).get("flags"))) for name in chain]
        merged = _layered(layer for _, layer in layers)
        where = {flag: name for name, layer in layers for flag, value in layer.items() if value is not None}
        for group in ALIASES:
            present = [flag for flag in merged if flag in group]
            if len(present) > 1 and where.get(present[-1]) == chain[-1]:
                self.add(path + ("profiles", chain[-1], "flags", present[-1]),
                         f"the same SGLang option as {present[0]!r}; set it once (null removes an inherited one)")

    def _flags(self, path: tuple[Any, ...], flags: Any) -> None:
        out: dict[str, Any] = {}
        self.normalized[path] = out
        if not isinstance(flags, dict):
            return  # pass 1 reports a wrong type; None means no flags
        for name, value in flags.items():
            fpath = path + (name,)
            if isinstance(name, str) and forbidden_character(name):
                continue  # reported as a control character
            if not isinstance(name, str) or not _FLAG_NAME.fullmatch(name):
                hint = " (write flag names without the leading '--')" if str(name).startswith("-") else ""
                self.add(fpath, f"not a flag name{hint}: use letters, digits and - _ .")
                continue
            if name in RESERVED_FLAGS:
                self.add(fpath, f"not set here: {RESERVED_FLAGS[name]}")
                continue
            checked = self._flag_value(fpath, name, value)
            if checked is not _INVALID:
                out[name] = checked

    def _flag_value(self, path: tuple[Any, ...], name: str, value: Any) -> Any:
        if value is None:
            return None
        known = KNOWN_FLAGS.get(name)
        kind = known.kind if known else None
        if isinstance(value, bool):
            if kind in ("int", "float", "value"):
                return self._invalid(path, f"--{name} takes a value; true/false would pass or drop a bare switch")
            return value
        if kind == "switch":
            return self._invalid(path, f"--{name} is a switch: expected true (pass it), false or null, got {_show(value)}")
        if isinstance(value, dict):
            return self._invalid(path, "expected a value, true/false, or a list of values; got a mapping")
        if isinstance(value, list):
            if kind is not None:
                return self._invalid(path, f"--{name} takes a single value, got a list")
            if not value:
                return self._invalid(path, "an empty list passes nothing; use null to remove the flag")
            items = []
            for index, item in enumerate(value):
                if item is None or isinstance(item, (bool, dict, list)):
                    return self._invalid(path + (index,), f"list items must be plain values, got {_show(item)}")
                items.append(self._argument(path + (index,), item))
            if _INVALID in items:
                return _INVALID
            return items
        if kind == "int":
            if not isinstance(value, int):
                return self._invalid(path, f"expected an integer, got {_show(value)}")
            return self._in_range(path, value, known)
        if kind == "float":
            if not isinstance(value, (int, float)):
                return self._invalid(path, f"expected a number, got {_show(value)}")
            return self._in_range(path, value, known)
        return self._argument(path, value)

    def _argument(self, path: tuple[Any, ...], value: Any) -> Any:
        text = self._text(path, value)
        if text == ";":
            return self._invalid(path, "a lone ';' would split the command line in ExecStart=")
        return text

    def _in_range(self, path: tuple[Any, ...], value: float, known: Any) -> Any:
        low, high = known.minimum, known.maximum
        too_low = low is not None and (value <= low if known.exclusive_minimum else value < low)
        too_high = high is not None and value > high
        if too_low or too_high:
            bounds = []
            if low is not None:
                bounds.append(f"{'above' if known.exclusive_minimum else 'at least'} {low:g}")
            if high is not None:
                bounds.append(f"at most {high:g}")
            return self._invalid(path, f"expected a value {' and '.join(bounds)}, got {value!r}")
        return value

    def _env(self, path: tuple[Any, ...], env: Any) -> None:
        out: dict[str, Any] = {}
        self.normalized[path] = out
        if not isinstance(env, dict):
            return
        for name, value in env.items():
            epath = path + (name,)
            if isinstance(name, str) and forbidden_character(name):
                continue  # reported as a control character
            if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
                self.add(epath, "not an environment variable name (letters, digits, _; not starting with a digit)")
                continue
            if name in RESERVED_ENV:
                self.add(epath, f"not set here: {RESERVED_ENV[name]}")
                continue
            if value is None:
                out[name] = None
                continue
            if isinstance(value, (dict, list)):
                self.add(epath, f"expected a single value, got {_show(value)}")
                continue
            text = self._text(epath, value)
            if name == "PYTHONUNBUFFERED" and text != "1":
                self.add(epath, "deployctl always sets PYTHONUNBUFFERED=1 (the journal needs unbuffered output)")
                continue
            out[name] = text

    def _policy(self, path: tuple[Any, ...], override: Mapping[str, Any], global_policy: Any) -> None:
        base = global_policy if isinstance(global_policy, dict) else {}
        try:
            Policy.model_validate(_deep_merge(base, override))
        except ValidationError as exc:
            own = path + ("policy",)
            for err in exc.errors():
                loc = tuple(err["loc"])
                # Report what the override itself wrote; errors of the global block are reported there.
                if loc and not any(own + loc[:end] in self.marked.lines for end in range(len(loc), 0, -1)):
                    continue
                full = own + loc
                line = self.marked.lines.get(full) or self.marked.line_of(full)
                self.problems.append(Problem(self.file, line, _dotted(full), _message(err, Policy, loc)))
        except TypeError as exc:  # e.g. an unhashable key in a mapping
            self.add(path + ("policy",), str(exc))

    def _text(self, path: tuple[Any, ...], value: Any) -> str:
        """A scalar as the operator wrote it (YAML would turn 1.10 into 1.1 and 010 into 8)."""
        return self.marked.raw.get(path, str(value)) if not isinstance(value, str) else value

    def _invalid(self, path: tuple[Any, ...], message: str) -> object:
        self.add(path, message)
        return _INVALID


_INVALID = object()


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def located_problems(
    exc: ValidationError, marked: MarkedYaml, file: str, root: type[BaseModel], prefix: tuple[Any, ...] = ()
) -> list[Problem]:
    """pydantic's errors on ``root`` (found at ``prefix`` of ``marked``) as FILE:LINE problems with did-you-mean:
    the inventory's error path, for other YAML files (``deployctl judge --policy``)."""
    return _pydantic_problems(exc, marked, file, root, prefix)
