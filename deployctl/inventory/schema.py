"""The inventory's typed models: hosts, model presets, deployments and their profiles (pass 1 of validation).

pydantic checks structure here (unknown keys, wrong types, missing keys, bad names and paths); what the
values mean is checked by ``deployctl.inventory.checks``. Schema reference: ``inventory/README.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from deployctl.errors import InputError
from deployctl.inventory.policy import Policy

DEFAULT_TEMPLATE = "sglang.service.j2"


@dataclass(frozen=True)
class EnvRef:
    """A flag value written ``{env: NAME}``: systemd substitutes ``${NAME}`` from the deployment's
    EnvironmentFile when it starts the unit, so a secret (``--api-key``) stays out of the unit file."""

    name: str


FlagValue = Union[str, int, float, bool, list[str], EnvRef]

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
        dep = self.deployment(deployment) if isinstance(deployment, str) else deployment
        return self.hosts[dep.host]


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
