"""The command-line flags one SGLang version accepts, as data.

A :class:`FlagTable` is what ``python -m sglang.launch_server`` would build with argparse, reduced to
what an argparse-equivalent check needs: every option string, how many values it takes, its choices
and value type, whether it is deprecated. Tables come from :mod:`deployctl.preflight.extract` (read
from an installed SGLang's source) or from the JSON files shipped next to this module for the
versions the simulator impersonates.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from deployctl.preflight.versions import parse_version

# nargs as argparse stores it: None = exactly one value, 0 = a switch, "?"/"*"/"+" or a count.
Nargs = int | str | None


@dataclass(frozen=True)
class FlagSpec:
    option_strings: tuple[str, ...]
    dest: str
    action: str  # "store", "store_true", "BooleanOptionalAction", "DeprecatedStoreTrueAction", …
    nargs: Nargs
    value_type: str = "str"  # "str" | "int" | "float" | "json" | the name of a custom type function
    choices: tuple[Any, ...] | None = None  # None: any value
    choices_dynamic: bool = False  # choices exist but are computed at run time and were not resolved
    required: bool = False
    deprecated: str | None = None  # the replacement SGLang names, or "" when it names none

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0

    @property
    def name(self) -> str:
        """The long option string SGLang documents (the first ``--`` one)."""
        return next((o for o in self.option_strings if o.startswith("--")), self.option_strings[0])


@dataclass(frozen=True)
class FlagTable:
    sglang_version: str | None
    prog: str  # what argparse prefixes its errors with ("launch_server.py", "sglang serve")
    method: str  # how the table was obtained, for the report
    flags: tuple[FlagSpec, ...]
    allow_abbrev: bool = True  # SGLang never turns argparse's prefix matching off
    environment: tuple[str, ...] = ()  # the variables SGLang declares in sglang/srt/environ.py (Envs)
    _by_option: dict[str, FlagSpec] = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_option", {o: f for f in self.flags for o in f.option_strings})

    @property
    def option_strings(self) -> tuple[str, ...]:
        return tuple(self._by_option)

    def exact(self, option: str) -> FlagSpec | None:
        return self._by_option.get(option)

    def prefix_matches(self, option: str) -> list[str]:
        """Option strings argparse's ``allow_abbrev`` would consider for ``option`` (in parser order)."""
        if not self.allow_abbrev:
            return []
        return [o for o in self._by_option if o.startswith(option) and o.startswith("--")]

    def resolve(self, option: str) -> FlagSpec | None:
        """The flag ``option`` selects on the command line: exact, else its unique abbreviation."""
        spec = self.exact(option)
        if spec is not None:
            return spec
        matches = self.prefix_matches(option)
        return self._by_option[matches[0]] if len(matches) == 1 else None

    def to_json(self) -> str:
        data = {
            "sglang_version": self.sglang_version,
            "prog": self.prog,
            "method": self.method,
            "allow_abbrev": self.allow_abbrev,
            "environment": list(self.environment),
            "flags": [_spec_to_dict(f) for f in self.flags],
        }
        return json.dumps(data, indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> FlagTable:
        data = json.loads(text)
        return cls(
            sglang_version=data["sglang_version"],
            prog=data["prog"],
            method=data["method"],
            flags=tuple(_spec_from_dict(d) for d in data["flags"]),
            allow_abbrev=data.get("allow_abbrev", True),
            environment=tuple(data.get("environment", ())),
        )


def _spec_to_dict(spec: FlagSpec) -> dict[str, Any]:
    out = asdict(spec)
    out["option_strings"] = list(spec.option_strings)
    out["choices"] = None if spec.choices is None else list(spec.choices)
    # Keep the shipped JSON small: drop fields at their defaults.
    for key, default in (("value_type", "str"), ("choices", None), ("choices_dynamic", False),
                         ("required", False), ("deprecated", None)):
        if out[key] == default:
            del out[key]
    return out


def _spec_from_dict(data: dict[str, Any]) -> FlagSpec:
    choices = data.get("choices")
    return FlagSpec(
        option_strings=tuple(data["option_strings"]),
        dest=data["dest"],
        action=data["action"],
        nargs=data["nargs"],
        value_type=data.get("value_type", "str"),
        choices=None if choices is None else tuple(choices),
        choices_dynamic=data.get("choices_dynamic", False),
        required=data.get("required", False),
        deprecated=data.get("deprecated"),
    )


def shipped_versions() -> list[str]:
    """SGLang versions with a flag table shipped in the package (``flags-<version>.json``)."""
    names = (p.name for p in resources.files(__package__).iterdir())
    found = [n[len("flags-"):-len(".json")] for n in names if n.startswith("flags-") and n.endswith(".json")]
    return sorted(found, key=parse_version)


def shipped_table(version: str) -> FlagTable | None:
    """The shipped flag table of ``version`` (extracted from the real wheel), or None.

    Like the simulator's SGLANG_SIM_VERSION, a version names the shipped build it prefixes
    ("0.4.10" → "0.4.10.post2")."""
    names = shipped_versions()
    found = version if version in names else next((n for n in names if n.startswith(version + ".")), None)
    if found is None:
        return None
    path = resources.files(__package__) / f"flags-{found}.json"
    return FlagTable.from_json(path.read_text(encoding="utf-8"))
